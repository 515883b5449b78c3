"""Chapter 8's tables: controlled HiddenBench, the natural discussion per prompt ablation and one session's artefacts;
one block per model beside the SAME model's paper value, with its headroom verdict."""

from __future__ import annotations

import html
import json
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from crossprofile_lib.book.display import MIN_TEMPLATES_FOR_INTERVALS, admonition, details, name_html, near_chance
from crossprofile_lib.book.hbruns import HBRun, hb_as_run
from crossprofile_lib.book.models import run_paper_model
from crossprofile_lib.book.paper import SHARED_PAPER_VALUES, paper_text, paper_vs_suite, suite_values
from crossprofile_lib.book.runs import REFERENCE, Run, bootstrap
from crossprofile_lib.design import HEADROOM_MIN_POINTS, PRIMARY_BUDGET
from crossprofile_lib.hiddenbench.measures import controlled_summary, headroom, natural_summary, paper_table
from crossprofile_lib.hiddenbench.run import iter_artefacts
from crossprofile_lib.paper_figures import load_paper_figures

#: At most this many resamples for HiddenBench's task-bootstrap intervals.
MAX_HB_RESAMPLES = 2000
#: The paper's controlled-HiddenBench figure (R1 vs B3).
R1_B3 = "hb-r1-b3"


def r1_b3_items() -> list:
    return [it for it in load_paper_figures() if it.figure_id == R1_B3]


def hb_missing(ch, hbs: Sequence[HBRun]) -> list[str]:
    """One sentence per model run of the book with no HiddenBench run here, naming it."""
    have = {h.backend for h in hbs}
    out = []  # chapter 8 reads no CrossProfile run itself: the book's model runs come from its BookRuns
    for r in ch.all_models or ch.runs.models():
        if r.backend in have:
            continue
        why = ch.runs.skipped.get(f"hiddenbench:{r.backend}", "")
        out.append(f"{r.label} (run folder {r.path}) has no HiddenBench run in this book: "
                   + (f"it could not run here ({why})." if why else
                      "it is an imported CrossProfile run folder; import its HiddenBench folder too (RUNS=...) to "
                      "show it here."))
    return out


def hb_takeaways(ledger_hb: Optional[HBRun], hb_run, n_resamples: int, boot_seed: int) -> list[str]:
    """What the reference decider's memories keep, each model's R1 / B3 accuracy beside its paper value."""
    runs = [r for r in (hb_run if isinstance(hb_run, (list, tuple)) else [hb_run]) if r is not None]
    lines, items = [], r1_b3_items()
    if ledger_hb is not None:
        t = controlled_summary(ledger_hb.decisions("controlled"), PRIMARY_BUDGET)
        if {"R1", "B4"} <= set(t.index):
            lines.append(f"What the memories keep ({REFERENCE}, r = {PRIMARY_BUDGET}): R1 holds the complete hidden "
                         f"profile in <b>{t.loc['R1', 'profile_complete']:.0f}%</b> of memories, B4 (first mention) in "
                         f"{t.loc['B4', 'profile_complete']:.0f}%.")
    for hb_run in runs:
        v = suite_values(items, hb_run, bootstrap(hb_run, min(n_resamples, MAX_HB_RESAMPLES), boot_seed), "hiddenbench")
        for it, x in zip(items, v):
            if x is not None and not np.isnan(x["estimate"]):
                lines.append(f"{name_html(hb_run)}: {it.label} = <b>{x['estimate']:.1f}</b> "
                             f"[{x['lo']:.1f}, {x['hi']:.1f}] (paper, same model: "
                             f"{html.escape(paper_text(it.ref, run=hb_run))}).")
    if not runs:
        lines.append("No model decided HiddenBench tasks on this page (the reference decider reports what the memories "
                     "keep only); accuracy needs a model backend (parameter <code>backend</code>).")
    return lines


def kept_table(ledger_hb: HBRun) -> pd.DataFrame:
    """Controlled HiddenBench, reference decider: mean kept hidden and shared facts per policy (no accuracy)."""
    t = controlled_summary(ledger_hb.decisions("controlled"), PRIMARY_BUDGET)
    return t.drop(columns=["accuracy", "invalid", "decisions"], errors="ignore")


