"""The paper beside this suite: every number of ``data/paper_figures.yaml`` set beside this suite's estimate of the
same quantity; paper values only in columns labelled ``paper``, this suite's in columns naming the run's model.
The comparison page's findings are in :mod:`.compare`, chapter 8's HiddenBench tables in :mod:`.hbtables`."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from crossprofile_lib.book.display import mark_text, near_chance, quantity_mark_kind, uninformative, variants_phrase
from crossprofile_lib.book.hbruns import hb_as_run, hb_natural_as_run
from crossprofile_lib.book.models import ModelVerdict, headroom_verdict, run_paper_model
from crossprofile_lib.book.runs import REFERENCE, Run, bootstrap, unit_column
from crossprofile_lib.design import PRIMARY_BUDGET
from crossprofile_lib.paper_figures import (  # noqa: F401
    PAPER_FIGURES_PATH,
    PaperFiguresError,
    PaperItem,
    load_paper_figures,
    paper_item,
)
from crossprofile_lib.stats.contrasts import PreregError, evaluate_contrasts, parse_prereg
from crossprofile_lib.stats.format import fmt_ci

#: Paper values not tied to one model ("models not separated", "range over models"): shown beside every run.
SHARED_PAPER_VALUES = ("models not separated", "range over models")


def suite_values(items: Sequence[PaperItem], run: Run, boot, data: str = "crossprofile") -> list[Optional[dict]]:
    """This suite's estimate and interval for each item whose ``data`` matches (else None)."""
    out: list[Optional[dict]] = [None] * len(items)
    for k, it in enumerate(items):  # one by one: a column missing for one item must not sink the rest
        if it.data != data or not it.measure:
            continue
        m = dict(it.measure)
        c = {"id": f"item{k}", **{key: m[key] for key in ("outcome", "scale", "where", "terms") if key in m}}
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
        for run in [r for r in rs if r is not None]:
            vals = suite_values(items, run, bootstrap(run, n_resamples, seed), data)
            col = ("this suite", run.label + ("" if data == "crossprofile" else f" · {data}"))
            rows[col] = [("–" if v is None else "not in this run" if np.isnan(v["estimate"]) else
                          fmt_ci(v["estimate"], v["lo"], v["hi"], 2 if it.unit == "facts" else 1)
                          + mark_text(quantity_mark_kind(it.unit, it.label, run), run))
                         for it, v in zip(items, vals)]
    return rows


def same_model_values(paper: dict, run: Optional[Run] = None) -> Optional[dict]:
    """The paper values that may stand beside ``run``: every model's (the reference decider, or no run); a model
    run's own paper model's plus :data:`SHARED_PAPER_VALUES`; None for a model not in the paper."""
    if run is None or run.is_reference:
        return paper
    pm = run_paper_model(run)
    return None if pm is None else {m: v for m, v in paper.items() if m == pm or m in SHARED_PAPER_VALUES}


def paper_text(ref: str, digits: Optional[int] = None, run=None) -> str:
    """A paper value for prose, ``"+X (model A) / +Y (model B)"``, from item ``ref`` (``"<figure>/<label>"``).

    With a model ``run``: only its own paper model's value (plus values not separated by model), or
    ``"– (not one of the paper's models)"``; the reference decider (or no run): every model's."""
    item = paper_item(ref)
    values = same_model_values(item.paper, run)
    if values is None:
        return "– (not one of the paper's models)"
    if not values and values is not item.paper:
        return f"– (not reported for {run_paper_model(run)})"
    d = digits if digits is not None else (2 if item.unit == "facts" else 1)
    return " / ".join(f"{_paper_number(v, item.unit, d)} ({m})" for m, v in values.items())


