"""The book's figures: at most 7 inches wide, a bold **message** title computed from the data (or ``message=``) over
the chapter's ``title``, legends below, the run's model in the footer; how they look is :mod:`.style`'s."""

from __future__ import annotations

from collections import Counter
from typing import Optional, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from crossprofile_lib.book.style import (  # noqa: F401  (read here by the chapters, the book's namespace and tests)
    BASE_COLORS,
    FONT,
    PAPER_COLOR,
    ROLE_COLORS,
    WIDTH,
    Signal,
    _hue_colors,
    _split,
    finish,
    legend_handles,
    legend_of,
    model_signal,
    new_figure,
    no_signal_note,
    policy_color,
    top,
    top_names,
    use_svg,
)
from crossprofile_lib.design import CLASSIC, MIRROR


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
    # the title quotes a template's title: '$' literal (no TeX math), as every page shows user text as plain text
    finish(fig, message, title.replace("$", r"\$"), [], (handles, [h.get_label() for h in handles]), ncol=5)
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
        parts = [f"{top(acc[v])} the {name} cell {v} ({acc[v].max():.0f}%)"
                 for v, name in ((CLASSIC, "classic"), (MIRROR, "mirror")) if v in acc.columns and acc[v].notna().any()]
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
    pts = [(v, y) for y, lab in zip(ys, t[label]) for v in ((paper or {}).get(lab) or {}).values()
           if isinstance(v, (int, float))]
    if pts:
        ax.plot(*zip(*pts), "D", mfc="none", mec=PAPER_COLOR, ms=7, label="paper (its models)")
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
        who = ("reference decider" if getattr(runs, "is_reference", False) else "language model")
        ax.plot(est["estimate"], [ys[q] for q in est["quantity"]], "o", color="#0072B2",
                label=f"this run, {who} [95% interval]")
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
    if message is None and getattr(runs, "is_reference", False):  # a mechanism is never scored against the paper
        message = (f"{total} paper values beside the reference decider, a mechanism, not scored: where they differ, "
                   "the text says why (computed)")
    message = message or f"{within} of {total} paper values fall inside this run's 95% interval"
    finish(fig, message, title, runs, legend_handles(axes[:, 0]), ncol=3)
    return fig


use_svg()
