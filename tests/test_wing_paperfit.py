"""fit-paper's numbers where they are computed (issue 55: the paperfit wing's mutation survivors): the loss is the
whole sum of squared whitened residuals, the multinomial covariance of correct and decoy is negative, the paper's
sample scale counts this design's seeds, and the profile's variance factor is floored at 1. Hand-checked cases
whose numbers differ under each near miss, and a property test where the covariance has an oracle (the sum of two
multinomial categories is one binomial)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from crossprofile_lib.paperfit import fit_paper
from crossprofile_lib.paperfit.figures import needed_policies, select_figures
from crossprofile_lib.paperfit.fit import Fitter, figure_matrix, whitener
from crossprofile_lib.paperfit.ledger import load_or_build
from crossprofile_lib.paperfit.sampling import Sampling, build_sampling
from crossprofile_lib.policies import DEFAULT_POLICIES

DEV = ["templates/dev"]
Q, FLASH = "Qwen2.5-7B-Instruct", "DeepSeek-V4.1-Flash"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("paperfit-wing")


@pytest.fixture(scope="module")
def dev(cache):
    figs = select_figures()
    dec = [f for f in figs if f.kind == "decision"]
    pols, buds = needed_policies(figs, DEFAULT_POLICIES)
    design = load_or_build(DEV, [0], pols, buds, cache)
    fm = figure_matrix(design, dec)
    return dec, design, fm, Fitter(design, fm), build_sampling(design, dec)


def _one_atom(kind: str) -> Sampling:
    """One atom of 100 decisions; figure 0 = 100 P(correct), figure 1 = 100 (P(correct) + P(decoy)) or, with
    ``kind='minus'``, 100 (P(correct) - P(decoy))."""
    L = np.zeros((2, 2))
    L[0, 0] = 100.0
    L[0, 1], L[1, 1] = 100.0, (100.0 if kind == "plus" else -100.0)
    z = sparse.csr_matrix((1, 1))
    return Sampling(("c", "c+d"), np.array([100.0]), z, z, L, np.array([100.0, 100.0]), ())


def _paper_targets(dec, fm):
    """The paper's figures in the design's order (NaN where it printed none) and which of them the fit uses."""
    y = np.array([f.paper.get(Q, np.nan) for f in dec])
    return y, ~np.isnan(y) & fm.estimable


def test_correct_plus_decoy_is_one_binomial_by_hand():
    """P(correct) + P(decoy) of one multinomial draw is the binomial of 'not the third option': 1e4 * .8 * .2 / 100
    = 16 for c = .5, d = .3. With the covariance's sign flipped it would be 25 + 21 + 30 = 76; dropped, 46."""
    S = _one_atom("plus")
    V = S.covariance(np.array([0.5]), np.array([0.3]), kappa=1.0)
    assert V[1, 1] == pytest.approx(16.0)
    assert V[0, 1] == pytest.approx(25.0 - 15.0)           # Var(c) + Cov(c, d) = 25 - 1e4 * .15 / 100
    Sm = _one_atom("minus")
    assert Sm.covariance(np.array([0.5]), np.array([0.3]), 1.0)[1, 1] == pytest.approx(25.0 + 21.0 + 30.0)


@settings(max_examples=60, deadline=None)
@given(c=st.floats(0.05, 0.9), share=st.floats(0.0, 1.0), kappa=st.sampled_from([0.5, 1.0, 3.0]))
def test_covariance_oracle_sum_and_difference(c, share, kappa):
    """Property: for any (c, d) inside the clip of half a decision, Var(c + d) is the binomial of c + d and
    Var(c - d) = Var(c) + Var(d) + 2 c d / m (the multinomial's covariance -c d / m enters with its sign)."""
    d = 0.02 + (1 - c - 0.04) * share           # both proportions at least 0.02 from 0 and 1: none is clipped
    m = 100.0 * kappa
    plus = _one_atom("plus").covariance(np.array([c]), np.array([d]), kappa)[1, 1]
    minus = _one_atom("minus").covariance(np.array([c]), np.array([d]), kappa)[1, 1]
    assert plus == pytest.approx(1e4 * (c + d) * (1 - c - d) / m, rel=1e-9)
    assert minus == pytest.approx(1e4 * (c * (1 - c) + d * (1 - d) + 2 * c * d) / m, rel=1e-9)


def test_draws_of_correct_plus_decoy_have_the_binomial_variance():
    """The draws agree with the covariance: the sum of two categories of one multinomial draw varies as one
    binomial (16 here), far from the 76 of independent draws of the two."""
    S = _one_atom("plus")
    Y = S.draw(np.array([0.5]), np.array([0.3]), 1.0, 20000, np.random.default_rng(3), rounding=None)
    assert Y[:, 1].var() == pytest.approx(16.0, rel=0.05)


def test_fit_loss_is_the_whole_sum_of_squared_whitened_residuals(dev):
    """``loss`` = |H (figure(theta) - y)|^2 at the returned theta (scipy's cost is half of it); ``rmse`` is of the
    raw residuals."""
    dec, design, fm, F, S = dev
    y, used = _paper_targets(dec, fm)
    th = np.array([0.2, -0.3, 2.0])
    pc, pd_ = S.proportions(design.probability(th))
    H = whitener(S.covariance(pc, pd_, 18.0)[np.ix_(used, used)])
    f = F.fit(y, used, H=H, start=th)
    r = F.predict(f["theta"])[used] - y[used]
    assert f["loss"] == pytest.approx(float(np.sum((H @ r) ** 2)), rel=1e-6)
    assert f["rmse"] == pytest.approx(float(np.sqrt(np.mean(r ** 2))), rel=1e-6)
    # unweighted: the plain sum of squares
    g = F.fit(y, used, start=th)
    r2 = F.predict(g["theta"])[used] - y[used]
    assert g["loss"] == pytest.approx(float(np.sum(r2 ** 2)), rel=1e-6)


def _fit(cache, **kw):
    kw.setdefault("resamples", 0)
    return fit_paper(templates=DEV, cache_dir=cache, with_recovery=False, with_profiles=False, use_cache=False, **kw)


def test_papers_sample_scale_counts_this_designs_seeds(cache):
    """kappa = paper templates x seeds / (design templates x design seeds): 60 x 3 / (10 x 2) = 9 with two seeds
    (18 with one)."""
    one = _fit(cache, seeds=[0], models=[Q])
    two = _fit(cache, seeds=[0, 1], models=[Q])
    assert one.info["fits"][Q]["kappa"] == pytest.approx(18.0)
    assert two.info["fits"][Q]["kappa"] == pytest.approx(9.0)
    # the paper's own n (figures that state one) is the paper's, whatever this design's seeds
    p1 = one.figures[one.figures.n_source == "paper"].set_index("figure").n
    p2 = two.figures[two.figures.n_source == "paper"].set_index("figure").n
    assert len(p1) and np.allclose(p1, p2.loc[p1.index])


def test_profile_variance_factor_is_floored_at_one(cache):
    """sigma^2 = max(1, chi2 / df): a fit better than its sampling noise (Flash at a sixteenth of the paper's
    sample: chi2 / df < 1) keeps 1; Qwen's (chi2 / df > 1) takes chi2 / df."""
    small = _fit(cache, seeds=[0], models=[FLASH], sampling={FLASH: {"templates": 15, "seeds": 1}})
    f = small.info["fits"][FLASH]
    assert f["paper_sample"] == {"templates": 15, "seeds": 1} and f["kappa"] == pytest.approx(1.5)   # 15 x 1 / 10
    assert f["df"] > 0 and f["loss"] / f["df"] < 1
    assert f["profile_sigma2"] == 1.0
    q = _fit(cache, seeds=[0], models=[Q]).info["fits"][Q]
    assert q["loss"] / q["df"] > 1 and q["profile_sigma2"] == pytest.approx(q["loss"] / q["df"])


def test_models_with_exactly_the_minimum_of_figures_are_fitted():
    from crossprofile_lib.paperfit.figures import model_columns
    figs = [f for f in select_figures() if f.kind == "decision"]
    cols = model_columns(figs)
    n = {m: sum(m in f.paper for f in figs) for m in cols}
    for m, k in n.items():
        assert m in model_columns(figs, min_figures=k)                 # at least k: kept at exactly k
        assert m not in model_columns(figs, min_figures=k + 1)


def test_profile_interval_interpolates_each_crossing_by_hand():
    from crossprofile_lib.paperfit.report import _profile_interval
    values = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    loss = np.array([9.0, 3.0, 0.0, 1.0, 7.0])
    # threshold 5: the crossing between 0 (loss 9) and 1 (loss 3) is at 0 + (5 - 9) / (3 - 9) = 2/3; between
    # 3 (loss 1) and 4 (loss 7) at 3 + (5 - 1) / (7 - 1) = 3 2/3
    assert _profile_interval(values, loss, 5.0) == pytest.approx((2 / 3, 11 / 3))
    # within the threshold at an end: that end is the bound
    assert _profile_interval(values, np.array([1.0, 0.0, 2.0, 8.0, 9.0]), 5.0) == pytest.approx((0.0, 2.5))
    # within it at the upper end: 1 + (5 - 9) / (3 - 9) = 1 2/3 and the last value, 4
    assert _profile_interval(values, np.array([9.0, 9.0, 3.0, 0.0, 1.0]), 5.0) == pytest.approx((5 / 3, 4.0))
    # one point inside: 1 + (4 - 5) / (0 - 5) = 1.2 and 2 + (4 - 0) / (5 - 0) = 2.8
    assert _profile_interval(values, np.array([5.0, 5.0, 0.0, 5.0, 5.0]), 4.0) == pytest.approx((1.2, 2.8))


def test_linkage_of_no_figures_is_empty():
    S = _one_atom("plus")
    assert S.linkage([False, False]) == dict(n_figures=0, n_independent=0, groups=[])
    lk = S.linkage([True, True])
    assert lk["n_figures"] == 2 and lk["n_independent"] == 2 and lk["groups"] == []


def test_refine_tries_the_grid_and_the_given_start_and_keeps_the_lower_loss(dev, monkeypatch):
    dec, design, fm, F, S = dev
    y, used = _paper_targets(dec, fm)
    starts, real = [], Fitter.fit

    def spy(self, y, used, W=None, start=None, fixed=None, H=None):
        out = real(self, y, used, W, start, fixed, H)
        starts.append((None if start is None else tuple(start), out["loss"]))
        return out
    monkeypatch.setattr(Fitter, "fit", spy)
    best = F.refine(y, used, (0.1, 0.2, 3.0))
    assert [s for s, _ in starts] == [None, (0.1, 0.2, 3.0)]
    assert best["loss"] == min(loss for _, loss in starts)


def test_the_design_drops_the_columns_no_figure_reads(dev):
    dec, design, fm, F, S = dev
    assert not {"option_order", "memory_sha", "error", "stance_source", "stance_agreement"} & set(design.rows.columns)


def test_fit_skips_a_model_without_figures_seeds_each_model_apart_and_reweights(dev, cache, monkeypatch):
    """A model the paper gives no figures is skipped (the next is still fitted); the parametric stream is named for
    its model and the template stream for the templates; the template-bootstrap refits use the fitted figures; the
    reweighting converges before its limit and stops at the limit."""
    import crossprofile_lib.paperfit.report as R
    names, real = [], R.stream

    def spy(seed, *parts):
        names.append((seed, parts))
        return real(seed, *parts)
    monkeypatch.setattr(R, "stream", spy)
    res = _fit(cache, seeds=[0], models=["No-Such-Model", Q], resamples=4, template_resamples=4, boot_seed=5)
    assert list(res.info["fits"]) == [Q]
    assert sorted(names) == [(5, ("paperfit", "memory")), (5, ("paperfit", "parametric", Q)),
                             (5, ("paperfit", "templates"))]
    p = res.params.set_index("parameter")
    assert np.isfinite(p[["template_lo", "template_hi"]].to_numpy()).all()
    assert (p.template_lo <= p.template_hi).all()
    # the template interval: the paper values refitted under each of the 4 template resamples' weights
    from crossprofile_lib.paperfit.fit import whitener
    from crossprofile_lib.stats.bootstrap import TemplateBootstrap, percentile_interval
    dec, design, fm, F, S = dev
    y, used = _paper_targets(dec, fm)
    full, V, _, _ = R._weighted_fit(F, S, design, y, used, 18.0)
    tb = TemplateBootstrap.draw(design.units, 4, real(5, "paperfit", "templates"))
    th_t, _, _ = F.refit_many([y] * 4, used, full["theta"], whitener(V[np.ix_(used, used)]), tb.weights)
    tlo, thi = percentile_interval(th_t)
    assert np.allclose(p.template_lo, tlo) and np.allclose(p.template_hi, thi) and (tlo < thi).all()
    assert 1 <= res.info["fits"][Q]["reweight_steps"] < R.REWEIGHT_STEPS
    monkeypatch.setattr(R, "REWEIGHT_STEPS", 1)
    assert _fit(cache, seeds=[0], models=[Q]).info["fits"][Q]["reweight_steps"] == 1


