"""The paper's net-lead model fitted as the paper fits it (SPEC section 8): a random-intercept (template) logistic
regression by **maximum likelihood**, the template intercept integrated out by adaptive Gauss-Hermite quadrature
(``n_points = 1`` is the Laplace approximation), as ``lme4::glmer(..., nAGQ = n_points)`` does.

Model, for decision ``i`` of template ``j``::

    y_ij ~ Bernoulli(expit(x_ij . beta + b_j)),   b_j ~ N(0, sigma^2)

Marginal log-likelihood ``sum_j log L_j`` with ``L_j = integral prod_i p(y_ij | x_ij . beta + b) phi(b; 0, sigma) db``.
Each integral is taken at the mode ``b_j`` of its integrand ``g_j`` (Newton steps) with the curvature
``h_j = -g_j''(b_j)``: ``L_j ~ sqrt(2 / h_j) sum_k w_k exp(g_j(b_j + sqrt(2 / h_j) z_k) + z_k^2)`` over the
Gauss-Hermite nodes ``z_k`` and weights ``w_k``. The parameters ``(beta, log sigma)`` maximise it (L-BFGS-B,
``log sigma`` bounded to ``[-12, 5]``); the covariance is the inverse of the negative log-likelihood's
finite-difference Hessian there. Pure functions on arrays: ``X`` ``(n, p)``, ``y`` ``(n,)`` of 0/1, ``groups``
``(n,)`` of integer codes ``0 .. J-1``.

>>> rng = np.random.default_rng(0)
>>> g = np.repeat(np.arange(40), 30); x = rng.normal(size=g.size); X = np.column_stack([np.ones_like(x), x])
>>> y = (rng.random(g.size) < 1 / (1 + np.exp(-(0.5 + x + rng.normal(0, 1, 40)[g])))).astype(float)
>>> f = fit(X, y, g)
>>> bool(abs(f.beta[1] - 1) < 0.25), bool(0.5 < f.sigma < 1.6)
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: quadrature points per template (lme4's largest is 25; 15 agrees with 25 to about 1e-6 in the log-likelihood
#: on the suite's runs)
N_POINTS = 15
LOG_SIGMA_BOUNDS = (-12.0, 5.0)
_NEWTON_STEPS = 50


def _expit(x: np.ndarray) -> np.ndarray:
    from scipy.special import expit  # scipy inside the analysis' BLAS limit (stats/analysis.py)
    return expit(x)


def _loglik_rows(eta: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log p(y | eta) of a logistic model, elementwise, without overflow."""
    return y * eta - np.logaddexp(0.0, eta)


