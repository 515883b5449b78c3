"""Why this build's reference decider and the paper differ, computed, never typed (issue 52 item 2).

The book's reference decider counts the kept facts at face value: no weight on speaker labels (``s = 0``), no weight on
irrelevant facts and no decision noise (a strict win decides, only a tie is drawn). Where the paper's value differs
from it, the question is what would produce the paper's value. :func:`mechanism` answers it from the same decider on
this build's memories (templates, seeds and pricing of the reference runs), exactly (choice probabilities, no
sampling; :func:`crossprofile_lib.paperfit.predict_grid`):

* the face-value counter (expected over its tie draws);
* a **sweep of the label weight** ``s`` with no noise (:data:`S_SWEEP`): whether one weight alone reaches the paper's
  value, and how a counter with no noise answers it (all at once, a step, where the weight tips a comparison);
* the decider at the ``(s, w, beta)`` that chapter 13 fits to each paper model's published figures (the point fit
  of :func:`crossprofile_lib.paperfit.fit_paper`, no refits): whether a label weight *with decision noise* produces
  the paper's value, and where even that misses.

:func:`why` turns one figure's row into a sentence whose every number, and whose verdict, comes from that table.
The sentence explains a mechanism; it measures no language model.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import numpy as np
import pandas as pd

from crossprofile_lib.book.display import mark, mark_text
from crossprofile_lib.book.paper import figure_name, paper_text
from crossprofile_lib.book.params import BookParams
from crossprofile_lib.book.runs import REFERENCE, reference_tokenizer, resolve
from crossprofile_lib.paper_figures import paper_item
from crossprofile_lib.paperfit import fit_paper, predict_grid
from crossprofile_lib.paperfit.figures import short

#: decision noise of the face-value counter: so little that only ties are random (``beta`` = inverse temperature)
FACE_BETA = 1e4
#: the label weights of the sweep (no noise, no irrelevant weight)
S_SWEEP = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)
#: points (or %) within which a value "reaches" the paper's
NEAR = 3.0


@dataclass(frozen=True)
class Mechanism:
    """``sweep``: figure x label weight ``s`` (no noise); ``fit``: figure x paper model, the decider at that model's
    fitted ``(s, w, beta)`` (NaN where not predicted); ``theta``: paper model -> (s, w, beta); ``tokenizer``: the
    pricing of the memories; ``error``: why nothing could be computed (empty when it could)."""

    sweep: pd.DataFrame
    fit: pd.DataFrame
    theta: dict
    tokenizer: str
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def mechanism(p: BookParams) -> Mechanism:
    """The sweep and the fitted deciders on this build's templates, seeds and reference pricing (cached on disk by
    :mod:`crossprofile_lib.paperfit`; computed once per process)."""
    tok, _ = reference_tokenizer(p.tokenizer)
    return _mechanism(tuple(str(resolve(t)) for t in p.templates), tuple(p.seeds), tok)


@lru_cache(maxsize=4)
def _mechanism(templates: tuple, seeds: tuple, tokenizer: Optional[str]) -> Mechanism:
    label = tokenizer or "offline"
    try:
        sweep = predict_grid([[s, 0.0, FACE_BETA] for s in S_SWEEP], templates, seeds, tokenizer=tokenizer)
        sweep.columns = list(S_SWEEP)
        res = fit_paper(templates=list(templates), seeds=list(seeds), resamples=0, with_recovery=False,
                        with_profiles=False, tokenizer=tokenizer)
    except (ValueError, OSError) as e:  # no decision figure estimable on these templates, a cache folder refused
        return Mechanism(pd.DataFrame(), pd.DataFrame(), {}, label, error=f"{type(e).__name__}: {e}")
    theta = {m: tuple(float(x) for x in f["theta"]) for m, f in res.info.get("fits", {}).items()}
    names = {short(m): m for m in theta}
    fit = res.figures.assign(model=res.figures.model.map(lambda k: names.get(k, k))).pivot_table(
        index="figure", columns="model", values="fit", aggfunc="first")
    return Mechanism(sweep, fit, theta, label)


def _num(x: float, unit: str) -> str:
    return "–" if x is None or not math.isfinite(x) else (f"{x:+.1f}" if unit == "points" else f"{x:.1f}%")


def _paper_values(ref: str) -> dict:
    return {m: float(v) for m, v in paper_item(ref).paper.items() if isinstance(v, (int, float))}


def why(m: Mechanism, ref: str, run_value: Optional[float] = None) -> str:
    """One sentence (HTML) on why the face-value counter gives what it gives for the paper figure ``ref`` and what
    would give the paper's value, every number and verdict computed from ``m``; ``run_value``: this build's
    reference run's value (shown as the face value; else the counter's expectation over its tie draws)."""
    if not m.ok or ref not in m.sweep.index:
        return (f"No mechanism computed for {html.escape(figure_name(ref))}"
                + (f" ({html.escape(m.error)})." if m.error else "."))
    it = paper_item(ref)
    unit, paper = it.unit, _paper_values(ref)
    if not paper:
        return f"The paper reports no model's number for {html.escape(it.label)}."
    sweep = m.sweep.loc[ref]
    face = float(sweep.loc[0.0]) if run_value is None or not math.isfinite(run_value) else float(run_value)
    target = float(np.mean(list(paper.values())))
    reach = [s for s in S_SWEEP[1:] if abs(sweep.loc[s] - target) <= NEAR]
    steps = ", ".join(f"s = {s:g}: {_num(sweep.loc[s], unit)}" for s in S_SWEEP[1:]) + " " + mark("reference")
    out = [f"<b>Why, {html.escape(figure_name(ref))}</b> (computed: the {REFERENCE} on this build's memories, "
           f"{html.escape(m.tokenizer)} pricing): at face value it gives {_num(face, unit)} {mark('reference')} against "
           f"the paper's {html.escape(paper_text(ref))}."]
    if abs(face - target) <= NEAR:
        out.append(f"That is within {NEAR:g} of the paper: what the memory keeps is enough to give it.")
        return " ".join(out)
    jumps = [(a, b) for a, b in zip(S_SWEEP, S_SWEEP[1:]) if abs(sweep.loc[b] - sweep.loc[a]) >= 20]
    out.append(f"Weighing each extra speaker label by s, with no decision noise: {steps}.")
    if reach:
        out.append(f"A label weight alone reaches the paper's value (s = {reach[0]:g}).")
    else:
        near = min(S_SWEEP[1:], key=lambda s: abs(sweep.loc[s] - target))
        out.append(f"No label weight alone reaches it (nearest: s = {near:g}, {_num(sweep.loc[near], unit)})"
                   + (f"; between s = {jumps[0][0]:g} and {jumps[0][1]:g} it jumps by "
                      f"{abs(sweep.loc[jumps[0][1]] - sweep.loc[jumps[0][0]]):.0f}: a counter with no noise turns all at "
                      "once where a weight tips its comparison" if jumps else "") + ".")
    fitted = []
    for model, th in m.theta.items():
        if model in paper and model in m.fit.columns and ref in m.fit.index and math.isfinite(m.fit.loc[ref, model]):
            v = float(m.fit.loc[ref, model])
            fitted.append((model, th, v, paper[model]))
    if fitted:
        parts = [f"{html.escape(short(model))} (s = {th[0]:.2f}, w = {th[1]:.2f}, beta = {th[2]:.2f}): "
                 f"{_num(v, unit)} {mark('reference')} against {_num(pv, unit)}" for model, th, v, pv in fitted]
        out.append("With decision noise, at the (s, w, beta) chapter 13 fits to each paper model's figures: "
                   + "; ".join(parts) + ".")
        worst = max(abs(v - pv) for _, _, v, pv in fitted)
        if worst <= NEAR and reach:
            out.append("Either gives the paper's value: a label weight alone, or the fitted weight with noise.")
        elif worst <= NEAR:
            out.append("So the paper's value needs decision noise: a counter without it gives no such value at any "
                       "label weight.")
        elif worst <= 2 * NEAR:
            out.append(f"The fitted mechanism comes within {worst:.1f} of the paper for every model.")
        else:
            out.append(f"Even fitted, the mechanism misses it by up to {worst:.1f} for some model: the paper's models do "
                       "something this counter does not.")
    return " ".join(out)


def why_table(m: Mechanism, refs) -> pd.DataFrame:
    """Per figure of ``refs``: the paper's values, the face-value counter, the label-weight sweep and the fitted
    deciders (a table for chapter 13 and the comparison pages)."""
    rows = []
    for ref in refs:
        if not m.ok or ref not in m.sweep.index:
            continue
        it = paper_item(ref)
        mk = mark_text("reference")
        row = {"paper figure": figure_name(ref), "paper": paper_text(ref),
               "face value (s = 0)": _num(m.sweep.loc[ref, 0.0], it.unit) + mk}
        row.update({f"s = {s:g}": _num(m.sweep.loc[ref, s], it.unit) + mk for s in S_SWEEP[1:]})
        for model in m.theta:
            if model in m.fit.columns and ref in m.fit.index:
                row[f"fitted to {short(model)}"] = _num(m.fit.loc[ref, model], it.unit) + mk
        rows.append(row)
    return pd.DataFrame(rows).set_index("paper figure") if rows else pd.DataFrame()


def reference_why_table(m: Mechanism, long: pd.DataFrame, items) -> pd.DataFrame:
    """:func:`why_table` for the quantities chapter 11 sets beside the reference decider (``long``: its long
    comparison; ``items``: the paper items), in the table's order."""
    ref_q = set(long.loc[long["reference"].astype(bool), "quantity"]) if len(long) else set()
    refs = [it.ref for it in items if f"{it.result}: {it.label}" in ref_q]
    return why_table(m, refs)
