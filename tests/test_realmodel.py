"""The real-model path a researcher can trust (issue 28), against local fake servers (never the internet).

A wrong key or model stops within seconds; an outage never changes budgets silently; a run whose
server list changed resumes from the cache with zero repeated calls; older caches stay usable;
sampling is pinned, sent and recorded; the concurrency rule finds a server's capacity; the paper
preset's dry run prints its call count; the relevance-filter fallback rate is reported; HiddenBench
failures are error rows refused by every table and never resumed as finished.
"""

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crossprofile_lib.backends import get_backend
from crossprofile_lib.backends.base import ChatRequest
from crossprofile_lib.backends.cache import CallCache, call_key
from crossprofile_lib.backends.openai_compat import OpenAICompatBackend, ServerRefused
from crossprofile_lib.cli import main
from crossprofile_lib.run.plan import PAPER_DESIGN, call_plan
from crossprofile_lib.run.results import read_results
from crossprofile_lib.run.runner import RunConfig, run_grid, run_to_dir

sys.path.insert(0, str(Path(__file__).parent))
import fake_openai_server as F  # noqa: E402

FAST = dict(retry_wait=0.01, retry_wait_max=0.05)
ONE_T = "templates/dev/dev-hospital-01.yaml"
GRID = dict(templates=[ONE_T], seeds=[0], budgets=["0.4", "0.6"], policies=["R1", "B4", "ALL", "EMPTY"],
            variants=["PSP", "SPS"])
BUDGET_COLUMNS = ["t_all", "budget_tokens", "memory_tokens", "n_kept", "memory_sha"]


@pytest.fixture(autouse=True)
def _fresh_probes(monkeypatch):
    """Every test probes its servers itself (the per-process probe memos are emptied)."""
    from crossprofile_lib.backends import openai_compat
    from crossprofile_lib.task import tokenizer
    monkeypatch.setattr(tokenizer, "_PROBED", {})
    monkeypatch.setattr(openai_compat, "_MODELS_SEEN", {})
    monkeypatch.delenv("CROSSPROFILE_BASE_URL", raising=False)
    monkeypatch.delenv("CROSSPROFILE_API_KEY", raising=False)


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _backend(url, tmp_path, **kw):
    return get_backend("openai/fake", base_url=url, cache=tmp_path / "cache", **{**FAST, **kw})


def _cli(args, tmp_path, **env):
    import os
    e = {**os.environ, "CROSSPROFILE_CACHE": str(tmp_path / "cache"), **env}
    e.pop("CROSSPROFILE_BASE_URL", None)
    return subprocess.run([sys.executable, "-m", "crossprofile_lib.cli"] + args, env=e, capture_output=True,
                          text=True, timeout=300)


CLI_ONE = ["--templates", ONE_T, "--seeds", "0", "--budgets", "0.6", "--policies", "R1,ALL,EMPTY",
           "--variants", "PSP,SPS,PPP,SSS", "--no-progress"]


# --- 4. a wrong key or model stops within seconds -----------------------------------------------------

@pytest.mark.parametrize("tokenizer", [[], ["--tokenizer", "offline"]], ids=["tokenize-probe", "models-probe"])
def test_a_wrong_key_stops_the_run_within_seconds_naming_url_model_and_status(server, tmp_path, tokenizer):
    fake, url = server(api_key="right-key", tokenize="vllm")
    r = _cli(["run", "--backend", "openai/qwen-7b", "--base-url", url, "--out", str(tmp_path / "out")] + CLI_ONE
             + tokenizer, tmp_path, CROSSPROFILE_API_KEY="wrong-key")
    assert r.returncode == 1, r.stderr
    assert url in r.stderr and "'qwen-7b'" in r.stderr and ("401" in r.stderr) and "Traceback" not in r.stderr
    assert "wrong-key" not in r.stderr + r.stdout
    assert fake.received <= 3 and fake.answered == 0  # stopped before a single model call
    assert not (tmp_path / "out/results.parquet").exists()


def test_a_model_the_server_does_not_list_stops_before_any_call(server, tmp_path):
    fake, url = server(served_model="qwen2.5-7b,llama-3.1-8b")
    b = _backend(url, tmp_path, tokenizer="offline")
    with pytest.raises(ServerRefused, match=r"does not serve model 'fake' \(it serves: qwen2.5-7b, llama-3.1-8b\)"):
        run_grid(RunConfig(**GRID), b)
    assert fake.answered == 0 and fake.received == 1


