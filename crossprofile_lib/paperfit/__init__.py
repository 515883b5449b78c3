"""Beyond the paper: how much of it does one mechanism explain?

The reference decider (backend ``ledger``: kept evidence counted with a social-proof weight ``s`` per
extra speaker label, a weight ``w`` on irrelevant facts' tone, and decision noise ``1/beta``) is fitted
by weighted least squares to the paper's published figures (``data/paper_figures.yaml``), per paper model:

* :mod:`.figures`  which figures the ledger can predict, each a contrast of prereg.yaml's language
* :mod:`.ledger`   the ledger's choice probabilities on a task grid, analytically, cached on a grid
* :mod:`.predict`  figures as linear maps of those probabilities, for any template resample
* :mod:`.sampling` the paper's sampling noise: binomial variances at its n, linked figures, redraws
* :mod:`.fit`      weighted least squares (grid + scipy refine), parametric and template bootstrap refits,
                   leave-one-out, profiles, recovery
* :mod:`.report`   :func:`fit_paper`: every table at once

Every table it produces is "the reference decider fitted to the paper's published numbers; not a model run".
"""

from crossprofile_lib.paperfit.figures import NOT_A_MODEL_RUN, select_figures
from crossprofile_lib.paperfit.report import PaperFit, fit_paper, predict_at

__all__ = ["NOT_A_MODEL_RUN", "PaperFit", "fit_paper", "predict_at", "select_figures"]
