"""The backends wing's rules its mutation survivors showed unpinned (issue 55).

A server's refusal where it is counted: a refused key (401, 403) stops the run at the first answer, a 404 after
``stop_on_refusal`` in a row, other statuses never; the message names the server by its redacted URL, never its key,
and says which status and rule (in process, on the :class:`~crossprofile_lib.backends.http_faults.Refusals` mixin with
a real ``openai`` error). Then, from the seed-55 mutmut sample: the call cache's fixed key, its provider column and
its storage errors (the file, the step, SQLite's error); chat templates from an HF folder (BOS/EOS tokens, a config
that is no file), a missing GGUF file, a template that allows only user and assistant roles; the concurrency pool's
slots, the smoothed latency and one cut per window; the announced wait and its reason, the deadline thread that never
holds the process, the served-model refusal naming the model to ask for; the ledger's option errors, tokenizer,
seeded tie-break and reported scores; the stance schema, a pretty-printed stance answer, a call the provider never
reported; and, against the local fake OpenAI-compatible server (``tests/fake_openai_server.py`` on 127.0.0.1), the
preset's positional mode, the concurrency bounds, score mode's BOS and temperature, the whole-request deadline,
a call's latency, queueing read per answer token (the fake's modelled time, never this machine's speed), the legacy
one-URL key and the prompt-token probe's request."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from crossprofile_lib.backends import cache as cache_mod  # noqa: E402
from crossprofile_lib.backends import cache_file as cache_file_mod  # noqa: E402
from crossprofile_lib.backends.base import ChatRequest, ChatResult  # noqa: E402
from crossprofile_lib.backends.cache import CacheStorageError, CallCache, call_key, check_cache, vacuum_cache  # noqa: E402
from crossprofile_lib.backends.chat_template import ChatTemplate  # noqa: E402
from crossprofile_lib.backends.concurrency import Pool, URLLimit  # noqa: E402
from crossprofile_lib.backends.http_faults import (  # noqa: E402
    REFUSAL_STATUSES,
    DeadlineExceeded,
    Refusals,
    ServerRefused,
    ServerUnreachable,
    _connect_failure,
    call_within,
    retry_after,
    retry_pause,
)
from crossprofile_lib.backends.ledger import ReferenceDecider  # noqa: E402
from crossprofile_lib.backends.llm import LLMBackend, parse_stances, stance_schema  # noqa: E402
from crossprofile_lib.backends.openai_compat import DeepSeekBackend, OpenAICompatBackend  # noqa: E402
from crossprofile_lib.policies import select_memory  # noqa: E402
from crossprofile_lib.task.decision import DecisionRequest, option_order  # noqa: E402
from crossprofile_lib.task.discussion import claim_list, make_task, scripted_discussion  # noqa: E402
from crossprofile_lib.task.tokenizer import default_tokenizer, get_tokenizer  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import fake_openai_server as F  # noqa: E402

URL = "https://user:s3cretpw@llm.example/v1?key=abcd1234&api-version=2024"


class Counter(Refusals):
    def __init__(self, stop_on_refusal=3):
        self.name, self.model, self.base_urls = "openai", "qwen", [URL, "http://other.example/v1"]
        self.stop_on_refusal, self._refusals, self._tripped = stop_on_refusal, 0, None
        self.cache = SimpleNamespace(path="/tmp/calls.sqlite")

    def _scrub(self, text):
        return text.replace("s3cretpw", "***")


def error(status: int):
    req = httpx.Request("POST", URL)
    return openai.APIStatusError(f"Error code: {status}", response=httpx.Response(status, request=req), body=None)


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_stops_at_the_first_answer_with_a_redacted_url(status):
    c = Counter()
    with pytest.raises(ServerRefused) as e:
        c._refused(error(status), 0)
    msg = str(e.value)
    assert "s3cretpw" not in msg and "abcd1234" not in msg
    assert "the server at https://***@llm.example/v1?key=***&api-version=2024 answered" in msg
    assert f"HTTP {status} ({REFUSAL_STATUSES[status]})" in msg and "to 1 calls in a row for model 'qwen'" in msg
    assert "stop_on_refusal=3" in msg and "/tmp/calls.sqlite" in msg and c._tripped is e.value


def test_a_404_stops_after_stop_on_refusal_in_a_row_and_names_its_server():
    c = Counter(stop_on_refusal=3)
    c._refused(error(404), 1)
    c._refused(error(404), 1)
    assert c._refusals == 2 and c._tripped is None
    with pytest.raises(ServerRefused, match=r"http://other.example/v1 answered HTTP 404 .* to 3 calls in a row"):
        c._refused(error(404), 1)


@pytest.mark.parametrize("status, stop", [(500, 3), (429, 1), (401, 0), (404, 0)])
def test_other_statuses_and_a_zero_limit_never_stop(status, stop):
    c = Counter(stop_on_refusal=stop)
    for _ in range(5):
        c._refused(error(status), 0)
    assert c._tripped is None and c._refusals == 0
    c._refused(ValueError("not an HTTP error"), 0)
    assert c._refusals == 0


# --- the seed-55 mutmut sample's survivors (issue 55): the rules they showed unpinned ----------------------------

FAST = dict(retry_wait=0.01, retry_wait_max=0.05, tokenizer="offline")
USER = {"role": "user", "content": "Which option? Decision: ?"}


# cache: keys, the provider column, storage errors

def test_a_calls_cache_key_is_fixed_across_versions():
    """A cache written by this version is read by the next: the key of a fixed call (every field the key holds set)
    is this SHA-256; a changed key (a field renamed, dropped or added) would make every stored call miss."""
    r = ChatRequest((USER,), max_tokens=64, temperature=0.0, purpose="decision", choices=("A", "B", "C"),
                    json_schema={"type": "object"}, stop=("\n\n",))
    ident = {"provider": "openai", "model": "fake", "base_url": "http://127.0.0.1:8000/v1"}
    assert call_key(ident, r, "generate") == "d755c142e82386536eba57560655dd8ae44f233dc08d417b21724489cceee6f0"


def test_a_stored_call_is_listed_under_its_provider_and_model(tmp_path):
    c = CallCache(tmp_path)
    r = ChatRequest((USER,))
    c.put("k1", r, ChatResult(text="Decision: A"), {"provider": "openai", "model": "m", "base_url": "http://a.example/v1"},
          "generate")
    c.put("k2", r, ChatResult(text="Decision: B"), {"provider": "deepseek", "model": "m", "base_url": "http://b.example/v1"},
          "generate")
    assert c.base_urls("openai", "m") == ["http://a.example/v1"]
    assert c.base_urls("deepseek", "m") == ["http://b.example/v1"]
    assert c.base_urls("openai", "other") == []


class _Stops:
    """A SQLite connection whose ``VACUUM`` fails as a full disk's would not: a plain OperationalError."""

    def __init__(self, db):
        self.db = db

    def execute(self, sql, *args):
        if sql == "VACUUM":
            raise sqlite3.OperationalError("cannot VACUUM: stand-in failure")
        return self.db.execute(sql, *args)

    def close(self):
        self.db.close()


def test_a_failed_vacuum_names_the_file_the_step_and_sqlites_error(tmp_path, monkeypatch):
    c = CallCache(tmp_path)
    c.put("k", ChatRequest((USER,)), ChatResult(text="Decision: A"), {"provider": "openai", "model": "m"}, "generate")
    c.close()
    real = cache_mod._connect
    monkeypatch.setattr(cache_mod, "_connect", lambda *a, **kw: _Stops(real(*a, **kw)))
    with pytest.raises(CacheStorageError) as e:
        vacuum_cache(tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "calls.sqlite") in msg and "vacuum failed" in msg and "SQLite stopped" in msg
    assert "OperationalError: cannot VACUUM: stand-in failure" in msg and "every call stored so far is kept" in msg


def test_a_cache_sqlite_will_not_open_names_the_file_and_the_step(tmp_path, monkeypatch):
    CallCache(tmp_path).close()  # a sound file: the check passes, the connection for writing fails

    def refuse(*a, **kw):
        raise sqlite3.OperationalError("stand-in refusal")
    monkeypatch.setattr(cache_mod, "_connect", refuse)
    with pytest.raises(CacheStorageError) as e:
        CallCache(tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "calls.sqlite") in msg and "opening failed" in msg and "SQLite refused it" in msg
    assert "OperationalError: stand-in refusal" in msg


# chat templates

def _hf_folder(tmp_path, **cfg) -> str:
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    return f"hf:{folder}"


def test_an_hf_folders_bos_and_eos_tokens_come_from_its_tokenizer_config(tmp_path):
    src = "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}{% endfor %}"
    t = ChatTemplate.from_spec(_hf_folder(tmp_path, chat_template=src, bos_token="<s>",
                                          eos_token={"content": "</s>", "lstrip": False}))
    assert (t.bos_token, t.eos_token) == ("<s>", "</s>")
    assert t.render([USER, {"role": "assistant", "content": "Decision:"}]) == \
        "<s>[user] Which option? Decision: ?</s>Decision:"


def test_an_hf_folder_without_bos_or_eos_tokens_renders_them_empty(tmp_path):
    t = ChatTemplate.from_spec(_hf_folder(tmp_path, chat_template="{{ bos_token }}|{{ messages[0]['content'] }}"))
    assert (t.bos_token, t.eos_token) == ("", "")
    assert t.render([USER]) == "|Which option? Decision: ?"


def test_an_hf_tokenizer_config_that_is_not_a_file_is_refused_naming_it(tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "tokenizer_config.json").mkdir()
    with pytest.raises(ValueError) as e:
        ChatTemplate.from_spec(f"hf:{tmp_path / 'hf'}")
    msg = str(e.value)
    assert f"chat_template 'hf:{tmp_path / 'hf'}'" in msg and "a tokenizer_config.json must be a regular file" in msg


def test_a_missing_gguf_file_is_refused_naming_the_spec_and_the_problem(tmp_path):
    spec = f"gguf:{tmp_path / 'model.gguf'}"
    with pytest.raises(ValueError) as e:
        ChatTemplate.from_spec(spec)
    assert str(e.value) == f"chat_template '{spec}': the GGUF file does not exist"


def test_a_template_that_allows_only_user_and_assistant_roles_is_accepted(tmp_path):
    """Many real templates raise on any other role (``Conversation roles must alternate user/assistant``): the
    render check at load time sends a user message and the prefill, nothing else."""
    f = tmp_path / "strict.jinja"
    f.write_text("{% for m in messages %}{% if m['role'] not in ['user', 'assistant'] %}"
                 "{{ raise_exception('roles must be user or assistant') }}{% endif %}"
                 "<{{ m['role'] }}>{{ m['content'] }}{% endfor %}")
    t = ChatTemplate.from_spec(str(f))
    assert t.render([USER, {"role": "assistant", "content": "Decision:"}]) == \
        "<user>Which option? Decision: ?Decision:"
    with pytest.raises(ValueError, match="roles must be user or assistant"):
        t.render([{"role": "system", "content": "x"}])


# concurrency: slots, the smoothed latency, one cut per window

def test_each_call_in_flight_holds_one_slot_and_a_full_url_makes_the_next_wait():
    async def scenario():
        pool = Pool(1, "auto")  # one URL, limit START = 4
        u = pool.urls[0]
        got = []
        for n in range(1, 5):
            got.append(await pool.acquire(0))
            assert (u.inflight, u.room) == (n, 4 - n)
        fifth = asyncio.create_task(pool.acquire(0))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not fifth.done()  # no room: it waits for a slot
        await pool.release(0, "neutral")
        assert await asyncio.wait_for(fifth, 30) == 0 and u.inflight == 4
        for n in (3, 2, 1, 0):
            await pool.release(0, "neutral")
            assert (u.inflight, u.room) == (n, 4 - n)
        return got
    assert asyncio.run(scenario()) == [0, 0, 0, 0]


def test_the_smoothed_latency_is_an_exponential_average_with_weight_one_fifth():
    u = URLLimit()
    for lat in (1.0, 2.0, 2.0):
        u.observe("ok", lat)
    # 1 -> 0.8 * 1 + 0.2 * 2 = 1.2 -> 0.8 * 1.2 + 0.2 * 2 = 1.36; the baseline is the least smoothed value
    assert u.smoothed == pytest.approx(1.36) and u.baseline == 1.0 and u.queueing == 0


def test_a_limit_is_cut_at_most_once_per_window_of_its_whole_part_in_answers():
    """Queueing (smoothed latency over CUT times the baseline) cuts by a tenth or one, at most once per window of
    int(limit) answers: at 4 the answer right after a cut does not cut again; at 1.5 (a window of one answer) it does."""
    for start, after_first, after_second in ((4.0, 3.0, 3.0), (2.5, 1.5, 1.0)):
        u = URLLimit(limit=start, peak=start)
        u.observe("ok", 1.0)   # baseline 1
        u.observe("ok", 20.0)  # smoothed 4.8 > 2: cut to min(limit - 1, 0.9 limit)
        assert u.limit == after_first and u.queueing == 1
        u.observe("ok", 20.0)  # smoothed 7.84: again, one answer after the cut
        assert u.limit == after_second and u.queueing == 2


# http_faults: the wait announcement, the deadline thread, the served-model refusal

def _state(exc, attempt=1):
    return SimpleNamespace(outcome=SimpleNamespace(exception=lambda: exc), attempt_number=attempt)


def _status_error(cls, status, headers):
    req = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    return cls(f"Error code: {status}", response=httpx.Response(status, headers=headers, request=req), body=None)


def test_a_long_wait_is_announced_on_stderr_with_its_reason(capsys):
    b = SimpleNamespace(name="openai/fake", max_retries=6, retry_after_max=120.0)
    asked = _status_error(openai.RateLimitError, 429, {"retry-after": "7"})
    assert retry_pause(b, _state(asked, 1), lambda s: 1.0) == 7.0
    assert retry_pause(b, _state(asked, 1), lambda s: 1.0) == 7.0  # once per wave: not said again
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == "openai/fake: waiting 7 s before retry 1 of 6: the server asked for it (HTTP 429, Retry-After 7 s)\n"
    # the backoff longer than the server's Retry-After: the backoff is the reason
    assert retry_pause(b, _state(asked, 2), lambda s: 9.0) == 9.0
    assert capsys.readouterr().err == "openai/fake: waiting 9 s before retry 2 of 6: backoff after RateLimitError (HTTP 429)\n"
    # a short wait is not announced
    assert retry_pause(b, _state(asked, 3), lambda s: 0.5) == 7.0
    assert retry_pause(b, _state(ValueError("x"), 4), lambda s: 4.0) == 4.0
    assert capsys.readouterr().err.count("waiting") == 1


def test_a_call_past_its_deadline_never_keeps_the_process_alive():
    """The abandoned call's thread is a daemon: a process whose call hung exits when its main thread ends."""
    code = ("import threading, sys\n"
            "from crossprofile_lib.backends.http_faults import call_within, DeadlineExceeded\n"
            "try:\n"
            "    call_within(threading.Event().wait, 0.05, 'GET /v1/models')\n"
            "except DeadlineExceeded as e:\n"
            "    print('deadline:', e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)  # a guard only
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("deadline: GET /v1/models: no complete answer within the 0.05 s deadline")
    assert call_within(lambda: 42, 30) == 42
    with pytest.raises(KeyError, match="raised inside"):
        call_within(lambda: {}["raised inside"], 30)
    late = threading.Event()
    with pytest.raises(DeadlineExceeded, match="--tokenize-timeout"):
        call_within(late.wait, 0.01)
    late.set()  # the abandoned thread ends


def test_a_server_with_one_other_model_is_refused_naming_the_model_to_ask_for(server, tmp_path):
    _, url = server(served_model="org/other-7b")
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "cache", **FAST)
    with pytest.raises(ServerRefused) as e:
        b.served_model()
    msg = str(e.value)
    assert "does not serve model 'fake' (it serves: org/other-7b)" in msg
    assert "--backend openai/other-7b" in msg and "accept_served_model=true" in msg
    _, url2 = server(served_model="a,b")
    b2 = OpenAICompatBackend("fake", base_url=url2, cache=tmp_path / "cache", **FAST)
    with pytest.raises(ServerRefused) as e2:
        b2.served_model()
    assert "--backend openai/<id>" in str(e2.value) and "accept_served_model" not in str(e2.value)


# the ledger (reference decider): option errors, the given tokenizer, the seeded tie-break, the scores it reports

def _ledger_request(template, variant, seed, spec):
    task = make_task(template, variant, seed)
    tr = scripted_discussion(task)
    m = select_memory(spec, claim_list(tr), None, default_tokenizer(), np.random.default_rng(0), transcript=tr)
    return DecisionRequest(task, m, option_order(task), f"{task.task_id}/{spec}")


@pytest.mark.parametrize("kw, words", [({"social_proof": float("nan")}, "option social_proof=nan: must be a finite"),
                                       ({"irrelevant_weight": True}, "option irrelevant_weight=True: must be a number"),
                                       ({"inverse_temperature": -1}, "option inverse_temperature=-1: must be at least 0")])
def test_a_ledger_option_out_of_its_rule_is_refused_naming_the_backend_and_option(kw, words):
    with pytest.raises(ValueError) as e:
        ReferenceDecider(**kw)
    assert str(e.value).startswith(f"backend ledger: {words}")


def test_the_ledger_prices_budgets_with_the_given_tokenizer_else_the_offline_default():
    given = get_tokenizer("offline")
    assert ReferenceDecider(tokenizer=given).tokenizer is given
    default = ReferenceDecider().tokenizer
    assert default is not None and default.name == default_tokenizer().name and default.count("one two three") > 0


def test_the_ledgers_tie_break_is_the_published_seeded_draw(hospital):
    """An empty memory ties all three options; the pick is a draw seeded by the task and the kept facts (the
    ``ledger-decision`` stream): these are the picks every version makes, so published numbers reproduce."""
    picks = [ReferenceDecider().decide_one(_ledger_request(hospital, "PPP", s, "EMPTY")).letter for s in range(12)]
    assert picks == ["B", "A", "B", "A", "B", "B", "B", "C", "B", "B", "C", "B"]


def test_a_ledger_decision_reports_every_options_score_in_the_order_shown(hospital):
    r = _ledger_request(hospital, "PSP", 0, "ALL")
    d = ReferenceDecider().decide_one(r)
    assert r.option_order == ("corvane", "helix", "medora")
    assert (d.option, d.letter, d.invalid, d.raw) == ("helix", "B", False, "scores=[0.0, 2.0, 0.0]")


# llm: the stance schema, a pretty-printed JSON answer, a call the provider never reported

def test_the_stance_schema_accepts_exactly_the_answers_the_stance_rule_reads():
    jsonschema = pytest.importorskip("jsonschema")
    schema = stance_schema(2, ("A", "B", "C"))
    jsonschema.Draft202012Validator.check_schema(schema)
    ok = {"stances": [{"n": 1, "option": "B", "direction": "for", "criterion": True},
                      {"n": 2, "option": "C", "direction": "against", "criterion": False}]}
    jsonschema.validate(ok, schema)
    one = ok["stances"][0]
    bad = [{"stances": one}, {"stances": [one, one, one]}, {"stances": [[1, "B"]]}, {"stances": [{**one, "n": 3}]},
           {"stances": [{**one, "option": "D"}]}, {"stances": [{**one, "direction": "up"}]},
           {"stances": [{**one, "criterion": "yes"}]}, {"stances": [{**one, "extra": 1}]}, {"stances": [], "x": 1}, []]
    for b in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(b, schema)


def test_a_pretty_printed_json_stance_answer_is_read():
    text = 'Here they are:\n{\n  "stances": [\n    {"n": 1, "option": "B", "direction": "against",\n' \
           '     "criterion": true}\n  ]\n}\nDone.'
    got = parse_stances(text, 2, ("helix", "corvane", "medora"))
    assert got is not None and got[1] is None
    assert (got[0].option, got[0].polarity, got[0].relevant) == ("corvane", -1, True)


class _Forgetful(LLMBackend):
    """A provider that reports every call but the last of a batch."""

    provider = "forgetful"

    def identity(self):
        return {"provider": self.provider, "model": self.model}

    def _complete(self, requests, on_done):
        for j in range(len(requests) - 1):
            on_done(j, ChatResult(text=f"answer {j}"))


def test_a_call_the_provider_never_reported_is_an_error_row_and_counted(tmp_path):
    b = _Forgetful("m", cache=tmp_path / "cache")
    reqs = [ChatRequest(({"role": "user", "content": f"question {i}"},)) for i in range(3)]
    got = b.chat(reqs)
    assert [r.text for r in got] == ["answer 0", "answer 1", ""]
    assert got[2].error == "no result reported by the backend"
    assert b.stats["calls"] == 2 and b.stats["errors"] == 1


# openai_compat: options, the preset's arguments, what is sent, the deadline, latency and the concurrency signal

def test_deepseeks_preset_takes_the_decision_mode_as_its_second_argument(tmp_path):
    with pytest.raises(ValueError, match="decision_mode 'score' is not one of generate"):
        DeepSeekBackend("deepseek-flash", "score", base_url="http://127.0.0.1:9/v1", cache=tmp_path / "c", **FAST)
    b = DeepSeekBackend("deepseek-flash", "generate", base_url="http://127.0.0.1:9/v1", cache=tmp_path / "c", **FAST)
    assert b.decision_mode == "generate" and b.name == "deepseek/deepseek-flash"


@pytest.mark.parametrize("option", ["concurrency", "max_concurrency"])
def test_concurrency_options_are_bounded_at_1024(option, tmp_path):
    ok = OpenAICompatBackend("fake", base_url="http://127.0.0.1:9/v1", cache=tmp_path / "c", **{option: 1024}, **FAST)
    assert getattr(ok, option) == 1024
    with pytest.raises(ValueError) as e:
        OpenAICompatBackend("fake", base_url="http://127.0.0.1:9/v1", cache=tmp_path / "c", **{option: 1025}, **FAST)
    assert str(e.value) == f"backend openai/fake: option {option}=1025: must be at most 1024"


def _bos_folder(tmp_path) -> str:
    return _hf_folder(tmp_path, bos_token="<s>", chat_template="{{ bos_token }}{% for m in messages %}"
                      "<{{ m['role'] }}>{{ m['content'] }}{% endfor %}")


def test_score_mode_keeps_the_bos_text_a_llama_cpp_server_does_not_add_again(server, tmp_path):
    """The fake llama.cpp server's /tokenize adds no BOS (its answer is the same with and without the special
    tokens): the rendered prompt is sent whole, BOS text included, greedily (temperature 0)."""
    fake, url = server(owned_by="llamacpp", tokenize="llama.cpp", keep_bodies=True)
    b = OpenAICompatBackend("fake", decision_mode="score", base_url=url, cache=tmp_path / "c",
                            chat_template=_bos_folder(tmp_path), **FAST)
    res = b.chat([ChatRequest((USER, {"role": "assistant", "content": "Decision:"}), max_tokens=1,
                              choices=("A", "B", "C"))])[0]
    assert res.error is None and res.text.startswith("Decision: ")
    (path, _, body), = fake.bodies
    assert path.endswith("/v1/completions") and fake.tokenized == 2
    assert body["prompt"] == "<s><user>Which option? Decision: ?Decision:"
    assert body["temperature"] == 0.0 and body["max_tokens"] == 1


def test_a_server_dripping_its_answer_meets_the_whole_request_deadline(server, tmp_path):
    """Each byte comes well within the client's per-read timeout, the whole answer (about 20 s) long after --timeout:
    the call is an error naming the whole-request deadline, never the late answer."""
    fake, url = server(drip_s=0.05, drip_paths=("/chat/completions",))
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", timeout=0.5, max_retries=0, **FAST)
    res = b.chat([ChatRequest((USER,))])[0]
    assert res.error is not None and "DeadlineExceeded" in res.error and "whole request" in res.error
    assert res.text == "" and fake.answered == 0


