"""Beyond the paper: the fitted social-proof weight.

The reference decider (:mod:`crossprofile_lib.task.decision`) scores option o from the kept facts as
``sum polarity * w_f * (1 + s * (n_f - 1))`` (``w_f`` = 1 for relevant facts, ``w`` for irrelevant ones; ``n_f`` the
speakers a line's label reveals) and picks it with probability ``softmax(beta * score)``. Read as a **conditional
logit** over the options, its utility is

    u(o) = beta * (x0 + s * x1 + w * (x2 + s * x3))

over the kept facts about o: ``x0`` = sum of relevant polarities, ``x1`` = sum of relevant polarity * (n - 1), ``x2``
and ``x3`` the same for irrelevant facts. :func:`fit` finds the maximum-likelihood ``(s, w, beta)`` for any run's
decisions (an LLM's or the ledger's), :func:`fit_social_proof` adds template-bootstrap percentile intervals. ``s`` is
the paper's label-removal experiment as one number: the extra weight a fact gets per extra speaker label. ``beta`` is
bounded above (:data:`BOUNDS`); a deterministic decider (the default ledger) drives it to the bound, and the fit says
so. The features come from memories rebuilt from the run's configuration
(:func:`crossprofile_lib.run.rebuild.rebuild_choice_data`), handed in as :class:`ChoiceData`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from crossprofile_lib.stats.bootstrap import TemplateBootstrap

FEATURES = ("relevant", "relevant_x_extra_labels", "irrelevant", "irrelevant_x_extra_labels")
PARAMS = ("social_proof", "irrelevant_weight", "inverse_temperature")
#: bounds of (s, w, beta) for the optimiser
BOUNDS = ((-0.3, 20.0), (-5.0, 5.0), (1e-3, 50.0))
_LO, _HI = np.array(BOUNDS).T


@dataclass
class ChoiceData:
    """Decisions as a conditional-logit data set: ``X`` ``(n, K, 4)`` option features, ``choice`` ``(n,)`` chosen
    option index, ``template`` ``(n,)`` template ids, ``count`` ``(n,)`` multiplicity."""

    X: np.ndarray
    choice: np.ndarray
    template: np.ndarray
    count: np.ndarray

    def __len__(self) -> int:
        return int(self.X.shape[0])


def patterns(data: ChoiceData, units: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Decisions as distinct choice patterns (chosen option first, the others in a canonical order): ``Xp``
    ``(P, K, 4)`` and ``C`` ``(T, P)``, the decisions of template ``units[t]`` per pattern (a resample's weights are
    ``W[b] @ C``)."""
    n, K, F = data.X.shape
    pos = {u: i for i, u in enumerate(units)}
    unit = np.array([pos[str(t)] for t in data.template], dtype=np.int64)
    uniq, inv = unique_rows(canonical(data.X, data.choice))
    C = np.zeros((len(units), len(uniq)))
    np.add.at(C, (unit, inv.ravel()), 1.0)
    return uniq.reshape(-1, K, F), C


