"""Net evidence balance (SPEC section 8): accuracy by net lead, and logistic regressions of
``correct`` on net lead, irrelevant-fact tone and policy.

The **net lead** of a memory is the net score of the correct option minus that of the decoy
over its kept relevant facts (-3 ... +5). If accuracy follows the evidence balance, the policy
terms should add little once net lead is in the model; :func:`net_lead_analysis` reports
whether they stay significant:

* primary: a random-intercept (template) logistic regression fitted by statsmodels'
  ``BinomialBayesMixedGLM.fit_vb`` (variational Bayes; statsmodels' default priors). Its
  p-values are normal approximations from the posterior mean / SD, Holm-adjusted over the
  policy terms; the policy terms "stay significant" when any adjusted p < 0.05;
* robustness: a GEE logistic fit with template clusters (exchangeable working correlation,
  falling back to independence if that fails) and robust covariance; a joint Wald test of
  all policy terms.

Both take the rows of one model; they are slow on big tables, so the default subset is the
budgeted copy policies with full labels at r = 0.6 (``settings.net_lead_where``).

Neither is fitted on too few templates (a choice of this suite; the paper does not say): the
random-intercept variance needs at least ``MIN_TEMPLATES_MIXED`` = 5 templates, and a
cluster-robust (sandwich) covariance at least ``MIN_TEMPLATES_GEE`` = 10 clusters -- with two
templates it returns standard errors near zero and p-values near 0 for any term. Such a fit is
reported as "not fitted" with the reason, never as a result.
"""

from __future__ import annotations

import math
import warnings
from typing import Optional

import numpy as np
import pandas as pd

from .bootstrap import TemplateBootstrap
from .tables import means_table

NET_LEADS = tuple(range(-3, 6))
#: a logit coefficient this large signals (quasi-)separation, which the reports flag
SEPARATION_COEF = 10.0
#: the fewest templates (random-intercept groups / GEE clusters) a regression is fitted on
MIN_TEMPLATES_MIXED = 5
MIN_TEMPLATES_GEE = 10


def subset(df: pd.DataFrame, where: Optional[dict]) -> pd.DataFrame:
    """Rows matching ``where`` (column -> value or list), as in prereg.yaml."""
    from .contrasts import row_mask
    if not where:
        return df
    m, _ = row_mask(df, where, "<settings>", "where")
    return df[m]


def accuracy_by_net_lead(df: pd.DataFrame, boot: TemplateBootstrap) -> pd.DataFrame:
    """Accuracy (%) with intervals for each net lead -3 ... +5 (``n = 0`` where none occurs)."""
    t = means_table(df, ["net_lead"], ["correct"], boot).set_index("net_lead")
    t = t.reindex(sorted(set(NET_LEADS) | set(t.index)))
    t["n"] = t["n"].fillna(0).astype(int)
    t["outcome"] = "correct"
    return t.reset_index()[["net_lead", "n", "estimate", "lo", "hi"]]


def is_nondecreasing(table: pd.DataFrame, tol: float = 1e-9) -> bool:
    """Whether the estimates never fall as net lead rises (cells with no decisions skipped)."""
    e = table.loc[table["n"] > 0].sort_values("net_lead")["estimate"].to_numpy()
    return bool(np.all(np.diff(e) >= -tol))


def _formula(df: pd.DataFrame, reference: str) -> tuple[str, list[str], str]:
    pols = sorted(df["policy"].unique())
    terms = ["net_lead", "irrelevant_tone"]
    ref = reference if reference in pols else (pols[0] if pols else reference)
    if len(pols) > 1:
        terms.append(f"C(policy, Treatment('{ref}'))")
    return "y ~ " + " + ".join(terms), pols, ref


def _is_policy_term(name: str) -> bool:
    return name.startswith("C(policy")


def _policy_label(name: str) -> str:
    return name.split("[T.", 1)[1].rstrip("]") if "[T." in name else name


def _prepare(df: pd.DataFrame, reference: str, method: str, minimum: int) -> tuple[pd.DataFrame, str, str, Optional[dict]]:
    """The regression's rows (``y``, string template ids), formula and reference policy, and the
    report of a fit refused for too few templates (None when there are enough)."""
    d = df.assign(y=df["correct"].astype(float), template_id=df["template_id"].astype(str))
    formula, _, ref = _formula(d, reference)
    k = int(d["template_id"].nunique())
    if k >= minimum:
        return d, formula, ref, None
    return d, formula, ref, dict(
        method=f"{method} (not fitted)", formula=formula, reference_policy=ref, n=len(d), n_templates=k,
        terms=pd.DataFrame(), policy_significant=None, wald=None, template_sd=float("nan"), warnings=[],
        error=f"not fitted: {k} template(s); this fit needs at least {minimum} (see crossprofile_lib/stats/netlead.py)")


