"""HiddenBench measures. **Group answer**: the plurality of valid final votes; a tie goes to the earliest speaker's
choice (flagged); no valid vote: invalid (counted wrong); ``strict_majority`` when the winner has over half the votes.
**Failed calls are not results**: every table refuses error rows unless ``allow_errors`` drops them.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Optional, Sequence

import pandas as pd

from crossprofile_lib.design import PRIMARY_BUDGET
from crossprofile_lib.hiddenbench.ablations import DEFAULT_ABLATIONS
from crossprofile_lib.paper_figures import paper_item
from crossprofile_lib.stats.analysis_set import check_failed_calls
from crossprofile_lib.stats.headroom import Headroom, task_headroom  # noqa: F401  (Headroom: re-exported)

#: The items of data/paper_figures.yaml each protocol's paper table shows.
PAPER_REFS = {
    "controlled": ("hb-r1-b3/R1", "hb-r1-b3/B3", "hb-reference/private-only", "hb-reference/shared-only",
                   "hb-reference/EMPTY"),
    "natural": ("natural/group vote", "natural/REF", "natural/ALL", "natural/EMPTY"),
}
PAPER_MODELS = ("Qwen2.5-7B-Instruct", "Llama-3.1-8B-Instruct")


@dataclass(frozen=True)
class GroupVote:
    option: Optional[str]
    tie: bool
    strict_majority: bool
    n_valid: int


def group_vote(votes: Sequence[tuple[str, Optional[str]]], n_agents: Optional[int] = None) -> GroupVote:
    """The group answer of ``(agent, option or None)`` votes in speaking order."""
    n_agents = n_agents if n_agents is not None else len(votes)
    valid = [(a, o) for a, o in votes if o is not None]
    if not valid:
        return GroupVote(None, False, False, 0)
    counts = Counter(o for _, o in valid)
    top = max(counts.values())
    tied = {o for o, c in counts.items() if c == top}
    winner = next(o for _, o in valid if o in tied)
    return GroupVote(winner, len(tied) > 1, top > n_agents / 2, len(valid))


def _pct(x) -> float:
    return 100.0 * float(x) if x == x else math.nan


def natural_summary(sessions: pd.DataFrame, votes: pd.DataFrame, decisions: pd.DataFrame,
                    budget: str = PRIMARY_BUDGET, allow_errors: bool = False) -> pd.DataFrame:
    """One row per ablation (percent): vote accuracies (invalid votes count wrong), disclosure, invalid votes,
    sessions, and each policy's decision accuracy at ``budget``."""
    sessions, _ = check_failed_calls(sessions, allow_errors, "the HiddenBench natural sessions table")
    votes, _ = check_failed_calls(votes, allow_errors, "the HiddenBench natural votes table")
    decisions, _ = check_failed_calls(decisions, allow_errors, "the HiddenBench natural decisions table")
    out = {}
    for abl, s in sessions.groupby("ablation", sort=False):
        v = votes[votes.ablation == abl]
        row = {"sessions": len(s),
               "initial_vote": _pct(v[v.phase == "initial"].correct.mean()),
               "final_vote": _pct(v[v.phase == "final"].correct.mean()),
               "group_vote": _pct(s.group_correct.mean()),
               "disclosure": _pct(s.disclosure_rate.mean()),
               "invalid_votes": int(v.invalid.sum())}
        d = decisions[(decisions.ablation == abl) & decisions.budget_label.isin([budget, "none"])]
        for pol, g in d.groupby("policy", sort=False):
            row[pol] = _pct(g.correct.astype(float).mean())
        out[abl] = row
    order = [a for a in DEFAULT_ABLATIONS if a in out] + [a for a in out if a not in DEFAULT_ABLATIONS]
    return pd.DataFrame.from_dict(out, orient="index").loc[order]


def controlled_summary(decisions: pd.DataFrame, budget: str = PRIMARY_BUDGET, allow_errors: bool = False) -> pd.DataFrame:
    """One row per policy: accuracy (%; NaN when nothing was decided) and mean composition."""
    decisions, _ = check_failed_calls(decisions, allow_errors, "the HiddenBench controlled table")
    d = decisions[decisions.budget_label.isin([budget, "none"])]
    rows = {}
    for pol, g in d.groupby("policy", sort=False):
        dec = g[g.decided]
        rows[pol] = {"accuracy": _pct(dec.correct.astype(float).mean()) if len(dec) else math.nan,
                     "invalid": int(dec.invalid.sum()) if len(dec) else 0,
                     "kept_hidden": g.kept_hidden.mean(), "kept_shared": g.kept_shared.mean(),
                     "hidden_retention": g.hidden_retention.mean(),
                     "profile_complete": _pct(g.profile_complete.mean()), "decisions": len(dec)}
    return pd.DataFrame.from_dict(rows, orient="index")


def headroom(decisions: pd.DataFrame, rng, n_resamples: int = 10_000, level: float = 0.95,
             allow_errors: bool = False) -> Optional[Headroom]:
    """ALL - EMPTY with tasks resampled (:func:`crossprofile_lib.stats.headroom.task_headroom`)."""
    decisions, _ = check_failed_calls(decisions, allow_errors, "the HiddenBench decisions table")
    return task_headroom(decisions, rng, n_resamples, level)


def paper_table(protocol: str) -> pd.DataFrame:
    """The paper's figures (percent) for ``controlled`` (a column per model) or ``natural`` (ranges: low / high)."""
    rows, index = [], []
    for ref in PAPER_REFS[protocol]:
        it = paper_item(ref)
        index.append(it.label)
        if protocol == "controlled":
            rows.append([it.paper.get(m, math.nan) for m in PAPER_MODELS])
        else:
            lo, _, hi = str(next(iter(it.paper.values()))).partition("-")
            rows.append([float(lo), float(hi)])
    label = PAPER_MODELS if protocol == "controlled" else ("low", "high")
    return pd.DataFrame(rows, index=index, columns=[f"paper {m}" for m in label])
