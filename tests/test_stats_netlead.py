"""Net evidence balance: accuracy by net lead and the two regressions on small synthetic data."""

import numpy as np
import pandas as pd
import pytest

from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.netlead import (
    accuracy_by_net_lead,
    gee_logit,
    is_nondecreasing,
    mixed_logit,
    net_lead_analysis,
)


def _synthetic(policy_effect: float, seed: int = 0, T: int = 20, n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    tid = np.repeat([f"t{i:02d}" for i in range(T)], n)
    pol = np.tile(np.repeat(["R1", "B4", "Random"], n // 3), T)
    lead = rng.integers(-3, 6, T * n)
    tone = rng.integers(-2, 3, T * n)
    a = np.repeat(rng.normal(0, 0.3, T), n)
    eta = -0.5 + 0.9 * lead + a + policy_effect * (pol == "B4")
    return pd.DataFrame(dict(template_id=tid, policy=pol, net_lead=lead, irrelevant_tone=tone,
                             correct=rng.random(T * n) < 1 / (1 + np.exp(-eta))))


def test_accuracy_by_net_lead_known_answer_and_monotonicity():
    df = pd.DataFrame(dict(template_id=["a", "a", "b", "b", "b"], net_lead=[-1, 2, 2, 2, 5],
                           correct=[False, True, False, True, True]))
    boot = TemplateBootstrap(("a", "b"), np.array([[0, 1], [1, 1]]))
    t = accuracy_by_net_lead(df, boot).set_index("net_lead")
    assert list(t.index) == list(range(-3, 6))
    assert t.loc[2, "estimate"] == pytest.approx(200 / 3) and t.loc[2, "n"] == 3
    assert t.loc[0, "n"] == 0 and np.isnan(t.loc[0, "estimate"])
    assert is_nondecreasing(t.reset_index())
    t2 = t.reset_index().assign(estimate=[np.nan, np.nan, 0, np.nan, np.nan, 60, np.nan, np.nan, 50])
    assert not is_nondecreasing(t2)


def test_regressions_see_net_lead_and_no_policy_effect_when_there_is_none():
    df = _synthetic(0.0)
    m, g = mixed_logit(df), gee_logit(df)
    for r in (m, g):
        t = r["terms"].set_index("term")
        assert t.loc["net_lead", "coef"] == pytest.approx(0.9, abs=0.2) and t.loc["net_lead", "p"] < 1e-6
    assert m["policy_significant"] is False and g["policy_significant"] is False
    assert m["reference_policy"] == "R1" and 0 < m["template_sd"] < 1


def test_regressions_detect_a_policy_effect_beyond_net_lead():
    df = _synthetic(-1.5, seed=1)
    assert mixed_logit(df)["policy_significant"] is True
    g = gee_logit(df)
    assert g["policy_significant"] is True and g["wald"]["df"] == 2


def test_net_lead_analysis_subsets_rows():
    df = _synthetic(0.0).assign(budget_label="0.6")
    df.loc[df.index[:200], "budget_label"] = "0.4"
    boot = TemplateBootstrap.draw(df.template_id.unique(), 200, np.random.default_rng(0))
    r = net_lead_analysis(df, boot, {"budget_label": "0.6"}, regressions=False)
    assert r["n"] == len(df) - 200 and r["by_net_lead"]["n"].sum() == r["n"] and "mixed" not in r



def _same_letter_model(T: int, n: int = 28, seed: int = 0) -> pd.DataFrame:
    """A model that always answers the same letter: correct depends on the template only (SmolLM2 in the book)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(dict(template_id=np.repeat([f"t{i:02d}" for i in range(T)], n),
                             policy=np.tile(["R1", "B4", "Random", "BAL"], T * n // 4),
                             net_lead=rng.integers(-3, 6, T * n), irrelevant_tone=rng.integers(-2, 3, T * n),
                             correct=np.repeat(np.arange(T) % 2 == 1, n)))


def test_regressions_on_too_few_templates_are_refused_not_reported():
    # with two clusters GEE's sandwich covariance gives sd ~ 1e-5 and p ~ 0 for every term: not a result
    df = _same_letter_model(2)
    for fit in (gee_logit(df), mixed_logit(df)):
        assert "not fitted" in fit["method"] and fit["terms"].empty and fit["policy_significant"] is None
        assert "2 template(s)" in fit["error"] and "at least" in fit["error"]
    assert not mixed_logit(_same_letter_model(5))["terms"].empty      # 5 templates: the mixed model is fitted
    assert "5 template(s)" in gee_logit(_same_letter_model(5))["error"]   # GEE needs 10 clusters

