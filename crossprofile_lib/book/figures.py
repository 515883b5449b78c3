"""The book's figures and how every figure looks: one colour per policy, at most 7 inches wide, a bold **message**
title computed from the data (or ``message=``) over the chapter's ``title``, legends below, the run's model in the footer
(:func:`finish`), SVG output, ties named as ties (:func:`top`), and :func:`model_signal` (a model's panel is drawn only
when its run has signal; else :func:`no_signal_note` says why)."""

from __future__ import annotations

import colorsys
import html
import textwrap
from collections import Counter
from typing import NamedTuple, Optional, Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from crossprofile_lib.design import CLASSIC, HEADROOM_MIN_POINTS, MIRROR
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


def palette(policies: Sequence[str]) -> dict:
    return {p: policy_color(p) for p in policies}


def _hue_colors(values) -> dict:
    """Policy colours for policies; a colour-blind-safe palette for anything else (runs, cells)."""
    vals = [str(v) for v in values]
    if all(_split(v)[0] in BASE_COLORS for v in vals):
        return palette(vals)
    return dict(zip(vals, sns.color_palette("colorblind", max(len(vals), 1)).as_hex()))


def wrap(text: str, width_in: float, fontsize: float, em: float = 0.58) -> str:
    """``text`` in lines that fit ``width_in`` inches at ``fontsize`` (about 0.55 em per character, bold 0.6)."""
    return textwrap.fill(text, max(20, int(width_in * 72 / (fontsize * em))), break_long_words=False)


def stamp_text(runs) -> str:
    runs = [r for r in (runs if isinstance(runs, (list, tuple)) else [runs]) if r is not None]
    return "; ".join(r if isinstance(r, str) else r.label + ("" if r.is_reference else f" - model {r.model}")
                     for r in runs)


def stamp(fig, runs, y: float = 0.005) -> None:
    """Write the backend and model of ``runs`` into the figure's footer (wrapped to its width)."""
    text = wrap(stamp_text(runs), fig.get_size_inches()[0] - 0.2, FONT["note"])
    fig.text(0.01, y, text, fontsize=FONT["note"], color="#555555", ha="left", va="bottom")


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
    n_msg, n_sub = message.count("\n") + 1, (subtitle.count("\n") + 1 if subtitle else 0)
    n_stamp = wrap(stamp_text(runs), w - 0.2, FONT["note"]).count("\n") + 1 if stamp_text(runs) else 0
    top = 0.1 + n_msg * line(FONT["title"]) + (0.06 + n_sub * line(FONT["subtitle"]) if n_sub else 0.0) + 0.06
    bottom = 0.06 + n_stamp * line(FONT["note"])
    rows = cols = 0
    if legend and legend[0]:
        cols = _legend_columns(legend[1], w, ncol)
        rows = int(np.ceil(len(legend[0]) / cols))
        bottom += 0.26 * rows + 0.08
    extra = max(0.0, top + bottom - 1.1)  # beyond what the figure's height already allowed for
    h = h + extra
    fig.set_size_inches(w, h)
    if rows:
        fig.legend(*legend, loc="lower center", bbox_to_anchor=(0.5, (0.06 + n_stamp * line(FONT["note"])) / h),
                   ncol=cols, frameon=False, fontsize=FONT["legend"], handlelength=1.4, columnspacing=1.2)
    fig.tight_layout(rect=(0, bottom / h, 1, 1 - top / h))
    fig.text(0.01, 1 - 0.08 / h, message, fontsize=FONT["title"], fontweight="bold", ha="left", va="top")
    if subtitle:
        fig.text(0.01, 1 - (0.14 + n_msg * line(FONT["title"])) / h, subtitle, fontsize=FONT["subtitle"],
                 color="#444444", ha="left", va="top")
    stamp(fig, runs)


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


def model_signal(run, boot=None, min_points: Optional[float] = None) -> Signal:
    """Whether ``run``'s panel would show signal: always for the reference decider; for a model, its headroom
    check passes (ALL - EMPTY lower bound above ``min_points``) or, without ALL and EMPTY, its accuracy's 95% Wilson
    interval lies above chance."""
    if run is None:
        return Signal(False, "no run")
    if run.is_reference:
        return Signal(True, "")
    min_points = HEADROOM_MIN_POINTS if min_points is None else min_points
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



