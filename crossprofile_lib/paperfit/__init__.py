"""Beyond the paper: how much of it does one mechanism explain?

The reference decider (backend ``ledger``: social-proof weight ``s``, irrelevant-fact weight ``w``, decision noise
``1/beta``) is fitted by weighted least squares to the paper's published figures, per paper model: :mod:`.figures`
(which figures it can predict), :mod:`.ledger` (its choice probabilities, cached on a grid), :mod:`.predict` (figures
as linear maps of them), :mod:`.sampling` (the paper's sampling noise), :mod:`.fit` (the fit and its checks),
:mod:`.report` (:func:`fit_paper`). Every table is "the reference decider fitted to the paper's published numbers;
not a model run".
"""

from crossprofile_lib.paperfit.figures import NOT_A_MODEL_RUN, select_figures
from crossprofile_lib.paperfit.report import PaperFit, fit_paper, predict_at
