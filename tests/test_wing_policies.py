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


# --- the rest of the wing (issue 55: the seed-55 sample's survivors) -----------------------------------------------
# Each test pins one rule a user meets: which claims a memory keeps and its kind, the refusals of a policy file and
# what they name (the file, the rule, the policy, the tokenizer), where an installed package's policies come from.

import hashlib  # noqa: E402
import sys  # noqa: E402
import types  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from policy_registry import policy_registry_kept  # noqa: E402

from crossprofile_lib.backends.base import ChatResult  # noqa: E402
from crossprofile_lib.policies import plugins  # noqa: E402
from crossprofile_lib.policies.bal import pack_balanced  # noqa: E402
from crossprofile_lib.policies.guard import (  # noqa: E402
    Guard,
    PolicyFileError,
    contained,
    foreign_line,
    private_copies,
)
from crossprofile_lib.policies.registry import parse_policy  # noqa: E402
from crossprofile_lib.policies.select import PolicyInputs, select_memory  # noqa: E402
from crossprofile_lib.task.discussion import Claim, ClaimList, Transcript, Utterance  # noqa: E402
from crossprofile_lib.task.evidence import Stance  # noqa: E402
from crossprofile_lib.task.memory import Memory  # noqa: E402


@pytest.fixture
def registry():
    """Plug-ins a test loads are removed after it; the installed packages' entry points are looked at afresh."""
    with policy_registry_kept():
        yield plugins


def claim_list():
    """Three claims: one by A1 (cost 3 words with its label), one by A1 and A2 (2), one by A2 (4)."""
    return ClaimList((Claim("alpha bravo", ("A1",), 0), Claim("charlie", ("A1", "A2"), 1),
                      Claim("delta echo foxtrot", ("A2",), 2)), ("A1", "A2"), ("A1", "A2"))


def transcript():
    return Transcript(("A1", "A2"), (Utterance(0, "A1", "alpha bravo"), Utterance(1, "A2", "charlie")))


def write(tmp_path, name, body):
    f = tmp_path / name
    f.write_text("from crossprofile_lib.policies import Policy\nfrom crossprofile_lib.task.memory import Memory\n"
                 + body)
    return f


# copy policies: the memory's kind, the REF and R1-rel refusals, private-only / shared-only

def test_a_copy_memory_is_of_kind_claims_and_one_keeping_nothing_is_empty():
    tok, cl = Words(), claim_list()
    full = select_memory("B4", cl, 10, tok, np.random.default_rng(0))
    assert full.kind == "claims" and [c.text for c in full.kept] == ["alpha bravo", "charlie", "delta echo foxtrot"]
    assert full.tokens == 9 and full.text == "[A1] alpha bravo\n[A1,A2] charlie\n[A2] delta echo foxtrot"
    some = select_memory("B4", cl, 8, tok, np.random.default_rng(0))   # 3 + 2 fit, the third (4) does not
    assert some.kind == "claims" and [c.text for c in some.kept] == ["alpha bravo", "charlie"]
    none = select_memory("B4", cl, 1, tok, np.random.default_rng(0))
    assert none.kind == "empty" and none.kept == () and none.text == "" and none.tokens == 0


def test_private_only_keeps_the_claims_one_speaker_stated_and_shared_only_the_others():
    tok, cl = Words(), claim_list()
    assert [c.text for c in select_memory("private-only", cl, None, tok, None).kept] == ["alpha bravo",
                                                                                        "delta echo foxtrot"]
    assert [c.text for c in select_memory("shared-only", cl, None, tok, None).kept] == ["charlie"]
    # the builder behind both: the claims a predicate accepts, in first-mention order, as labelled lines
    from crossprofile_lib.policies.copy import _keep
    x = PolicyInputs(cl, tok, None)
    mem = _keep(lambda c: "A2" in c.speakers)(parse_policy("ALL"), x)
    assert mem.kind == "claims" and mem.text == "[A1,A2] charlie\n[A2] delta echo foxtrot" and mem.tokens == 6
    assert _keep(lambda c: False)(parse_policy("ALL"), x).kind == "empty"


