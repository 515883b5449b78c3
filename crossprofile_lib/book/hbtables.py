"""Chapter 8's tables: controlled HiddenBench (what each memory keeps; a model's accuracy beside the
paper), the natural discussion per prompt ablation, and one natural session's artefacts."""

from __future__ import annotations

import html
import json
from typing import Optional

import numpy as np
import pandas as pd

from crossprofile_lib.book.display import admonition, details, name_html
from crossprofile_lib.book.hbruns import HBRun
from crossprofile_lib.book.paper import load_paper_figures, paper_text, paper_vs_suite, suite_values
from crossprofile_lib.book.runs import REFERENCE, Run, bootstrap
from crossprofile_lib.design import HEADROOM_MIN_POINTS, PRIMARY_BUDGET
from crossprofile_lib.hiddenbench import iter_artefacts
from crossprofile_lib.hiddenbench.measures import controlled_summary, headroom, natural_summary, paper_table

#: At most this many resamples for HiddenBench's task-bootstrap intervals.
MAX_HB_RESAMPLES = 2000
#: The paper's controlled-HiddenBench figure (R1 vs B3).
R1_B3 = "hb-r1-b3"


def r1_b3_items() -> list:
    return [it for it in load_paper_figures() if it.figure_id == R1_B3]


def hb_takeaways(ledger_hb: Optional[HBRun], hb_run: Optional[Run], n_resamples: int, boot_seed: int) -> list[str]:
    """What the reference decider's memories keep, and a model's R1 / B3 accuracy beside the paper."""
    lines = []
    if ledger_hb is not None:
        t = controlled_summary(ledger_hb.decisions("controlled"), PRIMARY_BUDGET)
        if {"R1", "B4"} <= set(t.index):
            lines.append(f"What the memories keep ({REFERENCE}, r = {PRIMARY_BUDGET}): R1 holds the complete hidden "
                         f"profile in <b>{t.loc['R1', 'profile_complete']:.0f}%</b> of memories, B4 (first mention) in "
                         f"{t.loc['B4', 'profile_complete']:.0f}%.")
    if hb_run is not None:
        items = r1_b3_items()
        v = suite_values(items, hb_run, bootstrap(hb_run, min(n_resamples, MAX_HB_RESAMPLES), boot_seed), "hiddenbench")
        for it, x in zip(items, v):
            if x is not None and not np.isnan(x["estimate"]):
                lines.append(f"{name_html(hb_run)}: {it.label} = <b>{x['estimate']:.1f}</b> "
                             f"[{x['lo']:.1f}, {x['hi']:.1f}] (paper: {paper_text(it.ref)}).")
    else:
        lines.append("No model decided HiddenBench tasks on this page (the reference decider reports what the memories "
                     "keep only); accuracy needs a model backend (parameter <code>backend</code>).")
    return lines


def kept_table(ledger_hb: HBRun) -> pd.DataFrame:
    """Controlled HiddenBench, reference decider: mean kept hidden and shared facts per policy (no accuracy)."""
    t = controlled_summary(ledger_hb.decisions("controlled"), PRIMARY_BUDGET)
    return t.drop(columns=[c for c in ("accuracy", "invalid", "decisions") if c in t.columns])


def headroom_warning(model_hb: HBRun, boot_seed: int):
    """The warning box when the model's HiddenBench headroom check fails, else None."""
    h = headroom(model_hb.decisions("controlled"), np.random.default_rng(boot_seed))
    if h is None or h.passes:
        return None
    return admonition("warning", "Headroom check failed: exploratory results",
                      f"ALL - EMPTY = {h.difference:.1f} points [{h.low:.1f}, {h.high:.1f}] over {h.n_tasks} "
                      f"tasks for {html.escape(model_hb.label)}; the lower bound must exceed "
                      f"{HEADROOM_MIN_POINTS:g} points.")


def model_controlled_table(model_hb: HBRun) -> pd.DataFrame:
    """Controlled HiddenBench, a model: accuracy and kept facts per policy beside the paper's columns."""
    return controlled_summary(model_hb.decisions("controlled"), PRIMARY_BUDGET).join(paper_table("controlled"),
                                                                                      how="outer")


def r1_b3_table(hb_run: Run, n_resamples: int, boot_seed: int) -> pd.DataFrame:
    """R1, B3 and R1 - B3 (mean over the budgets) of a model run beside the paper's values."""
    t = paper_vs_suite(r1_b3_items(), {"hiddenbench": [hb_run]}, n_resamples=min(n_resamples, MAX_HB_RESAMPLES),
                       seed=boot_seed)
    return t.set_index([("quantity", "")]).drop(columns=[("result", "")])


def natural_table(model_hb: HBRun) -> pd.DataFrame:
    """The natural discussion per prompt ablation (votes, disclosure, each memory policy's accuracy)."""
    tb = model_hb.tables["natural"]
    return natural_summary(tb["sessions"], tb["votes"], tb["decisions"], PRIMARY_BUDGET)


def natural_paper_table() -> pd.DataFrame:
    """The paper's natural-discussion figures (ranges over its models and runs)."""
    return paper_table("natural")


def one_session(model_hb: HBRun):
    """One natural discussion's artefacts (votes, messages, claims, memories, decisions), collapsed; None
    when the run has none."""
    rec = next(iter_artefacts(model_hb.path, "natural"), None)
    if rec is None:
        return None
    body = "<pre style='white-space: pre-wrap'>" + html.escape(
        json.dumps({k: v for k, v in rec.items() if k != "rows"}, indent=1, default=str)[:20000]) + "</pre>"
    return details(f"Session {rec.get('task_id', '?')} / seed {rec.get('seed', '?')} / "
                   f"{rec.get('ablation', '?')}: votes, messages, claims, memories, decisions "
                   f"({model_hb.label}, data {model_hb.header.get('data_source')})", body)
