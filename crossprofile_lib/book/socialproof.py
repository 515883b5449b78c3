"""Chapter 6's findings: the label controls (labels removed, shuffled) per decider, the ALL memory's
support-shared-minus-private gap, and the social-proof sweep (accuracy of the ALL memory in the
classic cell as the reference decider's social-proof weight grows)."""

from __future__ import annotations

from typing import Optional, Sequence

import pandas as pd

from crossprofile_lib.book.display import name_html
from crossprofile_lib.book.paper import paper_text
from crossprofile_lib.book.runs import Run, reference_who
from crossprofile_lib.book.tables import CELL_LABELS, label_effect_rows
from crossprofile_lib.design import CLASSIC
from crossprofile_lib.stats import tables as st

#: The ALL memory with full, removed and shuffled labels (the sweep's lines).
ALL_LABELS = ("ALL", "ALL:unlabeled", "ALL:shuffled")


def deciders(ch) -> list[Run]:
    """The reference decider, its social-proof run, and the model sample when there is one."""
    return [ch.ref, ch.sp] + ([ch.model] if ch.model is not None else [])


def label_effects_by_run(runs: Sequence[Run]) -> dict:
    """Run label -> :func:`label_effect_rows` (each label control minus full labels, points)."""
    return {r.label: label_effect_rows(r, r.boot) for r in runs}


def support_shared_by_run(runs: Sequence[Run]) -> dict:
    """Run label -> the ALL memory's accuracy with support shared minus support private (points)."""
    return {r.label: st.support_shared_minus_private(r.df, r.boot) for r in runs}


def effect(t: pd.DataFrame, versus: str, fmt: str, cell: str):
    """The row of a :func:`label_effect_rows` table: label format ``fmt`` against ``versus`` in ``cell``, or None."""
    if t.empty:
        return None
    t = t[(t.versus == versus) & (t.label_format == fmt) & (t.cell == CELL_LABELS.get(cell, cell))]
    return t.iloc[0] if len(t) else None


def label_takeaways(runs: Sequence[Run], effects: dict) -> list[str]:
    """Removing the ALL memory's labels in the classic cell, per decider, beside the paper, each with the
    direction its own interval shows (the paper's direction is positive: removing labels helps)."""
    lines = []
    for r in runs:
        e = effect(effects[r.label], "ALL", "unlabeled", "classic")
        if e is not None:
            if e.lo > 0:
                way = "the paper's direction (its interval lies above 0)"
            elif e.hi < 0:
                way = "against the paper's direction (its interval lies below 0)"
            else:
                way = "no direction (its interval includes 0)"
            lines.append(f"{name_html(r)}: removing the labels from the ALL memory changes classic-cell ({CLASSIC}) "
                         f"accuracy by <b>{e.estimate:+.1f}</b> points [{e.lo:.1f}, {e.hi:.1f}]: {way}.")
    lines.append(f"Paper (ALL unlabeled - ALL, classic cell): {paper_text('classic-labels/ALL unlabeled - ALL')}.")
    return lines


def label_controls(ch, r: Run, t: pd.DataFrame, versus: Sequence[str] = ("ALL", "R1", "B4"),
                   formats: Optional[Sequence[str]] = ("unlabeled", "shuffled")) -> pd.DataFrame:
    """The rows of a :func:`label_effect_rows` table for ``versus`` and ``formats`` (None: every format)
    at the budget the run is shown at (and the unbudgeted ALL)."""
    t = t[t.versus.isin(list(versus))]
    if formats is not None:
        t = t[t.label_format.isin(list(formats))]
    return t[t.budget_label.isin([ch.budget(r), "none"])]


def support_shared_table(runs: Sequence[Run], shared: dict) -> pd.DataFrame:
    """:func:`support_shared_by_run` stacked with a ``run`` column (empty runs left out)."""
    rows = [shared[r.label].assign(run=r.label) for r in runs if not shared[r.label].empty]
    return pd.concat(rows) if rows else pd.DataFrame()


def sweep_runs(ch) -> tuple[list[float], list[Run]]:
    """The social-proof weights of the sweep (0 first: the reference grid) and their runs."""
    weights = list(ch.params.social_proof_sweep)
    return [0.0] + weights, [ch.ref] + [ch.runs.sweep(s) for s in weights]


def sweep_table(weights: Sequence[float], runs: Sequence[Run], x: str = "social-proof weight s") -> pd.DataFrame:
    """Accuracy (%) of the ALL memory (full, removed, shuffled labels) in the classic cell per weight
    (point estimates: ``lo`` and ``hi`` equal the estimate)."""
    rows = []
    for s, r in zip(weights, runs):
        d = r.df[(r.df.cell == "classic") & r.df.policy.isin(list(ALL_LABELS))]
        for p, g in d.groupby("policy"):
            rows.append({x: s, "policy": p, "estimate": 100 * g.correct.mean()})
    t = pd.DataFrame(rows)
    t["lo"] = t["hi"] = t["estimate"]
    return t


def sweep_who(weights: Sequence[float]) -> str:
    """The caption line naming the sweep's deciders."""
    return reference_who("reference-decider(sp=s,irr=0,beta=inf) for s in " + ", ".join(f"{s:g}" for s in weights))
