"""What the net-lead regressions are fitted on (SPEC section 8). **Families**: the *primary* family is the paper's
copy policies :data:`COPY_FAMILY`, the *secondary* every budgeted policy in the rows. **Duplicates**: rows with the same
task, budget, memory text (``memory_sha``) and ``decision`` are one model call counted twice; only the first in family
order is kept (a table without ``memory_sha`` drops nothing and says so). **Separation**: a policy level all correct
(or all wrong) is reported apart and left out of the test; under fixed effects such a template is dropped and counted.
"""

from __future__ import annotations

from collections import Counter
from typing import Optional

import pandas as pd

from crossprofile_lib.design import POLICY_ORDER

#: the primary family of the net-lead test: the paper's copy policies (SPEC section 6)
COPY_FAMILY = ("R1", "B4", "Random", "M1")
PRIMARY_FAMILY = "copy policies (R1, B4, Random, M1)"
SECONDARY_FAMILY = "every budgeted policy in the rows"
DUPLICATE_KEY = ("template_id", "variant", "seed", "budget_label", "memory_sha", "decision")


def policy_rank(policy: str) -> tuple:
    """Family order: the copy family, then the tables' policy order, then alphabetical."""
    if policy in COPY_FAMILY:
        return (0, COPY_FAMILY.index(policy), policy)
    if policy in POLICY_ORDER:
        return (1, POLICY_ORDER.index(policy), policy)
    return (2, 0, policy)


def drop_duplicates(df: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The rows without duplicate decisions and ``{"rule", "dropped", "by_policy", "kept_as", "note"}``."""
    rule = ("same task (template, variant, seed), budget, memory text (memory_sha) and decision as a row of "
            "a policy earlier in the family order: one decision call counted twice")
    missing = [c for c in DUPLICATE_KEY if c not in df.columns]
    if missing or df.empty:
        return df, dict(rule=rule, dropped=0, by_policy={}, kept_as={},
                        note=(f"no duplicates dropped: the table has no {', '.join(missing)} column" if missing else ""))
    d = df.assign(_rank=df["policy"].astype(str).map(policy_rank))
    d = d.sort_values("_rank", kind="stable")
    key = list(DUPLICATE_KEY)
    dup = d.duplicated(key, keep="first")
    first = d.loc[~dup].set_index(key)["policy"]
    gone = d.loc[dup]
    kept_as: dict = {}
    if len(gone):
        origin = first.reindex(pd.MultiIndex.from_frame(gone[key])).to_numpy()
        for (p, o), n in Counter(zip(gone["policy"].astype(str), map(str, origin))).items():
            kept_as.setdefault(p, {})[o] = n
    out = df.loc[sorted(d.index[~dup])]
    return out, dict(rule=rule, dropped=int(dup.sum()), by_policy={p: sum(v.values()) for p, v in kept_as.items()},
                     kept_as=kept_as, note="")


def separated_levels(df: pd.DataFrame, column: str = "policy") -> pd.DataFrame:
    """Levels of ``column`` whose rows are all correct or all wrong: ``level, n, correct, accuracy``."""
    if df.empty:
        return pd.DataFrame(columns=[column, "n", "correct", "accuracy", "separation"])
    g = df.groupby(column, sort=False)["correct"].agg(["size", "sum"])
    sep = g[(g["sum"] == 0) | (g["sum"] == g["size"])]
    return pd.DataFrame({column: sep.index.astype(str), "n": sep["size"].astype(int).to_numpy(),
                         "correct": sep["sum"].astype(int).to_numpy(),
                         "accuracy": (100.0 * sep["sum"] / sep["size"]).to_numpy(),
                         "separation": ["all correct" if s else "all wrong" for s in (sep["sum"] > 0)]})


def prepare_family(df: pd.DataFrame, family: str, reference: str = "R1") -> dict:
    """Everything the test of ``family`` (``"copy"`` or ``"all"``) needs: ``rows`` (duplicates dropped, separated
    levels out), ``duplicates``, ``separated``, ``reference`` (else the first level left), ``policies``, ``note``."""
    d, dups = drop_duplicates(df[df["policy"].astype(str).isin(COPY_FAMILY)] if family == "copy" else df)
    sep = separated_levels(d)
    rows = d[~d["policy"].astype(str).isin(set(sep["policy"]))]
    pols = sorted(rows["policy"].astype(str).unique(), key=policy_rank)
    ref: Optional[str] = reference if reference in pols else (pols[0] if pols else None)
    notes = []
    if dups["dropped"]:
        notes.append(f"{dups['dropped']} duplicate decisions dropped (" + ", ".join(
            f"{p}: {n}" for p, n in sorted(dups["by_policy"].items(), key=lambda kv: policy_rank(kv[0]))) + ")")
    if dups.get("note"):
        notes.append(dups["note"])
    for r in sep.itertuples():
        notes.append(f"{r.policy} separated ({r.separation}, {r.correct} of {r.n}): reported apart, not tested")
    return dict(family=PRIMARY_FAMILY if family == "copy" else SECONDARY_FAMILY, rows=rows, duplicates=dups,
                separated=sep, reference=ref, policies=pols, note="; ".join(notes))


def informative_templates(df: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Rows of templates whose outcome varies, and how many templates were all correct or all wrong."""
    g = df.groupby(df["template_id"].astype(str))["correct"].agg(["size", "sum"])
    flat = g.index[(g["sum"] == 0) | (g["sum"] == g["size"])]
    return df[~df["template_id"].astype(str).isin(flat)], int(len(flat))
