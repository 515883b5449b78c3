"""The one way estimates, intervals and p-values are written (``crossprofile stats`` and the book)."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

MISSING = "n/a"


def fmt_ci(est, lo=None, hi=None, digits: int = 1, missing: str = MISSING) -> str:
    """``"est [lo, hi]"`` with ``digits`` decimals: ``"12.3 [10.1, 14.6]"``, ``"1.0"`` without bounds, ``missing``
    without an estimate."""
    if pd.isna(est):
        return missing
    if pd.isna(lo) or pd.isna(hi):
        return f"{est:.{digits}f}"
    return f"{est:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def fmt_p(p) -> str:
    """A p-value as printed: ``"0.0457"``, ``"<1e-4"``, ``""`` when absent."""
    if pd.isna(p):
        return ""
    return f"{p:.4f}" if p >= 1e-4 else "<1e-4"


def ci_column(t: pd.DataFrame, digits: int = 1, missing: str = MISSING) -> pd.Series:
    """:func:`fmt_ci` of every row of a table with ``estimate``, ``lo`` and ``hi`` columns."""
    return pd.Series([fmt_ci(e, lo, hi, digits, missing) for e, lo, hi in zip(t["estimate"], t["lo"], t["hi"])],
                     index=t.index, dtype=object)


def ci_pivot(t: pd.DataFrame, index: str | Sequence[str], columns: str, digits: int = 1,
             missing: str = MISSING) -> pd.DataFrame:
    """A long ``estimate/lo/hi`` table pivoted into ``"est [lo, hi]"`` cells in first-appearance order ('' absent)."""
    if t.empty:
        return t
    index = [index] if isinstance(index, str) else list(index)
    t = t.assign(_ci=ci_column(t, digits, missing))
    order = list(dict.fromkeys(t[columns]))
    rows = list(dict.fromkeys(map(tuple, t[index].to_numpy())))
    p = t.pivot_table(index=index, columns=columns, values="_ci", aggfunc="first", sort=False)
    return p.reindex(index=pd.MultiIndex.from_tuples(rows, names=index) if len(index) > 1 else [r[0] for r in rows],
                     columns=order).fillna("")
