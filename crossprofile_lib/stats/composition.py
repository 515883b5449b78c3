"""``crossprofile composition``'s descriptive tables (the inference lives in :mod:`.tables`)."""

from __future__ import annotations

import pandas as pd


def composition_table(df: pd.DataFrame, budget: str = "0.6") -> pd.DataFrame:
    """Mean kept support / decoy / irrelevant per policy x variant at budget label ``budget`` (``all``: every row),
    unbudgeted and fixed-k policies (label ``none``) always included."""
    d = df if budget == "all" else df[df["budget_label"].isin([budget, "none"])]
    g = d.groupby(["policy", "variant"], sort=True)[["kept_support", "kept_decoy", "kept_irrelevant", "n_kept"]]
    return g.mean().rename(columns=lambda c: c.replace("kept_", ""))


def composition_wide(df: pd.DataFrame, budget: str = "0.6") -> pd.DataFrame:
    """Policy x variant table of ``support/decoy/irrelevant`` mean kept counts (strings)."""
    c = composition_table(df, budget)
    cell = c.apply(lambda r: f"{r['support']:.2f}/{r['decoy']:.2f}/{r['irrelevant']:.2f}", axis=1)
    return cell.unstack("variant")
