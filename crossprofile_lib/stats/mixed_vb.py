"""The net-lead mixed fit's model: statsmodels' ``BinomialBayesMixedGLM`` with the ELBO gradient's per-template sums
by ``numpy.bincount`` instead of scipy.sparse: with one 0/1 random-intercept column per row it adds the same terms in
the same order, so every digit is the same (tests/test_stats_fast_paths.py); any other design uses statsmodels'
gradient. :func:`_grad_base` follows statsmodels 0.15's ``vb_elbo_grad_base`` (BSD-3-Clause, statsmodels developers)
line for line; only the two sparse products differ.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

import numpy as np


def _indicator_groups(exog_vc) -> Optional[np.ndarray]:
    """Each row's column when ``exog_vc`` (CSR) has exactly one stored 1.0 per row, else None."""
    ptr, data = np.asarray(exog_vc.indptr), np.asarray(exog_vc.data)
    if exog_vc.format != "csr" or len(ptr) != exog_vc.shape[0] + 1 or not np.all(np.diff(ptr) == 1) \
            or not np.all(data == 1.0):
        return None
    return np.asarray(exog_vc.indices, dtype=np.intp).copy()


@lru_cache(maxsize=None)
def model_class() -> type:
    """``TemplateInterceptMixedGLM`` (see the module doc), built on first use: statsmodels imports slowly."""
    from statsmodels.genmod.bayes_mixed_glm import BinomialBayesMixedGLM, glw

    class TemplateInterceptMixedGLM(BinomialBayesMixedGLM):
        @classmethod
        def from_formula(cls, formula, vc_formulas, data, vcp_p=1, fe_p=2):
            """``BinomialBayesMixedGLM.from_formula`` (which ignores ``cls``), with this class's gradient."""
            model = BinomialBayesMixedGLM.from_formula(formula, vc_formulas, data, vcp_p=vcp_p, fe_p=fe_p)
            model.__class__ = cls
            model._groups = _indicator_groups(model.exog_vc)
            model._exog_sq = model.exog ** 2
            model._k = model.exog_vc.shape[1]
            return model

        def _per_group(self, x: np.ndarray) -> np.ndarray:
            return np.bincount(self._groups, weights=x, minlength=self._k)

        def vb_elbo_grad_base(self, h, tm, tv, fep_mean, vcp_mean, vc_mean, fep_sd, vcp_sd, vc_sd):
            if self._groups is None:
                return super().vb_elbo_grad_base(h, tm, tv, fep_mean, vcp_mean, vc_mean, fep_sd, vcp_sd, vc_sd)
            return _grad_base(self, glw, h, tm, tv, fep_mean, vcp_mean, vc_mean, fep_sd, vcp_sd, vc_sd)

    return TemplateInterceptMixedGLM


def _grad_base(self, glw, h, tm, tv, fep_mean, vcp_mean, vc_mean, fep_sd, vcp_sd, vc_sd):
    """statsmodels' ``vb_elbo_grad_base`` with the two sparse products as per-template sums."""
    fep_mean_grad = fep_sd_grad = vcp_mean_grad = vcp_sd_grad = vc_mean_grad = vc_sd_grad = 0.0
    sd_of_row = vc_sd[self._groups]

    # p(y | vc) contributions
    for w in glw:
        z = self.rng * w[1]
        u = h(z) * np.exp(-(z**2) / 2) / np.sqrt(2 * np.pi)
        r = u / np.sqrt(tv)
        fep_mean_grad += w[0] * np.dot(u, self.exog)
        vc_mean_grad += w[0] * self._per_group(u)                       # exog_vc.T @ u
        fep_sd_grad += w[0] * z * np.dot(r, self._exog_sq * fep_sd)
        vc_sd_grad += w[0] * z * self._per_group(sd_of_row * r)         # exog_vc2.multiply(vc_sd).T @ r

    fep_mean_grad *= self.rng
    vc_mean_grad *= self.rng
    fep_sd_grad *= self.rng
    vc_sd_grad *= self.rng
    fep_mean_grad += np.dot(self.endog, self.exog)
    vc_mean_grad += self._per_group(np.asarray(self.endog, dtype=float))  # exog_vc.T @ endog

    (fep_mean_grad_i, fep_sd_grad_i, vcp_mean_grad_i, vcp_sd_grad_i, vc_mean_grad_i,
     vc_sd_grad_i) = self._elbo_grad_common(fep_mean, fep_sd, vcp_mean, vcp_sd, vc_mean, vc_sd)

    fep_mean_grad += fep_mean_grad_i
    fep_sd_grad += fep_sd_grad_i
    vcp_mean_grad += vcp_mean_grad_i
    vcp_sd_grad += vcp_sd_grad_i
    vc_mean_grad += vc_mean_grad_i
    vc_sd_grad += vc_sd_grad_i

    fep_sd_grad += 1 / fep_sd
    vcp_sd_grad += 1 / vcp_sd
    vc_sd_grad += 1 / vc_sd

    return (np.concatenate((fep_mean_grad, vcp_mean_grad, vc_mean_grad)),
            np.concatenate((fep_sd_grad, vcp_sd_grad, vc_sd_grad)))
