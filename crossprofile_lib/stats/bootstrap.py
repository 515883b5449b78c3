"""The template bootstrap (SPEC section 8): the template is the resampling unit.

Shapes: ``T`` templates (units), ``B`` resamples, ``J`` cells (a cell = the rows a filter selects, e.g. "policy R1,
budget 0.6, decoy shared").

One **resample index matrix** ``idx`` of shape ``(B, T)`` is drawn from an explicit :class:`numpy.random.Generator`
(row b lists the T templates drawn, with replacement, in resample b). It becomes a **count matrix** ``W`` ``(B, T)``:
``W[b, t]`` = how often template t was drawn in resample b. For a cell with per-template outcome sums ``S[:, j]`` and
row counts ``N[:, j]`` (both ``(T, J)``), the cell's mean in resample b is

    mean[b, j] = (W @ S)[b, j] / (W @ N)[b, j]

the pooled mean over the resampled rows, each template counted as often as it was drawn (the point estimate is the
same formula with every ``W`` entry 1). Every contrast and table of a run comes from the same ``W``, with two matrix
products: no Python loop over resamples.

**Percentile interval** (level 0.95): the 2.5% and 97.5% quantiles of the resampled statistic
(:func:`numpy.quantile`, linear interpolation).

**Two-sided bootstrap p-value** for the null value ``theta0`` (0 for a contrast)::

    p = min(1, 2 * min(1 + #{b: theta*_b <= theta0}, 1 + #{b: theta*_b >= theta0}) / (B + 1))

the smallest two-sided level at which the percentile interval excludes ``theta0``, with the usual +1 so that p is
never 0 (its floor is ``2 / (B + 1)``, 0.0002 at B = 10,000). Resamples in which a cell has no rows (a template set
that misses it) give NaN and are left out of that statistic's interval and p-value; their number is reported as
``n_undefined``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np

DEFAULT_RESAMPLES = 10_000
DEFAULT_LEVEL = 0.95


def resample_indices(n_units: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``(n_resamples, n_units)`` int array: unit indices drawn with replacement."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed))")
    if n_units < 1 or n_resamples < 1:
        raise ValueError(f"need at least one unit and one resample (got {n_units}, {n_resamples})")
    return rng.integers(0, n_units, size=(n_resamples, n_units))


def count_matrix(idx: np.ndarray, n_units: int) -> np.ndarray:
    """``(B, T)`` float array of how often each unit appears in each row of ``idx`` ``(B, m)``."""
    B = idx.shape[0]
    flat = (np.arange(B)[:, None] * n_units + idx).ravel()
    return np.bincount(flat, minlength=B * n_units).reshape(B, n_units).astype(float)


def percentile_interval(draws: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper percentile bounds along axis 0 of ``draws`` ``(B, ...)`` (NaN-aware)."""
    a = (1 - level) / 2
    if not np.isnan(draws).any():
        return tuple(np.quantile(draws, [a, 1 - a], axis=0))
    with warnings.catch_warnings():   # an all-NaN column (a cell no resample has) gives NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return tuple(np.nanquantile(draws, [a, 1 - a], axis=0))


def bootstrap_pvalue(draws: np.ndarray, null: float | np.ndarray = 0.0) -> np.ndarray:
    """Two-sided bootstrap p-value along axis 0 of ``draws`` ``(B, ...)`` (formula in module doc)."""
    ok = ~np.isnan(draws)
    nb = ok.sum(axis=0)
    below = ((draws <= null) & ok).sum(axis=0)
    above = ((draws >= null) & ok).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.minimum(1.0, 2.0 * (np.minimum(below, above) + 1) / (nb + 1))
    return np.where(nb > 0, p, np.nan)


@dataclass
class TemplateBootstrap:
    """A drawn set of template resamples, shared by every statistic of a run: ``units`` (template ids, the columns
    of ``idx``) and ``idx`` ``(B, T)``, from :meth:`draw` or hand-made."""

    units: tuple[str, ...]
    idx: np.ndarray
    level: float = DEFAULT_LEVEL

    @classmethod
    def draw(cls, units: Sequence[str], n_resamples: int, rng: np.random.Generator,
             level: float = DEFAULT_LEVEL) -> "TemplateBootstrap":
        units = tuple(sorted(set(map(str, units))))
        return cls(units, resample_indices(len(units), n_resamples, rng), level)

    @property
    def n_resamples(self) -> int:
        return int(self.idx.shape[0])

    @cached_property
    def weights(self) -> np.ndarray:
        """``(B, T)`` count matrix ``W``."""
        return count_matrix(self.idx, len(self.units))

    def codes(self, labels: Sequence[str]) -> np.ndarray:
        """Unit index of each label ``(n,)``; an unknown template id is an error."""
        pos = {u: i for i, u in enumerate(self.units)}
        try:
            return np.fromiter((pos[str(x)] for x in labels), dtype=np.int64, count=len(labels))
        except KeyError as e:
            raise ValueError(f"template {e} is not among the bootstrap's units") from None

    def sums(self, unit: np.ndarray, cell: np.ndarray, values: np.ndarray, n_cells: int
             ) -> tuple[np.ndarray, np.ndarray]:
        """Per-template sums ``S`` and counts ``N`` ``(T, n_cells)`` of ``values`` ``(n,)`` whose template and cell
        are ``unit`` and ``cell`` ``(n,)``; rows with a NaN value or a negative cell are left out."""
        T = len(self.units)
        v = np.asarray(values, dtype=float)
        keep = ~np.isnan(v) & (cell >= 0)
        flat = unit[keep] * n_cells + cell[keep]
        S = np.bincount(flat, weights=v[keep], minlength=T * n_cells).reshape(T, n_cells)
        N = np.bincount(flat, minlength=T * n_cells).reshape(T, n_cells).astype(float)
        return S, N

    def means(self, S: np.ndarray, N: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Point estimates ``(J,)`` and resampled means ``(B, J)`` from ``S``, ``N`` ``(T, J)``."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return S.sum(axis=0) / N.sum(axis=0), (self.weights @ S) / (self.weights @ N)

    def summarize(self, point: np.ndarray, draws: np.ndarray, null: float | np.ndarray = 0.0) -> dict:
        """Estimate, interval, p-value and undefined-resample count for each column of ``draws``."""
        lo, hi = percentile_interval(draws, self.level)
        return {"estimate": np.asarray(point, dtype=float), "lo": np.asarray(lo), "hi": np.asarray(hi),
                "p": bootstrap_pvalue(draws, null), "n_undefined": np.isnan(draws).sum(axis=0)}
