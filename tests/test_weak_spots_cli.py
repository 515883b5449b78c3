"""Issue 25: ``crossprofile cache check .crossprofile_cache`` as the README writes it, where no cache exists
yet (always, after runs of the reference decider only): a clear exit 0 saying there is no cache yet and
where runs keep theirs, never advice to move a file aside. A damaged file is still an error (exit 1)."""

from __future__ import annotations

import os
import subprocess
import sys

from crossprofile_lib.backends.cache import FILE_NAME, CallCache


def _cli(cwd, *args, env=None):
    e = {k: v for k, v in os.environ.items() if k != "CROSSPROFILE_CACHE"}
    e.update(env or {})
    e["PYTHONPATH"] = os.pathsep.join([os.getcwd(), e.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=180, cwd=cwd, env=e)


def _no_move_advice(r):
    out = (r.stdout + r.stderr).lower()
    assert "move the file" not in out and "mv " not in out and ".broken" not in out, r.stdout + r.stderr


def test_no_cache_yet_after_a_ledger_only_run_is_exit_0(tmp_path):
    repo = os.getcwd()
    r = _cli(tmp_path, "run", "--backend", "ledger", "--out", tmp_path / "runs" / "ledger", "--no-progress",
             "--templates", f"{repo}/templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6",
             "--policies", "R1,ALL", "--variants", "PSP")
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / ".crossprofile_cache").exists()          # the reference decider caches nothing
    r = _cli(tmp_path, "cache", "check", ".crossprofile_cache", env={"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("no call cache yet: .crossprofile_cache does not exist.")
    assert "first model call" in r.stdout and str(tmp_path / "xdg" / "crossprofile") in r.stdout
    assert r.stderr == ""
    _no_move_advice(r)


def test_a_folder_without_a_cache_file_is_no_cache_yet(tmp_path):
    (tmp_path / "c").mkdir()
    r = _cli(tmp_path, "cache", "check", tmp_path / "c", env={"CROSSPROFILE_CACHE": str(tmp_path / "c")})
    assert r.returncode == 0 and f"{tmp_path / 'c'} holds no {FILE_NAME}" in r.stdout
    assert f"Runs started here use {tmp_path / 'c'}" in r.stdout
    _no_move_advice(r)


def test_a_real_cache_is_still_checked_and_a_damaged_one_is_still_an_error(tmp_path):
    CallCache(tmp_path / "c").close()
    r = _cli(tmp_path, "cache", "check", tmp_path / "c")
    assert r.returncode == 0 and r.stdout.strip() == f"{tmp_path / 'c' / FILE_NAME}: ok, 0 entries"
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / FILE_NAME).write_bytes(b"")
    r = _cli(tmp_path, "cache", "check", tmp_path / "d")
    assert r.returncode == 1 and "0 bytes" in r.stderr
    (tmp_path / "e.sqlite").symlink_to(tmp_path / "nowhere.sqlite")     # a dangling link is not "no cache yet"
    r = _cli(tmp_path, "cache", "check", tmp_path / "e.sqlite")
    assert r.returncode == 1 and "no such file" in r.stderr
