"""The faster paths of ``crossprofile stats`` (issue 26) give the same values as the paths they
replace (integer work bit for bit, optimiser output to a relative 1e-6), and fall back where they do
not apply (the golden report test checks the whole command: tests/test_stats_golden.py)."""

import numpy as np
import pandas as pd
import pytest

from crossprofile_lib.stats.socialproof import unique_rows


@pytest.mark.parametrize("seed", range(20))
def test_unique_rows_is_numpy_unique_axis0(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, size=(int(rng.integers(1, 400)), int(rng.integers(1, 13)))).astype(float)
    if seed % 3 == 0:
        a[:, 0] = rng.choice([-1.5, 0.25, 7.0], size=len(a))     # not only integers
    u, inv = np.unique(a, axis=0, return_inverse=True)
    ours_u, ours_inv = unique_rows(a)
    assert np.array_equal(u, ours_u) and np.array_equal(inv.ravel(), ours_inv)


def test_unique_rows_of_nothing():
    u, inv = unique_rows(np.zeros((0, 4)))
    assert u.shape == (0, 4) and inv.shape == (0,)


def _mixed_rows(seed=0, n_templates=12, per=40):
    rng = np.random.default_rng(seed)
    t = np.repeat([f"t{i:02d}" for i in range(n_templates)], per)
    lead = rng.integers(-3, 6, size=len(t))
    tone = rng.integers(-1, 2, size=len(t))
    pol = rng.choice(["R1", "B4", "Random"], size=len(t))
    eff = rng.normal(0, 0.7, n_templates)[np.repeat(np.arange(n_templates), per)]
    y = (rng.random(len(t)) < 1 / (1 + np.exp(-(0.5 * lead - 0.3 * tone + eff)))).astype(float)
    return pd.DataFrame(dict(y=y, net_lead=lead, irrelevant_tone=tone, policy=pol, template_id=t))


#: relative tolerance for optimiser output compared across implementations (DEVELOPERS.md: ~1e-6)
OPTIMISER_RTOL = 1e-6


def same_gradient(model, rng: np.random.Generator, points: int = 5) -> bool:
    """Whether ``model``'s gradient equals statsmodels' bit for bit at ``points`` random parameter vectors."""
    n = model.k_fep + model.k_vcp + model.k_vc
    for _ in range(points):
        mean, sd = rng.normal(size=n), np.exp(-0.5 + 0.1 * rng.normal(size=n))
        ours = model.vb_elbo_grad(mean, sd)
        groups, model._groups = model._groups, None
        try:
            theirs = model.vb_elbo_grad(mean, sd)
        finally:
            model._groups = groups
        if not all(np.array_equal(a, b) for a, b in zip(ours, theirs)):
            return False
    return True


def test_mixed_fit_gradient_and_result_are_statsmodels_to_1e_6():
    from statsmodels.genmod.bayes_mixed_glm import BinomialBayesMixedGLM

    from crossprofile_lib.stats.mixed_vb import model_class
    TemplateInterceptMixedGLM = model_class()
    d = _mixed_rows()
    f = "y ~ net_lead + irrelevant_tone + C(policy, Treatment('R1'))"
    vc = {"template": "0 + C(template_id)"}
    ours = TemplateInterceptMixedGLM.from_formula(f, vc, d)
    assert ours._groups is not None and same_gradient(ours, np.random.default_rng(3), points=10)
    theirs = BinomialBayesMixedGLM.from_formula(f, vc, d)
    a, b = ours.fit_vb(rng=np.random.default_rng(0)), theirs.fit_vb(rng=np.random.default_rng(0))
    # optimiser output: equal to a documented relative 1e-6 (DEVELOPERS.md), not bit for bit -- the two
    # gradients sum in different orders, which agree bit for bit on one BLAS build and may not on another CPU
    for x, y in ((a.params, b.params), (a.fe_sd, b.fe_sd), (a.vcp_mean, b.vcp_mean), (a.vc_sd, b.vc_sd)):
        np.testing.assert_allclose(x, y, rtol=OPTIMISER_RTOL, atol=1e-9)


