"""What a reader must never misread: a near-chance run (:func:`near_chance`, flagged with :data:`NEAR_CHANCE_FLAG`
beside its label by :func:`name_html` / :func:`name_text`) and an interval spanning about 0-100 (:func:`uninformative`,
greyed in tables). CSS kinds ``cp-flag`` / ``cp-uninformative`` (book/_static/crossprofile.css)."""

from __future__ import annotations

import html
import re

from crossprofile_lib.book.style import model_signal


def near_chance_name(name: str) -> bool:
    """Whether a model's NAME is SmolLM2-135M's (the book decides from measured headroom, never a name)."""
    return "smollm2-135m" in name.lower()


def near_chance(run, boot=None) -> bool:
    """Whether a language model's run says nothing about the paper's effects, measured on the run: its headroom
        check fails or, without ALL and EMPTY rows, its accuracy is not above chance at 95%. Never the reference
        decider or a string label. Cached on the run."""
    if run is None or isinstance(run, str) or getattr(run, "is_reference", True) or not hasattr(run, "df"):
        return False
    boot = boot if boot is not None else getattr(run, "boot", None)
    cached = getattr(run, "_cp_near_chance", None)
    if cached is None or cached[0] is not boot:
        cached = (boot, not model_signal(run, boot).ok)
        try:
            run._cp_near_chance = cached
        except AttributeError:  # a frozen run: recompute next time
            pass
    return cached[1]


#: The flag set beside every number of a near-chance run (its label in a caption, a takeaway, a header).
NEAR_CHANCE_FLAG = "near chance: headroom check failed"
#: An interval at least this wide (points, on a 0-100 scale) says nothing about the estimate.
UNINFORMATIVE_WIDTH = 90.0


def name_html(run) -> str:
    """A run's label for a takeaway line (HTML), flagged at the number when it is near chance."""
    label = run if isinstance(run, str) else run.label
    flag = f' <span class="cp-flag">{NEAR_CHANCE_FLAG}</span>' if near_chance(run) else ""
    return html.escape(str(label)) + flag


def name_text(run) -> str:
    """A run's label for a table header or caption (plain text), flagged when it is near chance."""
    label = run if isinstance(run, str) else run.label
    return f"{label} ({NEAR_CHANCE_FLAG})" if near_chance(run) else str(label)


def uninformative(lo, hi, width: float = UNINFORMATIVE_WIDTH) -> bool:
    """Whether the interval [lo, hi] (points) spans about 0-100: it says nothing about the estimate."""
    try:
        return float(hi) - float(lo) >= width
    except (TypeError, ValueError):
        return False


_CI = re.compile(r"^\s*[-+]?\d+(?:\.\d+)?%?\s*\[\s*([-+]?\d+(?:\.\d+)?),\s*([-+]?\d+(?:\.\d+)?)\s*\]")


def uninformative_cell(value) -> bool:
    """Whether a table cell ``"est [lo, hi]"`` has an interval that spans about 0-100."""
    m = _CI.match(value) if isinstance(value, str) else None
    return bool(m) and uninformative(m.group(1), m.group(2))
