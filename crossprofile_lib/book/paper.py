"""The paper beside this suite: every number of ``data/paper_figures.yaml`` (the ONE source of
paper values, read through :mod:`crossprofile_lib.paper_figures`) set beside this suite's
estimate of the same quantity. Paper values sit only in columns labelled ``paper``; this
suite's in columns naming the backend and model of their run."""

from __future__ import annotations

import html
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from crossprofile_lib.book.display import uninformative
from crossprofile_lib.book.hbruns import hb_as_run, hb_natural_as_run
from crossprofile_lib.book.runs import Run, bootstrap, unit_column
from crossprofile_lib.design import PRIMARY_BUDGET
from crossprofile_lib.paper_figures import (  # noqa: F401
    PAPER_FIGURES_PATH,
    PaperFiguresError,
    PaperItem,
    load_paper_figures,
    paper_item,
    paper_values,
)
from crossprofile_lib.stats.contrasts import PreregError, evaluate_contrasts, parse_prereg
from crossprofile_lib.stats.format import fmt_ci


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
    """A wide table: one row per paper number; columns ``('paper', model)`` with the paper's
    values and ``('this suite', run label)`` with this suite's estimate [95% interval].

    ``runs`` maps a data kind (``crossprofile``, ``hiddenbench``) to a list of runs.
    """
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


def paper_text(ref: str, digits: Optional[int] = None) -> str:
    """A paper value for prose, ``"+X (model A) / +Y (model B)"`` (a sign for points, two decimals
    for facts), from the item ``ref`` (``"<figure id>/<item label>"``) of data/paper_figures.yaml."""
    item = paper_item(ref)
    sign = "+" if item.unit == "points" else ""

    def one(v):
        if not isinstance(v, (int, float)):
            return str(v)
        d = digits if digits is not None else (2 if item.unit == "facts" else 1)
        return f"{v:{sign}.{d}f}"
    return " / ".join(f"{one(v)} ({m})" for m, v in item.paper.items())


# --------------------------------------------------------------------------- chapter 11
#: At most this many resamples for the comparison's intervals.
MAX_COMPARISON_RESAMPLES = 2000


def comparison_runs(ch) -> dict:
    """Data kind -> the runs chapter 11 compares with the paper: the reference decider, its social-proof
    run and the model sample (CrossProfile); the model's controlled and natural HiddenBench runs."""
    hb_run, hb_natural = hb_as_run(ch.hb_model, "controlled"), hb_natural_as_run(ch.hb_model)
    return {"crossprofile": [r for r in (ch.ref, ch.sp, ch.model) if r is not None],
            "hiddenbench": [r for r in (hb_run,) if r], "natural": [r for r in (hb_natural,) if r]}


def comparison(items: Sequence[PaperItem], runs: dict, n_resamples: int, seed: int) -> pd.DataFrame:
    """:func:`paper_vs_suite` with at most :data:`MAX_COMPARISON_RESAMPLES` resamples."""
    return paper_vs_suite(items, runs, n_resamples=min(n_resamples, MAX_COMPARISON_RESAMPLES), seed=seed)


def share_within(tab: pd.DataFrame, items: Sequence[PaperItem], col) -> tuple[int, int]:
    """How many paper values (per model) lie inside the 95% interval of column ``col`` of a
    :func:`paper_vs_suite` table: ``(inside, total)``. An interval that spans about 0-100
    (:func:`crossprofile_lib.book.display.uninformative`) is left out of both counts."""
    inside = total = 0
    for k, it in enumerate(items):
        cell = str(tab[col].iloc[k])
        if "[" not in cell:
            continue
        lo, hi = (float(x) for x in cell.split("[", 1)[1].rstrip("]").split(","))
        if uninformative(lo, hi):  # an interval spanning about 0-100 holds anything: never agreement
            continue
        for v in it.paper.values():
            if isinstance(v, (int, float)):
                total += 1
                inside += lo <= v <= hi
    return inside, total


def agreement_takeaways(tab: pd.DataFrame, items: Sequence[PaperItem]) -> list[str]:
    """Per run column: how many paper values lie inside its intervals; and how to read that."""
    lines = []
    for col in [c for c in tab.columns if c[0] == "this suite"]:
        inside, total = share_within(tab, items, col)
        if total:
            lines.append(f"{html.escape(col[1])}: {inside} of {total} paper values lie inside this run's 95% interval.")
    lines.append("A value inside an interval of the reference decider says the effect follows from what the memory keeps; "
                 "one outside says the paper's models add something of their own (chapter 6).")
    return lines


def by_chapter(tab: pd.DataFrame, items: Sequence[PaperItem]) -> list[tuple[str, pd.DataFrame]]:
    """The comparison split by the paper's chapter, each part indexed by (result, quantity), columns
    that are empty throughout left out."""
    out = []
    for chapter, part in tab.groupby(pd.Series([it.chapter for it in items]), sort=False):
        part = part.set_index([("result", ""), ("quantity", "")])
        part.index.names = ["result", "quantity"]
        out.append((chapter, part.loc[:, [c for c in part.columns if not part[c].astype(str).eq("").all()]]))
    return out