def test_predictions_at_a_point_and_over_a_grid_are_the_fitters(dev, cache):
    from crossprofile_lib.paperfit.report import predict_at, predict_grid
    dec, design, fm, F, S = dev
    a, b = (0.0, 0.5, 2.0), (0.3, -0.2, 4.0)
    pa = predict_at(a, templates=DEV, seeds=[0], cache_dir=cache)
    assert list(pa.index) == [f.ref for f in dec] and pa.name == "reference-decider(sp=0,irr=0.5,beta=2)"
    assert np.allclose(pa.to_numpy(), F.predict(np.array(a)), equal_nan=True) and np.isfinite(pa).sum() > 10
    g = predict_grid([a, b], templates=DEV, seeds=[0], cache_dir=cache)
    assert list(g.columns) == [0, 1] and list(g.index) == list(pa.index)
    assert np.allclose(g[0], pa, equal_nan=True) and np.allclose(g[1], F.predict(np.array(b)), equal_nan=True)
    assert not np.allclose(g[0], g[1], equal_nan=True)
    # the design's seeds are the ones asked: two seeds give another design (other rows behind the figures)
    two = predict_at(a, templates=DEV, seeds=[0, 1], cache_dir=cache)
    assert list(two.index) == list(pa.index) and not np.allclose(two, pa, equal_nan=True)


def test_profile_table_roles_and_recovery_quantiles(cache, monkeypatch):
    """The profile table names each parameter and its delta is (loss - min) / sigma^2; a figure whose terms match no
    rows is 'not estimable' (one made so here), one the paper gives no value for 'prediction only'; the recovery
    table's interval is the 2.5th to 97.5th percentile of the refits (201 made-up refits 0..200: 5 and 195)."""
    import dataclasses

    import crossprofile_lib.paperfit.report as R
    from crossprofile_lib.rng import stream
    real_fm = R.figure_matrix
    made = {}

    def one_not_estimable(design, dec):
        fm = real_fm(design, dec)
        y = [f.paper.get(Q, np.nan) for f in dec]
        i = next(i for i, f in enumerate(dec) if np.isnan(y[i]) and not any(k in f.paper for k in R.NOT_SEPARATED))
        made["ref"] = dec[i].ref
        return dataclasses.replace(fm, reasons=tuple("no rows" if k == i else r for k, r in enumerate(fm.reasons)))
    monkeypatch.setattr(R, "figure_matrix", one_not_estimable)
    real_wf = R._weighted_fit

    def first_without_variance(F, S, design, y, used, kappa):     # a figure whose sampling sd is 0: z is NaN
        full, V, steps, props = real_wf(F, S, design, y, used, kappa)
        i = made["zero"] = int(np.flatnonzero(used)[0])
        V = V.copy()
        V[i, :] = V[:, i] = 0.0
        return full, V, steps, props
    monkeypatch.setattr(R, "_weighted_fit", first_without_variance)
    est = np.repeat(np.arange(201.0)[:, None], 3, axis=1)
    seen = {}

    def fake_recovery(F, used, truths, rng, S, kappa, draws):
        seen.update(n_used=int(np.sum(used)), rng=rng.random(), kappa=kappa, draws=draws, atoms=S.n_atoms)
        return [dict(truth=np.asarray(t, dtype=float), estimates=est, estimate=np.median(est, axis=0), rmse=0.5)
                for t in truths]
    monkeypatch.setattr(R, "recovery", fake_recovery)
    res = fit_paper(templates=DEV, seeds=[0], cache_dir=cache, models=[Q], resamples=0, use_cache=False,
                    with_profiles=True, with_recovery=True)
    prof = res.profiles
    assert set(prof.parameter) == {"social_proof", "irrelevant_weight", "inverse_temperature"}
    assert list(prof.columns) == ["model", "parameter", "value", "loss", "delta"] and set(prof.model) == {"Qwen"}
    f = res.info["fits"][Q]
    assert np.allclose(prof.delta, (prof.loss - f["loss"]) / f["profile_sigma2"])
    # each parameter's profile runs over its profile values; its interval is where the loss stays within
    # sigma^2 x chi2_1(0.95) = sigma^2 x 3.8415 of the minimum, read off the profile table
    thr = f["loss"] + f["profile_sigma2"] * 3.841458820694124
    for k, name in enumerate(["social_proof", "irrelevant_weight", "inverse_temperature"]):
        rows = prof[prof.parameter == name]
        assert np.allclose(rows.value, R._profile_values(k, f["theta"][k]))
        assert (rows.loss >= f["loss"] - 1e-6).all() and rows.loss.min() == pytest.approx(f["loss"], rel=1e-3)
        p = res.params[res.params.parameter == name].iloc[0]
        want = R._profile_interval(rows.value.to_numpy(), rows.loss.to_numpy(), thr)
        assert (p.profile_lo, p.profile_hi) == pytest.approx(want)
        assert p.profile_lo < f["theta"][k] < p.profile_hi
    # the recovery check runs on the used figures at this fit's kappa, 20 draws, from the stream named for the model
    assert seen == dict(n_used=f["n_figures"], rng=stream(0, "paperfit", "recovery", Q).random(), kappa=18.0,
                        draws=20, atoms=res.info["n_atoms"])
    roles = res.figures.set_index("figure").role
    assert roles[made["ref"]] == "not estimable" and (roles == "prediction only").any()
    zero = res.figures.iloc[made["zero"]]
    assert zero.sd == 0.0 and np.isfinite(zero.residual) and np.isnan(zero.z)
    assert res.figures.z.drop(index=made["zero"])[res.figures.role == "fitted"].notna().all()
    rec = res.recovery
    assert len(rec) == len(R.RECOVERY_TRUTHS) + 1
    assert (rec.social_proof_lo == 5.0).all() and (rec.social_proof_hi == 195.0).all()
    assert (rec.inverse_temperature_fit == 100.0).all() and (rec.draws == 201).all() and (rec.rmse == 0.5).all()


def test_a_fit_with_no_degrees_of_freedom_left_keeps_sigma_one_and_no_p_value(cache):
    """cp-mean and h1 give three independent figures for three parameters: df = 0, so no chi-squared test (p NaN)
    and the profile's variance factor is 1 (not chi2 / 0)."""
    from crossprofile_lib.paper_figures import load_paper_figures
    items = [it for it in load_paper_figures() if it.figure_id in ("cp-mean", "h1")]
    f = _fit(cache, seeds=[0], models=[Q], items=items).info["fits"][Q]
    assert f["n_independent"] == 3 and f["df"] == 0
    assert f["profile_sigma2"] == 1.0 and f["p_fit"] != f["p_fit"]
    # exactly three used figures (cp-mean's) are enough to fit; two (h3's) are not
    three = _fit(cache, seeds=[0], models=[Q], items=[it for it in load_paper_figures() if it.figure_id == "cp-mean"])
    assert three.info["fits"][Q]["n_figures"] == 3
    two = _fit(cache, seeds=[0], models=[Q], items=[it for it in load_paper_figures() if it.figure_id == "h3"])
    assert two.info["fits"] == {} and two.params.empty


def test_a_held_parameter_starts_from_the_grid_points_nearest_it(dev):
    dec, design, fm, F, S = dev
    y, used = _paper_targets(dec, fm)
    free = F.fit(y, used)
    held = F.fit(y, used, fixed=(0, 0.5))
    assert held["theta"][0] == pytest.approx(0.5) and held["loss"] >= free["loss"] - 1e-9
    b = F.fit(y, used, fixed=(2, 3.0))
    assert b["theta"][2] == pytest.approx(3.0)


def test_jacobian_stays_finite_where_the_choice_odds_overflow(dev):
    """At s = 5, w = 3, beta = 50 some exp(v) overflow to inf: their patterns have p = 0, so their gradient terms are
    0 (inf counted as 0), never inf * 0 = NaN."""
    dec, design, fm, F, S = dev
    z = np.array([[5.0, 3.0, np.log(50.0)], [0.1, 0.2, np.log(2.0)]])
    W = np.ones((2, len(fm.units)))
    with np.errstate(over="ignore"):
        e = np.exp(np.array([50.0, 250.0, 750.0, 750.0]) @ F._D.reshape(-1, 4).T)
    assert np.isinf(e).any()                                  # the case is the one the rule is for
    import warnings
    with warnings.catch_warnings():                           # and silently: no RuntimeWarning reaches the user
        warnings.simplefilter("error", RuntimeWarning)
        pred, jac = F.predict_batch_jac(z, W)
        F.predict_batch_jac(z, np.vstack([np.zeros(len(fm.units)), W[1]]))     # an empty count row: 0 / 0
        # an infinite beta: inf x 0 in the utilities gives NaN figures, quietly
        inf_pred, _ = F.predict_batch_jac(np.array([[0.5, 0.5, np.inf]]), W[:1])
    assert np.isnan(inf_pred).all()
    est = fm.estimable
    assert np.isfinite(jac[:, est]).all() and np.isfinite(pred[:, est]).all()
    assert np.allclose(pred[1], F.predict(np.array([0.1, 0.2, 2.0])), equal_nan=True)


def test_a_new_design_is_written_through_a_temporary_file_of_this_process_in_the_cache(tmp_path, monkeypatch):
    import os

    import crossprofile_lib.paperfit.ledger as L
    moved, real = [], os.replace
    monkeypatch.setattr(L.os, "replace", lambda a, b: (moved.append((str(a), str(b))), real(a, b))[1])
    figs = select_figures()
    pols, buds = needed_policies(figs, DEFAULT_POLICIES)
    d = load_or_build(DEV[:1], [0], pols[:2], buds, tmp_path / "c")
    assert [Path(b).name for _, b in moved] == [f"ledger-{d.key}.parquet", f"ledger-{d.key}.npz"]
    for a, _ in moved:     # in the cache folder itself (an atomic rename), named for this process
        assert Path(a).parent == tmp_path / "c" and f".{os.getpid()}." in Path(a).name
    again = load_or_build(DEV[:1], [0], pols[:2], buds, tmp_path / "c")
    assert again.from_cache and len(moved) == 2