def test_ref_without_a_transcript_is_refused_by_name_and_with_one_is_the_transcript():
    tok, cl = Words(), claim_list()
    with pytest.raises(ValueError, match="REF needs the transcript"):
        select_memory("REF", cl, None, tok, None)
    mem = select_memory("REF", cl, None, tok, None, transcript=transcript())
    assert mem.kind == "transcript" and mem.text == "A1: alpha bravo\nA2: charlie" and mem.tokens == 5
    assert mem.revealed == (1, 2, 1)


def test_r1_rel_without_a_relevance_filter_is_refused_naming_the_policy():
    with pytest.raises(ValueError, match="R1-rel needs a relevance filter"):
        select_memory("R1-rel", claim_list(), 10, Words(), None)


def test_bal_fills_the_rest_with_stanceless_claims_first_fit_counting_what_they_use():
    tok, cl = Words(), claim_list()
    # no stances: first-fit in first-mention order; 3 + 2 = 5 used, the third (4) fits in 9, not in 8
    assert pack_balanced(cl, [None, None, None], 5, tok) == [0, 1]
    assert pack_balanced(cl, [None, None, None], 8, tok) == [0, 1]
    assert pack_balanced(cl, [None, None, None], 9, tok) == [0, 1, 2]
    assert pack_balanced(cl, [None, None, None], 4, tok) == [0]        # 3, then 2 more would be 5
    # a relevant claim first (2), then the stance-less ones: 2 + 3 = 5, the 4-word one fits in 9, not in 8
    st = [None, Stance("A", 1, True), None]
    assert pack_balanced(cl, st, 8, tok) == [1, 0]
    assert pack_balanced(cl, st, 9, tok) == [1, 0, 2]


def test_b3_records_whether_its_summary_came_from_the_cache(monkeypatch):
    from crossprofile_lib.policies import b3
    monkeypatch.setattr(b3, "summary_prompt", lambda task, transcript, budget: (SimpleNamespace(file="b3.txt", sha="s"),
                                                                                budget + 32))
    for cached in (True, False):
        x = SimpleNamespace(summarise=lambda prompt, max_tokens: ChatResult("alpha bravo", cached=cached), budget=13,
                            task=None, transcript=None, tokenizer=Words(), claims=claim_list())
        mem = b3.build_b3(parse_policy("B3"), x)
        assert mem.meta["cached"] is cached and mem.meta["prompt_file"] == "b3.txt" and mem.text == "alpha bravo"


def test_an_empty_policy_name_is_an_unknown_policy():
    for spec in ("", "   ", "a\nb"):
        with pytest.raises(ValueError, match="unknown policy"):
            parse_policy(spec)


# the rule 'facts': a line of an unbudgeted memory must be a line that was said

def test_a_claim_label_may_name_a_speaker_the_claims_record():
    """The agents a label may name are the discussion's and every claim's speakers (B7 is only a claim's)."""
    cl = ClaimList((Claim("the bridge is closed", ("B7",), 0),), ("A1",), ("A1",))
    assert foreign_line("[B7] the bridge is closed", cl, None) is None
    assert foreign_line("[Z9] the bridge is closed", cl, None) == (1, "[Z9] the bridge is closed")
    assert foreign_line("[C07] the bridge is closed", cl, None) is None   # a claim id


def test_a_memory_checked_against_the_transcript_alone_needs_no_claim_list():
    tr = transcript()
    assert foreign_line("A1: alpha bravo\ncharlie", None, tr) is None
    assert foreign_line("alpha bravo\ninvented", None, tr) == (2, "invented")


def test_layout_lines_pass_and_the_lines_after_them_are_still_checked():
    cl = claim_list()
    assert foreign_line("---\n[A1] alpha bravo\n***", cl, None) is None
    assert foreign_line("---\n\n  \nan invented line\n[A1] alpha bravo", cl, None) == (4, "an invented line")


