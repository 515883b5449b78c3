"""The fitted social-proof weight: features match the ledger, the likelihood is exact under
compression, and the fit recovers the reference decider's known parameters."""

import numpy as np
import pytest

from crossprofile_lib.backends.ledger import ReferenceDecider
from crossprofile_lib.run.rebuild import choice_data, option_features, rebuild_choice_data
from crossprofile_lib.run.runner import RunConfig, build_requests, run_grid
from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.socialproof import (
    PARAMS,
    ChoiceData,
    batched_newton,
    fit,
    fit_social_proof,
    log_likelihood,
    patterns,
)

TRUE = dict(social_proof=0.5, irrelevant_weight=0.3, inverse_temperature=2.0)


@pytest.fixture(scope="module")
def simulated(dev_templates):
    """Decisions of the reference decider with known, finite-temperature parameters."""
    cfg = RunConfig(templates=["templates/dev"], seeds=(0, 1, 2))
    df = run_grid(cfg, backend=ReferenceDecider(**TRUE), templates=dev_templates)
    data, info = rebuild_choice_data(df, cfg, dev_templates)
    return df, data, info


def test_features_reproduce_the_ledger_scores(dev_templates):
    cfg = RunConfig(templates=["templates/dev"], seeds=(0,), budgets=("0.6",),
                    policies=("R1", "B4", "ALL", "ALL:shuffled", "REF", "R1:unlabeled"))
    led = ReferenceDecider(social_proof=0.7, irrelevant_weight=-0.4)
    s, w = 0.7, -0.4
    for req, _ in list(build_requests(dev_templates[:3], cfg, led)):
        x = option_features(req.task, req.memory, req.option_order)
        want = led.option_scores(req.task, req.memory, req.option_order)
        assert x[:, 0] + s * x[:, 1] + w * (x[:, 2] + s * x[:, 3]) == pytest.approx(want)


def test_rebuild_uses_every_decision_and_flags_mismatches(simulated, dev_templates):
    df, data, info = simulated
    assert info["used"] == len(df) == len(data) and info["memory_mismatch"] == 0
    one = df[(df.template_id == df.template_id.iloc[0]) & (df.seed == 0)].copy()
    one.loc[one.index[:5], "memory_sha"] = "0" * 16
    one.loc[one.index[5], "invalid"] = True
    cfg = RunConfig(templates=["templates/dev"], seeds=(0, 1, 2))
    d2, info2 = rebuild_choice_data(one, cfg, dev_templates)
    assert info2["memory_mismatch"] == 5 and info2["invalid"] == 1 and len(d2) == len(one) - 6
    assert sum(info2["left_out_by_policy"].values()) == 5
    assert choice_data([], one.iloc[:0])[1]["used"] == 0


def test_pattern_compression_keeps_the_likelihood(simulated):
    _, data, _ = simulated
    units = sorted(set(data.template))
    Xp, C = patterns(data, units)
    assert C.sum() == len(data) and Xp.shape[0] < len(data) / 2
    theta = (0.3, 0.2, 1.5)
    raw = ChoiceData(data.X, data.choice, data.template, np.ones(len(data)))
    # the raw likelihood: chosen option moved to the front, one row per decision
    rows = np.arange(len(raw))
    Xr = np.stack([raw.X[rows, (raw.choice + j) % raw.X.shape[1]] for j in range(raw.X.shape[1])], axis=1)
    ll_raw, g_raw = log_likelihood(theta, Xr, np.ones(len(raw)))
    ll_p, g_p = log_likelihood(theta, Xp, C.sum(axis=0))
    assert ll_p == pytest.approx(ll_raw) and g_p == pytest.approx(g_raw)


def test_gradient_matches_finite_differences(simulated):
    _, data, _ = simulated
    Xp, C = patterns(data, sorted(set(data.template)))
    wts = C.sum(axis=0)
    th = np.array([0.4, 0.1, 1.7])
    _, g = log_likelihood(th, Xp, wts)
    h = 1e-6
    num = [(log_likelihood(th + h * e, Xp, wts)[0] - log_likelihood(th - h * e, Xp, wts)[0]) / (2 * h)
           for e in np.eye(3)]
    assert g == pytest.approx(num, rel=1e-5)


