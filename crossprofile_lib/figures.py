"""The book's figures (seaborn/matplotlib), one consistent colour per policy.

Every function returns a :class:`matplotlib.figure.Figure` and stamps the backend and model
of the run(s) it draws into the figure's footer (:func:`stamp`), so a figure saved on its own
still says what produced it. Inputs are the long tables of :mod:`crossprofile_lib.stats.tables`
(columns ``estimate``, ``lo``, ``hi`` plus grouping columns) or a :class:`~crossprofile_lib.book.Run`.
"""

from __future__ import annotations

import colorsys
from typing import Optional, Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

#: One colour per base policy (Okabe-Ito where possible); label formats and fixed-k reuse
#: the base policy's hue (lighter / darker), so a policy looks the same in every chapter.
BASE_COLORS = {
    "R1": "#0072B2", "B4": "#E69F00", "Random": "#7F7F7F", "M1": "#009E73",
    "R1-rel": "#CC79A7", "R1-rel-oracle": "#882255", "BAL": "#D55E00", "BAL-oracle": "#8C3B00",
    "B3": "#56B4E9", "ALL": "#222222", "EMPTY": "#BBBBBB", "REF": "#555555",
    "private-only": "#117733", "shared-only": "#AA4499",
}
ROLE_COLORS = {"support": "#009E73", "decoy": "#D55E00", "irrelevant": "#9A9A9A"}
FORMAT_SHADE = {"full": 0.0, "unlabeled": 0.45, "shuffled": 0.3, "first-speaker": 0.6, "claim-id": 0.75}
DPI = 96


def _split(policy: str) -> tuple[str, bool, str]:
    base, _, fmt = policy.partition(":")
    k = False
    if "-k" in base and base.rsplit("-k", 1)[1].isdigit():
        base, k = base.rsplit("-k", 1)[0], True
    return base, k, fmt or "full"


def policy_color(policy: str) -> str:
    """The colour of ``policy``: its base policy's, lightened for label formats, darkened for fixed-k."""
    base, k, fmt = _split(policy)
    rgb = matplotlib.colors.to_rgb(BASE_COLORS.get(base, "#444444"))
    h, l, s = colorsys.rgb_to_hls(*rgb)
    l = l + (1 - l) * FORMAT_SHADE.get(fmt, 0.5)
    if k:
        l *= 0.7
    return matplotlib.colors.to_hex(colorsys.hls_to_rgb(h, min(l, 0.92), s))


def palette(policies: Sequence[str]) -> dict:
    return {p: policy_color(p) for p in policies}


def stamp(fig, runs, y: float = 0.005) -> None:
    """Write the backend and model of ``runs`` into the figure's footer."""
    runs = [r for r in (runs if isinstance(runs, (list, tuple)) else [runs]) if r is not None]
    text = "; ".join(r.label + ("" if r.is_reference else f" - model {r.model}") for r in runs)
    fig.text(0.01, y, text, fontsize=7, color="#555555", ha="left", va="bottom")


def _fig(w: float, h: float, **kw):
    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.85)
    return plt.subplots(figsize=(w, h), dpi=DPI, **kw)


