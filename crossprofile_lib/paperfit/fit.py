"""Weighted least-squares fit of the ledger's (s, w, beta) to published figures, and its checks. The loss is
``|H (figure(theta) - y)|^2 = r' V+ r`` with ``H' H = V+`` (:mod:`.sampling`'s covariance: a linked figure counts
once), minimised from the best grid point by ``scipy.optimize.least_squares`` over ``(s, w, log beta)``.

Figures are linear maps of pattern probabilities (:class:`FigureMatrix`): ``S = (A @ p).reshape(T, J)`` (``A``
counts each pattern's rows per template and term) and ``figure(W) = ((W @ S) / (W @ N)) @ C`` for a template count
row ``W``: the pooled cell means of :func:`crossprofile_lib.stats.contrasts.evaluate_contrasts`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.optimize import least_squares

from crossprofile_lib.paperfit.figures import Figure
from crossprofile_lib.paperfit.ledger import LedgerDesign, grid_points, target_probability_diff
from crossprofile_lib.stats.contrasts import Prereg, evaluate_contrasts, row_mask

PARAMS = ("social_proof", "irrelevant_weight", "inverse_temperature")
#: bounds of (s, w, beta) for the fit (s >= -0.3 keeps 1 + s*(n-1) > 0 for 4 speakers)
BOUNDS = ((-0.3, 5.0), (-3.0, 3.0), (0.02, 50.0))
_LO = np.array([BOUNDS[0][0], BOUNDS[1][0], math.log(BOUNDS[2][0])])
_HI = np.array([BOUNDS[0][1], BOUNDS[1][1], math.log(BOUNDS[2][1])])


def combine(means: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``means @ C`` (term means ``(..., J)`` to figures ``(..., I)``), a figure NaN only where a term it reads
    (``C != 0``) is NaN: a term with no rows must not spread to every figure through ``NaN x 0``."""
    bad = np.isnan(means) @ (C != 0)
    return np.where(bad, np.nan, np.where(np.isnan(means), 0.0, means) @ C)


@dataclass
class FigureMatrix:
    refs: tuple[str, ...]
    units: tuple[str, ...]
    A: sparse.csr_matrix     # (T*J, P)
    N: np.ndarray            # (T, J)
    C: np.ndarray            # (J, I)
    reasons: tuple[str, ...]  # per figure: '' or why a term matches no rows

    @property
    def estimable(self) -> np.ndarray:
        return np.array([not r for r in self.reasons])

    def sums(self, p: np.ndarray) -> np.ndarray:
        """``(T, J)`` for ``p`` ``(P,)``; ``(T, J, G)`` for ``p`` ``(G, P)``."""
        return (self.A @ p.T).reshape(*self.N.shape, *p.shape[:-1])

    def predict(self, p: np.ndarray) -> np.ndarray:
        """Figures ``(I,)`` for pattern probabilities ``p`` ``(P,)``."""
        w = np.ones((1, len(self.units)))
        with np.errstate(invalid="ignore", divide="ignore"):
            return combine((w @ self.sums(p)) / (w @ self.N), self.C)[0]


def term_masks(design: LedgerDesign, figures: Sequence[Figure]) -> list[tuple[int, int, np.ndarray, str, float, str]]:
    """Every term of the ``figures``, in order: ``(figure index, term index, row mask, outcome, coefficient, why it
    matches no rows or '')``."""
    out = []
    for i, f in enumerate(figures):
        for k, t in enumerate(f.contrast.terms):
            m, why = row_mask(design.rows, t.where, f.ref, f"measure.terms[{k}].where")
            out.append((i, k, np.asarray(m, dtype=bool), f.outcome, f.contrast.scale * t.weight, why))
    return out


def figure_matrix(design: LedgerDesign, figures: Sequence[Figure]) -> FigureMatrix:
    """Build the map for decision figures (outcome ``correct`` or ``chose_decoy``)."""
    units = design.units
    unit = design.rows["template_id"].astype(str).map({u: i for i, u in enumerate(units)}).to_numpy()
    terms = term_masks(design, figures)
    T, J = len(units), len(terms)                          # one column per term
    N, C = np.zeros((T, J)), np.zeros((J, len(figures)))
    ri, ci, why = [], [], [[] for _ in figures]
    for j, (i, k, m, outcome, coef, reason) in enumerate(terms):
        if reason:
            why[i].append(f"term {k}: {reason}")
        idx = np.flatnonzero(m)
        ri.append(unit[idx] * J + j)
        ci.append(design.pattern[outcome][idx])
        np.add.at(N[:, j], unit[idx], 1.0)
        C[j, i] = coef
    ri, ci = np.concatenate(ri), np.concatenate(ci)
    A = sparse.csr_matrix((np.ones(len(ri)), (ri, ci)), shape=(T * J, design.Xp.shape[0]))
    return FigureMatrix(tuple(f.ref for f in figures), units, A, N, C, tuple("; ".join(w) for w in why))


