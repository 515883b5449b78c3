"""The one pipeline (task -> discussion -> claim list -> memories), the policy registry and the
backend interface: every caller builds the same memories, tasks are built once per run, and what
a backend can do is declared, not probed."""

from __future__ import annotations

import hashlib
import json

import pytest
from scripted_llm import Scripted

from crossprofile_lib.backends import PROVIDERS, backend_for, get_backend, provider_class
from crossprofile_lib.backends.base import CAPABILITIES, SUMMARISE, Backend
from crossprofile_lib.backends.ledger import ReferenceDecider
from crossprofile_lib.book.explorer import walkthrough
from crossprofile_lib.policies import NEEDS, REGISTRY, parse_policy, select_memory
from crossprofile_lib.run import pipeline
from crossprofile_lib.run.runner import RunConfig, build_requests, run_grid


def _answer(req):
    if req.purpose == "relevance":
        return json.dumps({"relevant": [1, 2]})
    if req.purpose == "stance":
        return json.dumps({"stances": []})
    if req.purpose == "b3":
        return "A short summary of the discussion."
    return "Decision: A"


def test_every_provider_resolves_to_a_backend_class_that_declares_its_capabilities():
    assert set(PROVIDERS) == {"ledger", "llamacpp", "openai", "deepseek", "vllm"}
    for name in PROVIDERS:
        cls = provider_class(name)
        assert isinstance(cls.capabilities, frozenset) and cls.capabilities <= set(CAPABILITIES), name
    assert provider_class("ledger").capabilities == frozenset()
    assert SUMMARISE in provider_class("llamacpp").capabilities
    with pytest.raises(ValueError, match="known providers: deepseek, ledger, llamacpp, openai, vllm"):
        get_backend("nope/x")


def test_the_ledger_and_a_model_backend_implement_the_protocol():
    assert isinstance(ReferenceDecider(), Backend)
    assert isinstance(Scripted(_answer), Backend)
    b = backend_for(RunConfig(backend="ledger", backend_options={"social_proof": 0.5}))
    assert isinstance(b, ReferenceDecider) and b.social_proof == 0.5


def test_every_policy_declares_known_needs_and_the_runner_supplies_them():
    for name, pol in REGISTRY.items():
        assert set(pol.needs) <= set(NEEDS), name
        assert pol.source in ("", "model", "oracle"), name
    assert parse_policy("R1-rel").needs == {"relevance"} and parse_policy("R1-rel-oracle").source == "oracle"
    assert parse_policy("B3").needs == {"transcript", "summarise"}


def test_a_policy_without_its_input_fails_naming_it(dev_templates):
    u = pipeline.build_task(dev_templates[0], "PSP", 0, 4, ReferenceDecider().tokenizer)
    tok = ReferenceDecider().tokenizer
    with pytest.raises(ValueError, match="R1-rel needs a relevance filter"):
        select_memory("R1-rel", u.claims, 100, tok, None)
    with pytest.raises(ValueError, match="BAL needs stances"):
        select_memory("BAL", u.claims, 100, tok, None)
    with pytest.raises(ValueError, match="REF needs the transcript"):
        select_memory("REF", u.claims, None, tok, None)
    with pytest.raises(ValueError, match="needs a model backend"):
        select_memory("B3", u.claims, 100, tok, None, transcript=u.transcript, task=u.task)


def test_unsupported_reads_the_declared_capabilities():
    b3, r1 = parse_policy("B3"), parse_policy("R1")
    assert "language-model backend" in pipeline.unsupported([b3], ReferenceDecider.capabilities)["B3"]
    assert pipeline.unsupported([b3], provider_class("openai")) == {}
    assert pipeline.unsupported([r1], frozenset()) == {}


def test_a_model_run_builds_every_task_once(dev_templates, monkeypatch):
    """Prefetch and the decision requests share the task units (issue 12: no second build)."""
    calls = []
    real = pipeline.build_task
    monkeypatch.setattr(pipeline, "build_task", lambda *a, **k: calls.append(a[:3]) or real(*a, **k))
    cfg = RunConfig(seeds=[0], budgets=["0.6"], policies=["R1", "R1-rel", "BAL", "B3", "ALL"], variants=["PSP", "SPS"])
    be = Scripted(_answer)
    df = run_grid(cfg, backend=be, templates=dev_templates[:2])
    assert len(calls) == len(set(calls)) == 2 * 2
    purposes = [r.purpose for r in be.sent]
    # one relevance, one stance and one B3 call per task, all sent in the prefetch batch
    assert purposes.count("relevance") == purposes.count("stance") == purposes.count("b3") == 4
    assert set(df.policy) == {"R1", "R1-rel", "BAL", "B3", "ALL"}
    assert (df.relevance_filter[df.policy == "R1-rel"] == "model").all()


def test_the_walkthrough_and_the_runner_build_the_same_memories(dev_templates):
    t = dev_templates[0]
    cfg = RunConfig(seeds=[1], budgets=["0.6"], policies=["R1", "B4", "M1", "R1-rel-oracle", "BAL-oracle", "ALL"],
                    variants=["PSP"])
    rows = {row["policy"]: row for _, row in build_requests([t], cfg, ReferenceDecider())}
    w = walkthrough(t, "PSP", seed=1, budget="0.6", policies=cfg.policies)
    for p in cfg.policies:
        assert hashlib.sha256(w.memories[p].text.encode()).hexdigest()[:16] == rows[p]["memory_sha"], p