def test_batched_newton_agrees_with_lbfgs(simulated):
    df, data, _ = simulated
    boot = TemplateBootstrap.draw(df.template_id.unique(), 5, np.random.default_rng(1))
    Xp, C = patterns(data, boot.units)
    Wp = boot.weights @ C
    th, ok = batched_newton(Xp, Wp, (0.4, 0.2, 1.5))
    assert ok.all()
    for b in range(len(Wp)):
        assert th[b] == pytest.approx(fit(Xp, Wp[b])["theta"], abs=2e-4)


def test_parameter_recovery_within_intervals(simulated):
    df, data, _ = simulated
    boot = TemplateBootstrap.draw(df.template_id.unique(), 200, np.random.default_rng(0))
    res = fit_social_proof(data, boot, n_resamples=200)
    t = res["table"].set_index("parameter")
    assert list(t.index) == list(PARAMS) and not res["deterministic"] and res["resamples"] == 200
    for name, true in TRUE.items():
        assert t.loc[name, "lo"] <= true <= t.loc[name, "hi"], (name, t.loc[name].to_dict())
        assert abs(t.loc[name, "estimate"] - true) < 0.1 * true
    assert t.loc["social_proof", "p"] < 0.05


def test_deterministic_decider_is_flagged(dev_templates):
    cfg = RunConfig(templates=["templates/dev"], seeds=(0,), budgets=("0.6",), policies=("R1", "B4", "Random", "ALL"))
    df = run_grid(cfg, backend=ReferenceDecider(), templates=dev_templates)
    data, _ = rebuild_choice_data(df, cfg, dev_templates)
    res = fit_social_proof(data, TemplateBootstrap.draw(df.template_id.unique(), 50, np.random.default_rng(0)))
    assert res["deterministic"] and "not point-identified" in res["note"]
    assert res["table"]["lo"].isna().all()


def test_recorded_option_features_equal_the_rebuilt_ones():
    """The runner records each decision's option features; reading them gives exactly the
    choice data a rebuild of the memories gives (and needs no templates or run header)."""
    from dataclasses import asdict

    from crossprofile_lib.run.rebuild import recorded_choice_data
    from crossprofile_lib.run.runner import RunConfig, run_grid
    cfg = RunConfig(templates=["templates/dev"], seeds=[0], budgets=["0.6"],
                    backend_options={"social_proof": 0.5, "inverse_temperature": 2.0})
    df = run_grid(cfg)
    a, ia = recorded_choice_data(df)
    b, ib = rebuild_choice_data(df.drop(columns=["option_features"]), asdict(cfg))
    assert len(a) == len(b) == ia["used"] == ib["used"] > 0
    assert np.array_equal(a.X, b.X) and np.array_equal(a.choice, b.choice) and np.array_equal(a.template, b.template)
    assert recorded_choice_data(df.drop(columns=["option_features"])) is None


def test_book_fit_reads_recorded_features_and_rebuilds_without_them():
    """The book's fit (book.tables.social_proof_fit) reads the recorded option features (no rebuild); a run
    written before they were recorded is rebuilt from its config instead, to the same estimates."""
    from dataclasses import asdict
    from pathlib import Path

    from crossprofile_lib.book import tables
    from crossprofile_lib.book.runs import Run
    cfg = RunConfig(templates=["templates/dev"], seeds=[0], budgets=["0.6"],
                    backend_options={"social_proof": 0.5, "inverse_temperature": 2.0})
    df = run_grid(cfg)
    header = {"config": asdict(cfg)}
    new = tables.social_proof_fit(Run(Path("new"), df, header), fit_resamples=100)
    old = tables.social_proof_fit(Run(Path("old"), df.drop(columns=["option_features"]), header), fit_resamples=100)
    assert new["rebuild"]["source"] == "option_features recorded at run time" and "source" not in old["rebuild"]
    assert new["rebuild"]["used"] == old["rebuild"]["used"] > 0
    pd_cols = ["parameter", "estimate"]
    assert new["table"][pd_cols].equals(old["table"][pd_cols])
