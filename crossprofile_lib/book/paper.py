"""The paper beside this suite: every number of ``data/paper_figures.yaml`` set beside this suite's estimate of the
same quantity; paper values only in columns labelled ``paper``, this suite's in columns naming the run's model.

The comparison page (``notebooks/14-models.md``): every finding of the paper, one table each, every model side by side.
A :class:`Finding` names the paper quantities it reads (``<figure id>/<item label>``) and the rule that says whether
it *holds* for a run: ``+`` / ``-``: the 95% interval lies above / below 0; ``0``: it covers 0; ``rises``: the first
interval lies wholly below the last and no estimate falls below the one before it (100 then 100 does not break it).
Never "holds" for an uninformative interval or an exploratory run (failed headroom). Each row carries the paper's
value for the SAME model only; the reference decider is one row, labelled as such.

Chapter 8's tables: controlled HiddenBench, the natural discussion per prompt ablation and one session's artefacts;
one block per model beside the SAME model's paper value, with its headroom verdict."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from crossprofile_lib.book.display import MIN_TEMPLATES_FOR_INTERVALS, admonition, details, name_html, near_chance, uninformative
from crossprofile_lib.book.hbruns import HBRun, hb_as_run, hb_natural_as_run
from crossprofile_lib.book.models import ModelVerdict, headroom_verdict, run_paper_model
from crossprofile_lib.book.runs import REFERENCE, Run, bootstrap, unit_column
from crossprofile_lib.book.tables import net_lead_where
from crossprofile_lib.design import HEADROOM_MIN_POINTS, PRIMARY_BUDGET
from crossprofile_lib.hiddenbench import iter_artefacts
from crossprofile_lib.hiddenbench.measures import controlled_summary, headroom, natural_summary, paper_table
from crossprofile_lib.paper_figures import (  # noqa: F401
    PAPER_FIGURES_PATH,
    PaperFiguresError,
    PaperItem,
    load_paper_figures,
    paper_item,
)
from crossprofile_lib.stats.contrasts import PreregError, evaluate_contrasts, parse_prereg
from crossprofile_lib.stats.format import fmt_ci
from crossprofile_lib.stats.netlead import accuracy_by_net_lead, subset

#: Paper values not tied to one model ("models not separated", "range over models"): shown beside every run.
SHARED_PAPER_VALUES = ("models not separated", "range over models")


def suite_values(items: Sequence[PaperItem], run: Run, boot, data: str = "crossprofile") -> list[Optional[dict]]:
    """This suite's estimate and interval for each item whose ``data`` matches (else None)."""
    idx = [k for k, it in enumerate(items) if it.data == data and it.measure]
    out: list[Optional[dict]] = [None] * len(items)
    contrasts = []
    for k in idx:
        m = dict(items[k].measure)
        contrasts.append({"id": f"item{k}", **{key: m[key] for key in ("outcome", "scale", "where", "terms") if key in m}})
    for k, c in zip(idx, contrasts):  # one by one: a column missing for one item must not sink the rest
        doc = {"defaults": {"outcome": "correct", "scale": 100, "where": {"budget_label": PRIMARY_BUDGET}},
               "contrasts": [c]}
        try:
            r = evaluate_contrasts(run.df, parse_prereg(doc, str(PAPER_FIGURES_PATH)), boot,
                                   template_col=unit_column(run.df)).iloc[0]
        except (PreregError, KeyError, ValueError) as e:
            out[k] = dict(estimate=np.nan, lo=np.nan, hi=np.nan, reason=str(e))
            continue
        out[k] = dict(estimate=r.estimate, lo=r.lo, hi=r.hi, reason=r.reason)
    return out