def headroom_warning(model_hb: HBRun, boot_seed: int):
    """The warning box when the model's HiddenBench headroom check fails, else None."""
    h = headroom(model_hb.decisions("controlled"), np.random.default_rng(boot_seed))
    if h is None or h.passes:
        return None
    return admonition("warning", "Headroom check failed: exploratory results",
                      f"ALL - EMPTY = {h.difference:.1f} points [{h.low:.1f}, {h.high:.1f}] over {h.n_tasks} "
                      f"tasks for {html.escape(model_hb.label)}; the lower bound must exceed "
                      f"{HEADROOM_MIN_POINTS:g} points.")


def _same_model(paper_models: Sequence[str], run) -> list[str]:
    """The paper models whose values may stand beside ``run`` (every model for the reference decider)."""
    if run is None or run.is_reference:
        return list(paper_models)
    pm = run_paper_model(run)
    return [m for m in paper_models if (pm is not None and m == pm) or m in SHARED_PAPER_VALUES]


def hb_status(model_hb: HBRun, boot_seed: int) -> str:
    """Whether a model's HiddenBench numbers are confirmatory or exploratory, one sentence naming the run."""
    h = headroom(model_hb.decisions("controlled"), np.random.default_rng(boot_seed))
    if h is None:
        return f"{model_hb.label}: exploratory (headroom not measured: no ALL and EMPTY decisions)."
    few = h.n_tasks < MIN_TEMPLATES_FOR_INTERVALS
    run = hb_as_run(model_hb, "controlled")
    flagged = run is not None and near_chance(run)  # as its label is flagged in the takeaways and captions
    ok = h.passes and not few and not flagged
    why = (f"; only {h.n_tasks} tasks, too few for the check to mean much" if few else
           "; its accuracies are not above chance" if flagged and h.passes else "")
    return (f"{model_hb.label}: " + ("confirmatory" if ok else "exploratory") + f" (headroom ALL - EMPTY = "
            f"{h.difference:.1f} points [{h.low:.1f}, {h.high:.1f}] over {h.n_tasks} tasks; the lower bound must "
            f"exceed {HEADROOM_MIN_POINTS:g}{why}).")


def model_controlled_table(model_hb: HBRun) -> pd.DataFrame:
    """A model's accuracy and kept facts per policy beside its own paper column (``paper <model>``)."""
    paper = paper_table("controlled")
    keep = _same_model([c.removeprefix("paper ") for c in paper.columns], model_hb)
    t = controlled_summary(model_hb.decisions("controlled"), PRIMARY_BUDGET)
    return t.join(paper[[f"paper {m}" for m in keep]], how="outer") if keep else t


def r1_b3_table(hb_run: Run, n_resamples: int, boot_seed: int) -> pd.DataFrame:
    """R1, B3 and R1 - B3 (mean over the budgets) of a model run beside the paper's values for the same model."""
    t = paper_vs_suite(r1_b3_items(), {"hiddenbench": [hb_run]}, n_resamples=min(n_resamples, MAX_HB_RESAMPLES),
                       seed=boot_seed)
    keep = set(_same_model([m for top, m in t.columns if top == "paper"], hb_run))
    t = t[[c for c in t.columns if c[0] != "paper" or c[1] in keep]]
    return t.set_index([("quantity", "")]).drop(columns=[("result", "")])


def natural_table(model_hb: HBRun) -> pd.DataFrame:
    """The natural discussion per prompt ablation (votes, disclosure, each memory policy's accuracy)."""
    tb = model_hb.tables["natural"]
    return natural_summary(tb["sessions"], tb["votes"], tb["decisions"], PRIMARY_BUDGET)


def natural_paper_table() -> pd.DataFrame:
    """The paper's natural-discussion figures (ranges over its models and runs)."""
    return paper_table("natural")


def one_session(model_hb: HBRun):
    """One natural discussion's artefacts (votes, messages, claims, memories, decisions), collapsed; or None."""
    rec = next(iter_artefacts(model_hb.path, "natural"), None)
    if rec is None:
        return None
    body = "<pre style='white-space: pre-wrap'>" + html.escape(
        json.dumps({k: v for k, v in rec.items() if k != "rows"}, indent=1, default=str)[:20000]) + "</pre>"
    return details(f"Session {rec.get('task_id', '?')} / seed {rec.get('seed', '?')} / "
                   f"{rec.get('ablation', '?')}: votes, messages, claims, memories, decisions "
                   f"({model_hb.label}, data {model_hb.header.get('data_source')})", body)
