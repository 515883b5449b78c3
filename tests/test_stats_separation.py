"""The net-lead test's family, duplicate decisions and separated levels (crossprofile_lib.stats.separation),
on hand-made rows and small synthetic data whose answers are known."""

import numpy as np
import pandas as pd
import pytest

from crossprofile_lib.stats.netlead import lr_test, regressions_fit
from crossprofile_lib.stats.separation import drop_duplicates, informative_templates, separated_levels


def _row(template, policy, memory, decision, variant="PSP", seed=0, correct=True):
    return dict(template_id=template, variant=variant, seed=seed, budget_label="0.6", policy=policy,
                memory_sha=memory, decision=decision, correct=correct)


def test_a_duplicate_is_one_decision_call_counted_twice():
    df = pd.DataFrame([
        _row("t1", "R1", "a", "A"),
        _row("t1", "B4", "a", "A"),            # same task, same memory, same answer: a duplicate of R1's row
        _row("t1", "Random", "b", "A"),        # another memory: kept
        _row("t1", "M1", "a", "B"),            # same memory but another answer (a noisy server): kept
        _row("t2", "B4", "a", "A"),            # same memory text in another template: another task, kept
        _row("t1", "B4", "a", "A", variant="PPP"),   # another variant: another task, kept
        _row("t1", "R1-rel-oracle", "a", "A"),  # a duplicate too, of the first copy policy (R1)
        _row("t1", "R1-rel", "a", "A"),        # R1-rel comes before its oracle in family order: dropped as R1's
    ])
    kept, info = drop_duplicates(df)
    assert sorted(kept.index) == [0, 2, 3, 4, 5]
    assert info["dropped"] == 3 and info["by_policy"] == {"B4": 1, "R1-rel": 1, "R1-rel-oracle": 1}
    assert info["kept_as"] == {"B4": {"R1": 1}, "R1-rel": {"R1": 1}, "R1-rel-oracle": {"R1": 1}}
    # the kept row of a duplicate pair is the one earlier in family order, whatever the table order
    kept2, _ = drop_duplicates(df.iloc[::-1])
    assert sorted(kept2.index) == [0, 2, 3, 4, 5]


def test_a_table_without_memory_sha_drops_nothing_and_says_so():
    df = pd.DataFrame([_row("t1", "R1", "a", "A"), _row("t1", "B4", "a", "A")]).drop(columns="memory_sha")
    kept, info = drop_duplicates(df)
    assert len(kept) == 2 and info["dropped"] == 0 and "memory_sha" in info["note"]


def test_separated_levels_and_a_near_miss():
    df = pd.DataFrame(dict(policy=["a"] * 5 + ["b"] * 5 + ["c"] * 3,
                           correct=[True] * 5 + [True] * 4 + [False] + [False] * 3))
    s = separated_levels(df).set_index("policy")
    assert list(s.index) == ["a", "c"]                                   # b (one wrong of five) is not separated
    assert s.loc["a", "separation"] == "all correct" and s.loc["c", "separation"] == "all wrong"
    assert s.loc["a", "n"] == 5 and s.loc["a", "accuracy"] == 100.0


def _synthetic(seed=0, T=20, n=60, extra=None, policy_effect=0.0):
    rng = np.random.default_rng(seed)
    pols = ["R1", "B4", "Random", "M1"] + ([extra] if extra else [])
    tid = np.repeat([f"t{i:02d}" for i in range(T)], n * len(pols) // 4)
    pol = np.tile(np.repeat(pols, n // 4), T)
    k = len(pol)
    lead = rng.integers(-3, 6, k)
    tone = rng.integers(-2, 3, k)
    eta = -0.5 + 0.9 * lead + policy_effect * (pol == "B4")
    return pd.DataFrame(dict(template_id=tid, policy=pol, net_lead=lead, irrelevant_tone=tone,
                             correct=rng.random(k) < 1 / (1 + np.exp(-eta))))


def test_a_separated_level_is_reported_apart_and_never_tested():
    df = _synthetic(extra="R1-rel")
    df.loc[df.policy == "R1-rel", "correct"] = True                     # every R1-rel decision correct
    fits = regressions_fit(df)
    prim, sec = fits["families"]["primary"], fits["families"]["secondary"]
    assert prim["family"] == "copy policies (R1, B4, Random, M1)" and prim["policies"] == ["R1", "B4", "Random", "M1"]
    assert "policy[R1-rel]" not in set(fits["fixed"]["terms"]["term"])
    assert list(sec["separated"]["policy"]) == ["R1-rel"] and "R1-rel" not in sec["policies"]
    assert "reported apart, not tested" in sec["note"]
    assert "policy[R1-rel]" not in set(fits["secondary"]["fixed"]["terms"]["term"])
    v = fits["verdict"]
    assert set(v["family"]) == {"copy policies (R1, B4, Random, M1)", "every budgeted policy in the rows"}
    assert (v.loc[v.role == "secondary", "note"].str.contains("R1-rel separated")).all()
    # no test in the verdict table rests on a coefficient of the separated level
    for key in ("fixed", "lr"):
        assert fits["secondary"][key]["policy_significant"] is False


def test_a_near_miss_is_tested_normally():
    df = _synthetic(extra="R1-rel")
    df.loc[df.policy == "R1-rel", "correct"] = True
    df.loc[df.index[df.policy == "R1-rel"][0], "correct"] = False       # one wrong decision: no separation
    fits = regressions_fit(df)
    sec = fits["families"]["secondary"]
    assert sec["separated"].empty and "R1-rel" in sec["policies"]
    assert "policy[R1-rel]" in set(fits["secondary"]["fixed"]["terms"]["term"])
    assert fits["secondary"]["lr"]["policy_significant"] is True        # R1-rel really is better
    assert fits["policy_significant"] is False                          # the copy family is not


def test_lr_test_finds_a_policy_effect_and_none_where_there_is_none():
    assert lr_test(_synthetic(seed=1, policy_effect=-1.5))["policy_significant"] is True
    r = lr_test(_synthetic(seed=2))
    assert r["policy_significant"] is False and r["lr"]["df"] == 3 and 0.05 < r["lr"]["p"] <= 1


def test_templates_without_variation_leave_the_fixed_effects_fits():
    df = _synthetic(seed=3)
    df.loc[df.template_id == "t00", "correct"] = True
    rows, flat = informative_templates(df)
    assert flat == 1 and "t00" not in set(rows.template_id)
    fits = regressions_fit(df)
    assert fits["fixed"]["flat_templates"] == 1 and fits["fixed"]["n_templates"] == 19
    assert fits["mixed"]["n_templates"] == 20          # the random-intercept fit keeps it (shrunk, finite)


def test_fixed_effects_refuse_when_separation_leaves_too_few_templates():
    df = _synthetic(seed=4, T=11)
    for t in ("t00", "t01"):
        df.loc[df.template_id == t, "correct"] = True
    assert "not fitted" in regressions_fit(df)["fixed"]["method"]
    with pytest.raises(KeyError):
        regressions_fit(df)["secondary"]