def modes(eta: np.ndarray, y: np.ndarray, groups: np.ndarray, n_groups: int, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Per template the mode ``b_j`` of ``g_j(b) = sum_i log p(y_ij | eta_ij + b) + log phi(b; 0, sigma)`` and the
    curvature ``h_j = -g_j''(b_j)`` (both ``(J,)``), by damped Newton steps (``g_j`` is strictly concave)."""
    b = np.zeros(n_groups)
    prec = 1.0 / sigma ** 2
    for _ in range(_NEWTON_STEPS):
        p = _expit(eta + b[groups])
        grad = np.bincount(groups, y - p, n_groups) - b * prec
        h = np.bincount(groups, p * (1 - p), n_groups) + prec
        step = np.clip(grad / h, -4.0, 4.0)
        b = b + step
        if np.max(np.abs(step)) < 1e-10:
            break
    p = _expit(eta + b[groups])
    return b, np.bincount(groups, p * (1 - p), n_groups) + prec


def loglik(beta: np.ndarray, log_sigma: float, X: np.ndarray, y: np.ndarray, groups: np.ndarray,
           n_points: int = N_POINTS) -> float:
    """The marginal log-likelihood by adaptive Gauss-Hermite quadrature with ``n_points`` per template."""
    n_groups = int(groups.max()) + 1
    sigma = float(np.exp(log_sigma))
    eta = X @ beta
    b, h = modes(eta, y, groups, n_groups, sigma)
    z, w = np.polynomial.hermite.hermgauss(n_points)
    scale = np.sqrt(2.0 / h)                                          # (J,)
    nodes = b[:, None] + scale[:, None] * z[None, :]                  # (J, K)
    rows = _loglik_rows(eta[:, None] + nodes[groups], y[:, None])     # (n, K)
    g = np.stack([np.bincount(groups, rows[:, k], n_groups) for k in range(n_points)], axis=1)
    g += -0.5 * (nodes / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)
    terms = g + z[None, :] ** 2 + np.log(w)[None, :]
    top = terms.max(axis=1)
    return float(np.sum(np.log(scale) + top + np.log(np.exp(terms - top[:, None]).sum(axis=1))))


@dataclass(frozen=True)
class MLFit:
    """A fitted model: ``beta`` ``(p,)``, ``sigma`` (template SD), ``cov`` ``(p+1, p+1)`` of ``(beta, log sigma)``
    (NaN where the Hessian is singular), the log-likelihood, whether the optimiser converged, the quadrature points
    and ``at_boundary`` (``log sigma`` at its lower bound: no template variance left to estimate)."""

    beta: np.ndarray
    sigma: float
    cov: np.ndarray
    llf: float
    converged: bool
    n_points: int
    at_boundary: bool
    message: str

    @property
    def se(self) -> np.ndarray:
        """Standard errors of ``beta`` (from ``cov``)."""
        d = np.diag(self.cov)[: len(self.beta)]
        return np.sqrt(np.where(d > 0, d, np.nan))


def _hessian(f, x: np.ndarray) -> np.ndarray:
    """Central finite-difference Hessian of ``f`` at ``x``."""
    k = len(x)
    step = 1e-4 * np.maximum(1.0, np.abs(x))
    H = np.empty((k, k))
    for i in range(k):
        for j in range(i, k):
            ei, ej = np.zeros(k), np.zeros(k)
            ei[i], ej[j] = step[i], step[j]
            H[i, j] = H[j, i] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)) / (4 * step[i] * step[j])
    return H


def _start(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Ordinary logistic regression by a few ridge-damped Newton steps (a starting point, not a result)."""
    beta = np.zeros(X.shape[1])
    for _ in range(25):
        p = _expit(X @ beta)
        H = X.T @ (X * (p * (1 - p))[:, None]) + 1e-6 * np.eye(X.shape[1])
        step = np.linalg.solve(H, X.T @ (y - p))
        beta = beta + np.clip(step, -5, 5)
        if np.max(np.abs(step)) < 1e-8:
            break
    return beta


def fit(X: np.ndarray, y: np.ndarray, groups: np.ndarray, n_points: int = N_POINTS) -> MLFit:
    """Maximum-likelihood fit of the random-intercept logit (see the module docstring)."""
    from scipy.optimize import minimize
    X, y = np.asarray(X, float), np.asarray(y, float)
    groups = np.asarray(groups)
    p = X.shape[1]

    def nll(theta):
        return -loglik(theta[:p], theta[p], X, y, groups, n_points)

    theta0 = np.append(_start(X, y), 0.0)
    bounds = [(None, None)] * p + [LOG_SIGMA_BOUNDS]
    res = minimize(nll, theta0, method="L-BFGS-B", bounds=bounds,
                   options=dict(maxiter=500, ftol=1e-13, gtol=1e-7, maxls=50))
    theta = res.x
    at_boundary = bool(theta[p] <= LOG_SIGMA_BOUNDS[0] + 1e-6)
    H = _hessian(nll, theta)
    if at_boundary:  # sigma is not estimated there: the fixed effects' covariance alone
        H = H[:p, :p]
    try:
        cov = np.linalg.inv(H)
        if not np.all(np.isfinite(cov)) or np.any(np.diag(cov) <= 0):
            raise np.linalg.LinAlgError("not positive definite")
    except np.linalg.LinAlgError:
        cov = np.full_like(H, np.nan)
    if at_boundary:
        full = np.full((p + 1, p + 1), np.nan)
        full[:p, :p] = cov
        cov = full
    return MLFit(beta=theta[:p], sigma=float(np.exp(theta[p])), cov=cov, llf=-float(res.fun),
                 converged=bool(res.success), n_points=n_points, at_boundary=at_boundary, message=str(res.message))
