"""Inference tables: cell means and differences with template-bootstrap intervals (SPEC section 8), all from the
run's one :class:`TemplateBootstrap`. Each is a long frame with the grouping columns, ``outcome``, ``n``,
``estimate``, ``lo``, ``hi`` and, for differences, ``p``; rates in percent, counts and retention as plain means.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from crossprofile_lib.design import BUDGET_ORDER, POLICY_ORDER
from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.headroom import headroom  # noqa: F401  (the headroom check; re-exported)

CELLS = ("classic", "mirror", "other")


def _order_key(s: pd.Series) -> pd.Series:
    if s.name in ("policy", "budget_label"):
        rank = {p: i for i, p in enumerate(POLICY_ORDER if s.name == "policy" else BUDGET_ORDER)}
        return s.map(lambda x: (rank.get(x, len(rank)), x))
    if s.name in ("variant", "cell"):
        return s.map(lambda x: (x == "all", str(x)))
    return s


def group_draws(df: pd.DataFrame, by: Sequence[str], outcomes: Sequence[str], boot: TemplateBootstrap,
                pool: Sequence[str] = ()) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Cell means of ``outcomes`` per group of ``by`` (plus a level ``'all'`` for each column of ``pool``): ``keys``
    (one row per (group, outcome) with ``n``), ``point`` ``(J,)`` and ``draws`` ``(B, J)``."""
    by = list(by)
    unit = boot.codes(df["template_id"].astype(str).tolist())
    groupings = [by] + [[c for c in by if c != p] for p in pool]
    S_cols, N_cols, key_frames = [], [], []
    for g_cols in groupings:
        if g_cols:
            g = df.groupby(g_cols, sort=True, dropna=False, observed=True)
            codes = g.ngroup().to_numpy()
            keys = g.size().reset_index()[g_cols]
        else:
            codes, keys = np.zeros(len(df), dtype=np.int64), pd.DataFrame(index=[0])
        for c in by:
            if c not in g_cols:
                keys[c] = "all"
        for o in outcomes:
            S, N = boot.sums(unit, codes, df[o].astype(float).to_numpy(), len(keys))
            S_cols.append(S * (100.0 if pd.api.types.is_bool_dtype(df[o]) else 1.0))   # rates in percent
            N_cols.append(N)
            key_frames.append(keys[by].assign(outcome=o, n=N.sum(axis=0).astype(int)))
    if not key_frames:
        return pd.DataFrame(columns=by + ["outcome", "n"]), np.zeros(0), np.zeros((boot.n_resamples, 0))
    point, draws = boot.means(np.hstack(S_cols), np.hstack(N_cols))
    return pd.concat(key_frames, ignore_index=True), point, draws


def summarize(keys: pd.DataFrame, point: np.ndarray, draws: np.ndarray, boot: TemplateBootstrap,
              with_p: bool = False) -> pd.DataFrame:
    """Attach estimate, interval (and p) to ``keys``; sort in the tables' order."""
    out = keys.reset_index(drop=True).copy()
    s = boot.summarize(point, draws)
    cols = ("estimate", "lo", "hi", "p") if with_p else ("estimate", "lo", "hi")
    for c in cols:
        out[c] = s[c]
    sort_cols = [c for c in ("outcome", "policy", "budget_label", "variant", "cell") if c in out.columns]
    if sort_cols:
        first = {o: i for i, o in enumerate(pd.unique(out["outcome"]))} if "outcome" in out.columns else {}
        out = out.sort_values(sort_cols, kind="stable",
                              key=lambda s: s.map(first) if s.name == "outcome" else _order_key(s))
    return out.reset_index(drop=True)


def means_table(df: pd.DataFrame, by: Sequence[str], outcomes: Sequence[str], boot: TemplateBootstrap,
                pool: Sequence[str] = ()) -> pd.DataFrame:
    keys, point, draws = group_draws(df, by, outcomes, boot, pool)
    return summarize(keys, point, draws, boot)


def accuracy_table(df: pd.DataFrame, boot: TemplateBootstrap) -> pd.DataFrame:
    """Accuracy (%) per policy x budget x variant, plus the mean over variants (``variant='all'``)."""
    return means_table(df, ["policy", "budget_label", "variant"], ["correct"], boot, pool=["variant"])


