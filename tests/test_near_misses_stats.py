"""Issue 34 item 2, statistics: hand-checked cases whose numbers differ under each near miss of the rule.

* **Preregistered contrast parameters** (``prereg.yaml``): ``test_value``, ``scale`` (the contrast's and
  ``defaults.scale``), ``defaults.outcome``, a term's ``weight``, a family's ``alpha`` and ``correction``:
  each parameter changes the estimate, the p-value or the verdict by a number worked out by hand, so a
  parameter that is parsed but dropped (or read from the wrong place) fails here.
* **The near-chance rule without ALL/EMPTY rows** (:func:`crossprofile_lib.book.style.model_signal`): the
  95% *Wilson* lower bound must *exceed* chance (1/3); cases where the point estimate, a Wald bound, a
  90% bound or ``>=`` would say otherwise.
* **Error rows in the relevance-filter fallback rate** (:func:`crossprofile_lib.stats.relevance_fallback`):
  failed calls are not answers (left out of calls and invalid); the rate is per task unit; ``high`` is
  strictly above 10%.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossprofile_lib.book.style import model_signal
from crossprofile_lib.stats.analysis_set import WARN_RATE, relevance_fallback
from crossprofile_lib.stats.bootstrap import TemplateBootstrap, bootstrap_pvalue
from crossprofile_lib.stats.contrasts import evaluate_contrasts, parse_prereg

# --- prereg contrast parameters ---------------------------------------------------------------------

#: template a: R1 correct 1,1; B4 0,0 -- template b: R1 1,0; B4 0,0 (the contrast R1 - B4 is 100 on a, 50 on b)
FRAME = pd.DataFrame(dict(template_id=list("aaaabbbb"), policy=["R1", "R1", "B4", "B4"] * 2, budget_label="0.6",
                          correct=[True, True, False, False, True, False, False, False],
                          chose_decoy=[False, False, True, True, False, True, True, True]))
#: 8 resamples: (a,a) once -> 100, (b,b) once -> 50, (a,b) six times -> 75
IDX = np.array([[0, 0], [1, 1]] + [[0, 1]] * 6)
BOOT = TemplateBootstrap(("a", "b"), IDX)
TERMS = [{"weight": 1, "where": {"policy": "R1"}}, {"weight": -1, "where": {"policy": "B4"}}]


def _one(**contrast):
    doc = {"contrasts": [dict(id="X", terms=TERMS, **contrast)]}
    return evaluate_contrasts(FRAME, parse_prereg(doc), BOOT).iloc[0]


def test_the_hand_made_draws_are_what_the_cases_assume():
    r = _one()
    assert r.estimate == pytest.approx(75.0)
    # below 0: none, above: 8 -> 2 * (0 + 1) / 9
    assert r.p == pytest.approx(2 / 9)


@pytest.mark.parametrize("test_value,p", [
    (0, 2 / 9),      # the default
    (60, 4 / 9),     # below 60: one draw (50), above: seven -> 2 * (1 + 1) / 9
    (-60, 2 / 9),    # a sign slip would read 60 as -60
    (75, 1.0),       # six draws equal the value: 2 * (7 + 1) / 9 capped at 1
    (101, 2 / 9),    # above every draw
])
def test_test_value_moves_the_p_value(test_value, p):
    r = _one(test_value=test_value)
    assert r.p == pytest.approx(p)
    assert r.estimate == pytest.approx(75.0)   # the tested value never moves the estimate


def test_test_value_that_equals_the_default_null_is_not_special():
    assert _one(test_value=60).p != _one().p


@pytest.mark.parametrize("contrast,defaults,estimate", [
    ({}, {}, 75.0),                                  # defaults.scale 100
    ({"scale": 1}, {}, 0.75),                        # the contrast's scale
    ({}, {"scale": 10}, 7.5),                        # defaults.scale inherited
    ({"scale": 1}, {"scale": 10}, 0.75),             # the contrast's scale wins over the default
    ({"outcome": "chose_decoy"}, {}, -75.0),          # R1 1/4 - B4 4/4, scaled
    ({}, {"outcome": "chose_decoy"}, -75.0),          # defaults.outcome inherited
    ({"outcome": "correct"}, {"outcome": "chose_decoy"}, 75.0),   # the contrast's outcome wins
])
def test_scale_and_outcome_come_from_the_contrast_then_the_defaults(contrast, defaults, estimate):
    doc = {"defaults": defaults, "contrasts": [dict(id="X", terms=TERMS, **contrast)]}
    r = evaluate_contrasts(FRAME, parse_prereg(doc), BOOT).iloc[0]
    assert r.estimate == pytest.approx(estimate)


def test_a_terms_weight_multiplies_its_mean():
    terms = [{"weight": 2, "where": {"policy": "R1"}}, {"weight": -0.5, "where": {"policy": "B4"}}]
    doc = {"contrasts": [dict(id="X", scale=1, terms=terms)]}
    r = evaluate_contrasts(FRAME.assign(correct=FRAME.correct | (FRAME.policy == "B4")), parse_prereg(doc), BOOT)
    assert r.iloc[0].estimate == pytest.approx(2 * 0.75 - 0.5 * 1.0)


def _family(correction, alpha, n=2):
    cs = [dict(id=f"X{k}", family="f", test_value=[0, 60][k], terms=TERMS) for k in range(n)]
    doc = {"families": {"f": {"correction": correction, "alpha": alpha}}, "contrasts": cs}
    return evaluate_contrasts(FRAME, parse_prereg(doc), BOOT).set_index("id")


def test_holm_adjusts_and_none_does_not():
    holm = _family("holm", 0.05)
    # p = 2/9 and 4/9; Holm: sorted p times (m - i), then running max: 4/9, 4/9
    assert holm.loc["X0", "p_adjusted"] == pytest.approx(4 / 9)
    assert holm.loc["X1", "p_adjusted"] == pytest.approx(4 / 9)
    none = _family("none", 0.05)
    assert none.loc["X0", "p_adjusted"] == pytest.approx(2 / 9)
    assert none.loc["X1", "p_adjusted"] == pytest.approx(4 / 9)
    assert set(holm.correction) == {"holm"} and set(none.correction) == {"none"}


@pytest.mark.parametrize("correction,alpha,rejects", [
    ("none", 0.25, {"X0"}),          # 2/9 = 0.222 < 0.25, 4/9 is not
    ("none", 0.05, set()),           # the default level would reject nothing
    ("none", 0.5, {"X0", "X1"}),
    ("holm", 0.25, set()),           # Holm: the smallest p needs 2/9 < 0.25 / 2: no, so nothing
    ("holm", 0.5, {"X0", "X1"}),     # 2/9 < 0.25 and 4/9 < 0.5
])
def test_a_familys_alpha_and_correction_decide_the_verdict(correction, alpha, rejects):
    out = _family(correction, alpha)
    assert set(out.index[out.reject]) == rejects
    assert (out.alpha == alpha).all()


def test_a_contrast_outside_every_family_is_not_adjusted():
    doc = {"families": {"f": {"correction": "holm"}},
           "contrasts": [dict(id="A", family="f", terms=TERMS), dict(id="B", family="f", test_value=60, terms=TERMS),
                         dict(id="C", terms=TERMS)]}
    out = evaluate_contrasts(FRAME, parse_prereg(doc), BOOT).set_index("id")
    assert math.isnan(out.loc["C", "p_adjusted"]) and not out.loc["C", "reject"]
    assert out.loc["C", "p"] == pytest.approx(2 / 9)
    assert out.loc["A", "p_adjusted"] == pytest.approx(4 / 9)   # adjusted with B only, not with C


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=30), st.floats(-150, 150))
def test_bootstrap_pvalue_is_two_sided_symmetric_and_counts_ties_on_both_sides(draws, null):
    d = np.asarray(draws)
    p = float(bootstrap_pvalue(d, null))
    below, above = int((d <= null).sum()), int((d >= null).sum())
    assert p == pytest.approx(min(1.0, 2 * (min(below, above) + 1) / (len(d) + 1)))
    assert float(bootstrap_pvalue(-d, -null)) == pytest.approx(p)   # mirror image, same p


# --- the near-chance rule without ALL and EMPTY rows ------------------------------------------------

class _Run:
    def __init__(self, k, n, policies=("R1",)):
        pol = [policies[i % len(policies)] for i in range(n)]
        self.df = pd.DataFrame({"policy": pol, "template_id": [f"t{i % 5}" for i in range(n)],
                                "correct": [i < k for i in range(n)]})
        self.is_reference, self.label, self.boot = False, "m", None


@pytest.mark.parametrize("k,n,ok", [
    (10, 18, True),    # Wilson 95% lower bound 0.3372 > 1/3 (a Wald bound, 0.3260, would say near chance)
    (9, 18, False),    # accuracy 50% > 1/3, but the Wilson bound is 0.2903: near chance
    (15, 30, False),   # Wilson 0.3315 (a 90% bound, 0.3562, would pass)
    (16, 30, True),    # Wilson 0.3614
    (30, 30, True),
    (0, 30, False),
])
def test_without_all_and_empty_the_wilson_bound_must_exceed_chance(k, n, ok):
    s = model_signal(_Run(k, n))
    assert s.ok is ok
    if not ok:
        assert f"{k} of {n} decisions" in s.reason and "not above chance (33%" in s.reason


def test_all_and_empty_rows_without_a_bootstrap_use_the_accuracy_rule():
    # ALL and EMPTY rows present but no bootstrap: the accuracy rule decides (10 of 18 passes it)
    assert model_signal(_Run(10, 18, policies=("ALL", "EMPTY"))).ok
    assert not model_signal(_Run(9, 18, policies=("ALL", "EMPTY"))).ok


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200), st.data())
def test_the_near_chance_verdict_is_monotone_in_the_number_correct(n, data):
    k = data.draw(st.integers(0, n - 1))
    if model_signal(_Run(k, n)).ok:
        assert model_signal(_Run(k + 1, n)).ok
    if k / n <= 1 / 3:  # a point estimate at or below chance is never signal
        assert not model_signal(_Run(k, n)).ok


# --- error rows in the relevance-filter fallback rate -----------------------------------------------

def _units(rows):
    """Rows ``(template, seed, invalid, error)``: one filter call per (template, variant, seed) unit."""
    return pd.DataFrame([dict(template_id=t, variant="PSP", seed=s, relevance_filter="model", relevance_invalid=inv,
                              error=err, backend="b", policy=p) for t, s, inv, err in rows for p in ("R1-rel", "BAL")])


def test_failed_calls_are_not_answers():
    rows = [("a", 0, False, ""), ("a", 1, True, ""), ("b", 0, True, "HTTP 500 after 6 tries"),
            ("b", 1, True, "timeout"), ("c", 0, False, "")]
    fb = relevance_fallback(_units(rows))["b"]
    # the two failed units are left out: 1 invalid of 3 answers (counting them would give 3 of 5)
    assert fb == {"calls": 3, "invalid": 1, "rate": pytest.approx(1 / 3), "high": True}


def test_whitespace_and_missing_errors_are_no_errors():
    df = _units([("a", 0, True, " "), ("b", 0, False, None), ("c", 0, False, "")])
    assert relevance_fallback(df)["b"]["calls"] == 3


def test_rows_of_one_unit_count_once_and_an_invalid_row_marks_the_unit():
    df = _units([("a", 0, False, "")] * 3 + [("b", 0, True, "")])
    df.loc[1, "relevance_invalid"] = True   # one row of unit a says invalid
    assert relevance_fallback(df)["b"] == {"calls": 2, "invalid": 2, "rate": 1.0, "high": True}


def test_only_rows_whose_filter_was_a_models_count():
    df = _units([("a", 0, True, ""), ("b", 0, False, "")])
    df.loc[df.template_id == "a", "relevance_filter"] = "oracle"
    assert relevance_fallback(df)["b"] == {"calls": 1, "invalid": 0, "rate": 0.0, "high": False}


@pytest.mark.parametrize("invalid,high", [(1, False), (2, True)])
def test_high_is_strictly_above_ten_percent(invalid, high):
    rows = [(f"t{i}", 0, i < invalid, "") for i in range(10)]
    fb = relevance_fallback(_units(rows))["b"]
    assert fb["rate"] == pytest.approx(invalid / 10) and fb["high"] is high
    assert WARN_RATE == 0.10


def test_n_rows_is_the_smallest_terms_row_count():
    terms = [{"weight": 1, "where": {"policy": "R1"}}, {"weight": -1, "where": {"policy": "B4", "template_id": "a"}}]
    r = evaluate_contrasts(FRAME, parse_prereg({"contrasts": [dict(id="X", terms=terms)]}), BOOT).iloc[0]
    assert r.n_rows == 2          # R1 has 4 rows, B4 on template a 2: the contrast rests on the smaller cell
    assert r.estimate == pytest.approx(75.0)


@pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5])
def test_a_family_alpha_outside_the_open_interval_is_refused(alpha):
    from crossprofile_lib.stats.contrasts import PreregError
    doc = {"families": {"f": {"alpha": alpha}}, "contrasts": [dict(id="X", family="f", terms=TERMS)]}
    with pytest.raises(PreregError, match=r"families\.f\.alpha.*range"):
        parse_prereg(doc)


@pytest.mark.parametrize("n,status", [(9, "exploratory"), (10, "confirmatory"), (11, "confirmatory")])
def test_ten_templates_are_enough_for_a_confirmatory_status(n, status):
    from crossprofile_lib.stats.analysis_set import MIN_TEMPLATES_CONFIRMATORY, run_status
    assert MIN_TEMPLATES_CONFIRMATORY == 10
    got, reasons = run_status({"passed": True}, {"name": "formal"}, n)
    assert got == status and (reasons == []) == (status == "confirmatory")
