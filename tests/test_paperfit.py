"""The fit of the reference decider to the paper's published figures (crossprofile_lib.paperfit)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crossprofile_lib.paperfit import NOT_A_MODEL_RUN, fit_paper
from crossprofile_lib.paperfit.figures import model_columns, needed_policies, select_figures
from crossprofile_lib.paperfit.fit import Fitter, evaluate_figures, figure_matrix, recovery
from crossprofile_lib.paperfit.ledger import load_or_build, target_probability
from crossprofile_lib.policies import DEFAULT_POLICIES
from crossprofile_lib.stats.bootstrap import TemplateBootstrap

DEV = ["templates/dev"]


def expected_outcomes(design, theta):
    """The design rows with ``correct`` / ``chose_decoy`` set to the ledger's choice probability at ``theta``."""
    p = design.probability(np.asarray(theta, dtype=float))
    return design.rows.assign(**{k: p[design.pattern[k]] for k in design.pattern})


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("paperfit-cache")


@pytest.fixture(scope="module")
def setup(cache):
    figs = select_figures()
    dec = [f for f in figs if f.kind == "decision"]
    pols, buds = needed_policies(figs, DEFAULT_POLICIES)
    design = load_or_build(DEV, [0], pols, buds, cache)
    fm = figure_matrix(design, dec)
    return figs, dec, design, fm, Fitter(design, fm)


@pytest.fixture(scope="module")
def result(cache):
    return fit_paper(templates=DEV, seeds=[0], resamples=30, cache_dir=cache)


