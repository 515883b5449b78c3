"""Issue 51, kinds 2, 5 (the server routes) and 7 (invalid UTF-8): every case runs ``crossprofile run`` in its own
process against the project's fake OpenAI-compatible server (``tests/fake_openai_server.py``, in this process, so
its counters can be read). Nothing here reads a clock: the server counts attempts, bytes and hang-ups, and the
timeouts given to ``subprocess.run`` are hang guards only.

* kind 2: a server that drips its answer a byte at a time (each read well within the per-read timeout) meets the
  whole-request deadline ``--timeout`` (chat) and ``--tokenize-timeout`` (the tokenize probe); a ``Retry-After``
  over the cap is an error that says so, without waiting; a wait over a few seconds is announced;
* kind 5: a server echoing the key in a 200 answer, a key in the URL path, keys in ``--request-field`` values and
  headers never reach a file the suite writes or the console, and the echoing answer is never cached;
* kind 7: an answer that is not UTF-8 is retried like a truncated body.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from fake_openai_server import start

ROOT = Path(__file__).resolve().parents[1]
ONE_CALL = ["--policies", "ALL", "--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--variants",
            "PSP", "--budgets", "0.6"]
KEY = "plainKey-4711-quiet"   # not key-shaped: only the rule "a key handed over is masked everywhere" catches it
GUARD = 600                   # a hang guard only


@pytest.fixture
def server():
    servers = []

    def make(**faults):
        fake, url, stop = start(**faults)
        servers.append(stop)
        return fake, url
    yield make
    for stop in servers:
        stop()


def _run(tmp_path, url, *extra, out="out", key=KEY):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSPROFILE_") and "API_KEY" not in k}
    env.update(CROSSPROFILE_CACHE=str(tmp_path / "cache"), CROSSPROFILE_API_KEY=key)
    args = ["run", "--backend", "openai/fake", "--base-url", url, "--no-progress", "--out", str(tmp_path / out),
            *map(str, extra)]
    if "--tokenizer" not in extra:
        args += ["--tokenizer", "offline"]
    if "--policies" not in extra:
        args += ONE_CALL
    return subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=GUARD)


def _leaks(tmp_path, r, *secrets) -> list[str]:
    found = [f"console: {s}" for s in secrets if s in r.stdout + r.stderr]
    for p in tmp_path.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            found += [f"{p}: {s}" for s in secrets if s.encode() in data]
    return found


# --- kind 2: slow servers --------------------------------------------------------------------------------------

def test_a_server_dripping_its_answer_meets_the_whole_request_deadline(server, tmp_path):
    """Before: --timeout was per read, so an answer sent a byte every 0.05 s (about 20 s for the whole of it)
    kept the call alive and the run ended 0. Now: no complete answer within --timeout 1 is an error row (exit 1)
    and the client hangs up."""
    fake, url = server(drip_s=0.05)
    r = _run(tmp_path, url, "--timeout", 1, "--max-retries", 0)
    assert r.returncode == 1, r.stderr[-2000:]
    df = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert len(df) == 1 and "DeadlineExceeded" in df["error"].iloc[0] and "whole request" in df["error"].iloc[0]
    assert fake.hung_up == 1 and fake.answered == 0 and sum(fake.attempts.values()) == 1
    assert 0 < fake.dripped < 400  # the answer was cut off: its status line had started, its body never ended


def test_a_dripping_tokenize_endpoint_meets_the_tokenize_deadline(server, tmp_path):
    """Before: the tokenize probe waited for every dripped byte, then priced every budget the same way."""
    fake, url = server(tokenize="vllm", drip_s=0.05, drip_paths=("/tokenize",))
    r = _run(tmp_path, url, "--tokenizer", "auto", "--tokenize-timeout", 1)
    assert r.returncode == 1 and "cannot be reached" in r.stderr and "TimeoutError" in r.stderr, r.stderr[-2000:]
    assert fake.hung_up >= 1 and sum(fake.attempts.values()) == 0  # cut off; no decision was priced or sent


def test_a_retry_after_over_the_cap_is_an_error_that_says_so(server, tmp_path):
    """Before: Retry-After: 86400 was waited for (capped at 600 s) in silence. Now the call fails at once."""
    fake, url = server(fail_first=1, fail_status=429, retry_after=86400)
    r = _run(tmp_path, url, "--backend-option", "retry_after_max=30")
    assert r.returncode == 1, r.stderr[-2000:]
    err = pd.read_parquet(tmp_path / "out" / "results.parquet")["error"].iloc[0]
    assert "RetryAfterTooLong" in err and "asking to wait 86400 s" in err and "cap of 30 s" in err, err
    assert list(fake.attempts.values()) == [1]  # not retried


def test_a_long_wait_under_the_cap_is_announced(server, tmp_path):
    """The near miss: Retry-After 6 (under the cap, over the announcement threshold of 5 s) is honoured, and the
    console says how long and why; the answer after it is used."""
    fake, url = server(fail_first=1, fail_status=429, retry_after=6)
    r = _run(tmp_path, url)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "waiting 6 s before retry 1 of 6: the server asked for it (HTTP 429, Retry-After 6 s)" in r.stderr
    assert list(fake.attempts.values()) == [2]


# --- kind 5: keys through servers, URLs and request fields ---------------------------------------------------------

def test_a_server_echoing_the_key_gets_it_neither_cached_nor_written(server, tmp_path):
    """Before: the 200 answer quoting the key was cached (and its text kept). Now: no file and no message holds
    it, and the answer is not cached (the rerun asks the server again)."""
    fake, url = server(echo_key=True)
    r = _run(tmp_path, url)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _leaks(tmp_path, r, KEY) == []
    with sqlite3.connect(tmp_path / "cache" / "calls.sqlite") as db:
        assert db.execute("SELECT count(*) FROM calls").fetchone()[0] == 0
    answered = fake.answered
    r = _run(tmp_path, url, out="again")
    assert r.returncode == 0 and fake.answered == answered + 1 and _leaks(tmp_path, r, KEY) == []


@pytest.mark.parametrize("segment", [KEY, "Zq8Xw3Lp0Vn7Rt2Ys5Ku"])
def test_a_key_in_the_url_path_reaches_no_file(segment, server, tmp_path):
    """Before: a key in the base URL's path landed in the call cache and run.json. The environment's key is
    masked wherever it appears; a random-looking path segment (20+ letters and digits) is masked too."""
    fake, url = server()
    r = _run(tmp_path, url.removesuffix("/v1") + f"/{segment}/v1")
    assert r.returncode == 0 and fake.answered == 1, r.stderr[-2000:]
    assert _leaks(tmp_path, r, segment) == []


def test_keys_in_request_fields_and_headers_reach_no_file(server, tmp_path):
    """Before: every --request-field was recorded in run.json as given."""
    k2, k3 = "fieldSecret-0042-field", "headerSecret-0043-head"
    fake, url = server(keep_bodies=True)
    r = _run(tmp_path, url, "--request-field", f"api_key={k2}", "--request-field",
             f'extra_headers={{"X-Api-Key": "{k3}"}}', "--request-field", f"user={KEY}")
    assert r.returncode == 0, r.stderr[-2000:]
    body = fake.bodies[0][2]
    assert body["api_key"] == k2 and body["user"] == KEY  # sent to the server, as asked
    assert _leaks(tmp_path, r, KEY, k2, k3) == []
    assert "***" in (tmp_path / "out" / "run.json").read_text()


# --- kind 7: invalid UTF-8 ----------------------------------------------------------------------------------------

def test_an_answer_that_is_not_utf8_is_retried(server, tmp_path):
    """Before: the first answer's 0xff byte made the call fail at once (an error row, exit 1)."""
    fake, url = server(bad_utf8_first=1)
    r = _run(tmp_path, url, "--backend-option", "retry_wait=0")
    assert r.returncode == 0 and "UnicodeDecodeError" in r.stderr, r.stderr[-2000:]
    assert list(fake.attempts.values()) == [2]
    assert (pd.read_parquet(tmp_path / "out" / "results.parquet")["error"] == "").all()
