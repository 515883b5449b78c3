"""The paper's sampling noise: how much each published figure could move by chance, and which figures are the same
information. The paper's decisions behind a term are this suite's design rows scaled by ``kappa`` (paper templates x
seeds / design templates x seeds). **Atoms**: design rows in exactly the same terms, each one multinomial draw of
``kappa * n_a`` decisions over (correct, decoy, third) at its mean probabilities (a proportion at 0 or 1 gets the
variance of half a decision), so terms sharing decisions share noise. Terms whose rows carry the same patterns in every
template are *aliased* to the first. **Linkage**: the rank of the map ``L`` from atom proportions to figures is the
number of independent figures; figures sharing a null vector of ``L`` form a linked group, counted once by the loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from crossprofile_lib.paperfit.figures import Figure
from crossprofile_lib.paperfit.fit import term_masks
from crossprofile_lib.paperfit.ledger import LedgerDesign

#: relative tolerance of the rank / pseudo-inverse (exact linear dependence, not near-dependence)
RANK_TOL = 1e-8


@dataclass
class Sampling:
    """The figures' sampling structure: ``n`` ``(A,)`` rows per atom, ``Pc``, ``Pd`` ``(A, P)`` pattern counts for
    target correct / decoy, ``L`` ``(2A, I)`` figures from atom proportions, ``n_term`` ``(I,)`` rows behind each
    figure's first term, ``aliases``."""

    refs: tuple[str, ...]
    n: np.ndarray
    Pc: sparse.csr_matrix
    Pd: sparse.csr_matrix
    L: np.ndarray
    n_term: np.ndarray
    aliases: tuple[str, ...]

    @property
    def n_atoms(self) -> int:
        return len(self.n)

    def proportions(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each atom's mean P(correct) and P(decoy) ``(A,)`` for pattern probabilities ``p`` ``(P,)``."""
        return (self.Pc @ p) / self.n, (self.Pd @ p) / self.n

    def figures(self, pc: np.ndarray, pd_: np.ndarray) -> np.ndarray:
        """Figures ``(..., I)`` from atom proportions ``(..., A)`` each."""
        return np.concatenate([pc, pd_], axis=-1) @ self.L

    def covariance(self, pc: np.ndarray, pd_: np.ndarray, kappa: float, used=None) -> np.ndarray:
        """Sampling covariance ``(I, I)`` of the (``used``) figures at atom proportions ``pc``, ``pd_``."""
        m = np.maximum(kappa * self.n, 1.0)
        eps = 0.5 / m
        c, d = np.clip(pc, eps, 1 - eps), np.clip(pd_, eps, 1 - eps)
        L = self.L if used is None else self.L[:, np.asarray(used, dtype=bool)]
        A = self.n_atoms
        Lc, Ld = L[:A], L[A:]
        vc, vd, cv = c * (1 - c) / m, d * (1 - d) / m, -c * d / m
        return (Lc.T * vc) @ Lc + (Ld.T * vd) @ Ld + (Lc.T * cv) @ Ld + (Ld.T * cv) @ Lc

    def draw(self, pc: np.ndarray, pd_: np.ndarray, kappa: float, size: int, rng: np.random.Generator,
             rounding: Optional[float] = 0.1) -> np.ndarray:
        """``(size, I)`` figures redrawn at the paper's sample, rounded to ``rounding`` as published (None: not)."""
        m = np.maximum(np.rint(kappa * self.n), 1).astype(np.int64)
        c = np.clip(pc, 0.0, 1.0)
        d = np.clip(pd_, 0.0, 1.0 - c)
        pv = np.stack([c, d, np.clip(1.0 - c - d, 0.0, 1.0)], axis=1)
        pv /= pv.sum(axis=1, keepdims=True)
        k = rng.multinomial(m, pv, size=(size, len(m)))                       # (size, A, 3)
        y = self.figures(k[:, :, 0] / m, k[:, :, 1] / m)
        return y if rounding is None else np.round(y / rounding) * rounding

    def linkage(self, used) -> dict:
        """Independent figures and linked groups among the ``used`` figures (see the module doc)."""
        used = np.flatnonzero(np.asarray(used, dtype=bool))
        L = self.L[:, used]
        if L.shape[1] == 0:
            return dict(n_figures=0, n_independent=0, groups=[])
        u, sv, vt = np.linalg.svd(L, full_matrices=True)
        tol = RANK_TOL * max(1.0, sv.max() if len(sv) else 0.0)
        rank = int((sv > tol).sum())
        null = vt[rank:]                                                      # (I_u - rank, I_u)
        # figures sharing a null vector are linked: connected components of the null vectors' supports
        edges = np.zeros((len(used), len(used)))
        linked = set()
        for v in null:
            s = np.flatnonzero(np.abs(v) > 1e-6)
            linked.update(s.tolist())
            edges[s[:1], s] = 1.0
        component = connected_components(sparse.csr_matrix(edges), directed=False)[1]
        groups: dict = {}
        for i in sorted(linked):
            groups.setdefault(component[i], []).append(self.refs[used[i]])
        return dict(n_figures=len(used), n_independent=rank, groups=list(groups.values()), null=null)


def _content_key(design: LedgerDesign, unit: np.ndarray, mask: np.ndarray) -> bytes:
    """The term's per-template multiset of (pattern for correct, for decoy): equal keys, equal predictions."""
    idx = np.flatnonzero(mask)
    a = np.stack([unit[idx], design.pattern["correct"][idx], design.pattern["chose_decoy"][idx]], axis=1)
    a = a[np.lexsort(a.T[::-1])]
    return a.astype(np.int64).tobytes()


def build_sampling(design: LedgerDesign, figures: Sequence[Figure]) -> Sampling:
    """Atoms, aliases and the figure map ``L`` for the decision ``figures`` on ``design``."""
    rows = design.rows
    pos = {u: i for i, u in enumerate(design.units)}
    unit = rows["template_id"].astype(str).map(pos).to_numpy()
    terms = term_masks(design, figures)
    # aliases: a term whose content equals an earlier term's (but whose rows differ) takes that term's rows
    first: dict = {}
    masks, aliases = [], []
    for i, k, m, *_ in terms:
        key = _content_key(design, unit, m) if m.any() else b""
        if key in first and not np.array_equal(masks[first[key][0]], m):
            j, ref = first[key]
            aliases.append(f"{figures[i].ref} term {k} predicts as {ref} (same choice patterns in every template)")
            masks.append(masks[j])
        else:
            first.setdefault(key, (len(masks), f"{figures[i].ref} term {k}"))
            masks.append(m)
    # atoms: rows with the same membership over the distinct masks
    seen: dict = {}
    which = [seen.setdefault(m.tobytes(), (len(seen), m))[0] for m in masks]
    distinct = [m for _, m in seen.values()]
    M = np.stack(distinct, axis=1) if distinct else np.zeros((len(rows), 0), dtype=bool)    # (n, D)
    inany = M.any(axis=1)
    sig = np.packbits(M[inany], axis=1)
    _, atom = np.unique(sig, axis=0, return_inverse=True)
    atom = atom.ravel()
    A = int(atom.max()) + 1 if len(atom) else 0
    ridx = np.flatnonzero(inany)
    n = np.bincount(atom, minlength=A).astype(float)
    P = design.Xp.shape[0]
    Pc = sparse.csr_matrix((np.ones(len(ridx)), (atom, design.pattern["correct"][ridx])), shape=(A, P))
    Pd = sparse.csr_matrix((np.ones(len(ridx)), (atom, design.pattern["chose_decoy"][ridx])), shape=(A, P))
    # each distinct mask as atom weights: member[a, d] = atom a lies in mask d
    member = np.zeros((A, len(distinct)))
    Ma = M[ridx]                                                          # (rows in any, D)
    for d in range(len(distinct)):
        member[np.unique(atom[Ma[:, d]]), d] = 1.0
    L = np.zeros((2 * A, len(figures)))
    n_term = np.full(len(figures), np.nan)
    for (i, k, _, outcome, coef, _), d in zip(terms, which):
        w = member[:, d] * n
        tot = w.sum()
        if tot == 0:
            continue
        off = 0 if outcome == "correct" else A
        L[off:off + A, i] += coef * w / tot
        if k == 0:
            n_term[i] = tot
    return Sampling(tuple(f.ref for f in figures), n, Pc, Pd, L, n_term, tuple(aliases))
