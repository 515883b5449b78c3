"""Chapter 13: the reference decider fitted to the paper's published numbers (backend ``ledger``, never a model run),
what its social-proof weight contributes, what it cannot reproduce and whether the fit is identified: tables,
verdicts and figures (each figure's footer and each caption, :func:`fit_who`, say the numbers are a fit)."""

from __future__ import annotations

import math
import textwrap
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.stats import chi2

import crossprofile_lib.book.figures as F
from crossprofile_lib.book.display import Markdown, admonition, mark_text
from crossprofile_lib.book.paper import figure_name, load_paper_figures, paper_text
from crossprofile_lib.book.params import BookParams
from crossprofile_lib.book.runs import REFERENCE, reference_tokenizer, resolve
from crossprofile_lib.paperfit import NOT_A_MODEL_RUN, fit_paper, predict_at
from crossprofile_lib.paperfit.figures import short
from crossprofile_lib.stats.format import fmt_ci

MODEL_COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7"]
NEAR = 3.0   # points: a figure the fit comes "within 3 points" of (a fit, not a reproduction)
#: The figures' stamp: backend and what the numbers are (the fitted deciders are in the caption).
FOOTER = f"Backend ledger (the reference decider, not a language model):\n{NOT_A_MODEL_RUN}."


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
    axes = grid.flat[:max(1, len(models))]
    lo_all = float(np.nanmin([t.paper.min(), t.lo.min(), t.fit.min()])) - 5
    hi_all = float(np.nanmax([t.paper.max(), t.hi.max(), t.fit.max()])) + 5
    near = total = 0
    for ax, m, c in zip(axes, models, MODEL_COLORS * 3):
        d = t[t.model == m]
        ax.plot([lo_all, hi_all], [lo_all, hi_all], color="#777777", linewidth=0.8, zorder=0)
        for role, marker, face in (("fitted", "o", c), ("held out (paper names no model)", "s", "none")):
            e = d[d.role == role]
            if e.empty:
                continue
            ax.errorbar(e.paper, e.fit, yerr=[(e.fit - e.lo).clip(lower=0), (e.hi - e.fit).clip(lower=0)],
                        fmt=marker, mfc=face, mec=c, ecolor=c, ms=5, elinewidth=1, capsize=0, linestyle="none", label=role)
        f = d[d.role == "fitted"]
        near, total = near + int((f.residual.abs() <= NEAR).sum()), total + len(f)
        for _, r in d.reindex(d.residual.abs().sort_values(ascending=False).index).head(3).iterrows():
            right = r.paper > (lo_all + hi_all) / 2   # label toward the panel's inside, never past its edge
            ax.annotate(textwrap.fill(figure_name(str(r.figure)), 26), (r.paper, r.fit), fontsize=F.FONT["note"], color="#333333",
                        xytext=(-4 if right else 4, -6), textcoords="offset points", va="top",
                        ha="right" if right else "left")
        ax.set_xlim(lo_all, hi_all)
        ax.set_ylim(lo_all, hi_all)
        ax.set_title(m)
        ax.set_xlabel("paper (% or points)")
    for row in grid:
        row[0].set_ylabel("reference decider, fitted (% or points)")
    message = message or f"{near} of {total} fitted figures within {NEAR:g} points of the paper"
    F.finish(fig, message, title, [FOOTER], F.legend_handles(axes), ncol=2)
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
    if message is None:
        widths = res.params.assign(w=res.params.profile_hi - res.params.profile_lo)
        flat = widths.loc[widths.w.idxmax()] if len(widths) else None
        message = ("Each parameter's loss profile" if flat is None else
                   f"Widest profile interval: {flat.model}'s {flat.parameter.replace('_', ' ')}")
    F.finish(fig, message, title, [FOOTER], F.legend_handles(axes[0]), ncol=4)
    return fig


