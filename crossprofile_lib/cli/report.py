"""The text report of ``crossprofile stats DIR`` (SPEC section 8).

:func:`print_report` prints, per backend/model: the headroom check, the preregistered contrasts (``prereg.yaml``,
Holm-corrected), accuracy per policy x budget x variant, the classic and mirror cells,
decoy-choice rates, kept composition and retention, relevance-filter precision and recall,
label effects, ALL memory support shared minus private, accuracy by net lead with the
regressions (template fixed effects, primary; mixed and GEE, robustness) and their verdict, and
the fitted social-proof weight; first the analysis set, any dropped failed calls and whether
the results are confirmatory.
"""

from __future__ import annotations

import sys

import pandas as pd

from crossprofile_lib.design import CLASSIC, MIRROR, PRIMARY_BUDGET
from crossprofile_lib.stats.format import ci_column, ci_pivot, fmt_ci, fmt_p

_ci = fmt_ci          # the one formatter (crossprofile_lib.stats.format), shared with the book
_p = fmt_p
_with_ci = ci_column


def _pivot(t: pd.DataFrame, index, columns, d: int = 1) -> pd.DataFrame:
    return ci_pivot(t, index, columns, d)


def _budget_rows(t: pd.DataFrame, primary: str) -> pd.DataFrame:
    return t[t["budget_label"].isin([primary, "none"])] if "budget_label" in t.columns else t