def test_profile_values_are_the_coarse_grid_and_a_fine_window_clipped_to_the_bounds_by_hand():
    """25 points across the bounds plus 21 around the estimate, rounded to 1e-10, clipped to the bounds, unique.
    s at 1.0: no point shared, 46; s at 4.9: the window's four points past 5 are clipped onto 5, 42; w at -2.9:
    nine window points fall below -3 and -2.9 + 0.4 = -2.5 is a grid point, 36; beta at 2: the geometric grid, 46."""
    from crossprofile_lib.paperfit.report import _profile_values
    v = _profile_values(0, 1.0)
    assert len(v) == 46 and v[0] == -0.3 and v[-1] == 5.0
    assert v[:4] == pytest.approx([-0.3, -0.3 + 5.3 / 24, -0.3 + 2 * 5.3 / 24, -0.3 + 3 * 5.3 / 24])
    assert np.all(np.diff(v) > 0)
    # the window 0.85, 0.865, ..., 1.15 and the grid point 1.025 (= -0.3 + 6 x 5.3/24) between 1.015 and 1.03
    assert v[np.abs(v - 1.0) <= 0.15 + 1e-9] == pytest.approx(sorted([*(1.0 + np.linspace(-0.15, 0.15, 21)), 1.025]))
    top = _profile_values(0, 4.9)
    assert len(top) == 42 and top[-3:] == pytest.approx([4.975, 4.99, 5.0]) and top.max() == 5.0
    low = _profile_values(1, -2.9)
    assert len(low) == 36 and low.min() == -3.0 and list(low[:4]) == pytest.approx([-3.0, -2.98, -2.9, -2.82])
    b = _profile_values(2, 2.0)
    assert len(b) == 46 and b[0] == pytest.approx(0.02) and b[-1] == pytest.approx(50.0)
    assert b[1] == pytest.approx(0.02 * 2500 ** (1 / 24))
    window = 2 * np.exp(np.linspace(-0.5, 0.5, 21))
    assert all(np.abs(b - x).min() < 1e-9 for x in window)          # the window is multiplicative in beta


def test_profile_values_merge_points_equal_to_ten_decimals():
    """A window point 3e-11 from the grid point 0.3625 (= -0.3 + 3 x 5.3/24) is the same value once rounded to ten
    decimals: one point, 45 in all (rounding to eleven would keep both, 46)."""
    from crossprofile_lib.paperfit.report import _profile_values
    v = _profile_values(0, 0.3625 + 3e-11)
    assert len(v) == 45 and np.sum(np.abs(v - 0.3625) < 1e-9) == 1


def test_batch_jacobian_is_the_derivative_of_the_batch_figures(dev):
    """predict_batch_jac's figures are predict's at theta = (s, w, exp(log beta)) for each row's own template counts,
    and its Jacobian agrees with central finite differences in (s, w, log beta) at points with s, w != 0, 1."""
    dec, design, fm, F, S = dev
    T = len(fm.units)
    z = np.array([[0.3, -0.4, np.log(2.0)], [1.2, 0.7, np.log(0.5)], [-0.2, 1.5, np.log(5.0)]])
    W = np.vstack([np.ones(T), 1.0 + (np.arange(T) % 3), 3.0 - (np.arange(T) % 2)])
    pred, jac = F.predict_batch_jac(z, W)
    assert pred.shape == (3, len(dec)) and jac.shape == (3, len(dec), 3)
    est = fm.estimable & np.isfinite(pred[0])
    assert est.sum() > 10
    for b in range(3):
        th = np.array([z[b, 0], z[b, 1], np.exp(z[b, 2])])
        assert np.allclose(pred[b][est], F.predict(th, W[b])[est], rtol=1e-10, atol=1e-10)
    h = 1e-6
    for k in range(3):
        dz = np.zeros(3)
        dz[k] = h
        up, _ = F.predict_batch_jac(z + dz, W)
        dn, _ = F.predict_batch_jac(z - dz, W)
        fd = (up - dn) / (2 * h)
        assert np.allclose(jac[:, est, k], fd[:, est], rtol=1e-4, atol=1e-5), k
        assert np.abs(jac[:, est, k]).max() > 1e-3           # each parameter moves some figure
    # one row alone gives the same as in the batch
    p1, j1 = F.predict_batch_jac(z[1:2], W[1:2])
    assert np.allclose(p1[0][est], pred[1][est]) and np.allclose(j1[0][est], jac[1][est])


def test_recovery_refits_draws_weighted_by_the_truths_covariance_and_rounded_as_published(dev, monkeypatch):
    """Each truth's draws are refitted with H' H = V+ of the used figures' covariance at that truth; the draws are
    rounded to 0.1 (the published rounding); estimate is the median of the refits and rmse the median rmse."""
    from crossprofile_lib.paperfit.fit import recovery
    dec, design, fm, F, S = dev
    y, used = _paper_targets(dec, fm)
    seen, real = [], Fitter.fit

    def spy(self, y, used, W=None, start=None, fixed=None, H=None):
        out = real(self, y, used, W, start, fixed, H)
        seen.append((np.array(y), H, out))
        return out
    monkeypatch.setattr(Fitter, "fit", spy)
    truth = (0.5, 0.0, 2.0)
    res = recovery(F, used, [truth], np.random.default_rng(5), S, 18.0, draws=3)
    assert len(res) == 1 and len(seen) == 3
    r = res[0]
    assert list(r["truth"]) == [0.5, 0.0, 2.0] and r["estimates"].shape == (3, 3)
    pc, pd_ = S.proportions(design.probability(np.array(truth)))
    V = S.covariance(pc, pd_, 18.0, used)
    for yb, H, _ in seen:
        assert H is not None and H.shape[1] == used.sum()
        assert np.allclose(H.T @ H, np.linalg.pinv(V, rcond=1e-8, hermitian=True), rtol=1e-6, atol=1e-9)
        yu = yb[used]
        assert np.allclose(yu * 10, np.round(yu * 10), atol=1e-6)
    assert np.allclose(r["estimates"], [o["theta"] for _, _, o in seen])
    # the refitted figures are the draws at kappa 18 from the given stream, in order
    Y = S.draw(pc, pd_, 18.0, 3, np.random.default_rng(5), 0.1)
    assert np.allclose([yb for yb, _, _ in seen], Y, equal_nan=True)
    assert np.allclose(r["estimate"], np.median(r["estimates"], axis=0))
    assert r["rmse"] == pytest.approx(float(np.median([o["rmse"] for _, _, o in seen])))


def _figure_with_terms(*wheres):
    from types import SimpleNamespace
    return SimpleNamespace(contrast=SimpleNamespace(terms=[SimpleNamespace(where=w) for w in wheres]))


def test_needed_policies_by_hand():
    """A term naming policies takes those (a string or a list); one naming none takes every policy of the list whose
    selection and label format match (a value or a list); budgets are the terms' labels but 'none', each once."""
    figs = [_figure_with_terms({"policy": ["R1", "B4"], "budget_label": ["b1", "none"]},
                               {"policy": "Random", "budget_label": "b1"}),
            _figure_with_terms({"selection": "fixed-k", "label_format": "full", "budget_label": "b2"},
                               {"selection": ["unbudgeted", "budget"], "label_format": "unlabeled"},
                               {"label_format": "shuffled", "budget_label": "none"})]
    pols, buds = needed_policies(figs, DEFAULT_POLICIES)
    assert pols == ["R1", "B4", "Random", "R1-k7", "B4-k7", "Random-k7", "M1-k7", "R1-rel-k7",
                    "ALL:unlabeled", "R1:unlabeled", "B4:unlabeled", "ALL:shuffled"]
    assert buds == ["b1", "b2"]
    # a term with neither selection nor label format matches every policy; a term naming a policy keeps it alone
    pols, buds = needed_policies([_figure_with_terms({"selection": "budget"})], DEFAULT_POLICIES)
    assert pols == ["R1", "B4", "Random", "M1", "R1-rel", "R1-rel-oracle", "R1:unlabeled", "B4:unlabeled"]
    assert buds == []
    assert needed_policies([_figure_with_terms({"policy": "M1", "selection": "fixed-k"})], DEFAULT_POLICIES) == (
        ["M1"], [])


def test_selected_figures_keep_the_items_label_unit_note_and_sample_size():
    """Each figure carries its item's ref, label, unit, note and the paper's n (60 templates x 3 seeds per term
    mean: 1440 for cp-mean/R1, 720 for h1/H1, 180 for classic-r1-b4/R1)."""
    from crossprofile_lib.paper_figures import load_paper_figures
    figs = {f.ref: f for f in select_figures()}
    assert figs["cp-mean/R1"].n == 1440 and figs["h1/H1"].n == 720 and figs["classic-r1-b4/R1"].n == 180
    items = {it.ref: it for it in load_paper_figures()}
    for ref, f in figs.items():
        it = items[ref]
        assert (f.label, f.unit, f.note, f.n) == (it.label, it.unit, it.note, it.n)
    assert figs["cp-mean/R1"].kind == "decision" and figs["cp-mean/R1"].outcome == "correct"
    assert {f.kind for f in figs.values()} == {"decision", "memory"}


def test_memory_table_sets_each_paper_value_beside_the_ledgers(dev):
    """One row per (memory figure, paper model): figure, unit, the model's short name, the paper value and the
    ledger's estimate with its interval; no memory figures, an empty table."""
    from crossprofile_lib.paperfit.report import _memory_table
    from crossprofile_lib.stats.bootstrap import TemplateBootstrap
    dec, design, fm, F, S = dev
    mem = [f for f in select_figures() if f.kind == "memory"]
    boot = TemplateBootstrap.draw(design.units, 30, np.random.default_rng(1))
    t = _memory_table(design, mem, boot)
    assert list(t.columns) == ["figure", "unit", "paper_model", "paper", "ledger", "lo", "hi"]
    assert len(t) == sum(len(f.paper) for f in mem)
    want = [(f.ref, f.unit, {"Qwen2.5-7B-Instruct": "Qwen", "Llama-3.1-8B-Instruct": "Llama",
                             "DeepSeek-V4.1-Flash": "Flash", "DeepSeek-V4-Pro": "Pro"}.get(m, m), v)
            for f in mem for m, v in f.paper.items()]
    assert list(t[["figure", "unit", "paper_model", "paper"]].itertuples(index=False, name=None)) == want
    ok = t.ledger.notna()
    assert ok.any() and (t.lo[ok] <= t.ledger[ok] + 1e-9).all() and (t.ledger[ok] <= t.hi[ok] + 1e-9).all()
    # one figure's rows share its ledger value
    assert t.groupby("figure").ledger.nunique(dropna=False).max() == 1
    assert _memory_table(design, [], boot).empty


def test_draw_keeps_decoy_within_what_correct_leaves():
    """P(decoy) is clipped to 1 - P(correct): at c = .7, d = .5 the draw is (.7, .3, 0), so c + d is 100 in every
    draw and c averages 70 (not .7 / 1.2 = 58.3 as with d left at .5 and renormalised)."""
    S = _one_atom("plus")
    Y = S.draw(np.array([0.7]), np.array([0.5]), 1.0, 4000, np.random.default_rng(0), rounding=None)
    assert Y.shape == (4000, 2)
    assert np.all(Y[:, 1] == pytest.approx(100.0))
    assert Y[:, 0].mean() == pytest.approx(70.0, abs=0.5)
    # proportions outside [0, 1] are clipped: c = 1 always draws 100
    Y = S.draw(np.array([1.2]), np.array([-0.1]), 1.0, 50, np.random.default_rng(0), rounding=None)
    assert np.all(Y == 100.0)
    # c = 0, d = 0: every decision is the third option
    Y = S.draw(np.array([0.0]), np.array([0.0]), 1.0, 50, np.random.default_rng(0), rounding=None)
    assert np.all(Y == 0.0)


def test_draw_counts_whole_decisions_at_least_one_and_rounds_as_published():
    """m = max(rint(kappa n), 1) decisions: kappa .02 of 100 is 2 (figures 0, 50, 100), kappa .004 rounds to 0 and
    is taken as 1 (0 or 100); kappa .03 gives thirds, 33.3 at the published 0.1, 35 at 5, 33.33... unrounded."""
    S = _one_atom("plus")
    rng = np.random.default_rng(1)
    two = S.draw(np.array([0.5]), np.array([0.3]), 0.02, 2000, rng, rounding=None)
    assert set(np.unique(two[:, 0])) == {0.0, 50.0, 100.0}
    one = S.draw(np.array([0.5]), np.array([0.3]), 0.004, 2000, rng, rounding=None)
    assert set(np.unique(one[:, 0])) == {0.0, 100.0}
    thirds = {0.0, 100 / 3, 200 / 3, 100.0}
    raw = S.draw(np.array([0.5]), np.array([0.3]), 0.03, 2000, np.random.default_rng(2), rounding=None)
    assert set(np.round(np.unique(raw[:, 0]), 9)) == {round(x, 9) for x in thirds}
    pub = S.draw(np.array([0.5]), np.array([0.3]), 0.03, 2000, np.random.default_rng(2))
    assert set(np.round(np.unique(pub[:, 0]), 9)) == {0.0, 33.3, 66.7, 100.0}
    five = S.draw(np.array([0.5]), np.array([0.3]), 0.03, 2000, np.random.default_rng(2), rounding=5.0)
    assert set(np.unique(five[:, 0])) == {0.0, 35.0, 65.0, 100.0}