def canonical(X: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """``(n, K*F)``: each decision's features ``X`` ``(n, K, F)`` (small integers) with option ``chosen`` first and
    the others in a canonical (lexicographic) order."""
    n, K, F = X.shape
    rows = np.arange(n)
    others = np.stack([X[rows, (chosen + j) % K] for j in range(1, K)], axis=1)
    key = (others + 512.0) @ (1024.0 ** np.arange(F)[::-1])
    others = np.take_along_axis(others, np.argsort(key, axis=1, kind="stable")[:, :, None], axis=1)
    return np.concatenate([X[rows, chosen][:, None], others], axis=1).reshape(n, K * F)


def unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, axis=0, return_inverse=True)`` of a 2-d float array without NaN or -0.0, by ``np.lexsort``
    (the same arrays, without ``np.unique``'s slow structured-dtype sort)."""
    if a.shape[0] == 0:
        return a[:0], np.zeros(0, dtype=np.intp)
    order = np.lexsort(a.T[::-1])
    s = a[order]
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = (s[1:] != s[:-1]).any(axis=1)
    inv = np.empty(len(s), dtype=np.intp)
    inv[order] = np.cumsum(new) - 1
    return s[new], inv


def log_likelihood(theta: Sequence[float], Xp: np.ndarray, weight: np.ndarray) -> tuple[float, np.ndarray]:
    """Weighted log-likelihood of ``theta = (s, w, beta)`` and its gradient ``(3,)`` on patterns ``Xp``."""
    s, w, beta = theta
    phi = np.array([beta, beta * s, beta * w, beta * w * s])
    u = Xp @ phi                                       # (P, K)
    m = u.max(axis=1, keepdims=True)
    e = np.exp(u - m)
    Z = e.sum(axis=1)
    p = e / Z[:, None]
    ll = float(weight @ (u[:, 0] - m[:, 0] - np.log(Z)))
    g_phi = weight @ (Xp[:, 0] - np.einsum("pk,pkf->pf", p, Xp))   # (4,)
    J = np.array([[0.0, 0.0, 1.0], [beta, 0.0, s], [0.0, beta, w], [beta * w, beta * s, w * s]])
    return ll, g_phi @ J


DEFAULT_STARTS = ((0.0, 0.0, 1.0), (0.5, 0.5, 5.0))


def fit(Xp: np.ndarray, weight: np.ndarray, starts: Sequence[Sequence[float]] = DEFAULT_STARTS) -> dict:
    """Maximum-likelihood ``(s, w, beta)`` (L-BFGS-B within :data:`BOUNDS`, best of ``starts``)."""
    from scipy.optimize import minimize  # lazy: scipy costs a second to import; only the fit needs it

    def nll(th):
        ll, g = log_likelihood(th, Xp, weight)
        return -ll, -g

    best = min((minimize(nll, np.asarray(st, dtype=float), jac=True, method="L-BFGS-B", bounds=BOUNDS) for st in starts),
               key=lambda r: r.fun)
    th = best.x
    at = [bool(min(abs(th[i] - BOUNDS[i][0]), abs(th[i] - BOUNDS[i][1])) < 1e-6 * max(1, abs(th[i])))
          for i in range(3)]
    return dict(theta=th, log_likelihood=-float(best.fun), n=float(weight.sum()), converged=bool(best.success),
                at_bound=at)


def _derivs(th: np.ndarray, Xp: np.ndarray, Wp: np.ndarray, hess: bool = True):
    """Log-likelihood ``(b,)``, gradient ``(b, 3)`` and Hessian ``(b, 3, 3)`` for a batch of
    parameter rows ``th`` ``(b, 3)`` and pattern weights ``Wp`` ``(b, P)``."""
    P, K, F = Xp.shape
    s, w, beta = th[:, 0], th[:, 1], th[:, 2]
    phi = np.stack([beta, beta * s, beta * w, beta * w * s], axis=1)          # (b, 4)
    # one (b, P) slice per option: reductions over the short option axis as K-1 elementwise
    # operations (numpy's axis reductions over a length-3 axis cost several times more)
    Xk = [np.ascontiguousarray(Xp[:, k, :]) for k in range(K)]                # K x (P, F)
    u = [phi @ x.T for x in Xk]                                               # K x (b, P)
    m = reduce(np.maximum, u)
    e = [np.exp(uk - m) for uk in u]
    Z = reduce(np.add, e)
    ll = np.einsum("bp,bp->b", Wp, u[0] - m - np.log(Z))
    if not hess:
        return ll, None, None
    wp = [Wp * ek / Z for ek in e]                                            # K x (b, P): weight * choice prob.
    xbar = sum((ek / Z)[:, :, None] * x[None] for ek, x in zip(e, Xk))        # (b, P, F)
    g_phi = Wp @ Xk[0] - sum(a @ x for a, x in zip(wp, Xk))                   # (b, F)
    second = sum(a @ (x[:, :, None] * x[:, None, :]).reshape(P, F * F) for a, x in zip(wp, Xk)).reshape(len(th), F, F)
    second -= np.matmul((Wp[:, :, None] * xbar).transpose(0, 2, 1), xbar)
    J = np.zeros((len(th), 4, 3))
    J[:, 0, 2] = 1.0
    J[:, 1, 0], J[:, 1, 2] = beta, s
    J[:, 2, 1], J[:, 2, 2] = beta, w
    J[:, 3, 0], J[:, 3, 1], J[:, 3, 2] = beta * w, beta * s, w * s
    g = np.einsum("bf,bft->bt", g_phi, J)
    H = -np.matmul(J.transpose(0, 2, 1), np.matmul(second, J))
    H[:, 0, 2] += g_phi[:, 1] + g_phi[:, 3] * w
    H[:, 1, 2] += g_phi[:, 2] + g_phi[:, 3] * s
    H[:, 0, 1] += g_phi[:, 3] * beta
    H[:, 2, 0], H[:, 2, 1], H[:, 1, 0] = H[:, 0, 2], H[:, 1, 2], H[:, 0, 1]
    return ll, g, H


def batched_newton(Xp: np.ndarray, Wp: np.ndarray, theta0: Sequence[float], max_iter: int = 50,
                   tol: float = 1e-8) -> tuple[np.ndarray, np.ndarray]:
    """Maximise the log-likelihood for every row of ``Wp`` ``(B, P)`` at once (damped Newton from ``theta0`` within
    :data:`BOUNDS`): ``theta`` ``(B, 3)`` and a converged flag ``(B,)``."""
    th = np.tile(np.asarray(theta0, dtype=float), (Wp.shape[0], 1))
    done = np.zeros(len(th), dtype=bool)
    for _ in range(max_iter):
        act = np.flatnonzero(~done)
        if not len(act):
            break
        ll, g, H = _derivs(th[act], Xp, Wp[act])
        with np.errstate(all="ignore"):
            try:
                d = -np.linalg.solve(H, g[:, :, None])[:, :, 0]
            except np.linalg.LinAlgError:
                d = np.full_like(g, np.nan)
        bad = ~np.isfinite(d).all(axis=1) | ((d * g).sum(axis=1) <= 0)
        d[bad] = g[bad] * 1e-3 / np.maximum(1.0, np.abs(g[bad]).max(axis=1, keepdims=True))
        t = np.ones(len(act))
        new = np.clip(th[act] + d, _LO, _HI)
        for _half in range(30):
            ll_new, _, _ = _derivs(new, Xp, Wp[act], hess=False)
            worse = ~(ll_new >= ll - 1e-12 * np.abs(ll))
            if not worse.any():
                break
            t[worse] /= 2
            new[worse] = np.clip(th[act][worse] + t[worse, None] * d[worse], _LO, _HI)
        step = np.abs(new - th[act]).max(axis=1)
        gain = ll_new - ll
        th[act] = new
        # settled: the step or the log-likelihood gain is negligible (a flat direction, e.g. a
        # near-deterministic decider's beta, stops here instead of creeping to the bound)
        done[act] = (step < tol * np.maximum(1.0, np.abs(new).max(axis=1))) | (
            (gain >= 0) & (gain < tol * np.maximum(1.0, np.abs(ll))) & ~worse)
    return th, done


#: beta at or above this makes a one-point score difference worth odds of e^10 (about 22,000:1)
DETERMINISTIC_BETA = 10.0
_CHUNK = 100


def fit_social_proof(data: ChoiceData, boot: TemplateBootstrap, n_resamples: Optional[int] = 1000) -> dict:
    """Fit ``(s, w, beta)`` with percentile intervals over the first ``n_resamples`` rows of ``boot`` (all when
    None), each refit warm-started at the full-data estimate (batched Newton, L-BFGS-B where it does not settle)."""
    if len(data) == 0:
        return dict(table=pd.DataFrame(), n_decisions=0, resamples=0, deterministic=False,
                    note="no decisions to fit")
    Xp, C = patterns(data, boot.units)
    full = fit(Xp, C.sum(axis=0))
    det = bool(full["theta"][2] >= DETERMINISTIC_BETA)
    B = refit = hits = 0
    lo = hi = p = math.nan
    if not det:   # deterministic: the likelihood is flat towards beta -> inf, no interval would mean anything
        B = boot.n_resamples if n_resamples is None else max(1, min(int(n_resamples), boot.n_resamples))
        draws = np.empty((B, 3))
        for c0 in range(0, B, _CHUNK):
            Wp = boot.weights[c0:min(c0 + _CHUNK, B)] @ C          # (b, P)
            th, ok = batched_newton(Xp, Wp, full["theta"])
            for i in np.flatnonzero(~ok):                          # the rare row Newton did not settle
                th[i] = fit(Xp, Wp[i], starts=(full["theta"],))["theta"]
                refit += 1
            draws[c0:c0 + _CHUNK] = th
        hits = (np.isclose(draws, _LO) | np.isclose(draws, _HI)).sum(axis=0)
        s = TemplateBootstrap(boot.units, boot.idx[:B], boot.level).summarize(full["theta"], draws, np.zeros(3))
        lo, hi, p = s["lo"], s["hi"], [s["p"][0], s["p"][1], math.nan]
    table = pd.DataFrame(dict(parameter=PARAMS, estimate=full["theta"], lo=lo, hi=hi, p=p, at_bound=full["at_bound"],
                              resamples_at_bound=hits))
    return dict(table=table, n_decisions=int(round(full["n"])), n_patterns=int(Xp.shape[0]), resamples=B,
                refit_resamples=refit, log_likelihood=full["log_likelihood"], converged=full["converged"],
                deterministic=det,
                note=(f"inverse temperature >= {DETERMINISTIC_BETA:g}: the decisions are (almost) deterministic in the "
                      "features; s and w are only bounded by them, not point-identified, so no bootstrap intervals are "
                      "given" if det else ""))
