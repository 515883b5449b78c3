"""The paper's net-lead model by maximum likelihood (issue 52 item 9): a random-intercept (template) logit, the
intercept integrated out by adaptive Gauss-Hermite quadrature (``stats/mixed_ml.py``), reported beside the
suite's other fits (``stats/netlead.py``, fit ``ml``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import integrate
from scipy.optimize import minimize
from scipy.special import expit
from scipy.stats import chi2

from crossprofile_lib.stats import mixed_ml
from crossprofile_lib.stats.netlead import ml_logit, regressions_fit, verdict_table


def _tiny(seed: int = 1, J: int = 8, n: int = 6):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(J), n)
    x = rng.normal(size=g.size)
    X = np.column_stack([np.ones_like(x), x])
    y = (rng.random(g.size) < expit(0.3 + 0.8 * x + rng.normal(0, 1.2, J)[g])).astype(float)
    return X, y, g


def _brute_loglik(beta, log_sigma, X, y, g) -> float:
    """The marginal log-likelihood by adaptive numerical integration (scipy quad), one template at a time."""
    s = np.exp(log_sigma)
    total = 0.0
    for j in np.unique(g):
        m = g == j
        eta = X[m] @ beta

        def f(b, eta=eta, yy=y[m]):
            return np.exp(np.sum(yy * (eta + b) - np.logaddexp(0, eta + b)) - 0.5 * (b / s) ** 2) / (s * np.sqrt(2 * np.pi))
        total += np.log(integrate.quad(f, -40, 40, epsabs=1e-15, epsrel=1e-12, limit=400)[0])
    return total


@pytest.mark.parametrize("beta,sigma", [((0.2, 0.7), 1.1), ((-1.0, 2.0), 0.3), ((0.5, -0.4), 3.0)])
def test_the_quadrature_likelihood_is_the_integral(beta, sigma):
    """Hand-checked against scipy's adaptive quadrature of the same integral: AGHQ with 25 points agrees to 1e-5
    (a template of 6 decisions with SD 3 is the hardest case here; 1e-11 at SD 1.1);
    the Laplace approximation (1 point) is a near miss that does not, where the template SD is large."""
    X, y, g = _tiny()
    b, ls = np.array(beta), np.log(sigma)
    exact = _brute_loglik(b, ls, X, y, g)
    assert mixed_ml.loglik(b, ls, X, y, g, 25) == pytest.approx(exact, abs=1e-5)
    assert mixed_ml.loglik(b, ls, X, y, g, 15) == pytest.approx(exact, abs=1e-4)
    if sigma > 1:
        assert abs(mixed_ml.loglik(b, ls, X, y, g, 1) - exact) > 1e-3


def test_the_fit_is_the_maximum_of_the_exact_likelihood():
    """The AGHQ estimates equal the maximum of the brute-force likelihood (an independent optimiser on the
    scipy-quad integral) to 1e-3, and the log-likelihood reported is the integral there."""
    X, y, g = _tiny()
    f = mixed_ml.fit(X, y, g)
    brute = minimize(lambda t: -_brute_loglik(t[:2], t[2], X, y, g), np.array([0.0, 0.5, 0.0]), method="Nelder-Mead",
                     options=dict(xatol=1e-7, fatol=1e-10, maxiter=4000))
    assert f.beta == pytest.approx(brute.x[:2], abs=1e-3)
    assert np.log(f.sigma) == pytest.approx(brute.x[2], abs=5e-3)
    assert f.llf == pytest.approx(-brute.fun, abs=1e-6)
    assert f.converged and not f.at_boundary and np.all(np.isfinite(f.se))


def test_with_no_template_variance_it_is_the_ordinary_logit():
    """Templates that do not differ: the template SD goes to (near) 0 and beta and its SEs are the GLM logit's."""
    import statsmodels.api as sm
    rng = np.random.default_rng(3)
    g = np.repeat(np.arange(30), 40)
    x = rng.normal(size=g.size)
    X = np.column_stack([np.ones_like(x), x])
    y = (rng.random(g.size) < expit(-0.2 + 1.3 * x)).astype(float)
    glm = sm.GLM(y, X, family=sm.families.Binomial()).fit()
    f = mixed_ml.fit(X, y, g)
    if f.sigma < 1e-3:
        assert f.beta == pytest.approx(glm.params, abs=2e-3)
        assert f.se == pytest.approx(glm.bse, rel=2e-2)
    else:  # a small SD the data cannot tell from 0: the likelihood is at most a hair above the GLM's
        assert f.llf == pytest.approx(glm.llf, abs=0.5) and f.llf >= glm.llf - 1e-6 and f.sigma < 0.3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_it_recovers_known_parameters(seed):
    """Property: on 60 templates x 40 decisions simulated with beta = (-0.5, 1.0), sigma = 0.8, the estimates lie
    within 3 standard errors of the truth and the SD within 0.3."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(60), 40)
    x = rng.normal(size=g.size)
    X = np.column_stack([np.ones_like(x), x])
    y = (rng.random(g.size) < expit(-0.5 + x + rng.normal(0, 0.8, 60)[g])).astype(float)
    f = mixed_ml.fit(X, y, g)
    assert np.all(np.abs(f.beta - [-0.5, 1.0]) < 3 * f.se)
    assert abs(f.sigma - 0.8) < 0.3


def _frame(policy_effect: float, seed: int = 0, T: int = 24, n: int = 48) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    tid = np.repeat([f"t{i:02d}" for i in range(T)], n)
    pol = np.tile(np.repeat(["R1", "B4", "Random", "M1"], n // 4), T)
    lead = rng.integers(-3, 6, T * n)
    tone = rng.integers(-2, 3, T * n)
    eta = -0.5 + 0.9 * lead + np.repeat(rng.normal(0, 0.7, T), n) + policy_effect * (pol == "B4")
    return pd.DataFrame(dict(template_id=tid, policy=pol, net_lead=lead, irrelevant_tone=tone,
                             correct=rng.random(T * n) < expit(eta)))


def test_ml_logit_tests_the_policy_block_by_likelihood_ratio():
    """Policy block: 3 terms (4 copy policies); the LR statistic is twice the log-likelihood gain over the model
    without policy and its p is chi2(3); a real B4 effect is found, none where there is none."""
    null, real = ml_logit(_frame(0.0)), ml_logit(_frame(-1.5, seed=1))
    for r in (null, real):
        assert r["lr"]["df"] == 3 and r["lr"]["p"] == pytest.approx(chi2.sf(r["lr"]["chi2"], 3))
        assert r["wald_test"]["df"] == 3 and r["formula"].endswith("+ (1 | template)")
        t = r["terms"].set_index("term")
        assert set(t.index) >= {"policy[B4]", "policy[M1]", "policy[Random]", "net_lead", "irrelevant_tone"}
        assert t.loc["net_lead", "coef"] == pytest.approx(0.9, abs=0.2)
    assert null["policy_significant"] is False and real["policy_significant"] is True
    assert real["terms"].set_index("term").loc["policy[B4]", "coef"] == pytest.approx(-1.5, abs=0.5)
    assert 0.3 < null["template_sd"] < 1.2


def test_ml_logit_refuses_too_few_templates():
    r = ml_logit(_frame(0.0, T=3))
    assert r["policy_significant"] is None and "not fitted" in r["error"]


def test_the_verdict_table_reports_it_beside_the_others_and_the_headline_stays_the_primary_fit():
    fits = regressions_fit(_frame(0.0))
    v = verdict_table(fits).set_index("fit")
    assert v.loc["ml", "role"] == "paper's model" and v.loc["ml", "test"] == "likelihood ratio"
    assert v.loc["ml", "p"] == pytest.approx(fits["ml"]["lr"]["p"])
    assert list(v.loc[v["role"] != "secondary"].index) == ["fixed", "lr", "ml", "mixed", "gee"]
    assert fits["policy_significant"] == fits["fixed"]["policy_significant"]