def test_covariance_gives_a_proportion_at_zero_or_one_half_a_decision_by_hand():
    """eps = 0.5 / m with m = max(kappa n, 1): at c = d = 0 and m = 100, c = d = .005 and Var(100 c) =
    1e4 x .005 x .995 / 100 = .4975; at m = 1 (kappa .001) eps is .5, Var(100 c) = 2500. ``used`` keeps only
    those figures' rows and columns."""
    S = _one_atom("plus")
    V = S.covariance(np.array([0.0]), np.array([0.0]), 1.0)
    assert V[0, 0] == pytest.approx(0.4975)
    assert V[1, 1] == pytest.approx(1e4 * 0.01 * 0.99 / 100)          # c + d = .01 as one binomial
    assert S.covariance(np.array([0.0]), np.array([0.0]), 0.001)[0, 0] == pytest.approx(2500.0)
    # c = 1, d = 0: c = .995, d = .005, c + d = 1 exactly, no variance
    V1 = S.covariance(np.array([1.0]), np.array([0.0]), 1.0)
    assert V1[0, 0] == pytest.approx(0.4975) and V1[1, 1] == pytest.approx(0.0, abs=1e-12)
    Vu = S.covariance(np.array([0.5]), np.array([0.3]), 1.0, used=[False, True])
    assert Vu.shape == (1, 1) and Vu[0, 0] == pytest.approx(16.0)
    Vu0 = S.covariance(np.array([0.5]), np.array([0.3]), 1.0, used=np.array([1, 0]))
    assert Vu0.shape == (1, 1) and Vu0[0, 0] == pytest.approx(25.0)


def test_fit_cache_is_keyed_by_every_input_and_reads_back_what_it_wrote(tmp_path, monkeypatch):
    """The fit's cache entry is named for every input (design seeds, figures, resamples, boot seed, models, recovery,
    profiles, template resamples, recovery draws, sampling): each change is another entry, the same inputs read
    the entry back (numpy values in info written as plain JSON)."""
    import pandas as pd

    import crossprofile_lib.paperfit.report as R
    from crossprofile_lib.paper_figures import load_paper_figures
    calls = []

    def fake_fit(figs, pols, buds, templates, seeds, resamples, boot_seed, cache_dir, models, *rest):
        calls.append((list(seeds), resamples, boot_seed, models))
        t = pd.DataFrame({"x": [1.0]})
        return R.PaperFit(t, t, t, t, t, info=dict(seeds=list(seeds), a=np.arange(3), f=np.float64(0.5),
                                                   b=np.bool_(True), fits={}))
    monkeypatch.setattr(R, "_fit", fake_fit)
    items = load_paper_figures()

    def key(**kw):
        base = dict(templates=DEV, seeds=[0], cache_dir=tmp_path, models=[Q], resamples=10, boot_seed=0,
                    with_recovery=True, with_profiles=True, template_resamples=0, recovery_draws=20, sampling=None)
        base.update(kw)
        out = fit_paper(**base)
        return out.info["fit_key"], out.info["fit_cache_hit"], out

    k0, hit, first = key()
    assert not hit and len(k0) == 20 and (tmp_path / f"fit-{k0}" / "info.json").exists()
    again, hit, back = key()
    assert again == k0 and hit and len(calls) == 1
    assert back.info["a"] == [0, 1, 2] and back.info["f"] == 0.5 and back.info["b"] is True
    assert back.info["seeds"] == [0] and list(back.params.x) == [1.0]
    others = [key(seeds=[0, 1]), key(resamples=11), key(boot_seed=1), key(models=[FLASH]), key(models=None),
              key(with_recovery=False), key(with_profiles=False), key(template_resamples=3), key(recovery_draws=7),
              key(sampling={Q: {"templates": 15, "seeds": 1}}),
              key(items=[it for it in items if it.figure_id != "h1"])]
    keys = [k for k, _, _ in others]
    assert not any(h for _, h, _ in others) and len(set(keys) | {k0}) == len(keys) + 1
    assert calls[1:3] == [([0, 1], 10, 0, [Q]), ([0], 11, 0, [Q])] and calls[3][2] == 1
    # without the cache: computed again, nothing written for it
    k, hit, _ = key(boot_seed=2, use_cache=False)
    assert not hit and not (tmp_path / f"fit-{k}").exists()


def test_a_fits_tables_and_info_by_rule(dev, cache):
    """One model's fit (Qwen on the dev design, seed 0) read table by table: the parameter rows in PARAMS order,
    each figure's row (its unit, the paper value, the fit at theta, residual = fit - paper, z = residual / sd, the
    paper's own n at the paper's 60 x 3 sample or kappa x this design's rows, linked groups numbered from 1), the
    recovery rows (recovery_draws 0 still refits once per truth: three known points and the fit) and the info."""
    import math

    import pandas as pd
    from scipy.stats import chi2

    import crossprofile_lib.paperfit.report as R
    from crossprofile_lib.rng import stream
    from crossprofile_lib.stats.bootstrap import percentile_interval

    dec, design, fm, F, S = dev
    res = fit_paper(templates=DEV, seeds=[0], cache_dir=cache, models=[Q], resamples=3, use_cache=False,
                    with_profiles=False, with_recovery=True, recovery_draws=0)
    info, f = res.info, res.info["fits"][Q]
    th = np.array(f["theta"])
    # parameters
    assert list(res.params.columns) == ["model", "parameter", "estimate", "lo", "hi", "profile_lo", "profile_hi",
                                        "template_lo", "template_hi", "at_bound"]
    assert list(res.params.parameter) == ["social_proof", "irrelevant_weight", "inverse_temperature"]
    assert set(res.params.model) == {"Qwen"} and np.allclose(res.params.estimate, th)
    assert res.params.profile_lo.isna().all() and res.params.template_lo.isna().all()
    assert np.isfinite(res.params[["lo", "hi"]].to_numpy()).all()
    # the fit's summary
    assert f["chi2"] == f["loss"] and f["df"] == f["n_independent"] - 3 and f["kappa"] == pytest.approx(18.0)
    assert f["p_fit"] == pytest.approx(float(chi2.sf(f["loss"], f["df"])))
    y = np.array([g.paper.get(Q, np.nan) for g in dec])
    used = ~np.isnan(y) & fm.estimable
    assert f["n_figures"] == int(used.sum()) and f["unconverged_template_refits"] == 0
    assert f["model"] == f"reference-decider(sp={th[0]:.3g},irr={th[1]:.3g},beta={th[2]:.3g})"
    assert f["linked_groups"] == S.linkage(used)["groups"]
    assert f["paper_sample"] == {"templates": 60, "seeds": 3} and f["unconverged_refits"] == 0
    # inconsistency: the norm of the used paper values' projection on the linkage's null vectors
    assert f["inconsistency"] == pytest.approx(float(np.linalg.norm(S.linkage(used)["null"] @ y[used])))
    assert f["inconsistency"] > 0.1
    # rmse: the root mean square of the used figures' residuals (unweighted)
    assert f["rmse"] == pytest.approx(float(np.sqrt(np.mean((F.predict(th)[used] - y[used]) ** 2))))
    # the reweighted fit at kappa 18 is the one reported; sd is its covariance's diagonal, loo its leave-one-out,
    # and the bootstrap intervals are the refits of three figure sets drawn from the stream named for the model
    full, V, steps, (pc, pd_) = R._weighted_fit(F, S, design, y, used, 18.0)
    assert np.allclose(th, full["theta"]) and f["reweight_steps"] == steps and f["loss"] == pytest.approx(full["loss"])
    assert f["profile_sigma2"] == pytest.approx(full["loss"] / f["df"])
    Y = S.draw(pc, pd_, 18.0, 3, stream(0, "paperfit", "parametric", Q))
    th_b, pr_b, _ = F.refit_many(Y, used, full["theta"], whitener(V[np.ix_(used, used)]))
    lo, hi = percentile_interval(th_b)
    assert np.allclose(res.params.lo, lo) and np.allclose(res.params.hi, hi) and (res.params.lo < res.params.hi).all()
    assert res.params.at_bound.tolist() == [False, False, False]
    # figures
    fig = res.figures.set_index("figure")
    assert list(res.figures.columns) == ["model", "figure", "unit", "paper", "n", "n_source", "sd", "fit", "lo", "hi",
                                         "residual", "z", "loo", "linked", "role"]
    assert list(fig.index) == [g.ref for g in dec] and set(fig.model) == {"Qwen"}
    assert list(fig.unit) == [g.unit for g in dec]
    assert np.allclose(fig.fit, F.predict(th), equal_nan=True)
    ok = fig.role == "fitted"
    assert ok.sum() == used.sum() and np.allclose(fig.paper[ok], y[used])
    assert np.allclose(fig.residual[ok], (fig.fit - fig.paper)[ok])
    assert np.allclose(fig.z[ok], ((fig.fit - fig.paper) / fig.sd)[ok])
    # a figure the paper gives only as 'models not separated' / 'range over models' is held out at that value
    assert fig.role.value_counts().to_dict() == {"fitted": 19, "held out (paper names no model)": 3,
                                                 "prediction only": 2}
    for g in dec:
        other = [g.paper[k] for k in ("models not separated", "range over models") if k in g.paper]
        if Q not in g.paper and other:
            assert fig.role[g.ref] == "held out (paper names no model)" and fig.paper[g.ref] == other[0]
    assert np.allclose(fig.residual, fig.fit - fig.paper, equal_nan=True)
    assert np.allclose(fig.z, (fig.fit - fig.paper) / fig.sd, equal_nan=True)
    assert fig.residual[fig.role == "held out (paper names no model)"].notna().all()
    assert np.allclose(fig.sd, np.sqrt(np.diag(V))) and (fig.sd > 0).all()
    assert np.allclose(fig.loo, F.leave_one_out(y, used, full, V), equal_nan=True) and fig.loo[ok].notna().all()
    flo, fhi = percentile_interval(pr_b)
    assert np.allclose(fig.lo, flo, equal_nan=True) and np.allclose(fig.hi, fhi, equal_nan=True)
    assert (fig.lo[ok] < fig.hi[ok]).any()
    for i, g in enumerate(dec):
        if g.n is not None:
            assert fig.n_source[g.ref] == "paper" and fig.n[g.ref] == pytest.approx(g.n)
        else:
            assert fig.n_source[g.ref] == "this suite's design"
            assert fig.n[g.ref] == pytest.approx(18.0 * S.n_term[i], nan_ok=True)
    groups = f["linked_groups"]
    for k, refs in enumerate(groups):
        for ref in refs:
            assert fig.linked[ref] == f"group {k + 1}"
    assert set(fig.linked[~ok]) <= {""} and (fig.linked != "").sum() == sum(len(r) for r in groups)
    # recovery
    rec = res.recovery
    assert list(rec.model) == ["Qwen"] * 4 and (rec.draws == 1).all()
    assert [tuple(r) for r in rec[["social_proof_true", "irrelevant_weight_true", "inverse_temperature_true"]]
            .to_numpy()[:3]] == [(0.5, 0.0, 2.0), (1.0, 0.5, 1.0), (0.0, -0.5, 4.0)]
    assert np.allclose(rec.iloc[3][["social_proof_true", "irrelevant_weight_true", "inverse_temperature_true"]]
                       .to_numpy(dtype=float), th)
    assert np.allclose(rec.social_proof_lo, rec.social_proof_fit) and np.allclose(rec.social_proof_hi,
                                                                                  rec.social_proof_fit)
    # memory: every memory figure beside the ledger's, intervals from 1000 template resamples of the memory stream
    from crossprofile_lib.stats.bootstrap import TemplateBootstrap
    mem = [g for g in select_figures() if g.kind == "memory"]
    want = R._memory_table(design, mem, TemplateBootstrap.draw(design.units, 1000, stream(0, "paperfit", "memory")))
    assert len(res.memory) == sum(len(g.paper) for g in mem) > 0
    pd.testing.assert_frame_equal(res.memory, want)
    # info
    assert info["backend"] == "ledger" and info["templates"] == DEV and info["seeds"] == [0]
    assert info["title"] == "the reference decider fitted to the paper's published numbers; not a model run"
    assert (info["policies"], info["budgets"]) == needed_policies(select_figures(), DEFAULT_POLICIES)
    assert info["tokenizer"] == "offline-bpe-approx-v1"
    sec = info["seconds"]
    assert 0 <= sec["design"] <= sec["total"] and 0 <= sec["fit"] <= sec["total"]
    assert info["n_templates"] == len(design.units) and info["n_decisions"] == len(design.rows)
    assert info["n_patterns"] == design.Xp.shape[0] and info["n_atoms"] == S.n_atoms
    assert info["aliases"] == list(S.aliases) and info["tokenizer_spec"] is None
    assert info["resamples"] == 3 and info["template_resamples"] == 0 and info["recovery_draws"] == 0
    assert info["boot_seed"] == 0 and info["cache_key"] == design.key and info["cache_hit"] is True
    assert info["interval"] == "parametric bootstrap (the paper's figures redrawn at the paper's sample sizes)"
    assert set(info["seconds"]) == {"design", "fit", "total"} and not math.isnan(info["seconds"]["total"])