def test_an_unbudgeted_policy_file_stating_an_invented_line_is_refused_by_the_facts_rule(registry, tmp_path):
    f = write(tmp_path, "inventor.py", "def build(spec, x):\n"
                                       "    return Memory(spec.name, 'claims', (), (), 'an invented fact', 0)\n"
                                       "POLICY = Policy('Inventor', 'unbudgeted', build=build)\n")
    with pytest.raises(PolicyFileError) as e:
        registry.load(str(f))
    assert e.value.rule == "facts" and e.value.source == str(f)
    msg = str(e.value)
    assert f"{f}: facts:" in msg and "policy 'Inventor'" in msg and "line 1 of its memory text" in msg
    assert "'an invented fact'" in msg and "Inventor" not in registry.REGISTRY
    ok = write(tmp_path, "quoter.py", "def build(spec, x):\n"
                                      "    c = x.claims.claims[0]\n"
                                      "    return Memory(spec.name, 'claims', (c,), (1,), c.line(), 3)\n"
                                      "POLICY = Policy('Quoter', 'unbudgeted', build=build)\n")
    assert registry.load(str(ok)).policies == ("Quoter",)
    # the discussion's own lines pass too, with their speaker labels (the REF memory's text)
    ref = write(tmp_path, "echo.py", "def build(spec, x):\n"
                                     "    t = x.transcript.render()\n"
                                     "    return Memory(spec.name, 'transcript', (), (), t, 0)\n"
                                     "POLICY = Policy('Echo', 'unbudgeted', build=build)\n")
    assert registry.load(str(ref)).policies == ("Echo",)


def test_a_generated_policys_text_over_budget_is_refused_naming_the_runs_tokenizer(registry, tmp_path):
    f = write(tmp_path, "wordy.py", "def build(spec, x):\n"
                                    "    return Memory(spec.name, 'summary', (), (), 'one two three four five', 1)\n"
                                    "POLICY = Policy('Wordy', 'generated', build=build)\n")
    registry.load(str(f))    # a generated policy gets no trial
    with pytest.raises(PolicyFileError) as e:
        select_memory("Wordy", claim_list(), 3, Words(), np.random.default_rng(0))
    assert e.value.rule == "budget"
    assert str(e.value) == (f"{f}: budget: policy 'Wordy': its memory text is 5 tokens by the run's tokenizer (words), "
                            f"over its budget of 3 tokens (it reported 1)")
    assert select_memory("Wordy", claim_list(), 5, Words(), np.random.default_rng(0)).text == "one two three four five"


def test_a_memory_that_is_not_plain_values_is_refused_as_trial_while_loading_and_memory_in_a_run(registry, tmp_path):
    bad = write(tmp_path, "odd.py", "def build(spec, x):\n"
                                    "    return Memory(spec.name, 'claims', (), ('x',), '', 0)\n"
                                    "POLICY = Policy('Odd', 'unbudgeted', build=build)\n")
    with pytest.raises(PolicyFileError) as e:
        registry.load(str(bad))
    assert e.value.rule == "trial" and f"{bad}: trial:" in str(e.value)
    assert "its memory cannot be read as plain values (ValueError" in str(e.value)
    late = write(tmp_path, "late.py", "CALLS = []\n"
                                      "def build(spec, x):\n"
                                      "    CALLS.append(1)\n"
                                      "    return Memory(spec.name, 'claims', (), ('x',) if len(CALLS) > 2 else (), '', 0)\n"
                                      "POLICY = Policy('Late', 'unbudgeted', build=build)\n")
    registry.load(str(late))   # the trial's two memories pass
    with pytest.raises(PolicyFileError) as e:
        select_memory("Late", claim_list(), None, Words(), None)
    assert e.value.rule == "memory" and f"{late}: memory:" in str(e.value)
    assert "cannot be read as plain values" in str(e.value)


def test_a_packer_returning_a_claim_that_does_not_exist_is_refused_naming_the_policy(registry, tmp_path):
    f = write(tmp_path, "packer.py", "POLICY = Policy('Packer', 'copy', order=lambda cl, ctx: list(range(len(cl))),\n"
                                     "                packer=lambda cl, order, budget, tok, ctx: [len(cl)])\n")
    with pytest.raises(PolicyFileError) as e:
        registry.load(str(f))
    assert e.value.rule == "trial" and f"{f}: trial: policy 'Packer' returned claim" in str(e.value)
    assert "which does not exist" in str(e.value)