def concept_figure(views: Sequence, title: str = "", message: Optional[str] = None) -> plt.Figure:
    """The hidden-profile concept diagram, one panel per variant of ``views`` (:class:`Walkthrough`):
    agents x the 12 facts, a dot per holder, a box per fact the memory kept."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle
    n = len(views)
    cols = 2 if n > 1 else 1
    rows = int(np.ceil(n / cols))
    fig, axes = new_figure(WIDTH, 1.75 * rows + 1.3, nrows=rows, ncols=cols, squeeze=False)
    policy = views[0].policies[0]
    decoys = {}
    for ax, v in zip(axes.ravel(), views):
        facts, agents, kept = v.facts_by_role, list(v.agents), v.kept_fact_ids(policy)
        for x, f in enumerate(facts):
            for y, a in enumerate(agents):
                held = a in v.task.holders[f.id]
                ax.scatter(x, y, s=40, marker="o", facecolor=ROLE_COLORS[f.role] if held else "white",
                           edgecolor=ROLE_COLORS[f.role], linewidth=1.0, zorder=3)
            if f.id in kept:
                ax.add_patch(Rectangle((x - 0.42, -0.6), 0.84, len(agents) + 0.2, fill=False,
                                       edgecolor="#0072B2", linewidth=1.6, zorder=4))
        for b in (4.5, 7.5):
            ax.axvline(b, color="#cccccc", linewidth=0.8)
        ax.set_xticks([2, 6, 9.5], ["support", "decoy", "irrelevant"])
        ax.set_yticks(range(len(agents)), agents)
        ax.set_xlim(-0.7, len(facts) - 0.3)
        ax.set_ylim(len(agents) - 0.4, -0.8)
        ax.grid(False)
        c = v.composition(policy)
        decoys[v.task.variant.name] = c.kept_decoy
        cell = {"classic": " (classic)", "mirror": " (mirror)"}.get(v.task.variant.cell, "")
        ax.set_title(f"{v.task.variant.name}{cell} keeps {c.kept_support} sup., {c.kept_decoy} decoy, "
                     f"{c.kept_irrelevant} irr.", fontsize=FONT["tick"], loc="left")
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    handles = [Line2D([], [], marker="o", linestyle="none", color=ROLE_COLORS[r], label=f"{r} fact held")
               for r in ("support", "decoy", "irrelevant")]
    handles += [Line2D([], [], marker="o", linestyle="none", mfc="white", mec="#777777", label="not held"),
                Patch(fill=False, edgecolor="#0072B2", linewidth=1.6, label=f"kept by {policy}")]
    if message is None:
        lo, hi = min(decoys.values()), max(decoys.values())
        message = (f"{policy} keeps {lo} to {hi} decoys, depending only on who holds them" if lo != hi else
                   f"{policy} keeps {lo} decoys in every variant shown")
    finish(fig, message, title, [], (handles, [h.get_label() for h in handles]), ncol=5)
    return fig


def accuracy_heatmap(acc: pd.DataFrame, run, title: str = "", cmap: str = "RdYlGn",
                     message: Optional[str] = None) -> plt.Figure:
    """Heat map of accuracy (%): ``acc`` is a wide (policies x variants) frame of percentages."""
    fig, ax = new_figure(0.62 * acc.shape[1] + 2.6, 0.3 * acc.shape[0] + 2.1)
    sns.heatmap(acc, annot=True, fmt=".0f", cmap=cmap, vmin=0, vmax=100, linewidths=0.5, ax=ax,
                cbar_kws={"label": "accuracy (%)", "shrink": 0.8}, annot_kws={"fontsize": FONT["tick"]})
    lab = {CLASSIC: f"{CLASSIC}\nclassic", MIRROR: f"{MIRROR}\nmirror"}
    ax.set_xticklabels([lab.get(t.get_text(), t.get_text()) for t in ax.get_xticklabels()], rotation=0)
    ax.tick_params(axis="y", rotation=0)
    for t in ax.get_yticklabels():
        t.set_color(policy_color(t.get_text()) if _split(t.get_text())[0] in BASE_COLORS else "black")
    ax.set_xlabel("attribution variant (support, decoy, irrelevant: S shared, P private)")
    ax.set_ylabel("")
    if message is None and {"R1", "B4"} <= set(acc.index) and {CLASSIC, MIRROR} <= set(acc.columns):
        # the finding the paper's cells are about: rarest-first against first-mention, classic vs mirror
        message = "; ".join(f"{name} cell {v}: R1 {acc.at['R1', v]:.0f}% vs B4 {acc.at['B4', v]:.0f}%"
                            for v, name in ((CLASSIC, "Classic"), (MIRROR, "mirror")))
    if message is None:
        parts = []
        for v, name in ((CLASSIC, "classic"), (MIRROR, "mirror")):
            if v in acc.columns and acc[v].notna().any():
                parts.append(f"{top(acc[v])} the {name} cell {v} ({acc[v].max():.0f}%)")
        message = "; ".join(parts) or f"Accuracy ranges {np.nanmin(acc.values):.0f}-{np.nanmax(acc.values):.0f}%"
    finish(fig, message, title, run)
    return fig


def _leaders(t: pd.DataFrame, x: str, hue: str) -> str:
    groups = {str(g): d.set_index(d[hue].astype(str))["estimate"] for g, d in t.groupby(x, sort=False)}
    if len(groups) <= 2:
        return "; ".join(f"{top(v)} in {g}" for g, v in groups.items())
    best, k = Counter(n for v in groups.values() for n in top_names(v)).most_common(1)[0]
    return (f"{best} is highest (or tied) in every {x.replace('_', ' ')}" if k == len(groups) else
            f"{best} is highest (or tied) in {k} of {len(groups)} {x.replace('_', ' ')} groups")


def interval_bars(t: pd.DataFrame, x: str, hue: str, runs, y_label: str = "accuracy (%)",
                  title: str = "", ylim: Optional[tuple] = (0, 100), hue_colors: Optional[dict] = None,
                  width: float = WIDTH, height: float = 3.6, message: Optional[str] = None) -> plt.Figure:
    """Grouped bars of ``estimate`` with ``[lo, hi]`` whiskers: groups by ``x``, bars by ``hue``."""
    xs = list(pd.unique(t[x]))
    hs = list(pd.unique(t[hue]))
    colors = hue_colors or _hue_colors(hs)
    fig, ax = new_figure(width, height)
    w = 0.8 / max(len(hs), 1)
    for j, h in enumerate(hs):
        d = t[t[hue] == h].set_index(x).reindex(xs)
        pos = np.arange(len(xs)) - 0.4 + w * (j + 0.5)
        ax.bar(pos, d["estimate"], width=w * 0.95, color=colors.get(str(h), "#777777"), label=str(h))
        ax.errorbar(pos, d["estimate"], yerr=[d["estimate"] - d["lo"], d["hi"] - d["estimate"]], fmt="none",
                    ecolor="#333333", elinewidth=0.9, capsize=2)
    ax.set_xticks(np.arange(len(xs)), [str(v) for v in xs])
    ax.set_ylabel(y_label)
    if ylim:
        ax.set_ylim(*ylim)
    ax.axhline(0, color="#999999", linewidth=0.6)
    finish(fig, message or _leaders(t, x, hue), title, runs, legend_of(ax), ncol=min(len(hs), 6))
    return fig


def forest(t: pd.DataFrame, label: str, runs, title: str = "", x_label: str = "points",
           lo: str = "lo", hi: str = "hi", extra: Optional[tuple[str, str, str]] = None,
           paper: Optional[dict] = None, message: Optional[str] = None) -> plt.Figure:
    """Contrasts as points with intervals; ``extra`` = ``(lo, hi, name)`` a second, wider interval; ``paper``: row
    label -> paper values (hollow diamonds)."""
    fig, ax = new_figure(WIDTH, 0.5 * len(t) + 2.0)
    ys = np.arange(len(t))[::-1]
    if extra:
        ax.hlines(ys, t[extra[0]], t[extra[1]], color="#9ecae1", linewidth=6, label=extra[2])
    ax.hlines(ys, t[lo], t[hi], color="#08519c", linewidth=2, label="95% percentile interval")
    ax.plot(t["estimate"], ys, "o", color="#08519c", label="this suite")
    if paper:
        first = True
        for y, lab in zip(ys, t[label]):
            for m, v in (paper.get(lab) or {}).items():
                if isinstance(v, (int, float)):
                    ax.plot(v, y, "D", mfc="none", mec=PAPER_COLOR, ms=7, label="paper (its models)" if first else None)
                    first = False
    ax.axvline(0, color="#777777", linewidth=0.8)
    ax.set_yticks(ys, list(t[label]))
    ax.set_ylim(-0.6, len(t) - 0.4)
    ax.set_xlabel(x_label)
    if message is None:
        ex = int(((t[lo] > 0) | (t[hi] < 0)).sum())
        message = f"{ex} of {len(t)} contrasts have intervals that exclude zero"
    finish(fig, message, title, runs, legend_of(ax), ncol=4)
    return fig


def composition_bars(t: pd.DataFrame, runs, title: str = "", by: str = "policy",
                     message: Optional[str] = None) -> plt.Figure:
    """Stacked bars of mean kept support / decoy / irrelevant facts per ``by``."""
    fig, ax = new_figure(WIDTH, 0.42 * len(t) + 1.9)
    left = np.zeros(len(t))
    ys = np.arange(len(t))[::-1]
    for role in ("support", "decoy", "irrelevant"):
        v = t[f"kept_{role}"].to_numpy(dtype=float)
        ax.barh(ys, v, left=left, color=ROLE_COLORS[role], label=role, height=0.7)
        for y, l0, vv in zip(ys, left, v):
            if vv >= 0.5:
                ax.text(l0 + vv / 2, y, f"{vv:.2f}", ha="center", va="center", fontsize=FONT["note"], color="white")
        left += v
    ax.set_yticks(ys, [str(s) for s in t[by]])
    ax.set_xlabel("mean kept facts (of 5 support, 3 decoy, 4 irrelevant)")
    ax.set_xlim(0, 12)
    if message is None:
        d = t.set_index(t[by].astype(str))["kept_decoy"].astype(float)
        names, most = top_names(d), float(d.max())
        message = (f"{names[0]} keeps the most decoys ({most:.2f} of 3)" if len(names) == 1 else
                   f"{', '.join(names[:-1])} and {names[-1]} keep the most decoys ({most:.2f} of 3)"
                   if len(names) <= 3 else f"{len(names)} of {len(d)} rows keep the most decoys ({most:.2f} of 3)")
    finish(fig, message, title, runs, legend_of(ax), ncol=3)
    return fig


def net_lead_curves(tables: dict, runs, title: str = "", paper: Optional[dict] = None,
                    message: Optional[str] = None) -> plt.Figure:
    """Accuracy (%) by net lead, one line per run label; ``paper``: model -> {net lead: value} (hollow)."""
    fig, ax = new_figure(WIDTH, 3.8)
    colors = sns.color_palette("dark", 8)
    for i, (lab, t) in enumerate(tables.items()):
        t = t[t["n"] > 0]
        ax.plot(t["net_lead"], t["estimate"], "o-", color=colors[i % 8], label=lab)
        ax.fill_between(t["net_lead"], t["lo"], t["hi"], color=colors[i % 8], alpha=0.15)
    for j, (m, pts) in enumerate((paper or {}).items()):
        ax.plot(list(pts), list(pts.values()), "D", mfc="none", ms=7, mec=[PAPER_COLOR, "#CC79A7", "#56B4E9"][j % 3],
                linestyle="none", label=f"paper: {m}")
    ax.set_xlabel("net evidence lead of the kept facts (correct minus decoy)")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(-2, 102)
    ax.set_xticks(range(-3, 6))
    if message is None and tables:
        lab, t = next(iter(tables.items()))
        t = t[t["n"] > 0].sort_values("net_lead")
        message = (f"Accuracy goes from {t['estimate'].iloc[0]:.0f}% at net lead {int(t['net_lead'].iloc[0]):+d} to "
                   f"{t['estimate'].iloc[-1]:.0f}% at {int(t['net_lead'].iloc[-1]):+d}" if len(t) else "No decisions")
    finish(fig, message or "", title, runs, legend_of(ax), ncol=2)
    return fig


def line_by(t: pd.DataFrame, x: str, hue: str, runs, y_label: str, title: str = "",
            ylim: Optional[tuple] = None, message: Optional[str] = None) -> plt.Figure:
    """Lines of ``estimate`` against ``x`` per ``hue`` (policy colours), with interval bands."""
    fig, ax = new_figure(WIDTH, 3.8)
    colors = _hue_colors(pd.unique(t[hue]))
    change, drawn = [], []
    groups = list(t.groupby(hue, sort=False))
    numeric = pd.api.types.is_numeric_dtype(t[x])
    span = float(t[x].max() - t[x].min()) if numeric and len(t) else 0.0
    for i, (h, d) in enumerate(groups):
        d = d.sort_values(x)
        c = colors[str(h)]
        # a series on top of one drawn before stays visible: dashed, offset, and its legend says so
        same = next((n for n, xs, ys in drawn if len(xs) == len(d) and np.allclose(xs, d[x].to_numpy(dtype=float))
                     and np.allclose(ys, d["estimate"].to_numpy(dtype=float), atol=0.05)), None) if numeric else None
        dx = (i - (len(groups) - 1) / 2) * span * 0.012 if numeric and span else 0.0
        label = str(h) + (f" (same as {same})" if same else "")
        ax.plot(d[x] + dx if numeric else d[x], d["estimate"], "os^Dv<>"[i % 7] + ("--" if same else "-"), color=c,
                label=label, markersize=6 if not same else 5, markerfacecolor="none" if same else c)
        if numeric:
            drawn.append((str(h), d[x].to_numpy(dtype=float), d["estimate"].to_numpy(dtype=float)))
        if "lo" in d:
            ax.fill_between(d[x], d["lo"], d["hi"], color=c, alpha=0.12)
        change.append((abs(d["estimate"].iloc[-1] - d["estimate"].iloc[0]), str(h), d))
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel(y_label)
    if ylim:
        ax.set_ylim(*ylim)
    if message is None and change:
        _, h, d = max(change, key=lambda c: c[0])
        a, b = d["estimate"].iloc[0], d["estimate"].iloc[-1]
        message = (f"{h} moves most: {a:.0f} to {b:.0f} as {x.replace('_', ' ')} goes from {d[x].iloc[0]:g} to "
                   f"{d[x].iloc[-1]:g}" if isinstance(d[x].iloc[0], (int, float, np.number))
                   else f"{h} moves most: {a:.0f} to {b:.0f}")
    finish(fig, message or "", title, runs, legend_of(ax), ncol=min(t[hue].nunique(), 5))
    return fig


def paper_vs_run(t: pd.DataFrame, runs, title: str = "", message: Optional[str] = None) -> plt.Figure:
    """This run's estimates (filled dots, 95% intervals) beside the paper's per model (hollow diamonds), one row
    per quantity; ``t``: rows ``quantity, unit, estimate, lo, hi, paper_model, paper``; panels by unit."""
    units = [u for u in ("%", "points") if (t["unit"] == u).any()]
    qs = {u: list(dict.fromkeys(t.loc[t["unit"] == u, "quantity"])) for u in units}
    fig, axes = new_figure(WIDTH, 0.32 * sum(len(v) for v in qs.values()) + 0.6 * len(units) + 1.6, nrows=len(units),
                     ncols=1, squeeze=False, gridspec_kw={"height_ratios": [max(len(qs[u]), 1) for u in units]})
    models = list(dict.fromkeys(t["paper_model"].dropna()))
    mcol = dict(zip(models, [PAPER_COLOR, "#CC79A7", "#56B4E9", "#009E73"] * 3))
    within = total = 0
    for ax, u in zip(axes[:, 0], units):
        d = t[t["unit"] == u]
        ys = {q: i for i, q in enumerate(qs[u][::-1])}
        est = d.drop_duplicates("quantity")
        ax.hlines([ys[q] for q in est["quantity"]], est["lo"], est["hi"], color="#0072B2", linewidth=2)
        ax.plot(est["estimate"], [ys[q] for q in est["quantity"]], "o", color="#0072B2", label="this run [95% interval]")
        for m in models:
            p = d[(d["paper_model"] == m) & d["paper"].notna()]
            ax.plot(p["paper"], [ys[q] for q in p["quantity"]], "D", mfc="none", mec=mcol[m], ms=7, mew=1.5,
                    linestyle="none", label=f"paper: {m}")
            ok = (p["paper"] >= p["lo"]) & (p["paper"] <= p["hi"])
            within, total = within + int(ok.sum()), total + len(p)
        ax.set_yticks(list(ys.values()), list(ys))
        ax.set_ylim(-0.6, len(ys) - 0.4)
        ax.set_xlabel("accuracy (%)" if u == "%" else "difference (points)")
        if u == "points":
            ax.axvline(0, color="#777777", linewidth=0.8)
    message = message or f"{within} of {total} paper values fall inside this run's 95% interval"
    finish(fig, message, title, runs, legend_handles(axes[:, 0]), ncol=3)
    return fig


use_svg()
