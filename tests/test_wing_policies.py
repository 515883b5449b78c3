"""B3's rules where they live (issue 55: the policies wing's mutation survivors): which claims a summary keeps
(60% of a claim's content words, numbers counted as words, stop words not), the word limit floor(B / 1.3) and the
cut of a summary over budget. Hand-checked cases whose verdicts differ under each near miss, property tests where a
rule has an oracle (exact fractions; the longest prefix that fits)."""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from crossprofile_lib.policies.b3 import cut_to_budget, summary_kept, word_limit


def claims(*texts):
    return [SimpleNamespace(text=t) for t in texts]


def test_numbers_count_as_content_words():
    c = claims("Revenue fell 12 percent in 2023 to 40 million")   # revenue fell 12 percent 2023 40 million: 7 words
    # 5 of 7 (the numbers among them): kept; without the numbers only revenue, million of 4 would be there
    assert summary_kept("revenue 12 2023 40 million", c) == [0]
    # every word but the wrong numbers: 4 of 7 < 60%: not kept (ignoring numbers, 4 of 4 would keep it)
    assert summary_kept("revenue fell percent million 13 2024 41", c) == []


def test_sixty_percent_is_enough_and_stop_words_do_not_count():
    c = claims("alpha bravo charlie delta echo", "The alpha of the bravo", "the of and", "")
    assert summary_kept("alpha bravo charlie", c) == [0, 1]           # 3 of 5 = 60%: kept; 2 of 2
    assert summary_kept("alpha bravo", c) == [1]                      # 2 of 5: not
    assert summary_kept("ALPHA, Bravo; charlie!", c) == [0, 1]        # case and punctuation do not matter
    assert summary_kept("the of and", c) == []                        # a claim of stop words only is never kept
    assert summary_kept("alphabravo charlie delta", claims("alpha bravo charlie delta echo")) == []   # whole words


def test_word_limit_by_hand():
    assert [word_limit(b) for b in (1, 2, 13, 14, 26, 130, 131)] == [1, 1, 10, 10, 20, 100, 100]


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=100_000))
def test_word_limit_is_the_exact_floor(b):
    assert word_limit(b) == max(1, math.floor(Fraction(b) / Fraction(13, 10)))


class Words:
    """A tokenizer where every word is one token (``memory_tokens`` counts what ``encode`` returns)."""

    name = "words"

    def encode(self, text):
        return text.split()

    def count(self, text):
        return len(text.split())


@settings(max_examples=100, deadline=None)
@given(words=st.lists(st.sampled_from(["a", "bb", "ccc", "dddd"]), min_size=0, max_size=30),
       budget=st.integers(min_value=0, max_value=40))
def test_cut_keeps_the_longest_prefix_that_fits(words, budget):
    from crossprofile_lib.task.budgets import memory_tokens
    tok = Words()
    text = " ".join(words)
    out, cut = cut_to_budget(text, budget, tok)
    fits = memory_tokens(text, tok) <= budget
    assert cut is (not fits)
    if fits:
        assert out == text
    else:
        k = len(out.split())
        assert out == " ".join(words[:k]) and memory_tokens(out, tok) <= budget
        assert memory_tokens(" ".join(words[:k + 1]), tok) > budget


def test_a_failed_summary_call_is_an_empty_memory_that_carries_its_error(monkeypatch):
    """A B3 summary whose call failed keeps nothing and says why (the runner turns ``meta['error']`` into the row's
    error: a failed call is never a decision); a summary that ran is cut to the budget and keeps what it restates."""
    from crossprofile_lib.backends.base import ChatResult
    from crossprofile_lib.policies import b3
    from crossprofile_lib.policies.registry import parse_policy
    monkeypatch.setattr(b3, "summary_prompt", lambda task, transcript, budget: (SimpleNamespace(file="b3.txt", sha="s"),
                                                                                budget + 32))
    cl = SimpleNamespace(claims=claims("alpha bravo charlie", "delta echo foxtrot"))

    def x(result):
        return SimpleNamespace(summarise=lambda prompt, max_tokens: result, budget=13, task=None, transcript=None,
                               tokenizer=Words(), claims=cl)
    failed = b3.build_b3(parse_policy("B3"), x(ChatResult("alpha bravo charlie", error="HTTP 500")))
    assert failed.text == "" and failed.kind == "empty" and failed.kept == () and failed.meta["error"] == "HTTP 500"
    ok = b3.build_b3(parse_policy("B3"), x(ChatResult("alpha  bravo\ncharlie and more words here beyond ten of them now and "
                                                      "then more")))
    assert ok.meta["error"] == "" and ok.kind == "summary" and ok.meta["word_limit"] == 10
    assert ok.text == "alpha bravo charlie and more words here beyond ten of them now and" and ok.truncated   # 13 words
    assert [c.text for c in ok.kept] == ["alpha bravo charlie"]