def test_an_error_raised_outside_the_policy_file_names_no_line_of_it(tmp_path):
    with pytest.raises(PolicyFileError) as e:
        with contained("mine.py", "policy 'Mine': order()", str(tmp_path / "mine.py")):
            raise RuntimeError("boom")
    assert str(e.value) == "mine.py: memory: policy 'Mine': order() raised RuntimeError: boom"


# the guard's view of the suite's callables

def test_a_policy_calls_summarise_and_the_tokenizer_with_keyword_arguments_as_the_suite_would():
    inputs = PolicyInputs(claim_list(), Words(), None, summarise=lambda prompt, max_tokens=0: f"{prompt}|{max_tokens}")
    (own,), _ = private_copies((inputs,), {})
    assert own.summarise("p", max_tokens=7) == "p|7"
    assert own.tokenizer.count(text="a b c") == 3 and own.tokenizer.encode(text="a b") == ["a", "b"]
    assert own.claims == inputs.claims and own.claims is not inputs.claims    # a private copy


def test_what_the_suites_summarise_raises_is_the_suites_failure_not_the_policy_files(tmp_path):
    def down(prompt, max_tokens):
        raise RuntimeError("server down")

    def build(spec, x):
        return x.summarise("p", 5)

    inputs = PolicyInputs(claim_list(), Words(), None, budget=10, summarise=down)
    g = Guard(build, "mine.py", str(tmp_path / "mine.py"), "Mine", "build", "generated")
    with pytest.raises(RuntimeError, match="server down"):
        g(parse_policy("B3"), inputs)

    def own_fault(spec, x):
        raise RuntimeError("my bug")
    g = Guard(own_fault, "mine.py", str(tmp_path / "mine.py"), "Mine", "build", "generated")
    with pytest.raises(PolicyFileError, match="mine.py: memory: policy 'Mine': build\\(\\) raised RuntimeError: my bug"):
        g(parse_policy("B3"), inputs)


# loading policy files: each refusal names the file and its rule

def test_an_empty_policy_file_path_is_refused_by_the_exists_rule(registry):
    with pytest.raises(PolicyFileError) as e:
        registry.load("   ")
    assert e.value.rule == "exists" and str(e.value) == "<policy file>: exists: empty path"


def test_a_spec_with_a_path_separator_is_a_file_even_without_py(registry, tmp_path):
    for spec in (str(tmp_path / "nodir" / "mine"), "nodir\\mine"):
        with pytest.raises(PolicyFileError) as e:
            registry.load(spec)
        assert e.value.rule == "exists" and str(e.value) == f"{spec}: exists: no such file"


def test_a_policy_file_that_is_not_one_python_file_is_refused_by_the_type_rule(registry, tmp_path):
    (tmp_path / "folder.py").mkdir()
    (tmp_path / "mine.txt").write_text("POLICY = None\n")
    for f in (tmp_path / "folder.py", tmp_path / "mine.txt"):
        with pytest.raises(PolicyFileError) as e:
            registry.load(str(f))
        assert e.value.rule == "type" and str(e.value) == f"{f}: type: a policy file is one Python file (*.py)"


def test_an_empty_policies_list_is_refused_by_the_attribute_rule(registry, tmp_path):
    f = write(tmp_path, "none.py", "POLICIES = []\n")
    with pytest.raises(PolicyFileError) as e:
        registry.load(str(f))
    assert e.value.rule == "attribute"
    assert str(e.value) == f"{f}: attribute: POLICIES is an empty list (give at least one Policy)"


def test_one_name_twice_in_a_file_is_refused_by_the_clash_rule(registry, tmp_path):
    f = write(tmp_path, "twins.py", "o = lambda cl, ctx: list(range(len(cl)))\n"
                                    "POLICIES = [Policy('Twin', 'copy', order=o), Policy('Twin', 'copy', order=o)]\n")
    with pytest.raises(PolicyFileError) as e:
        registry.load(str(f))
    assert e.value.rule == "clash" and str(e.value) == f"{f}: clash: the same policy name appears twice (Twin, Twin)"
    assert "Twin" not in registry.REGISTRY


