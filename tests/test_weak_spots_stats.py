"""Issue 25, weak spots in the statistics: fixtures on which the right rule and its near misses differ.

* **The template bootstrap** (SPEC section 8: the template is the resampling unit): asymmetric
  fixtures (templates of unequal size and outcome) where moving one row to another template, or
  resampling decisions instead of templates, changes the resampled means; a property test that every
  resample is a pool of whole templates, each counted as often as it was drawn.
* **The headroom rule** (ALL - EMPTY must *exceed* 15 points at the *lower* bound): a run whose point
  estimate passes while its lower bound fails, one whose point fails while its bound passes, and a bound
  of exactly 15 (fails), for the template check and for HiddenBench's task check.
* **The book's Holm-adjusted intervals** (:func:`crossprofile_lib.book.tables.contrasts_with_holm`): each
  contrast's interval at the level Holm's step-down tests it at, checked against a direct computation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossprofile_lib.book.runs import Run
from crossprofile_lib.book.tables import contrast_table, contrasts_with_holm
from crossprofile_lib.stats.bootstrap import TemplateBootstrap, count_matrix
from crossprofile_lib.stats.contrasts import evaluate_contrasts, parse_prereg
from crossprofile_lib.stats.headroom import Headroom, headroom, task_headroom
from crossprofile_lib.stats.tables import group_draws

# --- the template bootstrap -------------------------------------------------------------------------

#: templates of unequal size and outcome: a = 1, 1, 1, 0 (4 rows), b = 0, 0 (2 rows), c = 1 (1 row)
ROWS = pd.DataFrame(dict(template_id=list("aaaabbc"), policy="R1",
                         correct=[True, True, True, False, False, False, True]))
IDX = np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2], [0, 1, 2], [0, 0, 1], [2, 2, 1]])


def _draws(df, idx=IDX, units=("a", "b", "c")):
    boot = TemplateBootstrap(units, idx)
    keys, point, draws = group_draws(df, ["policy"], ["correct"], boot)
    return point[0], draws[:, 0]


def test_resampled_means_pool_whole_templates_hand_counted():
    point, draws = _draws(ROWS)
    assert point == pytest.approx(100 * 4 / 7)
    # (a,a,a) 3/4; (b,b,b) 0; (c,c,c) 1; (a,b,c) 4/7; (a,a,b) 6/10; (c,c,b) 2/4
    assert draws.tolist() == pytest.approx([75.0, 0.0, 100.0, 100 * 4 / 7, 60.0, 50.0])


def test_moving_one_row_to_another_template_changes_the_resamples():
    """The last row of a (a wrong decision) moved to c: the pooled point estimate is the same 4/7,
    every template-level resample is not."""
    moved = ROWS.assign(template_id=list("aaacbbc"))
    p0, d0 = _draws(ROWS)
    p1, d1 = _draws(moved)
    assert p1 == pytest.approx(p0)
    # (a,a,a) 1; (b,b,b) 0; (c,c,c) 1/2; (a,b,c) 4/7; (a,a,b) 6/8; (c,c,b) 2/6
    assert d1.tolist() == pytest.approx([100.0, 0.0, 50.0, 100 * 4 / 7, 75.0, 100 / 3])
    assert not np.allclose(d0, d1)


def test_a_template_drawn_twice_counts_twice():
    assert count_matrix(np.array([[0, 0, 2]]), 3).tolist() == [[2.0, 0.0, 1.0]]
    point, draws = _draws(ROWS, np.array([[0, 0, 1]]))
    assert draws[0] == pytest.approx(60.0)          # 6 of 10 rows, not 3 of 6 (a counted once)


def test_template_intervals_are_wider_than_decision_intervals_on_clustered_data():
    """20 templates, each all right or all wrong (10 rows each): resampling templates gives a 95% interval
    about sqrt(10) times wider than resampling the 200 decisions would. The bootstrap's interval must be the
    template one."""
    rng = np.random.default_rng(5)
    units = [f"t{i:02d}" for i in range(20)]
    df = pd.DataFrame(dict(template_id=np.repeat(units, 10), policy="R1",
                           correct=np.repeat(np.arange(20) % 2 == 0, 10)))
    boot = TemplateBootstrap.draw(units, 4000, rng)
    keys, point, draws = group_draws(df, ["policy"], ["correct"], boot)
    lo, hi = np.quantile(draws[:, 0], [0.025, 0.975])
    # the template bootstrap of 20 Bernoulli(1/2) template means: sd = 50 / sqrt(20) = 11.2 points
    assert 35.0 <= hi - lo <= 52.0
    rows = rng.integers(0, 200, size=(4000, 200))     # the near miss: decisions resampled
    dec = 100 * df["correct"].to_numpy()[rows].mean(axis=1)
    dlo, dhi = np.quantile(dec, [0.025, 0.975])
    assert dhi - dlo < 16.0 and (hi - lo) > 2.5 * (dhi - dlo)


def test_draw_sorts_the_units_so_the_same_seed_gives_the_same_interval_in_any_process():
    b = TemplateBootstrap.draw(["t2", "t0", "t1", "t0"], 5, np.random.default_rng(1))
    assert b.units == ("t0", "t1", "t2") and b.idx.shape == (5, 3)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_property_every_resample_is_a_pool_of_whole_templates(data):
    """Any templates (1-4 rows each, any outcomes), any resample index matrix: each resampled mean equals
    the mean of the rows of the drawn templates, a template's rows repeated as often as it was drawn;
    with a constant outcome per template it is a mean of template means with integer multiplicities
    summing to T (weights: multiplicity x rows)."""
    T = data.draw(st.integers(2, 5), label="T")
    units = [f"u{i}" for i in range(T)]
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=T, max_size=T), label="sizes")
    constant = data.draw(st.booleans(), label="constant")
    if constant:
        level = data.draw(st.lists(st.booleans(), min_size=T, max_size=T), label="levels")
        ys = [[level[t]] * sizes[t] for t in range(T)]
    else:
        ys = [data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label=f"y{t}") for t, n in enumerate(sizes)]
    B = data.draw(st.integers(1, 6), label="B")
    idx = np.array(data.draw(st.lists(st.lists(st.integers(0, T - 1), min_size=T, max_size=T),
                                      min_size=B, max_size=B), label="idx"))
    df = pd.DataFrame(dict(template_id=[units[t] for t in range(T) for _ in ys[t]], policy="P",
                           correct=[v for t in range(T) for v in ys[t]]))
    df = df.sample(frac=1.0, random_state=0).reset_index(drop=True)    # row order must not matter
    _, draws = _draws(df, idx, tuple(units))
    for b in range(B):
        pooled = [v for t in idx[b] for v in ys[t]]
        assert draws[b] == pytest.approx(100 * np.mean(pooled))
        if constant:
            m = np.bincount(idx[b], minlength=T)
            assert m.sum() == T
            w = m * np.array(sizes)
            assert draws[b] == pytest.approx(100 * (w @ np.array(level, dtype=float)) / w.sum())


# --- the headroom rule ---------------------------------------------------------------------------

def _hr_rows(spec):
    """``spec``: template -> (ALL right of n, EMPTY right of n, n)."""
    rows = []
    for t, (a, e, n) in spec.items():
        rows += [dict(template_id=t, policy="ALL", correct=i < a) for i in range(n)]
        rows += [dict(template_id=t, policy="EMPTY", correct=i < e) for i in range(n)]
    return pd.DataFrame(rows)


def test_headroom_point_estimate_passes_but_the_lower_bound_fails():
    # a: ALL 90 / EMPTY 50 (+40); b: 50 / 50 (0): point (70 - 50) = +20 > 15
    df = _hr_rows({"a": (18, 10, 20), "b": (10, 10, 20)})
    boot = TemplateBootstrap(("a", "b"), np.array([[0, 1], [1, 1], [0, 0], [1, 0]]))   # 20, 0, 40, 20
    h = headroom(df, boot, min_points=15)
    assert h.estimate == pytest.approx(20.0)
    assert h.lo == pytest.approx(np.quantile([20.0, 0.0, 40.0, 20.0], 0.025)) == pytest.approx(1.5)
    assert not h.passed and h.status == "exploratory" and h["status"] == "exploratory"
    assert h.reason == "ALL - EMPTY lower bound 1.5 <= 15 points"


def test_headroom_point_estimate_fails_but_the_lower_bound_passes():
    """The rule reads the lower bound only (hand-made resamples that never draw b)."""
    df = _hr_rows({"a": (14, 10, 20), "b": (10, 10, 20)})    # a: +20; b: 0; point +10
    boot = TemplateBootstrap(("a", "b"), np.array([[0, 0], [0, 0], [0, 0]]))
    h = headroom(df, boot, min_points=15)
    assert h.estimate == pytest.approx(10.0) and h.lo == pytest.approx(20.0)
    assert h.passed and h.status == "confirmatory" and h.reason == ""


def test_headroom_exactly_15_at_the_lower_bound_fails_and_just_above_passes():
    df = _hr_rows({"a": (10, 7, 20), "b": (10, 7, 20)})      # +15 in every template
    boot = TemplateBootstrap(("a", "b"), np.array([[0, 1], [1, 1], [0, 0]]))
    h = headroom(df, boot, min_points=15)
    assert h.lo == 15.0 and not h.passed and h.status == "exploratory"
    assert "15.0 <= 15" in h.reason
    up = headroom(_hr_rows({"a": (32, 22, 60), "b": (32, 22, 60)}), boot, min_points=15)   # +16.7
    assert up.passed
    assert not headroom(_hr_rows({"a": (32, 22, 60), "b": (32, 22, 60)}), boot, min_points=17).passed
    assert Headroom.of(20.0, 15.0, 25.0, 15.0, 2).status == "exploratory"
    assert Headroom.of(10.0, 15.5, 25.0, 15.0, 2).status == "confirmatory"   # the point is not the rule


def _task_rows(spec, seeds=20):
    rows = []
    for t, (a, e) in spec.items():
        for s in range(seeds):
            rows.append(dict(task_id=t, policy="ALL", correct=s < a, decided=True))
            rows.append(dict(task_id=t, policy="EMPTY", correct=s < e, decided=True))
    return pd.DataFrame(rows)


def test_hiddenbench_headroom_exactly_15_fails_and_the_rule_reads_the_lower_bound():
    """Tasks resampled; per task the accuracy over 20 seeds. Every task at exactly +15 points (10 vs 7 of
    20): the bound is 15, which does not exceed 15 (in floating point 0.5 - 0.35 is 0.15000000000000002:
    the rule must not pass on that)."""
    h = task_headroom(_task_rows({f"t{i}": (10, 7) for i in range(6)}), np.random.default_rng(0), 200)
    assert h.lo == pytest.approx(15.0) and not h.passed and h.status == "exploratory"
    # half the tasks +40, half 0: point +20 passes, the lower bound (many resamples) does not
    mixed = {**{f"a{i}": (18, 10) for i in range(3)}, **{f"b{i}": (10, 10) for i in range(3)}}
    m = task_headroom(_task_rows(mixed), np.random.default_rng(0), 2000)
    assert m.estimate == pytest.approx(20.0) and m.lo < 15 and not m.passed
    ok = task_headroom(_task_rows({f"t{i}": (13, 9) for i in range(6)}), np.random.default_rng(0), 200)
    assert ok.lo == pytest.approx(20.0) and ok.passed and ok.n_units == 6


# --- the book's Holm-adjusted intervals -------------------------------------------------------------

def _holm_fixture():
    """12 templates x 3 policies, 5 rows each; outcome y in points. P1 is positive in every template
    (p at its floor), P2 in most, P3 centred near 0: three distinct p-values."""
    rng = np.random.default_rng(11)
    units = [f"t{i:02d}" for i in range(12)]
    rows = []
    means = {"P1": 5.0 + rng.uniform(0, 4, 12), "P2": 1.5 + rng.normal(0, 2.5, 12), "P3": rng.normal(0.3, 3, 12)}
    for p, mu in means.items():
        for t, m in zip(units, mu):
            for y in m + rng.normal(0, 1, 5):
                rows.append(dict(template_id=t, policy=p, y=float(y)))
    doc = {"families": {"confirmatory": {"correction": "holm", "alpha": 0.05}},
           "contrasts": [{"id": p, "title": p, "family": "confirmatory", "outcome": "y", "scale": 1,
                          "terms": [{"weight": 1, "where": {"policy": p}}]} for p in ("P3", "P1", "P2")]}
    boot = TemplateBootstrap.draw(units, 400, np.random.default_rng(3))
    return pd.DataFrame(rows), parse_prereg(doc), boot


def test_holm_adjusted_intervals_use_the_level_of_each_step():
    df, pre, boot = _holm_fixture()
    run = Run(Path("."), df, {"backend": "test"})
    res = contrasts_with_holm(run, boot, prereg=pre).set_index("id")
    p = res["p"]
    assert p["P1"] < p["P2"] < p["P3"]                              # three steps in a known order
    # Holm: the smallest p is tested at alpha / 3, the next at alpha / 2, the largest at alpha
    assert res.loc["P1", "holm_level"] == pytest.approx(1 - 0.05 / 3)
    assert res.loc["P2", "holm_level"] == pytest.approx(1 - 0.05 / 2)
    assert res.loc["P3", "holm_level"] == pytest.approx(0.95)
    # the interval at that level, from the same resamples, computed directly from the draws
    W = count_matrix(boot.idx, len(boot.units))
    code = {u: i for i, u in enumerate(boot.units)}
    for pol in ("P1", "P2", "P3"):
        d = df[df.policy == pol]
        S = np.bincount(d.template_id.map(code), weights=d.y, minlength=12)
        N = np.bincount(d.template_id.map(code), minlength=12)
        draws = (W @ S) / (W @ N)
        a = (1 - res.loc[pol, "holm_level"]) / 2
        assert res.loc[pol, "lo_holm"] == pytest.approx(np.quantile(draws, a))
        assert res.loc[pol, "hi_holm"] == pytest.approx(np.quantile(draws, 1 - a))
        assert res.loc[pol, "lo"] == pytest.approx(np.quantile(draws, 0.025))
        assert res.loc[pol, "lo_holm"] < res.loc[pol, "lo"] or pol == "P3"   # wider except at the last step
    assert res.loc["P3", "lo_holm"] == pytest.approx(res.loc["P3", "lo"])
    # Holm's adjusted p: sorted p times (3, 2, 1), running maximum, capped at 1
    p1, p2, p3 = p["P1"], p["P2"], p["P3"]
    adj = np.minimum(1, np.maximum.accumulate([3 * p1, 2 * p2, p3]))
    assert res.loc[["P1", "P2", "P3"], "p_adjusted"].tolist() == pytest.approx(adj.tolist())
    shown = contrast_table(res.reset_index())
    assert shown.loc["P1", "Holm-adjusted interval"].endswith("(98.3%)")
    assert shown.loc["P2", "Holm-adjusted interval"].endswith("(97.5%)")
    assert shown.loc["P3", "Holm-adjusted interval"].endswith("(95.0%)")


def test_holm_intervals_agree_with_evaluate_contrasts_at_the_holm_level():
    df, pre, boot = _holm_fixture()
    res = contrasts_with_holm(Run(Path("."), df, {}), boot, prereg=pre).set_index("id")
    for pol in ("P1", "P2"):
        lvl = res.loc[pol, "holm_level"]
        direct = evaluate_contrasts(df, pre, TemplateBootstrap(boot.units, boot.idx, lvl)).set_index("id")
        assert (res.loc[pol, "lo_holm"], res.loc[pol, "hi_holm"]) == pytest.approx(
            (direct.loc[pol, "lo"], direct.loc[pol, "hi"]))
