"""The call cache and the shared LLM backend logic, on a scripted backend (no model, no server)."""

import json
import sqlite3

import pytest
from scripted_llm import Scripted

from crossprofile_lib.backends.base import ChatRequest, ChatResult
from crossprofile_lib.backends.cache import CallCache, cache_folder, call_key
from crossprofile_lib.backends.llm import parse_decision, parse_relevance
from crossprofile_lib.policies.b3 import cut_to_budget, summary_kept
from crossprofile_lib.run.runner import RunConfig, build_requests, run_grid
from crossprofile_lib.task.tokenizer import default_tokenizer

ID = {"provider": "openai", "model": "m", "base_url": "http://a/v1"}


def test_key_covers_what_changes_the_output_and_nothing_else():
    r = ChatRequest(({"role": "user", "content": "hi"},))
    k = call_key(ID, r, "generate")
    assert k == call_key(dict(ID), ChatRequest(({"role": "user", "content": "hi"},)), "generate")
    assert k != call_key({**ID, "model": "m2"}, r, "generate")
    assert k != call_key({**ID, "base_url": "http://b/v1"}, r, "generate")
    assert k != call_key(ID, r, "score")
    assert k != call_key(ID, ChatRequest(({"role": "user", "content": "hi!"},)), "generate")
    assert k != call_key(ID, ChatRequest(({"role": "user", "content": "hi"},), temperature=0.5), "generate")
    assert k != call_key(ID, ChatRequest(({"role": "user", "content": "hi"},), max_tokens=7), "generate")
    # tags that do not change the output are not in the key
    assert k == call_key(ID, ChatRequest(({"role": "user", "content": "hi"},), purpose="x", prompt_file="y"),
                         "generate")


def test_entries_persist_and_never_expire(tmp_path):
    r = ChatRequest(({"role": "user", "content": "hi"},), purpose="decision", prompt_file="decision_v1.txt")
    c = CallCache(tmp_path)
    c.put("k1", r, ChatResult("Decision: A", retries=2, prompt_tokens=5, completion_tokens=3, latency_s=0.5,
                              choice_logprobs={"A": -0.1}), ID, "generate")
    c.put("k2", r, ChatResult("", error="boom"), ID, "generate")  # failures are not stored
    c.set_parsed("k1", "A")
    c.close()
    db = sqlite3.connect(tmp_path / "calls.sqlite")
    db.execute("UPDATE calls SET created = 0")  # an entry from 1970 is still served
    db.commit()
    got = CallCache(tmp_path).get_many(["k1", "k2"])
    assert set(got) == {"k1"}
    g = got["k1"]
    assert g.cached and g.text == "Decision: A" and g.retries == 2 and g.choice_logprobs == {"A": -0.1}
    assert g.meta["parsed"] == "A" and g.prompt_tokens == 5 and g.latency_s == 0.5
    row = db.execute("SELECT prompt_file, prompt_sha, purpose FROM calls").fetchone()
    assert row[0] == "decision_v1.txt" and len(row[1]) == 16 and row[2] == "decision"


def test_cache_folder_from_environment_never_inside_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSPROFILE_CACHE", str(tmp_path / "c"))
    assert cache_folder() == tmp_path / "c"
    from pathlib import Path

    import crossprofile_lib
    with pytest.raises(ValueError, match="inside the installed package"):
        cache_folder(Path(crossprofile_lib.__file__).parent / "cache")


def test_parsers():
    assert parse_decision("blah\nDecision: B", "ABC") == "B"
    assert parse_decision("Decision: A ... on reflection\n**Decision:** (C)", "ABC") == "C"
    assert parse_decision("decision: b. Helix", "ABC") == "B"
    assert parse_decision("Decision: D", "ABC") is None
    assert parse_decision("I choose option C.", "ABC") is None
    assert parse_relevance('{"relevant": [1, 3, 3, 99]}', 12) == [0, 2]
    assert parse_relevance("Relevant: 2, 5", 12) == [1, 4]
    assert parse_relevance("none of them", 12) is None


def _pairs(dev_templates, policies=("R1", "ALL")):
    cfg = RunConfig(templates=[], seeds=[0], budgets=["0.6"], policies=list(policies), variants=["PSP", "SPS"])
    return cfg, list(build_requests(dev_templates[:2], cfg, Scripted(lambda r: "")))


def test_unparsable_answer_retried_once_with_the_reminder_then_invalid(dev_templates):
    name = dev_templates[0].options[0].name

    def answer(r):
        if r.purpose == "decision-retry":
            return "Still thinking." if name in r.messages[0]["content"] else "Decision: B"
        return "I like the second one."
    b = Scripted(answer)
    cfg, pairs = _pairs(dev_templates)
    ds = b.decide([r for r, _ in pairs])
    retries = [r for r in b.sent if r.purpose == "decision-retry"]
    assert retries and all(r.prompt_file == "format_reminder_v1.txt" and len(r.messages) == 3 for r in retries)
    assert all(d.meta["format_retry"] for d in ds)
    assert all((d.invalid and d.option is None) or d.letter == "B" for d in ds)
    assert {d.invalid for d in ds} == {True, False}
    assert b.stats["invalid"] == sum(d.invalid for d in ds)


