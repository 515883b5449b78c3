"""Issue 34 item 2, policies, budgets and decisions: hand-checked cases whose numbers differ under each near miss.

* **B3's cap and keep rule** (:mod:`crossprofile_lib.policies.b3`): the generation cap is the budget plus
  32 tokens; the word limit ``floor(B / 1.3)``; a claim is kept when at least 60% of its content words
  (stop words dropped, lower case, whole words) occur in the summary; the cut keeps the longest word
  prefix that fits, no word more or less; a failed call gives an empty memory.
* **Tokenizer post-processors (BOS) in budgets**: a ``tokenizer.json`` whose post-processor adds a BOS
  token must price a text without it, else every call counts one token more and a line (text plus
  newline, two calls) two more.
* **Label controls** (:mod:`crossprofile_lib.task.provenance`): ``first-speaker`` names the agent that
  stated the claim first (not the lowest-numbered one), ``claim-id`` numbers from the first mention
  (1-based), ``shuffled`` moves the label and its speaker count together.
* **Score-mode letter variants** (:func:`crossprofile_lib.backends.llm.choice_logprobs`): ``" A"`` and
  ``"A"`` are the same choice (the larger log-probability wins, not the later or the sum); ``"a"`` is not.
* **Format-reminder retries and error rows** (:meth:`LLMBackend.decide`): an unparsable answer is retried
  once with the reminder; a failed call is not retried and is an error, not an invalid decision; a retry
  that fails is an error too.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossprofile_lib.backends.base import ChatResult
from crossprofile_lib.backends.llm import best_choice, choice_logprobs
from crossprofile_lib.policies import select_memory
from crossprofile_lib.policies.b3 import EXTRA_TOKENS, cut_to_budget, summary_kept, word_limit
from crossprofile_lib.run.pipeline import build_task
from crossprofile_lib.task.budgets import line_cost, memory_tokens, t_all
from crossprofile_lib.task.decision import DecisionRequest
from crossprofile_lib.task.discussion import Claim
from crossprofile_lib.task.provenance import render_lines
from crossprofile_lib.task.tokenizer import HFTokenizer, default_tokenizer


class Words:
    """A tokenizer that counts whitespace-separated words (a newline costs nothing)."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


# --- B3: cap, word limit, keep rule, cut -----------------------------------------------------------

def _claim(text, speakers=("A1",), first=0, first_speaker=None):
    return Claim(text=text, speakers=tuple(speakers), first_mention=first, first_speaker=first_speaker)


@pytest.mark.parametrize("budget,limit", [(0, 1), (1, 1), (6, 4), (12, 9), (13, 10), (14, 10), (39, 30), (40, 30)])
def test_word_limit_is_floor_of_budget_over_1_3(budget, limit):
    # 6 / 1.3 = 4.6 (rounding would give 5); 40 / 1.3 = 30.8 (31 rounded); 39 / 1.3 = 30 exactly
    assert word_limit(budget) == limit


@pytest.mark.parametrize("summary,kept", [
    ("clinic wing opened", [0]),              # 3 of 5 content words of claim 0: exactly 60%, kept
    ("clinic wing", []),                      # 2 of 5: 40%
    ("The CLINIC, its Wing and the Opened", [0]),   # case and punctuation do not matter
    ("clinics wings opened", []),             # whole words only: 'clinics' is not 'clinic'
    ("budget tripled", [1]),                  # claim 1 has 3 content words (the, was, by are stop words): 2/3
    ("budget", []),                           # 1/3
])
def test_a_claim_is_kept_when_at_least_60_percent_of_its_content_words_occur(summary, kept):
    claims = [_claim("The new clinic wing opened in spring"),        # content: new clinic wing opened spring
              _claim("The budget was tripled by 2020")]             # content: budget tripled 2020
    assert summary_kept(summary, claims) == kept


def test_a_claim_of_stop_words_only_is_never_kept():
    assert summary_kept("the a an of it", [_claim("It is the one of a kind")]) == []   # 'one', 'kind' absent
    assert summary_kept("anything", [_claim("the of a")]) == []


@pytest.mark.parametrize("text,budget,out,cut", [
    ("a b c d e", 5, "a b c d e", False),
    ("a b c d e", 4, "a b c d", True),
    ("a b c d e", 1, "a", True),
    ("a b c d e", 0, "", True),
    ("a b\nc d e", 3, "a b\nc", True),   # line breaks inside the prefix are kept
])
def test_the_cut_keeps_the_longest_word_prefix_that_fits(text, budget, out, cut):
    assert cut_to_budget(text, budget, Words()) == (out, cut)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["ab", "c", "de", "fgh"]), min_size=0, max_size=25), st.integers(0, 30))
