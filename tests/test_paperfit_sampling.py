"""The paper's sampling noise in fit-paper (crossprofile_lib.paperfit.sampling): variances, linkage,
the parametric bootstrap and its seeds, on hand-made atoms and on the development templates."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from crossprofile_lib.paperfit import fit_paper
from crossprofile_lib.paperfit.figures import needed_policies, select_figures
from crossprofile_lib.paperfit.fit import Fitter, figure_matrix, whitener
from crossprofile_lib.paperfit.ledger import load_or_build
from crossprofile_lib.paperfit.sampling import Sampling, build_sampling
from crossprofile_lib.policies import DEFAULT_POLICIES

DEV = ["templates/dev"]
Q, FLASH = "Qwen2.5-7B-Instruct", "DeepSeek-V4.1-Flash"


def _toy() -> Sampling:
    """Two disjoint atoms of 100 decisions; figures: level A, A - B, level B (percent)."""
    L = np.zeros((4, 3))
    L[0, 0] = 100           # figure 0 = 100 * P(correct | atom 0)
    L[0, 1], L[1, 1] = 100, -100
    L[1, 2] = 100
    z = sparse.csr_matrix((2, 1))
    return Sampling(("A", "A - B", "B"), np.array([100.0, 100.0]), z, z, L, np.array([100.0, 100.0, 100.0]), ())


def test_binomial_variances_by_hand_and_differences_sum_them():
    S = _toy()
    pc, pd_ = np.array([0.5, 0.2]), np.array([0.3, 0.1])
    V = S.covariance(pc, pd_, kappa=1.0)
    # 1e4 * p (1 - p) / n: 25 for p = .5, 16 for p = .2; the difference has their sum; it shares A's noise
    assert V[0, 0] == pytest.approx(25.0) and V[2, 2] == pytest.approx(16.0) and V[1, 1] == pytest.approx(41.0)
    assert V[0, 1] == pytest.approx(25.0) and V[0, 2] == pytest.approx(0.0)
    # four times the decisions: a quarter of the variance (kappa scales the paper's n)
    assert S.covariance(pc, pd_, kappa=4.0)[0, 0] == pytest.approx(25.0 / 4)
    # a proportion at 1 still has the variance of half a decision (no infinite weight)
    v1 = S.covariance(np.array([1.0, 0.2]), pd_, 1.0)[0, 0]
    assert v1 == pytest.approx(1e4 * 0.005 * 0.995 / 100)


def test_draws_have_those_variances_and_are_seeded():
    S = _toy()
    pc, pd_ = np.array([0.5, 0.2]), np.array([0.3, 0.1])
    Y = S.draw(pc, pd_, 1.0, 20000, np.random.default_rng(1), rounding=None)
    assert np.sqrt(Y.var(axis=0)) == pytest.approx([5.0, np.sqrt(41.0), 4.0], rel=0.03)
    assert np.allclose(Y[:, 1], Y[:, 0] - Y[:, 2])                  # linked figures share their draws
    a = S.draw(pc, pd_, 1.0, 50, np.random.default_rng(7))
    b = S.draw(pc, pd_, 1.0, 50, np.random.default_rng(7))
    c = S.draw(pc, pd_, 1.0, 50, np.random.default_rng(8))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.allclose(a * 10, np.round(a * 10))                   # rounded to 0.1 as the paper reports


def test_linkage_counts_a_combination_once():
    S = _toy()
    lk = S.linkage([True, True, True])
    assert lk["n_figures"] == 3 and lk["n_independent"] == 2 and lk["groups"] == [["A", "A - B", "B"]]
    lk = S.linkage([True, False, True])
    assert lk["n_independent"] == 2 and lk["groups"] == []
    # the whitened loss: A - B adds nothing when A and B are both there and the values agree
    V = S.covariance(np.array([0.5, 0.2]), np.array([0.3, 0.1]), 1.0)
    r = np.array([3.0, 1.0, 2.0])                                   # consistent: 3 - 2 = 1
    H3, H2 = whitener(V), whitener(V[np.ix_([0, 2], [0, 2])])
    assert H3.shape == (2, 3)
    assert np.sum((H3 @ r) ** 2) == pytest.approx(np.sum((H2 @ r[[0, 2]]) ** 2))


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    cache = tmp_path_factory.mktemp("paperfit-sampling")
    figs = select_figures()
    dec = [f for f in figs if f.kind == "decision"]
    pols, buds = needed_policies(figs, DEFAULT_POLICIES)
    design = load_or_build(DEV, [0], pols, buds, cache)
    return cache, dec, design, build_sampling(design, dec)


def test_linkage_of_the_paper_figures(dev):
    """Hand-checked: Flash's 6 figures are 4 independent ones (R1-rel - R1 and oracle - R1 are one prediction
    under the decider; ALL unlabeled - ALL is its two levels' difference); Qwen's H2, classic R1 - B4 and H3
    are combinations of its levels."""
    cache, dec, design, S = dev
    refs = [f.ref for f in dec]
    used = lambda m: np.array([m in f.paper for f in dec])   # noqa: E731
    lk = S.linkage(used(FLASH))
    assert lk["n_figures"] == 6 and lk["n_independent"] == 4
    assert sorted(map(sorted, lk["groups"])) == sorted([
        sorted(["classic-rel/R1-rel - R1", "classic-rel/oracle relevance - R1"]),
        sorted(["classic-labels/ALL unlabeled - ALL", "classic-labels/ALL (labelled)", "classic-labels/ALL unlabeled"])])
    assert any("oracle relevance - R1 term 0 predicts as classic-rel/R1-rel - R1" in a for a in S.aliases)
    q = S.linkage(used(Q))
    linked = {r for g in q["groups"] for r in g}
    assert {"cp-mean/H2: R1 - Random", "classic-r1-b4/R1 - B4", "h3/H3: R1-rel - R1", "mirror-r1-b4/R1 - B4"} <= linked
    assert "h1/H1" not in linked and "net-lead/net lead +2" not in linked
    assert q["n_independent"] == q["n_figures"] - 5       # H2, classic R1 - B4, H3, mirror R1 - B4, oracle
    assert len(refs) == len(set(refs))


def test_the_papers_n_follows_from_this_design(dev):
    """10 templates x 1 seed: kappa = 60 x 3 / 10 = 18; kappa x the design's rows per term = the file's n."""
    cache, dec, design, S = dev
    for i, f in enumerate(dec):
        if f.n is not None:
            assert 18 * S.n_term[i] == f.n, f.ref


def test_same_prediction_pair_counts_as_one_reading(dev):
    """Two readings a, b of one prediction fit exactly like one figure at their mean: counted once."""
    cache, dec, design, S = dev
    F = Fitter(design, figure_matrix(design, dec))
    y = np.array([f.paper.get(FLASH, np.nan) for f in dec])
    used = ~np.isnan(y)
    th = np.array([0.2, -0.3, 2.0])
    pc, pd_ = S.proportions(design.probability(th))
    V = S.covariance(pc, pd_, 18.0)
    both = F.fit(y, used, H=whitener(V[np.ix_(used, used)]), start=th)
    i1, i2 = ([f.ref for f in dec].index(r) for r in ("classic-rel/R1-rel - R1", "classic-rel/oracle relevance - R1"))
    y1, u1 = y.copy(), used.copy()
    y1[i1], u1[i2] = (y[i1] + y[i2]) / 2, False
    one = F.fit(y1, u1, H=whitener(V[np.ix_(u1, u1)]), start=th)
    assert np.allclose(both["theta"], one["theta"], atol=1e-5)
    # counted twice (diagonal weights, both readings), the pair would pull the fit elsewhere
    d = np.diag(1 / np.sqrt(np.diag(V)[used]))
    twice = F.fit(y, used, H=d, start=th)
    assert not np.allclose(twice["theta"], one["theta"], atol=1e-3)


def _fit(cache, **kw):
    return fit_paper(templates=DEV, seeds=[0], cache_dir=cache, models=[Q], with_recovery=False,
                     with_profiles=False, use_cache=False, **kw)


def test_parametric_interval_widens_as_the_papers_n_shrinks_and_is_seeded(dev):
    cache = dev[0]
    big = _fit(cache, resamples=60, boot_seed=0).params.set_index("parameter")
    small = _fit(cache, resamples=60, boot_seed=0, sampling={Q: {"templates": 15, "seeds": 3}}).params.set_index("parameter")
    width = lambda t: (t.hi - t.lo)   # noqa: E731
    # a quarter of the decisions: about twice the width (sampling SD ~ 1 / sqrt(n))
    ratio = width(small) / width(big)
    assert (ratio > 1.4).all() and ratio["social_proof"] == pytest.approx(2.0, rel=0.35), ratio
    again = _fit(cache, resamples=60, boot_seed=0).params.set_index("parameter")
    other = _fit(cache, resamples=60, boot_seed=1).params.set_index("parameter")
    assert again[["lo", "hi"]].equals(big[["lo", "hi"]])
    assert not np.allclose(other[["lo", "hi"]], big[["lo", "hi"]])
    assert np.allclose(other.estimate, big.estimate)                # the seed moves the draws, not the fit


def test_fit_reports_independent_figures_and_chi_squared(dev):
    res = _fit(dev[0], resamples=10)
    f = res.info["fits"][Q]
    assert f["n_independent"] == f["n_figures"] - 5 and f["df"] == f["n_independent"] - 3
    assert f["chi2"] == pytest.approx(f["loss"]) and 0 <= f["p_fit"] <= 1
    fig = res.figures.set_index("figure")
    assert fig.loc["classic-r1-b4/R1", "n"] == 180 and fig.loc["classic-r1-b4/R1", "n_source"] == "paper"
    assert fig.loc["net-lead/net lead +2", "n_source"] == "this suite's design"
    assert fig.loc["cp-mean/H2: R1 - Random", "linked"].startswith("group")
    assert np.allclose(fig.z.dropna(), (fig.residual / fig.sd).dropna())