def pooled_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The secondary pooled cells (``pooled_cell`` classic PS* or mirror SP*) as ``cell`` ``'classic (pooled)'`` /
    ``'mirror (pooled)'``."""
    if "pooled_cell" not in df.columns:
        return df.iloc[:0]
    d = df[df["pooled_cell"].isin(["classic", "mirror"])]
    return d.assign(cell=d["pooled_cell"].astype(str) + " (pooled)")


def cell_table(df: pd.DataFrame, boot: TemplateBootstrap, pooled: bool = False) -> pd.DataFrame:
    """Accuracy and decoy-choice rate (%) per policy x budget in the classic (PSP) and mirror (SPS) cells; with
    ``pooled``, also the pooled cells (:func:`pooled_rows`)."""
    d = df[df["cell"].isin(["classic", "mirror"])]
    if pooled:
        d = pd.concat([d, pooled_rows(df)], ignore_index=True)
    return means_table(d, ["policy", "budget_label", "cell"], ["correct", "chose_decoy"], boot)


def composition_table(df: pd.DataFrame, boot: TemplateBootstrap, pooled: bool = False) -> pd.DataFrame:
    """Kept support / decoy / irrelevant facts and retention (kept support / 5) per policy x budget x cell (classic,
    mirror, other, all); with ``pooled``, then the pooled cells."""
    outcomes = ["kept_support", "kept_decoy", "kept_irrelevant", "retention"]
    t = means_table(df, ["policy", "budget_label", "cell"], outcomes, boot, pool=["cell"])
    pooled = pooled_rows(df) if pooled else df.iloc[:0]
    if pooled.empty:
        return t
    return pd.concat([t, means_table(pooled, ["policy", "budget_label", "cell"], outcomes, boot)], ignore_index=True)


def relevance_table(df: pd.DataFrame, boot: TemplateBootstrap) -> pd.DataFrame:
    """Relevance-filter precision and recall (%) against the roles per filter kind: the mean over tasks (macro)."""
    if "relevance_filter" not in df.columns:
        return pd.DataFrame()
    d = df[(df["relevance_filter"].astype(str) != "") & df["relevance_precision"].notna()]
    d = d.drop_duplicates(["template_id", "variant", "seed", "relevance_filter"])
    if d.empty:
        return pd.DataFrame()
    d = d.assign(precision=d["relevance_precision"] * 100, recall=d["relevance_recall"] * 100)
    return means_table(d, ["relevance_filter"], ["precision", "recall"], boot)


def _differences(keys, point, draws, pairs, boot) -> pd.DataFrame:
    """``pairs``: list of (row dict, index a, index b): estimate a - b."""
    if not pairs:
        return pd.DataFrame()
    ia = np.array([a for _, a, _ in pairs])
    ib = np.array([b for _, _, b in pairs])
    out = pd.DataFrame([r for r, _, _ in pairs])
    out["n"] = np.minimum(keys["n"].to_numpy()[ia], keys["n"].to_numpy()[ib])
    return summarize(out, point[ia] - point[ib], draws[:, ia] - draws[:, ib], boot, with_p=True)


def label_effects(df: pd.DataFrame, boot: TemplateBootstrap) -> pd.DataFrame:
    """Accuracy of each label control ``P:FORMAT`` minus ``P``, in points, per budget x cell (and all variants)."""
    keys, point, draws = group_draws(df, ["policy", "budget_label", "cell"], ["correct"], boot, pool=["cell"])
    index = {(r.policy, r.budget_label, r.cell): i for i, r in enumerate(keys.itertuples())}
    pairs = []
    for (pol, bud, cell), i in index.items():
        base, _, fmt = pol.partition(":")
        if fmt and fmt != "full" and (base, bud, cell) in index:
            pairs.append((dict(policy=pol, versus=base, label_format=fmt, budget_label=bud, cell=cell),
                          i, index[(base, bud, cell)]))
    return _differences(keys, point, draws, pairs, boot)


def support_shared_minus_private(df: pd.DataFrame, boot: TemplateBootstrap) -> pd.DataFrame:
    """ALL memory (and its label controls): accuracy with support shared minus support private."""
    d = df[df["base_policy"] == "ALL"] if "base_policy" in df.columns else df[df["policy"].str.startswith("ALL")]
    if d.empty:
        return pd.DataFrame()
    keys, point, draws = group_draws(d, ["policy", "support_attr"], ["correct"], boot)
    index = {(r.policy, r.support_attr): i for i, r in enumerate(keys.itertuples())}
    pairs = [(dict(policy=p, contrast="support shared - support private"), i, index[(p, "private")])
             for (p, a), i in index.items() if a == "shared" and (p, "private") in index]
    return _differences(keys, point, draws, pairs, boot)
