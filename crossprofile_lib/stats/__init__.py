"""Inference over a results table (SPEC section 8): pure functions on arrays and frames.

Nothing here imports the pipeline (runner, policies, backends, discussion, templates): the
social-proof fit's choice data are rebuilt by :mod:`crossprofile_lib.run.rebuild` and handed in.

* :mod:`.bootstrap` -- the template bootstrap (one resample index matrix per run; HiddenBench's
  task bootstrap uses it too);
* :mod:`.contrasts` -- the preregistered-contrast language and Holm; :mod:`.prereg` -- ``prereg.yaml``'s
  model (validated, a docstring per field) and its compiled contrasts;
* :mod:`.headroom` -- the headroom check (one :class:`~.headroom.Headroom` type for runs and HiddenBench);
* :mod:`.analysis_set` -- failed calls refused or dropped, the analysis set (formal templates),
  confirmatory or exploratory;
* :mod:`.tables` -- accuracy, cells (classic PSP, mirror SPS, pooled), composition, relevance,
  label effects;
* :mod:`.netlead` -- accuracy by net lead; template fixed-effects logit (primary), likelihood-ratio,
  mixed and GEE logits (robustness), their verdicts per family;
* :mod:`.separation` -- what the net-lead tests are fitted on: the copy-policy family, duplicate
  decisions dropped, separated levels reported apart;
* :mod:`.socialproof` -- the fitted social-proof weight (beyond the paper);
* :mod:`.cache` -- the fits stored under the run folder, keyed by the rows' hash;
* :mod:`.format` -- the one formatter of estimates, intervals and p-values;
* :mod:`.analysis` -- everything for a run, per model (``crossprofile stats``).
"""

from crossprofile_lib.stats.bootstrap import (
           TemplateBootstrap,
           bootstrap_pvalue,
           count_matrix,
           percentile_interval,
           resample_indices,
)
from crossprofile_lib.stats.contrasts import PreregError, evaluate_contrasts, holm, load_prereg, parse_prereg

__all__ = ["TemplateBootstrap", "bootstrap_pvalue", "count_matrix", "percentile_interval", "resample_indices",
           "PreregError", "evaluate_contrasts", "holm", "load_prereg", "parse_prereg"]
