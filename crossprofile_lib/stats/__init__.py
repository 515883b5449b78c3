"""Inference over a results table (SPEC section 8): pure functions on arrays and frames, importing nothing of the
pipeline (the social-proof fit's choice data are rebuilt by :mod:`crossprofile_lib.run.rebuild` and handed in).

:mod:`.bootstrap` (template bootstrap), :mod:`.contrasts` / :mod:`.prereg` (preregistered contrasts, Holm),
:mod:`.headroom`, :mod:`.analysis_set` (failed calls, formal templates, status), :mod:`.tables`, :mod:`.netlead` /
:mod:`.separation` (net lead and its regressions), :mod:`.socialproof` (the fitted social-proof weight),
:mod:`.cache` (stored fits), :mod:`.format` (the one formatter), :mod:`.analysis` (``crossprofile stats``).
"""

from crossprofile_lib.stats.bootstrap import (
           TemplateBootstrap,
           bootstrap_pvalue,
           count_matrix,
           percentile_interval,
           resample_indices,
)
from crossprofile_lib.stats.contrasts import PreregError, evaluate_contrasts, holm, load_prereg, parse_prereg