def test_fit_recovers_the_theta_its_figures_were_predicted_at(dev):
    """Oracle: figures predicted at a known interior theta fit back to it with loss ~ 0 and no bound hit - from the
    grid, from a given start, whitened, with one parameter held at its true value, and for a template count row
    W (the figures then predicted with W)."""
    dec, design, fm, F, S = dev
    t0 = np.array([0.4, -0.3, 3.0])
    y = F.predict(t0)
    used = fm.estimable & np.isfinite(y)
    assert used.sum() > 10
    f = F.fit(y, used)
    assert np.allclose(f["theta"], t0, rtol=1e-4, atol=1e-5) and f["loss"] < 1e-8 and f["rmse"] < 1e-4
    assert f["at_bound"] == [False, False, False] and f["success"] and f["nfev"] >= 1
    g = F.fit(y, used, start=(1.0, 0.5, 1.0))
    assert np.allclose(g["theta"], t0, rtol=1e-4, atol=1e-5)
    pc, pd_ = S.proportions(design.probability(t0))
    H = whitener(S.covariance(pc, pd_, 18.0)[np.ix_(used, used)])
    h = F.fit(y, used, H=H)
    assert np.allclose(h["theta"], t0, rtol=1e-4, atol=1e-5) and h["loss"] < 1e-8
    for k in range(3):
        held = F.fit(y, used, fixed=(k, float(t0[k])))
        assert held["theta"][k] == pytest.approx(t0[k], rel=1e-12)
        assert np.allclose(held["theta"], t0, rtol=1e-4, atol=1e-5)
    W = 1.0 + (np.arange(len(fm.units)) % 3)
    yw = F.predict(t0, W)
    assert not np.allclose(yw[used], y[used])
    w = F.fit(yw, used, W=W)
    assert np.allclose(w["theta"], t0, rtol=1e-4, atol=1e-5) and w["loss"] < 1e-8


def test_a_fit_pushed_past_a_bound_stops_on_it_and_says_so(dev):
    """Figures predicted past a bound fit onto that bound, flagged at_bound for that parameter only: s = 5.5 fits
    to s = 5 (w, beta still near 0.3, 3), w = -3.5 to w = -3, beta = 0.01 to beta = 0.02."""
    dec, design, fm, F, S = dev
    for t, k, edge in [((5.5, 0.3, 3.0), 0, 5.0), ((0.4, -3.5, 3.0), 1, -3.0), ((0.4, -0.3, 0.01), 2, 0.02)]:
        y = F.predict(np.array(t))
        used = fm.estimable & np.isfinite(y)
        f = F.fit(y, used)
        assert f["theta"][k] == pytest.approx(edge, rel=1e-6)
        assert f["at_bound"] == [j == k for j in range(3)] and f["loss"] > 0
        if k == 0:
            assert f["theta"][1:] == pytest.approx([0.3, 3.0], rel=1e-3)


def test_target_probability_is_the_softmax_of_the_decision_rule_by_hand():
    """u = beta (x0 + s x1 + w (x2 + s x3)); P(target) = 1 / (1 + sum_k exp(u_k - u_target)). Each pattern puts one
    feature on one option: at (s, w, beta) = (0.5, -1, 2) the differences are -2 (x0 on the target), s beta = 1
    (x1 on the other), w beta = -2 (x2), w s beta = -1 (x3); two others with x0 = 1 give 1 / (1 + 2)."""
    from crossprofile_lib.paperfit.ledger import target_probability, target_probability_diff
    Xp = np.zeros((5, 3, 4))
    Xp[0, 0, 0] = 1.0                 # target x0 = 1, others 0: exp(-2) twice
    Xp[1, 1, 1] = 1.0                 # x1 on option 1
    Xp[2, 1, 2] = 1.0                 # x2 on option 1
    Xp[3, 2, 3] = 1.0                 # x3 on option 2
    Xp[4, 1, 0] = Xp[4, 2, 0] = 1.0   # x0 on both others: exp(2) twice
    th = np.array([0.5, -1.0, 2.0])
    e = np.exp
    want = [1 / (1 + 2 * e(-2)), 1 / (2 + e(1)), 1 / (2 + e(-2)), 1 / (2 + e(-1)), 1 / (1 + 2 * e(2))]
    p = target_probability(Xp, th)
    assert p.shape == (5,) and p == pytest.approx(want, rel=1e-12)
    # several thetas: one row each, the same in chunks of one; beta = 0: every option equally likely
    T = np.array([th, [0.0, 0.0, 0.0], [2.0, 1.0, 1.0]])
    G = target_probability(Xp, T)
    assert G.shape == (3, 5) and G[0] == pytest.approx(want) and G[1] == pytest.approx([1 / 3] * 5)
    assert G[2, 3] == pytest.approx(1 / (2 + e(2.0)))          # w s beta = 2
    assert np.array_equal(target_probability_diff(Xp[:, 1:] - Xp[:, :1], T, chunk=1), G)
    # an overflowing exponent gives probability 0, not NaN
    with np.errstate(over="ignore"):
        assert target_probability(Xp, np.array([0.0, 0.0, 1000.0]))[4] == 0.0


def test_grid_points_run_social_proof_slowest():
    from crossprofile_lib.paperfit.ledger import GRID, grid_points
    g = {"social_proof": (0.0, 1.0), "irrelevant_weight": (0.5,), "inverse_temperature": (1.0, 2.0)}
    assert grid_points(g).tolist() == [[0.0, 0.5, 1.0], [0.0, 0.5, 2.0], [1.0, 0.5, 1.0], [1.0, 0.5, 2.0]]
    assert grid_points().shape == (17 * 13 * 13, 3) and grid_points()[0].tolist() == [-0.3, -3.0, 0.05]
    assert GRID["inverse_temperature"][-1] == 40.0


def test_a_cached_design_reads_back_everything_it_was_built_with(tmp_path):
    """The cache entry holds the rows, patterns, grid probabilities, key and config: read back equal, flagged
    from_cache; the key's config lists the seeds, policies, budgets, agents, tokenizer ('default') and the grid."""
    from crossprofile_lib.paperfit.ledger import FORMULA, grid_points, target_probability
    g = {"social_proof": (0.0, 1.0), "irrelevant_weight": (0.5,), "inverse_temperature": (1.0, 2.0)}
    pols = ["R1", "B4"]
    _, buds = needed_policies(select_figures(), DEFAULT_POLICIES)
    built = load_or_build(DEV[:1], [0], pols, buds[:1], tmp_path, grid=g)
    back = load_or_build(DEV[:1], [0], pols, buds[:1], tmp_path, grid=g)
    assert not built.from_cache and back.from_cache and back.key == built.key
    assert built.p_grid.shape == (4, built.Xp.shape[0])
    assert np.allclose(built.p_grid, target_probability(built.Xp, grid_points(g)))
    assert np.array_equal(back.p_grid, built.p_grid) and np.array_equal(back.Xp, built.Xp)
    assert all(np.array_equal(back.pattern[k], built.pattern[k]) for k in ("correct", "chose_decoy"))
    assert back.rows.equals(built.rows) and back.grid == g and back.config == built.config
    cfg = built.config
    assert cfg["seeds"] == [0] and cfg["policies"] == pols and cfg["budgets"] == [str(buds[0])]
    assert cfg["n_agents"] == 4 and cfg["tokenizer"] == "default" and cfg["formula"] == FORMULA
    assert cfg["grid"] == {"inverse_temperature": [1.0, 2.0], "irrelevant_weight": [0.5], "social_proof": [0.0, 1.0]}
    assert len(cfg["templates"]) >= 1 and all(len(t) == 16 for t in cfg["templates"])
    # another seed, policy, agents count, tokenizer or grid: another entry
    from crossprofile_lib.paperfit.ledger import cache_key
    base = (DEV[:1], [0], pols, buds[:1], 4, None, g)
    assert cache_key(*base) == (built.key, built.config)
    for i, other in [(1, [1]), (2, ["R1"]), (3, ["b0"]), (4, 3), (5, "gpt2"),
                     (6, dict(g, inverse_temperature=(1.0, 3.0)))]:
        assert cache_key(*base[:i], other, *base[i + 1:])[0] != built.key, i


def _sampling_from(L: np.ndarray, refs) -> Sampling:
    A = L.shape[0] // 2
    z = sparse.csr_matrix((A, 1))
    return Sampling(tuple(refs), np.full(A, 100.0), z, z, L, np.full(L.shape[1], 100.0), ())


def test_linkage_counts_independent_figures_and_links_those_sharing_a_null_vector_by_hand():
    """Two atoms (rows c0, c1, d0, d1 of L): a = 100 c0, b = 100 c0 (a's duplicate), c = 100 c1, d = 100 d1,
    e = 100 (c0 + c1). Rank 3; a-b and a-c-e are dependent, so one group a, b, c, e (d stands alone). Without b and e
    all four are independent. A figure differing by 1e-4 d0 is not a duplicate (exact dependence only)."""
    L = np.zeros((4, 5))
    L[0, 0] = L[0, 1] = L[1, 2] = L[3, 3] = 100.0
    L[0, 4] = L[1, 4] = 100.0
    S = _sampling_from(L, "abcde")
    lk = S.linkage([True] * 5)
    assert (lk["n_figures"], lk["n_independent"], lk["groups"]) == (5, 3, [["a", "b", "c", "e"]])
    assert lk["null"].shape == (2, 5) and np.allclose(lk["null"] @ L.T, 0.0)
    two = S.linkage([True, True, False, True, False])
    assert (two["n_figures"], two["n_independent"], two["groups"]) == (3, 2, [["a", "b"]])
    none = S.linkage(np.array([1, 0, 1, 1, 0]))
    assert (none["n_figures"], none["n_independent"], none["groups"]) == (3, 3, [])
    L2 = L.copy()
    L2[2, 1] = 1e-2                           # b = 100 c0 + 0.01 d0: not a's duplicate
    lk2 = _sampling_from(L2, "abcde").linkage([True, True, False, True, False])
    assert lk2["n_independent"] == 3 and lk2["groups"] == []
    # two separate pairs: two groups, in the order of their first figure
    L3 = np.zeros((4, 4))
    L3[0, 0] = L3[1, 1] = 50.0
    L3[1, 2] = L3[0, 3] = 100.0
    lk3 = _sampling_from(L3, "wxyz").linkage([True] * 4)
    assert lk3["n_independent"] == 2 and lk3["groups"] == [["w", "z"], ["x", "y"]]