def test_a_calls_latency_is_its_own_time_from_send_to_answer(server, tmp_path):
    """At least the server's answer delay, at most the time the caller waited (whatever this machine's speed)."""
    _, url = server(latency_s=0.05)
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST)
    t0 = time.perf_counter()
    res = b.chat([ChatRequest((USER,))])[0]
    waited = time.perf_counter() - t0
    assert res.error is None and 0.04 <= res.latency_s <= waited


class _TokenPaced(OpenAICompatBackend):
    """The fake server's answers, given a length (completion tokens) and a modelled time per call: ``pace(j, c)``
    seconds for call ``j`` of ``c`` tokens (so no test depends on this machine's speed)."""

    lengths = (0, 9, 9, 9, 9, 9, 9, 9, 9, 9)

    def __init__(self, *a, pace, **kw):
        super().__init__(*a, **kw)
        self.pace, self.sent = pace, 0

    async def _send(self, client, r):
        res = await super()._send(client, r)
        j, self.sent = self.sent, self.sent + 1
        c = self.lengths[j]
        return dataclasses.replace(res, completion_tokens=c, latency_s=self.pace(j, c))


@pytest.mark.parametrize("pace, queueing", [(lambda j, c: 0.1 * (1 + c), 0),        # constant time per token
                                            (lambda j, c: 0.1 * (1 + c) * (1 + j), 8)])  # per token slower each call
def test_queueing_is_read_from_the_time_per_answer_token_not_per_answer(server, tmp_path, pace, queueing):
    """A server whose time per answer token (seconds / (completion tokens + 1)) stays constant shows no queueing,
    however the answers' lengths vary; one whose time per token grows does (0.1 s per token times the call's number:
    smoothed 0.1, 0.12, then 0.156 > 1.5 x 0.1 from the third answer on: 8 of 10). One call at a time
    (max_concurrency=1), in order."""
    _, url = server()
    b = _TokenPaced("fake", base_url=url, cache=tmp_path / "c", max_concurrency=1, pace=pace, **FAST)
    got = b.chat([ChatRequest(({"role": "user", "content": f"question {i}"},)) for i in range(10)])
    assert all(r.error is None for r in got) and b.sent == 10
    per_url = b.record()["concurrency"]["per_url"][0]
    assert per_url["answers"] == 10 and per_url["queueing"] == queueing


def test_an_entry_an_earlier_version_keyed_on_the_one_base_url_is_found_with_sampling_server(server, tmp_path):
    """Earlier versions keyed a call on the base URL itself (a string for one URL, the sorted list for several)."""
    fake, url = server()
    cache = CallCache(tmp_path / "c")
    r = ChatRequest((USER,), purpose="decision", choices=("A", "B", "C"))
    old = {"provider": "openai", "model": "fake", "base_url": url, "chat_template": None, "grammar_style": None,
           "reason_chars": None, "extra_body": None}
    cache.put(call_key(old, r, "generate"), r, ChatResult(text="Decision: C"), old, "generate")
    b = OpenAICompatBackend("fake", base_url=url, cache=cache, sampling="server", **FAST)
    assert b.chat([r])[0].text == "Decision: C"
    assert b.stats["legacy"] == 1 and b.stats["calls"] == 0 and fake.answered == 0
    # what is looked up before any URL stored in the cache: the current URL as earlier versions spelled it
    fresh = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "fresh", sampling="server", **FAST)
    assert fresh.legacy_identities() == [old]
    two = OpenAICompatBackend("fake", base_url=f"{url},http://127.0.0.1:9/v1", cache=tmp_path / "fresh",
                              sampling="server", **FAST)
    assert two.legacy_identities() == [{**old, "base_url": sorted([url, "http://127.0.0.1:9/v1"])}]


def test_the_prompt_token_probe_sends_the_runs_own_request_plus_return_token_ids(server, tmp_path):
    fake, url = server(keep_bodies=True)
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST)
    r = ChatRequest((USER,), max_tokens=64)
    with pytest.raises(ValueError, match="returned no prompt_token_ids"):  # the fake server is no vLLM
        b.prompt_token_ids(r)
    b.chat([r])
    (_, _, probe), (_, _, run) = fake.bodies
    assert probe.pop("return_token_ids") is True and probe.pop("max_tokens") == 1 and run.pop("max_tokens") == 64
    assert probe == run and run["repetition_penalty"] == 1.0 and run["temperature"] == 0.0


# --- the fresh seed-56 sample's survivors (issue 55) ----------------------------------------------------------------

class _VLLMish(F.FakeServer):
    """The fake server with what a vLLM or llama.cpp server adds: ``prompt_token_ids`` when asked
    (``return_token_ids``: [101, 102, 103] in a chat answer, [201, 202] in a text completion), and a llama.cpp
    ``/tokenize`` that reads ``<s>`` as the BOS token (id 1) and puts one before the text when asked
    (``add_special``), as a GGUF that adds a BOS does."""

    def respond(self, path, headers, raw):
        status, body, delay = super().respond(path, headers, raw)
        req = json.loads(raw or b"{}") if path.endswith("completions") else {}
        if status == 200 and req.get("return_token_ids"):
            out = json.loads(body)
            if path.endswith("/chat/completions"):
                out["prompt_token_ids"] = [101, 102, 103]
            else:
                out["choices"][0]["prompt_token_ids"] = [201, 202]
            body = json.dumps(out).encode()
        return status, body, delay

    def _tokenize(self, path, raw):
        if self.tokenize != "llama.cpp" or path != "/tokenize":
            return super()._tokenize(path, raw)
        req = json.loads(raw or b"{}")
        text = str(req.get("content", ""))
        toks = ([1] if text.startswith("<s>") else []) + F.fake_tokens(text.removeprefix("<s>"))
        return 200, json.dumps({"tokens": ([1] if req.get("add_special") else []) + toks}).encode(), 0.0


@pytest.fixture
def vllmish(server, monkeypatch):
    def start(**faults):
        monkeypatch.setattr(F, "FakeServer", _VLLMish)
        try:
            return server(**faults)
        finally:
            monkeypatch.undo()
    return start


def test_the_prompt_token_probe_returns_the_ids_the_server_built(vllmish, tmp_path):
    _, url = vllmish()
    gen = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST)
    assert gen.prompt_token_ids(ChatRequest((USER,))) == [101, 102, 103]
    score = OpenAICompatBackend("fake", decision_mode="score", base_url=url, cache=tmp_path / "c",
                                chat_template="chatml", **FAST)
    r = ChatRequest((USER, {"role": "assistant", "content": "Decision:"}), max_tokens=1, choices=("A", "B", "C"))
    assert score.prompt_token_ids(r) == [201, 202]


def test_score_mode_leaves_out_the_bos_text_a_llama_cpp_server_would_add_again(vllmish, tmp_path):
    fake, url = vllmish(owned_by="llamacpp", tokenize="llama.cpp", keep_bodies=True)
    b = OpenAICompatBackend("fake", decision_mode="score", base_url=url, cache=tmp_path / "c",
                            chat_template=_bos_folder(tmp_path), **FAST)
    res = b.chat([ChatRequest((USER, {"role": "assistant", "content": "Decision:"}), max_tokens=1,
                              choices=("A", "B", "C"))])[0]
    assert res.error is None
    (_, _, body), = fake.bodies
    assert body["prompt"] == "<user>Which option? Decision: ?Decision:"


def test_score_mode_without_a_template_asks_vllm_for_the_top_log_probabilities(server, tmp_path):
    fake, url = server(owned_by="vllm", keep_bodies=True)
    b = OpenAICompatBackend("fake", decision_mode="score", base_url=url, cache=tmp_path / "c", named_logprobs=False,
                            max_retries=0, **FAST)
    b.chat([ChatRequest((USER, {"role": "assistant", "content": "Decision:"}), max_tokens=1, choices=("A", "B", "C"))])
    (path, _, body), = fake.bodies  # the fake answers without log-probabilities: what was asked is the point here
    assert path.endswith("/chat/completions") and body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False and body["max_tokens"] == 1


def test_a_b3_summary_is_asked_for_with_its_own_token_limit(server, tmp_path):
    fake, url = server(keep_bodies=True)
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST)
    prompt = SimpleNamespace(message=lambda: {"role": "user", "content": "Summarise the notes."}, file="b3_v1.txt")
    assert b.summarise(prompt, 77).error is None
    (_, _, body), = fake.bodies
    assert body["max_tokens"] == 77 and body["messages"] == [{"role": "user", "content": "Summarise the notes."}]


def test_a_calls_key_does_not_depend_on_a_secret_in_the_base_url():
    r = ChatRequest((USER,))
    ident = {"provider": "openai", "model": "fake"}
    a = call_key({**ident, "base_url": "https://user:pw1@llm.example/v1?key=abcd"}, r, "generate")
    assert a == call_key({**ident, "base_url": "https://user:other@llm.example/v1?key=wxyz"}, r, "generate")
    assert a != call_key({**ident, "base_url": "https://user:pw1@other.example/v1?key=abcd"}, r, "generate")


def _side_tables_dropped(folder):
    db = sqlite3.connect(folder / "calls.sqlite")
    db.execute("DROP TABLE token_counts")
    db.execute("DROP TABLE served_models")
    db.commit()
    db.close()


def test_an_older_read_only_cache_is_replayed_with_a_notice(tmp_path, capsys):
    """A read-only cache file from before the token-count tables: its calls are replayed (the missing tables are
    empty stand-ins), and the console says it is read-only and replayed."""
    c = CallCache(tmp_path)
    r = ChatRequest((USER,))
    c.put("k", r, ChatResult(text="Decision: B"), {"provider": "openai", "model": "m"}, "generate")
    c.close()
    _side_tables_dropped(tmp_path)
    (tmp_path / "calls.sqlite").chmod(0o444)
    ro = CallCache(tmp_path)
    assert ro.get_many(["k"])["k"].text == "Decision: B" and ro.served_model("openai", "m") is None
    err = capsys.readouterr().err
    assert f"notice: call cache {tmp_path / 'calls.sqlite'} is read-only (mode -r--r--r--): replaying the calls" in err


def test_a_cache_counts_the_calls_still_in_its_write_ahead_log(tmp_path):
    """check_cache reads a file another connection is writing: the calls not yet checkpointed count too."""
    c = CallCache(tmp_path)
    for i in range(3):
        c.put(f"k{i}", ChatRequest(({"role": "user", "content": f"q{i}"},)), ChatResult(text="Decision: A"),
              {"provider": "openai", "model": "m"}, "generate")
    assert (tmp_path / "calls.sqlite-wal").stat().st_size > 0
    assert check_cache(tmp_path)["entries"] == 3
    c.close()


class _Refuses:
    """A cache's connection that fails every statement starting with ``verb`` (a stand-in write failure)."""

    def __init__(self, db, verb: str):
        self.db, self.verb = db, verb

    def execute(self, sql, *args):
        if sql.startswith(self.verb):
            raise sqlite3.OperationalError("stand-in write failure")
        return self.db.execute(sql, *args)

    def __getattr__(self, name):        # everything else (close, ...) is the real connection's
        return getattr(self.db, name)


def test_a_parsed_answer_that_cannot_be_recorded_names_the_file_and_the_step(tmp_path):
    c = CallCache(tmp_path)
    c._db = _Refuses(c._db, "UPDATE")
    with pytest.raises(cache_mod.CacheError) as e:
        c.set_parsed("k", "B")
    assert str(tmp_path / "calls.sqlite") in str(e.value) and "recording a parsed answer failed" in str(e.value)
    assert "stand-in write failure" in str(e.value)


def test_an_hf_tokenizer_config_that_is_no_object_has_no_chat_template(tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "tokenizer_config.json").write_text('["chat_template"]')
    with pytest.raises(ValueError, match="has no chat template"):
        ChatTemplate.from_spec(f"hf:{tmp_path / 'hf'}")


class _Engine:
    path = "/models/m.gguf"

    def __init__(self, src):
        self.src = src

    def chat_template(self):
        return self.src, "<s>", "</s>"


def test_a_gguf_engines_template_keeps_its_bos_and_eos_tokens():
    t = ChatTemplate.from_engine(_Engine("{{ bos_token }}{{ messages[0]['content'] }}{{ eos_token }}"), name="m")
    assert (t.bos_token, t.eos_token, t.name) == ("<s>", "</s>", "m")
    assert t.render([USER]) == "<s>Which option? Decision: ?</s>"
    with pytest.raises(ValueError, match="model /models/m.gguf: no tokenizer.chat_template in its metadata"):
        ChatTemplate.from_engine(_Engine(""))


def test_a_fixed_concurrency_lets_that_many_calls_in_at_once():
    async def scenario():
        pool = Pool(2, concurrency=2)
        first, second, third = (asyncio.create_task(pool.acquire(j)) for j in range(3))
        for _ in range(5):
            await asyncio.sleep(0)
        state = (first.done(), second.done(), third.done())
        await pool.release(first.result() if first.done() else 0, "ok")
        for _ in range(5):
            await asyncio.sleep(0)
        for t in (first, second, third):
            t.cancel()
        return state, third.done() and not third.cancelled() and third.result()
    assert asyncio.run(scenario()) == ((True, True, False), 0)  # call j goes to URL j mod 2


def test_slow_start_doubles_the_limit_after_each_window_without_queueing():
    u = URLLimit()
    limits = []
    for _ in range(4 + 8 + 16):
        u.observe("ok", 1.0)
        limits.append(u.limit)
    assert limits[3] == 8.0 and limits[11] == 16.0 and limits[27] == 32.0 and u.peak == 32.0
    u.observe("overload", 0.0)  # halved; slow start over: one more per window from now on
    assert u.limit == 16.0
    for _ in range(16):
        u.observe("ok", 1.0)
    assert u.limit == 17.0


def test_a_timeout_is_not_a_refused_connection():
    req = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    assert _connect_failure(openai.APIConnectionError(request=req)) is True
    assert _connect_failure(openai.APITimeoutError(request=req)) is False


def test_retry_after_ms_is_read_in_milliseconds():
    assert retry_after(_status_error(openai.RateLimitError, 429, {"retry-after-ms": "250"})) == 0.25
    assert retry_after(_status_error(openai.RateLimitError, 429, {"retry-after": "3"})) == 3.0


def test_one_url_naming_its_servers_kind_names_it_for_all(server, tmp_path):
    _, u1 = server(owned_by="vllm")
    _, u2 = server(owned_by="someone")
    b = OpenAICompatBackend("fake", base_url=f"{u1},{u2}", cache=tmp_path / "c", **FAST)
    assert b.server_kind() == "vllm"


def test_progress_shows_a_bar_with_the_retry_waves_on_it_and_nothing_without(server, tmp_path, capsys):
    _, url = server(fail_first=1, fail_status=503)
    quiet = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "q", max_retries=3, **FAST)
    assert quiet.chat([ChatRequest(({"role": "user", "content": "one"},))])[0].error is None
    err = capsys.readouterr().err
    assert err.startswith("openai/fake: retrying 1 call (wave 1/3; last: InternalServerError) at http://127.0.0.1:")
    assert "decision" not in err  # no bar
    shown = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "s", max_retries=3, progress=True, **FAST)
    assert shown.chat([ChatRequest(({"role": "user", "content": "two"},))])[0].error is None
    err = capsys.readouterr().err
    assert "openai/fake decision | retrying 1 call (wave 1/3; last: InternalServerError)" in err
    assert " at http://127.0.0.1:" not in err  # on the bar, not as a line


@pytest.mark.parametrize("kw, words", [({"timeout": 0}, "option timeout=0: must be above 0"),
                                       ({"max_concurrency": 2.5}, "option max_concurrency=2.5: must be an integer")])
def test_timeout_must_be_positive_and_max_concurrency_whole(kw, words, tmp_path):
    with pytest.raises(ValueError) as e:
        OpenAICompatBackend("fake", base_url="http://127.0.0.1:9/v1", cache=tmp_path / "c", **kw, **FAST)
    assert str(e.value).startswith(f"backend openai/fake: {words}")


def test_a_404_counts_toward_stop_on_refusal_only_in_a_row(server, tmp_path):
    """Each request's first attempt gets 404; stop_on_refusal=2. One call at a time, in order: x (404), a (its
    second attempt: answered, the count starts again), y (404): never two in a row, so the run goes on; each batch
    starts from zero."""
    _, url = server(fail_first=1, fail_status=404)
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", concurrency=1, stop_on_refusal=2, **FAST)
    a, x, y = (ChatRequest(({"role": "user", "content": q},)) for q in ("a", "x", "y"))
    assert "404" in b.chat([a])[0].error
    got = b.chat([x, a, y])
    assert ["404" in (r.error or "") for r in got] == [True, False, True] and got[1].text


def test_an_answer_records_which_base_url_gave_it(server, tmp_path):
    _, url = server()
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST)
    res = b.chat([ChatRequest((USER,))])[0]
    assert res.meta == {"base_url_index": 0}
    assert b.cache.get_many([b.cache_key(ChatRequest((USER,)))]).popitem()[1].meta == {"base_url_index": 0}


def test_a_grammar_answer_with_a_trailing_newline_keeps_its_constraint(server, tmp_path):
    _, url = server(chat_text="I weigh the notes.\nDecision: B\n")
    b = OpenAICompatBackend("fake", decision_mode="grammar", base_url=url, cache=tmp_path / "c", max_retries=0, **FAST)
    res = b.chat([ChatRequest((USER,), choices=("A", "B", "C"))])[0]
    assert res.error is None and res.text == "I weigh the notes.\nDecision: B\n"


def test_an_answer_without_usage_counts_zero_tokens(tmp_path):
    b = OpenAICompatBackend("fake", base_url="http://127.0.0.1:9/v1", cache=tmp_path / "c", **FAST)
    resp = SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content="Decision: A"), finish_reason="stop")])

    async def create(**fields):
        return resp
    client = SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))
    res = asyncio.run(b._send(client, ChatRequest((USER,))))
    assert (res.text, res.prompt_tokens, res.completion_tokens) == ("Decision: A", 0, 0)


def test_the_cache_identity_names_provider_model_served_model_sampling_and_options(server, tmp_path):
    _, url = server()
    server = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", sampling="server", **FAST)
    options = {"chat_template": None, "grammar_style": None, "reason_chars": None, "extra_body": None}
    assert server.identity() == {"provider": "openai", "model": "fake", "served": {"id": "fake"},
                                 "sampling": "server", **options}
    paper = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST)
    assert paper.identity() == {"provider": "openai", "model": "fake", "served": {"id": "fake"},
                                "sampling": {"temperature": 0.0, "top_p": 1.0, "frequency_penalty": 0.0,
                                             "presence_penalty": 0.0, "repeat_penalty": 1.0,
                                             "repetition_penalty": 1.0}, **options}


# issue 55, round 2: function by function (OpenAICompatBackend.__init__'s options, open_problem, chat templates,
# the retry rules, the LLM batch)

LOCAL = "http://127.0.0.1:9/v1"  # never contacted: every backend below is given its tokenizer


def _backend(tmp_path, **kw):
    return OpenAICompatBackend("fake", base_url=LOCAL, cache=tmp_path / "c", tokenizer="offline", **kw)


def test_an_openai_backends_defaults_are_the_documented_ones(tmp_path):
    b = _backend(tmp_path)
    got = {k: getattr(b, k) for k in ("timeout", "concurrency", "max_concurrency", "stop_on_refusal",
                                      "tokenize_timeout", "max_retries", "retry_wait", "retry_wait_max",
                                      "retry_after_max", "circuit_breaker", "constraint_failures",
                                      "accept_served_model", "named_logprobs", "sampling", "tokenizer_fallback",
                                      "grammar_style", "extra_body", "template", "base_urls", "shown_urls")}
    assert got == {"timeout": 120.0, "concurrency": "auto", "max_concurrency": 128, "stop_on_refusal": 3,
                   "tokenize_timeout": 60.0, "max_retries": 6, "retry_wait": 1.0, "retry_wait_max": 60.0,
                   "retry_after_max": 120.0, "circuit_breaker": 8, "constraint_failures": 3,
                   "accept_served_model": False, "named_logprobs": True, "sampling": "paper",
                   "tokenizer_fallback": "error", "grammar_style": "auto", "extra_body": {}, "template": None,
                   "base_urls": [LOCAL], "shown_urls": LOCAL}
    assert (b.name, b.decision_mode, b.tokenizer_source) == ("openai/fake", "generate", "given: offline-bpe-approx-v1")
    assert (b.max_tokens, b.reason_chars, b.decision_prompt, b.progress, b.model) == (512, 400, "default", False, "fake")


OWNER = "backend openai/fake:"
# (option, refused value, its exact message after the owner): the lower and upper bound and the kind of number
_OPTION_REFUSALS = [
    ("timeout", 0, "option timeout=0: must be above 0"), ("timeout", 86_400.5, "option timeout=86400.5: must be at most 86400"),
    ("concurrency", 0, "option concurrency=0: must be at least 1"),
    ("concurrency", 1.5, "option concurrency=1.5: must be an integer, not float"),
    ("concurrency", "fast", "option concurrency='fast': must be 'auto' or an integer"),
    ("max_concurrency", 0, "option max_concurrency=0: must be at least 1"),
    ("max_concurrency", 2.5, "option max_concurrency=2.5: must be an integer, not float"),
    ("stop_on_refusal", -1, "option stop_on_refusal=-1: must be at least 0"),
    ("stop_on_refusal", 1_000_001, "option stop_on_refusal=1000001: must be at most 1e+06"),
    ("stop_on_refusal", 0.5, "option stop_on_refusal=0.5: must be an integer, not float"),
    ("tokenize_timeout", 0, "option tokenize_timeout=0: must be above 0"),
    ("tokenize_timeout", 86_401, "option tokenize_timeout=86401: must be at most 86400"),
    ("max_retries", -1, "option max_retries=-1: must be at least 0"),
    ("max_retries", 101, "option max_retries=101: must be at most 100"),
    ("max_retries", 1.5, "option max_retries=1.5: must be an integer, not float"),
    ("retry_wait", -0.5, "option retry_wait=-0.5: must be at least 0"),
    ("retry_wait", 3600.5, "option retry_wait=3600.5: must be at most 3600"),
    ("retry_wait_max", -1, "option retry_wait_max=-1: must be at least 0"),
    ("retry_wait_max", 3601, "option retry_wait_max=3601: must be at most 3600"),
    ("retry_after_max", -1, "option retry_after_max=-1: must be at least 0"),
    ("retry_after_max", 86_401, "option retry_after_max=86401: must be at most 86400"),
    ("circuit_breaker", -1, "option circuit_breaker=-1: must be at least 0"),
    ("circuit_breaker", 1_000_001, "option circuit_breaker=1000001: must be at most 1e+06"),
    ("circuit_breaker", 2.5, "option circuit_breaker=2.5: must be an integer, not float"),
    ("constraint_failures", 0, "option constraint_failures=0: must be at least 1"),
    ("constraint_failures", 1_000_001, "option constraint_failures=1000001: must be at most 1e+06"),
    ("constraint_failures", 1.5, "option constraint_failures=1.5: must be an integer, not float"),
    ("accept_served_model", "yes", "option accept_served_model='yes': must be true or false"),
    ("named_logprobs", 1, "option named_logprobs=1: must be true or false"),
    ("sampling", "greedy", "sampling 'greedy' is not one of paper, server"),
    ("tokenizer_fallback", "guess", "tokenizer_fallback 'guess' is not one of error, offline"),
    ("grammar_style", "xml", "grammar_style 'xml' is not one of auto, gbnf, vllm, both"),
    ("max_tokens", 0, "option max_tokens=0: must be at least 1"),
    ("max_tokens", 1_000_001, "option max_tokens=1000001: must be at most 1e+06"),
    ("max_tokens", 1.5, "option max_tokens=1.5: must be an integer, not float"),
    ("reason_chars", 0, "option reason_chars=0: must be at least 1"),
    ("reason_chars", 100_001, "option reason_chars=100001: must be at most 100000"),
    ("reason_chars", 2.5, "option reason_chars=2.5: must be an integer, not float"),
    ("decision_prompt", "terse", "decision_prompt 'terse' is not one of default, labels-not-evidence"),
    ("decision_mode", "ledger", "decision_mode 'ledger' is not one of generate, grammar, score"),
]


