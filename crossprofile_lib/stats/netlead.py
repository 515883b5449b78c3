"""Net evidence balance (SPEC section 8): accuracy by net lead, and logistic regressions of ``correct`` on net lead,
irrelevant-fact tone and policy.

The **net lead** of a memory is the net score of the correct option minus that of the decoy over its kept relevant
facts (-3 ... +5). If accuracy follows the evidence balance, the policy terms should add little once net lead is in
the model; :func:`net_lead_analysis` reports whether they stay significant. The **primary family** is the copy
policies (R1, B4, Random, M1); the **secondary family** (every budgeted policy in the rows) is tested the same way and
reported beside it. In both, duplicate decisions are dropped and separated levels (all correct or all wrong) are
reported apart with a note, never tested (:mod:`.separation`).

* **primary** (:func:`fixed_effects_logit`): logistic regression with template fixed effects (statsmodels ``GLM``)
  and cluster-robust (template) covariance; the policy terms "stay significant" when the joint Wald test of all
  policy terms has p < 0.05. The paper's claim is a p-value verdict, so it rests on this fit, which depends on no
  prior. Templates all correct (or all wrong) carry no information under fixed effects and are dropped (counted);
* robustness (:func:`lr_test`): the likelihood-ratio test of the policy terms in the same fixed-effects model
  (model-based, not cluster-robust), valid where a coefficient is large;
* the paper's model (:func:`ml_logit`): the random-intercept (template) logit by maximum likelihood, the intercept
  integrated out by adaptive Gauss-Hermite quadrature (:mod:`.mixed_ml`; 15 points); the policy block tested by a
  likelihood ratio against the model without policy (df = the policy terms). Reported beside the primary fit, which
  stays the headline: the suite's verdicts rest on the fixed-effects fit (no distribution assumed for the template
  effects); where the two disagree, every page shows both;
* robustness: a random-intercept (template) logit by ``BinomialBayesMixedGLM.fit_vb`` (statsmodels' default priors,
  random starting values from the fixed seed :data:`VB_SEED`); normal-approximation p-values from the posterior
  mean / SD, Holm-adjusted over the policy terms; significant when any adjusted p < 0.05;
* robustness: a GEE logit with template clusters (exchangeable working correlation, else independence) and robust
  covariance; a joint Wald test of all policy terms.

A ``verdict`` table gives per family and fit the test, its statistic, df and p, the verdict and whether it agrees with
the primary fit. The default rows are the budgeted policies with full labels at r = 0.6 (``settings.net_lead_where``).
No fit on too few templates (a choice of this suite; the paper does not say): the random-intercept variance needs
``MIN_TEMPLATES_MIXED`` = 5 templates, a cluster-robust covariance (fixed effects, GEE) ``MIN_TEMPLATES_GEE`` = 10
clusters (with two it gives p-values near 0 for any term); such a fit is reported as "not fitted" with the reason.
"""

from __future__ import annotations

import math
import warnings
from typing import Optional

import numpy as np
import pandas as pd

from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.contrasts import holm, row_mask
from crossprofile_lib.stats.mixed_ml import N_POINTS
from crossprofile_lib.stats.mixed_ml import fit as ml_fit
from crossprofile_lib.stats.mixed_vb import model_class as mixed_model_class
from crossprofile_lib.stats.separation import COPY_FAMILY, PRIMARY_FAMILY, informative_templates, prepare_family
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


def _is_policy_term(name: str) -> bool:
    return name.startswith("C(policy")


def _terms(res, drop: str = "") -> pd.DataFrame:
    """A fit's coefficients, terms starting with ``drop`` left out, policy terms renamed ``policy[B4]``."""
    t = pd.DataFrame(dict(term=list(res.params.index), coef=res.params.to_numpy(), sd=res.bse.to_numpy(),
                          z=res.tvalues.to_numpy(), p=res.pvalues.to_numpy()))
    if drop:
        t = t[~t["term"].str.startswith(drop)].reset_index(drop=True)
    _rename(t)
    return t


def _policy_label(name: str) -> str:
    return name.split("[T.", 1)[1].rstrip("]") if "[T." in name else name


def _rename(terms: pd.DataFrame) -> None:
    """Policy terms renamed ``policy[B4]``."""
    terms["term"] = terms["term"].map(lambda n: f"policy[{_policy_label(n)}]" if _is_policy_term(n) else n)


