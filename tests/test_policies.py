"""Hand-checked expectations for every policy on a small hand-built claim list.

Tokenizer: one token per whitespace-separated word, one per newline, so a line
``[A2] p1 p1`` costs 3 + 1 = 4.  Claims (speaker order A2, A1, A3, A4):

    idx  text          speakers         first  line cost
    0    s1 s1 s1      A1,A2,A3,A4      0      5
    1    p1 p1         A2               1      4
    2    p2 p2 p2 p2   A1               4      6
    3    q q           A1,A3            5      4
    4    p3            A3               8      3
    5    p4 p4 p4      A4               10     5
"""

import numpy as np
import pytest

from crossprofile_lib.policies import (
    DEFAULT_POLICIES,
    PolicyContext,
    order_b4,
    order_m1,
    order_r1,
    pack,
    parse_policy,
    select_memory,
)
from crossprofile_lib.task.discussion import Claim, ClaimList


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
CTX = PolicyContext(np.random.default_rng(0))


def kept_texts(mem):
    return [c.text for c in mem.kept]


def mem(spec, budget=None, relevant=None, seed=0):
    return select_memory(spec, CL, budget, TOK, np.random.default_rng(seed), relevant=relevant)


def test_r1_order_fewest_speakers_then_first_mention():
    assert order_r1(CL, CTX) == [1, 2, 4, 5, 3, 0]


def test_b4_order():
    assert order_b4(CL, CTX) == [0, 1, 2, 3, 4, 5]


def test_m1_rotation_skips_taken_and_exhausted_speakers():
    # round 1: A2->0, A1->2, A3->3, A4->5 (0 taken); round 2: A2->1, A1 exhausted, A3->4
    assert order_m1(CL, CTX) == [0, 2, 3, 5, 1, 4]


def test_first_fit_skips_a_line_that_does_not_fit_and_goes_on():
    # R1 at 17: 1 (4) + 2 (6) + 4 (3) = 13; 5 (5) would make 18 -> skipped; 3 (4) fits -> 17
    assert pack(CL, order_r1(CL, CTX), 17, TOK) == [1, 2, 4, 3]
    m = mem("R1", 17)
    assert kept_texts(m) == ["p1 p1", "p2 p2 p2 p2", "q q", "p3"]  # first-mention order
    assert m.tokens == 17 and m.text.splitlines()[0] == "[A2] p1 p1"


def test_r1_exact_budget_edges():
    assert [c.first_mention for c in mem("R1", 12).kept] == [1, 4]
    assert [c.first_mention for c in mem("R1", 13).kept] == [1, 4, 8]
    assert mem("R1", 2).kept == ()


def test_b4_packs_in_first_mention_order():
    assert kept_texts(mem("B4", 17)) == ["s1 s1 s1", "p1 p1", "p2 p2 p2 p2"]


def test_m1_packing():
    # at 18: order 0(5) 2(6) 3(4) -> 15; 5(5) -> 20 skip; 1(4) -> 19 skip; 4(3) -> 18 fits
    assert [c.first_mention for c in mem("M1", 18).kept] == [0, 4, 5, 8]


def test_random_is_a_seeded_permutation():
    a, b = mem("Random", 17, seed=3), mem("Random", 17, seed=3)
    assert kept_texts(a) == kept_texts(b)
    perm = np.random.default_rng(3).permutation(6).tolist()
    assert [c.first_mention for c in a.kept] == sorted(CL.claims[i].first_mention for i in pack(CL, perm, 17, TOK))
    seeds = {tuple(kept_texts(mem("Random", 17, seed=s))) for s in range(20)}
    assert len(seeds) > 1


def test_r1_rel_tiers_then_r1_order():
    rel = frozenset({0, 4, 5})
    # relevant tier in R1 order: 4 (3), 5 (5) -> 8, 0 (5) -> 13; then 1 (4) -> 17; 2, 3 skip
    assert [c.first_mention for c in mem("R1-rel", 17, relevant=rel).kept] == [0, 1, 8, 10]
    with pytest.raises(ValueError, match="relevance filter"):
        mem("R1-rel", 17)


def test_fixed_k_ignores_budget():
    m = select_memory(parse_policy("R1-k3"), CL, None, TOK, np.random.default_rng(0))
    assert [c.first_mention for c in m.kept] == [1, 4, 8]
    assert len(mem("B4-k7").kept) == 6  # fewer claims than k: keeps them all


def test_unbudgeted_controls():
    assert mem("EMPTY").kept == () and mem("EMPTY").text == "" and mem("EMPTY").tokens == 0
    assert len(mem("ALL").kept) == 6
    assert [c.count for c in mem("private-only").kept] == [1, 1, 1, 1]
    assert [c.count for c in mem("shared-only").kept] == [4, 2]


def test_unlabeled_keeps_the_same_claims_without_labels():
    a, u = mem("R1", 17), mem("R1:unlabeled", 17)
    assert kept_texts(a) == kept_texts(u)
    assert u.text.splitlines() == kept_texts(a)
    assert set(u.revealed) == {1}


def test_shuffled_permutes_label_sets_among_kept_lines():
    a = mem("ALL")
    s = mem("ALL:shuffled", seed=5)
    assert kept_texts(a) == kept_texts(s)
    assert sorted(s.revealed) == sorted(a.revealed)
    labels = [ln.split(" ")[0] for ln in s.text.splitlines()]
    assert sorted(labels) == sorted(ln.split(" ")[0] for ln in a.text.splitlines())
    shuffled_any = any(list(mem("ALL:shuffled", seed=k).revealed) != list(a.revealed) for k in range(10))
    assert shuffled_any


def test_count_free_formats():
    fs = mem("ALL:first-speaker")
    assert set(fs.revealed) == {1}
    cid = mem("ALL:claim-id")
    assert cid.text.splitlines()[0] == "[C01] s1 s1 s1"


def test_parse_policy():
    p = parse_policy("R1-rel-k7:unlabeled")
    assert (p.base, p.fixed_k, p.fmt, p.selection) == ("R1-rel", 7, "unlabeled", "fixed-k")
    assert parse_policy("R1-rel-oracle").base == "R1-rel-oracle"
    assert parse_policy("B3").selection == "generated"
    for bad in ("R2", "ALL-k7", "R1:bold"):
        with pytest.raises(ValueError):
            parse_policy(bad)
    for p in DEFAULT_POLICIES:
        parse_policy(p)


def test_b3_needs_a_model():
    with pytest.raises(ValueError, match="needs a model backend"):
        mem("B3", 17)
