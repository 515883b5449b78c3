"""Net evidence balance (SPEC section 8): accuracy by net lead, and logistic regressions of
``correct`` on net lead, irrelevant-fact tone and policy.

The **net lead** of a memory is the net score of the correct option minus that of the decoy
over its kept relevant facts (-3 ... +5). If accuracy follows the evidence balance, the policy
terms should add little once net lead is in the model; :func:`net_lead_analysis` reports
whether they stay significant:

* **primary** (:func:`fixed_effects_logit`): a frequentist logistic regression with template
  fixed effects (a dummy per template, statsmodels ``GLM``) and cluster-robust (template)
  covariance; the policy terms "stay significant" when the joint Wald test of all policy terms
  has p < 0.05. The paper's claim ("policy loses significance once net lead is controlled") is
  a p-value verdict, so it rests on this fit, which depends on no prior;
* robustness: a random-intercept (template) logistic regression fitted by statsmodels'
  ``BinomialBayesMixedGLM.fit_vb`` (variational Bayes; statsmodels' default priors; its random
  starting values drawn from a fixed seed, :data:`VB_SEED`, so the same table gives the same
  numbers). Its p-values are normal approximations from the posterior mean / SD,
  Holm-adjusted over the policy terms; significant when any adjusted p < 0.05;
* robustness: a GEE logistic fit with template clusters (exchangeable working correlation,
  falling back to independence if that fails) and robust covariance; a joint Wald test of
  all policy terms.

:func:`net_lead_analysis` adds a ``verdict`` table: each fit's verdict on the policy terms and
whether it agrees with the primary fit. All take the rows of one model; the default subset is
the budgeted copy policies with full labels at r = 0.6 (``settings.net_lead_where``).

Neither is fitted on too few templates (a choice of this suite; the paper does not say): the
random-intercept variance needs at least ``MIN_TEMPLATES_MIXED`` = 5 templates, and a
cluster-robust (sandwich) covariance (fixed effects, GEE) at least ``MIN_TEMPLATES_GEE`` = 10 clusters -- with two
templates it returns standard errors near zero and p-values near 0 for any term. Such a fit is
reported as "not fitted" with the reason, never as a result.
"""

from __future__ import annotations

import math
import warnings
from typing import Optional

import numpy as np
import pandas as pd

from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.tables import means_table

NET_LEADS = tuple(range(-3, 6))
#: a logit coefficient this large signals (quasi-)separation, which the reports flag
SEPARATION_COEF = 10.0
#: the fewest templates (random-intercept groups / GEE clusters) a regression is fitted on
MIN_TEMPLATES_MIXED = 5
MIN_TEMPLATES_GEE = 10
#: seed of the variational fit's random starting values (statsmodels draws them from fresh entropy otherwise)
VB_SEED = 0


def subset(df: pd.DataFrame, where: Optional[dict]) -> pd.DataFrame:
    """Rows matching ``where`` (column -> value or list), as in prereg.yaml."""
    from crossprofile_lib.stats.contrasts import row_mask
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

    from crossprofile_lib.stats.contrasts import holm
    d, formula, ref, refused = _prepare(df, reference, "BinomialBayesMixedGLM.fit_vb", MIN_TEMPLATES_MIXED)
    if refused:
        return refused
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = BinomialBayesMixedGLM.from_formula(formula, {"template": "0 + C(template_id)"}, d)
        res = model.fit_vb(rng=np.random.default_rng(VB_SEED))
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


def _wald(res, names: list) -> Optional[dict]:
    """Joint Wald test (chi2) that every policy term is 0, with the fit's covariance."""
    pol = [i for i, n in enumerate(names) if _is_policy_term(n)]
    if not pol:
        return None
    R = np.zeros((len(pol), len(names)))
    R[np.arange(len(pol)), pol] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = res.wald_test(R, scalar=True)
        cov = np.asarray(res.cov_params())
    return dict(chi2=float(np.squeeze(w.statistic)), df=int(np.linalg.matrix_rank(R @ cov @ R.T)),
                p=float(np.squeeze(w.pvalue)))


def _separation(terms: pd.DataFrame) -> list:
    sep = terms.loc[terms["coef"].abs() > SEPARATION_COEF, "term"].tolist()
    return [f"(quasi-)separation: |coef| > {SEPARATION_COEF:g} for {', '.join(sep)} "
            "(those terms' rows are (almost) all correct or all wrong)"] if sep else []