def _significant(test: Optional[dict]) -> Optional[bool]:
    return bool(test["p"] < 0.05) if test and math.isfinite(test["p"]) else None


def _messages(caught) -> list[str]:
    return [str(w.message)[:160] for w in caught]


def _prepare(df: pd.DataFrame, reference: str, method: str, minimum: int) -> tuple[pd.DataFrame, str, str, Optional[dict]]:
    """The regression's rows, formula and reference policy, and the report of a fit refused for too few templates."""
    d = df.assign(y=df["correct"].astype(float), template_id=df["template_id"].astype(str))
    pols = sorted(d["policy"].unique())
    ref = reference if reference in pols else (pols[0] if pols else reference)
    formula = "y ~ net_lead + irrelevant_tone" + (f" + C(policy, Treatment('{ref}'))" if len(pols) > 1 else "")
    k = int(d["template_id"].nunique())
    if k >= minimum:
        return d, formula, ref, None
    return d, formula, ref, dict(
        method=f"{method} (not fitted)", formula=formula, reference_policy=ref, n=len(d), n_templates=k,
        terms=pd.DataFrame(), policy_significant=None, wald=None, template_sd=float("nan"), warnings=[],
        error=f"not fitted: {k} template(s); this fit needs at least {minimum} (see crossprofile_lib/stats/netlead.py)")


def mixed_logit(df: pd.DataFrame, reference: str = "R1") -> dict:
    """Random-intercept (template) logistic regression (``BinomialBayesMixedGLM.fit_vb``, :mod:`.mixed_vb`)."""
    from scipy.stats import norm

    d, formula, ref, refused = _prepare(df, reference, "BinomialBayesMixedGLM.fit_vb", MIN_TEMPLATES_MIXED)
    if refused:
        return refused
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = mixed_model_class().from_formula(formula, {"template": "0 + C(template_id)"}, d)
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
    _rename(terms)
    return dict(method="BinomialBayesMixedGLM.fit_vb (random intercept per template)", formula=formula,
                reference_policy=ref, n=len(d), n_templates=int(d["template_id"].nunique()),
                template_sd=float(np.exp(res.vcp_mean[0])), terms=terms,
                policy_significant=(bool((terms["p_holm"] < 0.05).any()) if pol.any() else None),
                warnings=sorted(set(_messages(caught))))


