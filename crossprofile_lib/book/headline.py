"""R1 against B4 and Random in the classic and mirror cells: the landing page's headline numbers (computed from the
build's runs, never typed in) and chapter 4's findings (H1-H2)."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from crossprofile_lib.book.display import admonition, name_html, num
from crossprofile_lib.book.paper import load_paper_figures, paper_text, suite_values
from crossprofile_lib.book.runs import REFERENCE
from crossprofile_lib.book.style import model_signal
from crossprofile_lib.book.tables import cell_entry, cell_rows, cell_value, contrast_row
from crossprofile_lib.design import CLASSIC, HEADROOM_MIN_POINTS, MIRROR
from crossprofile_lib.stats.format import fmt_ci

#: The policies of the central contrast.
HEAD = ("R1", "B4", "Random")
#: The paper's headline figures (ids in data/paper_figures.yaml) and how each row is labelled here.
HEADLINE = {"classic-r1-b4": f"classic cell {CLASSIC}", "mirror-r1-b4": f"mirror cell {MIRROR}",
            "cp-mean": "mean of 8 variants", "h1": "", "h3": "mean of 8 variants"}


def central_cells(ch) -> dict:
    """Run label -> accuracy per policy and cell (no pooled rows) at the run's shown budget."""
    return {r.label: ch.at(r, cell_rows(r, r.boot, ["correct"], pooled=False)) for r in ch.shown}


def headline_line(ch, r, t: pd.DataFrame) -> str:
    """One takeaway line: R1's classic-minus-mirror swing and B4 / Random beside it (HTML)."""
    a = {(p, c): cell_entry(t, p, c) for p in HEAD for c in ("classic", "mirror")}
    if a[("R1", "classic")] is None or a[("R1", "mirror")] is None:
        return f"{name_html(r)}: no classic/mirror decisions at r = {ch.budget(r)}."

    def v(p, c):
        x = a[(p, c)]
        return "–" if x is None else f"{x.estimate:.1f}%"
    swing = a[("R1", "classic")].estimate - a[("R1", "mirror")].estimate
    return (f"<b>{name_html(r)}</b>, r = {ch.budget(r)}: rarest-first (R1) "
            f"decides {v('R1', 'classic')} correctly in the classic cell {CLASSIC} and {v('R1', 'mirror')} in the "
            f"mirror cell {MIRROR}, a swing of <b>{swing:+.1f} points</b> from who holds the decoys alone; "
            f"first-mention (B4) {v('B4', 'classic')} / {v('B4', 'mirror')}, Random {v('Random', 'classic')} / "
            f"{v('Random', 'mirror')}.")


def headline_takeaways(ch, cells: dict) -> list[str]:
    """One :func:`headline_line` per run, then why a run without signal is not interpreted."""
    lines = [headline_line(ch, r, cells[r.label]) for r in ch.shown]
    for r in ch.shown:
        sig = model_signal(r, r.boot)
        if not sig.ok:
            lines.append(html.escape(sig.reason) + " Its numbers above are shown, not interpreted.")
    return lines


def central_contrast(t: pd.DataFrame) -> pd.DataFrame:
    """The central contrast's rows of a :func:`central_cells` table, cells named ``classic`` / ``mirror``."""
    t = t[t.policy.isin(HEAD)]
    return t.assign(cell=t["cell"].str.split(" ").str[0])


def headline_items() -> list:
    """The paper's headline numbers (:data:`HEADLINE`) that this suite can measure."""
    return [it for it in load_paper_figures()
            if it.figure_id in HEADLINE and it.data == "crossprofile" and it.measure and it.unit in ("%", "points")
            and any(isinstance(v, (int, float)) for v in it.paper.values())]


def paper_beside_run(items, r) -> pd.DataFrame:
    """Rows ``quantity, unit, estimate, lo, hi, paper_model, paper`` for :func:`~.figures.paper_vs_run`."""
    rows = []
    for it, v in zip(items, suite_values(items, r, r.boot)):
        if v is None or np.isnan(v["estimate"]):
            continue
        q = f"{it.label}, {HEADLINE[it.figure_id]}" if HEADLINE[it.figure_id] else it.label
        for m, pv in it.paper.items():
            if isinstance(pv, (int, float)):
                rows.append(dict(quantity=q, unit=it.unit, estimate=v["estimate"], lo=v["lo"], hi=v["hi"],
                                 paper_model=m, paper=float(pv)))
    return pd.DataFrame(rows)


def thresholds_note():
    """The box naming this build's thresholds (headroom, cells)."""
    return admonition("note", "Thresholds of this build",
                      f"Headroom: ALL - EMPTY accuracy must exceed {HEADROOM_MIN_POINTS:g} points at the lower "
                      f"95% bound (prereg.yaml). Classic cell {CLASSIC}, mirror cell {MIRROR} "
                      "(<a href='03-methods.html#spec-cells'>the specification, chapter 3</a>).")


#: The copy policies chapter 4 compares, and those of its every-budget table.
CORE = ("R1", "B4", "Random", "M1", "R1-rel")
COPY = ("R1", "B4", "Random", "M1")
#: The contrasts the takeaways state: id, what it measures, its paper item.
STATED = (("H1", "how much R1's lead over B4 depends on who holds the decoys", "h1/H1"),
          ("H2", "R1 - Random over all eight variants", "cp-mean/H2: R1 - Random"))


def signal_line(run) -> str:
    """Whether a model run's results have signal (its headroom check), in one takeaway line."""
    sig = model_signal(run, run.boot)
    return f"{html.escape(run.label)}: " + ("its results have signal (headroom check passed)." if sig.ok else
                                            "no signal to read (" + html.escape(sig.reason.split(': ', 1)[-1]) + ")")


def rarest_takeaways(ch, cells: dict, holm: dict) -> list[str]:
    """R1 and B4 in the classic and mirror cells, H1 and H2 beside the paper, and the model sample's signal."""
    ref = ch.ref
    t = ch.at(ref, cells[ref.label])

    def pct(policy, cell):
        return num(cell_value(t, policy, cell), suffix="%")
    lines = [f"With the {REFERENCE} at r = {ch.budget(ref)}, R1 decides <b>{pct('R1', 'classic')}</b> correctly in the "
             f"classic cell ({CLASSIC}) and <b>{pct('R1', 'mirror')}</b> in the mirror cell ({MIRROR}); B4 "
             f"(first mention) {pct('B4', 'classic')} and {pct('B4', 'mirror')}."]
    for cid, what, paper in STATED:
        h = contrast_row(holm[ref.label], cid)
        if h is not None:
            lines.append(f"{cid} ({what}) = <b>{fmt_ci(h.estimate, h.lo, h.hi)}</b> points (paper: {paper_text(paper)}).")
        else:
            lines.append(f"{cid} ({what}) is not estimable from this run (it lacks the variants or policies it needs).")
    if ch.model is not None:
        lines.append(signal_line(ch.model))
    return lines