def test_a_one_model_server_under_another_name_is_refused_unless_accepted(server, tmp_path):
    # a server with one model answers any name (llama.cpp does): a run named qwen2.5-7b-instruct on it would store
    # SmolLM2's answers as Qwen's rows, and the book pairs paper columns by that name
    fake, url = server(served_model="smollm2-135m", any_model=True, owned_by="llamacpp")
    out = tmp_path / "out"
    r = _cli(["run", "--backend", "openai/qwen2.5-7b-instruct", "--base-url", url, "--out", str(out), "--no-progress",
              "--tokenizer", "offline"] + CLI_ONE, tmp_path)
    assert r.returncode == 1 and fake.answered == 0 and not out.exists(), r.stderr
    assert ("does not serve model 'qwen2.5-7b-instruct' (it serves: smollm2-135m)" in r.stderr
            and "--backend openai/smollm2-135m" in r.stderr and "accept_served_model=true" in r.stderr), r.stderr
    assert "Traceback" not in r.stderr
    # the option runs it, and the served model is recorded with the rows' name
    r = _cli(["run", "--backend", "openai/qwen2.5-7b-instruct", "--base-url", url, "--out", str(out), "--no-progress",
              "--tokenizer", "offline", "--backend-option", "accept_served_model=true"] + CLI_ONE, tmp_path)
    assert r.returncode == 0 and fake.answered > 0, r.stderr
    assert json.loads((out / "run.json").read_text())["served_model"] == {"id": "smollm2-135m"}
    # a listed alias is a name the server serves (llama.cpp lists its --alias names under "aliases"); the served id
    # stays the model's own
    fake, url = server(served_model="SmolLM2-135M-Instruct.Q4_1.gguf", aliases="smollm2-135m")
    b = get_backend("openai/smollm2-135m", base_url=url, cache=tmp_path / "c2", tokenizer="offline", **FAST)
    assert b.served_model() == {"id": "SmolLM2-135M-Instruct.Q4_1.gguf"}
    with pytest.raises(ServerRefused, match="does not serve model 'smollm2'"):
        get_backend("openai/smollm2", base_url=url, cache=tmp_path / "c3", tokenizer="offline", **FAST).served_model()


def test_404_answers_stop_after_the_first_few_calls(server, tmp_path):
    # a one-model server lists another name (as llama.cpp servers do): no refusal up front, but
    # every call answers 404 model-not-found; the run stops after stop_on_refusal of them
    fake, url = server(served_model="other-model")
    b = _backend(url, tmp_path, tokenizer="offline", concurrency=2, accept_served_model=True)
    with pytest.raises(ServerRefused, match=r"answered HTTP 404 .* to 3 calls in a row for model 'fake'"):
        run_grid(RunConfig(**GRID), b)
    n = len(GRID["budgets"]) * 2 * 2 * 2 + 2 * 2  # the grid's decisions (R1, B4 budgeted; ALL, EMPTY once)
    assert fake.received - 1 <= 3 + 2 < n  # the /models probe, then at most the refusals and those in flight
    off = _backend(url, tmp_path, tokenizer="offline", stop_on_refusal=0, accept_served_model=True)  # 0: every call fails
    df = run_grid(RunConfig(**GRID), off)
    assert df.error.str.contains("NotFoundError").all()


def test_a_wrong_key_stops_hiddenbench_within_seconds(server, tmp_path):
    fake, url = server(api_key="right-key")
    r = _cli(["hiddenbench", "run", "--backend", "openai/fake", "--base-url", url, "--out", str(tmp_path / "hb"),
              "--tokenizer", "offline", "--seeds", "0", "--limit", "1"], tmp_path, CROSSPROFILE_API_KEY="bad")
    assert r.returncode == 1, r.stderr
    assert "HTTP 401" in r.stderr and url in r.stderr and fake.answered == 0


# --- 2. budgets never change silently ------------------------------------------------------------------

