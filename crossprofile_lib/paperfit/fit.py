"""Least-squares fit of the ledger's (s, w, beta) to published figures, and its checks.

Loss for a model column with paper values ``y`` on figures ``used``:

    L(theta) = sum_i (figure_i(theta) - y_i)^2          (percentage points or points, unscaled)

Minimised in two steps: the best point of the cached coarse grid (:data:`.ledger.GRID`), then
``scipy.optimize.least_squares`` (trust-region reflective, bounded by :data:`BOUNDS`) over
``(s, w, log beta)`` from there. A template-bootstrap refit uses the resample's count row ``W`` in
every figure's pooled means (the paper's values stay fixed: the interval says how much the fit
depends on which templates the suite happens to have). Also here: leave-one-figure-out predictions,
the loss profile of each parameter (identification) and a recovery check (fit figures the ledger
itself generated at known parameters, rounded to the paper's 0.1).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
from scipy.optimize import least_squares

from crossprofile_lib.paperfit.ledger import LedgerDesign, grid_points, target_probability_diff
from crossprofile_lib.paperfit.predict import FigureMatrix

PARAMS = ("social_proof", "irrelevant_weight", "inverse_temperature")
#: bounds of (s, w, beta) for the fit (s >= -0.3 keeps 1 + s*(n-1) > 0 for 4 speakers)
BOUNDS = ((-0.3, 5.0), (-3.0, 3.0), (0.02, 50.0))
_LO = np.array([BOUNDS[0][0], BOUNDS[1][0], math.log(BOUNDS[2][0])])
_HI = np.array([BOUNDS[0][1], BOUNDS[1][1], math.log(BOUNDS[2][1])])


def _theta(z) -> np.ndarray:
    return np.array([z[0], z[1], math.exp(z[2])])


def _z(theta) -> np.ndarray:
    return np.clip(np.array([theta[0], theta[1], math.log(theta[2])]), _LO, _HI)


class Fitter:
    """Fits on one design and one set of figures (``fm``); grid predictions are precomputed."""

    def __init__(self, design: LedgerDesign, fm: FigureMatrix):
        self.design, self.fm = design, fm
        self.grid = grid_points(design.grid)                     # (G, 3)
        self.S_grid = fm.sums(design.p_grid)                     # (T, J, G)
        # only the patterns some figure reads: their feature differences and columns of A
        cols = np.unique(fm.A.indices)
        Xp = design.Xp[cols]
        self._D = Xp[:, 1:, :] - Xp[:, :1, :]
        self._A = fm.A[:, cols].tocsr()
        self.pred_grid = self.grid_predictions()                 # (G, I)

    def grid_predictions(self, W: Optional[np.ndarray] = None) -> np.ndarray:
        """``(G, I)`` at every grid point, or ``(B, G, I)`` for count rows ``W`` ``(B, T)``."""
        w = np.ones((1, len(self.fm.units))) if W is None else np.atleast_2d(W)
        with np.errstate(invalid="ignore", divide="ignore"):
            num = np.einsum("bt,tjg->bgj", w, self.S_grid)
            out = (num / (w @ self.fm.N)[:, None, :]) @ self.fm.C
        return out[0] if W is None else out

    def predict(self, theta, W: Optional[np.ndarray] = None) -> np.ndarray:
        """Figures ``(I,)`` at ``theta`` = (s, w, beta) (for one count row ``W`` ``(T,)`` if given)."""
        p = target_probability_diff(self._D, np.asarray(theta, dtype=float))
        S = (self._A @ p).reshape(self.fm.N.shape)
        w = np.ones(len(self.fm.units)) if W is None else np.asarray(W, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return ((w @ S) / (w @ self.fm.N)) @ self.fm.C

    def fit(self, y: np.ndarray, used: np.ndarray, W: Optional[np.ndarray] = None,
            start: Optional[Sequence[float]] = None, fixed: Optional[tuple[int, float]] = None,
            grid_pred: Optional[np.ndarray] = None) -> dict:
        """Least-squares ``theta`` for paper values ``y`` ``(I,)`` on the figures where ``used``
        ``(I,)`` is True. ``fixed=(k, value)`` holds parameter k (a profile). ``start`` skips the
        grid search; ``grid_pred`` ``(G, I)`` is the grid for ``W`` when the caller batched it."""
        used = np.asarray(used, dtype=bool)
        yu = np.asarray(y, dtype=float)[used]
        if start is None:
            gp = self.pred_grid if W is None else (grid_pred if grid_pred is not None else self.grid_predictions(W[None])[0])
            loss = np.nansum((gp[:, used] - yu) ** 2, axis=1)
            if fixed is not None:   # grid points nearest the fixed value
                d = np.abs(self.grid[:, fixed[0]] - fixed[1])
                loss = np.where(d <= d.min() + 1e-12, loss, np.inf)
            start = self.grid[int(np.argmin(loss))]
        z0 = _z(start)
        free = [k for k in range(3) if fixed is None or k != fixed[0]]

        def full(zf):
            z = z0.copy()
            z[free] = zf
            if fixed is not None:
                z[fixed[0]] = fixed[1] if fixed[0] < 2 else math.log(fixed[1])
            return z

        w1 = (np.ones(len(self.fm.units)) if W is None else np.asarray(W, dtype=float))[None]

        def resid(zf):
            pr, jac = self.predict_batch_jac(full(zf)[None], w1)
            return np.nan_to_num(pr[0, used] - yu, nan=1e3), np.nan_to_num(jac[0][np.ix_(used, free)])

        cache = {}

        def fun(zf):
            cache["r"], cache["J"] = resid(zf)
            cache["z"] = np.array(zf)
            return cache["r"]

        def jac(zf):
            if "z" not in cache or not np.array_equal(cache["z"], zf):
                fun(zf)
            return cache["J"]

        r = least_squares(fun, z0[free], jac=jac, bounds=(_LO[free], _HI[free]), method="trf", x_scale=1.0,
                          xtol=1e-10, ftol=1e-10, gtol=1e-10, max_nfev=400)
        z = full(r.x)
        th = _theta(z)
        at = [bool(min(abs(z[k] - _LO[k]), abs(z[k] - _HI[k])) < 1e-4) for k in range(3)]
        return dict(theta=th, loss=float(2 * r.cost), rmse=float(math.sqrt(2 * r.cost / max(1, used.sum()))),
                    at_bound=at, success=bool(r.success), nfev=int(r.nfev))

    def predict_batch(self, theta: np.ndarray, W: np.ndarray) -> np.ndarray:
        """``(B, I)``: row b's figures at ``theta[b]`` with count row ``W[b]`` (one sparse product)."""
        p = target_probability_diff(self._D, theta)                              # (B, P')
        S = (self._A @ p.T).reshape(*self.fm.N.shape, len(p))                   # (T, J, B)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (np.einsum("bt,tjb->bj", W, S) / (W @ self.fm.N)) @ self.fm.C

    def predict_batch_jac(self, z: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Figures ``(B, I)`` at ``z[b]`` = (s, w, log beta) with count row ``W[b]``, and their exact
        Jacobian ``(B, I, 3)`` in z. With ``v_k = phi . D_k`` and ``p = 1 / (1 + sum_k exp(v_k))``:
        ``dp/dphi = -p^2 sum_k exp(v_k) D_k``, ``phi = beta (1, s, w, w s)``."""
        s, w, b = z[:, 0], z[:, 1], np.exp(z[:, 2])
        phi = np.stack([b, b * s, b * w, b * w * s], axis=1)                     # (B, 4)
        D = self._D                                                              # (P, K-1, 4)
        P, K1, F4 = D.shape
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(phi @ D.reshape(P * K1, F4).T).reshape(len(z), P, K1)
            p = 1.0 / (1.0 + e.sum(axis=2))                                      # (B, P)
            G = np.einsum("bpk,pkf->bpf", np.nan_to_num(e, posinf=0.0), D)       # (B, P, 4)
            dp_phi = -(p * p)[:, :, None] * G
        Jphi = np.zeros((len(z), 4, 3))
        Jphi[:, 1, 0], Jphi[:, 3, 0] = b, b * w
        Jphi[:, 2, 1], Jphi[:, 3, 1] = b, b * s
        Jphi[:, :, 2] = phi
        dp = np.einsum("bpf,bfj->bpj", dp_phi, Jphi)                             # (B, P, 3)
        T, J = self.fm.N.shape
        S = (self._A @ p.T).reshape(T, J, len(z))
        dS = (self._A @ dp.transpose(1, 0, 2).reshape(P, -1)).reshape(T, J, len(z), 3)
        with np.errstate(invalid="ignore", divide="ignore"):
            den = W @ self.fm.N                                                  # (B, J)
            pred = (np.einsum("bt,tjb->bj", W, S) / den) @ self.fm.C
            dnum = np.einsum("bt,tjbk->bjk", W, dS) / den[:, :, None]
            jac = np.einsum("bjk,ji->bik", dnum, self.fm.C)
        return pred, jac

    def bootstrap(self, y, used, full: dict, W: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Refit for every count row of ``W`` ``(B, T)``, each warm-started at the full-data estimate
        (:meth:`fit` with the exact Jacobian; a resample moves the optimum only a little). Returns
        ``theta`` draws ``(B, 3)``, the resampled predictions of every figure at each draw ``(B, I)``
        and how many refits stopped without converging."""
        th = np.empty((len(W), 3))
        failed = 0
        for b in range(len(W)):
            f = self.fit(y, used, W[b], start=full["theta"])
            th[b] = f["theta"]
            failed += not f["success"]
        return th, self.predict_batch(th, W), failed

    def leave_one_out(self, y, used, full: dict) -> np.ndarray:
        """``(I,)``: each used figure's prediction from a fit without it (NaN where not used)."""
        used = np.asarray(used, dtype=bool)
        out = np.full(len(y), np.nan)
        for i in np.flatnonzero(used):
            u = used.copy()
            u[i] = False
            if u.sum() < 1:
                continue
            gl = np.nansum((self.pred_grid[:, u] - np.asarray(y)[u]) ** 2, axis=1)
            cands = [self.grid[int(np.argmin(gl))], full["theta"]]
            fits = [self.fit(y, u, start=c) for c in cands]
            best = min(fits, key=lambda f: f["loss"])
            out[i] = self.predict(best["theta"])[i]
        return out

    def profile(self, y, used, full: dict, k: int, values: Sequence[float]) -> np.ndarray:
        """Minimum loss ``(len(values),)`` with parameter ``k`` held at each value (identification:
        a flat profile means the figures do not pin the parameter down). Continuation: the sweep
        runs outwards from the estimate, each point starting at its neighbour's optimum; a point
        whose loss falls below the full fit's is impossible and flags a better optimum elsewhere."""
        values = np.asarray(values, dtype=float)
        out = np.full(len(values), np.nan)
        est = full["theta"][k]
        up = [i for i in np.argsort(values) if values[i] >= est]
        down = [i for i in np.argsort(values)[::-1] if values[i] < est]
        for order in (up, down):
            st = np.array(full["theta"], dtype=float)
            for i in order:
                st[k] = values[i]
                f = self.fit(y, used, start=st, fixed=(k, float(values[i])))
                out[i] = f["loss"]
                st = f["theta"].copy()
        return out


def recovery(fitter: Fitter, used: np.ndarray, truths: Sequence[Sequence[float]], rng: np.random.Generator,
             rounding: float = 0.1) -> list[dict]:
    """Generate the used figures from the ledger at each known ``theta``, add noise at the paper's
    rounding (uniform within half a rounding step, then rounded to ``rounding``), refit, and return
    one dict per truth: ``truth``, ``estimate``, ``rmse`` of the refit, the noisy figures."""
    out = []
    for t in truths:
        clean = fitter.predict(np.asarray(t, dtype=float))
        noisy = np.round((clean + rng.uniform(-rounding / 2, rounding / 2, size=clean.shape)) / rounding) * rounding
        f = fitter.fit(noisy, used)
        out.append(dict(truth=np.asarray(t, dtype=float), estimate=f["theta"], rmse=f["rmse"], figures=noisy,
                        at_bound=f["at_bound"]))
    return out