@pytest.mark.parametrize("option, value, message", _OPTION_REFUSALS)
def test_an_option_out_of_its_bounds_is_refused_naming_the_option_and_the_bound(option, value, message, tmp_path):
    with pytest.raises(ValueError) as e:
        _backend(tmp_path, **{option: value})
    assert str(e.value) == f"{OWNER} {message}"


# (option, the accepted edge values): each is stored as given (a whole float as an integer where one is asked for)
_OPTION_EDGES = [
    ("timeout", [0.001, 86_400]), ("concurrency", [1, 1024, 2.0]), ("max_concurrency", [1, 1024]),
    ("stop_on_refusal", [0, 1_000_000]), ("tokenize_timeout", [0.001, 86_400]), ("max_retries", [0, 100]),
    ("retry_wait", [0, 3600]), ("retry_wait_max", [0, 3600]), ("retry_after_max", [0, 86_400]),
    ("circuit_breaker", [0, 1_000_000]), ("constraint_failures", [1, 1_000_000]), ("max_tokens", [1, 1_000_000]),
    ("reason_chars", [1, 100_000]),
]


@pytest.mark.parametrize("option, values", _OPTION_EDGES)
def test_an_option_at_its_bounds_is_accepted_and_kept(option, values, tmp_path):
    for v in values:
        got = getattr(_backend(tmp_path, **{option: v}), option)
        assert got == v and type(got) is (int if float(v).is_integer() and option not in (
            "timeout", "tokenize_timeout", "retry_wait", "retry_wait_max", "retry_after_max") else float)


def test_boolean_options_read_true_and_false_in_any_case(tmp_path):
    b = _backend(tmp_path, accept_served_model=" TRUE ", named_logprobs="False")
    assert (b.accept_served_model, b.named_logprobs) == (True, False)
    b = _backend(tmp_path, accept_served_model=True, named_logprobs=False, concurrency=" Auto ")
    assert (b.accept_served_model, b.named_logprobs, b.concurrency) == (True, False, "auto")


# cache_file.open_problem: every verdict it gives, word for word

class _Answers:
    """A real connection to a sound cache whose statement ``sql`` raises ``exc`` (or returns ``rows``)."""

    def __init__(self, db, sql, exc=None, rows=None):
        self.db, self.sql, self.exc, self.rows = db, sql, exc, rows

    def execute(self, sql, *args):
        if sql == self.sql:
            if self.exc is not None:
                raise self.exc
            return iter(self.rows)
        return self.db.execute(sql, *args)

    def close(self):
        self.db.close()


def _sound(tmp_path) -> Path:
    CallCache(tmp_path).close()
    return tmp_path / "calls.sqlite"


KEPT = "; the file itself is not damaged and every call stored so far is kept: fix this and rerun the same command"


def test_a_sound_cache_has_no_problem_and_files_that_are_none_say_what_they_are(tmp_path):
    import os
    f = _sound(tmp_path)
    assert cache_file_mod.open_problem(f) is None and cache_file_mod.open_problem(f, writable=False, full=True) is None
    assert cache_file_mod.open_problem(tmp_path / "nothing.sqlite") == "no such file"
    assert cache_file_mod.open_problem(tmp_path) == "is a directory, not a cache file"
    os.mkfifo(tmp_path / "pipe")
    assert cache_file_mod.open_problem(tmp_path / "pipe") == "is not a regular file"
    (tmp_path / "empty.sqlite").write_bytes(b"")
    assert cache_file_mod.open_problem(tmp_path / "empty.sqlite") == (
        "0 bytes (emptied or truncated; a cache file is never empty, and using it would silently re-make every call)")


def test_a_read_only_cache_is_a_problem_only_for_writing(tmp_path):
    f = _sound(tmp_path)
    f.chmod(0o444)
    try:
        assert cache_file_mod.open_problem(f) == (
            "read-only (mode -r--r--r--): finished calls could not be stored; make it writable (chmod u+w) or point "
            "--cache at a copy")
        assert cache_file_mod.open_problem(f, writable=False) is None
    finally:
        f.chmod(0o644)


def test_an_environment_failure_on_opening_names_the_file_the_step_and_the_cause(tmp_path, monkeypatch):
    f = _sound(tmp_path)

    def full(*a, **kw):
        raise sqlite3.OperationalError("database or disk is full")
    monkeypatch.setattr(cache_file_mod, "_connect", full)
    with pytest.raises(CacheStorageError) as e:
        cache_file_mod.open_problem(f)
    assert str(e.value) == (f"call cache {f}: opening failed: the disk holding it is full: free some space and rerun "
                            f"(OperationalError: database or disk is full)" + KEPT)


def test_another_failure_on_opening_is_reported_as_the_file_not_opening(tmp_path, monkeypatch):
    f = _sound(tmp_path)

    def odd(*a, **kw):
        raise sqlite3.OperationalError("stand-in refusal")
    monkeypatch.setattr(cache_file_mod, "_connect", odd)
    assert cache_file_mod.open_problem(f) == "cannot be opened (OperationalError: stand-in refusal)"


@pytest.mark.parametrize("exc, verdict", [
    (sqlite3.OperationalError("database is locked"), "locked by another process for more than 2.5 s (another run may "
     "be writing it: wait for it, or give this run its own --cache)"),
    (sqlite3.OperationalError("database is busy"), "locked by another process for more than 2.5 s (another run may "
     "be writing it: wait for it, or give this run its own --cache)"),
    (sqlite3.OperationalError("stand-in oddity"), "damaged (OperationalError: stand-in oddity)"),
    (sqlite3.DatabaseError("file is not a database"), "damaged (DatabaseError: file is not a database)"),
])
def test_a_failure_while_checking_is_a_lock_or_damage(exc, verdict, tmp_path, monkeypatch):
    f = _sound(tmp_path)
    real = cache_file_mod._connect
    monkeypatch.setattr(cache_file_mod, "_connect", lambda *a, **kw: _Answers(real(*a, **kw), "PRAGMA quick_check", exc))
    assert cache_file_mod.open_problem(f, timeout=2.5) == verdict


def test_a_writer_holding_the_file_past_the_timeout_is_a_lock(tmp_path, monkeypatch):
    f = _sound(tmp_path)
    real = cache_file_mod._connect
    monkeypatch.setattr(cache_file_mod, "_connect", lambda *a, **kw: _Answers(
        real(*a, **kw), "BEGIN IMMEDIATE", sqlite3.OperationalError("database is locked")))
    assert cache_file_mod.open_problem(f).startswith("locked by another process for more than 60 s (")  # the default
    assert cache_file_mod.open_problem(f, writable=False) is None  # a reader does not ask for the write lock


def test_an_environment_failure_while_checking_names_the_file_the_step_and_the_cause(tmp_path, monkeypatch):
    f = _sound(tmp_path)
    real = cache_file_mod._connect
    monkeypatch.setattr(cache_file_mod, "_connect", lambda *a, **kw: _Answers(
        real(*a, **kw), "PRAGMA quick_check", sqlite3.OperationalError("disk I/O error")))
    with pytest.raises(CacheStorageError) as e:
        cache_file_mod.open_problem(f)
    assert str(e.value) == (f"call cache {f}: opening failed: the disk reported an I/O error (full, read-only or "
                            f"failing?) (OperationalError: disk I/O error)" + KEPT)


def test_a_failed_check_shows_its_first_three_rows_naming_the_check(tmp_path, monkeypatch):
    f = _sound(tmp_path)
    real = cache_file_mod._connect
    rows = [("row 3 missing",), ("page 7 unused",), ("index bad",), ("fourth",)]
    monkeypatch.setattr(cache_file_mod, "_connect", lambda *a, **kw: _Answers(real(*a, **kw), "PRAGMA quick_check",
                                                                             rows=rows))
    assert cache_file_mod.open_problem(f) == "damaged (SQLite quick_check: row 3 missing; page 7 unused; index bad)"
    monkeypatch.setattr(cache_file_mod, "_connect", lambda *a, **kw: _Answers(real(*a, **kw), "PRAGMA integrity_check",
                                                                             rows=rows[:1]))
    assert cache_file_mod.open_problem(f, full=True) == "damaged (SQLite integrity_check: row 3 missing)"
    assert cache_file_mod.open_problem(f) is None  # the quick check is not the full one


# chat templates: the reported score text, Jinja's whitespace rules, an HF folder's named templates

def test_a_score_calls_text_is_the_last_messages_prefill_and_the_best_choice():
    from crossprofile_lib.backends.chat_template import score_text
    system = {"role": "system", "content": "Be brief."}
    prefill = {"role": "assistant", "content": "Decision:"}
    assert score_text(ChatRequest((system, USER, prefill)), "B") == "Decision: B"
    assert score_text(ChatRequest((system, prefill, USER)), "B") == "B"  # the last message is the user's: no prefill
    assert score_text(ChatRequest((USER,)), "C") == "C"
    assert score_text(ChatRequest(()), "A") == "A"
    assert score_text(ChatRequest((USER, prefill)), None) == ""


def test_a_templates_block_tags_take_their_lines_indent_and_newline_with_them():
    src = "{% for m in messages %}\n    {% if m['role'] == 'user' %}\n[{{ m['content'] }}]\n    {% endif %}\n{% endfor %}"
    t = ChatTemplate(src)
    assert t.render([USER, {"role": "assistant", "content": "Decision:"}]) == "[Which option? Decision: ?]\nDecision:"
    assert t.name == f"template:{t.sha}" and len(t.sha) == 16
    assert ChatTemplate(src, name="mine").name == "mine"


def test_an_hf_folders_named_templates_use_the_one_named_default(tmp_path):
    named = [{"name": "tool_use", "template": "TOOLS {{ messages[0]['content'] }}"},
             {"name": "default", "template": "DEFAULT {{ messages[0]['content'] }}"}]
    t = ChatTemplate.from_spec(_hf_folder(tmp_path, chat_template=named))
    assert t.render([USER]) == "DEFAULT Which option? Decision: ?" and t.name == f"hf:{tmp_path / 'hf'}"


def test_an_hf_folder_without_a_default_template_reads_chat_template_jinja_beside_it(tmp_path):
    spec = _hf_folder(tmp_path, chat_template=[{"name": "tool_use", "template": "TOOLS"}], bos_token="<s>")
    (tmp_path / "hf" / "chat_template.jinja").write_text("{{ bos_token }}J {{ messages[0]['content'] }}")
    assert ChatTemplate.from_spec(spec).render([USER]) == "<s>J Which option? Decision: ?"


def test_an_hf_folder_with_no_template_anywhere_is_refused_naming_both_places(tmp_path):
    spec = _hf_folder(tmp_path, chat_template="   ")
    with pytest.raises(ValueError) as e:
        ChatTemplate.from_spec(spec)
    assert str(e.value) == (f"chat_template '{spec}': {tmp_path / 'hf'} has no chat template (neither a chat_template "
                            f"string in tokenizer_config.json nor chat_template.jinja)")


def test_a_special_token_given_as_an_object_without_content_or_as_null_is_empty(tmp_path):
    t = ChatTemplate.from_spec(_hf_folder(tmp_path, chat_template="{{ bos_token }}|{{ eos_token }}|",
                                          bos_token={"lstrip": False}, eos_token=None))
    assert (t.bos_token, t.eos_token) == ("", "")
    assert t.render([USER]) == "||"


# http_faults: which failures are overload, Retry-After as a date, a Retry-After past the cap

@pytest.mark.parametrize("status, outcome", [(429, "overload"), (503, "overload"), (500, "neutral"),
                                             (502, "neutral"), (504, "neutral"), (404, "neutral")])
def test_a_429_or_503_answer_is_overload_other_statuses_are_neutral(status, outcome):
    from crossprofile_lib.backends.http_faults import _outcome
    assert _outcome(_status_error(openai.APIStatusError, status, {})) == outcome


def test_a_dropped_connection_or_a_timeout_is_overload_any_other_error_neutral():
    from crossprofile_lib.backends.http_faults import _outcome
    req = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    assert _outcome(openai.APIConnectionError(request=req)) == "overload"
    assert _outcome(asyncio.TimeoutError()) == "overload"
    assert _outcome(ValueError("malformed")) == "neutral"


@pytest.mark.parametrize("headers, wait", [
    ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # an HTTP date already past: no wait
    ({"retry-after": "-4"}, 0.0), ({"retry-after": "2.5"}, 2.5), ({"retry-after-ms": "-10"}, 0.0),
    ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),  # the milliseconds win
    ({"retry-after": "soon"}, None), ({"retry-after-ms": "x"}, None), ({}, None),
])
def test_retry_after_is_read_in_seconds_as_a_date_or_in_milliseconds_never_below_zero(headers, wait):
    assert retry_after(_status_error(openai.RateLimitError, 429, headers)) == wait


def test_retry_after_of_an_error_without_an_answer_is_none():
    assert retry_after(ValueError("no response")) is None


def test_a_retry_after_longer_than_the_cap_fails_the_call_saying_so(capsys):
    from crossprofile_lib.backends.http_faults import RetryAfterTooLong
    b = SimpleNamespace(name="openai/fake", max_retries=6, retry_after_max=30.0)
    asked = _status_error(openai.RateLimitError, 429, {"retry-after": "45"})
    with pytest.raises(RetryAfterTooLong) as e:
        retry_pause(b, _state(asked, 1), lambda s: 1.0)
    assert str(e.value) == ("the server answered HTTP 429 asking to wait 45 s before retrying (Retry-After), longer "
                            "than the cap of 30 s (--backend-option retry_after_max=SECONDS); the call is not retried")
    assert retry_pause(b, _state(_status_error(openai.RateLimitError, 429, {"retry-after": "30"}), 1),
                       lambda s: 1.0) == 30.0  # at the cap: waited
    assert capsys.readouterr().err.startswith("openai/fake: waiting 30 s before retry 1 of 6")


# LLMBackend: prefetch's one batch, the legacy notice said once

class _Echo(LLMBackend):
    """A provider answering every call with its own prompt, keeping each batch it was sent; its relevance and stance
    requests name their task."""

    provider = "echo"

    def __init__(self, *a, notice=False, **kw):
        super().__init__(*a, **kw)
        self.batches, self.notice, self.noticed = [], notice, []

    def identity(self):
        return {"provider": self.provider, "model": self.model}

    def relevance_request(self, task, cl):
        return ChatRequest(({"role": "user", "content": f"relevance {task}"},))

    def stance_request(self, task, cl):
        return ChatRequest(({"role": "user", "content": f"stance {task}"},))

    def legacy_notice(self, n_missing, requests=()):
        self.noticed.append(n_missing)
        return f"notice: {n_missing} calls were not made by an earlier version" if self.notice else None

    def _complete(self, requests, on_done):
        self.batches.append([r.messages[0]["content"] for r in requests])
        for j, r in enumerate(requests):
            on_done(j, ChatResult(text=r.messages[0]["content"]))


def test_prefetch_sends_relevance_stance_and_summary_calls_as_one_batch(tmp_path):
    b = _Echo("m", cache=tmp_path / "c")
    prompt = SimpleNamespace(message=lambda: {"role": "user", "content": "summarise"}, file="b3.txt")
    b.prefetch(relevance=[("t1", None), ("t2", None)], summaries=[(prompt, 64)], stances=[("t3", None)])
    assert b.batches == [["relevance t1", "relevance t2", "stance t3", "summarise"]]
    b.prefetch()
    assert len(b.batches) == 1  # nothing asked, nothing sent
    b.prefetch(stances=[("t3", None)], relevance=[("t1", None)])
    assert len(b.batches) == 1  # later calls are cache hits: nothing sent


def test_the_legacy_notice_is_said_once_per_backend_and_only_for_misses(tmp_path, capsys):
    b = _Echo("m", cache=tmp_path / "c", notice=True)
    assert b._legacy_noted is False
    b.chat([ChatRequest(({"role": "user", "content": f"q{i}"},)) for i in range(3)] * 2)  # 3 distinct misses
    assert b.noticed == [3]
    assert capsys.readouterr().err == "notice: 3 calls were not made by an earlier version\n"
    b.chat([ChatRequest(({"role": "user", "content": "q9"},))])
    b.chat([ChatRequest(({"role": "user", "content": "q0"},))])  # a hit: no miss to speak of
    assert b.noticed == [3] and capsys.readouterr().err == ""


def test_a_backend_whose_notice_is_empty_keeps_asking(tmp_path, capsys):
    b = _Echo("m", cache=tmp_path / "c")
    b.chat([ChatRequest(({"role": "user", "content": "q1"},))])
    b.chat([ChatRequest(({"role": "user", "content": "q2"},)), ChatRequest(({"role": "user", "content": "q1"},))])
    assert b.noticed == [1, 1] and capsys.readouterr().err == ""


# OpenAICompatBackend: what run.json records before any call, score mode without a template

PAPER = {"temperature": 0.0, "top_p": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "repeat_penalty": 1.0,
         "repetition_penalty": 1.0}


def test_the_record_before_any_call_names_sampling_concurrency_and_the_tokenizers_counts(tmp_path):
    b = _backend(tmp_path)
    assert b.record() == {"sampling": {"mode": "paper", "fields": PAPER}, "served_model": None,
                          "concurrency": {"mode": "auto", "concurrency": "auto"}}
    b = _backend(tmp_path, sampling="server", concurrency=4)
    b.tokenizer = SimpleNamespace(sources={"store": 2, "server": 5})
    assert b.record() == {"sampling": {"mode": "server", "fields": {"temperature": 0.0}}, "served_model": None,
                          "concurrency": {"mode": "fixed", "concurrency": 4},
                          "tokenizer_counts": {"store": 2, "server": 5}}


def test_score_mode_without_a_template_on_a_server_not_vllm_is_refused_naming_what_it_is(server, tmp_path):
    _, url = server(owned_by="llamacpp")
    with pytest.raises(ValueError) as e:
        OpenAICompatBackend("fake", decision_mode="score", base_url=url, cache=tmp_path / "c", **FAST)
    tail = ("; pass chat_template=chatml, gguf:PATH, hf:FOLDER or a .jinja file (--chat-template)")
    head = ("backend openai/fake: decision_mode 'score' prefills the reply with 'Decision:': a vLLM server renders "
            "that with the model's own chat template, but ")
    assert str(e.value) == head + f"the server at {url} is llama.cpp" + tail
    _, other = server(owned_by="someone")
    with pytest.raises(ValueError) as e:
        OpenAICompatBackend("fake", decision_mode="score", base_url=other, cache=tmp_path / "c", **FAST)
    assert str(e.value) == head + f"no server at {other} said it is vLLM (GET /v1/models)" + tail


# http_faults.probe_models: the served model, its kind, the stored one when no server answers, refusals word for word

def test_the_served_model_is_its_ids_last_part_with_its_root_and_the_servers_kind(server, tmp_path):
    _, url = server(served_model="/models/fake", root="/weights/Qwen2.5-7B", owned_by="vllm")
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST)
    assert b.served_model() == {"id": "fake", "root": "Qwen2.5-7B"} and b.server_kind() == "vllm"
    assert CallCache(tmp_path / "c").served_model("openai", "fake") == {"id": "fake", "root": "Qwen2.5-7B"}


def test_a_llama_cpp_alias_names_the_served_model(server, tmp_path):
    _, url = server(served_model="qwen2.5-7b-q4.gguf", aliases="fake", owned_by="llamacpp")
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST)
    assert b.served_model() == {"id": "qwen2.5-7b-q4.gguf"} and b.server_kind() == "llama.cpp"


def test_no_server_answering_keys_the_calls_on_the_served_model_stored_in_the_cache(server, tmp_path, capsys):
    _, url = server(served_model="fake", root="base-7b")
    assert OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST).served_model() == \
        {"id": "fake", "root": "base-7b"}
    capsys.readouterr()
    down = OpenAICompatBackend("fake", base_url=LOCAL, cache=tmp_path / "c", tokenize_timeout=5, **FAST)
    assert down.served_model() == {"id": "fake", "root": "base-7b"}
    assert capsys.readouterr().err == (
        f"notice: openai/fake: no server answered GET /v1/models ({LOCAL}); the served model recorded in the call "
        f"cache keys the calls: {{'id': 'fake', 'root': 'base-7b'}}\n")
    other = OpenAICompatBackend("other", base_url=LOCAL, cache=tmp_path / "c", tokenize_timeout=5, **FAST)
    assert other.served_model() is None and capsys.readouterr().err == ""  # nothing stored for this model


def test_a_refused_key_on_the_model_list_stops_before_any_call_naming_status_and_variables(server, tmp_path):
    _, url = server(api_key="right")
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", api_key="wrong", **FAST)
    with pytest.raises(ServerRefused) as e:
        b.served_model()
    assert str(e.value) == (f"backend openai/fake: the server at {url} answered HTTP 401 (unauthorized: a wrong or "
                            f"missing API key) for model 'fake'; check CROSSPROFILE_API_KEY / OPENAI_API_KEY. "
                            f"Stopped before any call")
    assert OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", api_key="right", **FAST).served_model() \
        == {"id": "fake"}


def test_two_urls_serving_different_models_are_refused_naming_both(server, tmp_path):
    _, u1 = server(served_model="fake", root="a-7b")
    _, u2 = server(served_model="fake", root="b-7b")
    b = OpenAICompatBackend("fake", base_url=f"{u1},{u2}", cache=tmp_path / "c", **FAST)
    with pytest.raises(ValueError) as e:
        b.served_model()
    assert str(e.value) == (f"backend openai/fake: the base URLs serve different models ({u1}: {{'id': 'fake', "
                            f"'root': 'a-7b'}}; {u2}: {{'id': 'fake', 'root': 'b-7b'}}); one run needs one model")


def test_the_refusal_of_another_model_is_said_whole(server, tmp_path):
    _, url = server(served_model="org/other-7b")
    with pytest.raises(ServerRefused) as e:
        OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST).served_model()
    assert str(e.value) == (
        f"backend openai/fake: the server at {url} does not serve model 'fake' (it serves: org/other-7b). Stopped "
        f"before any call: rows and the book's paper columns are keyed by the backend's name, so a run under another "
        f"model's name would pass its answers off as that model's. Name the served model (--backend "
        f"openai/other-7b), start the server under this name (vLLM: --served-model-name fake; llama.cpp: --alias "
        f"fake), or pass --backend-option accept_served_model=true to run this name on the one model it serves")
    ok = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", accept_served_model=True, **FAST)
    assert ok.served_model() == {"id": "other-7b"}


# http_faults.server_tokenizer: the served model's tokenizer, the counts stored for it, never another silently

ADVICE = ("pass --tokenizer qwen2.5, llama-3.1, PATH/tokenizer.json or gguf:PATH (the model's own tokenizer without a "
          "server; recommended for HTTP runs)")


def test_budgets_use_the_served_models_tokenizer_asked_with_the_runs_key(server, tmp_path, capsys):
    _, url = server(api_key="k1", tokenize="vllm")
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", api_key="k1", retry_wait=0.01)
    root = url.removesuffix("/v1")
    assert (b.tokenizer_source, b.tokenizer.name) == (f"vllm endpoint {root}/tokenize", "server:vllm:fake")
    assert capsys.readouterr().err == (f"notice: openai/fake: budgets use the served model's tokenizer (vllm endpoint "
                                       f"{root}/tokenize); counts are kept in the call cache {tmp_path / 'c' / 'calls.sqlite'}\n")
    assert b.tokenizer.count("one two, three") == 4


def _no_endpoint(url):
    return (f"{url}: no tokenize endpoint answered: tried /extras/tokenize (llama-cpp-python: HTTP 404); /tokenize "
            f"(vllm: HTTP 404); /tokenize (llama.cpp: HTTP 404)")