def test_profile_holds_each_value_starting_from_its_neighbours_optimum(dev, monkeypatch):
    """The sweep goes up from the estimate over the values at or above it, then down over those below, each fit
    held at its value and started where the previous one ended (the first of each sweep at the estimate, with the
    held parameter set to the value even when theta is given as integers); the answers land in the values' order."""
    dec, design, fm, F, S = dev
    y, used = _paper_targets(dec, fm)
    calls, real = [], Fitter.fit

    def spy(self, y, used, W=None, start=None, fixed=None, H=None):
        out = real(self, y, used, W, start, fixed, H)
        calls.append((None if start is None else np.array(start, dtype=float), fixed, out["theta"].copy(),
                      out["loss"], H))
        return out
    monkeypatch.setattr(Fitter, "fit", spy)
    full = dict(theta=[0, 0, 2])                     # integers: the held value must not be truncated
    values = [0.75, -0.25, 0.25, 0.5, 0.0]           # 0.0: the estimate itself belongs to the upward sweep
    Hm = 2.0 * np.eye(int(used.sum()))
    out = F.profile(y, used, full, 0, values, Hm)
    assert [c[1] for c in calls] == [(0, 0.0), (0, 0.25), (0, 0.5), (0, 0.75), (0, -0.25)]
    assert calls[0][0].tolist() == [0.0, 0.0, 2.0] and calls[4][0].tolist() == [-0.25, 0.0, 2.0]
    assert calls[1][0].tolist() == [0.25, *calls[0][2][1:]] and calls[2][0].tolist() == [0.5, *calls[1][2][1:]]
    assert calls[3][0].tolist() == [0.75, *calls[2][2][1:]]
    assert out.tolist() == [calls[3][3], calls[4][3], calls[1][3], calls[2][3], calls[0][3]]
    assert all(c[4] is Hm for c in calls)


def test_whitener_is_the_square_root_of_the_pseudo_inverse_by_hand():
    """H' H = V+: diag(4, 1) gives rows (1/2, 0) and (0, 1) (up to sign and order); the rank-one [[1, 1], [1, 1]]
    one row with H' H = 1/4 everywhere; an eigenvalue below 1e-8 of the largest is dropped; V is symmetrised first;
    zero, no rows."""
    H = whitener(np.diag([4.0, 1.0]))
    assert H.shape == (2, 2) and np.allclose(H.T @ H, np.diag([0.25, 1.0]))
    assert sorted(np.abs(H).max(axis=1).tolist()) == [0.5, 1.0]
    H1 = whitener(np.ones((2, 2)))
    assert H1.shape == (1, 2) and np.allclose(H1.T @ H1, 0.25)
    Hs = whitener(np.diag([1.0, 1e-9]))
    assert Hs.shape == (1, 2) and np.allclose(Hs.T @ Hs, np.diag([1.0, 0.0]))
    assert whitener(np.diag([1.0, 1e-7])).shape == (2, 2)
    Ha = whitener(np.array([[2.0, 1.0], [0.0, 2.0]]))
    assert np.allclose(Ha.T @ Ha, np.linalg.inv(np.array([[2.0, 0.5], [0.5, 2.0]])))
    assert whitener(np.zeros((2, 2))).shape == (0, 2)


def test_leave_one_out_refits_without_each_used_figure_and_predicts_it(dev, monkeypatch):
    """For each used figure: refine from the full fit without it (weighted by V without its row and column when V is
    given) and that fit's prediction of it; unused figures, and a figure whose removal leaves none, are NaN."""
    dec, design, fm, F, S = dev
    y = np.array([f.paper.get(Q, np.nan) for f in dec])
    ok = np.flatnonzero(~np.isnan(y) & fm.estimable)[:4]
    used = np.zeros(len(y), dtype=bool)
    used[ok] = True
    full = F.fit(y, used)
    seen, real = [], Fitter.refine

    def spy(self, y, u, start, H=None):
        out = real(self, y, u, start, H)
        seen.append((np.array(u), np.array(start), H, out["theta"]))
        return out
    monkeypatch.setattr(Fitter, "refine", spy)
    V = np.diag(np.arange(1.0, len(y) + 1))
    loo = F.leave_one_out(y, used, full, V)
    assert len(seen) == 4 and np.isnan(np.delete(loo, ok)).all()
    for j, (u, start, H, th) in zip(ok, seen):
        want = used.copy()
        want[j] = False
        assert np.array_equal(u, want) and np.allclose(start, full["theta"])
        assert np.allclose(H.T @ H, np.diag(1 / np.arange(1.0, len(y) + 1)[want]))
        assert loo[j] == pytest.approx(F.predict(th)[j])
    seen.clear()
    F.leave_one_out(y, used, full)
    assert all(H is None for _, _, H, _ in seen)
    one = np.zeros(len(y), dtype=bool)
    one[ok[0]] = True
    seen.clear()
    assert np.isnan(F.leave_one_out(y, one, full)).all() and seen == []


def test_refit_many_fits_each_row_from_the_start_and_counts_the_unconverged(dev, monkeypatch):
    dec, design, fm, F, S = dev
    t0 = np.array([0.4, -0.3, 3.0])
    y = F.predict(t0)
    used = fm.estimable & np.isfinite(y)
    th, pr, failed = F.refit_many(np.vstack([y, y]), used, (1.0, 0.5, 1.0))
    assert th.shape == (2, 3) and np.allclose(th, [t0, t0], rtol=1e-4, atol=1e-5) and failed == 0
    assert np.allclose(pr[:, used], [y[used], y[used]], rtol=1e-5, atol=1e-6)
    W = np.vstack([np.ones(len(fm.units)), 1.0 + (np.arange(len(fm.units)) % 3)])
    yw = F.predict(t0, W[1])
    th, pr, failed = F.refit_many(np.vstack([y, yw]), used, (1.0, 0.5, 1.0), W=W)
    assert np.allclose(th, [t0, t0], rtol=1e-4, atol=1e-5)
    assert np.allclose(pr[1, used], yw[used], rtol=1e-5, atol=1e-6)
    import crossprofile_lib.paperfit.fit as fitmod
    real = Fitter.fit
    monkeypatch.setattr(fitmod.Fitter, "fit", lambda self, *a, **k: dict(real(self, *a, **k), success=False))
    assert F.refit_many(np.vstack([y, y, y]), used, t0)[2] == 3


def test_sampling_map_reproduces_the_figures_from_atom_proportions(dev):
    """Oracle: the figures built from the atoms' mean proportions through L are the figure matrix's predictions at
    any theta (an aliased term predicts as the term it is aliased to); the atoms partition the rows in any term
    (each pattern count row sums to its atom's size); n_term is the first term's row count."""
    from crossprofile_lib.paperfit.fit import term_masks
    dec, design, fm, F, _ = dev
    S = build_sampling(design, dec)
    assert S.refs == tuple(f.ref for f in dec)
    est = fm.estimable
    for th in ([0.4, -0.3, 3.0], [1.5, 0.8, 0.7], [0.0, 0.0, 10.0]):
        p = design.probability(np.array(th))
        pc, pd_ = S.proportions(p)
        assert np.allclose(S.figures(pc, pd_)[est], fm.predict(p)[est], rtol=1e-9, atol=1e-9)
    masks = term_masks(design, dec)
    inany = np.any([m for _, _, m, *_ in masks], axis=0)
    # (an aliased term's own rows are left out: it takes its alias's rows)
    assert 0 < S.n.sum() <= inany.sum() and S.n_atoms == len(S.n) and (S.n >= 1).all()
    assert np.allclose(np.asarray(S.Pc.sum(axis=1)).ravel(), S.n)
    assert np.allclose(np.asarray(S.Pd.sum(axis=1)).ravel(), S.n)
    first = {i: m.sum() for i, k, m, *_ in masks if k == 0}
    for i, f in enumerate(dec):
        if first[i] > 0:
            assert S.n_term[i] == first[i], f.ref
        else:
            assert np.isnan(S.n_term[i])
    assert S.aliases and all(" predicts as " in a and a.endswith("(same choice patterns in every template)")
                             for a in S.aliases)
    assert S.aliases == (
        "classic-rel/oracle relevance - R1 term 0 predicts as classic-rel/R1-rel - R1 term 0 (same choice patterns "
        "in every template)",
        "classic-labels/ALL unlabeled - ALL, support shared / decoy private term 0 predicts as classic-labels/ALL "
        "unlabeled - ALL term 0 (same choice patterns in every template)")
    assert (S.n_atoms, S.n.sum()) == (36, 490.0)
    # the atoms cover exactly the rows of the terms that are not aliased (an alias's own rows are left out)
    aliased = {a.split(" predicts as ")[0] for a in S.aliases}
    kept = [m for i, k, m, *_ in masks if f"{dec[i].ref} term {k}" not in aliased]
    assert len(aliased) == len(S.aliases) and S.n.sum() == np.any(kept, axis=0).sum() < inany.sum()
    # no figures: no atoms, an empty map
    E = build_sampling(design, [])
    assert (E.n_atoms, E.L.shape, E.Pc.shape[0], E.aliases, E.refs) == (0, (0, 0), 0, (), ())


def _capture_starts(monkeypatch):
    import crossprofile_lib.paperfit.fit as fitmod
    starts, real = [], fitmod.least_squares

    def spy(fun, x0, *a, **k):
        starts.append(np.array(x0, dtype=float))
        return real(fun, x0, *a, **k)
    monkeypatch.setattr(fitmod, "least_squares", spy)
    return starts


def test_fit_starts_from_the_grid_point_of_least_loss_and_clips_a_given_start(dev, monkeypatch):
    """Figures equal to one grid point's predictions start the fit at that point (in (s, w, log beta)); held at a
    value, the start is the best of the grid points with the nearest value of that parameter; with a count row W
    the grid predictions are W's; a given start outside the bounds is clipped onto them."""
    dec, design, fm, F, S = dev
    starts = _capture_starts(monkeypatch)
    used = fm.estimable & np.isfinite(F.pred_grid).all(axis=0)
    gs = np.array(design.grid["social_proof"])
    g0 = next(i for i, g in enumerate(F.grid) if g[0] == gs[3] and g[1] == 0.5 and 1.0 < g[2] < 4.0)
    at = F.grid[g0]
    log = lambda g: np.array([g[0], g[1], np.log(g[2])])      # noqa: E731
    y = F.pred_grid[g0]
    F.fit(y, used)
    assert np.allclose(starts[-1], log(at))
    F.fit(y, used, fixed=(0, float(gs[3]) + 1e-3))
    assert np.allclose(starts[-1], log(at)[1:])               # s held: w and log beta are fitted
    W = 1.0 + (np.arange(len(fm.units)) % 3)
    yw = F.grid_predictions(W[None])[0][g0]
    F.fit(yw, used, W=W)
    assert np.allclose(starts[-1], log(at))
    F.fit(y, used, start=(-1.0, -5.0, 0.001))
    assert np.allclose(starts[-1], [-0.3, -3.0, np.log(0.02)])
    F.fit(y, used, start=(6.0, 5.0, 100.0))
    assert np.allclose(starts[-1], [5.0, 3.0, np.log(50.0)])


def test_a_held_parameter_is_held_at_its_value_on_every_scale(dev):
    """s and w are held as given (3.0, -2.5), beta as given though fitted on log beta (1.5 and 7.0); the other two
    are fitted; rmse is of the residuals at the fit with the count row W when one is given."""
    dec, design, fm, F, S = dev
    y = F.predict(np.array([0.4, -0.3, 3.0]))
    used = fm.estimable & np.isfinite(y)
    assert F.fit(y, used, fixed=(0, 3.0))["theta"][0] == pytest.approx(3.0, rel=1e-12)
    assert F.fit(y, used, fixed=(1, -2.5))["theta"][1] == pytest.approx(-2.5, rel=1e-12)
    assert F.fit(y, used, fixed=(2, 1.5))["theta"][2] == pytest.approx(1.5, rel=1e-12)
    assert F.fit(y, used, fixed=(2, 7.0))["theta"][2] == pytest.approx(7.0, rel=1e-12)
    W = 1.0 + (np.arange(len(fm.units)) % 3)
    yw = F.predict(np.array([0.4, -0.3, 3.0]), W) + np.where(np.arange(len(y)) % 2, 1.0, -1.0)
    f = F.fit(yw, used, W=W)
    r = F.predict(f["theta"], W)[used] - yw[used]
    assert f["rmse"] == pytest.approx(float(np.sqrt(np.mean(r ** 2))), rel=1e-9) and f["rmse"] > 0.1


