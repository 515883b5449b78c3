"""The OpenAI-compatible backend against a local fake server: faults, resumability, secrets."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

from crossprofile_lib.backends import get_backend
from crossprofile_lib.backends.cache import CallCache
from crossprofile_lib.cli import main
from crossprofile_lib.run.results import read_results
from crossprofile_lib.run.runner import RunConfig, run_grid, run_to_dir

sys.path.insert(0, str(Path(__file__).parent))
import fake_openai_server as F  # noqa: E402

FAST = dict(retry_wait=0.01, retry_wait_max=0.05)
GRID = dict(templates=["templates/dev"], seeds=[0], budgets=["0.6"], policies=["R1", "B4", "ALL", "EMPTY"],
            variants=["PSP", "SPS"])
CLI_GRID = ["--templates", "templates/dev", "--seeds", "0", "--budgets", "0.6", "--policies", "R1,B4,ALL,EMPTY",
            "--variants", "PSP,SPS,PPP,SSS", "--tokenizer", "offline"]


def _backend(url, tmp_path, **kw):
    return get_backend("openai/fake", base_url=url, cache=tmp_path / "cache", **{**FAST, "tokenizer_fallback": "offline", **kw})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn_server(port, log, wait_line="fake OpenAI server on", **args):
    cmd = [sys.executable, str(Path(__file__).parent / "fake_openai_server.py"), "--port", str(port), "--log", str(log)]
    for k, v in args.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert wait_line in p.stdout.readline()
    return p


def _lines(path) -> list[str]:
    return Path(path).read_text().split() if Path(path).exists() else []


def test_grid_through_the_server_then_a_rerun_makes_zero_calls(server, tmp_path, capsys):
    fake, url = server()
    b = _backend(url, tmp_path)
    df, h = run_to_dir(RunConfig(backend="openai/fake", **GRID), tmp_path / "out", backend=b)
    n = len(df)
    assert n == 10 * 2 * 4 and (df.error == "").all() and not df.invalid.any()
    assert (df.backend == "openai/fake").all() and (df.decision_mode == "generate").all()
    assert (df.prompt_file == "decision_v1.txt").all() and df.prompt_sha.str.len().eq(16).all()
    assert h["errors"] == 0 and h["calls"]["calls"] == fake.answered > 0
    out = capsys.readouterr().out
    # the fake server answers by a hash of the prompt, so ALL and EMPTY are both near chance: the check runs
    # and fails at its lower bound, and the printed line, the header and the verdict agree
    hr = h["headroom"]
    assert hr["lo"] <= 15 and not hr["passed"] and hr["status"] == h["status"] == "exploratory"
    assert f"headroom check: ALL - EMPTY = {hr['estimate']:+.1f} points (95% CI {hr['lo']:+.1f}" in out
    assert "FAIL -> results are exploratory" in out
    sent = fake.received
    b2 = _backend(url, tmp_path)
    df2, h2 = run_to_dir(RunConfig(backend="openai/fake", **GRID), tmp_path / "out2", backend=b2)
    assert fake.received == sent and b2.stats["calls"] == 0 and df2.cached.all()
    assert (df2.decision.values == df.decision.values).all()


@pytest.mark.parametrize("faults,kw", [
    (dict(fail_first=2, fail_status=429), {}),                    # rate limited, then success
    (dict(burst_500=12), dict(concurrency=4)),                    # a burst of 500s
    (dict(fail_first=1, fail_status=503), {}),                    # service unavailable once
    (dict(delay_first=1, delay_s=2.0), dict(timeout=0.25)),       # the first attempt times out
    (dict(malformed_first=1), {}),                                # a 200 whose body is not JSON
])
def test_transient_faults_are_retried_and_nothing_is_lost(server, tmp_path, faults, kw):
    fake, url = server(**faults)
    b = _backend(url, tmp_path, **kw)
    df = run_grid(RunConfig(**{**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"]}), b)
    assert (df.error == "").all() and not df.invalid.any() and len(df) == 8
    assert b.stats["errors"] == 0 and b.stats["retries"] >= 1
    if "fail_first" in faults or "malformed_first" in faults or "delay_first" in faults:
        assert (df.call_retries >= 1).all()


def test_persistent_failure_is_an_error_the_run_finishes_and_exits_nonzero(tmp_path, capsys):
    port, log = _free_port(), tmp_path / "served.log"
    cache = str(tmp_path / "cache")
    srv = _spawn_server(port, log, fail_first=10_000, fail_status=503)
    try:
        rc = main(["run", "--backend", "openai/fake", "--base-url", f"http://127.0.0.1:{port}/v1", "--cache", cache,
                   "--max-retries", "1", "--out", str(tmp_path / "out"), "--no-progress", "--tokenizer", "offline"]
                  + CLI_GRID[:2]
                  + ["--seeds", "0", "--budgets", "0.6", "--policies", "R1,ALL", "--variants", "PSP"])
    finally:
        srv.kill()
        srv.wait()
    assert rc == 1
    err = capsys.readouterr().err
    assert "decisions failed after their retries" in err
    df = read_results(tmp_path / "out")
    assert len(df) == 10 * 2 and (df.error != "").all() and df.error.str.contains("InternalServerError|503").all()
    assert json.loads((tmp_path / "out/run.json").read_text())["errors"] == 20
    # the server recovers: the same command makes only the missing calls and exits 0
    srv = _spawn_server(port, log)
    try:
        rc = main(["run", "--backend", "openai/fake", "--base-url", f"http://127.0.0.1:{port}/v1", "--cache", cache,
                   "--out", str(tmp_path / "out"), "--no-progress", "--templates", "templates/dev", "--seeds", "0",
                   "--budgets", "0.6", "--policies", "R1,ALL", "--variants", "PSP", "--tokenizer", "offline"])
    finally:
        srv.kill()
        srv.wait()
    assert rc == 0 and (read_results(tmp_path / "out").error == "").all()
    assert len(_lines(log)) == len(set(_lines(log)))


def test_client_errors_are_not_retried(server, tmp_path):
    # a model the server does not serve (a one-model server lists another name, accepted by the option): 404 on every
    # call; with the early stop turned off every call is an error row, none retried
    fake, url = server(served_model="other-model")
    b = _backend(url, tmp_path, api_key="some-key", stop_on_refusal=0, accept_served_model=True)
    d = run_grid(RunConfig(**{**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"], "policies": ["ALL"]}), b)
    assert d.error.str.contains("NotFoundError").all() and (d.call_retries == 0).all()
    assert "some-key" not in " ".join(d.error)


def test_several_base_urls_share_the_load_and_a_dead_one_is_skipped(server, tmp_path):
    f1, u1 = server()
    f2, u2 = server()
    b = _backend(f"{u1},{u2}", tmp_path, concurrency=4)
    df = run_grid(RunConfig(**GRID), b)
    assert (df.error == "").all() and f1.answered > 5 and f2.answered > 5
    assert b.stored_identity()["base_url"] == sorted([u1, u2]) and "base_url" not in b.identity()
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    b = get_backend("openai/fake", base_url=f"{dead},{u1}", cache=tmp_path / "c2", tokenizer="offline", **FAST)
    df = run_grid(RunConfig(**{**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"]}), b)
    assert (df.error == "").all() and (df.call_retries <= 1).all()


def _cli_env(tmp_path, **extra):
    env = {**os.environ, "CROSSPROFILE_CACHE": str(tmp_path / "cache"), **extra}
    env.pop("CROSSPROFILE_BASE_URL", None)
    return env


def test_kill_9_mid_run_loses_no_finished_call(tmp_path):
    """A run killed with SIGKILL keeps every finished call; the rerun makes only the missing ones."""
    port, log = _free_port(), tmp_path / "served.log"
    srv = _spawn_server(port, log, latency_s=0.03)
    cmd = [sys.executable, "-m", "crossprofile_lib.cli", "run", "--backend", "openai/fake", "--base-url",
           f"http://127.0.0.1:{port}/v1", "--concurrency", "2", "--no-progress", "--out", str(tmp_path / "out")] + CLI_GRID
    try:
        run = subprocess.Popen(cmd, env=_cli_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.time()   # 600 s: a guard against a hang only; a loaded machine may take a minute to start the run
        while len(_lines(log)) < 30 and run.poll() is None and time.time() - t0 < 600:
            time.sleep(0.05)
        run.send_signal(signal.SIGKILL)
        run.wait()
        before = set(_lines(log))
        assert 30 <= len(before) and not (tmp_path / "out/results.parquet").exists()
        import sqlite3
        kept = sqlite3.connect(tmp_path / "cache/calls.sqlite").execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        assert kept >= len(before) - 2  # at most the calls in flight (concurrency 2) were lost
        done = subprocess.run(cmd, env=_cli_env(tmp_path), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    finally:
        srv.kill()
        srv.wait()
    served = _lines(log)
    dup = len(served) - len(set(served))
    assert dup <= 2, f"{dup} calls were answered twice"
    df = read_results(tmp_path / "out")
    assert len(df) == 10 * 4 * 4 and (df.error == "").all()
    assert "0 errors" in done.stdout and "cache hits" in done.stdout


def test_server_killed_and_restarted_mid_run(tmp_path):
    port, log, go = _free_port(), tmp_path / "served.log", tmp_path / "listen"
    srv = _spawn_server(port, log, latency_s=0.02)
    # the new server is started (and has imported everything) before the old one is killed, and listens the moment
    # it is told to: the time the port is closed does not depend on how fast this machine starts a process
    new = _spawn_server(port, log, latency_s=0.0, listen_when=go, wait_line="waiting for")
    b = get_backend("openai/fake", base_url=f"http://127.0.0.1:{port}/v1", cache=tmp_path / "cache",
                    concurrency=2, max_retries=12, retry_wait=0.05, retry_wait_max=0.3, tokenizer="offline")
    import threading
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("df", run_grid(RunConfig(**GRID), b)))
    t.start()
    try:
        while len(_lines(log)) < 20 and t.is_alive():
            time.sleep(0.02)
        srv.kill()
        srv.wait()
        time.sleep(0.2)  # refused connections: the calls in flight and the next ones retry
        go.touch()
        assert "fake OpenAI server on" in new.stdout.readline()  # listening again
        t.join(300)
    finally:
        for p in (srv, new):
            p.kill()
            p.wait()
    df = box["df"]
    assert len(df) == 80 and (df.error == "").all() and not df.invalid.any()
    served = _lines(log)
    assert len(served) - len(set(served)) <= 2 and b.stats["retries"] >= 1


def test_a_canary_key_appears_in_no_file_the_run_writes(tmp_path):
    canary = "sk-canary-4f1d2e9b7c"
    port, log = _free_port(), tmp_path / "served.log"
    srv = _spawn_server(port, log, api_key=canary, fail_first=1, fail_status=429)
    try:
        out = subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", "run", "--backend", "openai/fake",
                              "--base-url", f"http://127.0.0.1:{port}/v1", "--no-progress", "--out",
                              str(tmp_path / "out"), "--backend-option", f"api_key={canary}", "--tokenizer", "offline",
                              "--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6",
                              "--policies", "R1,R1-rel,B3,ALL,EMPTY", "--variants", "PSP"],
                             env=_cli_env(tmp_path, CROSSPROFILE_API_KEY=canary), capture_output=True, text=True,
                             timeout=300)
        # a wrong key: the failure message must not carry the key either
        bad = subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", "run", "--backend", "openai/fake",
                              "--base-url", f"http://127.0.0.1:{port}/v1", "--no-progress",
                              "--out", str(tmp_path / "out-bad"), "--templates", "templates/dev/dev-hospital-01.yaml",
                              "--seeds", "1", "--budgets", "0.6", "--policies", "ALL", "--variants", "PSP",
                              "--tokenizer", "offline"],
                             env=_cli_env(tmp_path, CROSSPROFILE_API_KEY=canary + "-wrong"), capture_output=True,
                             text=True, timeout=300)
    finally:
        srv.kill()
        srv.wait()
    assert out.returncode == 0, out.stderr
    assert bad.returncode == 1
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "served.log"]
    assert any(p.name == "calls.sqlite" for p in files) and any(p.name == "run.json" for p in files)
    for p in files:
        assert canary.encode() not in p.read_bytes(), p
    for text in (out.stdout, out.stderr, bad.stdout, bad.stderr):
        assert canary not in text
    h = json.loads((tmp_path / "out/run.json").read_text())
    assert h["config"]["backend_options"]["api_key"] == "***"


def test_deepseek_preset_sends_temperature_zero_and_thinking_off(server, tmp_path, monkeypatch):
    fake, url = server(keep_bodies=True, api_key="ds-key", served_model="deepseek-flash")
    monkeypatch.setenv("DEEPSEEK_BASE_URL", url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", "ds-key")
    monkeypatch.delenv("CROSSPROFILE_BASE_URL", raising=False)
    monkeypatch.delenv("CROSSPROFILE_API_KEY", raising=False)
    b = get_backend("deepseek/deepseek-flash", cache=tmp_path / "c", tokenizer="offline", **FAST)
    df = run_grid(RunConfig(**{**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"], "policies": ["ALL"]}), b)
    assert (df.error == "").all() and (df.backend == "deepseek/deepseek-flash").all()
    path, auth, body = fake.bodies[0]
    assert path.endswith("/chat/completions") and auth == "Bearer ds-key"
    assert body["temperature"] == 0 and body["thinking"] == {"type": "disabled"} and body["model"] == "deepseek-flash"
    # the paper's greedy settings as OpenAI fields only (no llama.cpp / vLLM penalty fields to DeepSeek)
    assert body["top_p"] == 1 and body["frequency_penalty"] == 0 and body["presence_penalty"] == 0
    assert "repeat_penalty" not in body and "repetition_penalty" not in body
    with pytest.raises(ValueError, match="decision_mode 'score'"):
        get_backend("deepseek/deepseek-flash", decision_mode="score", cache=":memory:")


def test_grammar_and_score_modes_over_http(server, tmp_path):
    fake, url = server(keep_bodies=True)
    b = _backend(url, tmp_path, decision_mode="grammar")
    df = run_grid(RunConfig(**{**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"], "policies": ["ALL"]}), b)
    assert (df.error == "").all() and (df.decision_mode == "grammar").all()
    assert all('"\\nDecision: " choice' in body["grammar"] for _, _, body in fake.bodies)
    with pytest.raises(ValueError, match="chat_template"):
        _backend(url, tmp_path, decision_mode="score")
    b = _backend(url, tmp_path, decision_mode="score", chat_template="chatml")
    df = run_grid(RunConfig(**{**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"], "policies": ["ALL"]}), b)
    assert (df.error == "").all() and not df.invalid.any() and df.letter_logprobs.str.startswith("{").all()
    path, _, body = fake.bodies[-1]
    assert path.endswith("/v1/completions") and body["prompt"].endswith("<|im_start|>assistant\nDecision:")
    assert body["max_tokens"] == 1 and body["logprobs"] == 20


def test_the_constraint_goes_in_the_fields_the_servers_kind_understands(server, tmp_path):
    # what GET /v1/models says owns the model picks the fields (grammar_style=auto); an unknown server gets both
    # (above); an explicit style is sent as given
    one = {**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"], "policies": ["ALL", "R1-rel"]}
    for owner, style, sent, not_sent in (("vllm", None, "structured_outputs", "grammar"),
                                         ("llamacpp", None, "grammar", "structured_outputs"),
                                         ("vllm", "gbnf", "grammar", "structured_outputs")):
        fake, url = server(keep_bodies=True, owned_by=owner)
        kw = {"grammar_style": style} if style else {}
        b = _backend(url, tmp_path / f"{owner}-{style}", decision_mode="grammar", tokenizer="offline", **kw)
        assert b.style() == (style or {"vllm": "vllm", "llamacpp": "gbnf"}[owner])
        df = run_grid(RunConfig(**one), b)
        assert (df.error == "").all()
        bodies = [body for _, _, body in fake.bodies]
        assert bodies and all(sent in body and not_sent not in body for body in bodies), (owner, style)
        rel = [body for body in bodies if "relevant" in json.dumps(body.get("messages", ""))]
        key = "structured_outputs" if sent == "structured_outputs" else "grammar"
        assert rel and all(("json" in body[key]) if key == "structured_outputs" else ("relevant" in body[key])
                           for body in rel)  # the relevance filter's JSON is constrained the same way


def test_an_answer_that_breaks_its_constraint_is_never_an_answer_and_stops_the_run(server, tmp_path, capsys):
    # a server that ignores the constraint answers free text: in grammar mode that is an error row, and the third
    # such answer stops the run naming the style to pass; nothing is cached
    fake, url = server(chat_text="I would pick the second one.", owned_by="vllm")
    out = tmp_path / "out"
    rc = main(["run", "--backend", "openai/fake", "--base-url", url, "--decision-mode", "grammar", "--out", str(out),
               "--no-progress", "--cache", str(tmp_path / "c"), "--tokenizer", "offline", "--backend-option",
               "retry_wait=0.01", "--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets",
               "0.6", "--variants", "PSP,SPS", "--policies", "ALL,EMPTY"])
    err = capsys.readouterr().err
    assert rc == 1 and "did not honour the output constraint: 3 answers broke it" in err, err
    assert "The server is vllm and was sent grammar_style=vllm" in err and "Traceback" not in err
    assert not (out / "results.parquet").exists()
    assert CallCache(tmp_path / "c").calls_timeline("openai", "fake") == []  # no broken answer was cached
    # the near miss: the same free text in generate mode is an ordinary unparsable answer (retried, then invalid)
    b = _backend(url, tmp_path / "gen", decision_mode="generate", tokenizer="offline")
    df = run_grid(RunConfig(**{**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"], "policies": ["ALL"]}), b)
    assert df.invalid.all() and (df.error == "").all() and df.format_retry.all()
    # a cut-off JSON answer (finish_reason length) is not the server's fault: not counted against the constraint
    from crossprofile_lib.backends.base import ChatRequest
    g = _backend(url, tmp_path / "g", decision_mode="grammar", tokenizer="offline")
    r = ChatRequest(({"role": "user", "content": "x"},), json_schema={"type": "object"})
    assert g._honoured(r, '{"relevant": [1,', "length") and not g._honoured(r, '{"relevant": [1,', "stop")
    assert not g._honoured(r, 'The relevant facts are', "length")  # free text cut off: the constraint was ignored
    d = ChatRequest(({"role": "user", "content": "x"},), choices=("A", "B"))
    assert g._honoured(d, "Because.\nDecision: B", "stop") and not g._honoured(d, "Because.\nDecision: C", "stop")
    assert not g._honoured(d, "I would pick", "length")  # max_tokens 512 fits the constraint: free text it is
    short = ChatRequest(d.messages, choices=("A", "B"), max_tokens=40)
    assert g._honoured(short, "Because the first", "length")  # 40 tokens cannot fit 400 characters of reasons
    assert not g._honoured(d, "Because.\n\nDecision: B", "stop")  # one paragraph, as the grammar says


def test_a_letter_outside_the_top_log_probabilities_is_named_not_dropped(server, tmp_path, capsys):
    # a llama.cpp-style server returns its top 20; here C is never among them: C counts as -inf, and the row and the
    # run's summary say so (on vLLM every letter's own log-probability is asked for: tests/test_vllm_real.py)
    fake, url = server(top_letters="AB", owned_by="llamacpp")
    out = tmp_path / "out"
    rc = main(["run", "--backend", "openai/fake", "--base-url", url, "--decision-mode", "score", "--chat-template",
               "chatml", "--out", str(out), "--no-progress", "--cache", str(tmp_path / "c"), "--tokenizer", "offline",
               "--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6", "--variants",
               "PSP,SPS", "--policies", "ALL,EMPTY,R1"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    df = pd.read_parquet(out / "results.parquet")
    assert (df.letters_missing == "C").all() and (df.decision_letter != "C").all()
    assert all(set(json.loads(x)) == {"A", "B"} for x in df.letter_logprobs)
    assert f"score mode: {len(df)} decisions had option letters outside" in cap.out
    # every letter present: nothing named
    fake2, url2 = server()
    b = _backend(url2, tmp_path / "c2", decision_mode="score", chat_template="chatml", tokenizer="offline")
    df2 = run_grid(RunConfig(**{**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"], "policies": ["ALL"]}), b)
    assert (df2.letters_missing == "").all() and "letters_missing" not in b.stats


def test_a_new_cache_says_nothing_of_earlier_versions(server, tmp_path, capsys):
    # the notice was printed by every run's second batch on a brand-new cache (this run's own entries carry a base
    # URL); it is said only when the cache holds this run's calls under an earlier version's key
    fake, url = server()
    b = _backend(url, tmp_path, tokenizer="offline")
    run_grid(RunConfig(**{**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"]}), b)
    b2 = _backend(url, tmp_path, tokenizer="offline")  # the same cache, a second run of a wider grid
    two = ["templates/dev/dev-hospital-01.yaml", "templates/dev/dev-bus-route-01.yaml"]
    run_grid(RunConfig(**{**GRID, "templates": two}), b2)
    assert "earlier versions" not in capsys.readouterr().err and b2.stats["calls"] > 0


# --- a dead server: retry waves and the circuit breaker (issue 14.6) ---------------------------

ONE = ["--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6", "--policies", "ALL",
       "--variants", "PSP", "--tokenizer", "offline"]


def _closed_port() -> int:
    """A port on 127.0.0.1 that refuses connections (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _cli(args, tmp_path, **env):
    return subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", "run", "--backend", "openai/fake"] + args,
                          env=_cli_env(tmp_path, **env), capture_output=True, text=True, timeout=300)