def figure_table(res) -> pd.DataFrame:
    """Wide table: one row per figure, per model paper / fit [interval] / residual / leave-one-out."""
    t = res.figures.copy()
    t["fit [95%]"] = [fmt_ci(v, a, b, digits=1) + mark_text("reference") if np.isfinite(v) else ""
                      for v, a, b in zip(t.fit, t.lo, t.hi)]
    t["figure"] = t["figure"].map(figure_name)
    out = t.pivot_table(index="figure", columns="model", values=["paper", "fit [95%]", "residual", "loo"],
                        aggfunc="first", sort=False)
    cols = [(k, m) for m in dict.fromkeys(t.model) for k in ("paper", "fit [95%]", "residual", "loo") if (k, m) in out.columns]
    out = out[cols].swaplevel(axis=1)
    return out.reindex(list(dict.fromkeys(t.figure)))


#: The label-removal figure whose share of social proof the chapter states.
LABEL_REMOVAL = "classic-labels/ALL unlabeled - ALL"
#: R1-rel's classic composition and the filter's precision (paper figures the fit cannot move).
COMPOSITION = ("classic-kept/R1-rel support", "classic-kept/R1-rel decoy", "classic-kept/R1-rel irrelevant",
               "relevance-filter/precision")


def template_paths(p: BookParams) -> list[str]:
    """The fit's templates as paths (relative to the project, wherever the notebook runs)."""
    return [str(resolve(t)) for t in p.templates]


def fit_to_paper(p: BookParams):
    """The fit to the paper's figures on this build's templates and seeds (``p.fit_resamples`` refits), its memories
    priced as the other reference chapters price theirs (:func:`crossprofile_lib.book.runs.reference_tokenizer`)."""
    return fit_paper(templates=template_paths(p), seeds=p.seeds, resamples=p.fit_resamples, boot_seed=p.boot_seed,
                     tokenizer=fit_tokenizer(p))


def fit_tokenizer(p: BookParams):
    """The pricing of the fit's memories: the book's reference tokenizer (Qwen2.5 by default), offline where it
    cannot be had."""
    return reference_tokenizer(p.tokenizer)[0]


def fit_built_with(p: BookParams) -> dict:
    """What the chapter's "built with" line names: no model backend, the templates, seeds and refits."""
    return dict(backend="", templates=p.templates, seeds=p.seeds, n_resamples=p.fit_resamples)


def fit_who(res) -> str:
    """The caption line of every table and figure: the reference decider at each paper model's fit."""
    fitted = "; ".join(f"{m}: {f['model']}" for m, f in res.info.get("fits", {}).items())
    return (f"Backend ledger (the {REFERENCE}, not a language model) at each paper model's fitted parameters: "
            f"{fitted}. {NOT_A_MODEL_RUN[0].upper() + NOT_A_MODEL_RUN[1:]}.")


def fit_box(res, p: BookParams):
    """The box saying what this chapter's numbers are."""
    info = res.info
    return admonition(
        "important", "A fit to the paper's published numbers, not a model run",
        f"Every number below except those in columns labelled <b>paper</b> is the {REFERENCE} on this suite's "
        f"{info['n_templates']} templates ({info['n_decisions']} decisions, seeds {', '.join(map(str, p.seeds))}), at "
        "parameters chosen to match the paper. Nothing here measures a language model. Intervals: "
        f"{info['resamples']} parametric-bootstrap refits (the paper's figures redrawn from the fitted decider at the "
        f"paper's sample sizes). Memories priced with the {info['tokenizer']} tokenizer.")


def _fitted(res) -> pd.DataFrame:
    return res.figures[res.figures.role == "fitted"]


def reproduced(res) -> list[str]:
    """Figures every fitted model comes within :data:`NEAR` points of (a fit: the parameters were chosen to match)."""
    near = _fitted(res).groupby("figure").residual.apply(lambda r: (r.abs() <= NEAR).all())
    return [r for r, v in near.items() if v]


