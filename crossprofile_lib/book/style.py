"""How every figure looks: one colour per policy, sizes for the book's column, the message title / legend-below /
run-stamp layout (:func:`finish`), SVG output, ties named as ties (:func:`top`), and :func:`model_signal` (a
model's panel is drawn only when its run has signal; else :func:`no_signal_note` says why)."""

from __future__ import annotations

import colorsys
import html
import textwrap
from typing import NamedTuple, Optional, Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from crossprofile_lib.design import HEADROOM_MIN_POINTS
from crossprofile_lib.stats.tables import headroom

#: One colour per base policy (Okabe-Ito where possible), the same in every chapter.
BASE_COLORS = {
    "R1": "#0072B2", "B4": "#E69F00", "Random": "#7F7F7F", "M1": "#009E73",
    "R1-rel": "#CC79A7", "R1-rel-oracle": "#882255", "BAL": "#D55E00", "BAL-oracle": "#8C3B00",
    "B3": "#56B4E9", "ALL": "#222222", "EMPTY": "#BBBBBB", "REF": "#555555",
    "private-only": "#117733", "shared-only": "#AA4499",
}
ROLE_COLORS = {"support": "#009E73", "decoy": "#D55E00", "irrelevant": "#9A9A9A"}
FORMAT_SHADE = {"full": 0.0, "unlabeled": 0.45, "shuffled": 0.3, "first-speaker": 0.6, "claim-id": 0.75}
PAPER_COLOR = "#D55E00"
DPI = 96
WIDTH = 7.0  # inches: the book's text column (688 px) at 96 px per inch
FONT = dict(title=12, subtitle=9.5, label=10, tick=9.5, legend=9, note=8)


def use_svg() -> None:
    """Figures as SVG in Jupyter, without dates and with salted ids, so a rebuild writes identical files."""
    matplotlib.rcParams["svg.hashsalt"] = "crossprofile"
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # no IPython: figures are saved by the caller
        return
    if get_ipython() is not None:
        set_matplotlib_formats("svg", metadata={"Date": None})


def _split(policy: str) -> tuple[str, bool, str]:
    base, _, fmt = policy.partition(":")
    k = False
    if "-k" in base and base.rsplit("-k", 1)[1].isdigit():
        base, k = base.rsplit("-k", 1)[0], True
    return base, k, fmt or "full"


def policy_base(policy: str) -> str:
    """A policy's base name, without its fixed-k (``-k7``) and format (``:unlabeled``) suffixes."""
    return _split(policy)[0]


#: The ALL memory's label formats, each a hue of its own (lightening its near-black gives three greys).
ALL_FORMAT_COLORS = {"unlabeled": "#6A3D9A", "shuffled": "#B8860B", "first-speaker": "#1F78B4", "claim-id": "#33A02C"}


def policy_color(policy: str) -> str:
    """The base policy's colour, lighter for label formats, darker for fixed-k."""
    base, k, fmt = _split(policy)
    if base == "ALL" and not k and fmt in ALL_FORMAT_COLORS:
        return ALL_FORMAT_COLORS[fmt]
    rgb = matplotlib.colors.to_rgb(BASE_COLORS.get(base, "#444444"))
    h, l, s = colorsys.rgb_to_hls(*rgb)
    l = l + (1 - l) * FORMAT_SHADE.get(fmt, 0.5)
    if k:
        l *= 0.7
    return matplotlib.colors.to_hex(colorsys.hls_to_rgb(h, min(l, 0.92), s))


def _hue_colors(values) -> dict:
    """Policy colours for policies; a colour-blind-safe palette for anything else (runs, cells)."""
    vals = [str(v) for v in values]
    if all(_split(v)[0] in BASE_COLORS for v in vals):
        return {v: policy_color(v) for v in vals}
    return dict(zip(vals, sns.color_palette("colorblind", max(len(vals), 1)).as_hex()))


def wrap(text: str, width_in: float, fontsize: float, em: float = 0.58) -> str:
    """``text`` in lines that fit ``width_in`` inches at ``fontsize`` (about 0.55 em per character, bold 0.6)."""
    return textwrap.fill(text, max(20, int(width_in * 72 / (fontsize * em))), break_long_words=False)


def stamp_text(runs) -> str:
    """The backend and model of ``runs`` (a figure's footer)."""
    runs = [r for r in (runs if isinstance(runs, (list, tuple)) else [runs]) if r is not None]
    return "; ".join(r if isinstance(r, str) else r.label + ("" if r.is_reference else f" - model {r.model}")
                     for r in runs)


def new_figure(w: float, h: float, **kw):
    sns.set_theme(style="whitegrid", context="notebook", rc={
        "font.size": FONT["label"], "axes.labelsize": FONT["label"], "axes.titlesize": FONT["subtitle"],
        "xtick.labelsize": FONT["tick"], "ytick.labelsize": FONT["tick"], "legend.fontsize": FONT["legend"]})
    return plt.subplots(figsize=(min(w, WIDTH), h), dpi=DPI, **kw)


