"""Balance-aware memory (BAL): hand-checked orders and packing, and the repair's property."""

import numpy as np
import pytest

from crossprofile_lib.policies import select_memory
from crossprofile_lib.policies.bal import balanced_order, pack_balanced
from crossprofile_lib.task.discussion import Claim, ClaimList
from crossprofile_lib.task.evidence import Stance


class WordTok:
    name = "words"

    def count(self, text):
        return 1 if text == "\n" else len(text.split())


# 8 relevant claims: option x: 3 pro, 1 con; option y: 2 pro, 2 con; plus 2 irrelevant
def _cl():
    specs = [("x", 1), ("y", 1), ("x", 1), ("y", -1), ("x", -1), ("y", 1), ("x", 1), ("y", -1)]
    claims = tuple(Claim(f"c{i} w", ("A1",) if i % 2 else ("A1", "A2", "A3", "A4"), i) for i in range(10))
    stances = tuple(Stance(o, p, True) for o, p in specs) + (Stance("z", 1, False), Stance("x", -1, False))
    return ClaimList(claims, ("A1", "A2", "A3", "A4"), ("A1", "A2", "A3", "A4")), stances


def test_balanced_order_keeps_proportions_in_every_prefix():
    cl, st = _cl()
    order = balanced_order(cl, st)
    # shares: x+ 3/8, y+ 2/8, y- 2/8, x- 1/8.  step 1: x+ (largest share); step 2: deficits
    # y+ .5, y- .5, x+ -.25, x- .25 -> y+ (first mentioned earlier than y-), step 3: y- ...
    assert order[:8] == [0, 1, 3, 2, 4, 5, 7, 6]
    assert order[8:] == [8, 9]  # irrelevant tier after the relevant one
    lead = np.cumsum([{"x": 1, "y": -1}.get(st[i].option, 0) * st[i].polarity for i in order[:8]])
    assert lead[-1] == 2 and (lead[3:] >= 0).all()


def test_pack_balanced_stops_a_tier_when_the_owed_bucket_cannot_fit():
    cl, st = _cl()
    tok = WordTok()  # every line costs label + 2 words + newline = 4
    assert [tok.count(c.line()) + 1 for c in cl.claims] == [4] * 10
    assert pack_balanced(cl, st, 12, tok) == [0, 1, 3]
    assert pack_balanced(cl, st, 15, tok) == [0, 1, 3]
    assert pack_balanced(cl, st, 40, tok) == [0, 1, 3, 2, 4, 5, 7, 6, 8, 9]
    assert pack_balanced(cl, st, 33, tok) == [0, 1, 3, 2, 4, 5, 7, 6]


def test_pack_balanced_does_not_jump_buckets_when_the_owed_one_is_too_long():
    cl, st = _cl()
    long = Claim("c2 " + "w " * 20, cl.claims[2].speakers, 2)  # x+ claim 2 is now too long
    cl = ClaimList(cl.claims[:2] + (long,) + cl.claims[3:], cl.speaker_order, cl.agents)
    # order 0 (x+), 1 (y+), 3 (y-), then x+ is owed: claim 2 does not fit, claim 6 (x+) does
    assert pack_balanced(cl, st, 16, WordTok()) == [0, 1, 3, 6]
    # with room for only the owed bucket's nothing, the tier stops rather than take y+/y-
    st2 = st[:6] + (Stance("q", 1, True),) + st[7:]  # claim 6 no longer x+: x+ owes claim 2 only
    assert pack_balanced(cl, st2, 16, WordTok())[:3] == [0, 1, 3]
    assert 5 not in pack_balanced(cl, st2, 16, WordTok())


def test_bal_ignores_speaker_counts():
    cl, st = _cl()
    flipped = ClaimList(tuple(Claim(c.text, ("A1",) if c.count > 1 else ("A1", "A2", "A3", "A4"), c.first_mention)
                              for c in cl.claims), cl.speaker_order, cl.agents)
    tok = WordTok()  # a label is one word whatever its length: only the counts differ
    for budget in (12, 20, 33, 40):
        assert pack_balanced(cl, st, budget, tok) == pack_balanced(flipped, st, budget, tok)
    with pytest.raises(ValueError, match="stances"):
        select_memory("BAL", cl, 20, tok, np.random.default_rng(0))


def test_bal_gap_small_where_r1_and_b4_gaps_large(root):
    from crossprofile_lib.run.runner import RunConfig, run_grid
    from crossprofile_lib.task.templates import load_templates
    ts = load_templates(root / "templates")
    df = run_grid(RunConfig(budgets=["0.4", "0.6", "0.8"], policies=["R1", "B4", "R1-rel", "BAL", "BAL-oracle"]),
                  templates=ts)
    acc = df[df.budget_label == "0.6"].groupby(["policy", "cell"]).correct.mean()
    gap = {p: abs(acc[p, "classic"] - acc[p, "mirror"]) for p in ("R1", "B4", "BAL", "BAL-oracle")}
    assert gap["BAL"] < 0.10 and gap["BAL-oracle"] < 0.10
    assert gap["R1"] > 0.50 and gap["B4"] > 0.50
    mean = df.groupby("policy").correct.mean()  # over the paper's three budgets
    assert mean["BAL"] >= mean["R1-rel"]
    assert (df[df.policy == "BAL"].stance_source == "oracle").all()
