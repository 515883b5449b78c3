"""Chapters 6 and 7: the label controls per decider, the ALL memory's support-shared-minus-private gap, the
social-proof sweep; accuracy by the kept facts' net lead, whether the policy matters once it is known, and the
social-proof fit. One block per model beside the SAME model's paper value, with its headroom verdict."""

from __future__ import annotations

import html
from typing import Optional, Sequence

import pandas as pd

from crossprofile_lib.book.display import Markdown, admonition, mark_kind, mark_text, name_html, run_mark
from crossprofile_lib.book.experiments import user_copy
from crossprofile_lib.book.explain import mechanism, why
from crossprofile_lib.book.models import headroom_verdict, run_paper_model
from crossprofile_lib.book.paper import paper_item, paper_text
from crossprofile_lib.book.runs import REFERENCE, Run, reference_who
from crossprofile_lib.book.tables import CELL_LABELS, label_effect_rows, net_lead_where, social_proof_fit
from crossprofile_lib.design import CLASSIC
from crossprofile_lib.paper_figures import paper_values
from crossprofile_lib.stats import tables as st
from crossprofile_lib.stats.format import ci_column, ci_pivot
from crossprofile_lib.stats.netlead import net_lead_analysis, verdict_display

#: The ALL memory with full, removed and shuffled labels (the sweep's lines).
ALL_LABELS = ("ALL", "ALL:unlabeled", "ALL:shuffled")


#: The paper's label-control items (classic cell, ALL memory) by label format.
LABEL_ITEMS = {"unlabeled": "classic-labels/ALL unlabeled - ALL", "shuffled": "classic-labels/ALL shuffled - ALL"}
#: The paper's support-shared item.
SHARED_ITEM = "all-support-shared/ALL: support shared - private"


def deciders(ch) -> list[Run]:
    """The reference decider, its social-proof run and every model's sample (runs not made left out)."""
    return [r for r in (ch.ref, ch.sp, *ch.all_models) if r is not None]


def versus_policies(ch, builtin: Sequence[str] = ("ALL", "R1", "B4")) -> list[str]:
    """The memories whose label controls a table shows: ``builtin`` and your copy policies."""
    return [*builtin, *[u for u in user_copy(ch.params.user_policies) if u not in builtin]]


def label_gap(run: Run, effects: dict) -> Optional[str]:
    """Why ``run`` shows no label control of the ALL memory (plain words naming the run), or None."""
    t = effects.get(run.label)
    if t is not None and not t.empty and ((t.versus == "ALL") & t.label_format.isin(list(LABEL_ITEMS))).any():
        return None
    have = sorted(p for p in run.df["policy"].astype(str).unique() if p.startswith("ALL"))
    return (f"{run.label} has no label controls of the ALL memory (it needs ALL with ALL:unlabeled or ALL:shuffled "
            f"in the same cells; its ALL policies: {', '.join(have) or 'none'}), so this page cannot show how labels "
            "move its decisions" + (f" (run folder {run.path})" if not run.is_reference else "") + ".")


def verdict_word(run: Run) -> str:
    """``confirmatory`` or ``exploratory`` for a model (its headroom verdict), ``""`` for the reference decider."""
    v = headroom_verdict(run)
    return "" if v.status == "reference" else v.status


def label_effects_by_run(runs: Sequence[Run]) -> dict:
    """Run label -> :func:`label_effect_rows` (each label control minus full labels, points)."""
    return {r.label: label_effect_rows(r, r.boot) for r in runs}


def support_shared_by_run(runs: Sequence[Run]) -> dict:
    """Run label -> the ALL memory's accuracy with support shared minus support private (points)."""
    return {r.label: st.support_shared_minus_private(r.df, r.boot) for r in runs}


def effect(t: pd.DataFrame, versus: str, fmt: str, cell: str):
    """The row of a :func:`label_effect_rows` table: label format ``fmt`` against ``versus`` in ``cell``, or None."""
    if t.empty:
        return None
    t = t[(t.versus == versus) & (t.label_format == fmt) & (t.cell == CELL_LABELS.get(cell, cell))]
    return t.iloc[0] if len(t) else None


