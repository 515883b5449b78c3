"""Each chapter shows its first results box near the top (issue 35.4): the reader meets what this build found
before the long explanations (chapters 1, 8, 11 and 13 had 1,015-1,626 px of prose above it). Read from the
chapter sources: the prose lines (Markdown outside code cells, the title left out) above the first code cell that
displays a box (takeaways, a results box, an admonition)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Prose lines allowed above a chapter's first box (the lead paragraph and a short list; about 400 px).
MAX_PROSE_LINES = 16
#: Chapters whose first box is not a results box near the top, and why.
EXEMPT = {"10-explorer": "the live explorer: no results box",
          "14-models": "the comparison page opens with its coverage note and the findings table, no box"}
_BOX = re.compile(r"takeaways\(|_box\(|admonition\(")


def prose_before_first_box(text: str):
    """Prose lines above the first code cell that displays a box; None when no cell does."""
    body = text.split("\n---\n", 1)[1] if text.startswith("---") else text
    prose, code = 0, None
    for ln in body.splitlines():
        if code is None and ln.startswith("```{code-cell}"):
            code = []
        elif code is not None and ln.startswith("```"):
            src = "\n".join(code)
            if _BOX.search(src) and "display(" in src:
                return prose
            code = None
        elif code is not None:
            code.append(ln)
        elif ln.strip() and not ln.startswith("# "):
            prose += 1
    return None


CHAPTERS = sorted((ROOT / "notebooks").glob("*.md"))


@pytest.mark.parametrize("path", [p for p in CHAPTERS if p.stem not in EXEMPT], ids=lambda p: p.stem)
def test_the_first_results_box_comes_before_the_long_explanations(path):
    n = prose_before_first_box(path.read_text(encoding="utf-8"))
    assert n is not None, f"{path.name}: no code cell displays a results box (takeaways)"
    assert n <= MAX_PROSE_LINES, (f"{path.name}: {n} prose lines above its first results box (at most "
                                  f"{MAX_PROSE_LINES}): move the explanations below it")


def test_the_count_reads_prose_not_code_and_stops_at_the_first_box():
    page = ("---\nx: 1\n---\n\n# T\n\nLead.\n\n```{code-cell} ipython3\nx = 1\nbook.display(cap.table(t))\n```\n\n"
            "More.\nAnd more.\n\n```{code-cell} ipython3\nbook.display(book.takeaways(lines))\n```\n\nAfter.\n")
    assert prose_before_first_box(page) == 3
    assert prose_before_first_box("# T\n\nText.\n") is None
    assert set(EXEMPT) <= {p.stem for p in CHAPTERS}