def missed(res) -> pd.Series:
    """Figure -> largest miss, for the figures some model misses by more than twice :data:`NEAR`."""
    far = _fitted(res).groupby("figure").residual.apply(lambda r: r.abs().max())
    return far[far > 2 * NEAR].sort_values(ascending=False)


def fit_takeaways(res) -> list[str]:
    """Each model's fitted (s, w, beta) and misfit; which figures are reproduced and which missed."""
    P = res.params.set_index(["model", "parameter"])
    lines = []
    for m, f in res.info["fits"].items():
        s_, w_, b_ = (P.loc[(short(m), k)] for k in ("social_proof", "irrelevant_weight", "inverse_temperature"))
        lines.append(f"<b>{short(m)}</b> ({f['n_figures']} figures, {f['n_independent']} independent against 3 "
                     f"parameters; chi-squared {f['chi2']:.1f} on {f['df']} df): social proof s = "
                     f"{fmt_ci(s_.estimate, s_.lo, s_.hi, 3)}, "
                     f"irrelevant weight w = {fmt_ci(w_.estimate, w_.lo, w_.hi, 2)}, inverse temperature "
                     f"beta = {fmt_ci(b_.estimate, b_.lo, b_.hi, 2)}; root-mean-square miss {f['rmse']:.1f} points.")
    ok, bad = reproduced(res), missed(res)
    if ok:
        lines.append(f"Fitted within {NEAR:g} points for every model fitted to it (a fit, not a reproduction): "
                     + ", ".join(figure_name(r) for r in ok) + ".")
    if len(bad):
        lines.append(f"Missed by more than {2 * NEAR:g} points for some model: " +
                     ", ".join(f"{figure_name(r)} (largest miss {v:.1f})" for r, v in bad.items()) + ".")
    return lines


def fit_params_table(res) -> pd.DataFrame:
    """Fitted parameters per paper model: estimate (at a bound?), bootstrap and profile intervals."""
    t = res.params.assign(
        estimate=[f"{v:.3f}" + (" (at a bound)" if b else "") for v, b in zip(res.params.estimate, res.params.at_bound)],
        bootstrap=["–" if math.isnan(a) else f"[{a:.3f}, {b:.3f}]" for a, b in zip(res.params.lo, res.params.hi)],
        profile=[f"[{a:.3f}, {b:.3f}]" for a, b in zip(res.params.profile_lo, res.params.profile_hi)])
    return t.set_index(["model", "parameter"])[["estimate", "bootstrap", "profile"]]


def contribution_table(res, p: BookParams) -> pd.DataFrame:
    """Each figure from the fitted decider, from the same decider with s = 0, and their difference."""
    tpl, rows = template_paths(p), {}
    for m, f in res.info["fits"].items():
        th, k = f["theta"], short(m)
        rows[(k, "fitted")] = predict_at(th, tpl, p.seeds, tokenizer=fit_tokenizer(p))
        rows[(k, "s = 0")] = predict_at([0.0, th[1], th[2]], tpl, p.seeds, tokenizer=fit_tokenizer(p))
        rows[(k, "contribution of s")] = rows[(k, "fitted")] - rows[(k, "s = 0")]
    return pd.DataFrame(rows)


def contribution_display(cf: pd.DataFrame) -> pd.DataFrame:
    """:func:`contribution_table` for the page: figures by name, each decider value marked (reference decider)."""
    mk = mark_text("reference")
    out = cf.apply(lambda col: col.map(
        lambda v: "–" if not np.isfinite(v) else f"{v:.1f}" + (mk if col.name[1] != "contribution of s" else "")))
    out.index = [figure_name(i) for i in out.index]
    return out


def label_removal_note(res, cf: pd.DataFrame):
    """When the first model's label-removal effect vanishes at s = 0: that it is all social proof; else None."""
    m0 = short(next(iter(res.info["fits"]), ""))
    if not (LABEL_REMOVAL in cf.index and (m0, "s = 0") in cf.columns and abs(cf.loc[LABEL_REMOVAL, (m0, "s = 0")]) < 1e-9):
        return None
    return Markdown(
        f"For {m0}, the label-removal effect in the classic cell is {cf.loc[LABEL_REMOVAL, (m0, 'fitted')]:.1f} points at "
        f"the fitted s and {cf.loc[LABEL_REMOVAL, (m0, 's = 0')]:.1f} without social proof: in this mechanism the whole "
        "effect of removing labels is the social-proof weight, because labels are all the ledger reads from a line "
        "besides its fact.")