def test_the_cut_fits_and_one_more_word_would_not(words, budget):
    text = " ".join(words)
    tok = default_tokenizer()
    got, cut = cut_to_budget(text, budget, tok)
    assert memory_tokens(got, tok) <= budget
    assert text.startswith(got)
    assert cut == (got != text)
    n = len(got.split())
    if cut and n < len(words):
        assert memory_tokens(" ".join(words[:n + 1]), tok) > budget


@pytest.fixture(scope="module")
def unit(dev_templates):
    return build_task(dev_templates[0], "PSP", 0, 4, default_tokenizer())


def _b3(unit, budget, answer):
    sent = []

    def summarise(prompt, max_tokens):
        sent.append((prompt, max_tokens))
        return answer

    mem = select_memory("B3", unit.claims, budget, default_tokenizer(), np.random.default_rng(0),
                        transcript=unit.transcript, task=unit.task, summarise=summarise)
    return mem, sent


class _Res:
    def __init__(self, text, error=None):
        self.text, self.error, self.cached = text, error, False


@pytest.mark.parametrize("budget", [40, 97])
def test_b3_caps_generation_at_the_budget_plus_32_and_asks_for_the_word_limit(unit, budget):
    mem, sent = _b3(unit, budget, _Res("nothing at all"))
    (prompt, max_tokens), = sent
    assert max_tokens == budget + EXTRA_TOKENS == budget + 32
    assert f"at most {word_limit(budget)} words" in prompt.text
    assert mem.meta["word_limit"] == word_limit(budget)


def test_b3_keeps_the_claims_its_summary_restates_and_fits_the_budget(unit):
    c0 = unit.claims.claims[0]
    text = c0.text + " " + " ".join(["filler"] * 300)
    mem, _ = _b3(unit, 60, _Res(text))
    tok = default_tokenizer()
    assert mem.truncated and mem.tokens == memory_tokens(mem.text, tok) <= 60
    assert memory_tokens(mem.text + " filler", tok) > 60         # one more word would not fit
    assert c0 in mem.kept and mem.kind == "summary"


def test_b3_on_a_failed_call_keeps_nothing_and_records_the_error(unit):
    mem, _ = _b3(unit, 60, _Res(unit.claims.claims[0].text, error="HTTP 500"))
    assert mem.text == "" and mem.kept == () and mem.kind == "empty" and mem.meta["error"] == "HTTP 500"
    assert mem.tokens == 0


# --- tokenizer post-processors (BOS) in budgets ----------------------------------------------------

