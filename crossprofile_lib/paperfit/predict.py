"""Figures as linear maps of pattern probabilities, for any template resample.

With ``A`` ``(T*J, P)`` counting the rows of each pattern per template and term and ``N`` ``(T, J)`` the rows:
``S(theta) = (A @ p(theta)).reshape(T, J)`` and ``figure(theta; W) = ((W @ S) / (W @ N)) @ C`` (``C``: scale x
weight) for a template-bootstrap count row ``W`` (all ones for the point estimate): the pooled cell means of
:func:`crossprofile_lib.stats.contrasts.evaluate_contrasts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd
from scipy import sparse

from crossprofile_lib.paperfit.figures import Figure
from crossprofile_lib.paperfit.ledger import LedgerDesign
from crossprofile_lib.stats.contrasts import Prereg, evaluate_contrasts, row_mask


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
        T, J = self.N.shape
        if p.ndim == 1:
            return (self.A @ p).reshape(T, J)
        return (self.A @ p.T).reshape(T, J, len(p))

    def predict(self, p: np.ndarray, W: Optional[np.ndarray] = None) -> np.ndarray:
        """Figures ``(I,)`` for ``p`` ``(P,)`` and ``W`` None; ``(B, I)`` for ``W`` ``(B, T)``;
        ``(G, I)`` / ``(B, G, I)`` for ``p`` ``(G, P)``."""
        S = self.sums(p)
        w = np.ones((1, len(self.units))) if W is None else np.atleast_2d(W)
        with np.errstate(invalid="ignore", divide="ignore"):
            den = w @ self.N                                                     # (B, J)
            if p.ndim == 1:
                out = ((w @ S) / den) @ self.C                                   # (B, I)
            else:
                num = np.einsum("bt,tjg->bgj", w, S)
                out = (num / den[:, None, :]) @ self.C                          # (B, G, I)
        return out[0] if W is None else out


def figure_matrix(design: LedgerDesign, figures: Sequence[Figure]) -> FigureMatrix:
    """Build the map for decision figures (outcome ``correct`` or ``chose_decoy``)."""
    rows = design.rows
    units = design.units
    pos = {u: i for i, u in enumerate(units)}
    unit = rows["template_id"].astype(str).map(pos).to_numpy()
    T, P = len(units), design.Xp.shape[0]
    cols, cj, reasons = [], [], []
    for i, f in enumerate(figures):
        why = []
        for k, t in enumerate(f.contrast.terms):
            m, r = row_mask(rows, t.where, f.ref, f"measure.terms[{k}].where")
            if r:
                why.append(f"term {k}: {r}")
            cols.append((m, design.pattern[f.outcome]))
            cj.append((i, f.contrast.scale * t.weight))
        reasons.append("; ".join(why))
    J = len(cols)
    ri, ci = [], []
    N = np.zeros((T, J))
    for j, (m, pat) in enumerate(cols):
        idx = np.flatnonzero(m)
        ri.append(unit[idx] * J + j)
        ci.append(pat[idx])
        np.add.at(N[:, j], unit[idx], 1.0)
    ri, ci = np.concatenate(ri), np.concatenate(ci)
    A = sparse.csr_matrix((np.ones(len(ri)), (ri, ci)), shape=(T * J, P))
    C = np.zeros((J, len(figures)))
    for j, (i, c) in enumerate(cj):
        C[j, i] = c
    return FigureMatrix(tuple(f.ref for f in figures), units, A, N, C, tuple(reasons))


def expected_outcomes(design: LedgerDesign, theta) -> pd.DataFrame:
    """The design rows with ``correct`` / ``chose_decoy`` set to the ledger's choice probability at
    ``theta`` (the expected outcome of each decision): a results-like table for any statistic."""
    p = design.probability(np.asarray(theta, dtype=float))
    return design.rows.assign(**{k: p[design.pattern[k]] for k in design.pattern})


def evaluate_figures(df: pd.DataFrame, figures: Sequence[Figure], boot) -> pd.DataFrame:
    """Point estimate and template-bootstrap interval of each figure's measure on a results-like
    table (``evaluate_contrasts``; used for the parameter-free memory figures)."""
    pr = Prereg(tuple(f.contrast for f in figures), {}, source="data/paper_figures.yaml")
    return evaluate_contrasts(df, pr, boot)
