"""Issue 25, weak spots in the policies and budgets: fixtures on which the right rule and its near
misses give different answers.

* R1-rel's order *inside* its tiers (SPEC section 6: the relevant tier, then the rest, R1 order inside
  each): a claim list where R1 order and first-mention order inside a tier keep different sets, and
  where dropping the tiers, or putting the other tier first, keeps yet another set;
* the relevance filter's precision and recall (against the roles) on a filter that is not the oracle,
  hand-counted, through the runner and the relevance table (one value per task, the mean over tasks);
* the budget ``B(r) = floor(r * T_all)`` where floor and round (and ceil) differ, the exact decimal
  product (``0.7 * 90`` is 63 tokens, not the 62 that binary floating point gives), and the 128-token
  control, which ignores ``T_all``.

Tokenizer of the hand-made claim list: one token per word, one per newline, so ``[A2] p1 p1`` costs 4::

    idx  text          speakers         count  first  line cost
    0    s1 s1 s1      A1,A2,A3,A4      4      0      5
    1    p1 p1         A2               1      1      4
    2    p2 p2 p2 p2   A1               1      4      6
    3    q q           A1,A3            2      5      4
    4    p3            A3               1      8      3
    5    p4 p4 p4      A4               1      10     5
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted_llm import Scripted

from crossprofile_lib.config import Budget
from crossprofile_lib.policies import PolicyContext, order_r1_rel, relevance_metrics, select_memory
from crossprofile_lib.run.runner import RunConfig, run_grid
from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.tables import relevance_table
from crossprofile_lib.task.budgets import budget_tokens, t_all
from crossprofile_lib.task.discussion import Claim, ClaimList
from crossprofile_lib.task.tokenizer import default_tokenizer


class WordTok:
    name = "words"

    def count(self, text):
        return 1 if text == "\n" else len(text.split())


TOK = WordTok()
CL = ClaimList(
    claims=(Claim("s1 s1 s1", ("A1", "A2", "A3", "A4"), 0), Claim("p1 p1", ("A2",), 1),
            Claim("p2 p2 p2 p2", ("A1",), 4), Claim("q q", ("A1", "A3"), 5),
            Claim("p3", ("A3",), 8), Claim("p4 p4 p4", ("A4",), 10)),
    speaker_order=("A2", "A1", "A3", "A4"),
    agents=("A1", "A2", "A3", "A4"),
    by_speaker=(("A2", (0, 1)), ("A1", (2, 0, 3)), ("A3", (3, 0, 4)), ("A4", (0, 5))),
)


def kept_first_mentions(policy, budget, relevant):
    m = select_memory(policy, CL, budget, TOK, np.random.default_rng(0), relevant=relevant)
    return [c.first_mention for c in m.kept]


# --- R1-rel: R1 order inside each tier -------------------------------------------------------------

def test_r1_rel_order_is_r1_inside_the_relevant_tier_then_r1_inside_the_rest():
    ctx = PolicyContext(np.random.default_rng(0), frozenset({0, 3, 5}))
    # relevant tier {0, 3, 5} in R1 order: 5 (1 speaker), 3 (2), 0 (4); the rest {1, 2, 4}: all 1 speaker,
    # so by first mention. First-mention order inside the tier would be 0, 3, 5.
    assert order_r1_rel(CL, ctx) == [5, 3, 0, 1, 2, 4]
    ctx = PolicyContext(np.random.default_rng(0), frozenset({1, 2, 4}))
    assert order_r1_rel(CL, ctx) == [1, 2, 4, 5, 3, 0]


def test_r1_rel_keeps_a_different_set_than_first_mention_order_inside_the_relevant_tier():
    """Budget 9, relevant {0, 3, 5}. Hand-packed:

    * R1 inside the tier (right): 5 (5) -> 5, 3 (4) -> 9, then nothing else fits: keeps {3, 5};
    * first-mention order inside the tier: 0 (5), 3 (4) -> 9: {0, 3};
    * no tiers (plain R1: 1, 2, 4, 5, 3, 0): 1 (4), 2 would make 10, 4 (3) -> 7, nothing else: {1, 4};
    * the other tier first (1, 2, 4, then 5, 3, 0): also {1, 4}.
    """
    assert kept_first_mentions("R1-rel", 9, frozenset({0, 3, 5})) == [5, 10]         # claims 3, 5
    assert kept_first_mentions("R1-rel-oracle", 9, frozenset({0, 3, 5})) == [5, 10]  # the same rule
    assert kept_first_mentions("B4", 9, None) == [0, 1]                             # B4 keeps 0, 1 (not 0, 3)
    assert kept_first_mentions("R1", 9, None) == [1, 8]


def test_r1_rel_keeps_a_different_set_than_first_mention_order_inside_the_rest_tier():
    """Budget 22, relevant {1, 2, 4} (4 + 6 + 3 = 13 tokens, all kept). The rest {0, 3, 5}: R1 order
    5 (5) -> 18, 3 (4) -> 22, 0 no longer fits: keeps {1, 2, 3, 4, 5}. First-mention order in the rest:
    0 (5) -> 18, 3 (4) -> 22: {0, 1, 2, 3, 4}."""
    assert kept_first_mentions("R1-rel", 22, frozenset({1, 2, 4})) == [1, 4, 5, 8, 10]


def test_r1_rel_tiers_break_speaker_count_ties_by_first_mention():
    """Relevant {1, 2, 4, 5}: all one speaker, so the tier is in first-mention order 1, 2, 4, 5; at budget
    10: 1 (4) + 2 (6) = 10, keeps {1, 2}; the later-mention tie break (5, 4, ...) would keep {4, 5}."""
    assert kept_first_mentions("R1-rel", 10, frozenset({1, 2, 4, 5})) == [1, 4]


# --- relevance filter: precision and recall against the roles ---------------------------------------

def test_relevance_metrics_hand_counted():
    # judged {0, 1, 2, 5}; truly relevant {0, 1, 3, 4, 5}: 3 hits of 4 judged, of 5 relevant
    assert relevance_metrics(frozenset({0, 1, 2, 5}), frozenset({0, 1, 3, 4, 5})) == (0.75, 0.6)
    assert relevance_metrics(frozenset({7}), frozenset({0, 1})) == (0.0, 0.0)
    p, r = relevance_metrics(frozenset(), frozenset({0, 1}))
    assert math.isnan(p) and r == 0.0                    # nothing judged: precision undefined, recall 0
    p, r = relevance_metrics(frozenset({1}), frozenset())
    assert p == 0.0 and math.isnan(r)


def _filter_answer(template, judged_roles):
    """A relevance filter that judges relevant every statement whose fact has a role in ``judged_roles``
    (a dict role -> how many of that role's facts, in the template's fact order)."""
    chosen = []
    for role, k in judged_roles.items():
        chosen += [f.text for f in template.facts if f.role == role][:k]

    def answer(r):
        if r.purpose == "relevance":
            text = r.messages[0]["content"]
            stmts = text.split("Statements:\n", 1)[1].split("\n\n", 1)[0].splitlines()
            nums = [int(s.split(". ", 1)[0]) for s in stmts if s.split(". ", 1)[1] in chosen]
            return '{"relevant": [%s]}' % ", ".join(map(str, nums))
        return "Decision: A"
    return answer


def test_relevance_precision_and_recall_of_a_non_oracle_filter_through_the_runner(dev_templates):
    """The filter judges relevant the 5 support facts, 1 of the 3 decoy facts and 1 of the 4 irrelevant
    ones: 7 judged, 6 of them truly relevant (support or decoy), of 8 relevant facts: precision 6/7,
    recall 6/8 (unequal, so swapping them fails)."""
    t = dev_templates[0]
    b = Scripted(_filter_answer(t, {"support": 5, "decoy": 1, "irrelevant": 1}))
    cfg = RunConfig(templates=[], seeds=[0, 1], budgets=["0.6"], policies=["R1-rel", "R1-rel-oracle", "R1"],
                    variants=["PSP", "SPS"])
    df = run_grid(cfg, b, templates=[t])
    rel = df[df.policy == "R1-rel"]
    assert len(rel) == 4 and (rel.relevance_filter == "model").all()
    assert rel.relevance_precision.tolist() == pytest.approx([6 / 7] * 4)
    assert rel.relevance_recall.tolist() == pytest.approx([6 / 8] * 4)
    orc = df[df.policy == "R1-rel-oracle"]
    assert (orc.relevance_precision == 1).all() and (orc.relevance_recall == 1).all()
    assert df[df.policy == "R1"].relevance_precision.isna().all()
    # the relevance table: per filter kind, one value per task, in percent
    boot = TemplateBootstrap((t.id,), np.zeros((5, 1), dtype=int))
    tab = relevance_table(df, boot).set_index(["relevance_filter", "outcome"])
    assert tab.loc[("model", "precision"), "estimate"] == pytest.approx(100 * 6 / 7)
    assert tab.loc[("model", "recall"), "estimate"] == pytest.approx(75.0)
    assert tab.loc[("oracle", "recall"), "estimate"] == pytest.approx(100.0)
    assert tab.loc[("model", "precision"), "n"] == 4                     # 4 tasks (2 variants x 2 seeds)


def test_relevance_table_is_the_mean_over_tasks_not_over_rows():
    """Task a (precision 1.0) has 3 rows for the model filter (three policies), task b (0.5) one row:
    the mean over tasks is 75%, the mean over rows would be 87.5%."""
    rows = []
    for tid, prec, n in (("a", 1.0, 3), ("b", 0.5, 1)):
        for k in range(n):
            rows.append(dict(template_id=tid, variant="PSP", seed=0, relevance_filter="model",
                             relevance_precision=prec, relevance_recall=prec / 2, policy=f"P{k}"))
    rows.append(dict(template_id="a", variant="PSP", seed=0, relevance_filter="", relevance_precision=np.nan,
                     relevance_recall=np.nan, policy="R1"))
    df = pd.DataFrame(rows)
    boot = TemplateBootstrap(("a", "b"), np.array([[0, 1], [0, 0], [1, 1]]))
    tab = relevance_table(df, boot).set_index("outcome")
    assert tab.loc["precision", "estimate"] == pytest.approx(75.0)
    assert tab.loc["recall", "estimate"] == pytest.approx(37.5)
    assert tab.loc["precision", "n"] == 2
    # resamples (a, b), (a, a), (b, b): 75, 100, 50
    assert tab.loc["precision", "lo"] == pytest.approx(np.quantile([75.0, 100.0, 50.0], 0.025))


# --- budgets: floor, not round; the exact decimal; the 128-token control ----------------------------

@pytest.mark.parametrize("ratio, t, expected", [
    ("0.6", 101, 60),   # 60.6: round and ceil give 61
    ("0.4", 99, 39),    # 39.6: round and ceil give 40
    ("0.8", 137, 109),  # 109.6: round and ceil give 110
    ("0.8", 99, 79),    # 79.2: ceil gives 80
    ("0.6", 149, 89),   # 89.4: ceil gives 90
])
def test_a_ratio_budget_is_floored_where_round_or_ceil_differ(ratio, t, expected):
    exact = Fraction(ratio) * t
    assert exact.denominator != 1 and expected == math.floor(exact)   # a case where the rules differ
    assert Budget(ratio).tokens(t) == expected


def test_the_budget_is_the_floor_of_the_exact_decimal_product():
    """``0.7 * 90`` is 62.99999999999999 in binary floating point; the budget of r = 0.7 on T_all = 90
    is floor(63) = 63 tokens (SPEC: B(r) = floor(r * T_all), r the decimal the user wrote)."""
    assert Budget("0.7").tokens(90) == 63
    assert Budget("0.35").tokens(180) == 63
    assert Budget("0.29").tokens(100) == 29


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 999), st.integers(1, 5000))
def test_ratio_budget_property_floor_of_the_exact_product(milli, t):
    # floor of the exact decimal product (issue 25), and a ratio that prices to 0 tokens is refused
    # naming the rule (issue 23): the union of both rules
    r = Fraction(milli, 1000)
    b = Budget(f"{float(r):g}")
    exact = math.floor(Fraction(b.label) * t)
    if exact == 0:
        with pytest.raises(ValueError, match="prices to 0 tokens"):
            b.tokens(t)
    else:
        assert b.tokens(t) == exact


def test_the_128_token_control_ignores_t_all_and_ratios_follow_each_template(dev_templates):
    tok = default_tokenizer()
    ts = dev_templates[:4]
    totals = [t_all(t, tok) for t in ts]
    assert len(set(totals)) > 1                     # templates of different length ...
    for t, tot in zip(ts, totals):
        assert budget_tokens(t, Budget("128t"), tok) == 128   # ... the control is 128 for each
        assert budget_tokens(t, Budget("0.6"), tok) == math.floor(Fraction(6, 10) * tot)
    df = run_grid(RunConfig(templates=[], seeds=[0], budgets=["0.6", "128t", "0.4"], policies=["R1", "B4"],
                            variants=["PSP"]), templates=ts)
    fixed = df[df.budget_label == "128t"]
    assert (fixed.budget_tokens == 128).all() and fixed.budget_ratio.isna().all()
    assert (fixed.memory_tokens <= 128).all()
    for lab, num in (("0.6", 6), ("0.4", 4)):
        d = df[df.budget_label == lab]
        assert (d.budget_tokens == [math.floor(Fraction(num, 10) * x) for x in d.t_all]).all()
        assert (d.memory_tokens <= d.budget_tokens).all()
    # the fixture tells floor from round: some template's 0.6 * T_all has a fractional part >= .5
    assert any((Fraction(6, 10) * x) % 1 >= Fraction(1, 2) for x in df.t_all)


# --- run/relevance_filter.py: the noisy filter's rates and the realised precision / recall ----------

def test_noisy_filter_draws_hand_replayed():
    """8 relevant claims of 12 (4 others). Recall 0.5, precision 0.8: each relevant claim is kept when its
    uniform draw is below 0.5; each other claim is let in with q = 8 * 0.5 * 0.2 / (0.8 * 4) = 0.25."""
    from crossprofile_lib.run.relevance_filter import noisy_filter
    truth = frozenset(range(8))
    got = noisy_filter(truth, 12, 0.8, 0.5, np.random.default_rng(42))
    r = np.random.default_rng(42)
    keep, let_in = r.random(8) < 0.5, r.random(4) < 0.25
    assert got == frozenset([i for i in range(8) if keep[i]] + [8 + j for j in range(4) if let_in[j]])


def test_a_filter_that_lets_everything_in_is_plain_r1_with_precision_two_thirds(dev_templates):
    """Recall 1 and precision 2/3 on 8 relevant claims of 12: q = 8 * 1 * (1/3) / ((2/3) * 4) = 1, every claim
    is judged relevant, so R1-rel keeps what R1 keeps, and the realised precision is 8/12, recall 8/8."""
    from crossprofile_lib.run.pipeline import task_units
    from crossprofile_lib.run.relevance_filter import tiering_compositions
    from crossprofile_lib.task.evidence import composition
    tok = default_tokenizer()
    ts = dev_templates[:3]
    df = tiering_compositions(ts, tok, 2 / 3, 1.0, variants=("PSP", "SPS"), seeds=(0,), draws=2)
    assert len(df) == 3 * 2 * 2
    assert df.realised_precision.tolist() == pytest.approx([2 / 3] * 12)
    assert (df.realised_recall == 1.0).all()
    for u in task_units(ts, ("PSP", "SPS"), (0,), 4, tok):
        r1 = composition(u.task, select_memory("R1", u.claims, Budget("0.6").tokens(u.t_all), tok, None))
        rows = df[(df.template_id == u.task.template.id) & (df.variant == u.task.variant.name)]
        assert (rows.kept_support == r1.kept_support).all() and (rows.kept_decoy == r1.kept_decoy).all()
        assert (rows.kept_irrelevant == r1.kept_irrelevant).all()