def test_mixed_fit_falls_back_where_the_random_effects_are_not_one_indicator_per_row():
    from crossprofile_lib.stats.mixed_vb import _indicator_groups, model_class
    TemplateInterceptMixedGLM = model_class()
    d = _mixed_rows()
    m = TemplateInterceptMixedGLM.from_formula("y ~ net_lead", {"template": "0 + C(template_id)",
                                                              "lead": "0 + net_lead"}, d)
    assert m._groups is None          # two columns per row (and a non-0/1 one): statsmodels' own gradient
    assert np.isfinite(m.fit_vb(rng=np.random.default_rng(0)).params).all()
    import scipy.sparse as sp
    assert _indicator_groups(sp.csr_array(np.array([[1.0, 0], [0, 1.0]]))).tolist() == [0, 1]
    assert _indicator_groups(sp.csr_array(np.array([[2.0, 0], [0, 1.0]]))) is None
    assert _indicator_groups(sp.csr_array(np.array([[1.0, 1.0], [0, 1.0]]))) is None


def test_recorded_features_decoded_at_once_are_the_per_row_decode():
    from crossprofile_lib.run.rebuild import _decode_all
    from crossprofile_lib.task.evidence import decode_features
    rows = ["1,0,0,0;-1,-3,0,0;0,0,1,0", "0,2,0,0;1,0,0,-2;0,0,0,0", "5,0,1,1;0,0,0,0;-1,0,0,0"]
    got = _decode_all(rows)
    assert got.dtype == float and np.array_equal(got, np.stack([decode_features(r) for r in rows]))
    assert _decode_all(["1,0;0,0,0"]) is None                    # ragged options: the per-row path
    assert _decode_all(["1,0,0,0;1,0,0,0", "1,0,0,0"]) is None    # option counts differ: its error
    assert _decode_all([]) is None


def test_disabled_cache_computes_no_key():
    from crossprofile_lib.stats.cache import FitCache

    def parts():
        raise AssertionError("a disabled cache hashed its key")
    assert FitCache(None).get("x", parts, lambda: 42) == 42


def test_cache_key_parts_may_be_a_callable(tmp_path):
    from crossprofile_lib.stats.cache import FitCache
    c = FitCache(tmp_path)
    assert c.get("x", lambda: {"a": 1}, lambda: 1) == 1
    assert c.get("x", {"a": 1}, lambda: 2) == 1 and c.hits == 1    # the same key, callable or not


_BLAS_PROBE = """
import sys
from threadpoolctl import threadpool_info, threadpool_limits
from crossprofile_lib.stats.analysis import load_blas_libraries
if sys.argv[1] == "load":
    load_blas_libraries()
with threadpool_limits(limits=1, user_api="blas"):
    import scipy.optimize  # noqa: F401  (what the fits import inside the limit)
    print(sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
"""


@pytest.mark.parametrize("load", ["load", "no"])
def test_every_blas_library_is_limited_during_the_analysis(load):
    """scipy ships its own OpenBLAS and threadpool_limits limits only the libraries already
    loaded: analyse() loads scipy's first (without it, scipy's ran a thread per core, spinning).
    The probe without the load shows the rule matters where scipy has a BLAS of its own."""
    import ast
    import os
    import subprocess
    import sys
    env = dict(os.environ, OPENBLAS_NUM_THREADS="", OMP_NUM_THREADS="")
    env = {k: v for k, v in env.items() if v}
    out = subprocess.run([sys.executable, "-c", _BLAS_PROBE, load], capture_output=True, text=True, check=True,
                         env=env).stdout
    threads = ast.literal_eval(out)
    if load == "load":
        assert threads and set(threads) == {1}
    elif os.cpu_count() > 1 and len(threads) > 1:
        assert max(threads) > 1            # scipy's own BLAS, loaded inside the limit, is not limited