def test_used_may_be_given_as_zeros_and_ones(dev):
    dec, design, fm, F, S = dev
    y = F.predict(np.array([0.4, -0.3, 3.0])) + 0.5
    used = fm.estimable & np.isfinite(y)
    a = F.fit(y, used)
    b = F.fit(y, used.astype(int).tolist())
    assert np.allclose(a["theta"], b["theta"]) and a["loss"] == pytest.approx(b["loss"])


def test_reweighting_refits_at_the_last_fits_covariance_until_theta_settles(dev):
    """Each step refines from the current fit, whitened by the covariance at the current theta; it stops at the first
    step that moves (s, w, log beta) by less than 1e-3 (max norm), else after REWEIGHT_STEPS; V and (pc, pd) are at
    the final theta. Scripted fits from (0.5, 0.2, 2): +0.1 in s, +0.0005 in w (settles: 2 steps); a beta step of
    x1.002 (log 0.002) does not settle, x1.0005 does."""
    from types import SimpleNamespace

    import crossprofile_lib.paperfit.report as R
    dec, design, fm, F, S = dev
    used = fm.estimable.copy()
    used[:3] = False                              # the covariance is of the used figures only
    y = np.arange(len(used), dtype=float)

    def scripted(moves):
        seen = []
        it = iter(moves)

        def refine(yy, u, start, H):
            assert yy is y and u is used
            seen.append((np.array(start, dtype=float), H))
            d = next(it)
            return dict(theta=np.array([start[0] + d[0], start[1] + d[1], start[2] * d[2]]))
        def fit(yy, u):
            assert yy is y and u is used
            return dict(theta=np.array([0.5, 0.2, 2.0]))
        return SimpleNamespace(fit=fit, refine=refine), seen

    Fk, seen = scripted([(0.1, 0.0, 1.0), (0.0, 0.0005, 1.0)])
    full, V, steps, (pc, pd_) = R._weighted_fit(Fk, S, design, y, used, 18.0)
    assert steps == 2 and np.allclose(full["theta"], [0.6, 0.2005, 2.0])
    assert [s.tolist() for s, _ in seen] == [[0.5, 0.2, 2.0], [0.6, 0.2, 2.0]]
    for start, H in seen:
        c, d = S.proportions(design.probability(start))
        Vs = S.covariance(c, d, 18.0)[np.ix_(used, used)]
        assert np.allclose(H.T @ H, np.linalg.pinv(Vs, rcond=1e-8, hermitian=True), rtol=1e-6, atol=1e-9)
    c, d = S.proportions(design.probability(np.array([0.6, 0.2005, 2.0])))
    assert np.allclose(pc, c) and np.allclose(pd_, d) and np.allclose(V, S.covariance(c, d, 18.0))
    Fk, seen = scripted([(0.0, 0.0, 1.002), (0.0, 0.0, 1.0005)])
    assert R._weighted_fit(Fk, S, design, y, used, 18.0)[2] == 2
    Fk, seen = scripted([(0.0, 0.0, 1.0005)])
    assert R._weighted_fit(Fk, S, design, y, used, 18.0)[2] == 1
    Fk, seen = scripted([(0.0, -0.002, 1.0)] * R.REWEIGHT_STEPS)
    full, _, steps, _ = R._weighted_fit(Fk, S, design, y, used, 18.0)
    assert steps == R.REWEIGHT_STEPS == 6 and full["theta"][1] == pytest.approx(0.2 - 0.012)


def test_two_atoms_draw_each_at_its_own_proportions():
    """Two atoms (figure a = 100 c of atom 0, b = 100 c of atom 1): atom 0 at (c, d) = (.2, .3) and atom 1 at
    (.9, .05) average 20 and 90 - each atom's three probabilities are its own, summing to one; a negative P(correct)
    is clipped to 0 (never drawn)."""
    L = np.zeros((4, 2))
    L[0, 0] = L[1, 1] = 100.0
    S = _sampling_from(L, "ab")
    Y = S.draw(np.array([0.2, 0.9]), np.array([0.3, 0.05]), 1.0, 3000, np.random.default_rng(4), rounding=None)
    assert Y.shape == (3000, 2)
    assert Y[:, 0].mean() == pytest.approx(20.0, abs=0.5) and Y[:, 1].mean() == pytest.approx(90.0, abs=0.5)
    Y = S.draw(np.array([-0.1, 0.5]), np.array([0.3, 0.5]), 1.0, 50, np.random.default_rng(4), rounding=None)
    assert np.all(Y[:, 0] == 0.0) and np.all(Y[:, 1] <= 100.0)


def test_covariance_clips_decoy_at_one_less_half_a_decision():
    """c = 0, d = 1 at m = 100: c = .005, d = .995, and Var(100 (c - d)) = 1e4 (2 x .005 x .995 + 2 x .005 x .995)
    / 100 = 1.99 (with d left at 1 it would be 1.4975)."""
    V = _one_atom("minus").covariance(np.array([0.0]), np.array([1.0]), 1.0)
    assert V[1, 1] == pytest.approx(1.99)


def test_linkage_counts_a_dependence_within_the_relative_tolerance_as_exact():
    """b = 100 c0 + 1e-7 d0 is a's duplicate within 1e-8 of the largest singular value (~141): linked; so is it
    when L is scaled down to entries of 1e-3 (the tolerance is then 1e-8 absolute, floor of the scale 1)."""
    L = np.zeros((4, 3))
    L[0, 0] = L[0, 1] = 100.0
    L[2, 1] = 1e-7
    L[3, 2] = 100.0
    lk = _sampling_from(L, "abd").linkage([True] * 3)
    assert lk["n_independent"] == 2 and lk["groups"] == [["a", "b"]]
    small = L / 1e5
    small[2, 1] = 1e-9                      # 1e-9 relative to entries of 1e-3, below the absolute 1e-8
    lk = _sampling_from(small, "abd").linkage([True] * 3)
    assert lk["n_independent"] == 2 and lk["groups"] == [["a", "b"]]


def test_recovery_defaults_to_twenty_draws_rounded_to_one_decimal(dev):
    """Without draws and rounding: 20 redrawn figure sets per truth, each figure rounded to 0.1 as published (not
    to a coarser step: the values are not all multiples of 1.1)."""
    from types import SimpleNamespace

    from crossprofile_lib.paperfit.fit import recovery
    dec, design, fm, F, S = dev
    used = fm.estimable.copy()
    seen = []

    def fit(y, u, H=None):
        seen.append(np.array(y)[u])
        return dict(theta=np.array([0.5, 0.0, 2.0]), rmse=1.0)
    r = recovery(SimpleNamespace(design=design, fit=fit), used, [(0.5, 0.0, 2.0)], np.random.default_rng(0), S, 18.0)
    assert len(seen) == 20 and r[0]["estimates"].shape == (20, 3) and r[0]["rmse"] == 1.0
    Y = np.concatenate(seen)
    assert np.allclose(Y * 10, np.round(Y * 10), atol=1e-6)
    assert not np.allclose(Y / 1.1, np.round(Y / 1.1), atol=1e-6)


def _record_fits(monkeypatch) -> list:
    """``report._fit`` replaced by a recorder: the arguments of each call, a one-cell fit returned."""
    import pandas as pd

    import crossprofile_lib.paperfit.report as R
    got = []

    def fake_fit(*args):
        got.append(args)
        t = pd.DataFrame({"x": [1.0]})
        return R.PaperFit(t, t, t, t, t, info={})
    monkeypatch.setattr(R, "_fit", fake_fit)
    return got


def test_fit_key_is_the_hash_of_every_input_with_the_designs_own_key(dev, tmp_path, monkeypatch):
    """The fit's cache folder is named for the first 20 hex digits of sha256 over the JSON (sorted keys) of: the
    design's key (the one the design is stored under: 4 agents, this tokenizer, the grid), each figure's ref, unit,
    paper values, n and contrast, the resamples, boot seed, models, recovery, profiles, template resamples,
    recovery draws, the paper sampling with the override, and FIT_VERSION 5; _fit gets those inputs."""
    import hashlib
    import json

    from crossprofile_lib.paper_figures import paper_sampling
    dec, design, fm, F, S = dev
    got = _record_fits(monkeypatch)
    over = {FLASH: {"templates": 15, "seeds": 1}}
    out = fit_paper(templates=DEV, seeds=[0], cache_dir=tmp_path, models=[Q], resamples=10, boot_seed=3,
                    with_recovery=False, with_profiles=True, template_resamples=2, recovery_draws=7, sampling=over)
    figs = select_figures()
    samp = dict(paper_sampling(), **over)
    want = hashlib.sha256(json.dumps(dict(
        design=design.key, figures=[(f.ref, f.unit, f.paper, f.n, repr(f.contrast)) for f in figs], resamples=10,
        boot_seed=3, models=[Q], recovery=False, profiles=True, template_resamples=2, recovery_draws=7,
        sampling=samp, version=5), sort_keys=True, default=str).encode()).hexdigest()[:20]
    assert out.info["fit_key"] == want
    # info.json is the info as JSON indented by one space
    assert (tmp_path / f"fit-{want}" / "info.json").read_text() == (
        '{\n "fit_key": "' + want + '",\n "fit_cache_hit": false\n}')
    pols, buds = needed_policies(figs, DEFAULT_POLICIES)
    (a,) = got
    assert [f.ref for f in a[0]] == [f.ref for f in figs] and (a[1], a[2]) == (pols, buds)
    assert a[3:11] == (DEV, [0], 10, 3, tmp_path, [Q], False, True) and a[12:] == (None, 2, 7, samp)
    # a sampling given in numpy integers still keys (written as text): no TypeError from the JSON
    npk = fit_paper(templates=DEV, seeds=[0], cache_dir=tmp_path, models=[Q], use_cache=False,
                    sampling={FLASH: {"templates": np.int64(15), "seeds": np.int64(1)}}).info["fit_key"]
    assert len(npk) == 20 and npk != want


def test_fit_paper_defaults_are_the_papers_full_run(tmp_path, monkeypatch):
    """By default: the formal templates at seeds 0, 1, 2, 1000 parametric resamples from boot seed 0, recovery and
    profiles on, the default cache folder used (the entry written there), no template resamples, 20 recovery draws,
    the offline tokenizer, every model."""

    import crossprofile_lib.paperfit.report as R
    got = _record_fits(monkeypatch)
    monkeypatch.setattr(R, "default_cache_dir", lambda: tmp_path)      # no cache_dir: the default one
    out = fit_paper()
    (a,) = got
    assert a[3:11] == (("templates/formal",), (0, 1, 2), 1000, 0, tmp_path, None, True, True)
    assert a[12:15] == (None, 0, 20)
    assert (tmp_path / f"fit-{out.info['fit_key']}" / "info.json").exists()
    # predict_at and predict_grid load the formal templates' design at seeds 0, 1, 2 by default
    seen = []

    def no_design(templates, seeds, pols, buds, cache_dir, tokenizer=None):
        seen.append((templates, seeds, cache_dir, tokenizer))
        raise LookupError("stop here")
    monkeypatch.setattr(R, "load_or_build", no_design)
    for fn in (R.predict_at, R.predict_grid):
        with pytest.raises(LookupError):
            fn((0.0, 0.5, 2.0))
    assert seen == [(("templates/formal",), (0, 1, 2), None, None)] * 2