def test_an_outage_never_changes_budgets(tmp_path):
    """Server up: budgets priced by its tokenize endpoint, counts kept in the cache. Server down: the
    rerun prices every budget from the stored counts (same tokenizer, same budgets, zero calls); a
    cache without counts refuses, unless the fallback is asked for (then named and recorded)."""
    port = _closed_port()
    url = f"http://127.0.0.1:{port}/v1"
    srv = subprocess.Popen([sys.executable, str(Path(__file__).parent / "fake_openai_server.py"), "--port", str(port),
                            "--tokenize", "llama-cpp-python"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert "fake OpenAI server" in srv.stdout.readline()
    args = ["run", "--backend", "openai/fake", "--base-url", url] + CLI_ONE
    try:
        up = _cli(args + ["--out", str(tmp_path / "up")], tmp_path)
    finally:
        srv.kill()
        srv.wait()
    assert up.returncode == 0, up.stderr
    a, ha = read_results(tmp_path / "up"), json.loads((tmp_path / "up/run.json").read_text())
    assert (a.tokenizer == "server:llama-cpp-python:fake").all() and ha["tokenizer_counts"]["server"] > 0
    down = _cli(args + ["--out", str(tmp_path / "down")], tmp_path)
    assert down.returncode == 0, down.stderr
    b, hb = read_results(tmp_path / "down"), json.loads((tmp_path / "down/run.json").read_text())
    assert (b.tokenizer == a.tokenizer).all() and a[BUDGET_COLUMNS].equals(b[BUDGET_COLUMNS])
    assert b.cached.all() and hb["calls"].get("calls", 0) == 0 and hb["tokenizer_counts"] == {"store": ha[
        "tokenizer_counts"]["server"], "server": 0}
    assert "counts stored in the call cache" in hb["tokenizer_source"] and "cannot be reached" in down.stderr
    # a cache that never saw the endpoint: refused (exit 1, a run-time failure), never a silent approximation
    fresh = _cli(args + ["--out", str(tmp_path / "fresh"), "--cache", str(tmp_path / "other")], tmp_path)
    assert fresh.returncode == 1 and "budgets are never changed silently" in fresh.stderr
    assert "--tokenizer-fallback offline" in fresh.stderr and "--tokenizer qwen2.5" in fresh.stderr
    assert not (tmp_path / "fresh/results.parquet").exists()
    asked = get_backend("openai/fake", base_url=url, cache=tmp_path / "other", tokenizer_fallback="offline")
    assert asked.tokenizer.name == "offline-bpe-approx-v1" and "--tokenizer-fallback offline" in asked.tokenizer_source


def test_every_base_url_is_probed_for_the_tokenize_endpoint(server, tmp_path):
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    fake, url = server(tokenize="vllm")
    b = _backend(f"{dead},{url}", tmp_path)  # the first URL is down: the second one's endpoint prices budgets
    assert b.tokenizer.name == "server:vllm:fake" and url[:-3] + "/tokenize" in b.tokenizer_source
    assert b.tokenizer.count("one two, 3") == len(F.fake_tokens("one two, 3"))


def test_a_tokenize_endpoint_that_stops_mid_run_is_retried_then_refused(server, tmp_path):
    from crossprofile_lib.task.tokenizer import ServerTokenizer, TokenizerUnavailable
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    fake, url = server(tokenize="vllm")
    store = CallCache(tmp_path / "c").token_store("server:vllm:fake")
    tok = ServerTokenizer([dead, url], "fake", "vllm", timeout=2, store=store, retry_wait=0.01)
    assert tok.count("alpha beta") == 2 and tok.sources == {"store": 0, "server": 1}  # moved on to the live URL
    assert store.get("alpha beta") == 2
    gone = ServerTokenizer([dead], "fake", "vllm", timeout=2, store=store, retry_wait=0.01)
    assert gone.count("alpha beta") == 2 and gone.sources["store"] == 1  # stored: no endpoint needed
    with pytest.raises(TokenizerUnavailable, match="stopped answering after 4 attempts.*--tokenizer qwen2.5"):
        gone.count("a text never counted")


def test_a_busy_tokenize_endpoint_is_an_outage_not_a_missing_endpoint():
    from crossprofile_lib.task.tokenizer import probe_servers

    class Busy(F.FakeServer):
        def _tokenize(self, path, raw):
            return 503, b'{"error": "busy"}', 0.0
    import asyncio
    import threading
    fake, box, ready = Busy(), {}, threading.Event()

    async def main_():
        srv = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
        box["port"], box["srv"], box["loop"] = srv.sockets[0].getsockname()[1], srv, asyncio.get_running_loop()
        ready.set()
        await asyncio.sleep(30)
    t = threading.Thread(target=lambda: asyncio.run(main_()), daemon=True)
    t.start()
    ready.wait(10)
    tok, why, state = probe_servers([f"http://127.0.0.1:{box['port']}/v1"], "m", timeout=5)
    assert tok is None and state == "unreachable" and "busy" in why and "HTTP 503" in why


# --- 3. the cache follows the served model, not the server's address ------------------------------------

def test_a_run_whose_server_list_changed_resumes_with_zero_repeated_calls(server, tmp_path):
    fa, ua = server(served_model="fake", root="/scratch/node3/models/Fake-7B")
    df = run_grid(RunConfig(**GRID), _backend(ua, tmp_path, tokenizer="offline"))
    assert fa.answered > 0
    # a new node and an SSH tunnel (other ports), the model at another path: same served model
    fb, ub = server(served_model="fake", root="/models/Fake-7B")
    fc, uc = server(served_model="fake", root="/models/Fake-7B")
    b = _backend(f"{ub},{uc}", tmp_path, tokenizer="offline")
    df2 = run_grid(RunConfig(**GRID), b)
    assert fb.answered == fc.answered == 0 and b.stats["calls"] == 0 and df2.cached.all()
    assert list(df2.decision) == list(df.decision)
    assert b.identity()["served"] == {"id": "fake", "root": "Fake-7B"} and "base_url" not in b.identity()
    # another model behind the same name (another root): its own calls
    fd, ud = server(served_model="fake", root="/models/Other-7B")
    run_grid(RunConfig(**GRID), _backend(ud, tmp_path, tokenizer="offline"))
    assert fd.answered > 0


def test_the_cache_keys_alike_on_a_machine_without_the_server(server, tmp_path):
    fa, ua = server(served_model="fake", root="/m/Fake-7B")
    run_grid(RunConfig(**GRID), _backend(ua, tmp_path, tokenizer="offline"))
    laptop = _backend(f"http://127.0.0.1:{_closed_port()}/v1", tmp_path, tokenizer="offline")
    df = run_grid(RunConfig(**GRID), laptop)  # no server: the recorded served model keys the calls
    assert df.cached.all() and laptop.stats["calls"] == 0 and (df.error == "").all()


def test_servers_that_serve_different_models_are_refused(server, tmp_path):
    _, ua = server(served_model="fake", root="/m/A")
    _, ub = server(served_model="fake", root="/m/B")
    with pytest.raises(ValueError, match="the base URLs serve different models"):
        run_grid(RunConfig(**GRID), _backend(f"{ua},{ub}", tmp_path, tokenizer="offline"))


#: the key an earlier version (identity keyed on the base URL) gave this request; computed with that
#: code before the served-model identity, so the legacy look-up provably finds what it wrote
LEGACY_KEY = "8536f35d9533bfde99b86ef663b5a51c498f76c928bdfb697fdf5b54f948fd40"


def _legacy_identity(url):
    return {"provider": "openai", "model": "fake", "base_url": url, "chat_template": None, "grammar_style": None,
            "reason_chars": None, "extra_body": None}


def test_the_legacy_key_is_the_one_earlier_versions_wrote():
    r = ChatRequest(({"role": "user", "content": "Which option? Decision: ?"},), max_tokens=512, purpose="decision",
                    prompt_file="decision_v1.txt", choices=("A", "B", "C"))
    assert call_key(_legacy_identity("http://127.0.0.1:8000/v1"), r, "generate") == LEGACY_KEY
    b = get_backend("openai/fake", base_url="http://127.0.0.1:8000/v1", cache=":memory:", tokenizer="offline",
                    sampling="server")
    assert b.legacy_identities()[0] == _legacy_identity("http://127.0.0.1:8000/v1")


def test_an_existing_cache_stays_usable_after_the_server_moved(server, tmp_path, capsys):
    """A cache written under the old key (base URL in the key; made here with the old identity, whose
    key the test above pins) is found from a new address with --sampling server (whose requests are the
    old ones) and copied under the new key; with sampling pinned it is not reused, and a notice says so."""
    fa, ua = server()
    old = _backend(ua, tmp_path, tokenizer="offline", sampling="server")
    old.identity = old.stored_identity = lambda: _legacy_identity(ua)  # what the earlier version keyed on
    df = run_grid(RunConfig(**GRID), old)
    made = fa.answered
    fb, ub = server()
    b = _backend(ub, tmp_path, tokenizer="offline", sampling="server")
    df2 = run_grid(RunConfig(**GRID), b)
    assert fb.answered == 0 and b.stats["calls"] == 0 and b.stats["legacy"] == made
    assert list(df2.decision) == list(df.decision) and df2.cached.all()
    again = _backend(ub, tmp_path, tokenizer="offline", sampling="server")
    run_grid(RunConfig(**GRID), again)
    assert again.stats["legacy"] == 0 and again.stats["calls"] == 0  # copied: found under the new key now
    capsys.readouterr()
    pinned = _backend(ub, tmp_path, tokenizer="offline")
    run_grid(RunConfig(**GRID), pinned)
    assert pinned.stats["calls"] == made and fb.answered == made
    assert "not reused with sampling pinned" in capsys.readouterr().err


# --- 5. sampling pinned, sent and recorded ---------------------------------------------------------------

def test_the_papers_sampling_is_sent_with_every_request_and_recorded(server, tmp_path):
    fake, url = server(keep_bodies=True)
    out = tmp_path / "out"
    rc = main(["run", "--backend", "openai/fake", "--base-url", url, "--out", str(out), "--cache", str(tmp_path / "c"),
               "--tokenizer", "offline", "--request-field", "top_k=1", "--request-field",
               'chat_template_kwargs={"enable_thinking": false}'] + CLI_ONE)
    assert rc == 0
    want = {"temperature": 0, "top_p": 1, "frequency_penalty": 0, "presence_penalty": 0, "repeat_penalty": 1,
            "repetition_penalty": 1, "top_k": 1, "chat_template_kwargs": {"enable_thinking": False}}
    assert fake.bodies and all({k: body.get(k) for k in want} == want for _, _, body in fake.bodies)
    h = json.loads((out / "run.json").read_text())
    assert h["sampling"] == {"mode": "paper", "fields": want}
    assert h["config"]["backend_options"]["extra_body"] == {"top_k": 1, "chat_template_kwargs": {"enable_thinking": False}}
    n = len(fake.bodies)
    # another request field changes the output: new calls; the server's defaults (--sampling server): new calls
    rc = main(["run", "--backend", "openai/fake", "--base-url", url, "--out", str(tmp_path / "o2"), "--cache",
               str(tmp_path / "c"), "--tokenizer", "offline", "--sampling", "server"] + CLI_ONE)
    assert rc == 0 and len(fake.bodies) > n
    assert all("top_p" not in body and "repeat_penalty" not in body for _, _, body in fake.bodies[n:])
    assert json.loads((tmp_path / "o2/run.json").read_text())["sampling"] == {"mode": "server",
                                                                               "fields": {"temperature": 0.0}}


def test_request_fields_are_checked_on_the_command_line(tmp_path, capsys):
    rc = main(["run", "--backend", "openai/fake", "--out", str(tmp_path / "o"), "--request-field", "messages=[]"])
    assert rc == 2 and "set by the suite itself" in capsys.readouterr().err
    rc = main(["run", "--backend", "ledger", "--out", str(tmp_path / "o"), "--request-field", "top_k=1"])
    assert rc == 2 and "--request-field: backend 'ledger' does not take" in capsys.readouterr().err


# --- 6. concurrency: a rule that finds the server's rate --------------------------------------------------

def _simulate(k: int, s: float = 1.0, steps: int = 400, overload_at: int | None = None):
    """A server working on ``k`` requests at once (service time ``s``) in front of one URL's limit: each
    window of answers comes back with latency ``s * max(1, inflight / k)``."""
    from crossprofile_lib.backends.concurrency import OK, OVERLOAD, URLLimit
    u = URLLimit(ceiling=512)
    seen = []
    for step in range(steps):
        inflight = int(u.limit)
        lat = s * max(1.0, inflight / k)
        for _ in range(inflight):
            u.observe(OVERLOAD if overload_at is not None and inflight > overload_at else OK, lat / 6)
        seen.append(int(u.limit))
    return u, seen


@pytest.mark.parametrize("k", [3, 16, 100])
def test_the_limit_settles_near_the_servers_capacity(k):
    u, seen = _simulate(k)
    tail = seen[-100:]
    assert k <= min(tail) and max(tail) <= 2.2 * k + 1, (k, tail[-10:])  # between k and about CUT * k
    assert u.peak < 4 * k + 8  # slow start overshoots at most one doubling past the queueing point


def test_429s_halve_the_limit_once_per_window():
    from crossprofile_lib.backends.concurrency import OK, OVERLOAD, URLLimit
    u = URLLimit(limit=32, slow_start=False)
    for _ in range(5):  # a burst of 429s from one overload: one halving
        u.observe(OVERLOAD, 0.0)
    assert u.limit == 16
    for _ in range(16):
        u.observe(OK, 1.0)
    u.observe(OVERLOAD, 0.0)
    assert u.limit == 8
    _, seen = _simulate(k=1000, overload_at=24)  # a server that rate-limits above 24 in flight
    assert max(seen[-100:]) <= 25


def test_the_auto_rule_finds_a_fake_servers_capacity_without_errors(server, tmp_path, monkeypatch):
    fake, url = server(capacity=6, latency_s=0.05)
    # The rule reads the latency a server working on 6 requests at once would have with this run's requests in
    # flight (the simulation's model above), counted, not timed: the limit it finds does not depend on how busy this
    # machine is (timed, a loaded machine's own delays held it at 3, or let it run past 24).
    monkeypatch.setattr(OpenAICompatBackend, "_latency",
                        lambda self, resp, elapsed: 0.05 * max(1.0, self._pool.urls[0].inflight / 6))
    b = _backend(url, tmp_path, tokenizer="offline", max_concurrency=64)
    cfg = RunConfig(**{**GRID, "templates": ["templates/dev"], "variants": ["PSP", "SPS", "PPP", "SSS"],
                       "policies": ["R1", "B4", "Random", "ALL", "EMPTY"]})
    df = run_grid(cfg, b)
    assert (df.error == "").all()
    rec = b.record()["concurrency"]
    assert rec["mode"] == "auto" and rec["per_url"][0]["answers"] == b.stats["calls"]
    # near the capacity, far below the ceiling a fixed rule would fill (the band of the simulation above)
    assert 6 <= rec["per_url"][0]["final"] <= 24 and rec["per_url"][0]["queueing"] > 0, rec
    fixed = _backend(url, tmp_path / "f", tokenizer="offline", concurrency=3)
    assert fixed.record()["concurrency"] == {"mode": "fixed", "concurrency": 3}


# --- 7. the paper preset, its dry run, the relevance fallback rate ----------------------------------------

def _dry(args, capsys):
    """``run --dry-run ARGS``: (exit status, stdout, stderr, {row label: count} of the table)."""
    rc = main(["run", "--dry-run"] + args)
    cap = capsys.readouterr()
    rows = [ln.rsplit(None, 1) for ln in cap.out.splitlines() if ln.startswith("  ") and "decision calls" not in ln]
    return rc, cap.out, cap.err, {k.strip(): int(v.replace(",", "")) for k, v in rows}


def test_the_dry_run_prints_the_calls_per_policy_counted_by_hand(tmp_path, capsys):
    grid = ["--templates", ONE_T, "--seeds", "0,1", "--variants", "PSP,SPS", "--budgets", "0.4,0.6",
            "--policies", "R1,R1-rel,B3,EMPTY,ALL"]
    rc, out, err, n = _dry(["--backend", "openai/qwen2.5-7b", "--cache", str(tmp_path / "c")] + grid, capsys)
    assert rc == 0 and not list(tmp_path.iterdir())  # nothing written, no cache made, no --out needed
    units = 1 * 2 * 2  # templates x seeds x variants
    assert f"{units} task units, {units * (3 * 2 + 2)} decisions" in out
    # every R1 prompt is new (units x budgets); EMPTY is one prompt per seed in both variants; ALL differs by
    # variant; R1-rel repeats an R1 prompt wherever the filter's tier changes nothing; B3 writes its own
    assert n["R1"] == units * 2 and n["EMPTY"] == 2 and n["ALL"] == units and 0 <= n["R1-rel"] <= units * 2
    assert n["B3"] == units * 2 and n["relevance filter"] == units and n["B3 summaries"] == units * 2
    total = sum(n.values())
    assert f"total: {total:,} model calls (+ at most {total - units - units * 2:,} format-reminder retries" in out
    assert "no measured rate" in out
    rc, out, _, _ = _dry(["--backend", "openai/q", "--rate", "0.5"] + grid, capsys)
    assert rc == 0 and f"{total:,} calls at 0.50 calls/s = {total * 2:.0f} s" in out
    rc, out, err, _ = _dry(["--preset", "paper", "--seeds", "0", "--templates", ONE_T], capsys)  # the ledger
    # 8 units x (8 budgeted policies x 4 budgets + 12 unbudgeted): B3 left out, an option overrides the preset
    assert rc == 0 and "total: 352 decisions; the reference decider makes no model calls" in out
    assert "B3 left out on ledger" in err


@pytest.mark.slow
def test_the_dry_run_of_the_paper_preset_prints_its_call_count(capsys, monkeypatch):
    import crossprofile_lib.run.plan as plan_module
    plans = []  # what the library's count returned to the command (counted once: about 40 s on 2 cores)

    def counted(*a, **k):
        plans.append((a, k, call_plan(*a, **k)))
        return plans[-1][2]
    monkeypatch.setattr(plan_module, "call_plan", counted)
    rc, out, _, n = _dry(["--preset", "paper", "--backend", "openai/qwen2.5-7b-instruct"], capsys)
    assert rc == 0
    assert "preset paper: 60 templates x 8 variants x 3 seeds; budgets 0.4,0.6,0.8,128t; 21 policies" in out
    assert "1,440 task units, 69,120 decisions" in out
    # one relevance-filter call per task unit, one B3 summary and one B3 decision per unit and budget; R1, the
    # first policy, at most one distinct prompt per unit and budget (budgets that keep the same set share one)
    assert n["relevance filter"] == 1440 and n["B3 summaries"] == 5760 and n["B3"] == 5760
    assert 0.8 * 5760 < n["R1"] <= 5760 and n["EMPTY"] <= 1440 and n["ALL"] <= 1440
    # the printed total is the library's count of the same design (run.plan.call_plan, what
    # benchmarks/count_paper_calls.py records), and the rows add up to it
    (args, kwargs, plan), = plans
    cfg = args[0] if args else kwargs["cfg"]
    assert {k: list(getattr(cfg, k)) for k in ("templates", "seeds", "variants", "policies", "budgets")} == \
        {k: list(getattr(PAPER_DESIGN, k)) for k in ("templates", "seeds", "variants", "policies", "budgets")}
    assert kwargs.get("decision_mode") == "generate"
    total = plan["calls"]["total"]
    assert sum(n.values()) == total
    retries = plan["distinct_decision_prompts"]
    assert f"total: {total:,} model calls (+ at most {retries:,} format-reminder retries in generate mode)" in out


def test_the_dry_run_estimates_from_a_rate_measured_in_the_cache(tmp_path, capsys):
    from crossprofile_lib.backends.base import ChatResult
    c = CallCache(tmp_path / "c")
    r = ChatRequest(({"role": "user", "content": "x"},))
    for i in range(41):
        c.put(f"k{i}", r, ChatResult("y"), {"provider": "openai", "model": "m"}, "generate")
    c._db.execute("UPDATE calls SET created = 1.0e9 + CAST(SUBSTR(key, 2) AS REAL) / 4")  # 4 calls/s
    rc, out, _, n = _dry(["--backend", "openai/m", "--cache", str(tmp_path / "c"), "--templates", ONE_T,
                          "--seeds", "0", "--variants", "PSP", "--budgets", "0.6", "--policies", "R1,ALL"], capsys)
    assert rc == 0 and n == {"R1": 1, "ALL": 1} and "total: 2 model calls" in out
    assert "at 4.00 calls/s" in out and "measured on 41 calls" in out


def test_the_relevance_fallback_rate_is_reported_with_a_warning_when_high(tmp_path, capsys):
    from scripted_llm import Scripted

    def answer(r):
        if r.purpose == "relevance":
            return "I cannot tell which are relevant."
        return "Decision: A"
    b = Scripted(answer)
    cfg = RunConfig(backend="scripted/s1", templates=["templates/dev"], seeds=[0], budgets=["0.6"],
                    policies=["R1-rel", "ALL", "EMPTY"], variants=["PSP"])
    df, h = run_to_dir(cfg, tmp_path / "run", backend=b)
    out = capsys.readouterr().out
    assert h["relevance_fallback"] == {"scripted/s1": {"calls": 10, "invalid": 10, "rate": 1.0, "high": True}}
    assert "warning: scripted/s1: relevance filter (R1-rel, BAL): 10 of 10 answers unusable (100.0%" in out
    assert "biases H3 (R1-rel - R1) toward 0" in out
    from crossprofile_lib.stats.analysis_set import relevance_fallback
    half = df.copy()
    half.loc[half.template_id.isin(sorted(half.template_id.unique())[:9]), "relevance_invalid"] = False
    assert relevance_fallback(half)["scripted/s1"] == {"calls": 10, "invalid": 1, "rate": 0.1, "high": False}
    rc = main(["stats", str(tmp_path / "run"), "--resamples", "50", "--fit-resamples", "0", "--no-regressions",
               "--analysis-set", "all"])
    out = capsys.readouterr().out
    assert rc == 0 and "warning: scripted/s1: relevance filter (R1-rel, BAL): 10 of 10 answers unusable" in out


# --- 1. HiddenBench: failed calls are error rows, refused by every table, never resumed ------------------

def _hb(args, tmp_path):
    return main(["hiddenbench", "run", "--backend", "openai/fake", "--tokenizer", "offline", "--seeds", "0",
                 "--limit", "2", "--max-retries", "0", "--backend-option", "circuit_breaker=0",
                 "--backend-option", "retry_wait=0.01", "--cache", str(tmp_path / "cache")] + args)


@pytest.mark.parametrize("protocol", ["controlled", "natural"])
def test_hiddenbench_failed_calls_are_error_rows_refused_by_every_table_and_rerun(tmp_path, protocol, capsys):
    from crossprofile_lib.book.hbruns import HBRun, hb_as_run, hb_natural_as_run
    from crossprofile_lib.hiddenbench.measures import controlled_summary, headroom, natural_summary
    from crossprofile_lib.hiddenbench.run import read_tables
    from crossprofile_lib.stats.analysis_set import FailedCallsError
    port = _closed_port()
    url = f"http://127.0.0.1:{port}/v1"
    out = tmp_path / "hb"
    common = ["--base-url", url, "--out", str(out), "--protocol", protocol, "--ablations", "baseline",
              "--policies", "R1,ALL,EMPTY"]

    def spawn(**kw):
        cmd = [sys.executable, str(Path(__file__).parent / "fake_openai_server.py"), "--port", str(port)]
        for k, v in kw.items():
            cmd += [f"--{k.replace('_', '-')}", str(v)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert "fake OpenAI server" in p.stdout.readline()
        return p
    srv = spawn(fail_first=10_000, fail_status=503)  # an outage: every call fails
    try:
        rc = _hb(common, tmp_path)
    finally:
        srv.kill()
        srv.wait()
    err = capsys.readouterr().err
    assert rc == 1 and "rows are failed model calls" in err and "Rerun the same command" in err
    h = json.loads((out / "hiddenbench_run.json").read_text())
    tables = read_tables(out, protocol)
    d = tables["decisions"]
    assert h["errors"] > 0 and h["failed_sessions"] == h["protocols"][protocol]["sessions_run"] > 0
    assert (d.error != "").all() and d.decided.all() and d.correct.isna().all() and not d.invalid.any()
    assert h["protocols"][protocol]["headroom"] is None and "failed model calls" in h["protocols"][protocol]["headroom_note"]
    with pytest.raises(FailedCallsError, match="rows are failed model calls"):
        controlled_summary(d) if protocol == "controlled" else natural_summary(tables["sessions"], tables["votes"], d)
    with pytest.raises(FailedCallsError):
        headroom(d, np.random.default_rng(0))
    hb = HBRun(out, h, {protocol: tables})
    with pytest.raises(FailedCallsError):
        hb_as_run(hb, protocol) if protocol == "controlled" else hb_natural_as_run(hb)
    if protocol == "natural":
        assert (tables["votes"].error != "").all() and (tables["sessions"].error != "").all()
        assert tables["votes"].correct.isna().all()
    kept = controlled_summary(d, allow_errors=True) if protocol == "controlled" else None
    assert kept is None or kept.empty  # allow_errors drops them: nothing is left to show
    # the server is back: the failed sessions run again (not "resumed"), the tables are clean
    srv = spawn()
    try:
        rc = _hb(common, tmp_path)
    finally:
        srv.kill()
        srv.wait()
    assert rc == 0, capsys.readouterr().err
    h2 = json.loads((out / "hiddenbench_run.json").read_text())
    info = h2["protocols"][protocol]
    assert info["sessions_resumed"] == 0 and info["sessions_run"] == h["protocols"][protocol]["sessions_run"]
    assert h2["errors"] == 0 and h2["failed_sessions"] == 0
    d2 = read_tables(out, protocol)["decisions"]
    assert len(d2) == len(d) and (d2.error == "").all() and d2.correct.notna().all()
    assert h2["sampling"]["mode"] == "paper" and h2["tokenizer_source"].startswith("given")
    # and now a rerun resumes every session
    srv = spawn()
    try:
        assert _hb(common, tmp_path) == 0
    finally:
        srv.kill()
        srv.wait()
    info = json.loads((out / "hiddenbench_run.json").read_text())["protocols"][protocol]
    assert info["sessions_run"] == 0 and info["sessions_resumed"] > 0


def test_records_written_before_the_error_column_are_recognised_as_failed():
    from crossprofile_lib.hiddenbench.common import record_errors
    failed = {"rows": {"decisions": [{"decided": True, "decision_letter": "", "invalid": False}]}}
    invalid = {"rows": {"decisions": [{"decided": True, "decision_letter": "", "invalid": True}]}}
    ok = {"rows": {"decisions": [{"decided": True, "decision_letter": "B", "invalid": False}]}}
    ledger = {"rows": {"decisions": [{"decided": False, "decision_letter": "", "invalid": False}]}}
    natural = {"rows": {}, "artefacts": {"calls": [{"error": None}, {"error": "APIConnectionError"}]}}
    assert [record_errors(r) for r in (failed, invalid, ok, ledger, natural)] == [1, 0, 0, 0, 1]
    assert record_errors({"errors": 0, **failed}) == 0  # the count, where written, is the rule


def test_hiddenbench_run_takes_the_http_options_of_run(server, tmp_path):
    fake, url = server(keep_bodies=True)
    rc = main(["hiddenbench", "run", "--backend", "openai/fake", "--base-url", url, "--out", str(tmp_path / "hb"),
               "--cache", str(tmp_path / "c"), "--tokenizer", "offline", "--concurrency", "2", "--timeout", "30",
               "--max-retries", "1", "--request-field", "top_k=1", "--sampling", "paper", "--max-tokens", "64",
               "--seeds", "0", "--limit", "1", "--policies", "ALL,EMPTY", "--no-progress"])
    assert rc == 0
    assert fake.bodies and all(b["top_k"] == 1 and b["repeat_penalty"] == 1 for _, _, b in fake.bodies)
    h = json.loads((tmp_path / "hb/hiddenbench_run.json").read_text())
    assert h["config"]["backend_options"]["concurrency"] == 2 and h["concurrency"] == {"mode": "fixed",
                                                                                       "concurrency": 2}
    assert h["sampling"]["fields"]["top_k"] == 1 and h["errors"] == 0
    assert pd.read_parquet(tmp_path / "hb/hiddenbench_controlled.parquet").error.eq("").all()


def test_the_in_process_vllm_engine_gets_the_papers_sampling_explicitly(monkeypatch, tmp_path):
    from test_backend_vllm import make_fake_vllm
    mod = make_fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", mod.sampling_params)
    b = get_backend("vllm//models/m", cache=tmp_path)
    run_grid(RunConfig(**{**GRID, "policies": ["ALL"]}), b)
    _, params, _ = mod.LLM.instances[-1].calls[-1]
    want = {"temperature": 0.0, "top_p": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0,
            "repetition_penalty": 1.0}
    assert params and all({k: getattr(sp, k) for k in want} == want for sp in params)
    assert b.record()["sampling"]["fields"] == want
