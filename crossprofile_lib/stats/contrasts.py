"""Preregistered contrasts from ``prereg.yaml`` (validated and compiled by :mod:`.prereg`), Holm-corrected.

A **contrast** is ``scale * sum_k weight_k * mean(outcome | rows matching where_k)``; filters merge from
``defaults.where``, the contrast's and the term's (later ones win; ``null`` removes one). All terms come from one
template-bootstrap count matrix; p-values (against ``test_value``) are adjusted within each ``family`` by its
``correction``. A contrast whose terms match no rows is not estimable (with the reason) and left out of its family.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.prereg import (  # noqa: F401  (the file's model and compiled form; re-exported)
    DEFAULT_PREREG_PATH,
    Contrast,
    Prereg,
    PreregError,
    load_prereg,
    parse_prereg,
)


def _coerce(series: pd.Series, v):
    if isinstance(v, bool) or pd.api.types.is_bool_dtype(series):
        return v
    if not pd.api.types.is_numeric_dtype(series):
        return str(v)
    try:
        return float(v) if isinstance(v, (int, float, str)) else v
    except ValueError:
        return v


def row_mask(df: pd.DataFrame, where: dict, path: str = "<prereg>", fld: str = "where") -> tuple[np.ndarray, str]:
    """Boolean mask ``(n_rows,)`` of the rows matching ``where``, and why it is empty (or '')."""
    mask = np.ones(len(df), dtype=bool)
    for col, v in where.items():
        if col not in df.columns:
            raise PreregError(path, f"{fld}.{col}", "column", f"the results table has no column '{col}'")
        vals = [_coerce(df[col], e) for e in (v if isinstance(v, list) else [v])]
        m = df[col].isin(vals).to_numpy()
        if mask.any() and not (mask & m).any():
            known = sorted(map(str, df.loc[mask, col].unique()))[:12]
            return mask & m, f"no rows with {col} in {vals} (present: {', '.join(known)})"
        mask &= m
    return mask, ("" if mask.any() else "no rows")


def evaluate_contrasts(df: pd.DataFrame, prereg: Prereg, boot: TemplateBootstrap,
                       template_col: str = "template_id") -> pd.DataFrame:
    """One row per contrast: estimate, percentile interval, bootstrap p, adjusted p, decision (every term a
    column of one ``(T, J)`` sums matrix: two ``(B, T) @ (T, J)`` products for the whole file)."""
    unit = boot.codes(df[template_col].astype(str).tolist())
    cols_S, cols_N, C, rows = [], [], [], []
    for k, c in enumerate(prereg.contrasts):
        if c.outcome not in df.columns:
            raise PreregError(prereg.source, f"contrasts[{k}].outcome", "column",
                              f"the results table has no column '{c.outcome}'")
        y = df[c.outcome].astype(float).to_numpy()
        reasons, start, ns = [], len(cols_S), []
        for j, t in enumerate(c.terms):
            m, why = row_mask(df, t.where, prereg.source, f"contrasts[{k}].terms[{j}].where")
            if why:
                reasons.append(f"term {j}: {why}")
            S, N = boot.sums(unit, np.where(m, 0, -1), y, 1)
            cols_S.append(S[:, 0])
            cols_N.append(N[:, 0])
            ns.append(int(N.sum()))
        C.append((start, np.array([t.weight for t in c.terms]), c))
        rows.append(dict(id=c.id, title=c.title, family=c.family or "", outcome=c.outcome,
                         n_rows=min(ns), estimable=not reasons, reason="; ".join(reasons),
                         paper=c.paper))
    S, N = np.column_stack(cols_S), np.column_stack(cols_N)
    point, draws = boot.means(S, N)
    K = len(C)
    est_p, est_d = np.full(K, np.nan), np.full((boot.n_resamples, K), np.nan)
    for k, (start, w, c) in enumerate(C):
        if rows[k]["estimable"]:
            sl = slice(start, start + len(w))
            est_p[k] = c.scale * point[sl] @ w
            est_d[:, k] = c.scale * draws[:, sl] @ w
    summ = boot.summarize(est_p, est_d, np.array([c.null for c in prereg.contrasts], dtype=float))
    out = pd.DataFrame(rows).assign(**{key: summ[key] for key in ("estimate", "lo", "hi", "p", "n_undefined")})
    out.loc[~out.estimable, ["estimate", "lo", "hi", "p"]] = np.nan
    out["p_adjusted"], out["reject"] = np.nan, False
    out["correction"] = "none"
    for name, fam in prereg.families.items():
        sel = (out.family == name) & out.estimable & out.p.notna()
        if not sel.any():
            continue
        p = out.loc[sel, "p"].to_numpy()
        rej, padj = holm(p, fam.alpha) if fam.correction == "holm" else (p < fam.alpha, p)
        out.loc[sel, "p_adjusted"], out.loc[sel, "reject"] = padj, rej
        out.loc[sel, "correction"] = fam.correction
        out.loc[sel, "alpha"] = fam.alpha
    out["reject"] = out["reject"].astype(bool)
    return out


def holm(pvals, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down adjustment: ``(reject, p_adjusted)``, statsmodels' ``multipletests(method="holm")``
    step for step (the same comparisons, so the same rejections at the boundary), without the full garbage
    collection statsmodels runs on every call (seconds each in a process holding a book's runs)."""
    p = np.asarray(pvals, dtype=float)
    order = np.argsort(p)
    ps = p[order]
    steps = np.arange(len(ps), 0, -1)
    notreject = ps > alpha / steps
    first = np.nonzero(notreject)[0]
    notreject[(first.min() if first.size else len(ps)):] = True
    adjusted = np.maximum.accumulate(ps * steps)
    adjusted[adjusted > 1] = 1
    reject, padj = np.empty(len(ps), dtype=bool), np.empty(len(ps))
    reject[order], padj[order] = ~notreject, adjusted
    return reject, padj