def _legend_columns(labels: Sequence[str], width_in: float, ncol: int) -> int:
    """As many columns (at most ``ncol``) as fit the figure's width."""
    widest = max(len(str(x)) for x in labels) * FONT["legend"] * 0.58 / 72 + 0.45  # text, marker, spacing
    return max(1, min(ncol, len(labels), int((width_in - 0.2) // widest)))


def finish(fig, message: str, subtitle: str, runs, legend: Optional[tuple] = None, ncol: int = 4) -> None:
    """Message title and subtitle on top, legend below the axes, run stamp at the bottom; texts wrapped and the figure
    grown taller by what the wrapping needs, so nothing is drawn outside it."""
    w, h = fig.get_size_inches()
    line = lambda pt: pt * 1.3 / 72  # noqa: E731  (inches per line of text)
    message = wrap(message, w - 0.2, FONT["title"], em=0.62)
    subtitle = wrap(subtitle, w - 0.2, FONT["subtitle"]) if subtitle else ""
    stamp = stamp_text(runs)
    note = wrap(stamp, w - 0.2, FONT["note"])
    n_msg, n_sub = message.count("\n") + 1, (subtitle.count("\n") + 1 if subtitle else 0)
    n_stamp = note.count("\n") + 1 if stamp else 0
    top = 0.1 + n_msg * line(FONT["title"]) + (0.06 + n_sub * line(FONT["subtitle"]) if n_sub else 0.0) + 0.06
    bottom = 0.06 + n_stamp * line(FONT["note"])
    rows = cols = 0
    if legend and legend[0]:
        cols = _legend_columns(legend[1], w, ncol)
        rows = int(np.ceil(len(legend[0]) / cols))
        bottom += 0.26 * rows + 0.08
    h += max(0.0, top + bottom - 1.1)  # beyond what the figure's height already allowed for
    fig.set_size_inches(w, h)
    if rows:
        fig.legend(*legend, loc="lower center", bbox_to_anchor=(0.5, (0.06 + n_stamp * line(FONT["note"])) / h),
                   ncol=cols, frameon=False, fontsize=FONT["legend"], handlelength=1.4, columnspacing=1.2)
    fig.tight_layout(rect=(0, bottom / h, 1, 1 - top / h))
    fig.text(0.01, 1 - 0.08 / h, message, fontsize=FONT["title"], fontweight="bold", ha="left", va="top")
    if subtitle:
        fig.text(0.01, 1 - (0.14 + n_msg * line(FONT["title"])) / h, subtitle, fontsize=FONT["subtitle"],
                 color="#444444", ha="left", va="top")
    fig.text(0.01, 0.005, note, fontsize=FONT["note"], color="#555555", ha="left", va="bottom")  # the run stamp


def legend_of(ax) -> tuple:
    handles, labels = ax.get_legend_handles_labels()
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    return handles, labels


def legend_handles(axes) -> tuple:
    """``(handles, labels)`` of every axis in ``axes``, each label once (for :func:`finish`)."""
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    return list(handles.values()), list(handles)


class Signal(NamedTuple):
    ok: bool
    reason: str


def model_signal(run, boot=None, min_points: float = HEADROOM_MIN_POINTS) -> Signal:
    """Whether ``run``'s panel would show signal: always for the reference decider; for a model, its headroom
    check passes (ALL - EMPTY lower bound above ``min_points``) or, without ALL and EMPTY, its accuracy's 95% Wilson
    interval lies above chance."""
    if run is None:
        return Signal(False, "no run")
    if run.is_reference:
        return Signal(True, "")
    df = run.df
    boot = boot if boot is not None else getattr(run, "boot", None)
    if boot is not None and {"ALL", "EMPTY"} <= set(df["policy"]):
        hr = headroom(df, boot, min_points)
        if hr["passed"]:
            return Signal(True, "")
        return Signal(False, f"{run.label} has no signal to draw: its ALL - EMPTY headroom is {hr['estimate']:.1f} "
                             f"points [{hr['lo']:.1f}, {hr['hi']:.1f}], and the lower bound must exceed "
                             f"{min_points:g} points ({len(df)} decisions on {df['template_id'].nunique()} templates).")
    n, k = len(df), int(df["correct"].sum())
    chance = 1.0 / 3.0
    p, z = k / max(n, 1), 1.96
    lo = (p + z * z / (2 * n) - z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / (1 + z * z / n) if n else 0.0
    if lo > chance:
        return Signal(True, "")
    return Signal(False, f"{run.label} has no signal to draw: its accuracy {100 * p:.0f}% ({k} of {n} decisions) "
                         f"is not above chance ({100 * chance:.0f}%, three options) at 95% confidence.")


def no_signal_note(signal: Signal, what: str = "The model's panel"):
    """One line in place of a panel without signal (renders in Jupyter and the book)."""
    from IPython.display import HTML
    return HTML(f"<p class='cp-no-signal'>{html.escape(what)} is not drawn: {html.escape(signal.reason)}</p>")


def top_names(values: pd.Series, tol: float = 1e-9) -> list[str]:
    """The names (index) sharing the highest value."""
    v = values.dropna()
    return [str(i) for i in v.index[v >= v.max() - tol]] if len(v) else []


def top(values: pd.Series, tol: float = 1e-9) -> str:
    """Who leads ``values``, ties named: "R1 leads", "R1 and B4 tie to lead", "5 tie to lead"."""
    names = top_names(values, tol)
    if len(names) == 1:
        return f"{names[0]} leads"
    if len(names) <= 3:
        return f"{', '.join(names[:-1])} and {names[-1]} tie to lead"
    return f"{len(names)} tie to lead"
