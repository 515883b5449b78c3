"""Issue 23's faults, each a real process against real files and a real local server:

* no poisoned cache: a 200 answer with empty content is retried, never cached, an error row when it
  persists (``stats`` then refuses the run), and the rerun after the server recovers asks again;
* connection resets are transient (the breaker trips only on connect failures); ``Retry-After`` is
  honoured;
* a full disk (``RLIMIT_FSIZE``: writes fail with ``EFBIG``; a full tmpfs where this process may
  mount) is named as such -- never as a damaged cache -- and loses nothing already written;
* no command destroys existing work without ``--overwrite``; written files honour the umask;
* no key on disk: the lock file of a killed run, ``run.json`` and the cache hold no key given in
  an option, in the base URL's userinfo or in any query value.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from crossprofile_lib.backends.base import ChatRequest, ChatResult
from crossprofile_lib.backends.cache import FILE_NAME, CallCache, blank_answer
from crossprofile_lib.safety.outputs import LOCK_NAME, WouldDestroy, atomic_write, check_output_file

sys.path.insert(0, str(Path(__file__).parent))
from test_backend_openai import _free_port, _lines, _spawn_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
def _grid(seeds="0"):
    return ["--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", seeds, "--budgets", "0.6", "--policies",
            "R1,ALL", "--variants", "PSP"]


ONE = _grid()
KEY = "plainTestCanary7781q"
#: ``--tokenizer offline``: the fake server has no tokenize endpoint, and an HTTP run never silently
#: prices budgets with another tokenizer (issue 28); these tests are about faults, not pricing
FAST = ["--backend-option", "retry_wait=0.02", "--backend-option", "retry_wait_max=0.1", "--max-retries", "3",
        "--tokenizer", "offline"]


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CROSSPROFILE_", "OPENAI_"))}
    return {**env, "CROSSPROFILE_CACHE": str(tmp_path / "cache"), **extra}


def _cli(args, tmp_path, fsize=None, timeout=300, **env):
    def limit():
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    return subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", *map(str, args)], cwd=ROOT,
                          env=_env(tmp_path, **env), capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit)


def _http(port, out, *extra, grid=ONE):
    return ["run", "--backend", "openai/fake", "--base-url", f"http://127.0.0.1:{port}/v1", "--no-progress",
            "--out", out, *grid, *FAST, *extra]


#: ten templates: enough calls to fill a small disk
DEV = ["--templates", "templates/dev", *ONE[2:]]


def _blank_entries(cache_file) -> int:
    db = sqlite3.connect(cache_file)
    try:
        return db.execute("SELECT COUNT(*) FROM calls WHERE trim(text) = '' AND choice_logprobs IS NULL").fetchone()[0]
    finally:
        db.close()


# --- no poisoned cache -------------------------------------------------------------------------------------

def test_empty_answers_are_retried_never_cached_and_refused_by_stats(tmp_path):
    port, log = _free_port(), tmp_path / "served.log"
    srv = _spawn_server(port, log, empty_first=1)  # every request: one blank answer, then a real one
    try:
        r = _cli(_http(port, tmp_path / "once"), tmp_path)
    finally:
        srv.kill()
        srv.wait()
    assert r.returncode == 0, r.stderr
    df = pd.read_parquet(tmp_path / "once" / "results.parquet")
    assert (df.error == "").all() and not df.invalid.any() and (df.call_retries >= 1).all()
    # a server that answers blank every time: error rows (exit 1), nothing blank cached, stats refuses
    port2, log2 = _free_port(), tmp_path / "served2.log"
    srv = _spawn_server(port2, log2, empty_first=10_000)
    try:
        r = _cli(_http(port2, tmp_path / "always"), tmp_path, CROSSPROFILE_CACHE=str(tmp_path / "c2"))
    finally:
        srv.kill()
        srv.wait()
    assert r.returncode == 1 and "decisions failed after their retries" in r.stderr, r.stderr
    df = pd.read_parquet(tmp_path / "always" / "results.parquet")
    assert (df.error.str.contains("empty content")).all()
    assert _blank_entries(tmp_path / "c2" / FILE_NAME) == 0
    s = _cli(["stats", tmp_path / "always", "--resamples", "20", "--fit-resamples", "0", "--no-regressions"], tmp_path)
    assert s.returncode == 1 and "error" in s.stderr.lower() and "Traceback" not in s.stderr
    # the server recovers: the rerun asks again (nothing blank was cached) and is clean
    srv = _spawn_server(port2, log2)
    try:
        n0 = len(_lines(log2)) if log2.exists() else 0
        r = _cli(_http(port2, tmp_path / "always"), tmp_path, CROSSPROFILE_CACHE=str(tmp_path / "c2"))
    finally:
        srv.kill()
        srv.wait()
    assert r.returncode == 0, r.stderr
    assert len(_lines(log2)) - n0 >= 2  # the decisions were bought again, not read as blank answers
    df = pd.read_parquet(tmp_path / "always" / "results.parquet")
    assert (df.error == "").all() and not df.invalid.any()


def test_the_cache_never_stores_or_serves_a_blank_answer(tmp_path):
    c = CallCache(tmp_path)
    req = ChatRequest(({"role": "user", "content": "q"},))
    for text in ("", "  \n\t"):
        assert blank_answer(ChatResult(text=text))
        c.put("k" + str(len(text)), req, ChatResult(text=text), {"provider": "p", "model": "m"}, "generate")
    assert len(c) == 0
    assert not blank_answer(ChatResult(text="", choice_logprobs={}))  # score mode: no letter among the top
    # a blank entry written by an older version is not a cache hit
    c.put("old", req, ChatResult(text="Decision: A"), {"provider": "p", "model": "m"}, "generate")
    c._db.execute("UPDATE calls SET text = ' ' WHERE key = 'old'")
    assert c.get_many(["old"]) == {}


# --- resets and Retry-After ----------------------------------------------------------------------------------

def test_a_server_that_resets_once_per_request_does_not_trip_the_breaker(tmp_path):
    port, log = _free_port(), tmp_path / "served.log"
    srv = _spawn_server(port, log, reset_first=1)
    try:
        r = _cli(_http(port, tmp_path / "out", "--backend-option", "circuit_breaker=2"), tmp_path)
    finally:
        srv.kill()
        srv.wait()
    assert r.returncode == 0, r.stderr
    assert "no server answered" not in r.stderr
    df = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert (df.error == "").all() and (df.call_retries >= 1).all()


def test_a_closed_port_still_trips_the_breaker(tmp_path):
    s = __import__("socket").socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = _cli(_http(port, tmp_path / "out"), tmp_path, timeout=300)
    assert r.returncode == 1 and "no server answered" in r.stderr
    # stopped by the breaker at the 8th failed connection (counted, not timed), not after every call's retries
    assert "the first 8 attempts all failed to connect" in r.stderr and "circuit_breaker=8" in r.stderr, r.stderr


def test_retry_after_is_honoured(tmp_path):
    port, log = _free_port(), tmp_path / "served.log"
    srv = _spawn_server(port, log, fail_first=1, fail_status=429, retry_after=2, attempt_log=tmp_path / "attempts")
    try:
        r = _cli(_http(port, tmp_path / "out"), tmp_path)
    finally:
        srv.kill()
        srv.wait()
    assert r.returncode == 0, r.stderr
    times: dict = {}
    for line in (tmp_path / "attempts").read_text().splitlines():
        k, t = line.split()
        times.setdefault(k, []).append(float(t))
    gaps = [ts[1] - ts[0] for ts in times.values() if len(ts) > 1]
    assert gaps and min(gaps) >= 1.8, gaps  # the backoff alone waits at most 0.1 s here


# --- a full disk ------------------------------------------------------------------------------------------------

def test_a_write_that_fails_is_named_and_the_old_results_are_kept(tmp_path):
    out = tmp_path / "run"
    assert _cli(["run", "--out", out, *ONE], tmp_path).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    r = _cli(["run", "--out", out, *ONE], tmp_path, fsize=4096)  # same grid; results.parquet is larger
    assert r.returncode == 1 and "cannot write" in r.stderr and "EFBIG" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # nothing lost, no temp file
    r = _cli(["hiddenbench", "run", "--out", tmp_path / "hb", "--seeds", "0", "--policies", "R1,ALL", "--limit", "1"],
             tmp_path, fsize=2048)
    assert r.returncode == 1 and "cannot append to" in r.stderr and "EFBIG" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "[Errno" not in r.stderr


def test_a_full_disk_under_the_cache_is_not_called_damage(tmp_path):
    port, log = _free_port(), tmp_path / "served.log"
    srv = _spawn_server(port, log)
    try:
        r = _cli(_http(port, tmp_path / "out", "--cache", tmp_path / "c", grid=DEV), tmp_path, fsize=20_000)
    finally:
        srv.kill()
        srv.wait()
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "move the file aside" not in r.stderr and "not damaged" in r.stderr


def _can_mount() -> bool:
    if os.geteuid() != 0:
        return False
    d = tempfile.mkdtemp()
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d], capture_output=True).returncode == 0
    if ok:
        subprocess.run(["umount", d])
    os.rmdir(d)
    return ok


@pytest.mark.skipif(not _can_mount(), reason="needs permission to mount a tmpfs")
def test_a_really_full_or_read_only_file_system(tmp_path):
    full, ro = tmp_path / "full", tmp_path / "ro"
    full.mkdir()
    ro.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(full)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(ro)], check=True)
    port, log = _free_port(), tmp_path / "served.log"
    srv = _spawn_server(port, log)
    try:
        CallCache(ro / "c").close()
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        r = _cli(_http(port, tmp_path / "out", "--cache", full / "c", grid=DEV), tmp_path)
        assert r.returncode == 1 and "disk holding it is full" in r.stderr and "move the file aside" not in r.stderr, \
            r.stderr
        r = _cli(_http(port, tmp_path / "out2", "--cache", ro / "c"), tmp_path)
        assert r.returncode in (1, 2) and "read-only" in r.stderr and "move the file aside" not in r.stderr, r.stderr
        r = _cli(["run", "--out", ro / "out", *ONE], tmp_path)
        assert r.returncode == 2 and "argument --out" in r.stderr
    finally:
        srv.kill()
        srv.wait()
        subprocess.run(["umount", "-l", str(full)])
        subprocess.run(["umount", "-l", str(ro)])


# --- commands that would destroy work --------------------------------------------------------------------------------

def test_run_over_a_finished_run_of_another_grid_needs_overwrite(tmp_path):
    out = tmp_path / "run"
    assert _cli(["run", "--out", out, *ONE], tmp_path).returncode == 0
    before = (out / "results.parquet").read_bytes()
    r = _cli(["run", "--out", out, *_grid("1")], tmp_path)
    assert r.returncode == 2 and str(out) in r.stderr and "seeds 0 there, 1 now" in r.stderr and "--overwrite" in r.stderr
    assert (out / "results.parquet").read_bytes() == before
    assert _cli(["run", "--out", out, *ONE], tmp_path).returncode == 0  # the same grid: recomputed, identical
    assert pd.read_parquet(out / "results.parquet").equals(pd.read_parquet(__import__("io").BytesIO(before)))
    r = _cli(["run", "--out", out, *_grid("1"), "--overwrite"], tmp_path)
    assert r.returncode == 0 and pd.read_parquet(out / "results.parquet").seed.tolist() == [1, 1]


def test_two_kinds_of_run_never_share_a_folder_and_inputs_are_never_outputs(tmp_path):
    run, hb = tmp_path / "run", tmp_path / "hb"
    assert _cli(["run", "--out", run, *ONE], tmp_path).returncode == 0
    assert _cli(["hiddenbench", "run", "--out", hb, "--seeds", "0", "--policies", "R1", "--limit", "1"],
                tmp_path).returncode == 0
    snap = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    r = _cli(["hiddenbench", "run", "--out", run, "--seeds", "0", "--policies", "R1", "--limit", "1"], tmp_path)
    assert r.returncode == 2 and "holds a run" in r.stderr
    r = _cli(["run", "--out", hb, *ONE, "--overwrite"], tmp_path)
    assert r.returncode == 2 and "holds a hiddenbench run" in r.stderr
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "a.yaml").write_bytes((ROOT / ONE[1]).read_bytes())
    for out in (tpl, tpl / "sub"):
        r = _cli(["run", "--out", out, "--templates", tpl, *ONE[2:]], tmp_path)
        assert r.returncode == 2 and "that this command reads" in r.stderr, r.stderr
    assert not (tpl / "sub").exists() and sorted(p.name for p in tpl.iterdir()) == ["a.yaml"]
    snap_after = {p: p.read_bytes() for p in snap}
    assert snap_after == snap


def test_cache_export_never_writes_over_the_cache(tmp_path):
    c = CallCache(tmp_path / "c")
    c.put("k", ChatRequest(({"role": "user", "content": "q"},)), ChatResult(text="Decision: A"),
          {"provider": "p", "model": "m"}, "generate")
    c.close()
    f = tmp_path / "c" / FILE_NAME
    before = f.read_bytes()
    for out, extra in ((f, []), (f, ["--overwrite"]), (tmp_path / "c", []), (Path("/proc/x.jsonl"), [])):
        r = _cli(["cache", "export", tmp_path / "c", out, *extra], tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f.read_bytes() == before
    (tmp_path / "old.jsonl").write_text("an earlier export\n")
    r = _cli(["cache", "export", tmp_path / "c", tmp_path / "old.jsonl"], tmp_path)
    assert r.returncode == 2 and "--overwrite" in r.stderr and (tmp_path / "old.jsonl").read_text() == "an earlier export\n"
    assert _cli(["cache", "export", tmp_path / "c", tmp_path / "old.jsonl", "--overwrite"], tmp_path).returncode == 0
    with pytest.raises(WouldDestroy, match="is the file this command reads"):
        check_output_file(f, inputs=[f])


# --- files honour the umask ---------------------------------------------------------------------------------------

def test_atomic_writes_honour_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        with atomic_write(tmp_path / "a.txt") as tmp:
            tmp.write_text("x")
        assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o640
    finally:
        os.umask(old)
    r = _cli(["run", "--out", tmp_path / "run", *ONE], tmp_path)
    assert r.returncode == 0
    for name in ("results.parquet", "run.json"):
        mode = stat.S_IMODE((tmp_path / "run" / name).stat().st_mode)
        assert mode == 0o666 & ~old, (name, oct(mode))  # not mkstemp's 0600


# --- no key on disk -------------------------------------------------------------------------------------------------

def test_the_lock_of_a_killed_run_and_every_file_hold_no_key(tmp_path):
    port, log = _free_port(), tmp_path / "served.log"
    srv = _spawn_server(port, log, latency_s=0.3)
    out = tmp_path / "out"
    url = f"http://user:{KEY}@127.0.0.1:{port}/v1"
    cmd = [sys.executable, "-m", "crossprofile_lib.cli", "run", "--backend", "openai/fake", "--base-url", url,
           "--backend-option", f"api_key={KEY}", "--no-progress", "--out", str(out), "--templates", "templates/dev",
           "--seeds", "0", "--budgets", "0.6", "--policies", "R1,ALL", "--variants", "PSP", "--tokenizer", "offline"]
    try:
        p = subprocess.Popen(cmd, cwd=ROOT, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.time()
        while not ((out / LOCK_NAME).exists() and (out / LOCK_NAME).stat().st_size) and time.time() - t0 < 60:
            time.sleep(0.05)
        time.sleep(0.5)
        p.kill()
        p.wait()
        lock = (out / LOCK_NAME).read_text()
        assert KEY not in lock and "api_key=***" in lock and "http://***@127.0.0.1" in lock
        r = subprocess.run(cmd, cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and "took over a stale lock" in r.stderr and KEY not in r.stderr + r.stdout
        q = _cli(["run", "--backend", "openai/fake", "--base-url", f"http://127.0.0.1:{port}/v1?code={KEY}&api-version=1",
                  "--no-progress", "--out", tmp_path / "q", *ONE, *FAST], tmp_path)
        assert KEY not in q.stderr + q.stdout
    finally:
        srv.kill()
        srv.wait()
    header = json.loads((tmp_path / "q" / "run.json").read_text())
    assert header["config"]["backend_options"]["base_url"] == f"http://127.0.0.1:{port}/v1?code=***&api-version=1"
    for f in tmp_path.rglob("*"):
        if f.is_file() and not f.is_symlink():
            assert KEY.encode() not in f.read_bytes(), f