# a run's recorded policy files (stats, the book): which file to pass, named

def test_a_recorded_policy_file_that_changed_is_refused_quoting_the_recorded_hash(registry, tmp_path):
    f = tmp_path / "mine.py"
    f.write_text("# changed\n")
    rec = {"origin": "file", "spec": str(f), "path": str(f), "sha256": "0123456789abcdef" * 4, "policies": ["Gone"]}
    with pytest.raises(PolicyFileError) as e:
        registry.ensure_recorded([rec])
    assert e.value.rule == "hash" and e.value.source == str(f)
    assert f"{f}: hash: run.json records this policy file with SHA-256 0123456789ab..., but the file has changed" \
        in str(e.value)


def test_a_recorded_policy_source_not_there_is_named_by_its_spec_else_its_path(registry, tmp_path):
    cases = [({"origin": "module", "spec": "mypkg.pols:EP", "path": "/x/mypkg/pols.py", "policies": ["Gone"]},
              "mypkg.pols:EP"),
             ({"origin": "file", "path": str(tmp_path / "moved.py"), "policies": ["Gone", "AlsoGone"]},
              str(tmp_path / "moved.py")),
             ({"origin": "entry point", "policies": ["Gone"]}, "?")]
    for rec, named in cases:
        with pytest.raises(PolicyFileError) as e:
            registry.ensure_recorded([rec])
        assert e.value.rule == "exists" and e.value.source == named
        assert str(e.value).startswith(f"{named}: exists: run.json names policies {', '.join(rec['policies'])} "
                                       f"from this source; pass it with --policy-file")
    with pytest.raises(PolicyFileError, match="results.json names policies Gone"):
        registry.ensure_recorded([cases[0][0]], where="results.json")
    registry.ensure_recorded([{"origin": "module", "spec": "x", "policies": ["R1"]}])   # registered: nothing to do


# an installed package's entry points (group crossprofile.policies), loaded in this process

def _dist(tmp_path, monkeypatch, lines):
    dist = tmp_path / "wingpol-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: wingpol\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[crossprofile.policies]\n" + "".join(f"{ln}\n" for ln in lines))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_installed_loaded", False)


def test_an_installed_packages_policies_are_registered_with_where_they_came_from(registry, tmp_path, monkeypatch):
    (tmp_path / "wingpol_file.py").write_text("from crossprofile_lib.policies import Policy\n"
                                              "EP = [Policy('EPFile', 'copy', order=lambda cl, ctx: list(range(len(cl))))]\n")
    mem = types.ModuleType("wingpol_mem")   # a module with no file behind it
    mem.EP = __import__("crossprofile_lib.policies", fromlist=["Policy"]).Policy(
        "EPMem", "copy", order=lambda cl, ctx: list(range(len(cl))))
    monkeypatch.setitem(sys.modules, "wingpol_mem", mem)
    monkeypatch.delitem(sys.modules, "wingpol_file", raising=False)
    _dist(tmp_path, monkeypatch, ["file = wingpol_file:EP", "mem = wingpol_mem:EP"])
    try:
        out = {s.policies: s for s in registry.load_installed()}
    finally:
        sys.modules.pop("wingpol_file", None)
    assert set(out) == {("EPFile",), ("EPMem",)}
    f, m = out[("EPFile",)], out[("EPMem",)]
    assert f.origin == m.origin == "entry point"
    assert f.spec == "entry point 'file = wingpol_file:EP' (crossprofile.policies, package wingpol)"
    assert f.path == str((tmp_path / "wingpol_file.py").resolve())
    assert f.sha256 == hashlib.sha256((tmp_path / "wingpol_file.py").read_bytes()).hexdigest()
    assert m.path == "" and m.sha256 == ""   # no file: no path, no hash
    assert {"EPFile", "EPMem"} <= set(registry.REGISTRY) and registry.PLUGINS["EPMem"] is m
    assert registry.load_installed() == []   # once per process