def ml_logit(df: pd.DataFrame, reference: str = "R1", n_points: int = N_POINTS) -> dict:
    """The paper's model: random-intercept (template) logit by maximum likelihood, adaptive Gauss-Hermite quadrature
    (:mod:`.mixed_ml`); the policy block tested by a likelihood ratio against the same model without policy (its
    joint Wald test beside it, under ``wald_test``)."""
    from scipy.stats import chi2, norm
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM
    method = f"ML random intercept per template, adaptive Gauss-Hermite ({n_points} points)"
    d, formula, ref, refused = _prepare(df, reference, method, MIN_TEMPLATES_MIXED)
    if refused:
        return dict(refused, lr=None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = GLM.from_formula(formula, data=d, family=Binomial())
        X, y, names = np.asarray(model.exog), np.asarray(model.endog), list(model.exog_names)
        groups = pd.factorize(d["template_id"], sort=True)[0]
        full = ml_fit(X, y, groups, n_points)
        pol = [i for i, n in enumerate(names) if _is_policy_term(n)]
        reduced = ml_fit(np.delete(X, pol, axis=1), y, groups, n_points) if pol else None
    se = full.se
    z = full.beta / se
    terms = pd.DataFrame(dict(term=names, coef=full.beta, sd=se, z=z, p=2 * norm.sf(np.abs(z))))
    _rename(terms)
    lr = wald = None
    if reduced is not None:
        stat = max(0.0, 2 * (full.llf - reduced.llf))
        lr = dict(chi2=float(stat), df=len(pol), p=float(chi2.sf(stat, len(pol))))
        cov = full.cov[np.ix_(pol, pol)]
        if np.all(np.isfinite(cov)):
            b = full.beta[pol]
            w = float(b @ np.linalg.solve(cov, b))
            wald = dict(chi2=w, df=len(pol), p=float(chi2.sf(w, len(pol))))
    notes = [] if full.converged else [f"optimiser: {full.message}"]
    if full.at_boundary:
        notes.append("template SD at its lower bound (no template variance): the fit is an ordinary logit")
    return dict(method=method, formula=formula + " + (1 | template)", reference_policy=ref, n=len(d),
                n_templates=int(d["template_id"].nunique()), template_sd=full.sigma, llf=full.llf, terms=terms,
                lr=lr, wald_test=wald, policy_significant=_significant(lr),
                warnings=sorted(set(_messages(caught) + notes)) + _separation(terms))


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


def _full_fit(shared: Optional[dict], d: pd.DataFrame, fe_formula: str):
    """The template fixed-effects GLM logit of ``d``, fitted once per family: ``(model, fit, warnings, error)``. The
    Wald test's and the likelihood-ratio test's full model are the same fit, so both get one ``shared`` dict."""
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM
    shared = {} if shared is None else shared
    if shared.get("formula") != fe_formula or not d.index.equals(shared.get("index", pd.Index([]))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model, fit, error = None, None, None
            try:
                model = GLM.from_formula(fe_formula, data=d, family=Binomial())
                fit = model.fit()
            except (np.linalg.LinAlgError, ValueError) as e:
                error = e
        shared.update(formula=fe_formula, index=d.index, fit=(model, fit, _messages(caught), error))
    return shared["fit"]


def fixed_effects_logit(df: pd.DataFrame, reference: str = "R1", shared: Optional[dict] = None) -> dict:
    """Primary: logit with template fixed effects, cluster-robust covariance; joint Wald test of the policy terms."""
    from statsmodels.genmod.generalized_linear_model import GLMResults, GLMResultsWrapper
    method = "GLM logit, template fixed effects, cluster-robust (template) covariance"
    df, flat = informative_templates(df)
    d, formula, ref, refused = _prepare(df, reference, method, MIN_TEMPLATES_GEE)
    if refused:
        return dict(refused, flat_templates=flat)
    fe_formula = formula + " + C(template_id)"
    groups = pd.factorize(d["template_id"], sort=True)[0]
    model, full, caught_fit, error = _full_fit(shared, d, fe_formula)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if error is not None:
                raise error
            # the cluster-robust results of the IRLS fit: what GLM.fit(cov_type="cluster") builds from it
            f = full._results
            res = GLMResultsWrapper(GLMResults(model, f.params, f.normalized_cov_params, f.scale, cov_type="cluster",
                                               cov_kwds={"groups": groups}))
            terms = _terms(res, drop="C(template_id)")
            wald = _wald(res, list(res.params.index))
        except (np.linalg.LinAlgError, ValueError) as e:
            return dict(method=f"{method} (failed)", formula=fe_formula, reference_policy=ref, terms=pd.DataFrame(),
                        policy_significant=None, wald=None, warnings=[str(e)], error=f"fit failed: {e}")
    return dict(method=method, formula=fe_formula, reference_policy=ref, n=len(d),
                n_templates=int(d["template_id"].nunique()), terms=terms, wald=wald, flat_templates=flat,
                policy_significant=_significant(wald),
                warnings=sorted(set(caught_fit) | set(_messages(caught))) + _separation(terms))


def lr_test(df: pd.DataFrame, reference: str = "R1", shared: Optional[dict] = None) -> dict:
    """Likelihood-ratio test of the policy terms under template fixed effects: ``2 (llf_full - llf_without_policy)``
    against chi2 with the number of policy terms; the full model is :func:`fixed_effects_logit`'s fit."""
    from scipy.stats import chi2
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM
    method = "likelihood-ratio test, GLM logit with template fixed effects"
    df, flat = informative_templates(df)
    d, formula, ref, refused = _prepare(df, reference, method, MIN_TEMPLATES_GEE)
    if refused:
        return dict(refused, flat_templates=flat, lr=None)
    full = formula + " + C(template_id)"
    if "C(policy" not in formula:
        return dict(method=method, formula=full, reference_policy=ref, n=len(d), terms=pd.DataFrame(), lr=None,
                    policy_significant=None, warnings=[], flat_templates=flat, error="one policy level: nothing to test")
    reduced = full.replace(f" + C(policy, Treatment('{ref}'))", "")
    _, f1, caught_fit, error = _full_fit(shared, d, full)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if error is not None:
                raise error
            f0 = GLM.from_formula(reduced, data=d, family=Binomial()).fit()
        except (np.linalg.LinAlgError, ValueError) as e:
            return dict(method=f"{method} (failed)", formula=full, reference_policy=ref, terms=pd.DataFrame(), lr=None,
                        policy_significant=None, warnings=[str(e)], error=f"fit failed: {e}", flat_templates=flat)
    k = int(f1.df_model - f0.df_model)
    stat = max(0.0, float(2 * (f1.llf - f0.llf)))
    lr = dict(chi2=stat, df=k, p=float(chi2.sf(stat, k)) if k > 0 else math.nan)
    return dict(method=method, formula=f"{full} against {reduced}", reference_policy=ref, n=len(d),
                n_templates=int(d["template_id"].nunique()), terms=pd.DataFrame(), flat_templates=flat,
                lr=lr, policy_significant=_significant(lr), warnings=sorted(set(caught_fit) | set(_messages(caught))))


def gee_logit(df: pd.DataFrame, reference: str = "R1") -> dict:
    """GEE logistic regression clustered by template (robust covariance); joint Wald test of policy."""
    from statsmodels.genmod.cov_struct import Exchangeable, Independence
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_estimating_equations import GEE
    d, formula, ref, refused = _prepare(df, reference, "GEE logit", MIN_TEMPLATES_GEE)
    if refused:
        return refused
    res, used, caught_all = None, "", []
    for name, cs in (("exchangeable", Exchangeable()), ("independence", Independence())):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                r = GEE.from_formula(formula, groups="template_id", data=d, family=Binomial(), cov_struct=cs).fit()
                # the robust standard errors are computed lazily: evaluate them here, so that their warnings
                # (e.g. a negative robust variance) are recorded with the fit, not printed by a later caller
                finite = bool(np.all(np.isfinite(r.params)) and np.all(np.isfinite(r.bse))
                              and np.all(np.isfinite(r.pvalues)))
            except (np.linalg.LinAlgError, ValueError) as e:
                caught_all.append(f"{name}: {e}")
                continue
        caught_all += [f"{name}: {m}" for m in _messages(caught)]
        if finite:
            res, used = r, name
            break
    if res is None:
        return dict(method="GEE (failed)", formula=formula, reference_policy=ref, terms=pd.DataFrame(),
                    policy_significant=None, wald=None, warnings=sorted(set(caught_all)))
    terms = _terms(res)
    wald = _wald(res, list(res.params.index))
    return dict(method=f"GEE logit, template clusters, {used} working correlation, robust covariance",
                formula=formula, reference_policy=ref, n=len(d), terms=terms, wald=wald,
                policy_significant=_significant(wald), warnings=sorted(set(caught_all + _separation(terms))))


#: the fits of :func:`net_lead_analysis`: key, role
FITS = (("fixed", "primary"), ("lr", "robustness"), ("ml", "paper's model"), ("mixed", "robustness"),
        ("gee", "robustness"))
TESTS = {"fixed": "joint Wald, cluster-robust", "lr": "likelihood ratio", "ml": "likelihood ratio",
         "mixed": "any policy term, Holm", "gee": "joint Wald, robust"}


def _test_numbers(fit: dict) -> tuple[float, float, float]:
    """(statistic, df, p) of a fit's policy test (NaN where it has none)."""
    t = fit.get("wald") or fit.get("lr")
    if t:
        return float(t["chi2"]), float(t["df"]), float(t["p"])
    terms = fit.get("terms")
    if isinstance(terms, pd.DataFrame) and "p_holm" in terms.columns and terms["p_holm"].notna().any():
        return math.nan, float(terms["p_holm"].notna().sum()), float(terms["p_holm"].min())
    return math.nan, math.nan, math.nan


def verdict_table(fits: dict) -> pd.DataFrame:
    """One row per (family, fit): test, statistic, df, p, verdict, agreement with the primary fit and the family's
    note (what it set apart)."""
    primary = fits.get("fixed", {}).get("policy_significant")
    fam = fits.get("families", {})
    rows = []
    for family_key, keys in (("primary", FITS), ("secondary", (("fixed", "secondary"), ("lr", "secondary")))):
        src = fits if family_key == "primary" else fits.get("secondary", {})
        info = fam.get(family_key, {})
        for key, role in keys:
            if key not in src:
                continue
            sig = src[key].get("policy_significant")
            stat, df, p = _test_numbers(src[key])
            rows.append(dict(family=info.get("family", ""), fit=key, role=role, test=TESTS[key], method=src[key]["method"],
                             statistic=stat, df=df, p=p, policy_significant=sig,
                             agrees_with_primary=(None if sig is None or primary is None else bool(sig == primary)),
                             note=info.get("note", "")))
    return pd.DataFrame(rows)


def net_lead_analysis(df: pd.DataFrame, boot: TemplateBootstrap, where: Optional[dict] = None,
                      regressions: bool = True, reference: str = "R1", fit=None) -> dict:
    """Accuracy by net lead (with intervals) and, optionally, the regressions and their verdicts, on ``where`` rows.
    ``fit(rows, reference)``: how to get the regressions (default :func:`regressions_fit`)."""
    d = subset(df, where)
    table = accuracy_by_net_lead(d, boot)
    out = dict(where=dict(where or {}), n=len(d), by_net_lead=table, nondecreasing=is_nondecreasing(table))
    if regressions and len(d) and d["correct"].nunique() > 1:
        out.update((fit or regressions_fit)(d, reference))
    return out


def regressions_fit(d: pd.DataFrame, reference: str = "R1") -> dict:
    """The regressions on ``d`` (the part worth caching): the primary family's fits under ``fixed``, ``lr``, ``ml``,
    ``mixed``, ``gee``; the secondary family's ``fixed`` and ``lr`` under ``secondary`` (only where the rows hold
    policies outside the copy family); what each family set apart under ``families``; the ``verdict`` table."""
    prim = prepare_family(d, "copy", reference)
    if prim["rows"].empty:       # no copy policy in the rows: every policy is the primary family
        prim = prepare_family(d, "all", reference)
    r, ref = prim["rows"], prim["reference"] or reference
    shared: dict = {}     # one fixed-effects fit for the Wald and the likelihood-ratio test (_full_fit)
    fits = dict(fixed=fixed_effects_logit(r, ref, shared), lr=lr_test(r, ref, shared), ml=ml_logit(r, ref),
                mixed=mixed_logit(r, ref), gee=gee_logit(r, ref))
    fam = dict(primary=_family_info(prim))
    if prim["family"] == PRIMARY_FAMILY and set(d["policy"].astype(str)) - set(COPY_FAMILY):
        sec = prepare_family(d, "all", reference)
        rs, refs = sec["rows"], sec["reference"] or reference
        if sec["policies"] == prim["policies"] and len(rs) == len(r):   # nothing left beyond the copy family
            fits["secondary"] = dict(fixed=fits["fixed"], lr=fits["lr"])
            sec["note"] += "; the rows left to test are the primary family's"
        else:
            shared = {}
            fits["secondary"] = dict(fixed=fixed_effects_logit(rs, refs, shared), lr=lr_test(rs, refs, shared))
        fam["secondary"] = _family_info(sec)
    fits["families"] = fam
    fits["verdict"] = verdict_table(fits)
    fits["policy_significant"] = fits["fixed"].get("policy_significant")
    return fits


def _family_info(f: dict) -> dict:
    return dict(family=f["family"], policies=list(f["policies"]), reference=f["reference"], n=len(f["rows"]),
                separated=f["separated"], duplicates=f["duplicates"], note=f["note"])


def verdict_display(analysis: dict) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """For a page, from :func:`net_lead_analysis`' result: the verdict table, the separated levels reported apart and
    each family's note."""
    v = analysis.get("verdict")
    if not isinstance(v, pd.DataFrame) or v.empty:
        return pd.DataFrame(), pd.DataFrame(), []
    t = v.assign(verdict=v["policy_significant"].map({True: "policy matters", False: "not significant"}).fillna("not tested"),
                 p=v["p"].map(lambda x: "" if not np.isfinite(x) else "< 0.001" if x < 1e-3 else f"{x:.3f}"),
                 chi2=v["statistic"].round(2), df=v["df"])
    t = t[["family", "fit", "role", "test", "chi2", "df", "p", "verdict"]]
    seps, notes = [], []
    for f in analysis.get("families", {}).values():
        s = f.get("separated")
        if isinstance(s, pd.DataFrame) and not s.empty:
            seps.append(s.assign(family=f["family"]))
        if f.get("note"):
            notes.append(f"{f['family']}: {f['note']}")
    sep = pd.concat(seps)[["family", "policy", "n", "correct", "accuracy", "separation"]] if seps else pd.DataFrame()
    return t, sep, notes