def test_choice_probability_by_hand():
    # target: 1 relevant fact for it + 2 extra labels on it; option 2: one irrelevant fact with 1 extra label
    Xp = np.array([[[1.0, 2.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]])
    s, w, beta = 0.5, 2.0, 1.0
    # scores: target 1 + 0.5*2 = 2; option 2: 2 * (1 + 0.5*1) = 3; option 3: 0
    want = math.exp(2) / (math.exp(2) + math.exp(3) + math.exp(0))
    assert target_probability(Xp, np.array([s, w, beta]))[0] == pytest.approx(want, rel=1e-12)
    # ties at a huge beta are shared equally, as the argmax ledger breaks them by a fair draw
    tie = np.array([[[1.0, 0, 0, 0], [1.0, 0, 0, 0], [0.0, 0, 0, 0]]])
    assert target_probability(tie, np.array([0.0, 0.0, 50.0]))[0] == pytest.approx(0.5)


def test_probabilities_are_the_deciders_softmax(setup):
    """Each decision's analytic probability is softmax(beta * ReferenceDecider.option_scores)."""
    from crossprofile_lib.backends.ledger import ReferenceDecider
    from crossprofile_lib.run.runner import RunConfig, build_requests
    from crossprofile_lib.task.templates import load_templates
    figs, dec, design, fm, F = setup
    theta = (0.7, -0.4, 1.3)
    got = expected_outcomes(design, theta)
    t = load_templates(DEV)[:2]
    cfg = RunConfig(seeds=[0], budgets=design.config["budgets"], policies=design.config["policies"])
    led = ReferenceDecider(*theta)
    for k, (req, row) in enumerate(build_requests(t, cfg, led)):
        sc = led.option_scores(req.task, req.memory, req.option_order)
        p = np.exp(theta[2] * (sc - sc.max()))
        p /= p.sum()
        r = got.iloc[k]
        assert (r.template_id, r.policy, r.variant) == (row["template_id"], row["policy"], row["variant"])
        assert r.correct == pytest.approx(p[req.option_order.index(req.task.template.correct_option)], abs=1e-12)
        assert r.chose_decoy == pytest.approx(p[req.option_order.index(req.task.template.decoy_option)], abs=1e-12)


def test_figure_matrix_equals_the_contrast_language(setup):
    """The fast map gives the numbers prereg.yaml's contrast evaluator gives on expected outcomes,
    for the full sample and for a template resample (written out as duplicated templates)."""
    import pandas as pd
    figs, dec, design, fm, F = setup
    theta = np.array([0.3, 0.2, 2.0])
    exp = expected_outcomes(design, theta)
    boot = TemplateBootstrap.draw(design.units, 2, np.random.default_rng(1))
    ev = evaluate_figures(exp, dec, boot)
    assert np.allclose(F.predict(theta), ev["estimate"].to_numpy(), atol=1e-9)
    W = boot.weights[0]
    dup = pd.concat([exp[exp.template_id == u].assign(template_id=f"{u}#{c}")
                     for u, n in zip(design.units, W) for c in range(int(n))])
    ev_w = evaluate_figures(dup, dec, TemplateBootstrap.draw(dup.template_id.unique(), 2, np.random.default_rng(0)))
    assert np.allclose(F.predict(theta, W), ev_w["estimate"].to_numpy(), atol=1e-9, equal_nan=True)
    assert np.allclose(F.predict_batch(theta[None], W[None])[0], F.predict(theta, W), equal_nan=True)


def test_selection_is_the_decision_figures_of_the_task_grid(setup):
    figs, dec, design, fm, F = setup
    assert {f.outcome for f in dec} == {"correct", "chose_decoy"}
    refs = {f.ref for f in dec}
    for r in ("classic-r1-b4/R1", "mirror-r1-b4/B4", "h1/H1", "cp-mean/Random", "net-lead/net lead +2",
              "classic-b4-decoy/B4 chose the decoy", "classic-labels/ALL shuffled - ALL",
              "all-support-shared/ALL: support shared - private"):
        assert r in refs
    assert not any(r.startswith(("hb-", "natural/", "headroom/")) for r in refs)
    assert {f.ref for f in figs if f.kind == "memory"} >= {"classic-kept/R1-rel irrelevant"}
    assert model_columns(figs)[:2] == ["Qwen2.5-7B-Instruct", "Llama-3.1-8B-Instruct"]


def test_recovery_of_known_parameters_under_the_papers_binomial_noise(setup):
    """Figures generated at known parameters with the paper's sampling noise (n = 180 per cell, 1,440 per
    mean: kappa = 60 x 3 / (10 x 1) = 18 on this 10-template, 1-seed design) are refitted; the truth lies
    within the refits' range, and the refits scatter (the noise is real, not rounding)."""
    from crossprofile_lib.paperfit.sampling import build_sampling
    figs, dec, design, fm, F = setup
    y = np.array([f.paper.get("Qwen2.5-7B-Instruct", np.nan) for f in dec])
    used = ~np.isnan(y)
    S = build_sampling(design, dec)
    truths = [(0.5, 0.0, 2.0), (0.1, -0.5, 3.0)]
    for r in recovery(F, used, truths, np.random.default_rng(0), S, 18.0, draws=15):
        est, t = r["estimates"], r["truth"]
        lo, hi = np.percentile(est, [0, 100], axis=0)
        assert np.all(lo[:2] <= t[:2] + 1e-9) and np.all(t[:2] <= hi[:2] + 1e-9), r
        assert lo[2] <= t[2] <= hi[2], r
        assert est[:, 0].std() > 1e-3        # binomial noise moves the refits
        assert abs(r["estimate"][0] - t[0]) < 0.1


def test_fit_tables(result):
    p, f = result.params, result.figures
    assert set(p.model) >= {"Qwen", "Llama"} and len(p) == 3 * p.model.nunique()
    assert (p.lo <= p.estimate + 1e-9).all() and (p.estimate <= p.hi + 1e-9).all()
    assert (p.profile_lo <= p.estimate + 1e-6).all() and (p.estimate <= p.profile_hi + 1e-6).all()
    fitted = f.role == "fitted"
    # leave-one-figure-out: a prediction exactly for the fitted figures
    assert f.loc[fitted, "loo"].notna().all() and f.loc[~fitted, "loo"].isna().all()
    assert np.allclose(f.loc[fitted, "residual"], f.loc[fitted, "fit"] - f.loc[fitted, "paper"])
    # the not-separated figures are predicted at every model's fit but never fitted
    assert (f[f.figure == "classic-b4-decoy/B4 chose the decoy"].role == "held out (paper names no model)").all()
    m = result.memory.set_index("figure")
    assert m.loc["classic-kept/R1-rel irrelevant", "ledger"] == 0      # the oracle filter keeps none
    assert result.info["title"] == NOT_A_MODEL_RUN and result.info["backend"] == "ledger"


def test_cache_hit_computes_nothing(result, cache, monkeypatch):
    import crossprofile_lib.paperfit.fit as fit_mod
    import crossprofile_lib.paperfit.ledger as ledger_mod
    import crossprofile_lib.paperfit.report as report_mod

    def boom(*a, **k):
        raise AssertionError("recomputed on a cache hit")
    monkeypatch.setattr(ledger_mod, "build_design", boom)
    monkeypatch.setattr(report_mod, "Fitter", boom)
    monkeypatch.setattr(fit_mod.Fitter, "fit", boom)
    again = fit_paper(templates=DEV, seeds=[0], resamples=30, cache_dir=cache)
    assert again.info["fit_cache_hit"] is True
    assert again.params.equals(result.params) and again.figures.round(9).equals(result.figures.round(9))
    # the ledger grid is cached too: a new fit (other resamples) loads it, never rebuilds the memories
    monkeypatch.undo()
    monkeypatch.setattr(ledger_mod, "build_design", boom)
    other = fit_paper(templates=DEV, seeds=[0], resamples=5, cache_dir=cache, with_profiles=False,
                      with_recovery=False)
    assert other.info["cache_hit"] is True and other.info["fit_cache_hit"] is False


def test_cli_prints_parameters_and_figures(result, cache, capsys):
    from crossprofile_lib.cli import main
    assert main(["fit-paper", "--templates", *DEV, "--seeds", "0", "--resamples", "30", "--cache", str(cache)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"crossprofile fit-paper: {NOT_A_MODEL_RUN}"
    assert NOT_A_MODEL_RUN.startswith("the reference decider fitted to the paper's published numbers")
    heads = [ln for ln in out.splitlines() if ln.startswith(("Fitted parameters", "Figures,", "Parameter-free"))]
    assert len(heads) >= 3 and all(NOT_A_MODEL_RUN in h for h in heads)
    assert "social_proof" in out and "classic-r1-b4/R1" in out and "read from the cache" in out
    assert "reference decider" in out and "ledger" in out
    assert "parametric-bootstrap" in out and "independent against 3 parameters" in out
    assert "notice: priced with the offline approximation" in out and "linked group 1" in out
    assert main(["fit-paper", "--templates", *DEV, "--seeds", "x"]) == 2


def test_cli_refuses_a_bad_tokenizer_before_any_work(capsys):
    from crossprofile_lib.cli import main
    assert main(["fit-paper", "--templates", *DEV, "--seeds", "0", "--tokenizer", "no-such-tokenizer"]) == 2
    err = capsys.readouterr().err
    assert "--tokenizer no-such-tokenizer" in err and "unknown tokenizer" in err and "Traceback" not in err


def test_tokenizer_reaches_the_design(cache, monkeypatch):
    """--tokenizer is the design's pricing: handed to the ledger design (and so to its cache key)."""
    import crossprofile_lib.paperfit.report as report_mod
    from crossprofile_lib.paperfit.report import _tokenizer_label
    assert _tokenizer_label(None) is None and _tokenizer_label("offline") is None
    with pytest.raises(ValueError, match="unknown tokenizer"):
        _tokenizer_label("bogus")
    seen = []

    def spy(*a, **k):
        seen.append(k.get("tokenizer"))
        raise RuntimeError("stop")
    monkeypatch.setattr(report_mod, "load_or_build", spy)
    monkeypatch.setattr(report_mod, "_tokenizer_label", lambda spec: spec)
    with pytest.raises(RuntimeError, match="stop"):
        fit_paper(templates=DEV, seeds=[0], resamples=2, cache_dir=cache, tokenizer="hf:/somewhere", use_cache=False)
    assert seen == ["hf:/somewhere"]
