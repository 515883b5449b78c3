"""Fault injection: one output folder, several runs (real processes, no mocks).

* a run on a folder another live process holds refuses at once (exit 2, holder's pid and host);
* a lock left by a killed process is taken over, with a notice;
* two ``crossprofile run`` started together on one ``--out``: one refuses, the other's table is
  complete and readable;
* writes are atomic: a reader polling ``results.parquet`` while runs rewrite it never sees a torn file.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from crossprofile_lib.run.results import read_results
from crossprofile_lib.run.runner import RunConfig, run_grid
from crossprofile_lib.safety.outputs import LOCK_NAME, FolderLocked, acquire, atomic_write, locked_dir, release

CLI = [str(Path(sys.executable).with_name("crossprofile"))]
if not Path(CLI[0]).exists():
    CLI = [sys.executable, "-m", "crossprofile_lib.cli"]
SMALL = ["--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6",
         "--policies", "R1,ALL", "--variants", "PSP"]
HOLD = ("import sys, time\nfrom crossprofile_lib.safety.outputs import locked_dir\n"
        "with locked_dir(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(120)\n")


def _holder(folder):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_held_folder_is_refused_at_once_and_a_stale_lock_is_taken_over(tmp_path):
    out = tmp_path / "out"
    holder = _holder(out)
    try:
        r = subprocess.run(CLI + ["run", "--out", str(out)] + SMALL, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert f"pid {holder.pid} on host {socket.gethostname()}" in r.stderr and "in use by another run" in r.stderr
        assert not (out / "results.parquet").exists()
    finally:
        holder.send_signal(signal.SIGKILL)  # leaves its lock behind, as a crash would
        holder.wait()
    info = json.loads((out / LOCK_NAME).read_text())
    assert info["pid"] == holder.pid  # the dead process's lock is still there
    r = subprocess.run(CLI + ["run", "--out", str(out)] + SMALL, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "took over a stale lock" in r.stderr and f"pid {holder.pid}" in r.stderr
    assert len(read_results(out)) == 2 and not (out / LOCK_NAME).exists()  # R1 and ALL on one task


def test_lock_is_released_on_exceptions_and_reentrant(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with locked_dir(tmp_path):
            assert (tmp_path / LOCK_NAME).exists()
            with locked_dir(tmp_path):  # nested use in one process does not deadlock
                pass
            assert (tmp_path / LOCK_NAME).exists()
            raise KeyboardInterrupt
    assert not (tmp_path / LOCK_NAME).exists()
    lock = acquire(tmp_path)
    release(lock)
    assert not lock.exists()


def test_a_lock_of_another_host_is_never_taken_over(tmp_path):
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": 1, "host": "elsewhere", "started": "then"}))
    with pytest.raises(FolderLocked, match="another host"):
        acquire(tmp_path)
    (tmp_path / LOCK_NAME).write_text("not json")
    with pytest.raises(FolderLocked, match="unreadable lock file"):
        acquire(tmp_path)


def test_unusable_out_is_named_before_any_work(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    r = subprocess.run(CLI + ["run", "--out", str(f)] + SMALL, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a folder" in r.stderr and str(f) in r.stderr


def test_atomic_write_leaves_the_old_file_when_the_writer_fails(tmp_path):
    dest = tmp_path / "t.txt"
    dest.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(dest) as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk full")
    assert dest.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["t.txt"]


def test_two_runs_started_together_on_one_out(tmp_path):
    """The issue's case: two runs on one folder. Exactly one writes; the other refuses (exit 2)
    naming the holder, or -- if the first had already finished -- runs after it. Never a lost or
    torn table, never two runs writing at once."""
    out = tmp_path / "out"
    grid = ["--templates", "templates/dev", "--seeds", "0,1", "--budgets", "0.6,0.8"]
    procs = [subprocess.Popen(CLI + ["run", "--out", str(out)] + grid, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    torn = 0
    while any(p.poll() is None for p in procs):  # a reader polling the table meanwhile
        if (out / "results.parquet").exists():
            try:
                pd.read_parquet(out / "results.parquet")
            except Exception:
                torn += 1
        time.sleep(0.05)
    res = [(p.returncode, p.stdout.read(), p.stderr.read()) for p in procs]
    assert torn == 0
    rcs = sorted(rc for rc, _, _ in res)
    print("return codes", rcs)
    assert rcs in ([0, 0], [0, 2]), res
    for rc, _, err in res:
        if rc == 2:
            assert "in use by another run" in err and "pid " in err
    df = read_results(out)
    ref = run_grid(RunConfig(templates=["templates/dev"], seeds=[0, 1], budgets=["0.6", "0.8"]))
    assert len(df) == len(ref) == json.loads((out / "run.json").read_text())["rows"]  # complete
    assert list(df.decision) == list(ref.decision) and list(df.memory_sha) == list(ref.memory_sha)
    assert not (out / LOCK_NAME).exists()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_a_left_lock_with_this_processes_pid_is_stale(tmp_path, capsys):
    """After a reboot a new process may get the pid of the one that left the lock."""
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                                 "started": "before the reboot"}))
    with locked_dir(tmp_path):
        assert json.loads((tmp_path / LOCK_NAME).read_text())["started"] != "before the reboot"
    assert "took over a stale lock" in capsys.readouterr().err and not (tmp_path / LOCK_NAME).exists()