def memory_table(res) -> pd.DataFrame:
    """Parameter-free figures: the paper's value beside this suite's memories (with an interval)."""
    mem = res.memory.assign(ledger=[fmt_ci(v, a, b, 2) + mark_text("exact" if u == "facts" else "reference")
                                    for v, a, b, u in zip(res.memory.ledger, res.memory.lo, res.memory.hi, res.memory.unit)],
                            figure=res.memory.figure.map(figure_name))
    return mem.set_index(["figure", "paper_model"])[["unit", "paper", "ledger"]]


def composition_note(res) -> Optional[object]:
    """Why no decision rule gives the paper's R1-rel composition when it keeps clearly more irrelevant facts."""
    M = res.memory.set_index("figure")
    if not all(k in M.index for k in COMPOSITION):
        return None
    ps, pd_, pi = (M.loc[k, "paper"] for k in COMPOSITION[:3])
    ls, ld, li = (M.loc[k, "ledger"] for k in COMPOSITION[:3])
    prec = M.loc[COMPOSITION[3], "paper"]
    if not pi > li + 0.5:
        return None
    return Markdown(
        f"The paper's R1-rel keeps {ps:.2f} support, {pd_:.2f} decoy and {pi:.2f} irrelevant facts per classic-cell "
        f"memory (paper) while reporting a relevance filter of {prec:.1f}% precision. With a filter that precise, the "
        "relevant tier fills the budget first and irrelevant facts only take the space it leaves; this suite's memory "
        f"under the same policy and the oracle filter keeps {ls:.2f} / {ld:.2f} / {li:.2f}. No decision rule can turn one "
        "composition into the other: either the model's filter flags far more irrelevant facts as relevant than the "
        "precision figure suggests, or the counts measure something else. The mechanism reproduces the *accuracy* "
        "cost of relevance filtering in the classic cell through the decoys it lets in, not this composition.")


def outside_table() -> pd.DataFrame:
    """The paper's natural-discussion and HiddenBench figures (outside what the decider can predict)."""
    return pd.DataFrame([dict(figure=f"{it.result}: {it.label}", data=it.data, paper=paper_text(it.ref))
                         for it in load_paper_figures()
                         if it.data in ("natural", "hiddenbench")]).set_index("figure")


def worst_misses(res, n: int = 6) -> pd.DataFrame:
    """The ``n`` largest misses among the fitted figures."""
    f = _fitted(res)
    worst = f.assign(abs_res=f.residual.abs()).sort_values("abs_res", ascending=False).head(n)
    worst = worst.assign(figure=worst.figure.map(figure_name))
    return worst.set_index(["model", "figure"])[["paper", "fit", "residual", "loo"]]


def fit_implications(res) -> list[str]:
    """What the fit implies, in statements computed from it."""
    lines, info = [], res.info
    ok, bad = reproduced(res), missed(res)
    if info["fits"]:
        q = next(iter(info["fits"]))
        s_q = info["fits"][q]["theta"][0]
        lines.append(f"At {short(q)}'s fitted weight, a memory line naming four speakers counts {1 + 3 * s_q:.2f} times a "
                     "line naming one.")
    if ok:
        lines.append(f"The fitted decider comes within {NEAR:g} points, for every model fitted to it (a fit: its "
                     "parameters were chosen to match): " + ", ".join(figure_name(r) for r in ok) + ".")
    if len(bad):
        lines.append("It misses by more than " + f"{2 * NEAR:g} points: " + ", ".join(figure_name(r) for r in bad.index)
                     + ".")
    return lines