def evaluate_figures(df: pd.DataFrame, figures: Sequence[Figure], boot) -> pd.DataFrame:
    """Each figure's measure on a results-like table with its template-bootstrap interval."""
    pr = Prereg(tuple(f.contrast for f in figures), {}, source="data/paper_figures.yaml")
    return evaluate_contrasts(df, pr, boot)


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
        """Figures ``(G, I)`` at every grid point, or ``(B, G, I)`` for count rows ``W`` ``(B, T)``."""
        w = np.ones((1, len(self.fm.units))) if W is None else np.atleast_2d(W)
        with np.errstate(invalid="ignore", divide="ignore"):
            num = np.einsum("bt,tjg->bgj", w, self.S_grid)
            out = combine(num / (w @ self.fm.N)[:, None, :], self.fm.C)
        return out[0] if W is None else out

    def predict(self, theta, W: Optional[np.ndarray] = None) -> np.ndarray:
        """Figures ``(I,)`` at ``theta`` = (s, w, beta) (for one count row ``W`` ``(T,)`` if given)."""
        p = target_probability_diff(self._D, np.asarray(theta, dtype=float))
        S = (self._A @ p).reshape(self.fm.N.shape)
        w = np.ones(len(self.fm.units)) if W is None else np.asarray(W, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return combine((w @ S) / (w @ self.fm.N), self.fm.C)

    def fit(self, y: np.ndarray, used: np.ndarray, W: Optional[np.ndarray] = None,
            start: Optional[Sequence[float]] = None, fixed: Optional[tuple[int, float]] = None,
            H: Optional[np.ndarray] = None) -> dict:
        """Least-squares ``theta`` for paper values ``y`` on the ``used`` figures, residuals whitened by ``H`` (None:
        unweighted); ``fixed=(k, value)`` holds parameter k; ``start`` skips the grid search."""
        used = np.asarray(used, dtype=bool)
        yu = np.asarray(y, dtype=float)[used]
        Hm = np.eye(int(used.sum())) if H is None else np.asarray(H, dtype=float)
        if start is None:
            gp = self.pred_grid if W is None else self.grid_predictions(W[None])[0]
            loss = np.sum((np.nan_to_num(gp[:, used] - yu, nan=1e3) @ Hm.T) ** 2, axis=1)
            if fixed is not None:   # grid points nearest the fixed value
                d = np.abs(self.grid[:, fixed[0]] - fixed[1])
                loss = np.where(d <= d.min() + 1e-12, loss, np.inf)
            start = self.grid[int(np.argmin(loss))]
        z0 = np.clip(np.array([start[0], start[1], math.log(start[2])]), _LO, _HI)     # fitted in (s, w, log beta)
        free = [k for k in range(3) if fixed is None or k != fixed[0]]

        def full(zf):
            z = z0.copy()
            z[free] = zf
            if fixed is not None:
                z[fixed[0]] = fixed[1] if fixed[0] < 2 else math.log(fixed[1])
            return z

        w1 = (np.ones(len(self.fm.units)) if W is None else np.asarray(W, dtype=float))[None]
        cache = {}

        def fun(zf):    # the residuals; their Jacobian comes with them and is kept for jac()
            pr, dpr = self.predict_batch_jac(full(zf)[None], w1)
            cache.update(z=np.array(zf), r=Hm @ np.nan_to_num(pr[0, used] - yu, nan=1e3),
                         J=Hm @ np.nan_to_num(dpr[0][np.ix_(used, free)]))
            return cache["r"]

        def jac(zf):
            if "z" not in cache or not np.array_equal(cache["z"], zf):
                fun(zf)
            return cache["J"]

        r = least_squares(fun, z0[free], jac=jac, bounds=(_LO[free], _HI[free]), method="trf", x_scale=1.0,
                          xtol=1e-10, ftol=1e-10, gtol=1e-10, max_nfev=400)
        z = full(r.x)
        th = np.array([z[0], z[1], math.exp(z[2])])
        at = [bool(min(abs(z[k] - _LO[k]), abs(z[k] - _HI[k])) < 1e-4) for k in range(3)]
        raw = self.predict(th, W)[used] - yu
        return dict(theta=th, loss=float(2 * r.cost), rmse=float(math.sqrt(np.nanmean(raw ** 2))) if len(raw) else 0.0,
                    at_bound=at, success=bool(r.success), nfev=int(r.nfev))

    def predict_batch(self, theta: np.ndarray, W: np.ndarray) -> np.ndarray:
        """``(B, I)``: row b's figures at ``theta[b]`` with count row ``W[b]`` (one sparse product)."""
        p = target_probability_diff(self._D, theta)                              # (B, P')
        S = (self._A @ p.T).reshape(*self.fm.N.shape, len(p))                   # (T, J, B)
        with np.errstate(invalid="ignore", divide="ignore"):
            return combine(np.einsum("bt,tjb->bj", W, S) / (W @ self.fm.N), self.fm.C)

    def predict_batch_jac(self, z: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Figures ``(B, I)`` at ``z[b]`` = (s, w, log beta) with count row ``W[b]`` and their exact Jacobian
        ``(B, I, 3)``: ``dp/dphi = -p^2 sum_k exp(v_k) D_k`` with ``v_k = phi . D_k``, ``phi = beta (1, s, w, w s)``."""
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
            pred = combine(np.einsum("bt,tjb->bj", W, S) / den, self.fm.C)
            dnum = np.einsum("bt,tjbk->bjk", W, dS) / den[:, :, None]
            jac = np.moveaxis(combine(np.moveaxis(dnum, 2, 1), self.fm.C), 1, 2)      # (B, I, 3)
        return pred, jac

    def refit_many(self, Y: np.ndarray, used, start, H=None, W: Optional[np.ndarray] = None
                   ) -> tuple[np.ndarray, np.ndarray, int]:
        """Refit every row of ``Y`` ``(B, I)`` (redrawn figures: the parametric bootstrap), or with ``W`` ``(B, T)``
        each template-resampled row, started at ``start``: ``theta`` ``(B, 3)``, the figures at each refit ``(B, I)``
        and how many refits stopped without converging."""
        th = np.empty((len(Y), 3))
        failed = 0
        for b in range(len(Y)):
            f = self.fit(Y[b], used, None if W is None else W[b], start=start, H=H)
            th[b] = f["theta"]
            failed += not f["success"]
        return th, self.predict_batch(th, np.ones((len(Y), len(self.fm.units))) if W is None else W), failed

    def leave_one_out(self, y, used, full: dict, V: Optional[np.ndarray] = None) -> np.ndarray:
        """``(I,)``: each used figure's prediction from a fit without it (weighted by ``V`` without it)."""
        used = np.asarray(used, dtype=bool)
        out = np.full(len(y), np.nan)
        for i in np.flatnonzero(used):
            u = used.copy()
            u[i] = False
            if u.sum() < 1:
                continue
            best = self.refine(y, u, full["theta"], None if V is None else whitener(V[np.ix_(u, u)]))
            out[i] = self.predict(best["theta"])[i]
        return out

    def refine(self, y, used, start, H=None) -> dict:
        """The better (lower loss; the first on a tie) of the fits from the best grid point and from ``start``."""
        return min((self.fit(y, used, H=H), self.fit(y, used, start=start, H=H)), key=lambda f: f["loss"])

    def profile(self, y, used, full: dict, k: int, values: Sequence[float], H=None) -> np.ndarray:
        """Minimum loss with parameter ``k`` held at each of ``values``, swept outwards from the estimate, each point
        starting at its neighbour's optimum."""
        values = np.asarray(values, dtype=float)
        out = np.full(len(values), np.nan)
        est = full["theta"][k]
        up = [i for i in np.argsort(values) if values[i] >= est]
        down = [i for i in np.argsort(values)[::-1] if values[i] < est]
        for order in (up, down):
            st = np.array(full["theta"], dtype=float)
            for i in order:
                st[k] = values[i]
                f = self.fit(y, used, start=st, fixed=(k, float(values[i])), H=H)
                out[i] = f["loss"]
                st = f["theta"].copy()
        return out


def whitener(V: np.ndarray, tol: float = 1e-8) -> np.ndarray:
    """``H`` ``(rank, I)`` with ``H' H = V+``, the pseudo-inverse of the covariance ``V`` ``(I, I)``."""
    lam, U = np.linalg.eigh((V + V.T) / 2)
    keep = lam > tol * max(lam.max(), 0.0) if len(lam) else np.zeros(0, dtype=bool)
    return (U[:, keep] / np.sqrt(lam[keep])).T


def recovery(fitter: Fitter, used: np.ndarray, truths: Sequence[Sequence[float]], rng: np.random.Generator,
             sampling, kappa: float, draws: int = 20, rounding: float = 0.1) -> list[dict]:
    """For each known ``theta``: the used figures redrawn ``draws`` times at the paper's noise and refitted;
    ``truth``, ``estimates`` ``(draws, 3)``, their median ``estimate`` and the median ``rmse``."""
    out = []
    for t in truths:
        t = np.asarray(t, dtype=float)
        pc, pd_ = sampling.proportions(fitter.design.probability(t))
        H = whitener(sampling.covariance(pc, pd_, kappa, used))
        Y = sampling.draw(pc, pd_, kappa, draws, rng, rounding)
        fits = [fitter.fit(Y[b], used, H=H) for b in range(draws)]
        est = np.array([f["theta"] for f in fits])
        out.append(dict(truth=t, estimates=est, estimate=np.median(est, axis=0),
                        rmse=float(np.median([f["rmse"] for f in fits]))))
    return out
