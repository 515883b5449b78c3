"""Chapter 7: accuracy by the kept facts' net lead, whether the policy matters once it is known, the social-proof fit."""

from __future__ import annotations

import html
from typing import Sequence

import pandas as pd

from crossprofile_lib.book.display import Markdown, admonition, name_html
from crossprofile_lib.book.runs import REFERENCE, Run
from crossprofile_lib.book.tables import social_proof_fit
from crossprofile_lib.paper_figures import paper_values
from crossprofile_lib.stats.contrasts import load_prereg
from crossprofile_lib.stats.format import ci_pivot
from crossprofile_lib.stats.netlead import net_lead_analysis, verdict_display

#: The three regressions, in the order the book names them.
FITS = {"fixed": "fixed effects (primary)", "mixed": "Bayesian mixed model", "gee": "GEE"}
#: The paper's accuracy at three net leads (data/paper_figures.yaml items).
PAPER_LEADS = (("net-lead/net lead -2", -2), ("net-lead/net lead +2", 2), ("net-lead/net lead >= +4", 4))


def net_lead_where(ch, r: Run) -> dict:
    """prereg.yaml's net-lead rows (``settings.net_lead_where``), at the budget ``r`` is shown at."""
    w = dict(load_prereg().settings["net_lead_where"])
    if "budget_label" in w:
        w["budget_label"] = ch.budget(r)
    return w


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


def net_lead_takeaways(runs: Sequence[Run], an: dict) -> list[str]:
    """Whether accuracy never falls as the net lead rises, and whether policy terms stay significant."""
    by = {r.label: r for r in runs}
    lines = [f"{name_html(by.get(k, k))}: accuracy never falls as the net lead rises: "
             f"<b>{'yes' if a['nondecreasing'] else 'no'}</b>." for k, a in an.items()]
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


def regression_fits(a: dict) -> list[tuple[str, dict]]:
    """The regressions of one analysis that were run, as (kind, fit), in :data:`FITS` order."""
    return [(k, a[k]) for k in FITS if k in a]


def policy_test(fit: dict) -> str:
    """How a fit tests the policy terms: the joint Wald test's p, or Holm over the terms."""
    if fit.get("wald"):
        p = fit["wald"]["p"]
        return "joint Wald test of the policy terms, " + ("p < 0.001" if p < 1e-3 else f"p = {p:.3f}")
    return "any policy term significant after Holm"


def regression_outputs(r: Run, a: dict, cap) -> list:
    """Per regression of ``r``: terms table (or why none), fit warnings, verdicts, separated policies."""
    out = []
    for kind, fit in regression_fits(a):
        if "terms" not in fit or not _has_terms(fit):
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
    return Markdown(
        f"In this build, for the {REFERENCE}, the policy terms of the primary fit (fixed effects) are "
        f"**{'still' if sig else 'no longer'} significant** once net lead and irrelevant-fact tone are in the model "
        f"({policy_test(fit)}); the Bayesian mixed model and GEE rows above are robustness checks.\n\n"
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
    t = pd.concat(rows)
    return notes, ci_pivot(t.rename(columns={"parameter": "param"}), "run", "param", digits=2)