def label_takeaways(runs: Sequence[Run], effects: dict, params=None) -> list[str]:
    """Removing the ALL memory's labels in the classic cell, per decider, beside the paper, with its direction; with
    the book's ``params``, why the reference decider's effect differs from the paper's (computed)."""
    lines = []
    for r in runs:
        e = effect(effects[r.label], "ALL", "unlabeled", "classic")
        if e is None:
            if not r.is_reference:
                lines.append(html.escape(label_gap(r, effects) or f"{r.label}: no ALL:unlabeled in the classic cell."))
            continue
        way = ("the paper's direction (its interval lies above 0)" if e.lo > 0 else
               "against the paper's direction (its interval lies below 0)" if e.hi < 0 else
               "no direction (its interval includes 0)")
        # a model: its own paper value only, and whether its numbers count
        extra = "" if r.is_reference else (
            f" Paper, same model: {html.escape(paper_text(LABEL_ITEMS['unlabeled'], run=r))}; this run's "
            f"numbers are <i>{verdict_word(r)}</i> (headroom verdict).")
        lines.append(f"{name_html(r)}: removing the labels from the ALL memory changes classic-cell ({CLASSIC}) "
                     f"accuracy by <b>{e.estimate:+.1f}</b> points [{e.lo:.1f}, {e.hi:.1f}] {run_mark(r)}: {way}.{extra}")
        if r.is_reference and params is not None and not r.header.get("config", {}).get("backend_options"):
            lines.append(why(mechanism(params), LABEL_ITEMS["unlabeled"], float(e.estimate)))
            s_ = effect(effects[r.label], "ALL", "shuffled", "classic")
            if s_ is not None:
                lines.append(why(mechanism(params), LABEL_ITEMS["shuffled"], float(s_.estimate)))
    lines.append(f"Paper (ALL unlabeled - ALL, classic cell, every model; beside the reference decider): "
                 f"{paper_text(LABEL_ITEMS['unlabeled'])}.")
    return lines


def label_controls(ch, r: Run, t: pd.DataFrame, versus: Optional[Sequence[str]] = None,
                   formats: Optional[Sequence[str]] = ("unlabeled", "shuffled")) -> pd.DataFrame:
    """Rows of a :func:`label_effect_rows` table for ``versus`` (None: :func:`versus_policies`) and ``formats``
    (None: all) at the run's shown budget (and the unbudgeted ALL)."""
    t = t[t.versus.isin(list(versus if versus is not None else versus_policies(ch)))]
    if formats is not None:
        t = t[t.label_format.isin(list(formats))]
    return t[t.budget_label.isin([ch.budget(r), "none"])]


def same_model_paper_column(wide: pd.DataFrame, run: Run, items: dict) -> pd.DataFrame:
    """``wide`` with a ``paper: <model>`` column: the SAME model's value at the rows ``items`` names;
    unchanged for the reference decider and for a model not in the paper."""
    pm = run_paper_model(run)
    if run.is_reference or pm is None or wide.empty:
        return wide
    col = []
    for key in wide.index:
        versus, fmt = key if isinstance(key, tuple) else (key, "")
        v = paper_item(items[fmt]).paper.get(pm) if versus == "ALL" and fmt in items else None
        col.append("" if v is None else f"{v:+.1f}")
    return wide.assign(**{f"paper: {pm}": col}) if any(col) else wide


def support_shared_wide(runs: Sequence[Run], shared: dict) -> pd.DataFrame:
    """Policy x per run ``(run, "this run")`` [95% interval] and, for a paper model, ``(run, "paper: <model>")``."""
    cols = {}
    for r in runs:
        t = shared[r.label]
        if t.empty:
            continue
        cols[(r.label, "this run")] = pd.Series([v + mark_text(mark_kind(r), r) for v in ci_column(t)],
                                                index=t["policy"].astype(str).to_numpy())
        pm = None if r.is_reference else run_paper_model(r)
        v = paper_item(SHARED_ITEM).paper.get(pm) if pm else None
        if v is not None:
            cols[(r.label, f"paper: {pm}")] = pd.Series({"ALL": f"{v:+.1f}"})
    return pd.DataFrame(cols).fillna("") if cols else pd.DataFrame()  # tuple keys: MultiIndex columns


def missing_shared(runs: Sequence[Run], shared: dict) -> list[str]:
    """The runs that cannot show the support-shared gap (no ALL rows in both support attributions), named."""
    return [f"{r.label} cannot show the ALL memory's support shared - private gap (it needs ALL decisions with the "
            f"support shared and private; run folder {r.path})." for r in runs if shared[r.label].empty]


def sweep_runs(ch) -> tuple[list[float], list[Run]]:
    """The social-proof weights of the sweep (0 first: the reference grid) and their runs."""
    weights = list(ch.params.social_proof_sweep)
    return [0.0] + weights, [ch.ref] + [ch.runs.sweep(s) for s in weights]