def test_a_server_without_a_tokenize_endpoint_is_refused_unless_the_offline_fallback_is_asked_for(server, tmp_path,
                                                                                                   capsys):
    _, url = server()
    cache = tmp_path / "c" / "calls.sqlite"
    with pytest.raises(ValueError) as e:
        OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", retry_wait=0.01)
    assert str(e.value) == (
        f"backend openai/fake: budgets are priced with the served model's tokenizer, but no server has a tokenize "
        f"endpoint ({_no_endpoint(url)}) and the call cache {cache} holds no counts for 'fake'; budgets are never "
        f"changed silently: rerun when the server is up, {ADVICE}, or pass --tokenizer-fallback offline to accept "
        f"the offline approximation")
    with pytest.raises(ValueError) as e:
        OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", retry_wait=0.01, tokenizer="server")
    assert str(e.value) == f"backend openai/fake: --tokenizer server, but {_no_endpoint(url)} (at {url}); {ADVICE}"
    capsys.readouterr()
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", retry_wait=0.01, tokenizer_fallback="offline")
    assert b.tokenizer_source == f"offline approximation (--tokenizer-fallback offline: {_no_endpoint(url)})"
    assert b.tokenizer.name == "offline-bpe-approx-v1"
    assert capsys.readouterr().err == (
        f"notice: openai/fake: budgets use the offline approximation offline-bpe-approx-v1, not the model's own "
        f"tokenizer ({_no_endpoint(url)}; --tokenizer-fallback offline)\n")


def test_an_unreachable_tokenizer_uses_the_counts_stored_for_the_served_model_else_stops(server, tmp_path, capsys):
    down = f"{LOCAL}: the server cannot be reached: /extras/tokenize (ConnectionRefusedError)"
    cache = tmp_path / "c" / "calls.sqlite"
    with pytest.raises(ServerUnreachable) as e:
        OpenAICompatBackend("fake", base_url=LOCAL, cache=tmp_path / "c", retry_wait=0.01, tokenize_timeout=5)
    assert str(e.value) == (
        f"backend openai/fake: budgets are priced with the served model's tokenizer, but the servers cannot be "
        f"reached ({down}) and the call cache {cache} holds no counts for 'fake'; budgets are never changed "
        f"silently: rerun when the server is up, {ADVICE}, or pass --tokenizer-fallback offline to accept the "
        f"offline approximation")
    _, url = server(tokenize="llama.cpp")
    up = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", retry_wait=0.01)
    assert (up.tokenizer.count("one two, three"), up.tokenizer.count("four")) == (4, 1)
    capsys.readouterr()
    b = OpenAICompatBackend("fake", base_url=LOCAL, cache=tmp_path / "c", retry_wait=0.01, tokenize_timeout=5)
    assert b.tokenizer_source == f"server:llama.cpp:fake counts stored in the call cache (endpoint unreachable: {down})"
    assert b.tokenizer.count("one two, three") == 4 and b.tokenizer.sources == {"store": 1, "server": 0}
    assert capsys.readouterr().err.endswith(
        f"notice: openai/fake: the tokenize endpoint cannot be reached ({down}); budgets use the 2 token counts "
        f"server:llama.cpp:fake gave earlier runs (kept in the call cache {cache})\n")


# OpenAICompatBackend: the identities of earlier versions (one per base URL stored for this provider and model)

def test_earlier_identities_are_the_current_url_and_every_url_stored_for_this_provider_and_model(tmp_path):
    cache = CallCache(tmp_path / "c")
    r = ChatRequest((USER,))
    for i, (provider, model, url) in enumerate([("openai", "fake", "http://old.example/v1"),
                                                ("openai", "fake", ["http://a.example/v1", "http://b.example/v1"]),
                                                ("openai", "other", "http://other.example/v1"),
                                                ("deepseek", "fake", "http://deep.example/v1"),
                                                ("openai", "fake", LOCAL)]):
        ident = {"provider": provider, "model": model, "base_url": url}
        cache.put(f"key{i}", r, ChatResult(text=f"Decision: {'ABCDE'[i]}"), ident, "generate")
    b = OpenAICompatBackend("fake", base_url=LOCAL, cache=cache, tokenizer="offline", sampling="server")
    options = {"chat_template": None, "grammar_style": None, "reason_chars": None, "extra_body": None}
    got = b.legacy_identities()
    assert got[0] == {"provider": "openai", "model": "fake", "base_url": LOCAL, **options}  # the current URL first
    assert sorted(json.dumps(d, sort_keys=True) for d in got[1:]) == sorted(json.dumps(
        {"provider": "openai", "model": "fake", "base_url": u, **options}, sort_keys=True)
        for u in ("http://old.example/v1", ["http://a.example/v1", "http://b.example/v1"]))  # LOCAL once
    assert OpenAICompatBackend("fake", base_url=LOCAL, cache=cache, tokenizer="offline").legacy_identities() == []


def test_calls_an_earlier_version_made_are_named_once_under_pinned_sampling(tmp_path, capsys):
    cache = CallCache(tmp_path / "c")
    r = ChatRequest((USER,), purpose="decision", choices=("A", "B", "C"))
    old = {"provider": "openai", "model": "fake", "base_url": LOCAL, "chat_template": None, "grammar_style": None,
           "reason_chars": None, "extra_body": None}
    cache.put(call_key(old, r, "generate"), r, ChatResult(text="Decision: C"), old, "generate")
    b = OpenAICompatBackend("fake", base_url=LOCAL, cache=cache, tokenizer="offline")
    assert b.legacy_notice(1, [r]) == (
        f"notice: openai/fake: the call cache {cache.path} holds 1 of this run's calls made by earlier versions "
        f"(keyed by base URL, sampling left to the server); they are not reused with sampling pinned (--sampling "
        f"paper); pass --sampling server to reuse them")
    assert b.legacy_notice(1, []) is None and b.legacy_notice(1, [ChatRequest(({"role": "user", "content": "new"},))]) \
        is None
    server = OpenAICompatBackend("fake", base_url=LOCAL, cache=cache, tokenizer="offline", sampling="server")
    assert server.legacy_notice(1, [r]) is None  # there they are reused, not named


# OpenAICompatBackend._attempt: the circuit breaker's count

def _trip(tmp_path, breaker):
    b = OpenAICompatBackend("fake", base_url=LOCAL, cache=tmp_path / "c", circuit_breaker=breaker, max_retries=4,
                            concurrency=1, **FAST)
    return b, ChatRequest((USER,))


@pytest.mark.parametrize("breaker", [1, 3])
def test_the_circuit_breaker_stops_after_its_count_of_failed_connections(breaker, tmp_path):
    b, r = _trip(tmp_path, breaker)
    with pytest.raises(ServerUnreachable) as e:
        b.chat([r])
    assert str(e.value) == (
        f"backend openai/fake: no server answered at {LOCAL}: the first {breaker} attempts all failed to connect "
        f"(APIConnectionError: Connection error.); is the server running and the base URL right? Stopped early "
        f"(circuit_breaker={breaker}); no finished call is lost (they are in the call cache "
        f"{tmp_path / 'c' / 'calls.sqlite'})")


def test_a_circuit_breaker_of_zero_never_stops_the_run(tmp_path):
    b, r = _trip(tmp_path, 0)
    res, = b.chat([r])
    assert res.error is not None and res.error.startswith("APIConnectionError") and b.stats["errors"] == 1


# OpenAICompatBackend._adds_bos_again: asked of llama.cpp's /tokenize once, with and without the special tokens

class _BosProbe(F.FakeServer):
    """A llama.cpp ``/tokenize`` answering ``PLAIN`` without and ``ADDED`` with the special tokens, after ``WAIT`` s,
    keeping every body it was sent."""

    PLAIN, ADDED, WAIT = [1, 7, 8], [1, 1, 7, 8], 0.0
    asked: list = []

    def _tokenize(self, path, raw):
        req = json.loads(raw or b"{}")
        type(self).asked.append(req)
        return 200, json.dumps({"tokens": self.ADDED if req.get("add_special") else self.PLAIN}).encode(), self.WAIT


def _bos_backend(server, monkeypatch, tmp_path, plain, added, wait=0.0, **kw):
    probe = type("Probe", (_BosProbe,), {"PLAIN": plain, "ADDED": added, "WAIT": wait, "asked": []})
    monkeypatch.setattr(F, "FakeServer", probe)
    try:
        _, url = server(tokenize="llama.cpp", api_key="k2")
    finally:
        monkeypatch.undo()
    b = OpenAICompatBackend("fake", decision_mode="score", base_url=url, cache=tmp_path / "c", api_key="k2",
                            chat_template=_bos_folder(tmp_path), **FAST, **kw)
    return b, probe


@pytest.mark.parametrize("plain, added, again", [
    ([1, 7, 8], [1, 1, 7, 8], True),      # one more BOS before the same tokens: added again
    ([1, 7, 8], [1, 7, 8], False),        # nothing added
    ([1, 7, 8], [2, 1, 7, 8], False),     # another special token, not the BOS
    ([1, 7, 8], [1, 1, 7, 9], False),     # not the same tokens after it
    ([1, 7, 8], [1, 1, 7, 8, 8], False),  # more than one token added
    ([], [1], False),                     # an empty text
    ("x", [1, 1], False),                 # not a token list
])
def test_the_bos_text_is_left_out_only_where_the_server_adds_exactly_that_token_again(plain, added, again, server,
                                                                                       monkeypatch, tmp_path):
    b, probe = _bos_backend(server, monkeypatch, tmp_path, plain, added)
    assert b._adds_bos_again("<s>hello") is again
    assert b._adds_bos_again("<s>other") is again  # asked once per backend
    assert probe.asked == [{"content": "<s>hello", "add_special": False, "parse_special": True},
                           {"content": "<s>hello", "add_special": True, "parse_special": True}]


def test_a_prompt_not_starting_with_the_bos_text_asks_nothing(server, monkeypatch, tmp_path):
    b, probe = _bos_backend(server, monkeypatch, tmp_path, [1, 7], [1, 1, 7])
    assert b._adds_bos_again("hello <s>") is False and probe.asked == []


def test_a_tokenize_endpoint_slower_than_tokenize_timeout_counts_as_none(server, monkeypatch, tmp_path):
    b, probe = _bos_backend(server, monkeypatch, tmp_path, [1, 7], [1, 1, 7], wait=0.6, tokenize_timeout=0.1)
    assert b._adds_bos_again("<s>hello") is False  # the prompt is sent as rendered


# OpenAICompatBackend._letter_token_ids: each letter's one-token ids, bare and after a space, from vLLM's /tokenize

class _LetterIds(F.FakeServer):
    """A vLLM ``/tokenize`` giving ``A`` id 65 and `` A`` id 1065 (and so on), two tokens for ``C`` after a space and
    for ``E`` alone, keeping every body it was sent."""

    asked: list = []

    def _tokenize(self, path, raw):
        req = json.loads(raw or b"{}")
        type(self).asked.append(req)
        text = str(req.get("prompt", ""))
        toks = [ord(text[-1]) + (1000 if text.startswith(" ") else 0)] if text.strip() else []
        if text in (" C", "E"):
            toks = [7, toks[0]]
        return 200, json.dumps({"tokens": toks, "count": len(toks), "max_model_len": 8192}).encode(), 0.0


def test_score_mode_reads_each_letters_single_token_ids_bare_and_after_a_space(server, monkeypatch, tmp_path):
    monkeypatch.setattr(F, "FakeServer", type("Ids", (_LetterIds,), {"asked": []}))
    try:
        fake, url = server(tokenize="vllm", api_key="k3")
    finally:
        monkeypatch.undo()
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", api_key="k3", **FAST)
    ids = b._letter_token_ids()
    assert ids == {65: "A", 1065: "A", 66: "B", 1066: "B", 67: "C", 68: "D", 1068: "D", 1069: "E",
                   **{ord(x) + d: x for x in "FGHIJ" for d in (0, 1000)}}
    assert type(fake).asked[:2] == [{"model": "fake", "prompt": "A", "add_special_tokens": False},
                                    {"model": "fake", "prompt": " A", "add_special_tokens": False}]
    assert len(type(fake).asked) == 20 and b._letter_token_ids() is ids  # asked once per backend


def test_score_mode_without_vllms_tokenize_stops_saying_how_to_read_the_top_log_probabilities(server, tmp_path):
    _, url = server()  # /tokenize answers 404
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST)
    with pytest.raises(ServerUnreachable) as e:
        b._letter_token_ids()
    assert str(e.value) == ("backend openai/fake: score mode asks vLLM's /tokenize for the option letters' token ids, "
                            "but it failed (HTTPStatusError: HTTP 404); pass --backend-option named_logprobs=false "
                            "to read the top 20 log-probabilities instead")


# cache.export_cache: every column of every readable entry, base URLs redacted; what cannot be exported, named

def test_an_export_writes_every_column_of_each_entry_with_its_base_urls_redacted(tmp_path):
    c = CallCache(tmp_path)
    c.put("k1", ChatRequest((USER,), purpose="decision", prompt_file="p.txt"),
          ChatResult(text="Decision: A", retries=1, prompt_tokens=5, completion_tokens=3, latency_s=0.5),
          {"provider": "openai", "model": "m", "base_url": URL}, "generate")
    c.put("k2", ChatRequest(({"role": "user", "content": "q2"},)), ChatResult(text="Decision: B"),
          {"provider": "openai", "model": "m", "base_url": [URL, "http://b.example/v1"]}, "grammar")
    c.close()
    assert cache_mod.export_cache(tmp_path, tmp_path / "out.jsonl") == (2, 0)
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    shown = "https://***@llm.example/v1?key=***&api-version=2024"
    for r in rows:
        assert isinstance(r.pop("created"), float) and len(r.pop("prompt_sha")) == 16
    assert rows == [
        {"key": "k1", "provider": "openai", "model": "m", "base_url": shown, "decision_mode": "generate",
         "purpose": "decision", "prompt_file": "p.txt", "text": "Decision: A", "parsed": None, "retries": 1,
         "prompt_tokens": 5, "completion_tokens": 3, "latency_s": 0.5, "choice_logprobs": None, "meta": None},
        {"key": "k2", "provider": "openai", "model": "m", "base_url": json.dumps([shown, "http://b.example/v1"]),
         "decision_mode": "grammar", "purpose": "decision", "prompt_file": "", "text": "Decision: B", "parsed": None,
         "retries": 0, "prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0, "choice_logprobs": None,
         "meta": None}]
    assert "s3cretpw" not in (tmp_path / "out.jsonl").read_text(encoding="utf-8")


def _recover(f) -> str:
    return (f"; recover: move the file aside (mv {f} {f}.broken) and rerun -- a new cache is made and only the calls "
            f"it lacks are sent again; 'crossprofile cache check {f}' explains the damage and 'crossprofile cache "
            f"export {f} calls.jsonl' saves the readable entries")


def test_a_file_no_entry_of_which_can_be_exported_is_named_with_the_reason(tmp_path):
    missing, empty, junk = tmp_path / "none.sqlite", tmp_path / "empty.sqlite", tmp_path / "junk.sqlite"
    empty.write_bytes(b"")
    junk.write_bytes(b"x" * 100)
    with pytest.raises(cache_mod.CacheError) as e:
        cache_mod.export_cache(missing, tmp_path / "out.jsonl")
    assert str(e.value) == f"call cache {missing}: no such file" + _recover(missing)
    with pytest.raises(cache_mod.CacheError) as e:
        cache_mod.export_cache(empty, tmp_path / "out.jsonl")
    assert str(e.value) == (f"call cache {empty}: 0 bytes (emptied or truncated; a cache file is never empty, and "
                            f"using it would silently re-make every call)" + _recover(empty))
    with pytest.raises(cache_mod.CacheError) as e:
        cache_mod.export_cache(tmp_path, tmp_path / "out.jsonl")  # a folder without calls.sqlite
    assert str(e.value) == f"call cache {tmp_path}: is a directory, not a cache file" + _recover(tmp_path)
    with pytest.raises(cache_mod.CacheError) as e:
        cache_mod.export_cache(junk, tmp_path / "out.jsonl")
    assert str(e.value) == f"call cache {junk}: no entries can be read (DatabaseError: file is not a database)" + \
        _recover(junk)
    assert not (tmp_path / "out.jsonl").exists()


# http_faults.retry_pause: its defaults, the announcement's threshold and wording without a status

def test_a_retry_after_past_the_default_cap_of_120_s_is_not_waited_for():
    from crossprofile_lib.backends.http_faults import RetryAfterTooLong
    bare = SimpleNamespace()  # no name, no max_retries, no cap of its own
    with pytest.raises(RetryAfterTooLong, match=r"asking to wait 121 s .* longer than the cap of 120 s \("):
        retry_pause(bare, _state(_status_error(openai.RateLimitError, 429, {"retry-after": "121"})), lambda s: 0.0)


def test_a_wait_is_announced_only_above_five_seconds_naming_the_error_without_a_status(capsys):
    bare = SimpleNamespace()
    assert retry_pause(bare, _state(ValueError("x"), 1), lambda s: 5.0) == 5.0
    assert capsys.readouterr().err == ""  # five seconds: not announced
    assert retry_pause(bare, _state(ValueError("x"), 2), lambda s: 5.5) == 5.5
    assert capsys.readouterr().err == "backend: waiting 6 s before retry 2 of ?: backoff after ValueError\n"
    assert bare._wait_shown == 2
    assert retry_pause(bare, _state(ValueError("x"), 2), lambda s: 8.0) == 8.0  # the same wave: said once
    assert retry_pause(bare, _state(ValueError("x"), 3), lambda s: 8.0) == 8.0  # the next: said again
    assert capsys.readouterr().err == "backend: waiting 8 s before retry 3 of ?: backoff after ValueError\n"


def test_a_pause_before_any_outcome_is_the_backoff():
    state = SimpleNamespace(outcome=None, attempt_number=1)
    assert retry_pause(SimpleNamespace(), state, lambda s: 2.5) == 2.5


def test_the_ledgers_stances_are_read_from_the_templates_facts(hospital):
    task = make_task(hospital, "PSP", 0)
    cl = claim_list(scripted_discussion(task))
    got = ReferenceDecider().stances(task, cl)
    assert len(got) == len(cl.claims) and any(s is not None for s in got)
    for c, s in zip(cl.claims, got):
        f = None if c.fact_id is None else hospital.fact(c.fact_id)
        assert (s is None) if f is None else (s.option, s.polarity, s.relevant) == (f.about, f.polarity, f.relevant)


# LLMBackend.decide: one format retry for an unparsable answer, every Decision field, what the cache keeps

class _Scripted(LLMBackend):
    """A provider answering each purpose's calls from its own list, in order."""

    provider = "scripted"

    def __init__(self, *a, answers=None, **kw):
        super().__init__(*a, **kw)
        self.answers, self.sent = answers, []

    def identity(self):
        return {"provider": self.provider, "model": self.model}

    def _complete(self, requests, on_done):
        for j, r in enumerate(requests):
            self.sent.append(r.purpose)
            on_done(j, self.answers[r.purpose].pop(0))


def test_a_decision_is_read_after_one_format_retry_and_every_field_says_how(hospital, tmp_path):
    answers = {"decision": [ChatResult(text="Hmm, hard to say.", retries=1, latency_s=0.5),
                            ChatResult(text="Decision: C", latency_s=0.25), ChatResult(text="", error="HTTP 500"),
                            ChatResult(text="maybe")],
               "decision-retry": [ChatResult(text="Decision: B", retries=2, latency_s=1.0),
                                  ChatResult(text="still unsure", latency_s=0.5)]}
    b = _Scripted("m", cache=tmp_path / "c", answers=answers)
    rs = [_ledger_request(hospital, "PSP", 0, "ALL"), _ledger_request(hospital, "PPP", 1, "ALL"),
          _ledger_request(hospital, "PPP", 2, "ALL"), _ledger_request(hospital, "PSP", 3, "ALL")]
    assert [r.option_order for r in rs[:3]] == [("corvane", "helix", "medora"), ("helix", "medora", "corvane"),
                                                ("medora", "corvane", "helix")]
    got = b.decide(rs)
    base = {"prompt_file": "decision_v1.txt", "cached": False, "letter_logprobs": "", "letters_missing": ""}
    for d in got:
        assert len(d.meta.pop("prompt_sha")) == 16
    assert [(d.option, d.letter, d.invalid, d.raw, d.meta) for d in got] == [
        ("helix", "B", False, "Decision: B", {**base, "retries": 3, "format_retry": True, "error": "", "latency_s": 1.5}),
        ("corvane", "C", False, "Decision: C", {**base, "retries": 0, "format_retry": False, "error": "",
                                                "latency_s": 0.25}),
        (None, None, False, "", {**base, "retries": 0, "format_retry": False, "error": "HTTP 500", "latency_s": 0.0}),
        (None, None, True, "still unsure", {**base, "retries": 0, "format_retry": True, "error": "", "latency_s": 0.5})]
    assert b.sent == ["decision"] * 4 + ["decision-retry"] * 2  # the failed call is not retried for its format
    assert (b.stats["decisions"], b.stats["invalid"], b.stats["errors"]) == (4, 1, 1)
    db = sqlite3.connect(tmp_path / "c" / "calls.sqlite")
    stored = sorted(db.execute("SELECT purpose, text, parsed FROM calls").fetchall(), key=lambda r: r[:2])
    db.close()
    assert stored == [("decision", "Decision: C", "C"), ("decision", "Hmm, hard to say.", None),
                      ("decision", "maybe", None), ("decision-retry", "Decision: B", "B"),
                      ("decision-retry", "still unsure", None)]
    again = b.decide(rs[:2])  # from the cache: nothing sent, the same decisions, marked cached
    assert b.sent == ["decision"] * 4 + ["decision-retry"] * 2
    assert [(d.letter, d.meta["cached"], d.meta["retries"], d.meta["format_retry"]) for d in again] == [
        ("B", True, 3, True), ("C", True, 0, False)]


# llm: the stance and relevance schemas whole, the stance and relevance answers' rules

def test_the_stance_schema_is_this_object_for_two_claims_and_three_letters():
    assert stance_schema(2, ("A", "B", "C")) == {
        "type": "object", "additionalProperties": False, "required": ["stances"],
        "properties": {"stances": {"type": "array", "maxItems": 2, "items": {
            "type": "object", "additionalProperties": False, "required": ["n", "option", "direction", "criterion"],
            "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 2},
                           "option": {"type": "string", "enum": ["A", "B", "C"]},
                           "direction": {"type": "string", "enum": ["for", "against"]},
                           "criterion": {"type": "boolean"}}}}}}


def test_the_relevance_schema_is_this_object_for_five_claims():
    from crossprofile_lib.backends.llm import relevance_schema
    assert relevance_schema(5) == {
        "type": "object", "additionalProperties": False, "required": ["relevant"],
        "properties": {"relevant": {"type": "array", "maxItems": 5,
                                    "items": {"type": "integer", "minimum": 1, "maximum": 5}}}}


ORDER = ("helix", "corvane", "medora")


def _st(option, polarity, relevant):
    return (option, polarity, relevant)


def _flat(got):
    return None if got is None else tuple(None if s is None else (s.option, s.polarity, s.relevant) for s in got)


@pytest.mark.parametrize("items, want", [
    ([{"n": 1, "option": "A", "direction": "for", "criterion": True},
      {"n": 3, "option": "C", "direction": "against", "criterion": False}],
     (_st("helix", 1, True), None, _st("medora", -1, False))),
    ([{"n": 2, "option": "B", "direction": "for", "criterion": False},
      {"n": 2, "option": "A", "direction": "against", "criterion": True}],  # a number given twice: the first kept
     (None, _st("corvane", 1, False), None)),
    ([{"n": 0, "option": "A", "direction": "for", "criterion": True},     # numbers outside 1..3
      {"n": 4, "option": "A", "direction": "for", "criterion": True},
      {"n": "1", "option": "A", "direction": "for", "criterion": True},   # not an integer
      {"n": 1, "option": "D", "direction": "for", "criterion": True},     # no such letter
      {"n": 2, "option": "B", "direction": "up", "criterion": True},      # no such direction
      {"n": 3, "option": "C", "direction": "for", "criterion": 1},        # not a boolean
      ["n", 1], "B"],                                                      # not objects
     (None, None, None)),
    ([{"n": 1, "option": "A", "direction": "for", "criterion": 1},        # dropped: the next entry for n=1 counts
      {"n": 1, "option": "C", "direction": "against", "criterion": True}],
     (_st("medora", -1, True), None, None)),
    ([], (None, None, None)),
])
def test_a_stance_answer_keeps_one_well_formed_stance_per_claim_number(items, want):
    assert _flat(parse_stances("Stances: " + json.dumps({"stances": items}) + " end", 3, ORDER)) == want