#: Figure id -> the words that place an item's label (:func:`figure_name`; the reader never sees an internal id).
FIGURE_PLACES = {"cp-mean": "mean of the 8 variants", "h3": "mean of the 8 variants", "classic-r1-b4": "classic cell",
                 "mirror-r1-b4": "mirror cell", "classic-rel": "classic cell", "classic-kept": "kept in the classic cell",
                 "classic-labels": "classic cell", "classic-b4-decoy": "classic cell",
                 "relevance-filter": "relevance filter", "hb-r1-b3": "controlled HiddenBench",
                 "hb-reference": "HiddenBench memory"}


def figure_name(ref: str) -> str:
    """A paper figure as a reader names it: ``"cp-mean/H2: R1 - Random"`` -> ``"H2: R1 - Random (mean of the 8
    variants)"``, ``"net-lead/net lead -2"`` -> ``"accuracy at net lead -2"``."""
    fid, _, label = ref.partition("/")
    if fid == "net-lead":
        return f"accuracy at {label}"
    place = FIGURE_PLACES.get(fid)
    return f"{label} ({place})" if place else label


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


def run_name(run: Run) -> str:
    """The row label: the reference decider as such; a near-chance model (SmolLM2-135M) says so."""
    if run.is_reference:
        return f"{REFERENCE} (not a model)"
    return run.label + (" · near chance" if near_chance(run) else "")


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
    rows, named = [], {}
    for data, rs in runs.items():
        for run in [r for r in rs if r is not None]:
            boot = bootstrap(run, n_resamples, seed)
            v = headroom_verdict(run, boot)
            vals = suite_values(items, run, boot, data)
            pm = run_paper_model(run)
            name, model = _run_name(run, data), _run_name(run, "crossprofile")
            where = str(getattr(run, "path", "") or id(run))
            if named.setdefault((data, name), where) != where:  # two runs of one name (RUNS= a reference run too)
                name = model = f"{name} · {Path(where).name}"
            for it, val in zip(items, vals):
                if it.data != data:
                    continue
                digits = 2 if it.unit == "facts" else 1
                est, lo, hi = (np.nan,) * 3 if val is None else (val["estimate"], val["lo"], val["hi"])
                shown = ("no comparable measure" if val is None else
                         "not in this run" if np.isnan(est) else
                         fmt_ci(est, lo, hi, digits) + mark_text(quantity_mark_kind(it.unit, it.label, run), run))
                q = f"{it.result}: {it.label}"
                if "8 variants" in q and variants_phrase(run) != "all eight variants":  # a model's sample
                    q += f" (this run: {variants_phrase(run).removeprefix('its ')})"
                base = {"chapter": it.chapter, "quantity": q, "unit": it.unit, "run": name,
                        "this run": shown, "model": model, "reference": run.is_reference,
                        "page": CHAPTER_PAGES.get(it.chapter, "")}
                if run.is_reference:
                    rows.append({**base, "paper model": AS_REFERENCE, "paper": _every_model(it, digits),
                                 "reproduced?": REFERENCE_VERDICT, "scored": False})
                    continue
                shared = [(m, x) for m, x in it.paper.items() if m in SHARED_PAPER_VALUES]
                pairs = ([("(none)", None)] if pm is None else
                         [(pm, it.paper[pm])] if pm in it.paper else shared or [(pm, None)])
                for m, pv in pairs:
                    if pv is None:
                        verdict_text = ("no paper value: not one of the paper's models" if m == "(none)"
                                        else f"the paper reports no {it.label} for {m}")
                    else:
                        verdict_text = (reproduced(pv, est, lo, hi, it.unit, v) if val is not None
                                        else "no comparable measure in this suite")
                    rows.append({**base, "paper model": m, "reproduced?": verdict_text, "scored": verdict_text in (YES, NO),
                                 "paper": NO_VALUE if pv is None else _paper_number(pv, it.unit, digits)})
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
                     "reference, never scored, here as on every page: the last tables set it beside every paper model's "
                     "value and compute, for each, what would give the paper's value (a label weight, decision noise, "
                     'or neither: <a href="13-what-social-proof-explains.html">chapter 13</a>).')
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
