"""Chapter 4's findings: rarest-first (R1) in the classic and mirror cells, and H1-H2 in words."""

from __future__ import annotations

import html

from crossprofile_lib.book.display import num
from crossprofile_lib.book.paper import paper_text
from crossprofile_lib.book.runs import REFERENCE
from crossprofile_lib.book.style import model_signal
from crossprofile_lib.book.tables import cell_value, contrast_row
from crossprofile_lib.design import CLASSIC, MIRROR
from crossprofile_lib.stats.format import fmt_ci

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
    """R1 and B4 in the classic and mirror cells (reference decider), H1 and H2 beside the paper, and
    whether the model sample has signal. ``cells``: :func:`cells_by_run`; ``holm``: :func:`holm_by_run`."""
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
