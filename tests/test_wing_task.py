"""Claim extraction's rules where they live (issue 55: the task wing's mutation survivors): the exact level merges
utterances equal after collapsing white space and case (and nothing else), the fuzzy level joins the earliest claim
at the threshold, and merge quality's precision, recall, split and rare-looking rates, on a hand-made transcript
whose numbers differ under each near miss."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from crossprofile_lib.task.discussion import Utterance
from crossprofile_lib.task.extraction import FUZZY_THRESHOLD, extract, merge_quality

LINES = [("A1", "The oven is OLD.", "f1"),
         ("A2", "the   oven is old.", "f1"),           # the same after white space and case
         ("A3", "The oven\tis old.", "f1"),             # a tab
         ("A2", "The flour is damp.", "f2"),
         ("A4", "The oven is old!", "f1"),              # different punctuation: not exact
         ("A1", "I think we should pick B.", None),
         ("A3", "The flour is damp", "f2")]             # no full stop


def transcript(lines=LINES):
    utt = tuple(Utterance(i, s, t) for i, (s, t, _) in enumerate(lines))
    return SimpleNamespace(utterances=utt, truth=tuple(f for *_, f in lines), speaker_order=("A1", "A2", "A3", "A4"))


def test_exact_merges_on_collapsed_white_space_and_case_only():
    mt = transcript()
    ex = extract(mt, "exact", None, ("A1", "A2", "A3", "A4"))
    assert ex.members == ((0, 1, 2), (3,), (4,), (5,), (6,))
    c = ex.claims.claims
    assert c[0].text == "The oven is OLD." and c[0].speakers == ("A1", "A2", "A3") and c[0].first_mention == 0
    assert c[0].fact_id == "f1" and c[0].first_speaker == "A1" and c[3].fact_id is None


def test_merge_quality_by_hand():
    mt = transcript()
    q = merge_quality(mt, extract(mt, "exact", None, ("A1", "A2", "A3", "A4")))
    # merged pairs: (0,1), (0,2), (1,2), all f1: precision 3/3; same-fact pairs: f1 has 4 lines (6 pairs), f2 2 (1)
    assert q.precision == 1.0 and q.recall == pytest.approx(3 / 7)
    # both facts are said by 2+ speakers and both fall into 2 claims; each has a single-speaker claim
    assert q.split_rate == 1.0 and q.rare_rate == 1.0 and q.n_claims == 5 and q.n_fact_claims == 4
    o = merge_quality(mt, extract(mt, "oracle", SimpleNamespace(fact=lambda fid: SimpleNamespace(text=fid)),
                                  ("A1", "A2", "A3", "A4")))
    assert o.precision == 1.0 and o.recall == 1.0 and o.split_rate == 0.0 and o.rare_rate == 0.0


def test_fuzzy_joins_at_the_threshold_and_a_fact_less_merge_lowers_precision():
    mt = transcript()
    f = extract(mt, "fuzzy", None, ("A1", "A2", "A3", "A4"))
    assert f.members == ((0, 1, 2, 4), (3, 6), (5,))
    q = merge_quality(mt, f)
    assert q.recall == 1.0 and q.precision == 1.0 and q.split_rate == 0.0
    strict = extract(mt, "fuzzy", None, ("A1", "A2", "A3", "A4"), threshold=100.0)
    assert strict.members == ((0, 1, 2, 4), (3, 6), (5,))        # default_process drops case and punctuation
    assert FUZZY_THRESHOLD == 80.0
    lines = [("A1", "The oven is old", "f1"), ("A2", "The oven is very old", None)]     # ratio 85.7
    loose = extract(transcript(lines), "fuzzy", None, ("A1", "A2"), threshold=85.7)
    assert loose.members == ((0, 1),)
    lq = merge_quality(transcript(lines), loose)
    assert lq.precision == 0.0 and math.isnan(lq.recall) and math.isnan(lq.split_rate)
    apart = extract(transcript(lines), "fuzzy", None, ("A1", "A2"), threshold=85.8)
    assert apart.members == ((0,), (1,)) and math.isnan(merge_quality(transcript(lines), apart).precision)


def test_unknown_level_and_model_without_extractor_are_refused():
    mt = transcript()
    with pytest.raises(ValueError, match="not one of"):
        extract(mt, "approximate", None, ("A1",))
    with pytest.raises(ValueError, match="needs a model backend"):
        extract(mt, "model", None, ("A1",))
    m = extract(mt, "model", None, ("A1", "A2", "A3", "A4"), extractor=lambda utt: [[6, 3], [], [0], [5, 1, 2, 4]])
    assert m.members == ((0,), (1, 2, 4, 5), (3, 6))
