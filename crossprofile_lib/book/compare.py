"""The comparison page (``notebooks/14-models.md``): every finding of the paper, one table each, every model side by side.
A :class:`Finding` names the paper quantities it reads (``<figure id>/<item label>``) and the rule that says whether
it *holds* for a run: ``+`` / ``-``: the 95% interval lies above / below 0; ``0``: it covers 0; ``rises``: the first
interval lies wholly below the last and no estimate falls below the one before it (100 then 100 does not break it).
Never "holds" for an uninformative interval or an exploratory run (failed headroom). Each row carries the paper's
value for the SAME model only; the reference decider is one row, labelled as such."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from crossprofile_lib.book.display import HTML, mark_kind, mark_text, variants_phrase
from crossprofile_lib.book.explain import mechanism, why
from crossprofile_lib.book.hbruns import hb_as_run
from crossprofile_lib.book.models import ModelVerdict, headroom_verdict, run_paper_model
from crossprofile_lib.book.paper import (
    MAX_COMPARISON_RESAMPLES,
    _every_model,
    _paper_number,
    run_name,
    suite_values,
    uninformative_interval,
)
from crossprofile_lib.book.runs import REFERENCE, Run, bootstrap
from crossprofile_lib.book.tables import net_lead_where
from crossprofile_lib.paper_figures import paper_item
from crossprofile_lib.stats.format import fmt_ci
from crossprofile_lib.stats.netlead import accuracy_by_net_lead, subset

HOLDS, FAILS = "holds", "does not hold"
#: The reference decider's verdict everywhere: a mechanism is never scored against the paper (issue 52 item 3);
#: what it gives and why it differs from the paper is stated under each finding (:func:`finding_why`).
NOT_SCORED = "not scored: a mechanism (why: below)"


@dataclass(frozen=True)
class Finding:
    """One finding of the paper: a title, what the paper found, the quantities and the rule."""

    key: str
    title: str
    claim: str
    refs: tuple[str, ...]
    rule: tuple[str, ...]   # one of + - 0 per ref, or ("rises",)
    data: str = "crossprofile"
    names: tuple[str, ...] = ()  # how each quantity is named in the table (default: its paper label)


#: The paper's findings, in the order of the page.
FINDINGS: tuple[Finding, ...] = (
    Finding("r1-random", "R1 vs Random", "Rarest-first (R1) is no better than a random memory, over the 8 variants.",
            ("cp-mean/H2: R1 - Random",), ("0",)),
    Finding("h1", "H1: where the decoy is shared", "R1 - B4 is far larger when the decoy is shared than when it is "
            "private.", ("h1/H1",), ("+",)),
    Finding("swing", "The classic / mirror swing", "In the classic cell R1 beats B4; in the mirror cell B4 beats R1.",
            ("classic-r1-b4/R1 - B4", "mirror-r1-b4/R1 - B4"), ("+", "-"),
            names=("classic cell (PSP): R1 - B4", "mirror cell (SPS): R1 - B4")),
    Finding("relevance", "H3 and R1-rel - R1 in the classic cell", "Relevance filtering helps over all variants "
            "(H3) but hurts in the classic cell.", ("h3/H3: R1-rel - R1", "classic-rel/R1-rel - R1"), ("+", "-"),
            names=("H3: R1-rel - R1, 8 variants", "classic cell (PSP): R1-rel - R1")),
    Finding("labels", "Label removal and shuffling", "In the classic cell the ALL memory decides better without "
            "speaker labels, and with shuffled ones.",
            ("classic-labels/ALL unlabeled - ALL", "classic-labels/ALL shuffled - ALL"), ("+", "+")),
    Finding("support-shared", "Support shared - private, ALL memory", "With everything kept, accuracy is higher when "
            "the support is shared.", ("all-support-shared/ALL: support shared - private",), ("+",)),
    Finding("net-lead", "Accuracy by net lead", "Accuracy rises with the net evidence lead of the kept facts.",
            ("net-lead/net lead -2", "net-lead/net lead +2", "net-lead/net lead >= +4"), ("rises",)),
    Finding("hb-r1-b3", "HiddenBench: R1 vs B3", "On controlled HiddenBench, R1 beats B3 (mean over budgets).",
            ("hb-r1-b3/R1 - B3, mean over budgets",), ("+",), "hiddenbench"),
    Finding("hb-reference", "HiddenBench reference memories", "shared-only < EMPTY < private-only.",
            ("hb-reference/shared-only", "hb-reference/EMPTY", "hb-reference/private-only"), ("rises",),
            "hiddenbench"),
)

#: Columns of a finding's table.
COLUMNS = ["run", "quantity", "this run", "paper (same model)", "finding holds?"]


def comparison_page_runs(ch) -> dict:
    """Data kind -> runs: the reference decider and every model; every model's controlled HiddenBench run."""
    return {"crossprofile": [r for r in (ch.ref, *ch.all_models) if r is not None],
            "hiddenbench": [r for r in (hb_as_run(h, "controlled") for h in ch.all_hb_models) if r is not None]}