# --------------------------------------------------------------------------- chapter 1
def concept_figure(views: Sequence, title: str = "") -> plt.Figure:
    """The hidden-profile concept diagram: one panel per attribution variant.

    ``views``: :class:`~crossprofile_lib.book.Walkthrough` objects (one template, eight
    variants). Each panel has agents as rows and the 12 facts as columns (grouped support /
    decoy / irrelevant); a filled dot marks a holder; a box marks what the memory policy kept.
    """
    n = len(views)
    cols = 4 if n > 4 else n
    rows = int(np.ceil(n / cols))
    fig, axes = _fig(3.4 * cols, 2.3 * rows + 0.6, nrows=rows, ncols=cols, squeeze=False)
    for ax, v in zip(axes.ravel(), views):
        facts = v.facts_by_role
        agents = list(v.agents)
        kept = v.kept_fact_ids(v.policies[0])
        for x, f in enumerate(facts):
            holders = v.task.holders[f.id]
            for y, a in enumerate(agents):
                held = a in holders
                ax.scatter(x, y, s=46, marker="o", facecolor=ROLE_COLORS[f.role] if held else "white",
                           edgecolor=ROLE_COLORS[f.role], linewidth=1.0, zorder=3)
            if f.id in kept:
                ax.add_patch(matplotlib.patches.Rectangle((x - 0.42, -0.6), 0.84, len(agents) + 0.2, fill=False,
                                                          edgecolor="#0072B2", linewidth=1.6, zorder=4))
        for b in (4.5, 7.5):
            ax.axvline(b, color="#cccccc", linewidth=0.8)
        ax.set_xticks([2, 6, 9.5], ["support", "decoy", "irrelevant"], fontsize=8)
        ax.set_yticks(range(len(agents)), agents, fontsize=8)
        ax.set_xlim(-0.7, len(facts) - 0.3)
        ax.set_ylim(len(agents) - 0.4, -0.8)
        ax.grid(False)
        c = v.composition(v.policies[0])
        cell = {"classic": " (classic)", "mirror": " (mirror)"}.get(v.task.variant.cell, "")
        ax.set_title(f"{v.task.variant.name}{cell}: {v.policies[0]} keeps "
                     f"{c.kept_support}/{c.kept_decoy}/{c.kept_irrelevant}", fontsize=9)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    handles = [Line2D([], [], marker="o", linestyle="none", color=ROLE_COLORS[r], label=f"{r} fact held")
               for r in ("support", "decoy", "irrelevant")]
    handles += [Line2D([], [], marker="o", linestyle="none", mfc="white", mec="#777777", label="not held"),
                Patch(fill=False, edgecolor="#0072B2", linewidth=1.6, label=f"kept by {views[0].policies[0]}")]
    fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    return fig