def test_an_installed_package_that_fails_to_load_is_refused_naming_its_entry_point(registry, tmp_path, monkeypatch):
    (tmp_path / "wingpol_broken.py").write_text("raise RuntimeError('cannot start')\n")
    _dist(tmp_path, monkeypatch, ["broken = wingpol_broken:EP"])
    try:
        with pytest.raises(PolicyFileError) as e:
            registry.load_installed()
    finally:
        sys.modules.pop("wingpol_broken", None)
    label = "entry point 'broken = wingpol_broken:EP' (crossprofile.policies, package wingpol)"
    assert e.value.rule == "import" and e.value.source == label
    assert str(e.value).startswith(f"{label}: import: loading it raised RuntimeError: cannot start")


def test_an_installed_policy_named_like_a_built_in_is_refused_naming_its_entry_point(registry, tmp_path, monkeypatch):
    (tmp_path / "wingpol_clash.py").write_text("from crossprofile_lib.policies import Policy\n"
                                               "EP = Policy('R1', 'copy', order=lambda cl, ctx: list(range(len(cl))))\n")
    _dist(tmp_path, monkeypatch, ["clash = wingpol_clash:EP"])
    try:
        with pytest.raises(PolicyFileError) as e:
            registry.load_installed()
    finally:
        sys.modules.pop("wingpol_clash", None)
    label = "entry point 'clash = wingpol_clash:EP' (crossprofile.policies, package wingpol)"
    assert e.value.rule == "clash" and str(e.value).startswith(f"{label}: clash: policy name 'R1' is a built-in")


# --- the fresh seed-56 sample's survivors --------------------------------------------------------------------------

def test_a_claim_label_may_name_any_agent_of_the_speaking_order():
    """A3 spoke (the speaking order) but is neither in the claim list's agents nor a claim's speaker."""
    cl = ClaimList((Claim("the bridge is closed", ("A1",), 0),), ("A1", "A3"))
    assert foreign_line("[A3] the bridge is closed", cl, None) is None
    assert foreign_line("[A1,A3] the bridge is closed", cl, None) is None
    assert foreign_line("[A4] the bridge is closed", cl, None) == (1, "[A4] the bridge is closed")


def test_a_packer_may_not_change_the_runs_tokenizer(registry, tmp_path):
    f = write(tmp_path, "rename.py", "def packer(cl, order, budget, tok, ctx):\n"
                                     "    tok.name = 'mine'\n"
                                     "    return list(order)[:1]\n"
                                     "POLICY = Policy('Rename', 'copy', order=lambda cl, ctx: list(range(len(cl))),\n"
                                     "                packer=packer)\n")
    with pytest.raises(PolicyFileError) as e:
        registry.load(str(f))
    assert e.value.rule == "trial" and "policy 'Rename': packer() raised AttributeError" in str(e.value)
    assert "the run's name is read-only to a policy" in str(e.value)


def test_a_packers_private_copies_wrap_only_the_tokenizer_and_leave_missing_inputs_missing():
    tok, cl = Words(), claim_list()
    ctx = __import__("crossprofile_lib.policies.registry", fromlist=["PolicyContext"]).PolicyContext(None)
    (cl2, order2, budget2, tok2, ctx2), _ = private_copies((cl, [0, 1], 5, tok, ctx), {})
    assert tok2.count("a b c") == 3 and tok2.name == "words"
    with pytest.raises(AttributeError, match="read-only"):
        tok2.name = "mine"
    assert tok.name == "words"
    assert ctx2.rng is None and ctx2.relevant is None and ctx2.stances is None
    assert cl2 == cl and cl2 is not cl and order2 == [0, 1] and budget2 == 5


def test_a_guarded_build_called_with_keyword_arguments_is_checked_and_copied_the_same(tmp_path):
    def invent(spec, inputs):
        return Memory(spec.name, "claims", (), (), "an invented fact", 0)

    def rename(spec, inputs):
        inputs.tokenizer.name = "mine"

    inputs = PolicyInputs(claim_list(), Words(), None, transcript=transcript())
    g = Guard(invent, "mine.py", str(tmp_path / "mine.py"), "Mine", "build", "unbudgeted")
    with pytest.raises(PolicyFileError, match="mine.py: facts: policy 'Mine': line 1 of its memory text"):
        g(spec=parse_policy("ALL"), inputs=inputs)
    g = Guard(rename, "mine.py", str(tmp_path / "mine.py"), "Mine", "build", "unbudgeted")
    with pytest.raises(PolicyFileError, match="read-only to a policy"):
        g(spec=parse_policy("ALL"), inputs=inputs)
    assert inputs.tokenizer.name == "words"