@pytest.mark.parametrize("text", ["no JSON here", '{"stances": {"n": 1}}', '{"stances": [1, }', '[{"n": 1}]', "",
                                  '{"other": []}'])
def test_a_stance_answer_without_a_stances_list_is_none(text):
    assert parse_stances(text, 3, ORDER) is None


@pytest.mark.parametrize("text, want", [
    ('{"relevant": [3, 1, 3]}', [0, 2]), ('{"relevant": [0, 2, 6, true, "4"]}', [1]), ('{"relevant": []}', []),
    ("Relevant: [2, 5]", [1, 4]), ("RELEVANT 4 , 1", [0, 3]), ("relevant: none", []), ("all irrelevant", None), ("nothing", None),
])
def test_a_relevance_answer_gives_the_zero_based_claims_within_range(text, want):
    from crossprofile_lib.backends.llm import parse_relevance
    assert parse_relevance(text, 5) == want


# CallCache.__init__ and _open_readonly: where the file goes, how it is opened, a read-only one replayed

def test_a_new_cache_is_made_in_its_folder_with_the_write_ahead_log_and_its_side_tables(tmp_path):
    c = CallCache(tmp_path / "a" / "b")
    try:
        assert c.path == str(tmp_path / "a" / "b" / "calls.sqlite") and c.readonly == ""
        assert c._db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert c._db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        assert sorted(r[0] for r in c._db.execute("SELECT name FROM sqlite_master WHERE type='table'")) == [
            "calls", "served_models", "token_counts"]
    finally:
        c.close()
    m = CallCache(":memory:")
    assert m.path == ":memory:" and len(m) == 0


@pytest.mark.parametrize("name", ["mine.db", "mine.sqlite"])
def test_a_cache_file_named_directly_is_used_as_it_is(name, tmp_path):
    c = CallCache(tmp_path / "made")
    c.put("k", ChatRequest((USER,)), ChatResult(text="Decision: A"), {"provider": "p", "model": "m"}, "generate")
    c.close()
    (tmp_path / "made" / "calls.sqlite").rename(tmp_path / name)
    c = CallCache(tmp_path / name)
    assert c.path == str(tmp_path / name) and len(c) == 1 and c.get_many(["k"])["k"].text == "Decision: A"
    c.close()


def test_a_cache_folder_that_cannot_be_made_is_refused_naming_it(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(cache_mod.CacheError) as e:
        CallCache(tmp_path / "file" / "sub")
    assert str(e.value) == (f"call cache folder {tmp_path / 'file' / 'sub'}: cannot be made ([Errno 20] Not a "
                            f"directory: '{tmp_path / 'file' / 'sub'}'); choose another --cache")


def test_a_file_that_is_no_cache_is_refused_with_the_recovery(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"y" * 200)
    with pytest.raises(cache_mod.CacheError) as e:
        CallCache(junk)
    assert str(e.value) == (f"call cache {junk}: not a SQLite database (its first bytes are not the SQLite header)"
                            + _recover(junk))


def test_a_read_only_cache_replays_its_calls_and_refuses_to_make_new_ones(tmp_path, capsys):
    c = CallCache(tmp_path)
    c.put("k", ChatRequest((USER,)), ChatResult(text="Decision: A"), {"provider": "p", "model": "m"}, "generate")
    c.close()
    f = tmp_path / "calls.sqlite"
    f.chmod(0o444)
    try:
        c = CallCache(tmp_path)
        why = ("read-only (mode -r--r--r--): finished calls could not be stored; make it writable (chmod u+w) or "
               "point --cache at a copy")
        assert c.readonly == why
        assert capsys.readouterr().err == (f"notice: call cache {f} is read-only (mode -r--r--r--): replaying the "
                                           f"calls it holds; a call it does not hold stops the run before it is sent\n")
        assert c.get_many(["k", "other"])["k"].text == "Decision: A" and len(c) == 1
        c.will_store(0)  # nothing to make: fine
        with pytest.raises(CacheStorageError) as e:
            c.put("k2", ChatRequest((USER,)), ChatResult(text="Decision: B"), {"provider": "p", "model": "m"},
                  "generate")
        assert str(e.value) == (f"call cache {f}: 1 call it does not hold would have to be made, so none is sent (a "
                                f"read-only cache replays only what it holds); it is {why}")
        with pytest.raises(CacheStorageError, match=r": 3 calls it does not hold would have to be made"):
            c.will_store(3)
        c.close()
    finally:
        f.chmod(0o644)


# cache.call_key: the hashed text written out; check_cache's report

def test_a_calls_key_is_the_sha256_of_its_sorted_compact_utf8_json():
    import hashlib
    r = ChatRequest(({"role": "user", "content": "Quelle option ? Décision : ?"},))
    blob = ('{"choices":null,"decision_mode":"grammar","identity":{"model":"deepseek-chat","provider":"deepseek"},'
            '"json_schema":null,"max_tokens":512,"messages":[{"content":"Quelle option ? Décision : ?","role":"user"}],'
            '"stop":null,"temperature":0.0,"v":1}')
    want = hashlib.sha256(blob.encode("utf-8")).hexdigest()
    assert call_key({"provider": "deepseek", "model": "deepseek-chat"}, r, "grammar") == want
    assert want == "ef947e1ee61e6a710281bc2df257e66f5240bc8433f181500fa19ed4fc28d7c8"


def test_every_field_of_a_call_changes_its_key_but_its_purpose_and_prompt_file():
    ident = {"provider": "openai", "model": "m"}
    r = ChatRequest((USER,), choices=("A", "B"), stop=("\n",))
    k = call_key(ident, r, "generate")
    changed = [dataclasses.replace(r, messages=({"role": "user", "content": "other"},)),
               dataclasses.replace(r, max_tokens=511), dataclasses.replace(r, temperature=0.5),
               dataclasses.replace(r, choices=("A", "C")), dataclasses.replace(r, choices=None),
               dataclasses.replace(r, json_schema={"type": "object"}), dataclasses.replace(r, stop=None),
               dataclasses.replace(r, stop=("\n\n",))]
    assert len({k, *(call_key(ident, c, "generate") for c in changed)}) == len(changed) + 1
    assert call_key(ident, r, "score") != k and call_key({**ident, "model": "n"}, r, "generate") != k
    assert call_key(ident, dataclasses.replace(r, purpose="b3", prompt_file="x.txt"), "generate") == k
    assert call_key(ident, dataclasses.replace(r, choices=["A", "B"], stop=["\n"]), "generate") == k  # lists as tuples


def _bad_rows(tmp_path, n_bad):
    c = CallCache(tmp_path)
    for i in range(3):
        c.put(f"k{i}", ChatRequest(({"role": "user", "content": f"q{i}"},)), ChatResult(text="Decision: A"),
              {"provider": "p", "model": "m"}, "generate")
    c.close()
    db = sqlite3.connect(tmp_path / "calls.sqlite")
    for i in range(n_bad):
        db.execute("UPDATE calls SET meta = '{not json' WHERE key = ?", (f"k{i}",))
    db.commit()
    db.close()
    return str(tmp_path / "calls.sqlite")


@pytest.mark.parametrize("n_bad, problem", [(0, None), (1, "1 entry do not decode"), (2, "2 entries do not decode")])
def test_a_cache_check_counts_its_entries_and_names_those_that_do_not_decode(n_bad, problem, tmp_path):
    f = _bad_rows(tmp_path, n_bad)
    assert check_cache(tmp_path) == {"file": f, "ok": n_bad == 0, "problem": problem, "entries": 3,
                                     "bad_rows": [f"k{i}" for i in range(n_bad)]}


def test_a_cache_check_of_a_file_that_cannot_be_read_gives_the_reason_and_no_count(tmp_path):
    (tmp_path / "junk.sqlite").write_bytes(b"z" * 300)
    assert check_cache(tmp_path / "junk.sqlite") == {
        "file": str(tmp_path / "junk.sqlite"), "ok": False, "entries": None, "bad_rows": [],
        "problem": "not a SQLite database (its first bytes are not the SQLite header)"}


# OpenAICompatBackend.request_fields and _constraint: what is sent, whole, per mode and constraint style

SAMPLED = {"top_p": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "repeat_penalty": 1.0,
           "repetition_penalty": 1.0}


def test_a_generate_call_sends_its_messages_limits_sampling_and_stop(tmp_path):
    r = ChatRequest((USER,), max_tokens=64, stop=("\n\n",), json_schema={"type": "object"})
    assert _backend(tmp_path).request_fields(r) == ("chat", {
        "model": "fake", "messages": [USER], "max_tokens": 64, "temperature": 0.0, "extra_body": SAMPLED,
        "stop": ["\n\n"]})  # generate mode: no constraint, not even for a JSON-schema call
    assert _backend(tmp_path, sampling="server").request_fields(ChatRequest((USER,), temperature=0.7)) == ("chat", {
        "model": "fake", "messages": [USER], "max_tokens": 512, "temperature": 0.7, "extra_body": None})
    assert _backend(tmp_path, sampling="server", extra_body={"seed": 7}).request_fields(ChatRequest((USER,))) == (
        "chat", {"model": "fake", "messages": [USER], "max_tokens": 512, "temperature": 0.0,
                 "extra_body": {"seed": 7}})


@pytest.mark.parametrize("style, keys", [("gbnf", ["grammar"]), ("vllm", ["structured_outputs", "guided_regex"]),
                                         ("both", ["grammar", "structured_outputs", "guided_regex"])])
def test_a_grammar_decision_is_constrained_in_the_styles_own_fields(style, keys, tmp_path):
    from crossprofile_lib.backends.llm import decision_gbnf, decision_regex
    b = _backend(tmp_path, decision_mode="grammar", grammar_style=style, sampling="server", reason_chars=120)
    r = ChatRequest((USER,), max_tokens=200, choices=("A", "B", "C"))
    endpoint, fields = b.request_fields(r)
    rx = decision_regex(("A", "B", "C"), 120)
    full = {"grammar": decision_gbnf(("A", "B", "C"), 120), "structured_outputs": {"regex": rx}, "guided_regex": rx}
    assert endpoint == "chat" and fields["extra_body"] == {k: full[k] for k in keys}
    assert "120" in rx and "120" in full["grammar"]  # the reason's length is the backend's reason_chars
    assert b.request_fields(ChatRequest((USER,), max_tokens=200))[1]["extra_body"] is None  # no choices: free


@pytest.mark.parametrize("mode", ["grammar", "score"])
@pytest.mark.parametrize("style, keys", [("gbnf", ["grammar"]), ("vllm", ["structured_outputs", "guided_json"]),
                                         ("both", ["grammar", "structured_outputs", "guided_json"])])
def test_a_json_schema_call_is_constrained_in_grammar_and_score_modes(mode, style, keys, tmp_path):
    from crossprofile_lib.task.llama_engine import json_schema_gbnf
    schema = stance_schema(2, ("A", "B"))
    b = OpenAICompatBackend("fake", decision_mode=mode, base_url=LOCAL, cache=tmp_path / "c", tokenizer="offline",
                            grammar_style=style, sampling="server", chat_template="chatml")
    endpoint, fields = b.request_fields(ChatRequest((USER,), max_tokens=80, json_schema=schema, choices=("A", "B")))
    full = {"grammar": json_schema_gbnf(schema), "structured_outputs": {"json": schema}, "guided_json": schema}
    assert endpoint == "chat" and fields["max_tokens"] == 80 and fields["extra_body"] == {k: full[k] for k in keys}


def test_a_scored_call_with_a_template_on_vllm_sends_the_rendered_text_without_special_tokens(server, tmp_path):
    _, url = server(owned_by="vllm")
    b = OpenAICompatBackend("fake", decision_mode="score", base_url=url, cache=tmp_path / "c", chat_template="chatml",
                            named_logprobs=False, sampling="server", **FAST)
    r = ChatRequest((USER, {"role": "assistant", "content": "Decision:"}), max_tokens=1, choices=("A", "B", "C"))
    assert b.request_fields(r) == ("completions", {
        "model": "fake", "prompt": "<|im_start|>user\nWhich option? Decision: ?<|im_end|>\n<|im_start|>assistant\n"
                                   "Decision:", "max_tokens": 1, "temperature": 0.0, "logprobs": 20,
        "extra_body": {"add_special_tokens": False}})


# cache_file._decode and _header_problem: a stored row read back, a damaged one named; a truncated file measured

def test_a_stored_row_is_read_back_whole_and_marked_cached():
    row = ("k" * 64, "Decision: B", 2, 30, 4, 1.5, '{"A": -2.0, "B": -0.1}', '{"url": 1}', "B")
    res = cache_file_mod._decode("/c.sqlite", row)
    assert res == ChatResult(text="Decision: B", cached=True, retries=2, prompt_tokens=30, completion_tokens=4,
                             latency_s=1.5, choice_logprobs={"A": -2.0, "B": -0.1}, meta={"url": 1, "parsed": "B"})
    bare = cache_file_mod._decode("/c.sqlite", ("k", "x", None, None, None, None, None, None, None))
    assert bare == ChatResult(text="x", cached=True, retries=0, prompt_tokens=0, completion_tokens=0, latency_s=0.0,
                              choice_logprobs=None, meta={})
    assert type(bare.latency_s) is float and type(bare.retries) is int


@pytest.mark.parametrize("change, why", [
    ({6: "[1, 2]"}, "ValueError: meta/choice_logprobs must be JSON objects and text a string"),
    ({7: '"just text"'}, "ValueError: meta/choice_logprobs must be JSON objects and text a string"),
    ({1: 5}, "ValueError: meta/choice_logprobs must be JSON objects and text a string"),
    ({7: "{not json"}, "JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    ({2: "two"}, "ValueError: invalid literal for int() with base 10: 'two'"),
])
def test_a_row_that_does_not_decode_is_named_by_its_keys_start(change, why):
    row = ["0123456789abcdef" + "f" * 48, "Decision: B", 0, 0, 0, 0.0, None, None, None]
    for i, v in change.items():
        row[i] = v
    with pytest.raises(cache_file_mod.CacheError) as e:
        cache_file_mod._decode("/c.sqlite", tuple(row))
    assert str(e.value) == (f"call cache /c.sqlite: entry 0123456789abcdef... does not decode ({why}); the file was "
                            f"edited or damaged" + _recover("/c.sqlite"))


def _header(page_size: int, pages: int) -> bytes:
    head = bytearray(b"SQLite format 3\x00" + bytes(84))
    head[16:18] = page_size.to_bytes(2, "big")
    head[28:32] = pages.to_bytes(4, "big")
    return bytes(head)


def test_a_file_shorter_than_its_header_says_is_truncated(tmp_path):
    f = tmp_path / "c.sqlite"
    f.write_bytes(_header(4096, 3) + bytes(8000))  # 8100 of 12288 bytes
    assert cache_file_mod._header_problem(f, 8100) == "truncated (8100 bytes; its header says 3 pages of 4096 bytes = 12288)"
    assert cache_file_mod._header_problem(f, 12288) is None
    f.write_bytes(_header(1, 2) + bytes(100))  # a page size of 1 means 65536
    assert cache_file_mod._header_problem(f, 200) == "truncated (200 bytes; its header says 2 pages of 65536 bytes = 131072)"
    f.write_bytes(_header(4096, 0) + bytes(10))  # no page count: nothing to compare
    assert cache_file_mod._header_problem(f, 110) is None
    f.write_bytes(_header(4096, 3)[:60])
    assert cache_file_mod._header_problem(f, 60) == "truncated (60 bytes, shorter than a SQLite header)"
    f.write_bytes(b"SQLite format 2\x00" + bytes(200))
    assert cache_file_mod._header_problem(f, 216) == "not a SQLite database (its first bytes are not the SQLite header)"


# concurrency: URLLimit.observe traced answer by answer; Pool's start, workers and record

def test_a_urls_limit_doubles_in_slow_start_halves_on_overload_then_grows_by_one():
    u = URLLimit()
    assert (u.limit, u.slow_start, u.peak) == (4.0, True, 4.0)
    for _ in range(3):
        u.observe("ok", 1.0)
    assert u.limit == 4.0 and u.window_done == 3
    u.observe("ok", 1.0)  # a window of int(limit) answers: doubled
    assert (u.limit, u.window_done, u.peak) == (8.0, 0, 8.0)
    for _ in range(8):
        u.observe("ok", 1.0)
    assert (u.limit, u.answers) == (16.0, 12)
    u.observe("overload", 9.0)  # halved; slow start over
    assert (u.limit, u.slow_start, u.overloads, u.last_cut, u.peak) == (8.0, False, 1, 13, 16.0)
    u.observe("overload", 9.0)  # within the window of the last cut: not cut again
    assert (u.limit, u.overloads, u.answers) == (8.0, 2, 14)
    u.observe("neutral", 50.0)  # neither latency nor limit
    assert (u.limit, u.smoothed, u.answers, u.window_done) == (8.0, 1.0, 15, 0)
    for _ in range(7):
        u.observe("ok", 1.0)
    assert u.limit == 8.0
    u.observe("ok", 1.0)  # additive increase
    assert (u.limit, u.queueing, u.overloads) == (9.0, 0, 2)


def test_latency_between_rise_and_cut_times_the_baseline_is_queueing_without_a_cut():
    u = URLLimit()
    u.observe("ok", 1.0)
    u.observe("ok", 3.0)  # smoothed 1.4: under 1.5 times the baseline
    assert (u.queueing, u.slow_start) == (0, True)
    u.observe("ok", 2.4)  # smoothed 0.8 * 1.4 + 0.2 * 2.4 = 1.6: over 1.5, under 2
    assert u.smoothed == pytest.approx(1.6)
    assert (u.queueing, u.slow_start, u.limit) == (1, False, 4.0)
    u.observe("ok", 1.6)  # smoothed 1.6 again: still queueing, and the window is not counted toward growth
    assert (u.queueing, u.limit) == (2, 4.0)


def test_a_limit_never_falls_below_one_nor_rises_past_its_ceiling():
    low = URLLimit(limit=1.0, peak=1.0)
    low.observe("overload", 1.0)
    assert low.limit == 1.0
    top = URLLimit(limit=6.0, ceiling=6, peak=6.0)
    for _ in range(12):
        top.observe("ok", 1.0)
    assert top.limit == 6.0
    near = URLLimit(limit=5.0, ceiling=6, peak=5.0)
    for _ in range(5):
        near.observe("ok", 1.0)
    assert (near.limit, near.peak) == (6.0, 6.0)  # doubled, held at the ceiling


def test_a_pool_starts_each_url_at_four_or_its_ceiling_and_records_where_each_went():
    pool = Pool(2, "auto")
    assert [(u.limit, u.peak, u.ceiling) for u in pool.urls] == [(4.0, 4.0, 128)] * 2 and pool.workers == 256
    small = Pool(1, "auto", ceiling=2)
    assert (small.urls[0].limit, small.urls[0].peak, small.workers) == (2.0, 2.0, 2)
    for _ in range(4):
        pool.urls[1].observe("ok", 1.0)
    pool.urls[0].observe("overload", 1.0)
    assert pool.record(["http://a/v1", "http://b/v1"]) == {
        "mode": "auto", "rule": "AIMD per base URL on latency, 429/503 and timeouts", "start": 4, "ceiling": 128,
        "rise": 1.5, "cut": 2.0,
        "per_url": [{"base_url": "http://a/v1", "final": 2, "peak": 4, "answers": 1, "overloads": 1, "queueing": 0},
                    {"base_url": "http://b/v1", "final": 8, "peak": 8, "answers": 4, "overloads": 0, "queueing": 0}]}
    fixed = Pool(3, 5)
    assert (fixed.adaptive, fixed.total, fixed.workers) == (False, 5, 5)
    assert fixed.record(["x", "y", "z"]) == {"mode": "fixed", "concurrency": 5}


# http_faults.RetryWaves: one stderr line per new wave, or the bar's description

class _Waves:
    def __init__(self, bar=None):
        from crossprofile_lib.backends.http_faults import RetryWaves
        self.w = type("W", (RetryWaves,), {})()
        self.w.name, self.w.shown_urls, self.w.max_retries = "openai/fake", "http://s/v1", 4
        self.w._waves, self.w._wave_shown, self.w._last_error = {}, 0, ""
        self.w._scrub = lambda text: text.replace("Secret", "***")
        if bar is not None:
            self.w._bar = bar


class _Bar:
    def __init__(self, desc, disable=False):
        self.desc, self.disable, self.shown = desc, disable, []

    def set_description_str(self, text, refresh=True):
        self.shown.append(text)


def test_each_new_retry_wave_is_one_line_naming_the_calls_the_wave_and_the_last_error(capsys):
    w = _Waves().w
    w._retrying(0, _state(ValueError("x"), 1))
    w._retrying(1, _state(KeyError("x"), 1))  # the same wave: no new line
    w._retrying(0, _state(TimeoutError("x"), 2))
    w._retry_done(1)
    w._retry_done(7)  # not retrying: nothing
    w._retry_done(0)
    assert capsys.readouterr().err == (
        "openai/fake: retrying 1 call (wave 1/4; last: ValueError) at http://s/v1\n"
        "openai/fake: retrying 2 calls (wave 2/4; last: TimeoutError) at http://s/v1\n")
    assert w._waves == {} and w._wave_shown == 2


def test_the_last_error_is_scrubbed_and_empty_without_an_outcome(capsys):
    w = _Waves().w
    secret = type("SecretLeak", (Exception,), {})
    w._retrying(3, _state(secret("x"), 1))
    assert w._last_error == "***Leak"
    w._retrying(4, SimpleNamespace(outcome=None, attempt_number=2))
    assert w._last_error == ""
    assert capsys.readouterr().err.splitlines() == [
        "openai/fake: retrying 1 call (wave 1/4; last: ***Leak) at http://s/v1",
        "openai/fake: retrying 2 calls (wave 2/4; last: ) at http://s/v1"]


def test_a_shown_bar_carries_the_waves_after_its_own_description_and_drops_them_when_done(capsys):
    bar = _Bar("openai/fake decision")
    w = _Waves(bar).w
    w._retrying(0, _state(ValueError("x"), 1))
    bar.desc = "changed by the bar itself"  # the base is the description the bar had first
    w._retrying(0, _state(ValueError("x"), 2))
    w._retry_done(0)
    assert bar.shown == ["openai/fake decision | retrying 1 call (wave 1/4; last: ValueError)",
                         "openai/fake decision | retrying 1 call (wave 2/4; last: ValueError)",
                         "openai/fake decision"]
    assert capsys.readouterr().err == ""
    hidden = _Bar("x", disable=True)
    w2 = _Waves(hidden).w
    w2._retrying(0, _state(ValueError("x"), 1))
    assert hidden.shown == [] and capsys.readouterr().err.startswith("openai/fake: retrying 1 call (wave 1/4")


# the ledger: its name, its scores by hand, the soft choice, what it cannot do

_FACTS = {"f1": SimpleNamespace(about="a", polarity=1, relevant=True),
          "f2": SimpleNamespace(about="b", polarity=-1, relevant=False),
          "f3": SimpleNamespace(about="a", polarity=1, relevant=True),
          "f4": SimpleNamespace(about="c", polarity=1, relevant=True)}


def _ledger_req(kept, order=("b", "a", "c")):
    template = SimpleNamespace(fact=_FACTS.__getitem__)
    task = SimpleNamespace(template=template, seed=3, task_id="t-1")
    memory = SimpleNamespace(kept_facts=lambda: list(kept),
                             kept=[SimpleNamespace(fact_id=f, text=f"line {f}") for f, _ in kept])
    return SimpleNamespace(task=task, memory=memory, option_order=order)


def test_the_ledgers_name_shows_its_three_settings():
    assert ReferenceDecider().model == "reference-decider(sp=0,irr=0,beta=inf)"
    assert ReferenceDecider(social_proof=0.5, irrelevant_weight=0.25, inverse_temperature=2).model == \
        "reference-decider(sp=0.5,irr=0.25,beta=2)"


def test_the_ledgers_scores_weigh_irrelevant_facts_and_restatements_by_its_settings():
    d = ReferenceDecider(social_proof=0.5, irrelevant_weight=0.25)
    r = _ledger_req([("f1", 1), ("f2", 2), ("f3", 3), ("f4", 0)])
    # b: -1 * 0.25 * (1 + 0.5 * 1) = -0.375; a: 1 * (1 + 0) + 1 * (1 + 0.5 * 2) = 3; c: 1 * (1 + 0.5 * 0) = 1
    assert d.option_scores(r.task, r.memory, r.option_order).tolist() == [-0.375, 3.0, 1.0]
    plain = ReferenceDecider()  # irrelevant facts weigh nothing, restatements count once
    assert plain.option_scores(r.task, r.memory, r.option_order).tolist() == [0.0, 2.0, 1.0]
    got = d.decide_one(r)
    assert (got.option, got.letter, got.invalid, got.raw) == ("a", "B", False, "scores=[-0.375, 3.0, 1.0]")


def test_a_finite_inverse_temperature_draws_by_the_softmax_of_the_scores():
    sharp = ReferenceDecider(inverse_temperature=1e6)
    assert {sharp.decide_one(_ledger_req([("f4", 1)], order=o)).option for o in (("a", "b", "c"), ("c", "a", "b"))} \
        == {"c"}  # a large one: the best always
    flat = ReferenceDecider(inverse_temperature=0)
    picks = {flat.decide_one(SimpleNamespace(**{**vars(_ledger_req([("f4", 1)])), "task": SimpleNamespace(
        template=SimpleNamespace(fact=_FACTS.__getitem__), seed=s, task_id="t-1")})).option for s in range(40)}
    assert picks == {"a", "b", "c"}  # zero: every option alike, whatever the scores


def test_the_ledger_makes_no_calls_and_refuses_a_generated_summary():
    d = ReferenceDecider()
    assert d.prefetch(relevance=[1], summaries=[2], stances=[3]) is None
    with pytest.raises(ValueError) as e:
        d.summarise(None, 100)
    assert str(e.value) == "B3 is a generated summary: it needs a model backend, not the reference decider"
    assert [x.option for x in d.decide([_ledger_req([("f4", 1)]), _ledger_req([("f1", 1)])])] == ["c", "a"]


# OpenAICompatBackend._honoured: whether a constrained answer kept to its constraint

@pytest.mark.parametrize("text, finish, max_tokens, kept", [
    ("Cheaper.\nDecision: B", "stop", 200, True),
    ("Cheaper.\nDecision: B\n\n", "stop", 200, True),        # trailing blank lines are not the answer
    ("Decision: B", "stop", 200, False),                     # no reason line
    ("Cheaper.\nDecision: D", "stop", 200, False),           # not a choice
    ("x" * 51 + "\nDecision: A", "stop", 200, False),        # a reason longer than reason_chars
    ("x" * 50 + "\nDecision: A", "stop", 200, True),
    ("Cheaper because", "length", 65, True),                 # cut off where the reason could not fit (65 < 50 + 16)
    ("Cheaper because", "length", 66, False),                # cut off with room for it: broken
])
def test_a_grammar_decision_kept_its_constraint_unless_cut_where_it_could_not_fit(text, finish, max_tokens, kept,
                                                                                   tmp_path):
    b = _backend(tmp_path, decision_mode="grammar", grammar_style="gbnf", reason_chars=50)
    assert b._honoured(ChatRequest((USER,), max_tokens=max_tokens, choices=("A", "B", "C")), text, finish) is kept


@pytest.mark.parametrize("text, finish, kept", [
    ('{"relevant": [1, 2]}', "stop", True), ('{"relevant": [9]}', "stop", False), ("not json", "stop", False),
    ('  {"relevant": [1,', "length", True), ("Sure: {", "length", False),
])
def test_a_json_answer_kept_its_schema_or_was_cut_after_starting_as_json(text, finish, kept, tmp_path):
    from crossprofile_lib.backends.llm import relevance_schema
    b = _backend(tmp_path, decision_mode="grammar", grammar_style="vllm")
    assert b._honoured(ChatRequest((USER,), max_tokens=20, json_schema=relevance_schema(3)), text, finish) is kept


def test_an_unconstrained_answer_always_kept_its_constraint(tmp_path):
    r = ChatRequest((USER,), max_tokens=20, choices=("A", "B"))
    assert _backend(tmp_path)._honoured(r, "anything", "length") is True  # generate mode: no constraint
    assert _backend(tmp_path, decision_mode="grammar", grammar_style="gbnf")._honoured(
        ChatRequest((USER,), max_tokens=20), "free text", "stop") is True  # no choices, no schema


# OpenAICompatBackend._send: an answer read from the client's response, or the fault it is

def _client(chat=None, completion=None):
    async def chat_create(**fields):
        return chat

    async def completion_create(**fields):
        return completion
    return SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=chat_create)),
                           completions=SimpleNamespace(create=completion_create))


