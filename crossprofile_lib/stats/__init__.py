"""Inference over a results table (SPEC section 8): pure functions on arrays and frames, importing nothing of the
pipeline (the social-proof fit's choice data are rebuilt by :mod:`crossprofile_lib.run.rebuild` and handed in).
"""

from crossprofile_lib.stats.bootstrap import (
           TemplateBootstrap,
           bootstrap_pvalue,
           count_matrix,
           percentile_interval,
           resample_indices,
)
from crossprofile_lib.stats.contrasts import PreregError, evaluate_contrasts, holm, load_prereg, parse_prereg
