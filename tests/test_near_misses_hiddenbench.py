"""Issue 34 item 2, HiddenBench and the book: hand-checked cases for development-half entries of the issue-34
mutation pool (written from the entries, before any of their outcomes): vote letters in either case, the
round message's generation cap, a fact's first restating message, a complete profile, the comparison
page's flags and signs, and near-chance on objects that are not runs."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from crossprofile_lib.hiddenbench.disclosure import disclosure
from crossprofile_lib.hiddenbench.natural import message_max_tokens, parse_vote

ANSWERS = ("The oven", "The flour", "The yeast")


@pytest.mark.parametrize("text,letter", [('{"vote": "b"}', "B"), ('{"vote": "c)"}', "C"), ('{"vote": "(a)"}', "A"),
                                         ('{"vote": "d"}', None)])
def test_votes_read_letters_whatever_their_case(text, letter):
    assert parse_vote(text, ("A", "B", "C"), ANSWERS)[0] == letter


@pytest.mark.parametrize("words,cap", [(60, 106), (1, 17), (10, 31), (11, 32)])
def test_a_round_messages_cap_is_one_and_a_half_tokens_a_word_plus_16(words, cap):
    assert message_max_tokens(words) == cap


def test_a_facts_first_restating_message_is_the_earliest():
    fact = "the loading dock floods every spring"
    msgs = [("A1", "hello all"), ("A2", f"I know that {fact}."), ("A3", "ok"), ("A2", f"again: {fact}")]
    d = disclosure([fact], ["A2"], msgs)
    assert d.disclosed == (True,) and d.first_message == (1,) and d.by_holder == (True,)
    d2 = disclosure([fact], ["A1"], msgs)
    assert d2.by_holder == (False,) and d2.rate == 1.0 and d2.holder_rate == 0.0


def test_a_profile_is_complete_only_with_every_hidden_fact():
    from crossprofile_lib.hiddenbench.common import Composition
    assert Composition(kept_hidden=3, kept_shared=0, n_hidden=3).profile_complete
    assert not Composition(kept_hidden=2, kept_shared=5, n_hidden=3).profile_complete
    assert not Composition(kept_hidden=0, kept_shared=0, n_hidden=3).profile_complete


class _Run:
    def __init__(self, k, n, label="m"):
        self.df = pd.DataFrame({"policy": "R1", "template_id": [f"t{i % 5}" for i in range(n)],
                                "correct": [i < k for i in range(n)]})
        self.is_reference, self.label, self.boot, self.model = False, label, None, label


def test_the_comparison_page_flags_a_near_chance_model_by_its_measured_accuracy():
    from crossprofile_lib.book.paper import run_name
    assert run_name(_Run(9, 18, "smol")) == "smol · near chance"     # 50% of 18: Wilson bound 0.29
    assert run_name(_Run(16, 18, "good")) == "good"


def test_objects_that_are_not_runs_are_never_near_chance():
    from crossprofile_lib.book.display import near_chance
    frame = _Run(0, 30).df
    assert not near_chance(SimpleNamespace(df=frame, label="x", boot=None))    # no is_reference: not a model run
    assert not near_chance("a label") and not near_chance(None)
    assert near_chance(_Run(0, 30))


def test_paper_differences_in_points_keep_their_sign():
    from crossprofile_lib.book.compare import _paper_cell
    ref = SimpleNamespace(is_reference=True)
    pts = SimpleNamespace(unit="points", paper={"Qwen": 5.0, "Llama": -2.25})
    pct = SimpleNamespace(unit="%", paper={"Qwen": 55.0})
    assert _paper_cell(pts, ref) == "+5.0 (Qwen) / -2.2 (Llama)"
    assert _paper_cell(pct, ref) == "55.0 (Qwen)"