def paper_vs_suite(items: Sequence[PaperItem], runs: dict, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per paper number; columns ``('paper', model)`` and ``('this suite', run label)`` (estimate
    [95% interval]); ``runs`` maps a data kind (``crossprofile``, ``hiddenbench``) to runs."""
    models = list(dict.fromkeys(m for it in items for m in it.paper))
    rows = pd.DataFrame({("result", ""): [it.result for it in items],
                         ("quantity", ""): [it.label for it in items],
                         ("unit", ""): [it.unit for it in items]})
    for m in models:
        rows[("paper", m)] = [it.paper.get(m, "") for it in items]
    for data, rs in runs.items():
        for run in rs:
            if run is None:
                continue
            vals = suite_values(items, run, bootstrap(run, n_resamples, seed), data)
            col = ("this suite", run.label + ("" if data == "crossprofile" else f" · {data}"))
            rows[col] = [("–" if v is None else "not in this run" if np.isnan(v["estimate"]) else
                          fmt_ci(v["estimate"], v["lo"], v["hi"], 2 if it.unit == "facts" else 1))
                         for it, v in zip(items, vals)]
    rows.columns = pd.MultiIndex.from_tuples(rows.columns)
    return rows


def paper_text(ref: str, digits: Optional[int] = None, run=None) -> str:
    """A paper value for prose, ``"+X (model A) / +Y (model B)"``, from item ``ref`` (``"<figure>/<label>"``).

    With a model ``run``: only its own paper model's value (plus values not separated by model), or
    ``"– (not one of the paper's models)"``; the reference decider (or no run): every model's."""
    item = paper_item(ref)
    values = item.paper
    if run is not None and not isinstance(run, str) and not run.is_reference:
        pm = run_paper_model(run)
        if pm is None:
            return "– (not one of the paper's models)"
        values = {m: v for m, v in values.items() if m == pm or m in SHARED_PAPER_VALUES}
        if not values:
            return f"– (not reported for {pm})"
    d = digits if digits is not None else (2 if item.unit == "facts" else 1)
    return " / ".join(f"{_paper_number(v, item.unit, d)} ({m})" for m, v in values.items())


#: At most this many resamples for the comparison's intervals.
MAX_COMPARISON_RESAMPLES = 2000


def comparison_runs(ch) -> dict:
    """Data kind -> the runs chapter 11 compares: reference, social-proof and model runs; HiddenBench runs."""
    return {"crossprofile": [r for r in (ch.ref, ch.sp, *ch.all_models) if r is not None],
            "hiddenbench": [r for r in (hb_as_run(h, "controlled") for h in ch.all_hb_models) if r is not None],
            "natural": [r for r in (hb_natural_as_run(h) for h in ch.all_hb_models) if r is not None]}


#: The answers of the "reproduced?" column (the first two are the only scored ones).
YES, NO = "yes", "no"
#: Column names of the long comparison.
LONG_COLUMNS = ["quantity", "run", "paper model", "paper", "this run", "reproduced?"]


def uninformative_interval(lo: float, hi: float, unit: str) -> bool:
    """Whether an interval (% or points; facts: never) spans :data:`UNINFORMATIVE_WIDTH` or more: never agreement."""
    return unit in ("%", "points") and not np.isnan(lo) and uninformative(lo, hi)


def reproduced(paper_value, est: float, lo: float, hi: float, unit: str, v: ModelVerdict) -> str:
    """``yes``/``no``: the paper's value inside/outside the 95% interval; otherwise an answer naming why it is not
    counted (a range, not in the run, an uninformative interval, or exploratory)."""
    if not isinstance(paper_value, (int, float)) or isinstance(paper_value, bool):
        return "not scored: the paper gives a range, not one number"
    if est is None or np.isnan(est):
        return "not in this run"
    if uninformative_interval(lo, hi, unit):
        return f"not counted: interval spans {lo:.0f} to {hi:.0f}, says nothing"
    if not v.counts:
        return "not counted: exploratory (" + (v.reason or "headroom failed") + ")"
    return YES if lo <= paper_value <= hi else NO


def _run_name(run: Run, data: str) -> str:
    name = f"{run.label}, not a model" if run.is_reference else run_name(run)
    return name + ("" if data == "crossprofile" else f" · {data}")


#: Paper chapter (``chapter`` in data/paper_figures.yaml) -> the book page that computes its quantities.
CHAPTER_PAGES = {"rarest-first": "04-rarest-first", "relevance": "05-relevance", "social-proof": "06-social-proof",
                 "net-evidence": "07-net-evidence", "hiddenbench": "08-hiddenbench"}
#: The "paper model" and "reproduced?" cells of a reference run's row: compared as a reference, never scored.
AS_REFERENCE = "every paper model (a reference)"
REFERENCE_VERDICT = "a reference, not scored"
#: The "paper" cell of a row with no paper value to set beside the run.
NO_VALUE = "–"


def _paper_number(pv, unit: str, digits: int) -> str:
    if isinstance(pv, (int, float)) and not isinstance(pv, bool):
        return f"{pv:+.{digits}f}" if unit == "points" else f"{pv:.{digits}f}"
    return str(pv)


def _every_model(item, digits: int) -> str:
    """Every paper model's value of ``item``, ``"+X (model A) / +Y (model B)"`` (none: ``–``)."""
    return " / ".join(f"{_paper_number(v, item.unit, digits)} ({m})" for m, v in item.paper.items()) or NO_VALUE


def long_comparison(items: Sequence[PaperItem], runs: dict, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Chapter 11 in long format: one row per (quantity, run, paper model), :data:`LONG_COLUMNS` plus
    ``chapter``, ``unit``, ``scored``, ``model``, ``reference`` and ``page`` (:data:`CHAPTER_PAGES`).

    A model run is set beside its own paper model's value only (or the shared value); another model gets a row saying
    so. The reference decider gets ONE row per quantity with every model's value and :data:`REFERENCE_VERDICT`."""
    n_resamples = min(n_resamples, MAX_COMPARISON_RESAMPLES)
    rows = []
    for data, rs in runs.items():
        for run in rs:
            if run is None:
                continue
            boot = bootstrap(run, n_resamples, seed)
            v = headroom_verdict(run, boot)
            vals = suite_values(items, run, boot, data)
            pm = run_paper_model(run)
            name, model = _run_name(run, data), _run_name(run, "crossprofile")
            for it, val in zip(items, vals):
                if it.data != data:
                    continue
                digits = 2 if it.unit == "facts" else 1
                if val is None:
                    est = lo = hi = np.nan
                    shown = "no comparable measure"
                else:
                    est, lo, hi = val["estimate"], val["lo"], val["hi"]
                    shown = "not in this run" if np.isnan(est) else fmt_ci(est, lo, hi, digits)
                base = {"chapter": it.chapter, "quantity": f"{it.result}: {it.label}", "unit": it.unit, "run": name,
                        "this run": shown, "model": model, "reference": run.is_reference,
                        "page": CHAPTER_PAGES.get(it.chapter, "")}
                if run.is_reference:
                    rows.append({**base, "paper model": AS_REFERENCE, "paper": _every_model(it, digits),
                                 "reproduced?": REFERENCE_VERDICT, "scored": False})
                    continue
                if pm is None:
                    pairs = [("(none)", None)]
                else:
                    shared = [(m, x) for m, x in it.paper.items() if m in SHARED_PAPER_VALUES]
                    pairs = [(pm, it.paper[pm])] if pm in it.paper else shared or [(pm, None)]
                for m, pv in pairs:
                    if pv is None:
                        verdict_text = ("no paper value: not one of the paper's models" if m == "(none)"
                                        else f"the paper reports no {it.label} for {m}")
                        paper_cell = NO_VALUE
                    else:
                        verdict_text = reproduced(pv, est, lo, hi, it.unit, v) if val is not None else \
                            "no comparable measure in this suite"
                        paper_cell = _paper_number(pv, it.unit, digits)
                    rows.append({**base, "paper model": m, "paper": paper_cell, "reproduced?": verdict_text,
                                 "scored": verdict_text in (YES, NO)})
    return pd.DataFrame(rows, columns=["chapter", *LONG_COLUMNS, "unit", "scored", "model", "reference", "page"])


def _why(verdict: str) -> str:
    """A short reason a row is not comparable (the summary's last column)."""
    for start, why in (("no paper value", "no paper value (not one of the paper's models)"),
                       ("the paper reports no", "the paper reports no value for its model"),
                       ("not counted: interval", "interval too wide to say anything"),
                       ("not counted: exploratory", "exploratory: fails its headroom check"),
                       ("not scored", "the paper gives a range, not one number")):
        if verdict.startswith(start):
            return why
    return "not measured by this run"


def model_summary(long: pd.DataFrame) -> pd.DataFrame:
    """One row per model (not the reference): paper values reproduced, not reproduced, not comparable (why)."""
    rows = []
    for model, part in long[~long["reference"].astype(bool)].groupby("model", sort=False):
        verdicts = part["reproduced?"].astype(str)
        yes, no = int((verdicts == YES).sum()), int((verdicts == NO).sum())
        whys = pd.Series([_why(x) for x in verdicts if x not in (YES, NO)], dtype=object).value_counts()
        pms = [m for m in dict.fromkeys(part["paper model"]) if m not in SHARED_PAPER_VALUES]
        rows.append({"model": model, "paper model": ", ".join(pms).replace("(none)", "none: not one of the paper's models"),
                     "reproduced": yes, "not reproduced": no, "not comparable": int(len(part) - yes - no),
                     "why not comparable": "; ".join(f"{n} {w}" for w, n in whys.items()) or "–"})
    return pd.DataFrame(rows, columns=["model", "paper model", "reproduced", "not reproduced", "not comparable",
                                       "why not comparable"])


#: Columns of chapter 11's main table (a model's rows that have a paper value).
MAIN_COLUMNS = ["quantity", "run", "paper model", "paper", "this run", "reproduced?", "computed in"]


def main_rows(long: pd.DataFrame) -> pd.DataFrame:
    """The models' rows with a paper value beside them (:data:`MAIN_COLUMNS`)."""
    m = long[~long["reference"].astype(bool) & (long["paper"] != NO_VALUE)]
    return m.rename(columns={"page": "computed in"})[MAIN_COLUMNS].reset_index(drop=True)


def left_out_line(long: pd.DataFrame) -> str:
    """One line (HTML) counting the models' rows with no paper value, left out of the main table."""
    models = long[~long["reference"].astype(bool)]
    m = models[models["paper"] == NO_VALUE]
    if models.empty:
        return "None: this build ran no language model, so there is no model row to show."
    if m.empty:
        return "None: every model row has a paper value beside it."
    parts = [f"{len(p)} of {html.escape(str(model))}" for model, p in m.groupby("model", sort=False)]
    return (f"Left out of the table: {len(m)} rows with no paper value to set beside them ({', '.join(parts)}: not one "
            "of the paper's models, or a quantity the paper reports for another model only).")


def reference_rows(long: pd.DataFrame) -> pd.DataFrame:
    """The reference runs beside every paper model's value, one row per quantity; no verdict."""
    ref = long[long["reference"].astype(bool)]
    if ref.empty:
        return pd.DataFrame(columns=["quantity", "paper (every model)", "computed in"])
    out = ref.drop_duplicates("quantity")[["quantity", "paper", "page"]].rename(
        columns={"page": "computed in", "paper": "paper (every model)"}).set_index("quantity", drop=False)
    for run, part in ref.groupby("run", sort=False):
        out[run] = part.set_index("quantity")["this run"].reindex(out.index).fillna("–")
    return out[[c for c in out.columns if c != "computed in"] + ["computed in"]].reset_index(drop=True)


def chapter_link(page: str) -> str:
    """The link (HTML) to the chapter page that computes a quantity: "chapter 4"."""
    if not page:
        return "–"
    return f'<a href="{html.escape(page)}.html">chapter {int(page.split("-")[0])}</a>'


def chapter_links(st, column: str = "computed in"):
    """A table's ``column`` of chapter pages (:data:`CHAPTER_PAGES`) shown as links to those chapters."""
    return st.format(chapter_link, subset=[column])


def long_takeaways(long: pd.DataFrame) -> list[str]:
    """Per model: how many scored paper values it reproduces (none scored: why); the reference is not scored."""
    lines = []
    summary = model_summary(long)
    for _, r in summary.iterrows():
        scored = r["reproduced"] + r["not reproduced"]
        if scored:
            text = (f"{html.escape(r['model'])}: {r['reproduced']} of {scored} paper values of {html.escape(r['paper model'])} "
                    "lie inside its 95% interval")
            if r["not comparable"]:
                text += f"; {r['not comparable']} not comparable ({html.escape(r['why not comparable'])})"
        else:
            text = (f"{html.escape(r['model'])}: none of its {r['not comparable']} rows is compared with the paper "
                    f"({html.escape(r['why not comparable'])})")
        lines.append(text + ".")
    if summary.empty:
        lines.append("This build ran no language model, so no paper value is scored: rerun it with a model "
                     "(<code>make book BACKENDS=...</code>, or <code>RUNS=</code> with run folders from a GPU machine).")
    if long["reference"].astype(bool).any():
        lines.append("The reference decider (a normative evidence counter, not a language model) is compared as a "
                     "reference, never scored: the last table sets it beside every paper model's value. A paper value "
                     "near it says the effect follows from what the memory keeps; one far from it, that the paper's "
                     'models add something of their own (<a href="06-social-proof.html">chapter 6</a>).')
    lines.append("A model is set beside its own paper values only (crossprofile_lib/resources/paper_models.yaml).")
    return lines


#: A sticky first column and wrapping cells: the row labels stay in view on a narrow screen.
LONG_TABLE_STYLES = [
    {"selector": "", "props": "display: block; overflow-x: auto; max-width: 100%;"},
    {"selector": "th.col_heading.level0.col0, td.col0, th.row_heading, th.blank",
     "props": "position: sticky; left: 0; z-index: 1; background: var(--pst-color-background, #fff); "
              "min-width: 11em; max-width: 18em; white-space: normal;"},
    {"selector": "td", "props": "white-space: normal; min-width: 6em;"},
]

HOLDS, FAILS = "holds", "does not hold"


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


def run_name(run: Run) -> str:
    """The row label: the reference decider as such; a near-chance model (SmolLM2-135M) says so."""
    if run.is_reference:
        return f"{REFERENCE} (not a model)"
    return run.label + (" · near chance" if near_chance(run) else "")


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
    rows = []
    for run in runs:
        boot = bootstrap(run, min(n_resamples, MAX_COMPARISON_RESAMPLES), seed)
        v = headroom_verdict(run, run.boot if run.boot is not None else boot)
        vals = suite_values(items, run, boot, f.data)
        got = [(np.nan, np.nan, np.nan) if x is None else (x["estimate"], x["lo"], x["hi"]) for x in vals]
        verdicts = []
        if f.rule == ("rises",):
            gates = [_gate(*g, it.unit, v) for g, it in zip(got, items)]
            bad = next((g for g in gates if g), None)
            ok = (got[0][2] < got[-1][1] and all(got[i + 1][0] >= got[i][0] for i in range(len(got) - 1))
                  if bad is None else None)
            verdicts = ["(see below)"] * (len(items) - 1) + [bad or (HOLDS if ok else FAILS)]
        else:
            for g, it, sign in zip(got, items, f.rule):
                gate = _gate(*g, it.unit, v)
                verdicts.append(gate or (HOLDS if _judge_sign(sign, *g) else FAILS))
        names = f.names or tuple(it.label for it in items)
        for it, name, g, verdict in zip(items, names, got, verdicts):
            shown = "not in this run" if np.isnan(g[0]) else fmt_ci(*g, 1)
            rows.append({"run": run_name(run), "quantity": name, "this run": shown,
                         "paper (same model)": _paper_cell(it, run), "finding holds?": verdict})
    return pd.DataFrame(rows, columns=COLUMNS)


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
        v = headroom_verdict(r)
        d = subset(r.df, net_lead_where(ch, r) if ch is not None else None)
        if d.empty:
            continue
        key = run_name(r) + ("" if v.counts else " (exploratory: no headroom)")
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
    have = sorted({m for m in mapped.values() if m})
    models = [r for r in runs if not r.is_reference]
    if not models:
        return (f"This build ran no language model: every table shows the {REFERENCE} only (a normative evidence "
                "counter, not a model) beside the paper's values for each of the paper's models.")
    if not have:
        return ("<b>No GPU model ran for this build, and none of its runs is one of the paper's models</b> ("
                + ", ".join(html.escape(k) for k in mapped) + "): no paper value is set beside them, and their rows "
                "show the pipeline running, not the paper's effects. Rerun with BACKENDS= on a GPU machine or import "
                "its run folders with RUNS= to fill the paper's columns.")
    return ("This build's runs of the paper's models: " + ", ".join(
        f"{html.escape(k)} = {html.escape(m)}" for k, m in mapped.items() if m) + ". Each is set beside its own "
            "paper values only.")

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
    lines = []
    if ledger_hb is not None:
        t = controlled_summary(ledger_hb.decisions("controlled"), PRIMARY_BUDGET)
        if {"R1", "B4"} <= set(t.index):
            lines.append(f"What the memories keep ({REFERENCE}, r = {PRIMARY_BUDGET}): R1 holds the complete hidden "
                         f"profile in <b>{t.loc['R1', 'profile_complete']:.0f}%</b> of memories, B4 (first mention) in "
                         f"{t.loc['B4', 'profile_complete']:.0f}%.")
    for hb_run in runs:
        items = r1_b3_items()
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