@pytest.fixture(scope="module")
def bos_tokenizer(tmp_path_factory):
    """A word-level tokenizer.json whose post-processor adds ``<s>`` to every encoding (as Llama's do)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    words = ["[UNK]", "<s>", "[", "]", ",", "A1", "A2", "A3", "A4", "the", "clinic", "opened"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Punctuation()])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    folder = tmp_path_factory.mktemp("bos")
    tok.save(str(folder / "tokenizer.json"))
    assert len(tok.encode("the clinic").ids) == 3   # the post-processor does add BOS by default
    return folder


def test_a_bos_post_processor_is_not_priced(bos_tokenizer):
    t = HFTokenizer(bos_tokenizer)
    assert t.count("the clinic opened") == 3
    assert t.count("") == 0 and t.count("\n") == 0
    assert t.count("[A1,A2] the clinic") == 7     # [ A1 , A2 ] the clinic


def test_a_bos_post_processor_leaves_line_costs_and_t_all_exact(bos_tokenizer, dev_templates):
    t = HFTokenizer(bos_tokenizer)
    assert line_cost("[A2] the clinic", t) == 5                      # BOS priced: 5 + 2 (line and newline)
    tmpl = dev_templates[0]
    n_facts = len(tmpl.facts)
    # every fact's line is [A1,A2,A3,A4] (9 tokens) plus its words: T_all is exact, 2 BOS per line would add 2 * facts
    words = sum(t.count(f.text) for f in tmpl.facts)
    assert t_all(tmpl, t) == 9 * n_facts + words


def test_the_named_vocab_tokenizer_does_not_price_a_post_processor(bos_tokenizer):
    from tokenizers import Tokenizer

    from crossprofile_lib.task.vocabs import VocabTokenizer
    v = VocabTokenizer("bos-test", Tokenizer.from_file(str(bos_tokenizer / "tokenizer.json")), {})
    assert v.count("the clinic opened") == 3 and v.count("the clinic") == 2


# --- label controls: which agent a label names -----------------------------------------------------

def test_first_speaker_names_who_said_it_first_not_the_lowest_number():
    claims = [_claim("x", ("A1", "A3"), first=4, first_speaker="A3"), _claim("y", ("A2",), first=0, first_speaker=None)]
    lines = render_lines(claims, "first-speaker", np.random.default_rng(0))
    assert lines == [("[A3] x", 1), ("[A2] y", 1)]   # without a recorded first speaker: its only speaker


def test_claim_id_numbers_from_the_first_mention_one_based():
    claims = [_claim("x", ("A1", "A3"), first=6), _claim("y", ("A2",), first=0)]
    assert render_lines(claims, "claim-id", np.random.default_rng(0)) == [("[C07] x", 1), ("[C01] y", 1)]


def test_full_and_unlabeled_reveal_what_they_show():
    claims = [_claim("x", ("A1", "A3", "A4"), first=1), _claim("y", ("A2",))]
    assert render_lines(claims, "full", None) == [("[A1,A3,A4] x", 3), ("[A2] y", 1)]
    assert render_lines(claims, "unlabeled", None) == [("x", 1), ("y", 1)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sets(st.sampled_from(["A1", "A2", "A3", "A4"]), min_size=1), min_size=1, max_size=8),
       st.integers(0, 2**32 - 1))
def test_shuffled_moves_label_and_count_together_and_keeps_the_texts(speaker_sets, seed):
    claims = [_claim(f"t{i}", sorted(s), first=i) for i, s in enumerate(speaker_sets)]
    lines = render_lines(claims, "shuffled", np.random.default_rng(seed))
    assert [ln.split("] ", 1)[1] for ln, _ in lines] == [c.text for c in claims]   # texts stay in place
    for ln, n in lines:
        assert ln[1:].split("]")[0].count(",") + 1 == n                         # the count is the label's
    assert sorted(n for _, n in lines) == sorted(c.count for c in claims)


# --- score-mode letter variants ----------------------------------------------------------------------

def test_space_variants_are_one_choice_the_larger_wins_and_case_matters():
    top = {" A": -1.0, "A": -2.0, "a": -0.1, "B": -1.5, " B ": -3.0, "C.": -0.2}
    got = choice_logprobs(top, ["A", "B", "C"])
    assert got == {"A": -1.0, "B": -1.5}        # not the later (-2.0), not a sum, not 'a' nor 'C.'
    assert best_choice(got, ["A", "B", "C"]) == "A"
    order_flipped = choice_logprobs(dict(reversed(list(top.items()))), ["A", "B", "C"])
    assert order_flipped == got


def test_best_choice_ties_go_to_the_earlier_choice_and_unknown_letters_are_ignored():
    assert best_choice({"B": -1.0, "A": -1.0}, ["A", "B"]) == "A"
    assert best_choice({"B": -1.0, "A": -1.0}, ["B", "A"]) == "B"
    assert best_choice({"D": 0.0, "B": -3.0}, ["A", "B", "C"]) == "B"
    assert best_choice({}, ["A"]) is None and best_choice({"D": 0.0}, ["A"]) is None


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["A", " A", "A ", "B", " B", "b", "C", "\tC", "x"]),
                       st.floats(-50, 0, allow_nan=False), min_size=1))
def test_each_choice_gets_the_max_over_its_space_variants(top):
    got = choice_logprobs(top, ["A", "B", "C"])
    for c in "ABC":
        vs = [lp for t, lp in top.items() if t.strip() == c]
        assert got.get(c) == (max(vs) if vs else None)


# --- format-reminder retries and failed calls -------------------------------------------------------

def _decide(answers, unit):
    """Decide one request with a scripted backend answering ``answers`` in turn."""
    from scripted_llm import Scripted
    it = iter(answers)
    b = Scripted(lambda r: next(it))
    mem = select_memory("R1", unit.claims, 60, default_tokenizer(), None)
    d = b.decide([DecisionRequest(unit.task, mem, unit.order, "k")])[0]
    return d, b


@pytest.mark.parametrize("answers,letter,invalid,error,calls,retry", [
    (["Decision: B"], "B", False, "", 1, False),
    (["no idea", "Decision: C"], "C", False, "", 2, True),               # retried once, with the reminder
    (["no idea", "still no idea"], None, True, "", 2, True),              # unparsable twice: invalid
    ([ChatResult("", error="HTTP 500")], None, False, "HTTP 500", 1, False),   # failed: not retried, not invalid
    (["no idea", ChatResult("", error="timeout")], None, False, "timeout", 2, True),  # the retry failed: an error
    (["Decision: Z", "Decision: Z"], None, True, "", 2, True),          # a letter not offered is unparsable
])
def test_format_reminder_retries_and_failed_calls(unit, answers, letter, invalid, error, calls, retry):
    d, b = _decide(answers, unit)
    assert (d.letter, d.invalid, d.meta["error"], len(b.sent), d.meta["format_retry"]) == (letter, invalid, error,
                                                                                          calls, retry)
    if retry:
        assert b.sent[1].purpose == "decision-retry" and b.sent[1].prompt_file.startswith("format_reminder")
        assert b.sent[1].messages[-2]["role"] == "assistant"   # the unparsable answer is shown back
    assert b.stats["invalid"] == int(invalid)
    if letter:
        assert d.option == unit.order["ABC".index(letter)]


def test_score_mode_never_retries(unit):
    from scripted_llm import Scripted
    b = Scripted(lambda r: ChatResult("", choice_logprobs={}), mode="score")
    mem = select_memory("R1", unit.claims, 60, default_tokenizer(), None)
    d = b.decide([DecisionRequest(unit.task, mem, unit.order, "k")])[0]
    assert d.invalid and len(b.sent) == 1 and not d.meta["format_retry"]
    assert json.loads(d.meta["letter_logprobs"] or "{}") == {}


# --- development-half entries of the issue-34 pool (written from the entries, not from outcomes) -----

@pytest.mark.parametrize("name", ["qwen2.5", "llama-3.1"])
def test_a_line_and_its_newline_are_priced_apart(named_vocabs, name):
    """SPEC section 5: a line costs its tokens plus one newline, counted apart -- pricing them together lets
    BPE merge a final '.' with the newline (one token less per line ending in punctuation)."""
    from crossprofile_lib.task.tokenizer import get_tokenizer
    t = get_tokenizer(name)
    line = "[A1] The wing opened."
    assert line_cost(line, t) == t.count(line) + t.count("\n") == 8
    assert t.count(line + "\n") == 7                         # the near miss, one token cheaper
    assert memory_tokens(f"{line}\n{line}", t) == 16


def test_an_empty_memory_costs_nothing_and_a_line_its_newline():
    w = Words()
    assert memory_tokens("", w) == 0
    tok = default_tokenizer()
    assert memory_tokens("", tok) == 0 and memory_tokens("a", tok) == tok.count("a") + tok.count("\n")


@pytest.mark.parametrize("text,want", [
    ('{"relevant": [0, 1, 3, 9]}', [0, 2]),          # 0 and 9 are outside 1..4: dropped
    ('{"relevant": [4, 4, 2]}', [1, 3]),
    ("relevant: 1, 2 and 5", [0, 1]),
    ('{"relevant": []}', []),
    ("no idea", None),
])
def test_relevance_answers_keep_only_claim_numbers_1_to_n(text, want):
    from crossprofile_lib.backends.llm import parse_relevance
    assert parse_relevance(text, 4) == want


def test_a_failed_relevance_call_is_an_error_not_an_unusable_answer(unit):
    from scripted_llm import Scripted
    b = Scripted(lambda r: ChatResult("", error="HTTP 503"))
    rel = b.relevance(unit.task, unit.claims)
    assert rel.error == "HTTP 503" and not rel.invalid and b.stats["relevance_invalid"] == 0
    b2 = Scripted(lambda r: "I cannot tell")
    rel2 = b2.relevance(unit.task, unit.claims)
    assert rel2.invalid and not rel2.error and b2.stats["relevance_invalid"] == 1


@pytest.mark.parametrize("v,want", [("auto", "auto"), (" AUTO ", "auto"), (1, 1), (1024, 1024), (4.0, 4),
                                    (0, "at least 1"), ("3", "'auto' or an integer"), (-1, "at least 1"),
                                    (2.5, "an integer"), (True, "an integer"), ("many", "'auto' or an integer")])
def test_concurrency_is_auto_or_a_positive_integer(v, want, tmp_path):
    from crossprofile_lib.backends import get_backend

    def make():
        return get_backend("openai/m", base_url="http://127.0.0.1:9/v1", cache=tmp_path / "c", tokenizer="offline",
                           concurrency=v)
    if want in ("auto", 1, 1024, 4):
        assert make().concurrency == want
    else:
        with pytest.raises(ValueError, match=f"option concurrency=.*must be {want}"):
            make()