def _chat_resp(text, finish="stop", usage=None):
    return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=text), finish_reason=finish)],
                           usage=usage)


def test_a_chat_answer_is_its_text_and_usage(tmp_path):
    b = _backend(tmp_path)
    res = asyncio.run(b._send(_client(chat=_chat_resp("Decision: A", usage=SimpleNamespace(
        prompt_tokens=31, completion_tokens=4))), ChatRequest((USER,))))
    assert (res.text, res.prompt_tokens, res.completion_tokens, res.choice_logprobs, res.error) == (
        "Decision: A", 31, 4, None, None)
    assert res.latency_s >= 0.0


@pytest.mark.parametrize("resp, message", [
    (_chat_resp("  \n"), "chat completion with empty content"),
    (_chat_resp(None), "chat completion with empty content"),
    (SimpleNamespace(choices=[], usage=None), "chat completion without choices (IndexError)"),
    (SimpleNamespace(choices=None, usage=None), "chat completion without choices (TypeError)"),
])
def test_a_chat_answer_without_text_is_a_malformed_response(resp, message, tmp_path):
    from crossprofile_lib.backends.http_faults import MalformedResponse
    with pytest.raises(MalformedResponse) as e:
        asyncio.run(_backend(tmp_path)._send(_client(chat=resp), ChatRequest((USER,))))
    assert str(e.value) == message


def test_an_answer_breaking_its_grammar_is_named_with_its_purpose_style_and_start(tmp_path):
    from crossprofile_lib.backends.http_faults import ConstraintBroken
    b = _backend(tmp_path, decision_mode="grammar", grammar_style="both", reason_chars=50)
    r = ChatRequest((USER,), max_tokens=200, choices=("A", "B"), purpose="decision")
    with pytest.raises(ConstraintBroken) as e:
        asyncio.run(b._send(_client(chat=_chat_resp("I pick " + "x" * 200)), r))
    assert str(e.value) == "the answer breaks the decision call's constraint (grammar_style=both): 'I pick " + \
        "x" * 113 + "'"
    ok = asyncio.run(b._send(_client(chat=_chat_resp("Fine.\nDecision: B")), r))
    assert ok.text == "Fine.\nDecision: B"


SCORED = ChatRequest((USER, {"role": "assistant", "content": "Decision:"}), max_tokens=1, choices=("A", "B", "C"))


def _completion(logprobs):
    return SimpleNamespace(choices=[SimpleNamespace(logprobs=logprobs)], usage=SimpleNamespace(
        prompt_tokens=12, completion_tokens=1))


@pytest.mark.parametrize("logprobs", [
    SimpleNamespace(top_logprobs=[{" A": -0.9, "A": -0.7, "B": -1.2, "x": 0.0}]),  # OpenAI's text completions
    SimpleNamespace(top_logprobs=None, content=[{"top_logprobs": [{"token": "A", "logprob": -0.7},  # llama-server's
                                                                  {"token": " B", "logprob": -1.2}]}]),
])
def test_a_scored_answer_is_the_prefill_and_the_likeliest_choice_with_each_choices_log_probability(logprobs,
                                                                                                    tmp_path):
    b = _backend(tmp_path, decision_mode="score", chat_template="chatml", tokenize_timeout=5)
    res = asyncio.run(b._send(_client(completion=_completion(logprobs)), SCORED))
    assert (res.text, res.choice_logprobs, res.prompt_tokens, res.completion_tokens) == (
        "Decision: A", {"A": -0.7, "B": -1.2}, 12, 1)


@pytest.mark.parametrize("logprobs, message", [
    (None, "completion without top_logprobs (AttributeError)"),
    (SimpleNamespace(top_logprobs=[]), "completion without top_logprobs (IndexError)"),
    (SimpleNamespace(top_logprobs=[{}]), "completion with empty top_logprobs"),
])
def test_a_scored_answer_without_log_probabilities_is_a_malformed_response(logprobs, message, tmp_path):
    from crossprofile_lib.backends.http_faults import MalformedResponse
    b = _backend(tmp_path, decision_mode="score", chat_template="chatml", tokenize_timeout=5)
    with pytest.raises(MalformedResponse) as e:
        asyncio.run(b._send(_client(completion=_completion(logprobs)), SCORED))
    assert str(e.value) == message


# OpenAICompatBackend._call and _constraint_broken: broken answers counted, the run stopped saying why

def _decision(i):
    return ChatRequest(({"role": "user", "content": f"question {i}"},), max_tokens=600, choices=("A", "B", "C"))


def test_answers_breaking_the_constraint_stop_the_run_after_constraint_failures_naming_the_fix(server, tmp_path):
    from crossprofile_lib.backends.http_faults import ConstraintNotHonoured
    fake, url = server(chat_text="I like B")
    b = OpenAICompatBackend("fake", decision_mode="grammar", base_url=url, cache=tmp_path / "c", concurrency=1,
                            grammar_style="gbnf", constraint_failures=2, **FAST)
    with pytest.raises(ConstraintNotHonoured) as e:
        b.chat([_decision(i) for i in range(4)])
    assert str(e.value) == (
        f"backend openai/fake: the server at {url} did not honour the output constraint: 2 answers broke it (the "
        f"answer breaks the decision call's constraint (grammar_style=gbnf): 'I like B'); none was recorded as an "
        f"answer. The server is of unknown kind (GET /v1/models names no vLLM or llama.cpp) and was sent "
        f"grammar_style=gbnf (grammar_style=gbnf); vLLM understands grammar_style=vllm (structured_outputs), "
        f"llama.cpp grammar_style=gbnf: pass --backend-option grammar_style=... (constraint_failures=2); no finished "
        f"call is lost (they are in the call cache {tmp_path / 'c' / 'calls.sqlite'})")
    assert fake.answered == 2 and len(CallCache(tmp_path / "c")) == 0  # not retried, nothing stored


def test_one_broken_answer_under_the_limit_is_an_error_row(server, tmp_path):
    _, url = server(chat_text="I like B", owned_by="llamacpp")
    b = OpenAICompatBackend("fake", decision_mode="grammar", base_url=url, cache=tmp_path / "c", concurrency=1,
                            **FAST)
    res, = b.chat([_decision(0)])
    assert res.text == "" and res.retries == 0
    assert res.error == "ConstraintBroken: the answer breaks the decision call's constraint (grammar_style=gbnf): " \
                        "'I like B'"
    assert b._broken == 1 and b.stats["errors"] == 1


def test_a_retried_call_reports_its_retries_and_the_url_that_answered(server, tmp_path):
    _, url = server(fail_first=2, fail_status=503)
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", max_retries=3, concurrency=1, **FAST)
    res, = b.chat([ChatRequest((USER,))])
    assert res.error is None and res.retries == 2 and res.meta.get("base_url_index") == 0
    _, url2 = server(fail_first=5, fail_status=503)
    b2 = OpenAICompatBackend("fake", base_url=url2, cache=tmp_path / "c2", max_retries=1, concurrency=1, **FAST)
    res, = b2.chat([ChatRequest((USER,))])
    assert res.retries == 1 and res.error.startswith("InternalServerError: Error code: 503")


# LLMBackend.chat: the batch sent once per distinct call, what is counted, what the bar says

class _Moody(_Echo):
    """_Echo, but ``retry ...`` prompts took two retries and those holding ``fail`` failed."""

    def _complete(self, requests, on_done):
        self.batches.append([r.messages[0]["content"] for r in requests])
        for j, r in enumerate(requests):
            text = r.messages[0]["content"]
            on_done(j, ChatResult(text="", error="HTTP 500") if "fail" in text else
                    ChatResult(text=text, retries=2 if text.startswith("retry") else 0))


def _ask(*texts, purpose="decision"):
    return [ChatRequest(({"role": "user", "content": t},), purpose=purpose) for t in texts]


def test_a_batch_sends_each_distinct_call_once_and_counts_hits_duplicates_retries_and_errors(tmp_path):
    b = _Moody("m", cache=tmp_path / "c")
    got = b.chat(_ask("q1", "retry q2", "q1", "fail q3"))
    assert [r.text for r in got] == ["q1", "retry q2", "q1", ""] and got[3].error == "HTTP 500"
    assert b.batches == [["q1", "retry q2", "fail q3"]]
    assert dict(b.stats) == {"cached": 0, "deduplicated": 1, "calls": 3, "retries": 2, "errors": 1}
    got = b.chat(_ask("retry q2", "q4", "q4", "q1", "fail q3"))
    assert [r.text for r in got] == ["retry q2", "q4", "q4", "q1", ""] and got[0].cached and not got[1].cached
    assert b.batches[1] == ["q4", "fail q3"]  # a failed call is not kept: asked again
    assert dict(b.stats) == {"cached": 2, "deduplicated": 2, "calls": 5, "retries": 2, "errors": 2}
    assert b.chat([]) == [] and len(b.batches) == 2


def test_a_progress_bar_names_the_backend_and_the_purposes_of_the_calls_sent(tmp_path, capsys):
    b = _Moody("m", cache=tmp_path / "c", progress=True)
    b.chat(_ask("q1", purpose="stance") + _ask("q2", purpose="decision"))
    assert "echo/m decision+stance" in capsys.readouterr().err
    quiet = _Moody("m", cache=tmp_path / "q")
    quiet.chat(_ask("q1"))
    assert capsys.readouterr().err == ""


# CallCache.put, copy, set_parsed: the row stored, what is never stored

def _rows(folder):
    db = sqlite3.connect(Path(folder) / "calls.sqlite")
    try:
        cols = ("key", "provider", "model", "base_url", "decision_mode", "purpose", "prompt_file", "text", "parsed",
                "retries", "prompt_tokens", "completion_tokens", "latency_s", "choice_logprobs", "meta")
        return [dict(zip(cols, r)) for r in db.execute(f"SELECT {','.join(cols)} FROM calls ORDER BY key")]
    finally:
        db.close()