def _paper_cell(item, run: Run) -> str:
    if run.is_reference:
        return _every_model(item, 1)
    pm = run_paper_model(run)
    if pm is None:
        return "– (not one of the paper's models)"
    if pm in item.paper:
        return f"{_paper_number(item.paper[pm], item.unit, 1)} ({pm})"
    return f"– (not reported for {pm})"


def _judge_sign(sign: str, est: float, lo: float, hi: float) -> bool:
    return {"+": lo > 0, "-": hi < 0, "0": lo <= 0 <= hi}[sign]


def _gate(est, lo, hi, unit, v: ModelVerdict) -> Optional[str]:
    if est is None or np.isnan(est):
        return "not in this run"
    if uninformative_interval(lo, hi, unit):
        return f"not judged: interval spans {lo:.0f} to {hi:.0f}"
    if not v.counts:
        return "not judged: exploratory (" + v.reason + ")"
    return None


def finding_table(f: Finding, runs: Sequence[Run], n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per (run, quantity) of ``f`` (:data:`COLUMNS`); a ``rises`` verdict sits on the last row."""
    items = [paper_item(r) for r in f.refs]
    rows, estimates = [], {}
    for run in runs:
        boot = bootstrap(run, min(n_resamples, MAX_COMPARISON_RESAMPLES), seed)
        v = headroom_verdict(run, run.boot if run.boot is not None else boot)
        vals = suite_values(items, run, boot, f.data)
        got = [(np.nan, np.nan, np.nan) if x is None else (x["estimate"], x["lo"], x["hi"]) for x in vals]
        if run.is_reference:
            verdicts = [NOT_SCORED] * len(items)
        elif f.rule == ("rises",):
            gates = [_gate(*g, it.unit, v) for g, it in zip(got, items)]
            bad = next((g for g in gates if g), None)
            rises = got[0][2] < got[-1][1] and all(b[0] >= a[0] for a, b in zip(got, got[1:]))
            verdicts = ["(see below)"] * (len(items) - 1) + [bad or (HOLDS if rises else FAILS)]
        else:
            verdicts = [_gate(*g, it.unit, v) or (HOLDS if _judge_sign(sign, *g) else FAILS)
                        for g, it, sign in zip(got, items, f.rule)]
        names = f.names or tuple(it.label for it in items)
        if variants_phrase(run) != "all eight variants":  # a model's sample: the mean is over fewer variants
            names = tuple(n.replace("8 variants", variants_phrase(run).removeprefix("its ")) for n in names)
        for it, name, g, verdict in zip(items, names, got, verdicts):
            shown = "not in this run" if np.isnan(g[0]) else fmt_ci(*g, 1) + mark_text(mark_kind(run), run)
            estimates[(run_name(run), it.ref)] = g[0]
            rows.append({"run": run_name(run), "quantity": name, "this run": shown,
                         "paper (same model)": _paper_cell(it, run), "finding holds?": verdict})
    out = pd.DataFrame(rows, columns=COLUMNS)
    out.attrs["estimates"] = estimates
    return out


def finding_why(f: Finding, t: pd.DataFrame, runs: Sequence[Run], params) -> Optional[object]:
    """Under a finding's table: for the reference decider (the face-value counter), what it gives and why that
    differs from the paper's value (:func:`crossprofile_lib.book.explain.why`, computed); None without one."""
    est = t.attrs.get("estimates", {})
    lines = [why(mechanism(params), ref, est.get((run_name(r), ref)))
             for r in runs if r.is_reference and not r.header.get("config", {}).get("backend_options")
             for ref in f.refs if (run_name(r), ref) in est and f.data == "crossprofile"]
    return HTML("<ul class='cp-why'>" + "".join(f"<li>{x}</li>" for x in lines) + "</ul>") if lines else None


def findings(runs: dict, n_resamples: int = 2000, seed: int = 0) -> list[tuple[Finding, pd.DataFrame]]:
    """Every finding with its table; a finding whose data kind has no run gets an empty table."""
    return [(f, finding_table(f, runs.get(f.data, []), n_resamples, seed)) for f in FINDINGS]


def summary(tables: list[tuple[Finding, pd.DataFrame]]) -> pd.DataFrame:
    """Finding x run: the verdicts of that finding's rows (one cell per run, verdicts joined)."""
    out = {}
    for f, t in tables:
        for run, part in t.groupby("run", sort=False):
            vs = [x.split(" (", 1)[0] for x in part["finding holds?"] if x != "(see below)"]
            out.setdefault(run, {})[f.title] = "; ".join(dict.fromkeys(vs))
    return pd.DataFrame(out).reindex([f.title for f, _ in tables]).fillna("no run of this kind")


def net_lead_tables(runs: Sequence[Run], ch=None) -> dict:
    """Run label -> accuracy by net lead over prereg.yaml's ``net_lead_where`` rows at the run's shown budget
    (exploratory runs marked in their key)."""
    out = {}
    for r in runs:
        d = subset(r.df, net_lead_where(ch, r) if ch is not None else None)
        if d.empty:
            continue
        key = run_name(r) + ("" if headroom_verdict(r).counts else " (exploratory: no headroom)")
        out[key] = accuracy_by_net_lead(d, r.boot if r.boot is not None else bootstrap(r, 200, 0))
    return out


def net_lead_message(tables: dict) -> str:
    """The every-run net-lead figure's title: each run's accuracy at its lowest and highest net lead."""
    parts = []
    for lab, t in tables.items():
        t = t[t["n"] > 0].sort_values("net_lead")
        if len(t):
            parts.append(f"{lab} {t['estimate'].iloc[0]:.0f}% at {int(t['net_lead'].iloc[0]):+d} to "
                         f"{t['estimate'].iloc[-1]:.0f}% at {int(t['net_lead'].iloc[-1]):+d}")
    return ("Accuracy by net lead, lowest to highest: " + "; ".join(parts)) if parts else "No decisions to draw"


def coverage_note(runs: Sequence[Run]) -> str:
    """One sentence (HTML) on which of the paper's models this build has (none: what the rows show instead)."""
    mapped = {r.label: run_paper_model(r) for r in runs if not r.is_reference}
    if not mapped:
        return (f"This build ran no language model: every table shows the {REFERENCE} only (a normative evidence "
                "counter, not a model) beside the paper's values for each of the paper's models.")
    if not any(mapped.values()):
        return ("<b>No GPU model ran for this build, and none of its runs is one of the paper's models</b> ("
                + ", ".join(html.escape(k) for k in mapped) + "): no paper value is set beside them, and their rows "
                "show the pipeline running, not the paper's effects. Rerun with BACKENDS= on a GPU machine or import "
                "its run folders with RUNS= to fill the paper's columns.")
    return ("This build's runs of the paper's models: " + ", ".join(
        f"{html.escape(k)} = {html.escape(m)}" for k, m in mapped.items() if m) + ". Each is set beside its own "
            "paper values only.")
