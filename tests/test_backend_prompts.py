"""Prompt files and the strict formatter: what a model may and may not see."""

import re

import numpy as np
import pytest

from crossprofile_lib import prompts as P
from crossprofile_lib.backends.cache import messages_sha
from crossprofile_lib.policies import DEFAULT_POLICIES, parse_policy, select_memory
from crossprofile_lib.policies.b3 import summary_prompt, word_limit
from crossprofile_lib.task.budgets import Budget, t_all
from crossprofile_lib.task.decision import option_order
from crossprofile_lib.task.discussion import claim_list, make_task, scripted_discussion
from crossprofile_lib.task.tokenizer import default_tokenizer
from crossprofile_lib.task.variants import VARIANT_NAMES, agent_names


def test_every_prompt_file_exists_and_has_its_fields():
    assert P.fields_of(P.DECISION) == {"description", "options", "memory", "letters"}
    assert P.fields_of(P.FORMAT_REMINDER) == {"letters"}
    assert P.fields_of(P.RELEVANCE) == {"description", "options", "facts"}
    assert P.fields_of(P.B3_SUMMARY) == {"description", "options", "transcript", "word_limit"}


def test_missing_and_extra_fields_fail_loudly():
    with pytest.raises(P.PromptError, match=r"decision_v1.txt: field 'memory' has no value"):
        P.render(P.DECISION, description="d", options="o", letters="A or B")
    with pytest.raises(P.PromptError, match=r"field 'role' is not a placeholder"):
        P.render(P.FORMAT_REMINDER, letters="A or B", role="support")


def test_bad_placeholder_and_missing_file_named(tmp_path, monkeypatch):
    (tmp_path / "x_v1.txt").write_text("Hello {name.attr}\n")
    monkeypatch.setenv("CROSSPROFILE_PROMPTS", str(tmp_path))
    with pytest.raises(P.PromptError, match=r"x_v1.txt: placeholder .* is not a plain field name"):
        P.render("x_v1.txt", name="n")
    with pytest.raises(P.PromptError, match=r"nope_v1.txt: prompt file not found"):
        P.render("nope_v1.txt")


def test_the_word_decoy_is_refused(tmp_path, monkeypatch):
    (tmp_path / "y_v1.txt").write_text("{x}\n")
    monkeypatch.setenv("CROSSPROFILE_PROMPTS", str(tmp_path))
    with pytest.raises(P.PromptError, match="no prompt names a fact's role"):
        P.render("y_v1.txt", x="this fact is a decoy")


def test_sha_is_of_the_rendered_text_and_matches_the_call_record():
    p = P.render(P.FORMAT_REMINDER, letters="A, B or C")
    import hashlib
    assert p.sha == hashlib.sha256(p.text.encode()).hexdigest()[:16]
    assert messages_sha([p.message()]) == p.sha


def test_b3_word_limit():
    assert [word_limit(b) for b in (0, 1, 2, 13, 26, 100, 130)] == [1, 1, 1, 10, 20, 76, 100]


def _all_prompts(templates):
    """Every decision, relevance and B3 prompt of a small grid (all policies but B3, 2 seeds)."""
    tok = default_tokenizer()
    specs = [parse_policy(p) for p in DEFAULT_POLICIES]
    for t in templates:
        total = t_all(t, tok)
        for v in VARIANT_NAMES:
            for seed in (0, 1):
                task = make_task(t, v, seed)
                tr = scripted_discussion(task)
                cl = claim_list(tr, agent_names(4))
                order = option_order(task)
                yield t, task, P.relevance_prompt(task, cl.claims, order)
                yield t, task, summary_prompt(task, tr, Budget.parse("0.6").tokens(total))[0]
                for spec in specs:
                    rel = frozenset(range(6)) if spec.base.startswith("R1-rel") else None
                    mem = select_memory(spec, cl, Budget.parse("0.6").tokens(total), tok,
                                        np.random.default_rng(seed), transcript=tr, relevant=rel)
                    yield t, task, P.decision_prompt(task, mem, order)


def test_no_prompt_contains_a_role_the_key_or_the_word_decoy(dev_templates):
    n = 0
    for t, task, p in _all_prompts(dev_templates):
        n += 1
        text = p.text
        assert not re.search(r"decoy", text, re.IGNORECASE), p.file
        # remove what the template itself says; what is left is the prompt file and the labels
        rest = text.replace(t.description.strip(), "")
        for f in t.facts:
            rest = rest.replace(f.text, "")
        for o in t.options:
            rest = rest.replace(o.name, "")
        for word in ("support", "irrelevant", "role", "correct", "answer key", "polarity", "criterion",
                     "private", "shared", t.correct_option, t.decoy_option):
            assert not re.search(rf"\b{re.escape(word)}\b", rest, re.IGNORECASE), (p.file, word, rest)
        assert not re.search(r"\bF\d\d\b", text), "fact ids are never shown"
        assert t.title not in text
    assert n > 1000


def test_decision_prompt_shows_rotated_lettered_options_and_the_memory(dev_templates, hospital):
    tok = default_tokenizer()
    firsts = set()
    for seed in range(3):
        task = make_task(hospital, "PSP", seed)
        tr = scripted_discussion(task)
        cl = claim_list(tr, agent_names(4))
        mem = select_memory("ALL", cl, None, tok, np.random.default_rng(0))
        order = option_order(task)
        p = P.decision_prompt(task, mem, order)
        lines = p.text.splitlines()
        opts = [ln for ln in lines if re.match(r"^[A-C]\. ", ln)]
        assert [ln[3:] for ln in opts] == [hospital.option(o).name for o in order]
        firsts.add(opts[0])
        assert mem.text in p.text and "Decision: " in p.text and "A, B or C" in p.text
    assert len(firsts) == 3  # the order rotates with the seed
    empty = select_memory("EMPTY", cl, None, tok, np.random.default_rng(0))
    assert P.EMPTY_MEMORY in P.decision_prompt(task, empty, order).text