def test_a_stored_call_keeps_every_field_of_its_result_and_request(tmp_path):
    c = CallCache(tmp_path)
    r = ChatRequest((USER,), purpose="stance", prompt_file="stance_v1.txt")
    c.put("k1", r, ChatResult(text="Decision: B", retries=2, prompt_tokens=30, completion_tokens=4, latency_s=1.25,
                              choice_logprobs={"A": -1.5, "B": -0.25}, meta={"where": Path("/x")}),
          {"provider": "openai", "model": "m", "base_url": URL}, "score")
    c.put("k2", ChatRequest((USER,)), ChatResult(text="Decision: A"), {}, "generate")
    c.close()
    assert _rows(tmp_path) == [
        {"key": "k1", "provider": "openai", "model": "m", "base_url": "https://***@llm.example/v1?key=***&api-version=2024",
         "decision_mode": "score", "purpose": "stance", "prompt_file": "stance_v1.txt", "text": "Decision: B",
         "parsed": None, "retries": 2, "prompt_tokens": 30, "completion_tokens": 4, "latency_s": 1.25,
         "choice_logprobs": '{"A": -1.5, "B": -0.25}', "meta": '{"where": "/x"}'},
        {"key": "k2", "provider": "", "model": "", "base_url": "null", "decision_mode": "generate",
         "purpose": "decision", "prompt_file": "", "text": "Decision: A", "parsed": None, "retries": 0,
         "prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0, "choice_logprobs": None, "meta": None}]


def test_a_failed_or_blank_answer_is_never_stored(tmp_path):
    c = CallCache(tmp_path)
    for i, res in enumerate([ChatResult(text="Decision: A", error="HTTP 500"), ChatResult(text=""),
                             ChatResult(text="  \n ")]):
        c.put(f"k{i}", ChatRequest((USER,)), res, {"provider": "p", "model": "m"}, "generate")
    assert len(c) == 0
    c.close()


def test_an_entry_copied_under_a_new_key_keeps_its_fields_and_a_parsed_answer_is_recorded(tmp_path):
    c = CallCache(tmp_path)
    c.put("old", ChatRequest((USER,), purpose="stance"), ChatResult(text="Decision: C", retries=1),
          {"provider": "p", "model": "m"}, "grammar")
    c.copy("old", "new")
    c.copy("missing", "other")  # nothing to copy: nothing made
    c.set_parsed("new", "C")
    c.close()
    old, new = sorted(_rows(tmp_path), key=lambda r: r["key"], reverse=True)
    assert new == {**old, "key": "new", "parsed": "C"} and old["parsed"] is None and len(_rows(tmp_path)) == 2


# OpenAICompatBackend._options_identity and stored_identity: the options that change answers, per mode

def test_the_options_in_a_calls_identity_are_those_its_mode_uses(tmp_path):
    chatml = ChatTemplate.from_spec("chatml").sha
    g = _backend(tmp_path, decision_mode="grammar", grammar_style="gbnf", reason_chars=300, extra_body={"seed": 1},
                 chat_template="chatml")
    assert g._options_identity() == {"chat_template": chatml, "grammar_style": "gbnf", "reason_chars": 300,
                                     "extra_body": {"seed": 1}}
    s = _backend(tmp_path, decision_mode="score", grammar_style="vllm", reason_chars=300, chat_template="chatml",
                 tokenize_timeout=5)
    assert s._options_identity() == {"chat_template": chatml, "grammar_style": "vllm", "reason_chars": None,
                                     "extra_body": None}
    assert _backend(tmp_path, reason_chars=300, grammar_style="both")._options_identity() == {
        "chat_template": None, "grammar_style": None, "reason_chars": None, "extra_body": None}


def test_score_mode_on_vllm_names_its_letter_log_probabilities_in_the_identity(server, tmp_path):
    _, url = server(owned_by="vllm")
    named = OpenAICompatBackend("fake", decision_mode="score", base_url=url, cache=tmp_path / "c", **FAST)
    assert named._options_identity() == {"chat_template": None, "grammar_style": "vllm", "reason_chars": None,
                                         "extra_body": None, "letter_logprobs": "named"}
    top = OpenAICompatBackend("fake", decision_mode="score", base_url=url, cache=tmp_path / "c",
                              named_logprobs=False, **FAST)
    assert "letter_logprobs" not in top._options_identity()


def test_the_stored_identity_adds_the_redacted_base_url_or_the_sorted_list(tmp_path):
    one = _backend(tmp_path, sampling="server", tokenize_timeout=5)
    base = {"provider": "openai", "model": "fake", "served": None, "sampling": "server", "chat_template": None,
            "grammar_style": None, "reason_chars": None, "extra_body": None}
    assert one.stored_identity() == {**base, "base_url": LOCAL}
    two = OpenAICompatBackend("fake", base_url=f"{LOCAL},http://127.0.0.1:8/v1", cache=tmp_path / "c",
                              tokenizer="offline", sampling="server", tokenize_timeout=5)
    assert two.stored_identity() == {**base, "base_url": ["http://127.0.0.1:8/v1", LOCAL]}


def test_the_prompt_token_probe_of_a_server_without_ids_says_so(server, tmp_path):
    _, url = server()
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST)
    with pytest.raises(ValueError) as e:
        b.prompt_token_ids(ChatRequest((USER,)))
    assert str(e.value) == "backend openai/fake: the server returned no prompt_token_ids (a vLLM server does)"


# CallCache.get_many: read in chunks of 500, duplicates once, blank answers never a hit

def test_more_keys_than_one_query_holds_are_all_found(tmp_path):
    c = CallCache(tmp_path)
    rows = [(f"k{i:04d}", 0.0, "p", "m", None, "generate", "decision", "", "sha", f"Decision: {i}", None, 0, 0, 0, 0.0,
             None, None) for i in range(1001)]
    rows.append(("blank", 0.0, "p", "m", None, "generate", "decision", "", "sha", "  ", None, 0, 0, 0, 0.0, None, None))
    c._db.executemany(f"INSERT INTO calls VALUES ({','.join('?' * 17)})", rows)
    keys = [r[0] for r in rows] + ["k0000", "absent"]
    got = c.get_many(keys)
    assert len(got) == 1001 and got["k1000"].text == "Decision: 1000" and got["k0499"].text == "Decision: 499"
    assert "blank" not in got and "absent" not in got and all(r.cached for r in got.values())
    c.close()


# cache.vacuum_cache: the sizes it reports, the files it refuses

def test_a_vacuum_reports_the_size_with_its_write_ahead_log_before_and_the_files_size_after(tmp_path):
    c = CallCache(tmp_path)
    for i in range(40):
        c.put(f"k{i}", ChatRequest(({"role": "user", "content": f"q{i}" + "x" * 400},)),
              ChatResult(text="Decision: A " + "y" * 400), {"provider": "p", "model": "m"}, "generate")
    c._db.execute("DELETE FROM calls WHERE key != 'k0'")
    f = tmp_path / "calls.sqlite"
    before = f.stat().st_size + Path(f"{f}-wal").stat().st_size
    assert Path(f"{f}-wal").stat().st_size > 0
    got = cache_mod.vacuum_cache(tmp_path)
    assert got == (before, f.stat().st_size) and got[1] < got[0]
    c.close()


def test_a_vacuum_of_a_file_that_is_no_sound_writable_cache_is_refused_naming_why(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"q" * 150)
    with pytest.raises(cache_mod.CacheError) as e:
        cache_mod.vacuum_cache(junk)
    assert str(e.value) == f"call cache {junk}: not a SQLite database (its first bytes are not the SQLite header)" + \
        _recover(junk)
    f = _sound(tmp_path / "ro")
    f.chmod(0o444)
    try:
        with pytest.raises(cache_mod.CacheError, match=r"read-only \(mode -r--r--r--\)"):
            cache_mod.vacuum_cache(f)
    finally:
        f.chmod(0o644)


# cache_file.environment_problem: which failures are the cache's surroundings, named

@pytest.mark.parametrize("exc, said", [
    (sqlite3.OperationalError("database or disk is full"), "the disk holding it is full: free some space and rerun"),
    (sqlite3.OperationalError("Disk quota exceeded"), "the disk quota is exhausted: free some space and rerun"),
    (sqlite3.OperationalError("attempt to write a readonly database"),
     "it or its folder is read-only: make both writable (SQLite also writes FILE-wal and FILE-shm next to it) or "
     "point --cache at a writable copy"),
    (sqlite3.OperationalError("readonly database"),
     "it or its folder is read-only: make both writable or point --cache at a writable copy"),
    (sqlite3.OperationalError("unable to open database file"),
     "it cannot be opened for writing (its folder may be read-only or full: SQLite writes FILE-wal and FILE-shm next "
     "to it)"),
    (sqlite3.OperationalError("disk I/O error"), "the disk reported an I/O error (full, read-only or failing?)"),
    (OSError(28, "No space left on device"), "No space left on device (ENOSPC)"),
    (OSError(122, "Disk quota exceeded"), "the disk quota is exhausted: free some space and rerun"),
    (OSError(30, "Read-only file system"), "Read-only file system (EROFS)"),
    (OSError(13, "Permission denied"), "Permission denied (EACCES)"),
    (OSError(1, "Operation not permitted"), "Operation not permitted (EPERM)"),
    (OSError(2, "No such file or directory"), None),
    (sqlite3.OperationalError("no such table: calls"), None),
    (ValueError("database"), None),
])
def test_a_failure_of_the_caches_surroundings_is_named_and_any_other_is_not(exc, said):
    assert cache_file_mod.environment_problem(exc) == said


def test_a_read_only_message_on_a_writable_file_system_is_not_called_a_read_only_mount(tmp_path):
    e = sqlite3.OperationalError("attempt to write a readonly database")
    assert cache_file_mod.environment_problem(e, tmp_path / "calls.sqlite").startswith("it or its folder is read-only")
    assert cache_file_mod.read_only_fs(tmp_path) is False


# ChatTemplate: its sha, the tojson filter, the prefill, add_generation_prompt, raise_exception

def test_a_templates_sha_covers_its_source_and_special_tokens():
    import hashlib
    t = ChatTemplate("{{ bos_token }}x", "<s>", "</s>")
    assert t.sha == hashlib.sha256("{{ bos_token }}x\0<s>\0</s>".encode()).hexdigest()[:16]
    assert len({t.sha, ChatTemplate("{{ bos_token }}x", "<s>", "").sha, ChatTemplate("{{ bos_token }}x").sha}) == 3
    assert (t.source, t.bos_token, t.eos_token, t.name) == ("{{ bos_token }}x", "<s>", "</s>", f"template:{t.sha}")


def test_a_template_renders_json_without_escaping_and_asks_for_the_generation_prompt():
    t = ChatTemplate("{% for m in messages %}{{ m | tojson }}{% endfor %}|{{ add_generation_prompt }}|"
                     "{{ eos_token }}", eos_token="</s>")
    msg = {"role": "user", "content": "Quelle décision ?"}
    assert t.render([msg]) == '{"role": "user", "content": "Quelle décision ?"}|True|</s>'
    # the last message, when the assistant's, is the prefill: appended after the rendered prompt, not rendered
    assert t.render([msg, {"role": "assistant", "content": "Decision:"}]) == \
        '{"role": "user", "content": "Quelle décision ?"}|True|</s>Decision:'
    assert t.render([{"role": "assistant", "content": "A"}, msg]) == \
        '{"role": "assistant", "content": "A"}{"role": "user", "content": "Quelle décision ?"}|True|</s>'


def test_a_templates_raise_exception_is_a_value_error_naming_the_chat_template():
    t = ChatTemplate("{{ raise_exception('no system role') }}")
    with pytest.raises(ValueError) as e:
        t.render([USER])
    assert str(e.value) == "chat template: no system role"


# ChatTemplate.from_spec: every spec it refuses, word for word

def test_every_chat_template_spec_that_cannot_be_used_is_refused_naming_it_and_why(tmp_path):
    (tmp_path / "bad.jinja").write_text("{% for m in messages %}")
    (tmp_path / "boom.jinja").write_text("{{ messages[5].content }}")
    (tmp_path / "x.gguf").write_bytes(b"NOPE" + bytes(20))
    (tmp_path / "f.txt").write_text("plain {{ messages[0]['content'] }}")
    cases = {
        str(tmp_path / "nothing.jinja"): "not chatml, gguf:PATH, hf:FOLDER or an existing file",
        f"hf:{tmp_path / 'nofolder'}": f"'{tmp_path / 'nofolder'}' is not a folder (hf:FOLDER names the folder holding "
                                       f"tokenizer_config.json)",
        f"hf:{tmp_path / 'f.txt'}": f"'{tmp_path / 'f.txt'}' is not a folder (hf:FOLDER names the folder holding "
                                    f"tokenizer_config.json)",
        f"gguf:{tmp_path / 'x.gguf'}": "not a GGUF file (its first bytes are not 'GGUF')",
        str(tmp_path / "bad.jinja"): "not a valid Jinja template (line 1: Unexpected end of template. Jinja was looking "
                                     "for the following tags: 'endfor' or 'else'. The innermost block that needs to be "
                                     "closed is 'for'.)",
        str(tmp_path / "boom.jinja"): "cannot render a user message (UndefinedError: list object has no element 5)",
        str(tmp_path): "is a folder, not a file",
    }
    for spec, why in cases.items():
        with pytest.raises(ValueError) as e:
            ChatTemplate.from_spec(spec)
        assert str(e.value) == f"chat_template '{spec}': {why}"
    t = ChatTemplate.from_spec(str(tmp_path / "f.txt"))
    assert (t.name, t.bos_token, t.eos_token, t.render([USER])) == ("f.txt", "", "", "plain Which option? Decision: ?")
    c = ChatTemplate.from_spec("chatml")
    assert (c.name, c.bos_token, c.eos_token) == ("chatml", "", "<|im_end|>")


# LLMBackend.relevance and stances: the answer read, an invalid or failed one counted and empty

class _Claims:
    def __init__(self, n):
        self.claims = tuple(f"claim {i}" for i in range(n))

    def __len__(self):
        return len(self.claims)


def test_a_relevance_answer_is_read_and_a_bad_or_failed_one_is_empty_and_marked(tmp_path):
    b = _Moody("m", cache=tmp_path / "c")
    got = b.relevance('{"relevant": [3, 1]}', _Claims(3))
    assert (set(got), got.error, got.invalid) == ({0, 2}, "", False)
    bad = b.relevance("no list here", _Claims(3))
    assert (set(bad), bad.error, bad.invalid, b.stats["relevance_invalid"]) == (set(), "", True, 1)
    failed = b.relevance("fail", _Claims(3))  # the call itself failed: an error, not an invalid answer
    assert (set(failed), failed.error, failed.invalid, b.stats["relevance_invalid"]) == (set(), "HTTP 500", False, 1)


def test_a_stance_answer_is_read_and_a_bad_or_failed_one_is_none_per_claim_and_counted(tmp_path, monkeypatch):
    import crossprofile_lib.backends.llm as llm_mod
    monkeypatch.setattr(llm_mod, "option_order", lambda task: ("helix", "corvane", "medora"))
    b = _Moody("m", cache=tmp_path / "c")
    answer = '{"stances": [{"n": 2, "option": "C", "direction": "for", "criterion": true}]}'
    got = b.stances(answer, _Claims(2))
    assert _flat(got) == (None, ("medora", 1, True)) and b.stats["stance_invalid"] == 0
    assert b.stances("no JSON", _Claims(2)) == (None, None) and b.stats["stance_invalid"] == 1
    assert b.stances("fail " + answer, _Claims(3)) == (None, None, None) and b.stats["stance_invalid"] == 2


def test_a_cache_file_with_another_schema_is_named_with_what_it_lacks(tmp_path):
    f = tmp_path / "other.sqlite"
    db = sqlite3.connect(f)
    db.execute("CREATE TABLE notes (x TEXT)")
    db.commit()
    db.close()
    assert cache_file_mod.open_problem(f) == "no 'calls' table (tables: notes); not a call cache, or its table was dropped"
    db = sqlite3.connect(f)
    db.execute("DROP TABLE notes")
    db.execute("CREATE TABLE calls (key TEXT, text TEXT, meta TEXT)")
    db.commit()
    db.close()
    assert cache_file_mod.open_problem(f) == (
        "wrong schema: table 'calls' lacks column(s) created, provider, model, base_url, decision_mode, purpose, "
        "prompt_file, prompt_sha, parsed, retries, prompt_tokens, completion_tokens, latency_s, choice_logprobs")
    empty = tmp_path / "bare.sqlite"
    db = sqlite3.connect(empty)
    db.execute("PRAGMA user_version = 1")
    db.execute("CREATE TABLE t (x)")
    db.execute("DROP TABLE t")
    db.commit()
    db.close()
    assert cache_file_mod.open_problem(empty) == \
        "no 'calls' table (tables: none); not a call cache, or its table was dropped"


# small rules: the prompt's sha, blank text, the cache folder, a model's basename, base URLs, decisions, choices

def test_a_prompts_sha_is_of_its_contents_joined_by_blank_lines():
    import hashlib

    from crossprofile_lib.backends.cache import messages_sha
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Décide."}, {"role": "assistant"}]
    assert messages_sha(msgs) == hashlib.sha256("Be brief.\n\nDécide.\n\n".encode("utf-8")).hexdigest()[:16]


@pytest.mark.parametrize("text, blank", [("", True), (None, True), (" \n\t", True), ("\u200b\ufeff\u200e", True),
                                         (" a ", False), ("\u200bx", False), ("0", False)])
def test_blank_text_shows_nothing_but_spaces_and_invisible_format_characters(text, blank):
    from crossprofile_lib.backends.cache import is_blank
    assert is_blank(text) is blank


def test_a_cache_folder_inside_the_installed_package_is_refused(tmp_path):
    from crossprofile_lib.backends.cache import cache_folder
    pkg = Path(cache_mod.__file__).resolve().parents[1]
    for inside in (pkg, pkg / "backends" / "cache"):
        with pytest.raises(ValueError) as e:
            cache_folder(inside)
        assert str(e.value) == (f"cache folder {inside} is inside the installed package {pkg} (rule: set "
                                f"CROSSPROFILE_CACHE to a folder outside the package)")
    assert cache_folder(tmp_path / "c") == tmp_path / "c"


@pytest.mark.parametrize("x, base", [("/models/Qwen2.5-7B", "Qwen2.5-7B"), ("org/model/", "model"), ("plain", "plain"),
                                     ("", None), (None, None)])
def test_a_models_basename_is_the_last_part_of_its_path(x, base):
    from crossprofile_lib.backends.http_faults import _basename
    assert _basename(x) == base


@pytest.mark.parametrize("url, why", [
    ("http://127.0.0.1:8000/v1", None), ("https://api.example/v1", None),
    ("ftp://host/v1", "must start with http:// or https://"), ("127.0.0.1:8000", "must start with http:// or https://"),
    ("http:///v1", "has no host name"), ("http://host:port/v1", "not a valid URL (Port could not be cast to integer "
                                                                  "value as 'port')"),
    ("http://[::1/v1", "not a valid URL (Invalid IPv6 URL)"),
])
def test_a_base_url_must_be_http_with_a_host_and_a_numeric_port(url, why):
    from crossprofile_lib.backends.http_faults import base_url_problem
    assert base_url_problem(url) == why


@pytest.mark.parametrize("text, letter", [("Decision: A\nDecision: c", "C"), ("decision: b", "B"), ("Decision: D", None),
                                          ("no decision", None), (None, None)])
def test_the_decision_is_the_last_one_given_if_it_is_a_choice(text, letter):
    from crossprofile_lib.backends.llm import parse_decision
    assert parse_decision(text, ("A", "B", "C")) == letter


def test_the_best_choice_is_the_likeliest_the_first_of_equals_and_none_without_any():
    from crossprofile_lib.backends.llm import best_choice, choice_logprobs
    assert best_choice({"A": -1.0, "B": -0.5, "C": -0.5}, ["A", "B", "C"]) == "B"
    assert best_choice({"A": -1.0, "B": -0.5, "C": -0.5}, ["C", "B"]) == "C"
    assert best_choice({"D": 0.0}, ["A", "B"]) is None and best_choice(None, ["A"]) is None
    assert choice_logprobs({" A": -2.0, "A": -1.0, " B ": -3, "AB": 0.0}, ("A", "B")) == {"A": -1.0, "B": -3.0}
    assert choice_logprobs({"A": -1.0, " A": -2.0}, ("A",)) == {"A": -1.0}


# CallCache's side tables: token counts per tokenizer, the served model, the call timeline

def test_token_counts_are_kept_per_tokenizer_with_its_offset_apart(tmp_path):
    c = CallCache(tmp_path)
    s, other = c.token_store("server:vllm:m"), c.token_store("server:llama.cpp:m")
    s.put("one two", 2)
    s.put("three", 1)
    s.put("one two", 3)  # replaced
    s.offset = 1
    other.put("one two", 5)
    assert (s.get("one two"), s.get("three"), s.get("four"), s.offset, len(s)) == (3, 1, None, 1, 2)
    assert (other.get("one two"), other.offset, len(other)) == (5, None, 1)
    c.close()
    again = CallCache(tmp_path).token_store("server:vllm:m")
    assert (again.get("one two"), again.offset, len(again)) == (3, 1, 2)  # kept in the file


def test_stored_tokenizers_ending_in_a_suffix_are_listed_most_recent_first(tmp_path):
    c = CallCache(tmp_path)
    rows = [("server:vllm:m@x", "a", 1, 10.0), ("server:llama.cpp:m@x", "a", 1, 30.0), ("server:vllm:m@x", "b", 1, 20.0),
            ("server:vllm:other@x", "a", 1, 40.0), ("server:vllm:m@xy", "a", 1, 50.0), ("s_m@x", "a", 1, 5.0)]
    c._db.executemany("INSERT INTO token_counts VALUES (?, ?, ?, ?)", rows)
    assert c.stored_tokenizers(":m@x") == ["server:llama.cpp:m@x", "server:vllm:m@x"]
    assert c.stored_tokenizers("_m@x") == ["s_m@x"]  # LIKE's wildcard '_' matches, the suffix must be exact
    c.close()


def test_the_served_model_is_recorded_per_provider_and_model_and_replaced(tmp_path):
    c = CallCache(tmp_path)
    assert c.served_model("openai", "m") is None
    c.set_served_model("openai", "m", {"root": "r", "id": "m"})
    c.set_served_model("deepseek", "m", {"id": "other"})
    assert c.served_model("openai", "m") == {"id": "m", "root": "r"} and c.served_model("openai", "n") is None
    c.set_served_model("openai", "m", {"id": "m2"})
    assert c.served_model("openai", "m") == {"id": "m2"} and c.served_model("deepseek", "m") == {"id": "other"}
    c._db.execute("UPDATE served_models SET served = 'not json' WHERE provider = 'deepseek'")
    assert c.served_model("deepseek", "m") is None
    c.close()


def test_the_call_timeline_is_the_stored_calls_times_in_order(tmp_path):
    c = CallCache(tmp_path)
    rows = [(f"k{i}", t, p, "m", None, "generate", "decision", "", "sha", "x", None, 0, 0, 0, 0.0, None, None)
            for i, (t, p) in enumerate([(30.0, "openai"), (10.0, "openai"), (None, "openai"), (20.0, "other")])]
    c._db.executemany(f"INSERT INTO calls VALUES ({','.join('?' * 17)})", rows)
    assert c.calls_timeline("openai", "m") == [10.0, 30.0] and c.calls_timeline("openai", "x") == []
    c.close()


# Pool._pick: the URL with the most room from the preferred one on, another than the one that failed

def test_a_slot_goes_to_the_url_with_most_room_from_the_preferred_one_and_never_the_one_that_failed():
    pool = Pool(3, "auto")
    pool.urls[0].inflight, pool.urls[1].inflight, pool.urls[2].inflight = 1, 3, 1  # room 3, 1, 3
    assert [pool._pick(p, None) for p in (0, 1, 2)] == [0, 2, 2]  # ties: the first from the preferred one on
    assert pool._pick(0, avoid=0) == 2 and pool._pick(2, avoid=2) == 0 and pool._pick(1, avoid=5) == 2
    for u in pool.urls:
        u.inflight = 4
    assert pool._pick(0, None) is None  # no room anywhere: wait
    one = Pool(1, "auto")
    one.urls[0].inflight = 3
    assert one._pick(0, avoid=0) == 0  # one URL: a retry goes back to it


def test_a_fixed_pool_gives_the_preferred_url_while_under_its_total():
    async def scenario():
        pool = Pool(2, 3)
        got = [await pool.acquire(j) for j in range(3)]
        assert pool._pick(1, None) is None
        await pool.release(got[0], "overload")
        return got, pool._pick(1, None), pool.urls[0].limit
    assert asyncio.run(scenario()) == ([0, 1, 0], 1, 4.0)  # a fixed pool's limits never move


# DeepSeek's preset, the paper's sampling fields, a refused connection told from a dropped one

def test_a_retired_deepseek_model_is_warned_about_naming_the_date_and_the_models_to_use(tmp_path):
    from crossprofile_lib.backends.openai_compat import RetiredModelWarning
    with pytest.warns(RetiredModelWarning) as w:
        DeepSeekBackend("deepseek-chat", base_url=LOCAL, cache=tmp_path / "c", tokenizer="offline")
    assert str(w[0].message) == ("backend deepseek/deepseek-chat: DeepSeek retired the model id 'deepseek-chat' after "
                                 "2026-07-24 (checked 2026-12-01); use deepseek/deepseek-flash (V4.1-Flash) or "
                                 "deepseek/deepseek-v4-pro")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = DeepSeekBackend("deepseek-flash", base_url=LOCAL, cache=tmp_path / "c", tokenizer="offline")
    # the paper's sampling without llama.cpp's and vLLM's penalty fields, thinking off
    assert b.sampling_fields() == {"temperature": 0.0, "top_p": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0,
                                   "thinking": {"type": "disabled"}}
    assert _backend(tmp_path, extra_body={"top_p": 0.5}).sampling_fields() == {**{"temperature": 0.0}, **SAMPLED,
                                                                               "top_p": 0.5}


def test_only_a_connection_no_server_took_is_a_connect_failure():
    import socket
    req = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")

    def caused(cause):
        e = openai.APIConnectionError(request=req)
        e.__cause__ = cause
        return e
    assert _connect_failure(caused(httpx.ConnectError("refused"))) is True
    assert _connect_failure(caused(httpx.ConnectTimeout("slow"))) is True
    assert _connect_failure(caused(ConnectionRefusedError())) is True
    assert _connect_failure(caused(socket.gaierror())) is True
    assert _connect_failure(caused(httpx.ReadError("reset"))) is False  # a server was there
    assert _connect_failure(caused(ConnectionResetError())) is False
    assert _connect_failure(ValueError("x")) is False
    e = openai.APIConnectionError(request=req)
    e.__context__ = httpx.ConnectError("refused")
    assert _connect_failure(e) is True  # the implicit context counts too


@pytest.mark.parametrize("status, retried", [(408, True), (429, True), (500, True), (503, True), (400, False),
                                             (401, False), (404, False), (422, False)])
def test_timeouts_rate_limits_and_server_errors_are_retried_client_errors_not(status, retried):
    from crossprofile_lib.backends.http_faults import _retryable
    assert _retryable(_status_error(openai.APIStatusError, status, {})) is retried


def test_connection_faults_and_malformed_answers_are_retried():
    from crossprofile_lib.backends.http_faults import MalformedResponse, _retryable
    req = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    for e in (openai.APITimeoutError(request=req), openai.APIConnectionError(request=req), MalformedResponse("x"),
              json.JSONDecodeError("x", "", 0), asyncio.TimeoutError(), UnicodeDecodeError("utf-8", b"", 0, 1, "x")):
        assert _retryable(e) is True
    assert _retryable(ValueError("x")) is False


# http_faults.call_within and settle: the deadline's message and thread, the first failure of many workers

def test_a_deadline_names_what_was_asked_and_its_seconds_and_runs_in_a_named_daemon_thread():
    seen = {}

    def where():
        t = threading.current_thread()
        seen.update(name=t.name, daemon=t.daemon)
        return None
    assert call_within(where, 30, "GET /v1/models") is None
    assert seen == {"name": "deadline-GET /v1/models", "daemon": True}
    hold = threading.Event()
    with pytest.raises(DeadlineExceeded) as e:
        call_within(hold.wait, 0.02, "POST /tokenize")
    hold.set()
    assert str(e.value) == ("POST /tokenize: no complete answer within the 0.02 s deadline for the whole request "
                            "(--tokenize-timeout)")
    with pytest.raises(DeadlineExceeded, match=r"^request: no complete answer within the 0\.01 s"):
        call_within(threading.Event().wait, 0.01)


def test_settle_raises_the_first_workers_failure_after_stopping_the_others():
    from crossprofile_lib.backends.http_faults import settle
    stopped = []

    async def scenario():
        async def fails():
            await asyncio.sleep(0)
            raise KeyError("first")

        async def waits():
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                stopped.append(True)
                raise

        async def done():
            return 1
        tasks = [asyncio.create_task(c()) for c in (done, waits, fails, waits)]
        with pytest.raises(KeyError, match="first"):
            await settle(tasks)
        assert all(t.done() for t in tasks)
        await settle([asyncio.create_task(done())])  # none failed: nothing raised
    asyncio.run(scenario())
    assert stopped == [True, True]


# the requests a run sends: decision, relevance and stance calls' limits, purposes, prefill and constraints

def test_the_decision_request_is_one_prompt_with_the_options_letters_and_a_prefill_in_score_mode(hospital, tmp_path):
    req = _ledger_request(hospital, "PSP", 0, "ALL")
    gen = _Scripted("m", cache=tmp_path / "c", max_tokens=300)._decision_request(req)
    assert (len(gen.messages), gen.max_tokens, gen.purpose, gen.prompt_file, gen.choices) == (
        1, 300, "decision", "decision_v1.txt", ("A", "B", "C"))
    score = _Scripted("m", decision_mode="score", cache=tmp_path / "c")._decision_request(req)
    assert score.messages[0] == gen.messages[0] and score.messages[1] == {"role": "assistant", "content": "Decision:"}
    assert (len(score.messages), score.max_tokens, score.choices) == (2, 1, ("A", "B", "C"))
    other = _Scripted("m", cache=tmp_path / "c", decision_prompt="labels-not-evidence")._decision_request(req)
    assert other.prompt_file == "decision_labels_not_evidence_v1.txt"


def test_relevance_and_stance_requests_scale_their_limits_with_the_claims_and_carry_their_schemas(hospital, tmp_path):
    task = make_task(hospital, "PSP", 0)
    cl = claim_list(scripted_discussion(task))
    n = len(cl)
    for mode, constrained in (("generate", False), ("grammar", True), ("score", True)):
        rel = _Scripted("m", decision_mode=mode, cache=tmp_path / "c").relevance_request(task, cl)
        assert (rel.max_tokens, rel.purpose, rel.prompt_file) == (16 + 4 * n, "relevance", "relevance_v1.txt")
        from crossprofile_lib.backends.llm import relevance_schema
        assert rel.json_schema == (relevance_schema(n) if constrained else None)
        st = _Scripted("m", decision_mode=mode, cache=tmp_path / "c").stance_request(task, cl)
        assert (st.max_tokens, st.purpose) == (24 + 28 * n, "stance")
        # a stance call is constrained in grammar mode only
        assert st.json_schema == (stance_schema(n, ("A", "B", "C")) if mode == "grammar" else None)
    facts = "\n".join(f"{i + 1}. {c.text}" for i, c in enumerate(cl.claims))
    assert facts in st.messages[0]["content"]  # the stance prompt numbers the claims from 1, one a line


# --- the seed-59 mutmut sample's survivors (issue 55), function by function -------------------------------------

def test_a_cache_check_runs_sqlites_full_integrity_check_read_only_waiting_five_seconds(tmp_path, monkeypatch):
    f = _sound(tmp_path)
    real = cache_file_mod._connect
    monkeypatch.setattr(cache_file_mod, "_connect", lambda *a, **kw: _Answers(real(*a, **kw), "PRAGMA integrity_check",
                                                                             rows=[("row 3 missing",)]))
    assert check_cache(tmp_path) == {"file": str(f), "ok": False, "problem": "damaged (SQLite integrity_check: row 3 "
                                     "missing)", "entries": None, "bad_rows": []}
    monkeypatch.setattr(cache_file_mod, "_connect", lambda *a, **kw: _Answers(
        real(*a, **kw), "PRAGMA integrity_check", sqlite3.OperationalError("database is locked")))
    assert check_cache(f)["problem"] == ("locked by another process for more than 5 s (another run may be writing it: "
                                         "wait for it, or give this run its own --cache)")
    monkeypatch.undo()
    opened = []

    def spy(path, timeout, readonly=False):
        opened.append((Path(path), timeout, readonly))
        return real(path, timeout, readonly=readonly)
    monkeypatch.setattr(cache_file_mod, "_connect", spy)
    monkeypatch.setattr(cache_mod, "_connect", spy)
    assert check_cache(f) == {"file": str(f), "ok": True, "problem": None, "entries": 0, "bad_rows": []}
    assert opened == [(f, 5.0, True), (f, 5.0, True)]  # the check's own connection, then the one reading each row


def test_a_call_or_token_count_that_cannot_be_stored_names_the_file_and_the_step(tmp_path):
    c = CallCache(tmp_path)
    c._db = _Refuses(c._db, "INSERT")
    f = tmp_path / "calls.sqlite"
    with pytest.raises(cache_mod.CacheError) as e:
        c.put("k", ChatRequest((USER,)), ChatResult(text="Decision: B"), {"provider": "openai", "model": "m"}, "generate")
    assert str(e.value).startswith(f"call cache {f}: storing a call failed (OperationalError: stand-in write failure); ")
    with pytest.raises(cache_mod.CacheError) as e:
        c.token_store("server:vllm:m").put("one two", 2)
    assert str(e.value).startswith(f"call cache {f}: storing a token count failed (OperationalError: stand-in write "
                                   f"failure); ")


def test_a_new_cache_file_is_built_under_a_hidden_name_beside_it_then_linked(tmp_path, monkeypatch):
    built = []
    real = sqlite3.connect

    def spy(path, *a, **kw):
        built.append(Path(path))
        return real(path, *a, **kw)
    monkeypatch.setattr(cache_file_mod.sqlite3, "connect", spy)
    cache_file_mod._create(tmp_path / "calls.sqlite")
    monkeypatch.undo()
    assert len(built) == 1 and built[0].parent == tmp_path
    assert built[0].name.startswith(".calls.sqlite.") and built[0].name.endswith(".new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calls.sqlite"]  # the temporary name is gone


def test_a_file_stays_held_in_this_process_until_its_last_cache_object_closes(tmp_path, monkeypatch):
    f = _sound(tmp_path)
    read = []
    real = cache_file_mod._header_problem
    monkeypatch.setattr(cache_file_mod, "_header_problem", lambda p, n: read.append(p) or real(p, n))
    a, b = CallCache(tmp_path), CallCache(tmp_path)
    read.clear()
    a.close()
    assert cache_file_mod.open_problem(f) is None and read == []  # b still holds it: its header is not read by hand
    b.close()
    assert cache_file_mod.open_problem(f) is None and read == [f]


def test_counts_stored_from_an_endpoint_that_adds_a_bos_keep_subtracting_it_when_it_answers_again(server, tmp_path,
                                                                                                 capsys):
    _, url = server(tokenize="llama-cpp-python", api_key="k5")  # adds a BOS token to every text
    up = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", api_key="k5", retry_wait=0.01)
    assert (up.tokenizer.offset, up.tokenizer.count("one two, three"), up.tokenizer.timeout) == (1, 4, 60.0)
    b = OpenAICompatBackend("fake", base_url=LOCAL, cache=tmp_path / "c", api_key="k5", retry_wait=0.01,
                            tokenize_timeout=5)
    assert (b.tokenizer.name, b.tokenizer.offset, b.tokenizer.timeout) == ("server:llama-cpp-python:fake", 1, 5.0)
    b.tokenizer.urls = up.tokenizer.urls  # the endpoint answers again later in the run (asked with the run's key)
    assert b.tokenizer.count("four five") == 2 and b.tokenizer.sources == {"store": 0, "server": 1}


def test_an_openai_backend_without_a_model_name_says_how_to_name_it(tmp_path):
    with pytest.raises(ValueError) as e:
        OpenAICompatBackend("", base_url=LOCAL, cache=tmp_path / "c", tokenizer="offline")
    assert str(e.value) == "backend 'openai/': name the served model, e.g. openai/my-model"
    with pytest.raises(ValueError) as e:
        DeepSeekBackend("", cache=tmp_path / "c", tokenizer="offline")
    assert str(e.value) == "backend 'deepseek/': name the served model, e.g. deepseek/my-model"


class _ListForB(_LetterIds):
    """:class:`_LetterIds`, but the answer for ``B`` is a JSON list, not an object."""

    def _tokenize(self, path, raw):
        if json.loads(raw or b"{}").get("prompt") == "B":
            return 200, b"[66]", 0.0
        return super()._tokenize(path, raw)


def test_score_mode_skips_a_letter_whose_tokenize_answer_is_no_object(server, monkeypatch, tmp_path):
    monkeypatch.setattr(F, "FakeServer", type("Ids", (_ListForB,), {"asked": []}))
    try:
        _, url = server(tokenize="vllm")
    finally:
        monkeypatch.undo()
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", **FAST)
    assert b._letter_token_ids() == {65: "A", 1065: "A", 1066: "B", 67: "C", 68: "D", 1068: "D", 1069: "E",
                                     **{ord(x) + d: x for x in "FGHIJ" for d in (0, 1000)}}


def test_the_hosted_deepseek_api_prices_budgets_offline_without_asking_it(tmp_path, monkeypatch, capsys):
    for var in ("CROSSPROFILE_BASE_URL", "DEEPSEEK_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    b = DeepSeekBackend("deepseek-flash", cache=tmp_path / "c", api_key="k")
    assert (b.tokenizer.name, b.tokenizer_source) == (
        "offline-bpe-approx-v1", "offline approximation (the hosted DeepSeek API has no tokenize endpoint)")
    assert capsys.readouterr().err == (
        "notice: deepseek/deepseek-flash: budgets use the offline approximation offline-bpe-approx-v1 (the hosted "
        "DeepSeek API has no tokenize endpoint); pass --tokenizer PATH/tokenizer.json for the model's own\n")
    with pytest.raises(ServerUnreachable, match="^backend deepseek/deepseek-flash: budgets are priced with the served "
                                                "model's tokenizer, but the servers cannot be reached"):
        DeepSeekBackend("deepseek-flash", base_url=LOCAL, cache=tmp_path / "c", api_key="k", tokenize_timeout=5)


def test_a_tokenize_endpoint_refusing_the_key_stops_naming_the_model_and_the_key_variables(server, tmp_path):
    _, url = server(api_key="right-key", tokenize="vllm")
    with pytest.raises(ServerRefused) as e:
        OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", api_key="wrong-key", retry_wait=0.01)
    msg = str(e.value)
    assert msg.startswith(f"backend openai/fake: the server at {url} refused the key for model 'fake' (")
    assert msg.endswith("); check CROSSPROFILE_API_KEY / OPENAI_API_KEY") and "wrong-key" not in msg


def test_a_gguf_template_is_read_by_the_llama_cpp_engine_and_its_failures_are_named(tmp_path, monkeypatch):
    from crossprofile_lib.task import llama_engine
    g = tmp_path / "m.gguf"
    g.write_bytes(b"GGUF" + bytes(20))
    outcomes = {"missing": ImportError("No module named 'llama_cpp'"), "odd": ValueError("bad magic"),
                "crash": RuntimeError("failed to load model"), "io": OSError("read error")}
    for name, exc in outcomes.items():
        f = tmp_path / f"{name}.gguf"
        f.write_bytes(b"GGUF" + bytes(20))

        def fails(path, exc=exc):
            raise exc
        monkeypatch.setattr(llama_engine, "open_vocab", fails)
        with pytest.raises(ValueError) as e:
            ChatTemplate.from_spec(f"gguf:{f}")
        why = ("reading a GGUF file needs a llama.cpp engine (No module named 'llama_cpp')" if name == "missing" else
               f"llama.cpp cannot read it ({exc})")
        assert str(e.value) == f"chat_template 'gguf:{f}': {why}"
    opened = []
    monkeypatch.setattr(llama_engine, "open_vocab", lambda path: opened.append(path) or _Engine("<{{ bos_token }}>"))
    t = ChatTemplate.from_spec(f"gguf:{g}")
    assert opened == [str(g)] and (t.name, t.bos_token, t.eos_token) == (f"gguf:{g}", "<s>", "</s>")
    assert t.render([USER]) == "<<s>>"


def test_a_cache_file_that_cannot_be_created_names_the_file_the_error_and_its_environment(tmp_path, monkeypatch):
    import errno
    f = tmp_path / "calls.sqlite"
    for exc, why in ((OSError(errno.ENOSPC, "No space left on device"),
                      "OSError: [Errno 28] No space left on device: No space left on device (ENOSPC)"),
                     (sqlite3.OperationalError("stand-in refusal"), "OperationalError: stand-in refusal")):
        def fails(path, exc=exc):
            raise exc
        monkeypatch.setattr(cache_mod, "_create", fails)
        with pytest.raises(cache_mod.CacheError) as e:
            CallCache(tmp_path)
        assert str(e.value) == f"call cache {f}: cannot be created ({why}); choose another --cache"
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_cache_that_sqlite_will_not_open_names_the_step(tmp_path, monkeypatch):
    f = _sound(tmp_path)
    f.chmod(0o444)
    real = cache_mod._connect

    def refuses(path, timeout, readonly=False):
        if readonly:
            raise sqlite3.OperationalError("stand-in refusal")
        return real(path, timeout, readonly=readonly)
    monkeypatch.setattr(cache_mod, "_connect", refuses)
    try:
        with pytest.raises(CacheStorageError) as e:
            CallCache(tmp_path)
        assert str(e.value) == (f"call cache {f}: opening read-only failed: SQLite refused it (OperationalError: "
                                f"stand-in refusal)" + KEPT)
    finally:
        f.chmod(0o644)


def test_an_older_read_only_cache_has_empty_token_count_and_served_model_tables(tmp_path, capsys):
    CallCache(tmp_path).close()
    _side_tables_dropped(tmp_path)
    f = tmp_path / "calls.sqlite"
    f.chmod(0o444)
    try:
        ro = CallCache(tmp_path)
        store = ro.token_store("server:vllm:m")
        assert (len(store), store.get("one two"), store.offset, ro.stored_tokenizers(":m")) == (0, None, None, [])
        store.put("one two", 2)  # kept in memory only: nothing is written
        assert store.get("one two") is None and ro.served_model("openai", "m") is None
        ro.close()
    finally:
        f.chmod(0o644)
    assert sorted(r[0] for r in sqlite3.connect(f).execute("SELECT name FROM sqlite_master WHERE type='table'")) == [
        "calls"]  # the stand-ins were temporary


class _FailsOnKey:
    """A real connection whose read of the entry ``key`` (by key) raises a SQLite error."""

    def __init__(self, db, key):
        self.db, self.key = db, key

    def execute(self, sql, *args):
        if "WHERE key = ?" in sql and args and args[0] == (self.key,):
            raise sqlite3.DatabaseError("database disk image is malformed")
        return self.db.execute(sql, *args)

    def close(self):
        self.db.close()


def test_an_export_skips_and_counts_the_entries_sqlite_cannot_read_and_keeps_non_ascii_text(tmp_path, monkeypatch):
    c = CallCache(tmp_path)
    for k, text in (("k1", "Entscheidung: Ä"), ("k2", "Decision: B"), ("k3", "Décision : C")):
        c.put(k, ChatRequest((USER,)), ChatResult(text=text), {"provider": "openai", "model": "m"}, "generate")
    c.close()
    real = cache_mod._connect
    monkeypatch.setattr(cache_mod, "_connect", lambda *a, **kw: _FailsOnKey(real(*a, **kw), "k2"))
    assert cache_mod.export_cache(tmp_path, tmp_path / "out.jsonl") == (2, 1)
    raw = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert [json.loads(line)["text"] for line in raw.splitlines()] == ["Entscheidung: Ä", "Décision : C"]
    assert "Entscheidung: Ä" in raw  # written as it is, not as \u escapes


def test_a_vacuum_sqlite_stops_names_the_file_the_step_and_the_cause(tmp_path, monkeypatch):
    f = _sound(tmp_path)
    real = cache_mod._connect
    for exc, why in ((sqlite3.OperationalError("stand-in stop"), "SQLite stopped (OperationalError: stand-in stop)"),
                     (sqlite3.OperationalError("database or disk is full"), "the disk holding it is full: free some "
                      "space and rerun (OperationalError: database or disk is full)")):
        monkeypatch.setattr(cache_mod, "_connect", lambda *a, exc=exc, **kw: _Answers(real(*a, **kw), "VACUUM", exc))
        with pytest.raises(CacheStorageError) as e:
            vacuum_cache(tmp_path)
        assert str(e.value) == f"call cache {f}: vacuum failed: {why}" + KEPT


def test_token_counts_are_kept_per_served_model_under_a_fixed_name_and_found_again_when_unreachable(server, tmp_path,
                                                                                                    capsys):
    """The stored name is part of the cache file: a changed spelling would lose every earlier run's counts."""
    _, url = server(tokenize="vllm", served_model="/models/fake", root="/weights/Qwen2.5-7B")
    up = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", retry_wait=0.01)
    name = 'server:vllm:fake@{"id":"fake","root":"Qwen2.5-7B"}'
    assert up.tokenizer.store.name == name and up.tokenizer.count("one two, three") == 4
    assert CallCache(tmp_path / "c").stored_tokenizers(":fake") == []  # no counts under the bare model name
    down = OpenAICompatBackend("fake", base_url=LOCAL, cache=tmp_path / "c", retry_wait=0.01, tokenize_timeout=5)
    assert down.tokenizer.store.name == name and down.tokenizer.count("one two, three") == 4
    assert down.tokenizer.sources == {"store": 1, "server": 0}
    down.tokenizer.urls = up.tokenizer.urls  # the endpoint answers again: vLLM's offset, 0, is kept too
    assert down.tokenizer.count("four five") == 2


def test_base_urls_come_from_the_option_else_the_environment_each_trimmed_and_none_is_refused(tmp_path, monkeypatch):
    for var in ("CROSSPROFILE_BASE_URL", "OPENAI_BASE_URL", "CROSSPROFILE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    kw = dict(cache=tmp_path / "c", tokenizer="offline")
    with pytest.raises(ValueError) as e:
        OpenAICompatBackend("fake", **kw)
    assert str(e.value) == ("backend openai/fake: no base URL (set CROSSPROFILE_BASE_URL or OPENAI_BASE_URL, or "
                            "--base-url)")
    with pytest.raises(ValueError) as e:
        OpenAICompatBackend("fake", base_url=" , ,", **kw)
    assert str(e.value) == ("backend openai/fake: --base-url names no URL (give http://HOST:PORT/v1, comma-separated "
                            "for several servers)")
    b = OpenAICompatBackend("fake", base_url=" http://a.example/v1/ ,, http://b.example/v1", **kw)
    assert b.base_urls == ["http://a.example/v1", "http://b.example/v1"]
    assert OpenAICompatBackend("fake", base_url=["http://c.example/v1/", " "], **kw).base_urls == ["http://c.example/v1"]
    monkeypatch.setenv("OPENAI_BASE_URL", "http://service.example/v1")
    assert OpenAICompatBackend("fake", **kw).base_urls == ["http://service.example/v1"]
    monkeypatch.setenv("CROSSPROFILE_BASE_URL", "http://suite.example/v1")  # the suite's own variable first
    assert OpenAICompatBackend("fake", **kw).base_urls == ["http://suite.example/v1"]
    monkeypatch.setenv("CROSSPROFILE_BASE_URL", "")  # set but empty: as if unset
    assert OpenAICompatBackend("fake", **kw).base_urls == ["http://service.example/v1"]


def test_the_api_key_comes_from_the_option_else_the_environment_and_never_shows_in_the_backends_repr(tmp_path,
                                                                                                   monkeypatch):
    for var in ("CROSSPROFILE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    kw = dict(base_url=LOCAL, cache=tmp_path / "c", tokenizer="offline")
    assert OpenAICompatBackend("fake", **kw)._api_key == "EMPTY"
    monkeypatch.setenv("OPENAI_API_KEY", "svc-key-1234")
    assert OpenAICompatBackend("fake", **kw)._api_key == "svc-key-1234"
    monkeypatch.setenv("CROSSPROFILE_API_KEY", "suite-key-5678")
    b = OpenAICompatBackend("fake", **kw)
    assert b._api_key == "suite-key-5678" and b._secrets == ["suite-key-5678"]
    assert OpenAICompatBackend("fake", api_key="given-key-9", **kw)._api_key == "given-key-9"
    assert repr(b) == f"<OpenAICompatBackend openai/fake {LOCAL} mode=generate>"
    u = OpenAICompatBackend("fake", base_url="https://user:pw5678@llm.example/v1", cache=tmp_path / "c",
                            tokenizer="offline", api_key="k9")
    assert repr(u) == "<OpenAICompatBackend openai/fake https://***@llm.example/v1 mode=generate>"


class _NoModels(F.FakeServer):
    """A server without ``GET /v1/models`` (404): its served model is unknown."""

    def respond(self, path, headers, raw):
        if path.endswith("/models"):
            self.received += 1
            return 404, b'{"error": {"message": "not found"}}', 0.0
        return super().respond(path, headers, raw)


def test_token_counts_of_a_server_that_names_no_served_model_are_kept_under_the_bare_tokenizer_name(server, tmp_path,
                                                                                                   monkeypatch):
    monkeypatch.setattr(F, "FakeServer", _NoModels)
    try:
        _, url = server(tokenize="vllm")
    finally:
        monkeypatch.undo()
    b = OpenAICompatBackend("fake", base_url=url, cache=tmp_path / "c", retry_wait=0.01)
    assert b.served_model() is None and b.tokenizer.count("one two") == 2
    assert b.tokenizer.store.name == "server:vllm:fake"
    assert CallCache(tmp_path / "c").stored_tokenizers(":fake") == ["server:vllm:fake"]


def test_a_memory_cache_serves_calls_stored_from_another_thread(tmp_path):
    m = CallCache(":memory:")
    done = []
    t = threading.Thread(target=lambda: done.append(m.put("k", ChatRequest((USER,)), ChatResult(text="Decision: C"),
                                                          {"provider": "p", "model": "m"}, "generate")))
    t.start()
    t.join(10)
    assert done == [None] and m.get_many(["k"])["k"].text == "Decision: C" and m.path == ":memory:"


def test_a_cache_waits_its_own_timeout_for_a_writer_holding_the_file(tmp_path):
    f = _sound(tmp_path)
    writer = sqlite3.connect(f, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(cache_mod.CacheError) as e:
            CallCache(tmp_path, timeout=0.1)
        assert str(e.value).startswith(f"call cache {f}: locked by another process for more than 0.1 s (another run "
                                       f"may be writing it: wait for it, or give this run its own --cache); ")
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_side_tables_that_cannot_be_added_name_the_file_and_the_step(tmp_path, monkeypatch):
    f = _sound(tmp_path)
    real = cache_mod._connect
    monkeypatch.setattr(cache_mod, "_connect", lambda *a, **kw: _Answers(
        real(*a, **kw), cache_file_mod._SIDE_TABLES[0], sqlite3.OperationalError("stand-in refusal")))
    with pytest.raises(cache_mod.CacheError) as e:
        CallCache(tmp_path)
    assert str(e.value) == (f"call cache {f}: adding the token-count tables failed (OperationalError: stand-in "
                            f"refusal)" + _recover(f))


def test_an_existing_cache_file_is_opened_never_built_again(tmp_path, monkeypatch):
    _sound(tmp_path)
    built = []
    monkeypatch.setattr(cache_mod, "_create", lambda path: built.append(path))
    CallCache(tmp_path).close()
    assert built == []


def test_a_cache_path_ending_in_db_that_is_no_file_yet_is_a_folder_for_calls_sqlite(tmp_path):
    c = CallCache(tmp_path / "runs.db")
    assert c.path == str(tmp_path / "runs.db" / "calls.sqlite") and (tmp_path / "runs.db").is_dir()
    c.close()


def test_a_file_that_grew_after_the_callers_stat_is_measured_after_its_header_is_read(tmp_path):
    # a connection the garbage collector closes between the caller's stat and the header read checkpoints its pages
    # into the file: a 3-page header over 12288 bytes is whole, whatever size the caller saw before (8100)
    f = tmp_path / "c.sqlite"
    f.write_bytes(_header(4096, 3) + bytes(12188))
    assert cache_file_mod._header_problem(f, 8100) is None
    f.write_bytes(_header(4096, 3) + bytes(8000))
    assert cache_file_mod._header_problem(f, 8100) == "truncated (8100 bytes; its header says 3 pages of 4096 bytes = 12288)"


def test_a_cache_dropped_without_close_closes_its_connection_before_letting_the_file_go(tmp_path, monkeypatch):
    c = CallCache(tmp_path)
    db, seen = c._db, []

    def hold(path, step):
        try:
            db.execute("SELECT 1")
            open_now = True
        except sqlite3.ProgrammingError:           # a closed connection
            open_now = False
        seen.append((step, open_now))
    monkeypatch.setattr(cache_mod, "_hold", hold)
    del c
    assert seen == [(-1, False)]


def test_a_failed_entry_count_names_its_step(tmp_path):
    c = CallCache(tmp_path)
    c._db.close()
    with pytest.raises(cache_file_mod.CacheError) as e:
        len(c)
    f = tmp_path / "calls.sqlite"
    assert str(e.value).startswith(f"call cache {f}: counting entries failed (ProgrammingError: Cannot operate on a "
                                   f"closed database.); recover: move the file aside")


def test_only_a_read_only_error_on_a_read_only_file_system_is_blamed_on_the_file_system(monkeypatch):
    monkeypatch.setattr(cache_file_mod, "read_only_fs", lambda path: True)
    ro = ("it lies on a read-only file system (no permission change can help): copy it to a writable place and point "
          "--cache at the copy")
    assert cache_file_mod.environment_problem(sqlite3.OperationalError("attempt to write a readonly database"), "/c") == ro
    assert cache_file_mod.environment_problem(sqlite3.OperationalError("no such table: calls"), "/c") is None
    assert cache_file_mod.environment_problem(sqlite3.OperationalError("attempt to write a readonly database")) != ro


@pytest.mark.parametrize("given, name", [("org/Model-XX", "Model-XX"), ("/models/Qwen2.5-7B/", "Qwen2.5-7B"),
                                         ("X", "X"), ("", None), (None, None)])
def test_a_served_models_name_is_its_last_path_part(given, name):
    from crossprofile_lib.backends.http_faults import _basename
    assert _basename(given) == name


def test_a_format_retry_asks_for_as_many_tokens_as_the_decision(tmp_path):
    from scripted_llm import Scripted

    from crossprofile_lib.run.runner import RunConfig, run_grid
    b = Scripted(lambda r: "Decision: A" if r.purpose == "decision-retry" else "I cannot decide.", max_tokens=77)
    df = run_grid(RunConfig(backend="scripted/s1", templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0],
                            budgets=["0.6"], policies=["R1"], variants=["PSP"]), backend=b)
    assert [(r.purpose, r.max_tokens) for r in b.sent] == [("decision", 77), ("decision-retry", 77)]
    assert df.decision_letter.tolist() == ["A"] and df.format_retry.tolist() == [True]


def test_an_earlier_versions_entry_is_copied_under_its_new_key_once_found(server, tmp_path):
    fake, url = server()
    cache = CallCache(tmp_path / "c")
    r = ChatRequest((USER,), purpose="decision", choices=("A", "B", "C"))
    old = {"provider": "openai", "model": "fake", "base_url": url, "chat_template": None, "grammar_style": None,
           "reason_chars": None, "extra_body": None}
    cache.put(call_key(old, r, "generate"), r, ChatResult(text="Decision: C"), old, "generate")
    first = OpenAICompatBackend("fake", base_url=url, cache=cache, sampling="server", **FAST)
    assert first.chat([r])[0].text == "Decision: C" and first.stats["legacy"] == 1 and len(cache) == 2
    again = OpenAICompatBackend("fake", base_url=url, cache=cache, sampling="server", **FAST)
    assert again.chat([r])[0].text == "Decision: C" and again.stats["legacy"] == 0 and fake.answered == 0