def test_a_dead_server_stops_the_run_in_seconds_naming_the_url(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    # no hang: _cli's subprocess timeout; how fast it stops is the circuit breaker's count, checked below
    r = _cli(["--base-url", url, "--no-progress", "--out", str(tmp_path / "out")] + CLI_GRID, tmp_path)
    assert r.returncode == 1, r.stderr
    assert f"no server answered at {url}" in r.stderr and "failed to connect" in r.stderr
    assert "circuit_breaker=8" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out/results.parquet").exists() and not (tmp_path / "out/.crossprofile.lock").exists()


def test_retry_waves_are_shown_and_the_breaker_can_be_turned_off(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    r = _cli(["--base-url", url, "--no-progress", "--out", str(tmp_path / "out"), "--max-retries", "2",
              "--backend-option", "circuit_breaker=0", "--backend-option", "retry_wait=0.01"] + ONE, tmp_path)
    assert r.returncode == 1 and "decisions failed after their retries" in r.stderr
    assert f"retrying 1 call (wave 1/2; last: APIConnectionError) at {url}" in r.stderr
    assert "(wave 2/2" in r.stderr
    assert read_results(tmp_path / "out").error.str.contains("APIConnectionError").all()


def test_retry_waves_in_the_progress_bar(server, tmp_path, capsys):
    fake, url = server(fail_first=2, fail_status=503)
    b = _backend(url, tmp_path, max_retries=3, progress=True)
    df = run_grid(RunConfig(**{**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"], "policies": ["ALL"]}), b)
    assert (df.error == "").all()
    err = capsys.readouterr().err
    assert "retrying 1 call (wave 1/3; last: InternalServerError)" in err and "(wave 2/3" in err


def test_the_breaker_keeps_finished_calls_and_spares_a_live_server(server, tmp_path):
    port, log = _free_port(), tmp_path / "served.log"
    url = f"http://127.0.0.1:{port}/v1"
    srv = _spawn_server(port, log)
    try:
        b = _backend(url, tmp_path)
        run_grid(RunConfig(**{**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"]}), b)
    finally:
        srv.kill()
        srv.wait()
    kept = len(b.cache)
    assert kept > 0
    # same server, now gone: the finished calls are answered from the cache, the new ones trip the breaker
    dead = _backend(url, tmp_path)
    from crossprofile_lib.backends.openai_compat import ServerUnreachable
    with pytest.raises(ServerUnreachable, match=f"no server answered at {url}"):
        run_grid(RunConfig(**GRID), dead)
    assert dead.stats["cached"] >= kept and len(dead.cache) == kept
    # one dead URL beside a live one never trips it (the live one answers)
    fake, live = server()
    mixed = get_backend("openai/fake", base_url=f"http://127.0.0.1:{_closed_port()}/v1,{live}",
                        cache=tmp_path / "c3", concurrency=16, circuit_breaker=2, tokenizer="offline", **FAST)
    assert (run_grid(RunConfig(**GRID), mixed).error == "").all()


# --- secrets in URLs (issue 14.7) ----------------------------------------------------------------

def test_a_canary_key_in_the_base_url_appears_in_no_file_or_output(tmp_path):
    canary = "sk-urlcanary-81c3f0"
    port, log = _free_port(), tmp_path / "served.log"
    srv = _spawn_server(port, log, fail_first=1, fail_status=429)
    try:
        ok = _cli(["--base-url", f"http://user:{canary}@127.0.0.1:{port}/v1", "--progress",
                   "--out", str(tmp_path / "out")] + ONE, tmp_path)
        dead = _cli(["--base-url", f"http://127.0.0.1:{_closed_port()}/v1?api_key={canary}&region=eu", "--progress",
                     "--out", str(tmp_path / "out-dead")] + CLI_GRID, tmp_path)
    finally:
        srv.kill()
        srv.wait()
    assert ok.returncode == 0, ok.stderr
    assert dead.returncode == 1 and "api_key=***&region=eu" in dead.stderr
    h = json.loads((tmp_path / "out/run.json").read_text())
    assert h["config"]["backend_options"]["base_url"] == f"http://***@127.0.0.1:{port}/v1"
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "served.log"]
    assert any(p.name == "calls.sqlite" for p in files)
    for p in files:
        assert canary.encode() not in p.read_bytes(), p
    for text in (ok.stdout, ok.stderr, dead.stdout, dead.stderr):
        assert canary not in text
    import sqlite3
    urls = {u for (u,) in sqlite3.connect(tmp_path / "cache/calls.sqlite").execute("SELECT base_url FROM calls")}
    assert urls == {f"http://***@127.0.0.1:{port}/v1"}


# --- the served model's tokenizer prices budgets (issue 13.6) ------------------------------------

BUDGET_COLUMNS = ["t_all", "budget_tokens", "memory_tokens", "n_kept", "memory_sha"]
TOK_GRID = {**GRID, "templates": ["templates/dev/dev-hospital-01.yaml", "templates/dev/dev-bus-route-01.yaml"],
            "budgets": ["0.4", "0.6", "128t"]}


def _ledger_with(tok):
    b = get_backend("ledger")
    b.tokenizer = tok
    return b


@pytest.mark.parametrize("kind", ["vllm", "llama.cpp", "llama-cpp-python"])
def test_budgets_use_the_servers_tokenize_endpoint(server, tmp_path, kind, capsys):
    fake, url = server(tokenize=kind)
    b = _backend(url, tmp_path)
    assert b.tokenizer.name == f"server:{kind}:fake"
    assert "budgets use the served model's tokenizer" in capsys.readouterr().err
    df, h = run_to_dir(RunConfig(backend="openai/fake", **TOK_GRID), tmp_path / "out", backend=b)
    assert (df.tokenizer == f"server:{kind}:fake").all() and h["tokenizer"] == f"server:{kind}:fake"
    assert h["tokenizer_source"] == b.tokenizer_source and "tokenize" in h["tokenizer_source"]
    ref = run_grid(RunConfig(**TOK_GRID), _ledger_with(F.FakeTokenizer()))
    assert df[BUDGET_COLUMNS].equals(ref[BUDGET_COLUMNS])  # the server's counts, BOS removed
    off = run_grid(RunConfig(**TOK_GRID), get_backend("ledger"))
    assert not df["budget_tokens"].equals(off["budget_tokens"])  # and not the offline approximation
    assert fake.tokenized > 0


def test_no_tokenize_endpoint_is_refused_unless_the_fallback_is_asked_for(server, tmp_path, capsys):
    fake, url = server()
    with pytest.raises(ValueError, match="budgets are never changed silently.*--tokenizer-fallback offline"):
        _backend(url, tmp_path, tokenizer_fallback="error")
    b = _backend(url, tmp_path, tokenizer_fallback="offline")  # asked for: the approximation, said and recorded
    assert b.tokenizer.name == "offline-bpe-approx-v1" and "--tokenizer-fallback offline" in b.tokenizer_source
    err = capsys.readouterr().err
    assert "budgets use the offline approximation" in err and "/extras/tokenize" in err and "/tokenize" in err
    with pytest.raises(ValueError, match="--tokenizer server, but .*no tokenize endpoint answered"):
        _backend(url, tmp_path, tokenizer="server")
    assert _backend(url, tmp_path, tokenizer="offline").tokenizer.name == "offline-bpe-approx-v1"


def test_a_local_tokenizer_json_prices_budgets_without_probing(server, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    from crossprofile_lib.task.tokenizer import HFTokenizer
    words = sorted({w for t in ("templates/dev/dev-hospital-01.yaml", "templates/dev/dev-bus-route-01.yaml")
                    for w in Path(t).read_text().replace("\n", " ").split()})
    tok = tokenizers.Tokenizer(WordLevel({w: i for i, w in enumerate(["[UNK]"] + words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    (tmp_path / "mytok").mkdir()
    tok.save(str(tmp_path / "mytok/tokenizer.json"))
    fake, url = server(tokenize="vllm")
    b = _backend(url, tmp_path, tokenizer=str(tmp_path / "mytok/tokenizer.json"))
    assert b.tokenizer.name == "hf:mytok" and fake.received == 0  # the file wins; the server is not asked
    via = run_grid(RunConfig(**TOK_GRID), b)
    ref = run_grid(RunConfig(**TOK_GRID), _ledger_with(HFTokenizer(tmp_path / "mytok")))
    assert via[BUDGET_COLUMNS].equals(ref[BUDGET_COLUMNS]) and (via.tokenizer == "hf:mytok").all()


@pytest.mark.llm
@pytest.mark.slow
def test_llama_cpp_server_tokenizer_prices_budgets_like_the_embedded_model(tmp_path):
    """A real llama.cpp server (tests/llama_server.py) with the SmolLM2 GGUF: its tokenize endpoint is found,
    recorded, and prices every budget exactly as the embedded model's own tokenizer does."""
    import urllib.request

    import llama_server as real_server

    from crossprofile_lib.backends.llamacpp import model_path
    from crossprofile_lib.task.llama_engine import installed
    from crossprofile_lib.task.tokenizer import GGUFTokenizer
    if real_server.KIND is None or not installed():
        pytest.skip(real_server.MISSING)
    gguf = str(model_path("smollm2-135m"))
    port = _free_port()
    log = open(tmp_path / "server.log", "w")
    srv = subprocess.Popen(real_server.command(gguf, port), stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        t0 = time.time()
        while True:
            try:
                urllib.request.urlopen(f"{url}/models", timeout=2).read()
                break
            except OSError:
                assert srv.poll() is None, f"the {real_server.KIND} server stopped before it listened"
                assert time.time() - t0 < 600, f"the {real_server.KIND} server did not listen within 10 minutes"
                time.sleep(0.3)
        b = get_backend("openai/smollm2-135m", base_url=url, decision_mode="score", chat_template=f"gguf:{gguf}",
                        concurrency=1, cache=tmp_path / "cache")
        name = f"server:{real_server.TOKENIZE_KIND}:smollm2-135m"
        assert b.tokenizer.name == name
        cfg = RunConfig(**{**TOK_GRID, "budgets": ["0.4", "0.6", "0.8", "128t"], "policies": ["R1", "B4", "ALL"],
                           "variants": ["PSP", "SPS"]})
        via = run_grid(cfg, _ledger_with(b.tokenizer))   # every budget priced by the server
        ref = run_grid(cfg, _ledger_with(GGUFTokenizer(gguf)))  # ... and by the embedded model's tokenizer
        assert via[BUDGET_COLUMNS].equals(ref[BUDGET_COLUMNS])
        assert not via["budget_tokens"].equals(run_grid(cfg, get_backend("ledger"))["budget_tokens"])
        one = RunConfig(backend="openai/smollm2-135m", templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0],
                        budgets=["0.6"], policies=["R1"], variants=["PSP"])
        df, h = run_to_dir(one, tmp_path / "out", backend=b)
        assert (df.error == "").all() and (df.tokenizer == name).all()
        assert json.loads((tmp_path / "out/run.json").read_text())["tokenizer"] == name
    finally:
        srv.terminate()
        srv.wait(20)
        log.close()


def test_deepseek_default_model_and_retired_ids():
    # the default is DeepSeek-V4.1-Flash's id; deepseek-chat / deepseek-reasoner were retired (README)
    from crossprofile_lib.backends.openai_compat import RetiredModelWarning
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a current id warns about nothing
        assert get_backend("deepseek", cache=":memory:", tokenizer="offline").model == "deepseek-flash"
        get_backend("deepseek/deepseek-v4-pro", cache=":memory:", tokenizer="offline")
    for old in ("deepseek-chat", "deepseek-reasoner"):
        with pytest.warns(RetiredModelWarning, match=f"retired the model id '{old}' after 2026-07-24"):
            get_backend(f"deepseek/{old}", cache=":memory:", tokenizer="offline")


def test_run_coroutine_also_inside_a_running_event_loop():
    """A notebook cell runs inside an event loop: the batch then runs in a thread of its own, its result or
    exception handed back."""
    import asyncio

    from crossprofile_lib.backends.http_faults import run_coroutine

    async def value():
        return 7

    async def fails():
        raise KeyError("lost")

    async def cell():
        assert run_coroutine(value()) == 7
        with pytest.raises(KeyError, match="lost"):
            run_coroutine(fails())
        return "done"
    assert run_coroutine(value()) == 7
    assert asyncio.run(cell()) == "done"