def mixed_logit(df: pd.DataFrame, reference: str = "R1") -> dict:
    """Random-intercept (template) logistic regression (``BinomialBayesMixedGLM.fit_vb``)."""
    from scipy.stats import norm
    from statsmodels.genmod.bayes_mixed_glm import BinomialBayesMixedGLM
    from .contrasts import holm
    d, formula, ref, refused = _prepare(df, reference, "BinomialBayesMixedGLM.fit_vb", MIN_TEMPLATES_MIXED)
    if refused:
        return refused
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = BinomialBayesMixedGLM.from_formula(formula, {"template": "0 + C(template_id)"}, d)
        res = model.fit_vb()
    mean, sd = np.asarray(res.fe_mean), np.asarray(res.fe_sd)
    z = mean / sd
    p = 2 * norm.sf(np.abs(z))
    terms = pd.DataFrame(dict(term=model.exog_names, coef=mean, sd=sd, z=z, p=p))
    pol = terms["term"].map(_is_policy_term).to_numpy()
    terms["p_holm"] = np.nan
    if pol.any():
        _, padj = holm(terms.loc[pol, "p"].to_numpy())
        terms.loc[pol, "p_holm"] = padj
    terms["term"] = terms["term"].map(lambda n: f"policy[{_policy_label(n)}]" if _is_policy_term(n) else n)
    return dict(method="BinomialBayesMixedGLM.fit_vb (random intercept per template)", formula=formula,
                reference_policy=ref, n=len(d), n_templates=int(d["template_id"].nunique()),
                template_sd=float(np.exp(res.vcp_mean[0])), terms=terms,
                policy_significant=(bool((terms["p_holm"] < 0.05).any()) if pol.any() else None),
                warnings=sorted({str(w.message)[:160] for w in caught}))


def gee_logit(df: pd.DataFrame, reference: str = "R1") -> dict:
    """GEE logistic regression clustered by template (robust covariance); joint Wald test of policy."""
    import statsmodels.api as sm
    import statsmodels.formula.api as smf
    d, formula, ref, refused = _prepare(df, reference, "GEE logit", MIN_TEMPLATES_GEE)
    if refused:
        return refused
    res, used, caught_all = None, "", []
    for name, cs in (("exchangeable", sm.cov_struct.Exchangeable()), ("independence", sm.cov_struct.Independence())):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                r = smf.gee(formula, groups="template_id", data=d, family=sm.families.Binomial(), cov_struct=cs).fit()
                # the robust standard errors are computed lazily: evaluate them here, so that their warnings
                # (e.g. a negative robust variance) are recorded with the fit, not printed by a later caller
                finite = bool(np.all(np.isfinite(r.params)) and np.all(np.isfinite(r.bse))
                              and np.all(np.isfinite(r.pvalues)))
            except (np.linalg.LinAlgError, ValueError) as e:
                caught_all.append(f"{name}: {e}")
                continue
        caught_all += [f"{name}: {str(w.message)[:160]}" for w in caught]
        if finite:
            res, used = r, name
            break
    if res is None:
        return dict(method="GEE (failed)", formula=formula, reference_policy=ref, terms=pd.DataFrame(),
                    policy_significant=None, wald=None, warnings=sorted(set(caught_all)))
    names = list(res.params.index)
    terms = pd.DataFrame(dict(term=names, coef=res.params.to_numpy(), sd=res.bse.to_numpy(),
                              z=res.tvalues.to_numpy(), p=res.pvalues.to_numpy()))
    pol = [i for i, n in enumerate(names) if _is_policy_term(n)]
    wald = None
    if pol:
        R = np.zeros((len(pol), len(names)))
        R[np.arange(len(pol)), pol] = 1.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            w = res.wald_test(R, scalar=True)
        stat = float(np.squeeze(w.statistic))
        wald = dict(chi2=stat, df=int(np.linalg.matrix_rank(R @ res.cov_params().to_numpy() @ R.T)),
                    p=float(np.squeeze(w.pvalue)))
    terms["term"] = terms["term"].map(lambda n: f"policy[{_policy_label(n)}]" if _is_policy_term(n) else n)
    sep = terms.loc[terms["coef"].abs() > SEPARATION_COEF, "term"].tolist()
    if sep:
        caught_all.append(f"(quasi-)separation: |coef| > {SEPARATION_COEF:g} for {', '.join(sep)} "
                          "(those terms' rows are (almost) all correct or all wrong)")
    return dict(method=f"GEE logit, template clusters, {used} working correlation, robust covariance",
                formula=formula, reference_policy=ref, n=len(d), terms=terms, wald=wald,
                policy_significant=(bool(wald["p"] < 0.05) if wald and math.isfinite(wald["p"]) else None),
                warnings=sorted(set(caught_all)))


def net_lead_analysis(df: pd.DataFrame, boot: TemplateBootstrap, where: Optional[dict] = None,
                      regressions: bool = True, reference: str = "R1") -> dict:
    """Accuracy by net lead (with intervals) and, optionally, the two regressions, on ``where`` rows."""
    d = subset(df, where)
    table = accuracy_by_net_lead(d, boot)
    out = dict(where=dict(where or {}), n=len(d), by_net_lead=table, nondecreasing=is_nondecreasing(table))
    if regressions and len(d) and d["correct"].nunique() > 1:
        out["mixed"] = mixed_logit(d, reference)
        out["gee"] = gee_logit(d, reference)
    return out
