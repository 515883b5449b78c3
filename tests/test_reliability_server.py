"""Issue 37 against a real local server: ``tests/fake_openai_server.py`` run as its own process, the
command line as another.

* a refused key (401 or 403) ends ``run`` and ``hiddenbench run`` with exit 1 before any result is
  written as an answer -- also where ``GET /v1/models`` lets the wrong key through (llama.cpp's server
  does) and only the completions refuse it;
* an empty, whitespace-only or invisible (zero-width) answer, and a score-mode answer with no
  log-probabilities, is never stored as a cached answer: the run records error rows (exit 1) and the
  rerun against a recovered server asks again.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVER = Path(__file__).with_name("fake_openai_server.py")
GRID = ["--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6", "--policies",
        "R1,ALL", "--variants", "PSP"]
FAST = ["--backend-option", "retry_wait=0.02", "--backend-option", "retry_wait_max=0.1", "--max-retries", "2",
        "--tokenizer", "offline", "--no-progress"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The fake server as a process: ``with Server(tmp_path, api_key="k") as url: ...``."""

    def __init__(self, tmp_path, **faults):
        self.port, self.log = _free_port(), Path(tmp_path) / f"served-{len(list(Path(tmp_path).glob('served-*')))}.log"
        self.cmd = [sys.executable, str(SERVER), "--port", str(self.port), "--log", str(self.log)]
        for k, v in faults.items():
            self.cmd += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])

    def __enter__(self) -> str:
        self.p = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert "fake OpenAI server" in self.p.stdout.readline()
        return f"http://127.0.0.1:{self.port}/v1"

    def __exit__(self, *exc):
        self.p.kill()
        self.p.wait()

    def answered(self) -> int:
        return len(self.log.read_text().split()) if self.log.exists() else 0


def _cli(args, tmp_path, key="wrong", **env_extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CROSSPROFILE_", "OPENAI_", "HIDDENBENCH"))}
    env.update(CROSSPROFILE_CACHE=str(tmp_path / "cache"), CROSSPROFILE_API_KEY=key, **env_extra)
    return subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def _answers_written(out: Path) -> list[str]:
    """The result tables and headers in ``out`` (an empty artefacts file is no answer)."""
    found = [p.name for p in out.glob("*.parquet")] + [p.name for p in out.glob("*run.json")]
    found += [str(p) for p in out.glob("artefacts/*.jsonl") if p.stat().st_size]
    return found


COMMANDS = {
    "run-generate": lambda url, out: ["run", "--backend", "openai/fake", "--base-url", url, "--out", out, *GRID, *FAST],
    "run-score": lambda url, out: ["run", "--backend", "openai/fake", "--base-url", url, "--out", out, *GRID, *FAST,
                                   "--decision-mode", "score", "--chat-template", "chatml"],
    "hiddenbench-controlled": lambda url, out: ["hiddenbench", "run", "--backend", "openai/fake", "--base-url", url,
                                                "--out", out, "--seeds", "0", "--limit", "1", *FAST],
    "hiddenbench-natural": lambda url, out: ["hiddenbench", "run", "--backend", "openai/fake", "--base-url", url,
                                             "--out", out, "--protocol", "natural", "--seeds", "0", "--limit", "1",
                                             "--ablations", "baseline", *FAST],
}


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_refused_key_ends_every_command_with_exit_1_before_any_answer(command, status, tmp_path):
    """``/v1/models`` lets the key through (``--models-open``); the completions refuse it."""
    out = tmp_path / "out"
    with Server(tmp_path, api_key="right", key_status=status, models_open=True) as url:
        r = _cli(COMMANDS[command](url, out), tmp_path)
    text = r.stderr + r.stdout
    assert r.returncode == 1, text[-3000:]
    assert f"HTTP {status}" in text and "Traceback" not in text, text[-3000:]
    assert "wrong" not in text.replace("a wrong or missing", "")  # the key itself is never shown
    assert _answers_written(out) == [], _answers_written(out)


def test_a_refused_key_on_the_models_probe_stops_before_any_call(tmp_path):
    with Server(tmp_path, api_key="right", key_status=403) as url:
        r = _cli(COMMANDS["run-generate"](url, tmp_path / "out"), tmp_path)
    assert r.returncode == 1 and "HTTP 403" in r.stderr and "Stopped before any call" in r.stderr, r.stderr
    assert _answers_written(tmp_path / "out") == []


def _blank_entries(cache_dir: Path) -> int:
    f = cache_dir / "calls.sqlite"
    if not f.exists():
        return 0
    db = sqlite3.connect(f)
    try:
        rows = db.execute("SELECT text, choice_logprobs FROM calls").fetchall()
    finally:
        db.close()
    import unicodedata
    return sum(1 for text, lp in rows
               if all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in text or "") and lp in (None, "{}"))


@pytest.mark.parametrize("mode, empty_text", [("generate", ""), ("generate", "\\n\\t "), ("generate", "\\u200b\\u200d"),
                                              ("score", " ")],
                         ids=["empty", "whitespace", "zero-width", "score-no-logprobs"])
def test_an_empty_answer_is_never_cached_and_the_rerun_asks_again(mode, empty_text, tmp_path):
    out = tmp_path / "out"
    argv = COMMANDS["run-score" if mode == "score" else "run-generate"]
    with Server(tmp_path, empty_first=10_000, empty_text=empty_text) as url:
        r = _cli(argv(url, out), tmp_path, key="k")
    assert r.returncode == 1 and "decisions failed after their retries" in r.stderr, r.stderr[-3000:]
    df = pd.read_parquet(out / "results.parquet")
    assert (df.error.str.contains("empty")).all(), df.error.tolist()
    assert _blank_entries(tmp_path / "cache") == 0
    # the server recovers: every decision is asked again (none was read back from the cache as an answer)
    srv = Server(tmp_path)
    with srv as url:
        r = _cli(argv(url, out), tmp_path, key="k")
    assert r.returncode == 0, r.stderr[-3000:]
    df = pd.read_parquet(out / "results.parquet")
    assert (df.error == "").all() and srv.answered() >= len(df)
    assert json.loads((out / "run.json").read_text())["errors"] == 0
