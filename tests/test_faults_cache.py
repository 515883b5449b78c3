"""Fault injection: eleven ways a call-cache file goes bad. Each one is a named error (the file,
the rule, how to recover) before any call is made -- never a traceback, never a silent fresh
cache that re-buys every call. Real files, real SQLite, a real second process for the lock."""

import json
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest
from scripted_llm import Scripted

from crossprofile_lib.backends.base import ChatRequest
from crossprofile_lib.backends.cache import FILE_NAME, CacheError, CallCache, check_cache, export_cache, vacuum_cache

N = 300


def _requests(n=N):
    return [ChatRequest(({"role": "user", "content": f"question {i}"},), purpose="decision") for i in range(n)]


def _answer(r):
    return f"Reasoning {'x' * 900} for {r.messages[0]['content']}.\nDecision: A"


@pytest.fixture
def healthy(tmp_path):
    folder = tmp_path / "cache"
    b = Scripted(_answer, cache=folder)
    b.chat(_requests())
    b.cache.close()  # the last connection checkpoints the WAL into the file
    assert not (folder / f"{FILE_NAME}-wal").exists() or os.path.getsize(folder / f"{FILE_NAME}-wal") == 0
    return folder


def _zero(f):
    f.write_bytes(b"")


def _truncate(f):
    os.truncate(f, f.stat().st_size // 2)


def _random(f):
    f.write_bytes(np.random.default_rng(0).bytes(f.stat().st_size))


def _wrong_schema(f):
    f.unlink()
    db = sqlite3.connect(f)
    db.execute("CREATE TABLE calls (id INTEGER, payload BLOB)")
    db.commit()
    db.close()


def _dropped(f):
    db = sqlite3.connect(f)
    db.execute("DROP TABLE calls")
    db.commit()
    db.close()


def _bad_page(f):
    data = bytearray(f.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    mid = (len(data) // page // 2) * page
    data[mid:mid + page] = np.random.default_rng(1).bytes(page)
    f.write_bytes(bytes(data))


def _readonly(f):
    f.chmod(0o444)


def _directory(f):
    f.unlink()
    f.mkdir()


def _not_sqlite(f):
    f.write_text("this is a text file, not a call cache\n" * 50)


CORRUPTIONS = {"zero_bytes": (_zero, "0 bytes"), "truncated": (_truncate, "truncated"),
               "random_bytes": (_random, "not a SQLite database"), "wrong_schema": (_wrong_schema, "wrong schema"),
               "table_dropped": (_dropped, "no 'calls' table"), "corrupted_page": (_bad_page, "damaged"),
               "read_only": (_readonly, "read-only"), "directory": (_directory, "is a directory"),
               "not_sqlite": (_not_sqlite, "not a SQLite database")}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_a_damaged_cache_is_named_and_nothing_is_recomputed(healthy, kind):
    damage, rule = CORRUPTIONS[kind]
    f = healthy / FILE_NAME
    damage(f)
    with pytest.raises(CacheError) as e:
        b = Scripted(_answer, cache=healthy)  # the backend cannot even be built: no call can be sent
        if kind == "read_only":  # issue 51: a sound read-only cache replays what it holds ...
            assert [r.cached for r in b.chat(_requests())] == [True] * N and b.sent == []
            b.chat(_requests(N + 1))  # ... and refuses, before sending it, a call it could not keep
    if kind == "read_only":
        assert b.sent == []
    msg = str(e.value)
    assert str(f) in msg and rule in msg
    if kind == "read_only":  # a sound file that cannot take new calls: never advice to move it aside (re-buys all)
        assert "move the file aside" not in msg and "chmod u+w" in msg
    else:
        assert "move the file aside" in msg and "crossprofile cache check" in msg
    rep = check_cache(healthy)  # opens read-only: a read-only file is not damaged
    assert rep["file"] == str(f) and rep["ok"] == (kind == "read_only") and bool(rep["problem"]) != rep["ok"]


def test_garbage_in_a_row_is_named_when_read_and_not_recomputed(healthy):
    b = Scripted(_answer, cache=healthy)
    reqs = _requests()
    victim, other = b.cache_key(reqs[7]), b.cache_key(reqs[8])
    b.cache.close()
    db = sqlite3.connect(healthy / FILE_NAME)
    db.execute("UPDATE calls SET meta = '{not json' WHERE key = ?", (victim,))
    db.execute("UPDATE calls SET retries = 'many' WHERE key = ?", (other,))
    db.commit()
    db.close()
    b = Scripted(_answer, cache=healthy)
    with pytest.raises(CacheError, match=f"entry ({victim[:16]}|{other[:16]}).*does not decode"):
        b.chat(reqs)
    assert b.sent == []
    rep = check_cache(healthy)
    assert not rep["ok"] and set(rep["bad_rows"]) == {victim, other} and rep["entries"] == N


LOCKER = ("import sqlite3, sys, time\ndb = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
          "db.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\ntime.sleep(60)\n")


def test_a_database_locked_by_another_process_is_named(healthy):
    p = subprocess.Popen([sys.executable, "-c", LOCKER, str(healthy / FILE_NAME)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "locked"
        with pytest.raises(CacheError, match="locked by another process for more than 0.5 s"):
            CallCache(healthy, timeout=0.5)
    finally:
        p.kill()
        p.wait()
    assert len(CallCache(healthy)) == N  # released: usable again


def test_healthy_cache_check_vacuum_export(healthy, tmp_path):
    rep = check_cache(healthy)
    assert rep == {"file": str(healthy / FILE_NAME), "ok": True, "problem": None, "entries": N, "bad_rows": []}
    db = sqlite3.connect(healthy / FILE_NAME)
    db.execute("DELETE FROM calls WHERE rowid % 2 = 0")
    db.commit()
    db.close()
    before, after = vacuum_cache(healthy)
    assert after < before
    written, bad = export_cache(healthy / FILE_NAME, tmp_path / "calls.jsonl")
    lines = (tmp_path / "calls.jsonl").read_text().splitlines()
    assert written == len(lines) == N // 2 and bad == 0
    row = json.loads(lines[0])
    assert row["text"].endswith("Decision: A") and row["purpose"] == "decision" and len(row["key"]) == 64
    # a new cache file is never empty: it is made with its table, atomically
    new = tmp_path / "fresh"
    CallCache(new).close()
    assert (new / FILE_NAME).stat().st_size > 0 and check_cache(new)["ok"]


def test_export_salvages_what_a_damaged_file_still_holds(healthy, tmp_path):
    _bad_page(healthy / FILE_NAME)
    written, bad = export_cache(healthy, tmp_path / "salvage.jsonl")
    assert 0 < written < N and written == len((tmp_path / "salvage.jsonl").read_text().splitlines())


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=120, **kw)


def test_cache_commands(healthy, tmp_path):
    r = _cli("cache", "check", healthy)
    assert r.returncode == 0 and f"ok, {N} entries" in r.stdout
    r = _cli("cache", "vacuum", healthy / FILE_NAME)
    assert r.returncode == 0 and "bytes" in r.stdout
    r = _cli("cache", "export", healthy, tmp_path / "all.jsonl")
    assert r.returncode == 0 and f"{N} entries" in r.stdout
    assert len((tmp_path / "all.jsonl").read_text().splitlines()) == N
    _truncate(healthy / FILE_NAME)
    r = _cli("cache", "check", healthy)
    assert r.returncode == 1 and "truncated" in r.stderr and "move the file aside" in r.stderr


def test_a_run_on_an_emptied_cache_refuses_and_buys_nothing(tmp_path):
    """The issue's costly case end to end: a 0-byte cache file, a live (fake) paid API."""
    pytest.importorskip("openai")
    from test_backend_openai import _free_port, _spawn_server
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / FILE_NAME).write_bytes(b"")
    port, log = _free_port(), tmp_path / "served.log"
    srv = _spawn_server(port, log)
    try:
        r = _cli("run", "--backend", "openai/fake", "--base-url", f"http://127.0.0.1:{port}/v1", "--cache",
                 tmp_path / "cache", "--tokenizer", "offline", "--out", tmp_path / "out", "--no-progress",
                 "--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6",
                 "--policies", "ALL", "--variants", "PSP")
    finally:
        srv.kill()
        srv.wait()
    assert r.returncode == 2 and f"call cache {tmp_path / 'cache' / FILE_NAME}: 0 bytes" in r.stderr
    assert "Traceback" not in r.stderr
    assert not log.exists() or log.read_text() == ""  # not one call was bought
    assert (tmp_path / "cache" / FILE_NAME).stat().st_size == 0  # and the evidence is left as it was
