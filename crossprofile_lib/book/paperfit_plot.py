"""Figures of the paper fit; each footer says the numbers are the reference decider's fit to the paper's published
numbers (backend ``ledger``), not a model run."""

from __future__ import annotations

import textwrap
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.stats import chi2

import crossprofile_lib.book.figures as F
from crossprofile_lib.paperfit.figures import NOT_A_MODEL_RUN
from crossprofile_lib.stats.format import fmt_ci

MODEL_COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7"]
NEAR = 3.0   # points: a figure the fit reproduces "within 3 points"


def footer(res) -> str:
    """The stamp: backend and what the numbers are (the fitted deciders are in the caption)."""
    return f"Backend ledger (the reference decider, not a language model):\n{NOT_A_MODEL_RUN}."


def fitted_models(res) -> str:
    """``Qwen2.5-7B-Instruct: reference-decider(sp=...,irr=...,beta=...); ...``: each column's model."""
    return "; ".join(f"{m}: {f['model']}" for m, f in res.info.get("fits", {}).items())


def paper_vs_fit(res, title: str = "", message: Optional[str] = None) -> plt.Figure:
    """One panel per model: the paper's value (x) against the fit (y) with its 95% parametric-bootstrap interval;
        filled dots fitted, hollow squares held out, the diagonal a perfect fit, the largest misses labelled."""
    t = res.figures[res.figures.paper.notna()]
    models = list(dict.fromkeys(t.model))
    # two panels a row (three in one row left ~80-px plots with truncated labels); a row per two models
    ncols = 1 if len(models) <= 1 else 2
    nrows = int(np.ceil(max(1, len(models)) / ncols))
    fig, grid = F.new_figure(F.WIDTH, 3.6 * nrows + 0.6, nrows=nrows, ncols=ncols, squeeze=False, sharey=True)
    for ax in grid.flat[len(models):]:
        ax.set_visible(False)
    axes = np.array([list(grid.flat[:max(1, len(models))])])
    lo_all = float(np.nanmin([t.paper.min(), t.lo.min(), t.fit.min()])) - 5
    hi_all = float(np.nanmax([t.paper.max(), t.hi.max(), t.fit.max()])) + 5
    near = total = 0
    for ax, m, c in zip(axes[0], models, MODEL_COLORS * 3):
        d = t[t.model == m]
        ax.plot([lo_all, hi_all], [lo_all, hi_all], color="#777777", linewidth=0.8, zorder=0)
        for role, marker, face in (("fitted", "o", c), ("held out (paper names no model)", "s", "none")):
            e = d[d.role == role]
            if e.empty:
                continue
            ax.errorbar(e.paper, e.fit, yerr=[(e.fit - e.lo).clip(lower=0), (e.hi - e.fit).clip(lower=0)],
                        fmt=marker, mfc=face, mec=c, ecolor=c, ms=5, elinewidth=1, capsize=0, linestyle="none",
                        label="fitted" if role == "fitted" else "held out (paper names no model)")
        f = d[d.role == "fitted"]
        near, total = near + int((f.residual.abs() <= NEAR).sum()), total + len(f)
        for _, r in d.reindex(d.residual.abs().sort_values(ascending=False).index).head(3).iterrows():
            right = r.paper > (lo_all + hi_all) / 2   # label toward the panel's inside, never past its edge
            ax.annotate(textwrap.fill(str(r.figure), 26), (r.paper, r.fit), fontsize=F.FONT["note"], color="#333333",
                        xytext=(-4 if right else 4, -6), textcoords="offset points", va="top",
                        ha="right" if right else "left")
        ax.set_xlim(lo_all, hi_all)
        ax.set_ylim(lo_all, hi_all)
        ax.set_title(m)
        ax.set_xlabel("paper (% or points)")
    for row in grid:
        row[0].set_ylabel("reference decider, fitted (% or points)")
    handles = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    message = message or f"{near} of {total} fitted figures within {NEAR:g} points of the paper"
    F.finish(fig, message, title, [footer(res)], (list(handles.values()), list(handles)), ncol=2)
    return fig


def profiles(res, title: str = "", message: Optional[str] = None) -> plt.Figure:
    """Each parameter's loss profile per model, (loss - minimum) / sigma^2 (sigma^2 = max(1, chi2 / df)); under the
        dashed line (chi2_1 95%) is the profile interval."""
    p = res.profiles
    params = list(dict.fromkeys(p.parameter))
    fig, axes = F.new_figure(F.WIDTH, 3.4, ncols=max(1, len(params)), squeeze=False, sharey=True)
    for ax, name in zip(axes[0], params):
        inside = p[(p.parameter == name) & (p.delta < 50)].value
        for m, c in zip(dict.fromkeys(p.model), MODEL_COLORS * 3):
            d = p[(p.parameter == name) & (p.model == m)].sort_values("value")
            ax.plot(d.value, d.delta.clip(upper=50), color=c, linewidth=1.5, marker=".", ms=4, label=m)
        if len(inside):   # zoom on the values within reach of any model's minimum
            allv = np.sort(p[p.parameter == name].value.unique())
            i0 = max(0, np.searchsorted(allv, inside.min()) - 1)
            i1 = min(len(allv) - 1, np.searchsorted(allv, inside.max()) + 1)
            ax.set_xlim(allv[i0], allv[i1])
        ax.axhline(chi2.ppf(0.95, 1), color="#555555", linestyle="--", linewidth=0.8, label="95% (chi2, 1 df)")
        if name == "inverse_temperature":
            ax.set_xscale("log")
        ax.set_ylim(0, 50)
        ax.set_xlabel(name.replace("_", " "))
    axes[0, 0].set_ylabel(r"$\Delta$ loss / $\hat\sigma^2$")
    handles = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if message is None:
        widths = res.params.assign(w=res.params.profile_hi - res.params.profile_lo)
        flat = widths.loc[widths.w.idxmax()] if len(widths) else None
        message = ("Each parameter's loss profile" if flat is None else
                   f"Widest profile interval: {flat.model}'s {flat.parameter.replace('_', ' ')}")
    F.finish(fig, message, title, [footer(res)], (list(handles.values()), list(handles)), ncol=4)
    return fig


def figure_table(res) -> pd.DataFrame:
    """Wide table: one row per figure, per model paper / fit [interval] / residual / leave-one-out."""
    t = res.figures.copy()
    t["fit [95%]"] = [fmt_ci(v, a, b, digits=1) if np.isfinite(v) else "" for v, a, b in zip(t.fit, t.lo, t.hi)]
    out = t.pivot_table(index="figure", columns="model", values=["paper", "fit [95%]", "residual", "loo"],
                        aggfunc="first", sort=False)
    models = list(dict.fromkeys(t.model))
    cols = [(k, m) for m in models for k in ("paper", "fit [95%]", "residual", "loo") if (k, m) in out.columns]
    out = out[cols].swaplevel(axis=1)
    return out.reindex(list(dict.fromkeys(t.figure)))
