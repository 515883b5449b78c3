"""Beyond the paper: the reference decider (``ledger``: social-proof weight ``s``, irrelevant-fact weight ``w``,
decision noise ``1/beta``) fitted by weighted least squares to the paper's published figures, per paper model; every
table is "the reference decider fitted to the paper's published numbers; not a model run".
"""

from crossprofile_lib.paperfit.figures import NOT_A_MODEL_RUN, select_figures
from crossprofile_lib.paperfit.report import PaperFit, fit_paper, predict_at, predict_grid