def test_duplicates_sent_once_and_rerun_makes_zero_calls(dev_templates, tmp_path):
    b = Scripted(lambda r: "Decision: A", cache=tmp_path)
    cfg, pairs = _pairs(dev_templates, ("R1", "R1:unlabeled", "ALL"))
    pairs += [p for p in pairs if p[1]["policy"] == "ALL"]  # every ALL request twice (a config lists a policy once)
    b.decide([r for r, _ in pairs])
    n_unique = len({b.cache_key(b._decision_request(r)) for r, _ in pairs})
    assert len(b.sent) == n_unique < len(pairs)
    b2 = Scripted(lambda r: "Decision: A", cache=tmp_path)
    ds = b2.decide([r for r, _ in pairs])
    assert b2.sent == [] and b2.stats["calls"] == 0 and all(d.meta["cached"] for d in ds)


def test_failed_calls_become_errors_not_silent_drops(dev_templates):
    name = dev_templates[0].options[0].name
    b = Scripted(lambda r: ChatResult("", error="HTTP 500 after 6 retries") if name in r.messages[0]["content"]
                 else "Decision: C")
    cfg, _ = _pairs(dev_templates)
    df = run_grid(cfg, b, templates=dev_templates[:2])
    bad = df[df.error != ""]
    assert len(bad) and (~bad.correct).all() and (~bad.invalid).all() and (bad.decision == "").all()
    assert (df[df.error == ""].decision_letter == "C").all()


def test_score_mode_picks_the_most_likely_letter(dev_templates):
    b = Scripted(lambda r: ChatResult("", choice_logprobs={"A": -2.0, "B": -0.5}), mode="score")
    cfg, pairs = _pairs(dev_templates)
    ds = b.decide([r for r, _ in pairs])
    assert all(d.letter == "B" and not d.invalid for d in ds)
    assert all(r.messages[-1] == {"role": "assistant", "content": "Decision:"} and r.max_tokens == 1
               for r in b.sent)
    assert json.loads(ds[0].meta["letter_logprobs"]) == {"A": -2.0, "B": -0.5}


def test_relevance_filter_and_b3_through_the_runner(dev_templates):
    def answer(r):
        if r.purpose == "relevance":
            return '{"relevant": [1, 2, 3, 4, 5, 6, 7, 8]}'
        if r.purpose == "b3":
            return "word " * 400
        return "Decision: A"
    b = Scripted(answer)
    cfg = RunConfig(templates=[], seeds=[0], budgets=["0.6"], policies=["R1-rel", "B3"], variants=["PSP"])
    df = run_grid(cfg, b, templates=dev_templates[:1])
    rel = df[df.policy == "R1-rel"].iloc[0]
    assert rel.relevance_filter == "model"
    # the filter judged statements 1-8 relevant; against the roles of this claim list (support or decoy)
    from crossprofile_lib.run.pipeline import task_units
    from crossprofile_lib.task.evidence import oracle_relevance
    u = next(iter(task_units(dev_templates[:1], ["PSP"], [0], 4, b.tokenizer)))
    truth = oracle_relevance(u.claims, u.task)
    hits = len(truth & frozenset(range(8)))
    assert 0 < hits < 8 and len(truth) == 8          # not the oracle: some judged claims are irrelevant
    assert (rel.relevance_precision, rel.relevance_recall) == pytest.approx((hits / 8, hits / len(truth)))
    b3 = df[df.policy == "B3"].iloc[0]
    assert b3.memory_truncated and b3.memory_tokens <= b3.budget_tokens and b3.memory_kind == "summary"
    sent_b3 = [r for r in b.sent if r.purpose == "b3"][0]
    assert f"at most {max(1, b3.budget_tokens * 10 // 13)} words" in sent_b3.messages[0]["content"]
    # relevance and B3 calls went out as one prefetched batch; the runner's own calls were cache hits
    assert len([r for r in b.sent if r.purpose in ("relevance", "b3")]) == 2


def test_cut_to_budget_and_summary_kept(dev_templates):
    tok = default_tokenizer()
    text, cut = cut_to_budget("one two three four five six seven", 4, tok)
    assert cut and tok.count(text) + 1 <= 4 and "one" in text
    assert cut_to_budget("short", 10, tok) == ("short", False)
    from crossprofile_lib.task.discussion import claim_list, make_task, scripted_discussion
    task = make_task(dev_templates[0], "PSP", 0)
    cl = claim_list(scripted_discussion(task))
    kept = summary_kept(cl.claims[0].text + " and nothing else.", cl.claims)
    assert kept == [0]


def test_a_second_cache_in_one_process_never_drops_the_first_ones_locks(tmp_path):
    """Rule: while this process holds the cache file open, opening it again must not read the file
    with plain file I/O (closing any descriptor drops the process's POSIX locks: another process
    would then take itself for the last user on closing and delete the -wal/-shm under our open
    connection, SQLite's "disk I/O error" seen in a book build). Checked with a real second process:
    while we hold two caches, its closing connection must leave the WAL in place, and what it
    stored is seen here."""
    import subprocess
    import sys

    first = CallCache(tmp_path)
    first.put("k1", ChatRequest(({"role": "user", "content": "hi"},)), ChatResult("Decision: B"), ID, "generate")
    second = CallCache(tmp_path)  # the open that used to read the header by hand
    db = tmp_path / "calls.sqlite"
    other = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
             "c.execute(\"CREATE TABLE IF NOT EXISTS probe(x)\"); c.execute('INSERT INTO probe VALUES (1)'); c.close()")
    subprocess.run([sys.executable, "-c", other, str(db)], check=True, timeout=120)
    assert (tmp_path / "calls.sqlite-wal").exists(), "another process deleted the WAL under our open cache"
    assert second._db.execute("SELECT COUNT(*) FROM probe").fetchone()[0] == 1
    assert len(first) == 1 and len(second) == 1
    first.close()
    second.close()
    third = CallCache(tmp_path)  # nothing held now: the full check runs again
    assert len(third) == 1
    third.close()
