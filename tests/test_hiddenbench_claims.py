import numpy as np
import pytest

from crossprofile_lib.hiddenbench.claims import (
    CONFIRM_LOW,
    MAX_CLAIMS_PER_MESSAGE,
    MERGE_THRESHOLD,
    RawClaim,
    grey_pairs,
    jaccard,
    key,
    merge_claims,
    parse_claims,
    sentence_claims,
)
from crossprofile_lib.policies import DEFAULT_POLICIES, parse_policy, select_memory
from crossprofile_lib.task.discussion import ClaimList, Transcript, Utterance
from crossprofile_lib.task.tokenizer import default_tokenizer


@pytest.mark.parametrize("text, claims, readable", [
    ("- The oven is old.\n- The yeast was stored near the oven.", ["The oven is old.",
                                                                   "The yeast was stored near the oven."], True),
    ("Here are the claims:\n1. The oven is old.\n2) Flour made good cakes.\n* A2: \"Yeast was warm.\"",
     ["The oven is old.", "Flour made good cakes.", "Yeast was warm."], True),
    ('["The oven is old.", "The flour is fine."]', ["The oven is old.", "The flour is fine."], True),
    ('Sure: {"claims": ["The oven is old."]}', ["The oven is old."], True),
    ("- none", [], True),
    ("- ok\n- The oven is old.\n- the oven is old.", ["The oven is old."], True),  # too short; exact repeat
    ("I cannot help with that.", [], False),
    ("", [], False),
])
def test_parse_claims(text, claims, readable):
    assert parse_claims(text) == (claims, readable)


def test_claim_count_is_capped_and_sentence_fallback():
    many = "\n".join(f"- Fact number {i} is here." for i in range(30))
    assert len(parse_claims(many)[0]) == MAX_CLAIMS_PER_MESSAGE
    assert sentence_claims("A2: The oven is old. Yes! The flour made good cakes.") == [
        "The oven is old.", "The flour made good cakes."]


def test_merge_rule_near_duplicates():
    a = "The yeast used on Monday had been stored next to the hot oven for two weeks."
    b = "the yeast used on Monday was stored next to the hot oven for two weeks"   # near-duplicate
    c = "The oven is twelve years old."
    assert jaccard(key(a), key(b)) >= MERGE_THRESHOLD
    assert jaccard(key(a), key(c)) < 0.35
    raw = [RawClaim("A2", 0, a), RawClaim("A1", 1, c), RawClaim("A3", 2, b), RawClaim("A1", 3, c)]
    m = merge_claims(raw, ("A2", "A1", "A3"), ("A1", "A2", "A3"))
    cl = m.claim_list
    assert isinstance(cl, ClaimList) and m.cluster == (0, 1, 0, 1)
    assert [c_.text for c_ in cl.claims] == [a, c]        # a cluster shows its first claim
    assert cl.claims[0].speakers == ("A2", "A3") and cl.claims[1].speakers == ("A1",)
    assert all(c_.fact_id is None for c_ in cl.claims)
    assert dict(cl.by_speaker) == {"A2": (0,), "A1": (1,), "A3": (0,)}


def test_grey_zone_confirmed_by_the_model():
    a = "Dana's last two projects were each delivered more than six months late."
    b = "Dana delivered her last two projects late."
    s = jaccard(key(a), key(b))
    assert 0.35 <= s < MERGE_THRESHOLD
    raw = [RawClaim("A1", 0, a), RawClaim("A2", 1, b)]
    assert grey_pairs(raw) == [(1, 0)]
    assert merge_claims(raw, ("A1", "A2")).cluster == (0, 1)
    yes = merge_claims(raw, ("A1", "A2"), confirm=lambda i, rep: True)
    assert yes.cluster == (0, 0) and yes.confirmed_pairs == ((1, 0, True),)
    assert merge_claims(raw, ("A1", "A2"), confirm=lambda i, rep: False).cluster == (0, 1)


def test_grey_zone_bounds_are_low_inclusive_and_threshold_exclusive():
    """A pair at exactly CONFIRM_LOW (7 shared of 20 content words = 0.35) is put to the model; one just below
    (7 of 21) is not; one at exactly MERGE_THRESHOLD (3 of 5 = 0.6) merges by the rule, unasked."""
    shared = "amber basil cedar delta ember fjord gravel"
    a = f"{shared} harbor island jasper kettle lantern meadow"               # 7 shared + 6 own
    b = f"{shared} nectar orchard pepper quartz raven saddle timber"        # 7 shared + 7 own: 7/20
    c = f"{shared} nectar orchard pepper quartz raven saddle timber umber"  # 7 shared + 8 own: 7/21
    assert jaccard(key(a), key(b)) == CONFIRM_LOW and jaccard(key(a), key(c)) < CONFIRM_LOW
    assert grey_pairs([RawClaim("A1", 0, a), RawClaim("A2", 1, b)]) == [(1, 0)]
    assert grey_pairs([RawClaim("A1", 0, a), RawClaim("A2", 1, c)]) == []
    d, e = "amber basil cedar delta", "amber basil cedar ember"             # 3 shared of 5 = 0.6
    assert jaccard(key(d), key(e)) == MERGE_THRESHOLD
    asked = []
    m = merge_claims([RawClaim("A1", 0, d), RawClaim("A2", 1, e)], ("A1", "A2"),
                     confirm=lambda i, rep: asked.append((i, rep)) or False)
    assert m.cluster == (0, 0) and asked == []


def test_every_memory_policy_runs_unchanged_on_extracted_claims():
    texts = ["The oven is twelve years old.", "The flour made good cakes on Monday.",
             "The yeast was stored next to the hot oven.", "The oven reaches the set temperature."]
    raw = [RawClaim(s, i, texts[i % 4]) for i, s in enumerate(["A1", "A2", "A3", "A1", "A2", "A3"])]
    cl = merge_claims(raw, ("A1", "A2", "A3"), ("A1", "A2", "A3")).claim_list
    tr = Transcript(("A1", "A2", "A3"), tuple(Utterance(i, r.speaker, r.text) for i, r in enumerate(raw)))
    for p in DEFAULT_POLICIES:
        spec = parse_policy(p)
        rel = frozenset({0, 2}) if spec.base.startswith("R1-rel") else None
        m = select_memory(spec, cl, 60, default_tokenizer(), np.random.default_rng(0), transcript=tr, relevant=rel)
        if spec.selection == "budget":
            assert m.tokens <= 60
    assert select_memory("private-only", cl, None, default_tokenizer(), np.random.default_rng(0)).n_kept == 2
