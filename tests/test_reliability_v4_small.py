"""Issue 51, kinds 3 and 7, each through the real command line in its own process (a real local server where one is
involved): a wrong key with concurrency prints no "Task exception was never retrieved"; a stale lock whose pid now
belongs to another live process is taken over, a live holder's refusal names the way out; a read-only file system is
named without a chmod remedy and a read-only cache replays when it holds every call (and sends nothing when it does
not); a killed write's ``.results.parquet.*.tmp`` is cleaned up; ``--out`` into a folder of other files is refused
without ``--allow-other-files``; ``--policies R1,,ALL`` is refused; markup in titles and HiddenBench names is named
and shown as plain text.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from fake_openai_server import start

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6", "--variants", "PSP",
         "--policies", "ALL"]
GUARD = 600  # a hang guard only


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSPROFILE_") and "API_KEY" not in k}
    env.update(CROSSPROFILE_CACHE=str(tmp_path / "cache"), **extra)
    return env


def _cli(args, tmp_path, prefix=(), **extra):
    return subprocess.run([*prefix, sys.executable, "-m", "crossprofile_lib.cli", *map(str, args)], cwd=ROOT,
                          env=_env(tmp_path, **extra), capture_output=True, text=True, timeout=GUARD)


@pytest.fixture
def server():
    stops = []

    def make(**faults):
        fake, url, stop = start(**faults)
        stops.append(stop)
        return fake, url
    yield make
    for stop in stops:
        stop()


# --- kind 3 ------------------------------------------------------------------------------------------------------

def test_a_wrong_key_with_concurrency_prints_only_the_clear_error(server, tmp_path):
    """Before: 9 of 12 runs printed 'Task exception was never retrieved' and a traceback after the error."""
    fake, url = server(api_key="right", models_open=True)
    for i in range(3):
        r = _cli(["run", "--backend", "openai/fake", "--base-url", url, "--tokenizer", "offline", "--no-progress",
                  "--concurrency", 8, "--templates", "templates/dev", "--seeds", "0", "--budgets", "0.6",
                  "--policies", "R1,B4", "--out", tmp_path / f"out{i}"], tmp_path, CROSSPROFILE_API_KEY="wrong")
        assert r.returncode == 1 and "answered HTTP 401" in r.stderr, r.stderr[-2000:]
        assert "never retrieved" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]


def test_settle_retrieves_every_failed_worker():
    """Deterministic: three workers fail at once; settle raises the first and leaves none unretrieved."""
    from crossprofile_lib.backends.http_faults import settle
    unretrieved = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: unretrieved.append(ctx["message"]))

        async def fail(i):
            raise RuntimeError(f"worker {i}")
        tasks = [asyncio.create_task(fail(i)) for i in range(3)]
        with pytest.raises(RuntimeError, match="worker"):
            await settle(tasks)
        del tasks
        gc.collect()
    asyncio.run(main())
    gc.collect()
    assert unretrieved == []


# --- kind 7: locks -------------------------------------------------------------------------------------------------

def _lock(folder: Path, pid: int, started: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / ".crossprofile.lock"
    f.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": started,
                             "command": "crossprofile run --out x"}))
    return f


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process start times from /proc")
def test_a_lock_whose_pid_now_belongs_to_another_process_is_taken_over(tmp_path):
    """Before: a lock left by a dead run whose pid the system gave to another live program blocked the folder
    for good, naming no way out."""
    other = subprocess.Popen(["sleep", "600"])
    try:
        _lock(tmp_path / "out", other.pid, "2020-01-01T00:00:00Z")  # written long before that process started
        r = _cli(["run", *SMALL, "--out", tmp_path / "out"], tmp_path)
        assert r.returncode == 0 and f"pid {other.pid} now belongs to another process" in r.stderr, r.stderr
        # the near miss: a live holder that started before its lock (a run really in progress) is refused, and the
        # refusal names the way out
        lock = _lock(tmp_path / "busy", other.pid, "2099-01-01T00:00:00Z")
        r = _cli(["run", *SMALL, "--out", tmp_path / "busy"], tmp_path)
        assert r.returncode == 2 and "in use by another run" in r.stderr and f"delete {lock}" in r.stderr, r.stderr
    finally:
        other.kill()
        other.wait()


# --- kind 7: read-only file systems and caches ---------------------------------------------------------------------

def _unshare_ok() -> bool:
    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _read_only(folder: Path) -> list[str]:
    """A command prefix that runs the rest with ``folder`` mounted read-only (a user and mount namespace)."""
    return ["unshare", "-rm", "sh", "-c", f"mount --bind '{folder}' '{folder}' && mount -o remount,ro,bind '{folder}' "
            f"'{folder}' && exec \"$@\"", "sh"]


@pytest.mark.skipif(not _unshare_ok(), reason="needs unshare (user and mount namespaces) for a read-only mount")
def test_a_read_only_cache_replays_what_it_holds_and_sends_nothing_it_lacks(server, tmp_path):
    """Before: an archived cache on a read-only file system was refused with a 'chmod u+w' remedy that cannot
    help there, even when it held every call of the run."""
    fake, url = server()
    model = ["run", "--backend", "openai/fake", "--base-url", url, "--tokenizer", "offline", "--no-progress"]
    assert _cli([*model, *SMALL, "--out", tmp_path / "first"], tmp_path).returncode == 0
    with sqlite3.connect(tmp_path / "cache" / "calls.sqlite") as db:  # an archive: one file, no journal beside it
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("PRAGMA journal_mode=DELETE")
    answered = fake.answered
    ro = _read_only(tmp_path / "cache")
    r = _cli([*model, *SMALL, "--out", tmp_path / "replay"], tmp_path, prefix=ro)
    assert r.returncode == 0 and "replaying the calls it holds" in r.stderr, r.stderr[-2000:]
    assert fake.answered == answered and (tmp_path / "replay" / "results.parquet").exists()
    attempts = sum(fake.attempts.values())
    r = _cli([*model, *SMALL[:-2], "--policies", "EMPTY", "--out", tmp_path / "more"], tmp_path, prefix=ro)
    assert r.returncode == 1 and "read-only file system" in r.stderr and "chmod" not in r.stderr, r.stderr[-2000:]
    assert "none is sent" in r.stderr and sum(fake.attempts.values()) == attempts  # nothing sent, nothing paid


# --- kind 7: output folders ----------------------------------------------------------------------------------------

def test_a_killed_writes_temporary_file_is_cleaned_up_on_the_next_run(tmp_path):
    """Before: a ``.results.parquet.*.tmp`` left by kill -9 during the write stayed forever."""
    out = tmp_path / "out"
    assert _cli(["run", *SMALL, "--out", out], tmp_path).returncode == 0
    (out / ".results.parquet.k9x2ab.tmp").write_bytes(b"PAR1 half a table")
    (out / ".run.json.q7.tmp").write_text("{")
    (out / ".results.parquet.note").write_text("not a temporary file of ours")  # the near miss: kept
    r = _cli(["run", *SMALL, "--out", out], tmp_path)
    assert r.returncode == 0 and "removed 2 temporary file(s)" in r.stderr, r.stderr
    assert sorted(p.name for p in out.iterdir()) == [".results.parquet.note", "results.parquet", "run.json"]


def test_out_into_a_folder_of_other_files_needs_an_explicit_flag(tmp_path):
    """Before: ``run --out`` and ``book --out`` wrote into a folder of unrelated files (a home folder, a source
    tree) without a word."""
    mine = tmp_path / "documents"
    mine.mkdir()
    (mine / "thesis.docx").write_text("years of work")
    r = _cli(["run", *SMALL, "--out", mine], tmp_path)
    assert r.returncode == 2 and "thesis.docx" in r.stderr and "--allow-other-files" in r.stderr, r.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.docx"]
    r = _cli(["book", "--quick", "--no-html", "--out", mine], tmp_path)
    assert r.returncode == 2 and "thesis.docx" in r.stderr and "Nothing was run" in r.stderr, r.stderr[-2000:]
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.docx"]
    r = _cli(["run", *SMALL, "--out", mine, "--allow-other-files"], tmp_path)
    assert r.returncode == 0 and (mine / "thesis.docx").read_text() == "years of work"
    empty = tmp_path / "empty"  # the near miss: an existing empty folder is fine
    empty.mkdir()
    assert _cli(["run", *SMALL, "--out", empty], tmp_path).returncode == 0


@pytest.mark.parametrize("value", ["R1,,ALL", "R1,ALL,", ",R1"])
def test_a_policy_list_with_a_hole_is_refused(value, tmp_path):
    r = _cli(["run", *SMALL[:-2], "--policies", value, "--out", tmp_path / "out"], tmp_path)
    assert r.returncode == 2 and "argument --policies" in r.stderr and "empty item" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


# --- kind 7: markup in user text -----------------------------------------------------------------------------------

MARKUP = "{download}`x.py` [site](http://evil.example) ![px](http://evil.example/p.png) $a^2$"


def test_markup_in_a_template_title_is_named_and_shown_as_text(tmp_path):
    """Before: a MyST role, a Markdown link and image or TeX math in a title passed validate without a word (HTML
    is refused by the schema, rule 'schema (markup)'). Now validate passes and says how the book shows them; the
    book's template card shows them as text, and a figure title keeps '$' literal."""
    src = ROOT / "templates" / "dev" / "dev-hospital-01.yaml"
    f = tmp_path / "markup.yaml"
    f.write_text(src.read_text().replace("title: ", f"title: {json.dumps(MARKUP)} # ", 1))
    r = _cli(["validate", "--no-design", f], tmp_path)
    assert r.returncode == 0, r.stderr
    for what in ("a MyST role", "a Markdown link", "a Markdown image", "TeX math"):
        assert "title holds" in r.stderr and what in r.stderr, (what, r.stderr)
    assert "shows it as plain text" in r.stderr
    from crossprofile_lib.book.display import details
    from crossprofile_lib.book.methods import template_html
    from crossprofile_lib.task.templates import parse_template
    t = parse_template(f)
    html = template_html(t, seed=0) + details(t.title, "").data
    assert "[site](http://evil.example)" in html and "href=\"http://evil" not in html and "<img" not in html
    bad = tmp_path / "script.yaml"  # the near miss: HTML stays refused by the schema
    bad.write_text(src.read_text().replace("title: ", "title: \"<script>alert(1)</script>\" # ", 1))
    r = _cli(["validate", "--no-design", bad], tmp_path)
    assert r.returncode == 1 and "schema (markup)" in r.stderr


MARKUP_HB = "<script>alert(1)</script> " + MARKUP


def test_markup_in_hiddenbench_names_is_named(tmp_path):
    data = json.loads((ROOT / "crossprofile_lib" / "resources" / "hiddenbench_fixture.json").read_text())
    data[0]["name"] = MARKUP_HB
    f = tmp_path / "hb.json"
    f.write_text(json.dumps(data))
    r = _cli(["hiddenbench", "validate", f], tmp_path)
    assert r.returncode == 0 and "name holds an HTML tag" in r.stderr and "plain text" in r.stderr, r.stderr