def fixed_effects_logit(df: pd.DataFrame, reference: str = "R1") -> dict:
    """Primary: logistic regression with template fixed effects and template-clustered robust
    covariance (statsmodels ``GLM``); joint Wald test of the policy terms."""
    import statsmodels.api as sm
    import statsmodels.formula.api as smf
    method = "GLM logit, template fixed effects, cluster-robust (template) covariance"
    d, formula, ref, refused = _prepare(df, reference, method, MIN_TEMPLATES_GEE)
    if refused:
        return refused
    fe_formula = formula + " + C(template_id)"
    groups = pd.factorize(d["template_id"], sort=True)[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res = smf.glm(fe_formula, data=d, family=sm.families.Binomial()).fit(
                cov_type="cluster", cov_kwds={"groups": groups})
            names = list(res.params.index)
            keep = [i for i, n in enumerate(names) if not n.startswith("C(template_id)")]
            terms = pd.DataFrame(dict(term=[names[i] for i in keep], coef=res.params.to_numpy()[keep],
                                      sd=res.bse.to_numpy()[keep], z=res.tvalues.to_numpy()[keep],
                                      p=res.pvalues.to_numpy()[keep]))
            wald = _wald(res, names)
        except (np.linalg.LinAlgError, ValueError) as e:
            return dict(method=f"{method} (failed)", formula=fe_formula, reference_policy=ref, terms=pd.DataFrame(),
                        policy_significant=None, wald=None, warnings=[str(e)], error=f"fit failed: {e}")
    notes = sorted({str(w.message)[:160] for w in caught})
    terms["term"] = terms["term"].map(lambda n: f"policy[{_policy_label(n)}]" if _is_policy_term(n) else n)
    return dict(method=method, formula=fe_formula, reference_policy=ref, n=len(d),
                n_templates=int(d["template_id"].nunique()), terms=terms, wald=wald,
                policy_significant=(bool(wald["p"] < 0.05) if wald and math.isfinite(wald["p"]) else None),
                warnings=notes + _separation(terms))


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
    wald = _wald(res, names)
    terms["term"] = terms["term"].map(lambda n: f"policy[{_policy_label(n)}]" if _is_policy_term(n) else n)
    caught_all += _separation(terms)
    return dict(method=f"GEE logit, template clusters, {used} working correlation, robust covariance",
                formula=formula, reference_policy=ref, n=len(d), terms=terms, wald=wald,
                policy_significant=(bool(wald["p"] < 0.05) if wald and math.isfinite(wald["p"]) else None),
                warnings=sorted(set(caught_all)))


#: the fits of :func:`net_lead_analysis`: key, role
FITS = (("fixed", "primary"), ("mixed", "robustness"), ("gee", "robustness"))


def verdict_table(fits: dict) -> pd.DataFrame:
    """One row per fit: its verdict on the policy terms and whether it agrees with the primary."""
    primary = fits.get("fixed", {}).get("policy_significant")
    rows = []
    for key, role in FITS:
        if key not in fits:
            continue
        sig = fits[key].get("policy_significant")
        rows.append(dict(fit=key, role=role, method=fits[key]["method"], policy_significant=sig,
                         agrees_with_primary=(None if sig is None or primary is None else bool(sig == primary))))
    return pd.DataFrame(rows)


def net_lead_analysis(df: pd.DataFrame, boot: TemplateBootstrap, where: Optional[dict] = None,
                      regressions: bool = True, reference: str = "R1", fit=None) -> dict:
    """Accuracy by net lead (with intervals) and, optionally, the three regressions (primary
    fixed effects, mixed and GEE robustness) and their verdicts, on ``where`` rows.
    ``fit(rows, reference)``: how to get the regressions (default :func:`regressions_fit`; the
    analysis passes a cached one)."""
    d = subset(df, where)
    table = accuracy_by_net_lead(d, boot)
    out = dict(where=dict(where or {}), n=len(d), by_net_lead=table, nondecreasing=is_nondecreasing(table))
    if regressions and len(d) and d["correct"].nunique() > 1:
        out.update((fit or regressions_fit)(d, reference))
    return out


def regressions_fit(d: pd.DataFrame, reference: str = "R1") -> dict:
    """The three regressions on the rows ``d`` and their verdict table (the part worth caching)."""
    fits = dict(fixed=fixed_effects_logit(d, reference), mixed=mixed_logit(d, reference), gee=gee_logit(d, reference))
    fits["verdict"] = verdict_table(fits)
    fits["policy_significant"] = fits["fixed"].get("policy_significant")
    return fits