def test_a_packer_that_is_not_callable_is_refused_by_the_attribute_rule(registry, tmp_path):
    f = write(tmp_path, "badpacker.py", "POLICY = Policy('BadPacker', 'copy', order=lambda cl, ctx: [0], packer=5)\n")
    with pytest.raises(PolicyFileError) as e:
        registry.load(str(f))
    assert str(e.value) == f"{f}: attribute: policy 'BadPacker': packer must be callable"


def test_a_policy_file_that_is_a_fifo_is_refused_naming_a_policy_file(registry, tmp_path):
    import os
    f = tmp_path / "pipe.py"
    os.mkfifo(f)
    with pytest.raises(PolicyFileError) as e:
        registry.load(str(f))
    assert e.value.rule == "file" and str(e.value).startswith(f"{f}: file: ")
    assert "a FIFO (named pipe); a policy file must be a regular file" in str(e.value)


def test_a_policy_file_runs_as_a_module_named_for_its_file_and_its_content(registry, tmp_path):
    f = write(tmp_path, "my-policy v2.py", "POLICY = Policy('Named', 'copy', order=lambda cl, ctx: list(range(len(cl))))\n"
                                           "NAME = __name__\n")
    registry.load(str(f))
    sha = hashlib.sha256(f.read_bytes()).hexdigest()
    name = f"crossprofile_user_policy_my_policy_v2_{sha[:12]}"
    try:
        assert sys.modules[name].NAME == name and registry.REGISTRY["Named"].order.__module__ == name
    finally:
        sys.modules.pop(name, None)


def test_an_import_error_of_a_policy_file_names_the_line_that_raised(registry, tmp_path):
    f = tmp_path / "boom.py"
    f.write_text("import os\n\nraise RuntimeError('boom')\n")
    with pytest.raises(PolicyFileError) as e:
        registry.load(str(f))
    assert str(e.value) == f"{f}: import: importing it raised RuntimeError: boom (line 3)"


def test_a_module_object_it_lacks_is_refused_by_the_attribute_rule_naming_it(registry):
    with pytest.raises(PolicyFileError) as e:
        registry.load("json:NO_SUCH_POLICIES")
    assert str(e.value) == "json:NO_SUCH_POLICIES: attribute: the module has no attribute 'NO_SUCH_POLICIES'"


