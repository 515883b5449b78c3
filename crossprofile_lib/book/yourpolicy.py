"""The page "Your policy": your memory policies (``make book POLICY_FILES=my_policy.py``) beside R1 and B4 on the same
runs: :func:`composition_by_variant`, :func:`accuracy_by_cell`, :func:`failures_by_net_lead` (a wrong decision at a
net lead of 0 or below is the memory's failure, at a positive net lead the decider's) and :func:`no_policy_note`.
"""

from __future__ import annotations

from typing import Optional, Sequence

import pandas as pd

from crossprofile_lib.book.display import admonition, esc
from crossprofile_lib.book.params import load_policy_file
from crossprofile_lib.book.runs import Run
from crossprofile_lib.book.tables import cell_rows
from crossprofile_lib.design import VARIANT_NAMES
from crossprofile_lib.policies.plugins import base

#: The paper's policies the page compares a policy of your own with.
COMPARED = ("R1", "B4")


def policies_in(run: Optional[Run], names: Sequence[str]) -> list[str]:
    """The specs of ``run`` whose base is one of ``names`` (``Mine``, ``Mine-k7``, ``Mine:unlabeled``), in
    the run's order; empty without the run."""
    if run is None:
        return []
    bases = set(names)
    return [p for p in dict.fromkeys(run.df["policy"].astype(str)) if base(p) in bases]


def _shown(df: pd.DataFrame, budget: str) -> pd.DataFrame:
    return df[df["budget_label"].astype(str).isin([str(budget), "none"])]


def composition_by_variant(run: Run, policies: Sequence[str], budget: str) -> pd.DataFrame:
    """Policy x variant: ``support / decoy / irrelevant`` mean kept counts (strings), ``policies`` then
    :data:`COMPARED`, the variants in the paper's order."""
    d = _shown(run.df, budget)
    d = d[d["policy"].isin([*policies, *COMPARED])]
    g = d.groupby(["policy", "variant"])[["kept_support", "kept_decoy", "kept_irrelevant"]].mean()
    cell = g.apply(lambda r: f"{r['kept_support']:.1f} / {r['kept_decoy']:.1f} / {r['kept_irrelevant']:.1f}", axis=1)
    t = cell.unstack("variant")
    order = [p for p in [*policies, *COMPARED] if p in t.index]
    return t.reindex(index=order, columns=[v for v in VARIANT_NAMES if v in t.columns])


def accuracy_by_cell(run: Run, policies: Sequence[str], budget: str) -> pd.DataFrame:
    """Long table (policy, cell, estimate, lo, hi) of accuracy in the classic / mirror (and pooled) cells."""
    t = cell_rows(run, run.boot)
    t = t[t["policy"].isin([*policies, *COMPARED]) & t["budget_label"].astype(str).isin([str(budget), "none"])]
    order = {p: i for i, p in enumerate([*policies, *COMPARED])}
    return t.sort_values("policy", key=lambda s: s.map(order), kind="stable")


def failures_by_net_lead(run: Run, policy: str, budget: str) -> pd.DataFrame:
    """Per net lead of what ``policy`` kept: decisions, share of all its decisions, accuracy (%), wrong
    decisions and the share of those that chose the decoy, and whose failure a wrong decision there is."""
    d = _shown(run.df, budget)
    d = d[d["policy"] == policy]
    if d.empty:
        return pd.DataFrame(columns=["net lead", "decisions", "share (%)", "accuracy (%)", "wrong",
                                     "wrong: chose the decoy (%)", "a wrong decision here is"])
    rows = []
    for lead, g in d.groupby("net_lead", sort=True):
        wrong = g[~g["correct"].astype(bool)]
        rows.append({"net lead": int(lead), "decisions": len(g), "share (%)": 100 * len(g) / len(d),
                     "accuracy (%)": 100 * g["correct"].astype(float).mean(), "wrong": len(wrong),
                     "wrong: chose the decoy (%)": 100 * wrong["chose_decoy"].astype(float).mean() if len(wrong)
                     else float("nan"),
                     "a wrong decision here is": "the memory's failure" if lead <= 0 else "the decider's failure"})
    return pd.DataFrame(rows)


def failure_summary(run: Run, policy: str, budget: str) -> str:
    """One sentence: how many of ``policy``'s wrong decisions come from memories with net lead <= 0."""
    d = _shown(run.df, budget)
    d = d[d["policy"] == policy]
    wrong = d[~d["correct"].astype(bool)]
    if d.empty:
        return f"{policy} has no decisions at r = {budget} in this run."
    if wrong.empty:
        return f"{policy} made no wrong decision at r = {budget} ({len(d)} decisions)."
    mem = int((wrong["net_lead"] <= 0).sum())
    return (f"{policy}: {len(wrong)} of {len(d)} decisions wrong at r = {budget}; {mem} of them "
            f"({100 * mem / len(wrong):.0f}%) from memories whose net lead was 0 or below (the memory's failure), "
            f"{len(wrong) - mem} with a positive net lead (the decider's).")


def no_policy_note():
    """The notice of a book built without POLICY_FILES."""
    return admonition("note", "No policy of your own in this build",
                      "This page shows a memory policy of your own beside the paper's R1 and B4. Build the book with "
                      "<code>make book POLICY_FILES=examples/policies/keep_longest.py</code> (or your own file; see "
                      "the README, <i>Your own memory policy</i>) and it shows that policy's composition per cell, "
                      "its accuracy in the classic and mirror cells, and where it fails and why.")


def policy_files_note(params) -> str:
    """HTML: the files behind the page's policies, with their SHA-256 (the run header records the same)."""
    items = []
    for f in params.policy_files:
        src = load_policy_file(f)
        items.append(f"<li><code>{esc(f)}</code>: {esc(', '.join(src.policies))} (SHA-256 "
                     f"<code>{esc(src.sha256[:12])}</code>)</li>")
    return "<ul>" + "".join(items) + "</ul>"
