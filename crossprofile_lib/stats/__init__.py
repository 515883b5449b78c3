"""Inference over a results table (SPEC section 8): pure functions on arrays and frames.

* :mod:`.bootstrap` -- the template bootstrap (one resample index matrix per run);
* :mod:`.contrasts` -- the preregistered-contrast language (``prereg.yaml``) and Holm;
* :mod:`.tables` -- accuracy, cells, composition, relevance, label effects, headroom;
* :mod:`.netlead` -- accuracy by net lead, mixed and GEE logistic regressions;
* :mod:`.socialproof` -- the fitted social-proof weight (beyond the paper);
* :mod:`.analysis` -- everything for a run, per model (``crossprofile stats``).
"""

from .bootstrap import TemplateBootstrap, bootstrap_pvalue, count_matrix, percentile_interval, resample_indices
from .contrasts import PreregError, evaluate_contrasts, holm, load_prereg, parse_prereg

__all__ = ["TemplateBootstrap", "bootstrap_pvalue", "count_matrix", "percentile_interval", "resample_indices",
           "PreregError", "evaluate_contrasts", "holm", "load_prereg", "parse_prereg"]