def sweep_table(weights: Sequence[float], runs: Sequence[Run], x: str = "social-proof weight s") -> pd.DataFrame:
    """Accuracy (%) of the ALL memory's formats in the classic cell per weight (points: ``lo`` = ``hi``)."""
    rows = []
    for s, r in zip(weights, runs):
        d = r.df[(r.df.cell == "classic") & r.df.policy.isin(list(ALL_LABELS))]
        for p, g in d.groupby("policy"):
            rows.append({x: s, "policy": p, "estimate": 100 * g.correct.mean()})
    t = pd.DataFrame(rows)
    t["lo"] = t["hi"] = t["estimate"]
    return t


def sweep_who(weights: Sequence[float]) -> str:
    """The caption line naming the sweep's deciders."""
    return reference_who("reference-decider(sp=s,irr=0,beta=inf) for s in " + ", ".join(f"{s:g}" for s in weights))


#: The three regressions, in the order the book names them.
FITS = {"fixed": "fixed effects (primary, the headline)", "ml": "ML random intercept (the paper's model)",
        "mixed": "Bayesian mixed model", "gee": "GEE"}
#: The paper's accuracy at three net leads (data/paper_figures.yaml items).
PAPER_LEADS = (("net-lead/net lead -2", -2), ("net-lead/net lead +2", 2), ("net-lead/net lead >= +4", 4))


def net_lead_analyses(ch) -> dict:
    """Run label -> net-lead analysis (shown runs with regressions, the stochastic reference without)."""
    an = {r.label: net_lead_analysis(r.df, r.boot, net_lead_where(ch, r), regressions=True) for r in ch.shown}
    an[ch.fit.label] = net_lead_analysis(ch.fit.df, ch.fit.boot, net_lead_where(ch, ch.fit), regressions=False)
    return an


def paper_by_lead() -> dict:
    """Paper model -> {net lead: accuracy (%)} (paper values)."""
    paper = {}
    for key, lead in PAPER_LEADS:
        for m, v in paper_values(key).items():
            paper.setdefault(m, {})[lead] = v
    return paper


def _has_terms(fit: dict) -> bool:
    return fit.get("terms") is not None and len(fit["terms"]) > 0


#: The net leads of the paper's graded curve and its figures.
GRADED = ((-2, "net-lead/net lead -2"), (2, "net-lead/net lead +2"))


def net_lead_takeaways(runs: Sequence[Run], an: dict, params=None) -> list[str]:
    """Whether accuracy never falls as the net lead rises, and whether policy terms stay significant; with the book's
    ``params``, the reference decider's accuracy at net leads -2 and +2 beside the paper's graded curve and why they
    differ (computed)."""
    by = {r.label: r for r in runs}
    lines = [f"{name_html(by.get(k, k))}: accuracy never falls as the net lead rises: "
             f"<b>{'yes' if a['nondecreasing'] else 'no'}</b>." for k, a in an.items()]
    for r in runs:
        if not (r.is_reference and params is not None and r.label in an
                and not r.header.get("config", {}).get("backend_options")):  # the face-value counter only
            continue
        t = an[r.label]["by_net_lead"].set_index("net_lead")
        for lead, ref in GRADED:
            v = float(t.loc[lead, "estimate"]) if lead in t.index and t.loc[lead, "n"] > 0 else float("nan")
            lines.append(f"{name_html(r)}: accuracy at net lead {lead:+d} is <b>{v:.1f}%</b> {run_mark(r)} (paper: "
                         f"{html.escape(paper_text(ref))}).")
            lines.append(why(mechanism(params), ref, v))
    for r in runs:
        v = {k: an[r.label][k].get("policy_significant") for k in FITS if k in an[r.label] and _has_terms(an[r.label][k])}
        if v:
            agree = "the fits agree" if len(set(v.values())) == 1 else "<b>the fits disagree</b>"
            fam = an[r.label].get("families", {}).get("primary", {}).get("family", "")
            lines.append(f"{name_html(r)}: policy terms significant once net lead and irrelevant-fact tone are in "
                         f"the model ({html.escape(fam)})? "
                         + "; ".join(f"{FITS[k]}: <b>{'yes' if s else 'no'}</b>" for k, s in v.items()) + f" ({agree}).")
    return lines


def by_net_lead_table(an: dict) -> pd.DataFrame:
    """Decisions, estimate and 95% interval by net lead, one column group per analysed run."""
    return pd.concat({k: a["by_net_lead"].set_index("net_lead")[["n", "estimate", "lo", "hi"]] for k, a in an.items()},
                     axis=1)