def test_a_module_policy_records_the_modules_file_and_its_hash(registry, tmp_path, monkeypatch):
    m = tmp_path / "wingpol_module.py"
    m.write_text("from crossprofile_lib.policies import Policy\n"
                 "MINE = Policy('ModMine', 'copy', order=lambda cl, ctx: list(range(len(cl))))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        src = registry.load("wingpol_module:MINE")
    finally:
        sys.modules.pop("wingpol_module", None)
    assert src.origin == "module" and src.spec == "wingpol_module:MINE" and src.policies == ("ModMine",)
    assert src.path == str(m.resolve()) and src.sha256 == hashlib.sha256(m.read_bytes()).hexdigest()


def test_the_suites_tokenizer_failing_in_the_trial_is_reported_naming_where(registry, tmp_path, monkeypatch):
    """What the suite's own tokenizer raises while a policy calls it is not the policy's fault (it passes the
    guard); the trial reports it naming the policy, the template, variant, seed and budget, and the error."""
    class Flaky(Words):
        name = "flaky"

        def count(self, text):
            if text == "boom":
                raise ValueError("tokenizer gone")
            return super().count(text)
    monkeypatch.setattr(plugins, "default_tokenizer", Flaky)
    f = write(tmp_path, "counter.py", "def packer(cl, order, budget, tok, ctx):\n"
                                      "    tok.count('boom')\n"
                                      "    return []\n"
                                      "POLICY = Policy('Counter', 'copy', order=lambda cl, ctx: [], packer=packer)\n")
    with pytest.raises(PolicyFileError) as e:
        registry.load(str(f))
    assert e.value.rule == "trial"
    assert str(e.value) == (f"{f}: trial: policy 'Counter' failed on template dev-bridge-contractor-01 (PSP, seed 0, "
                            f"budget 0.6): ValueError: tokenizer gone")


def test_sources_lists_the_file_behind_a_policy_spec_with_its_suffixes(registry, tmp_path):
    f = write(tmp_path, "src.py", "POLICY = Policy('Sourced', 'copy', order=lambda cl, ctx: list(range(len(cl))))\n")
    src = registry.load(str(f))
    assert registry.base("Sourced-k7:unlabeled") == "Sourced" and registry.base("R1-rel") == "R1-rel"
    assert registry.sources(["Sourced-k7:unlabeled"]) == [src.as_dict()]
    assert registry.sources(["Sourced:shuffled", "Sourced-k3"]) == [src.as_dict()]
    assert registry.sources(["R1", "B4-k7"]) == []


def test_a_policy_name_registered_twice_is_refused_naming_it():
    from crossprofile_lib.policies.registry import Policy, register
    with pytest.raises(ValueError, match="policy 'R1' is registered twice"):
        register(Policy("R1", "copy", order=lambda cl, ctx: []))


def _build_guard(build, policy="Str"):
    return Guard(build, "/x/p.py", "/x/p.py", policy, "build", "unbudgeted")


def test_a_build_returning_no_memory_is_refused_by_rule_type_naming_what_it_returned():
    from crossprofile_lib.task.memory import Memory
    with pytest.raises(PolicyFileError) as e:
        _build_guard(lambda spec, inputs: "all of it")(None, None)
    assert (str(e.value), e.value.rule) == (
        "/x/p.py: type: policy 'Str': build() returned a str, not a crossprofile_lib.task.memory.Memory", "type")
    with pytest.raises(PolicyFileError) as e:
        _build_guard(lambda spec, inputs: Memory("Str", "claims", (), (), b"x", 1))(None, None)
    assert (str(e.value), e.value.rule) == (
        "/x/p.py: type: policy 'Str': build() returned a memory whose text is a bytes, not a str", "type")


def test_a_build_called_with_keywords_is_checked_against_the_claim_list_like_one_called_by_position():
    from crossprofile_lib.task.memory import Memory
    c1, c2 = Claim("Helix is fast.", ("A1",), 0), Claim("Medora is cheap.", ("A2",), 1)
    stray = Claim("Corvane was fined.", ("A3",), 2)
    guard = _build_guard(lambda spec, inputs: Memory("R1", "claims", (stray,), (1,), "x", 1), "R1")
    inputs = SimpleNamespace(claims=ClaimList((c1, c2), ("A1", "A2")))
    for call in (lambda: guard(parse_policy("R1"), inputs), lambda: guard(spec=parse_policy("R1"), inputs=inputs)):
        with pytest.raises(PolicyFileError) as e:
            call()
        assert str(e.value).startswith("R1: memory: policy 'R1' kept a claim that is not in the claim list: "
                                        "Claim(text='Corvane was fined.'")


def test_a_refusal_for_a_policy_no_file_declared_names_its_base():
    from crossprofile_lib.policies.guard import refusal
    e = refusal(parse_policy("R1-k7"), "boom")
    assert (str(e), e.source, e.rule) == ("R1: memory: boom", "R1", "memory")


@pytest.mark.parametrize("name", ["1bad", "has space", ""])
def test_a_declared_policy_name_must_start_with_a_letter_rule_name(name):
    from crossprofile_lib.policies import Policy
    with pytest.raises(PolicyFileError) as e:
        plugins._check_declaration(Policy(name, "unbudgeted", build=lambda s, x: None), "/x/p.py")
    assert (str(e.value), e.value.rule) == (
        f"/x/p.py: name: policy name '{name}' must start with a letter and hold only letters, digits, '_', '.' or '-'",
        "name")
