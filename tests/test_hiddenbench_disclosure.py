import pytest

from crossprofile_lib.hiddenbench.disclosure import (
    DISCLOSURE_THRESHOLD,
    coverage,
    disclosure,
    facts_restated,
    lcs_length,
    restates,
    tokens,
)

FACT = "The cargo door of the Kestrel is too narrow for the shop's standard pallets."  # 15 tokens


def test_tokens_and_lcs():
    assert tokens("Kestrel's door: 4.5 m!") == ["kestrel", "s", "door", "4", "5", "m"]
    assert lcs_length("a b c d".split(), "x a c y d".split()) == 3
    assert lcs_length([], ["a"]) == 0
    assert len(tokens(FACT)) == 15 and DISCLOSURE_THRESHOLD == 0.8


@pytest.mark.parametrize("text, expected", [
    (FACT, True),                                                                     # verbatim
    ("the CARGO door of the kestrel is too narrow for the shops standard pallets", True),  # case, punctuation
    ("I learned that the cargo door of the Kestrel is too narrow for the shop's standard pallets, "
     "so I vote D.", True),                                                           # lead-in and tail
    ("The loading door of the Kestrel is too narrow for the shop's standard pallets.", True),  # 1 of 15 changed
    ("The door of the Kestrel van is much too narrow for our standard pallets.", False),  # paraphrase: 10/15
    ("The Kestrel's door is too narrow.", False),                                      # a summary
    ("pallets standard shop's the for narrow too is Kestrel the of door cargo The", False),  # order matters
    ("", False),
])
def test_restated_in_full(text, expected):
    assert restates(FACT, text) is expected


def test_threshold_boundary():
    fact = "one two three four five six seven eight nine ten"
    assert coverage(fact, "one two three four five six seven eight") == 0.8
    assert restates(fact, "one two three four five six seven eight")       # exactly 80% counts
    assert not restates(fact, "one two three four five six seven")          # 70% does not
    assert restates(fact, "one two three four five six seven", threshold=0.7)


def test_a_changed_number_costs_one_token():
    fact = "The new hall in Riverton seats 800 people and is free in the first week of June."
    assert restates(fact, fact.replace("800", "900"))          # 16/17 tokens
    assert not restates("It costs 800 euros.", "It costs 900 euros.")   # 3/4 tokens in a short fact


def test_disclosure_rate_and_holders():
    hidden = ["Amber Catering had its food safety licence suspended last week after a failed inspection.",
              "Birch Foods cannot supply vegetarian dishes, and a third of the staff are vegetarian.",
              "The head chef of Cedar Kitchen ran the picnic kitchen for five years."]
    msgs = [("A2", "I vote Amber. Also: Birch Foods cannot supply vegetarian dishes, and a third of the staff "
                   "are vegetarian."),
            ("A1", "Amber Catering had its food safety licence suspended last week after a failed inspection."),
            ("A3", "Cedar has an experienced chef."),
            ("A3", "A2 said Birch Foods cannot supply vegetarian dishes and a third of the staff are vegetarian.")]
    d = disclosure(hidden, ["A1", "A2", "A3"], msgs)
    assert d.disclosed == (True, True, False) and d.by_holder == (True, True, False)
    assert d.first_message == (1, 0, -1)
    assert d.rate == pytest.approx(2 / 3) and d.n_disclosed == 2
    # a fact restated only by someone else counts as disclosed, not as disclosed by its holder
    d2 = disclosure(hidden[1:2], ["A2"], msgs[3:])
    assert d2.disclosed == (True,) and d2.by_holder == (False,)
    assert facts_restated(hidden, [m for _, m in msgs]) == [True, True, False]


def _lcs_table(a, b):
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            t[i + 1][j + 1] = t[i][j] + 1 if x == y else max(t[i][j + 1], t[i + 1][j])
    return t[-1][-1]


def test_bit_parallel_lcs_equals_the_table():
    import numpy as np
    rng = np.random.default_rng(7)
    for _ in range(300):
        a = list(rng.choice(list("abcde"), size=rng.integers(0, 25)))
        b = list(rng.choice(list("abcdef"), size=rng.integers(0, 60)))
        assert lcs_length(a, b) == _lcs_table(a, b)