# --------------------------------------------------------------------------- accuracy
def accuracy_heatmap(acc: pd.DataFrame, run, title: str = "", cmap: str = "RdYlGn") -> plt.Figure:
    """Heat map of accuracy (%) with rows = policies and columns = the 8 variants.

    ``acc``: a wide ``(n_policies, n_variants)`` frame of percentages.
    """
    fig, ax = _fig(1.0 * acc.shape[1] + 2.4, 0.34 * acc.shape[0] + 1.5)
    sns.heatmap(acc, annot=True, fmt=".0f", cmap=cmap, vmin=0, vmax=100, linewidths=0.5, ax=ax,
                cbar_kws={"label": "accuracy (%)"}, annot_kws={"fontsize": 8})
    lab = {"PSP": "PSP\nclassic", "PSS": "PSS\nclassic", "SPP": "SPP\nmirror", "SPS": "SPS\nmirror"}
    ax.set_xticklabels([lab.get(t.get_text(), t.get_text()) for t in ax.get_xticklabels()], rotation=0)
    for t in ax.get_yticklabels():
        t.set_color(policy_color(t.get_text()) if _split(t.get_text())[0] in BASE_COLORS else "black")
    ax.set_xlabel("attribution variant (support - decoy - irrelevant; S shared, P private)")
    ax.set_ylabel("")
    ax.set_title(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    stamp(fig, run)
    return fig


def interval_bars(t: pd.DataFrame, x: str, hue: str, runs, y_label: str = "accuracy (%)",
                  title: str = "", ylim: Optional[tuple] = (0, 100), hue_colors: Optional[dict] = None,
                  width: float = 7.0, height: float = 3.4) -> plt.Figure:
    """Grouped bars of ``estimate`` with ``[lo, hi]`` whiskers: groups by ``x``, bars by ``hue``."""
    xs = list(pd.unique(t[x]))
    hs = list(pd.unique(t[hue]))
    colors = hue_colors or {h: policy_color(str(h)) for h in hs}
    fig, ax = _fig(width, height)
    w = 0.8 / max(len(hs), 1)
    for j, h in enumerate(hs):
        d = t[t[hue] == h].set_index(x).reindex(xs)
        pos = np.arange(len(xs)) - 0.4 + w * (j + 0.5)
        ax.bar(pos, d["estimate"], width=w * 0.95, color=colors.get(h, "#777777"), label=str(h))
        ax.errorbar(pos, d["estimate"], yerr=[d["estimate"] - d["lo"], d["hi"] - d["estimate"]], fmt="none",
                    ecolor="#333333", elinewidth=0.9, capsize=2)
    ax.set_xticks(np.arange(len(xs)), [str(v) for v in xs])
    ax.set_ylabel(y_label)
    if ylim:
        ax.set_ylim(*ylim)
    ax.axhline(0, color="#999999", linewidth=0.6)
    ax.legend(fontsize=7, ncol=min(len(hs), 4), loc="best", frameon=True)
    ax.set_title(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    stamp(fig, runs)
    return fig


def forest(t: pd.DataFrame, label: str, runs, title: str = "", x_label: str = "points",
           lo: str = "lo", hi: str = "hi", extra: Optional[tuple[str, str, str]] = None,
           paper: Optional[dict] = None) -> plt.Figure:
    """Contrasts as points with intervals (one row each). ``extra`` = ``(lo, hi, name)`` draws a
    second, wider interval (e.g. Holm-adjusted); ``paper`` maps a row label to paper values
    (drawn as hollow diamonds, labelled 'paper')."""
    fig, ax = _fig(6.8, 0.55 * len(t) + 1.5)
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
                    ax.plot(v, y, "D", mfc="none", mec="#D55E00", ms=7, label="paper (Qwen/Llama/...)" if first else None)
                    first = False
    ax.axvline(0, color="#777777", linewidth=0.8)
    ax.set_yticks(ys, list(t[label]))
    ax.set_xlabel(x_label)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    stamp(fig, runs)
    return fig


def composition_bars(t: pd.DataFrame, runs, title: str = "", by: str = "policy") -> plt.Figure:
    """Stacked bars of mean kept support / decoy / irrelevant facts per ``by`` (wide input:
    columns ``kept_support``, ``kept_decoy``, ``kept_irrelevant``)."""
    fig, ax = _fig(6.8, 0.45 * len(t) + 1.4)
    left = np.zeros(len(t))
    ys = np.arange(len(t))[::-1]
    for role in ("support", "decoy", "irrelevant"):
        v = t[f"kept_{role}"].to_numpy(dtype=float)
        ax.barh(ys, v, left=left, color=ROLE_COLORS[role], label=role, height=0.7)
        for y, l0, vv in zip(ys, left, v):
            if vv >= 0.4:
                ax.text(l0 + vv / 2, y, f"{vv:.2f}", ha="center", va="center", fontsize=7, color="white")
        left += v
    ax.set_yticks(ys, [str(s) for s in t[by]])
    ax.set_xlabel("mean kept facts (of 5 support / 3 decoy / 4 irrelevant)")
    ax.set_xlim(0, 12)
    ax.legend(fontsize=7, ncol=3, loc="lower right")
    ax.set_title(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    stamp(fig, runs)
    return fig


def net_lead_curves(tables: dict, runs, title: str = "", paper: Optional[dict] = None) -> plt.Figure:
    """Accuracy (%) by net lead, one line per run label. ``tables``: label -> frame with
    ``net_lead, n, estimate, lo, hi``. ``paper``: model -> {net lead: value} (drawn as hollow
    markers labelled 'paper')."""
    fig, ax = _fig(6.4, 3.6)
    for i, (lab, t) in enumerate(tables.items()):
        t = t[t["n"] > 0]
        c = sns.color_palette("dark", 8)[i % 8]
        ax.plot(t["net_lead"], t["estimate"], "o-", color=c, label=lab)
        ax.fill_between(t["net_lead"], t["lo"], t["hi"], color=c, alpha=0.15)
    for j, (m, pts) in enumerate((paper or {}).items()):
        ax.plot(list(pts), list(pts.values()), "D", mfc="none", ms=7, mec=["#D55E00", "#CC79A7", "#56B4E9"][j % 3],
                linestyle="none", label=f"paper: {m}")
    ax.set_xlabel("net evidence lead of the kept facts (correct minus decoy)")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(-2, 102)
    ax.set_xticks(range(-3, 6))
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    stamp(fig, runs)
    return fig


def line_by(t: pd.DataFrame, x: str, hue: str, runs, y_label: str, title: str = "",
            ylim: Optional[tuple] = None) -> plt.Figure:
    """Lines of ``estimate`` against ``x`` per ``hue`` (policy colours), with interval bands."""
    fig, ax = _fig(6.4, 3.6)
    for h, d in t.groupby(hue, sort=False):
        d = d.sort_values(x)
        c = policy_color(str(h))
        ax.plot(d[x], d["estimate"], "o-", color=c, label=str(h))
        if "lo" in d:
            ax.fill_between(d[x], d["lo"], d["hi"], color=c, alpha=0.12)
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel(y_label)
    if ylim:
        ax.set_ylim(*ylim)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    stamp(fig, runs)
    return fig