def print_report(res: dict, primary: str = PRIMARY_BUDGET, out=None) -> None:
    out = out or sys.stdout
    w = lambda s="": print(s, file=out)  # noqa: E731
    head = f"== {res['backend']} / {res['model']}"
    if res.get("note"):
        head += f"  ({res['note']})"
    w(head)
    w(f"   {res['n_templates']} templates, {res['n_decisions']} decisions, tokenizer {res['tokenizer']}; "
      f"template bootstrap, {res['resamples']} resamples, seed {res['seed']}, "
      f"{round(100 * res['level'])}% percentile intervals")
    a = res.get("analysis_set") or {}
    if a:
        w(f"   analysis set: {a['name']} ({a['n_templates']} templates; {a['rule']}"
          + (f"; {a['rows_dropped']} rows of {a['development_templates']} development templates dropped"
             if a.get("rows_dropped") else "") + ")")
    if res.get("failed_calls"):
        w(f"   notice: {res['failed_calls']}")
    h = res["headroom"]
    w(f"   headroom: ALL - EMPTY = {_ci(h['estimate'], h['lo'], h['hi'])} points (lower bound must exceed "
      f"{h['min_points']:g}): {'passed' if h['passed'] else 'FAILED'}")
    w(f"   results are {res.get('status_label', h['status'])}")
    w()
    c = res["contrasts"]
    w(f"Preregistered contrasts ({res['prereg']}; p adjusted within family)")
    rows = []
    for r in c.itertuples():
        paper = ", ".join(f"{k} {v}" for k, v in (r.paper or {}).items())
        fam = r.family if r.family != "confirmatory" or res.get("status", "confirmatory") == "confirmatory" \
            else "confirmatory (run exploratory)"
        rows.append(dict(id=r.id, family=fam, estimate=_ci(r.estimate, r.lo, r.hi) if r.estimable else
                         f"not estimable: {r.reason}", p=_p(r.p), p_adj=_p(r.p_adjusted),
                         reject=("yes" if r.reject else "no") if r.estimable and r.family else "",
                         paper=paper, title=r.title))
    w(pd.DataFrame(rows).to_string(index=False))
    w("   paper = the paper's reported values (SPEC sections 8, 10), not results of this run")
    w()
    w("Accuracy (%) per policy x budget x variant")
    w(_pivot(res["accuracy"], ["policy", "budget_label"], "variant").to_string())
    w()
    w(f"Classic ({CLASSIC}) and mirror ({MIRROR}) cells at budget {primary} and unbudgeted: accuracy and decoy "
      "choice (%); 'pooled' = PS* / SP* (both irrelevant levels), secondary")
    w(f"   mirror = {MIRROR} is our reading (the paper does not state the mirror cell's irrelevant level; {MIRROR} "
      "swaps every holder of the classic cell)")
    cells = _budget_rows(res["cells"], primary)
    if not cells.empty:
        cells = cells.assign(col=cells["outcome"].map({"correct": "accuracy", "chose_decoy": "chose decoy"})
                             + " " + cells["cell"])
        w(_pivot(cells, ["policy", "budget_label"], "col").to_string())
    w()
    w(f"Kept composition (mean facts kept; retention = kept support / 5) at budget {primary} and unbudgeted")
    comp = _budget_rows(res["composition"], primary)
    if not comp.empty:
        comp = comp.assign(col=comp["outcome"].str.replace("kept_", "") + " " + comp["cell"])
        comp = comp[comp["cell"].isin(["classic", "mirror", "all", "classic (pooled)", "mirror (pooled)"])]
        w(_pivot(comp, ["policy", "budget_label"], "col", d=2).to_string())
    w()
    rel = res["relevance"]
    w("Relevance filter precision / recall (%) against the roles")
    w(_pivot(rel, ["relevance_filter"], "outcome").to_string() if not rel.empty else "   (no relevance-filter rows)")
    w()
    le = res["label_effects"]
    w("Label effects: label control minus labelled policy (points)")
    if le.empty:
        w("   (no label-control policies in this run)")
    else:
        le = le.assign(col=le["cell"])
        w(_pivot(le, ["policy", "budget_label"], "col").to_string())
    w()
    ss = res["support_shared_minus_private"]
    w("ALL memory: accuracy with support shared minus support private (points)")
    w(ss.assign(estimate=_with_ci(ss), p=ss["p"].map(_p))[["policy", "n", "estimate", "p"]].to_string(index=False)
      if not ss.empty else "   (no ALL rows)")
    w()
    nl = res["net_lead"]
    w(f"Accuracy (%) by net evidence lead (rows: {nl['where'] or 'all'}; {nl['n']} decisions); "
      f"never falls as net lead rises: {'yes' if nl['nondecreasing'] else 'NO'}")
    t = nl["by_net_lead"]
    w(t.assign(accuracy=_with_ci(t))[["net_lead", "n", "accuracy"]].to_string(index=False))
    roles = {"fixed": "primary", "lr": "robustness", "mixed": "robustness", "gee": "robustness"}
    fam = nl.get("families", {})
    if fam.get("primary"):
        f0 = fam["primary"]
        w(f"   Regressions, primary family: {f0['family']} ({f0['n']} decisions; reference policy {f0['reference']})"
          + (f"; {f0['note']}" if f0.get("note") else ""))
    for key in ("fixed", "lr", "mixed", "gee"):
        if key not in nl:
            continue
        m = nl[key]
        w(f"   [{roles[key]}] {m['method']}: {m['formula']} (reference policy {m['reference_policy']})")
        if isinstance(m["terms"], pd.DataFrame) and not m["terms"].empty:
            cols = [c for c in ("term", "coef", "sd", "z", "p", "p_holm") if c in m["terms"].columns]
            w(m["terms"][cols].to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        if m.get("error"):
            w(f"   {m['error']}")
        elif key == "mixed":
            w(f"   template random-intercept SD {m['template_sd']:.3f}; policy terms significant after Holm: "
              f"{m['policy_significant']}")
        elif m.get("wald") or m.get("lr"):
            wd = m.get("wald") or m.get("lr")
            w(f"   {'joint Wald' if m.get('wald') else 'likelihood-ratio'} test of the policy terms: chi2 = "
              f"{wd['chi2']:.1f}, df = {wd['df']}, p = {_p(wd['p'])}; significant: {m['policy_significant']}")
        if m.get("flat_templates"):
            w(f"   {m['flat_templates']} template(s) all correct or all wrong: no information under fixed effects, dropped")
        for msg in m.get("warnings", []):
            if "separation" in msg:
                w(f"   note: {msg}")
    if fam.get("secondary"):
        f1 = fam["secondary"]
        w(f"   Secondary family: {f1['family']} ({', '.join(f1['policies'])} tested; {f1['n']} decisions)"
          + (f"; {f1['note']}" if f1.get("note") else ""))
        sep = f1.get("separated")
        if isinstance(sep, pd.DataFrame) and not sep.empty:
            w("   separated levels, reported apart (a coefficient there is infinite, so no test is run on it):")
            w(sep.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    v = nl.get("verdict")
    if isinstance(v, pd.DataFrame) and not v.empty:
        sig = nl.get("policy_significant")
        name = fam.get("primary", {}).get("family", "")
        w("   Verdict: policy terms " + ("stay significant" if sig else "are not significant" if sig is False
                                         else "could not be tested")
          + " once net lead and irrelevant tone are controlled (primary: template fixed effects"
          + (f", family {name}" if name else "") + ")")
        cols = [c for c in ("family", "fit", "role", "test", "statistic", "df", "p", "policy_significant",
                            "agrees_with_primary") if c in v.columns]
        vv = v[cols].copy()
        if "p" in vv:
            vv["p"] = vv["p"].map(_p)
        w(vv.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    w()
    sp = res["social_proof"]
    w("Fitted decider parameters (conditional logit; beyond the paper): score = sum polarity * w_f * (1 + s*(n-1)), "
      "P = softmax(beta * score)")
    if "skipped" in sp:
        w(f"   skipped: {sp['skipped']}")
    elif sp.get("n_decisions", 0) == 0:
        w(f"   {sp.get('note', 'no decisions')}")
    else:
        tb = sp["table"]
        w(tb.assign(estimate=[_ci(e, l, h, 3) for e, l, h in zip(tb.estimate, tb.lo, tb.hi)],
                    p=tb["p"].map(_p))[["parameter", "estimate", "p", "at_bound"]].to_string(index=False))
        info = sp.get("rebuild", {})
        w(f"   {sp['n_decisions']} decisions ({sp['n_patterns']} distinct patterns), {sp['resamples']} bootstrap fits"
          + (f"; left out: {info.get('invalid', 0)} invalid, {info.get('memory_mismatch', 0)} memories not "
             f"rebuilt identically, {info.get('not_rebuilt', 0)} not rebuilt" if info else ""))
        if sp.get("note"):
            w(f"   note: {sp['note']}")
    w()