def test_the_fit_asks_least_squares_for_trf_within_the_bounds_at_tight_tolerances(dev, monkeypatch):
    """Each fit is scipy's trust-region-reflective least squares in (s, w, log beta) within the parameters' bounds,
    unit x_scale, xtol = ftol = gtol = 1e-10 and at most 400 evaluations; a held parameter leaves the other two
    free, within their bounds."""
    import crossprofile_lib.paperfit.fit as FT
    dec, design, fm, F, S = dev
    y, used = _paper_targets(dec, fm)
    seen, real = [], FT.least_squares

    def spy(fun, x0, **kw):
        seen.append((len(x0), kw))
        return real(fun, x0, **kw)
    monkeypatch.setattr(FT, "least_squares", spy)
    F.fit(y, used, start=(0.5, 0.0, 2.0))
    F.fit(y, used, start=(0.5, 0.0, 2.0), fixed=(1, 0.25))
    (n0, kw0), (n1, kw1) = seen
    assert (n0, n1) == (3, 2)
    for kw in (kw0, kw1):
        assert {k: kw[k] for k in ("method", "x_scale", "xtol", "ftol", "gtol", "max_nfev")} == dict(
            method="trf", x_scale=1.0, xtol=1e-10, ftol=1e-10, gtol=1e-10, max_nfev=400)
    lo, hi = kw0["bounds"]
    assert np.allclose(lo, [-0.3, -3.0, np.log(0.02)]) and np.allclose(hi, [5.0, 3.0, np.log(50.0)])
    assert np.allclose(kw1["bounds"][0], [-0.3, np.log(0.02)]) and np.allclose(kw1["bounds"][1], [5.0, np.log(50.0)])


def test_a_figure_whose_term_has_no_rows_predicts_nan_without_a_warning():
    """A figure whose one term matches no rows (sum 0 over count 0): 0 / 0, NaN, and no RuntimeWarning (the
    division ignores invalid and divide); the same matrix with 2 rows summing to 1.5 gives 0.75."""
    import warnings

    from crossprofile_lib.paperfit.fit import FigureMatrix

    def one(total, count):
        return FigureMatrix(("a",), ("t",), sparse.csr_matrix(np.array([[total]])), np.array([[count]]),
                            np.eye(1), ("" if count else "no rows",))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        empty = one(0.0, 0.0).predict(np.array([1.0]))
    assert empty.shape == (1,) and np.isnan(empty[0])
    assert one(1.5, 2.0).predict(np.array([1.0]))[0] == pytest.approx(0.75)


def test_a_fit_on_no_figures_stays_at_its_start_with_zero_loss_and_rmse(dev):
    """With no used figure there is nothing to fit: theta is the start (0.5, 0, 2), loss 0 and rmse 0 (not the NaN
    mean of no residuals), no parameter at a bound, and one evaluation."""
    import warnings
    dec, design, fm, F, S = dev
    y, _ = _paper_targets(dec, fm)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = F.fit(y, np.zeros(len(y), dtype=bool), start=(0.5, 0.0, 2.0))
    assert np.allclose(f["theta"], [0.5, 0.0, 2.0]) and f["loss"] == 0.0 and f["rmse"] == 0.0
    assert f["at_bound"] == [False, False, False] and f["success"] and f["nfev"] == 1


def test_design_cache_key_is_the_hash_of_its_inputs_as_plain_json():
    """The design's key: the first 20 hex digits of sha256 over the sorted-key JSON of the templates' file hashes
    (16 digits each, sorted), the seeds as ints, policies, budgets as strings, n_agents as an int, the tokenizer
    ('default' for None), the grid as float lists, the package version and the formula; cfg is that dict."""
    import hashlib
    import json

    from crossprofile_lib import __version__
    from crossprofile_lib.paperfit.ledger import FORMULA, GRID, cache_key
    from crossprofile_lib.paths import file_sha256
    from crossprofile_lib.task.templates import template_paths
    grid = {"social_proof": (0.0, 1.0), "irrelevant_weight": (-1.0,), "inverse_temperature": (2.0, 4.0)}
    key, cfg = cache_key(DEV, [np.int64(1), 0], ("R1", "ALL"), [0.6, "1.0"], np.int64(4), None, grid)
    want = dict(templates=sorted(file_sha256(p)[:16] for p in template_paths(DEV)), seeds=[1, 0],
                policies=["R1", "ALL"], budgets=["0.6", "1.0"], n_agents=4, tokenizer="default",
                grid={"inverse_temperature": [2.0, 4.0], "irrelevant_weight": [-1.0], "social_proof": [0.0, 1.0]},
                version=__version__, formula=FORMULA)
    assert cfg == want and len(cfg["templates"]) == 10 and all(len(t) == 16 for t in cfg["templates"])
    assert json.dumps(cfg, sort_keys=True) == json.dumps(want, sort_keys=True)
    assert key == hashlib.sha256(json.dumps(want, sort_keys=True).encode()).hexdigest()[:20]
    assert FORMULA == "softmax(beta*(x0 + s*x1 + w*(x2 + s*x3))) v1"
    # a named tokenizer is keyed by its spec; the default grid keys as its float lists
    assert cache_key(DEV, [0], ["R1"], ["0.6"], 4, "hf:gpt2", grid)[1]["tokenizer"] == "hf:gpt2"
    assert cache_key(DEV, [0], ["R1"], ["0.6"], 4, None, GRID)[1]["grid"]["social_proof"][:2] == [-0.3, 0.0]


def test_a_design_grid_without_decisions_is_refused_saying_why():
    """No seeds: no decision to build, a ValueError that names the three ways a grid can be empty."""
    from crossprofile_lib.paperfit.ledger import build_design
    from crossprofile_lib.task.templates import load_templates
    with pytest.raises(ValueError) as e:
        build_design(load_templates(DEV)[:1], [], ["R1"], ["0.6"])
    assert str(e.value) == "the grid has no decisions (no templates, seeds or policies)"


def test_figure_matrix_names_each_term_without_rows_and_weights_terms_by_scale(dev):
    """A made-up figure of three terms (R1 at 0.6, minus a policy 'Nope', plus budget 9.9) beside cp-mean/R1: one
    column per term, coefficient scale x weight (100, -100, 100), rows counted per template (80 over the dev
    design's 10 templates for the R1 terms, none for the others), and the reason names each empty term by index,
    joined by '; '; that figure is not estimable."""
    import dataclasses

    from crossprofile_lib.stats.prereg import Term
    dec, design, fm0, F, S = dev
    f = next(g for g in dec if g.ref == "cp-mean/R1")
    t0 = f.contrast.terms[0]
    c = dataclasses.replace(f.contrast, terms=(t0, Term(weight=-1.0, where={"budget_label": "0.6", "policy": "Nope"}),
                                               Term(weight=1.0, where={"budget_label": "9.9", "policy": "R1"})))
    fm = figure_matrix(design, [f, dataclasses.replace(f, contrast=c, ref="made-up")])
    assert fm.reasons == ("", "term 1: no rows with policy in ['Nope'] (present: B4, M1, R1, R1-rel, R1-rel-oracle, "
                              "Random); term 2: no rows with budget_label in ['9.9'] (present: 0.6, none)")
    assert fm.estimable.tolist() == [True, False] and fm.refs == ("cp-mean/R1", "made-up")
    assert fm.C.tolist() == [[100.0, 0.0], [0.0, 100.0], [0.0, -100.0], [0.0, 100.0]]
    assert fm.N.sum(axis=0).tolist() == [80.0, 80.0, 0.0, 0.0] and fm.N.shape == (10, 4)
    assert fm.N[:, 0].tolist() == [8.0] * 10


def test_select_figures_keeps_crossprofile_items_with_a_measure_and_numeric_paper_values():
    """From variants of cp-mean/R1: another data source, no measure, an outcome neither decision nor memory, or no
    numeric paper value (True and text do not count) are skipped; ints become floats, bools and text are dropped;
    a memory outcome is kind 'memory'; the parsed contrast takes the defaults (scale 100, budget 0.6, correct)."""
    import dataclasses

    from crossprofile_lib.paper_figures import load_paper_figures
    it = next(i for i in load_paper_figures() if i.ref == "cp-mean/R1")
    other = dataclasses.replace(it, data="natural")
    bare = dataclasses.replace(it, measure={})
    words = dataclasses.replace(it, paper={"A": True, "B": "about 60"})
    mixed = dataclasses.replace(it, paper={"A": 61, "B": False, "C": "n/a", "D": 2.5})
    mem = dataclasses.replace(it, measure={"outcome": "kept_decoy", "terms": [{"weight": 1, "where": {}}]})
    odd = dataclasses.replace(it, measure={"outcome": "seconds", "terms": [{"weight": 1, "where": {}}]})
    figs = select_figures([other, bare, words, mixed, mem, odd])
    assert [(f.kind, f.paper) for f in figs] == [("decision", {"A": 61.0, "D": 2.5}),
                                                 ("memory", {"Qwen2.5-7B-Instruct": 64.0,
                                                             "Llama-3.1-8B-Instruct": 63.0})]
    assert type(figs[0].paper["A"]) is float
    c = figs[0].contrast
    assert (c.outcome, c.scale, c.terms[0].where) == ("correct", 100.0, {"budget_label": "0.6", "policy": "R1"})


def test_a_term_without_rows_leaves_the_other_figures_and_their_jacobian_as_they_were(dev):
    """A made-up figure whose term matches no rows (policy 'Nope') beside cp-mean/R1: the made-up figure is NaN and
    cp-mean/R1 is what it is alone, in every prediction path (not NaN through NaN x 0 in the term-to-figure map)."""
    import dataclasses

    from crossprofile_lib.paperfit.fit import combine
    from crossprofile_lib.stats.prereg import Term
    # by hand: terms (1, NaN) -> figures (2*1, NaN*1); NaN only where the figure reads the NaN term
    got = combine(np.array([[1.0, np.nan]]), np.array([[2.0, 0.0], [0.0, 1.0]]))
    assert got[0, 0] == 2.0 and np.isnan(got[0, 1])
    dec, design, fm0, F0, S = dev
    f = next(g for g in dec if g.ref == "cp-mean/R1")
    c = dataclasses.replace(f.contrast, terms=(Term(weight=1.0, where={"budget_label": "0.6", "policy": "Nope"}),))
    fm = figure_matrix(design, [f, dataclasses.replace(f, contrast=c, ref="made-up")])
    alone, both = Fitter(design, figure_matrix(design, [f])), Fitter(design, fm)
    th = np.array([0.5, 0.2, 2.0])
    z = np.array([[0.5, 0.2, np.log(2.0)]])
    W = np.ones((1, len(fm.units)))
    pa, pb = alone.predict(th), both.predict(th)
    assert np.isfinite(pa[0]) and pb[0] == pytest.approx(pa[0]) and np.isnan(pb[1])
    assert both.predict_batch(th[None], W)[0, 0] == pytest.approx(pa[0])
    (pr_a, jac_a), (pr_b, jac_b) = alone.predict_batch_jac(z, W), both.predict_batch_jac(z, W)
    assert pr_b[0, 0] == pytest.approx(pr_a[0, 0]) and np.allclose(jac_b[0, 0], jac_a[0, 0])
    assert np.isfinite(jac_a).all() and np.isnan(jac_b[0, 1]).all()
    assert both.pred_grid[:, 0] == pytest.approx(alone.pred_grid[:, 0]) and np.isnan(both.pred_grid[:, 1]).all()
    assert fm.predict(design.p_grid[0])[0] == pytest.approx(figure_matrix(design, [f]).predict(design.p_grid[0])[0])


def test_the_ledger_design_cache_folder_is_made_with_its_missing_parents(tmp_path):
    from crossprofile_lib.paperfit.ledger import load_or_build
    folder = tmp_path / "not" / "yet" / "there"
    d = load_or_build(["templates/dev/dev-hospital-01.yaml"], [0], ["R1"], ["0.6"], folder)
    assert sorted(p.name for p in folder.iterdir()) == [f"ledger-{d.key}.npz", f"ledger-{d.key}.parquet"]
    assert load_or_build(["templates/dev/dev-hospital-01.yaml"], [0], ["R1"], ["0.6"], folder).key == d.key