def where_text(where: dict) -> str:
    """``"k=v, ..."``: the rows a net-lead analysis reads, for a caption."""
    return ", ".join(f"{k}={v}" for k, v in where.items())


def policy_test(fit: dict) -> str:
    """How a fit tests the policy terms: the joint Wald test's p, or Holm over the terms."""
    if fit.get("wald") or fit.get("lr"):
        kind, p = ("joint Wald", fit["wald"]["p"]) if fit.get("wald") else ("likelihood-ratio", fit["lr"]["p"])
        return f"{kind} test of the policy terms, " + ("p < 0.001" if p < 1e-3 else f"p = {p:.3f}")
    return "any policy term significant after Holm"


def regression_outputs(r: Run, a: dict, cap) -> list:
    """Per regression of ``r``: terms table (or why none), fit warnings, verdicts, separated policies."""
    out = []
    for kind, fit in [(k, a[k]) for k in FITS if k in a]:  # the regressions that were run, in FITS order
        if not _has_terms(fit):
            out.append(Markdown(f"**{r.label}, {kind}:** {fit.get('error', 'not estimable')}"))
            continue
        out.append(cap.table(fit["terms"].set_index("term"), f"{fit['method']}: {fit['formula']} (n = {fit['n']}). "
                             f"Policies matter beyond net lead ({policy_test(fit)}): {fit.get('policy_significant')}.",
                             r, precision=3))
        if fit.get("warnings"):
            out.append(admonition("warning", f"{kind} fit warnings", html.escape("; ".join(map(str, fit["warnings"])))))
    vt, sep, notes = verdict_display(a)
    if not vt.empty:
        out.append(cap.table(vt, "Verdict per family and fit: is policy significant once net lead and irrelevant-fact "
                             "tone are in the model? " + " ".join(n + "." for n in notes), r, hide_index=True))
    if not sep.empty:
        out.append(cap.table(sep, "Separated policies, reported apart (all their decisions correct or all wrong: no "
                             "finite coefficient, so no test).", r, precision=1, hide_index=True))
    return out


def ties_note(ref: Run, an: dict):
    """The reference decider's primary verdict, then why exact scoring can still show policy terms; or None."""
    fit = an.get(ref.label, {}).get("fixed")
    if not fit or not _has_terms(fit):
        return None
    sig = fit.get("policy_significant")
    ml = an.get(ref.label, {}).get("ml", {})
    ml_sig = ml.get("policy_significant")
    ml_word = "not fitted" if ml_sig is None else "significant" if ml_sig else "not significant"
    ml_test = policy_test(ml) if ml.get("lr") else ml.get("error", "no test")
    return Markdown(
        f"In this build, for the {REFERENCE}, the policy terms of the primary fit (fixed effects) are "
        f"**{'still' if sig else 'no longer'} significant** once net lead and irrelevant-fact tone are in the model "
        f"({policy_test(fit)}). The headline verdict of this book is this fit's (template fixed effects: no "
        f"distribution assumed for the templates); the paper's own model, the random-intercept logit by maximum "
        f"likelihood (adaptive Gauss-Hermite), says **{ml_word}** ({ml_test}), and the Bayesian mixed model and GEE "
        f"rows above are robustness checks.\n\n"
        "*Why this can happen at all (an explanation that holds for any build, not a result of this one):* the "
        "reference decider scores the kept facts exactly, so anything a policy adds beyond the net lead can only "
        "come through ties: when the correct option, the decoy and the third option (which only irrelevant facts "
        "speak about) score the same, the choice is a seeded draw, and policies differ in how often they leave "
        "such ties.")


def social_proof_fits(runs: Sequence[Run], fit_resamples: int) -> tuple[list, pd.DataFrame]:
    """The fitted (s, w, beta) per run: notes to show, then one table [95% interval] per run."""
    rows, notes = [], []
    for r in runs:
        f = social_proof_fit(r, fit_resamples)
        if "table" not in f or f["table"].empty:
            notes.append(Markdown(f"**{r.label}:** {f.get('note') or f.get('skipped', 'no fit')}"))
            continue
        rows.append(f["table"].assign(run=r.label))
        if f.get("note"):
            notes.append(admonition("note", f"{r.label}", html.escape(f["note"])))
    if not rows:
        return notes, pd.DataFrame()
    return notes, ci_pivot(pd.concat(rows).rename(columns={"parameter": "param"}), "run", "param", digits=2)
