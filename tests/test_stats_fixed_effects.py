"""The primary net-lead test (template fixed effects, cluster-robust Wald), its verdict table,
and determinism: two ``crossprofile stats`` processes on one table print the same bytes."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from crossprofile_lib.stats.netlead import fixed_effects_logit, mixed_logit, regressions_fit


def _synthetic(policy_effect: float, seed: int = 0, T: int = 20, n: int = 60, template_sd: float = 0.3):
    rng = np.random.default_rng(seed)
    tid = np.repeat([f"t{i:02d}" for i in range(T)], n)
    pol = np.tile(np.repeat(["R1", "B4", "Random"], n // 3), T)
    lead = rng.integers(-3, 6, T * n)
    tone = rng.integers(-2, 3, T * n)
    a = np.repeat(rng.normal(0, template_sd, T), n)
    eta = -0.5 + 0.9 * lead + a + policy_effect * (pol == "B4")
    return pd.DataFrame(dict(template_id=tid, policy=pol, net_lead=lead, irrelevant_tone=tone,
                             correct=rng.random(T * n) < 1 / (1 + np.exp(-eta))))


def test_fixed_effects_find_net_lead_and_no_policy_effect_when_there_is_none():
    r = fixed_effects_logit(_synthetic(0.0))
    t = r["terms"].set_index("term")
    assert t.loc["net_lead", "coef"] == pytest.approx(0.9, abs=0.2) and t.loc["net_lead", "p"] < 1e-6
    assert r["policy_significant"] is False and r["wald"]["df"] == 2 and r["wald"]["p"] > 0.05
    assert not any(n.startswith("C(template_id)") for n in t.index)     # the 20 intercepts are not reported
    assert r["n_templates"] == 20 and "fixed effects" in r["method"]


def test_fixed_effects_detect_a_policy_effect_beyond_net_lead():
    r = fixed_effects_logit(_synthetic(-1.5, seed=1))
    assert r["policy_significant"] is True and r["terms"].set_index("term").loc["policy[B4]", "coef"] < -1


def test_fixed_effects_absorb_large_template_intercepts():
    # template intercepts with SD 2: a pooled fit without them would bias net lead towards 0
    r = fixed_effects_logit(_synthetic(0.0, seed=3, T=30, template_sd=2.0))
    assert r["terms"].set_index("term").loc["net_lead", "coef"] == pytest.approx(0.9, abs=0.2)


def test_too_few_templates_refused():
    r = fixed_effects_logit(_synthetic(0.0, T=4))
    assert "not fitted" in r["method"] and r["policy_significant"] is None and "4 template(s)" in r["error"]


def test_verdict_table_says_which_fits_agree_with_the_primary():
    fits = regressions_fit(_synthetic(-1.5, seed=1))
    v = fits["verdict"].set_index("fit")
    # the ML random-intercept fit (the paper's model, issue 52 item 9) sits between the fixed-effects and Bayesian fits
    assert list(v.index) == ["fixed", "lr", "ml", "mixed", "gee"] and v.loc["fixed", "role"] == "primary"
    assert (v["family"] == "copy policies (R1, B4, Random, M1)").all()
    assert fits["policy_significant"] is True and v["agrees_with_primary"].all()
    fits["mixed"]["policy_significant"] = False      # a disagreement is shown, not hidden
    from crossprofile_lib.stats.netlead import verdict_table
    assert verdict_table(fits).set_index("fit").loc["mixed", "agrees_with_primary"] == False  # noqa: E712


def test_mixed_fit_is_seeded():
    df = _synthetic(0.0, seed=2)
    a, b = mixed_logit(df)["terms"], mixed_logit(df)["terms"]
    pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from crossprofile_lib.cli import main
    out = tmp_path_factory.mktemp("det") / "run"
    assert main(["run", "--out", str(out), "--templates", "templates/formal/bus-route", "templates/formal/it-vendor",
                 "--seeds", "0,1", "--budgets", "0.6", "--policies", "R1,B4,Random,M1,ALL,EMPTY",
                 "--backend-option", "inverse_temperature=2", "--backend-option", "social_proof=0.5"]) == 0
    return out


def test_two_stats_processes_print_identical_output(small_run):
    cmd = [sys.executable, "-m", "crossprofile_lib.cli", "stats", str(small_run), "--resamples", "500",
           "--fit-resamples", "50", "--no-cache"]
    outs = [subprocess.run(cmd + extra, capture_output=True, text=True, check=True).stdout
            for extra in ([], [], ["--json"], ["--json"])]
    assert outs[0] == outs[1] and outs[2] == outs[3]
    assert "[primary] GLM logit, template fixed effects" in outs[0] and "Verdict: policy terms" in outs[0]
