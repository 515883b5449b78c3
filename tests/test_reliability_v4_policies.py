"""Issue 51, kind 1: a policy file of the user's cannot corrupt a run. Each case runs the real command line in its
own process: whatever the file's code raises at run time (``SystemExit``, ``KeyboardInterrupt``, any
``BaseException``) is a refusal naming the file, the policy and the rule, exit 2, nothing already computed lost; the
file gets copies of the claims (a hostile one cannot move another policy's row); special files are refused before
they are opened; threads it leaves running do not keep the command alive; an ``os.chdir`` at import does not move a
relative ``--out``. A real Ctrl-C during a policy call is still the user's (exit 130): the near miss.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6,0.8", "--variants",
         "PSP"]
HEAD = ("from crossprofile_lib.policies import Policy\nfrom crossprofile_lib.task.memory import Memory\n"
        "CALLS = [0]\n")
#: the loader's trial builds each policy twice (PSP and SPS): a call after those is the run's own
RUN_TIME = "    CALLS[0] += 1\n    if CALLS[0] > 2:\n"
#: a hang guard only (seconds): the commands take a few seconds; no assertion depends on the machine's speed
GUARD = 600


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSPROFILE_")}
    env.update(CROSSPROFILE_CACHE=str(tmp_path / "cache"), **extra)
    return env


def _cli(args, tmp_path, cwd=ROOT, **extra):
    return subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", *map(str, args)], cwd=cwd,
                          env=_env(tmp_path, **extra), capture_output=True, text=True, timeout=GUARD)


def _order(raise_line: str) -> str:
    return (HEAD + "def order(cl, ctx):\n" + RUN_TIME + f"        {raise_line}\n"
            "    return list(range(len(cl)))\nPOLICY = Policy('Rogue', 'copy', order=order)\n")


#: name -> (file body, words the refusal holds)
AT_RUN_TIME = {
    "system-exit-0": (_order("raise SystemExit(0)"), "order() raised SystemExit: 0"),
    "sys-exit": ("import sys\n" + _order("sys.exit()"), "order() raised SystemExit"),
    "keyboard-interrupt": (_order("raise KeyboardInterrupt"), "order() raised KeyboardInterrupt"),
    "base-exception": (_order("raise type('Odd', (BaseException,), {})('odd')"), "order() raised Odd: odd"),
    "generator-exit": (_order("raise GeneratorExit"), "order() raised GeneratorExit"),
    "exit-while-read": (HEAD + "def order(cl, ctx):\n" + RUN_TIME + "        def gen():\n"
                        "            yield 0\n            raise SystemExit(3)\n        return gen()\n"
                        "    return list(range(len(cl)))\nPOLICY = Policy('Rogue', 'copy', order=order)\n",
                        "raised SystemExit: 3"),
    "build-exits": (HEAD + "def build(spec, x):\n" + RUN_TIME + "        raise SystemExit(0)\n"
                    "    return Memory(spec.name, 'empty', (), (), '', 0)\n"
                    "POLICY = Policy('Rogue', 'unbudgeted', build=build)\n", "build() raised SystemExit: 0"),
}


@pytest.mark.parametrize("case", sorted(AT_RUN_TIME))
def test_an_exit_or_interrupt_from_a_policy_at_run_time_is_a_refusal(case, tmp_path):
    """Before: ``SystemExit(0)`` ended ``run`` with exit 0, no message, no results; ``KeyboardInterrupt`` read as
    the user's Ctrl-C (exit 130). Now: exit 2 naming the file, the policy and the rule (``memory``), and the
    finished run already in ``--out`` is untouched (nothing computed is lost)."""
    body, words = AT_RUN_TIME[case]
    f = tmp_path / "rogue.py"
    f.write_text(body)
    out = tmp_path / "out"
    assert _cli(["run", "--policies", "R1", *SMALL, "--out", out], tmp_path).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    r = _cli(["run", "--policy-file", f, "--policies", "R1,Rogue", *SMALL, "--out", out, "--overwrite"], tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert f"{f}: memory: policy 'Rogue'" in r.stderr and words in r.stderr, r.stderr[-3000:]
    assert "Traceback" not in r.stderr + r.stdout and "interrupted" not in r.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_an_exit_during_the_trial_or_the_import_is_a_refusal(tmp_path):
    for body, rule in ((HEAD + "def order(cl, ctx):\n    raise SystemExit(0)\n"
                        "POLICY = Policy('Rogue', 'copy', order=order)\n", "trial"),
                       ("raise SystemExit(0)\n", "import"), ("raise KeyboardInterrupt\n", "import")):
        f = tmp_path / "rogue.py"
        f.write_text(body)
        r = _cli(["run", "--policy-file", f, "--policies", "R1", *SMALL, "--out", tmp_path / "out"], tmp_path)
        assert r.returncode == 2 and f"{f}: {rule}: " in r.stderr, (body, r.returncode, r.stderr[-2000:])
        assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()


def test_a_real_ctrl_c_during_a_policy_call_is_still_the_users(tmp_path):
    """The near miss: SIGINT from outside while the policy's code runs ends the command as Ctrl-C (130)."""
    ready = tmp_path / "ready"
    f = tmp_path / "slow.py"
    f.write_text(HEAD + "import time, pathlib\ndef order(cl, ctx):\n" + RUN_TIME +
                 f"        pathlib.Path({str(ready)!r}).write_text('x')\n        time.sleep(300)\n"
                 "    return list(range(len(cl)))\nPOLICY = Policy('Slow', 'copy', order=order)\n")
    p = subprocess.Popen([sys.executable, "-m", "crossprofile_lib.cli", "run", "--policy-file", str(f),
                          "--policy-timeout", "0", "--policies", "Slow", *SMALL, "--out", str(tmp_path / "out")],
                         cwd=ROOT, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         # a test run started in the background (`make test &`, nohup) ignores SIGINT, and a child
                         # inherits that: Python then installs no Ctrl-C handler and the signal never arrives
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for _ in range(GUARD * 10):
            if ready.exists() or p.poll() is not None:
                break
            time.sleep(0.1)
        assert ready.exists(), p.communicate(timeout=GUARD)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=GUARD)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130 and "interrupted (Ctrl-C)" in err, (p.returncode, err[-2000:])


def test_a_policy_that_rewrites_its_claims_cannot_move_another_policys_row(tmp_path):
    """Before: a plug-in that rewrote the claim objects it was handed changed R1's and B4's memories in the same
    run, exit 0. Now it gets copies: R1 and B4 rows equal those of a run without it."""
    f = tmp_path / "hostile.py"
    f.write_text(HEAD + "def order(cl, ctx):\n"
                 "    for c in cl.claims:\n"
                 "        object.__setattr__(c, 'text', 'Everyone agreed on option B.')\n"
                 "        object.__setattr__(c, 'speakers', ('A1', 'A2', 'A3', 'A4'))\n"
                 "        c.__dict__.pop('_line', None)\n"
                 "    object.__setattr__(cl, 'claims', cl.claims[:1])\n"
                 "    return [0]\nPOLICY = Policy('Hostile', 'copy', order=order)\n")
    cols = ["policy", "budget_label", "variant", "memory_sha", "n_kept", "kept_support", "kept_decoy", "decision"]
    grid = ["--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6,0.8"]
    assert _cli(["run", "--policies", "R1,B4", *grid, "--out", tmp_path / "plain"], tmp_path).returncode == 0
    r = _cli(["run", "--policy-file", f, "--policies", "Hostile,R1,B4", *grid, "--out", tmp_path / "mixed"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    plain = pd.read_parquet(tmp_path / "plain" / "results.parquet")[cols].sort_values(cols).reset_index(drop=True)
    mixed = pd.read_parquet(tmp_path / "mixed" / "results.parquet")
    assert (mixed["policy"] == "Hostile").any()
    mixed = mixed[mixed["policy"] != "Hostile"][cols].sort_values(cols).reset_index(drop=True)
    pd.testing.assert_frame_equal(plain, mixed)


@pytest.mark.parametrize("line", ["{c} answer B", "It is false that {c}", "{c} Everyone agreed on this."])
def test_a_memory_line_must_equal_a_claim_line(line, tmp_path):
    """Before: the rule was a substring test, so a claim with words added passed."""
    f = tmp_path / "adds.py"
    f.write_text(HEAD + "def build(spec, x):\n"
                 "    c = x.claims.claims[0]\n"
                 f"    text = {line!r}.format(c=c.text)\n"
                 "    return Memory(spec.name, 'claims', (c,), (1,), text, 5)\n"
                 "POLICY = Policy('Adds', 'unbudgeted', build=build)\n")
    r = _cli(["run", "--policy-file", f, "--policies", "R1", *SMALL, "--out", tmp_path / "out"], tmp_path)
    assert r.returncode == 2 and f"{f}: facts: policy 'Adds': line 1 of its memory text" in r.stderr, r.stderr[-2000:]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_fifo_as_the_policy_file_is_refused_unopened(tmp_path):
    """Before: the loader opened the pipe and waited for a writer forever."""
    fifo = tmp_path / "mine.py"
    os.mkfifo(fifo)
    r = _cli(["run", "--policy-file", fifo, "--policies", "R1", *SMALL, "--out", tmp_path / "out"], tmp_path)
    assert r.returncode == 2 and f"{fifo}: file: " in r.stderr and "FIFO" in r.stderr, r.stderr[-2000:]
    # the near miss: the same policy in a regular file is loaded
    good = tmp_path / "good.py"
    good.write_text(HEAD + "POLICY = Policy('Good', 'copy', order=lambda cl, ctx: list(range(len(cl))))\n")
    assert _cli(["run", "--policy-file", good, "--policies", "Good", *SMALL, "--out", tmp_path / "out"],
                tmp_path).returncode == 0


def test_a_thread_the_policy_leaves_running_does_not_keep_the_command_alive(tmp_path):
    """Before: a non-daemon thread started at import kept the finished command from exiting (a hang)."""
    f = tmp_path / "threads.py"
    f.write_text(HEAD + "import threading\nthreading.Thread(target=threading.Event().wait, name='policy-waiter')"
                 ".start()\nPOLICY = Policy('Th', 'copy', order=lambda cl, ctx: list(range(len(cl))))\n")
    r = _cli(["run", "--policy-file", f, "--policies", "Th,R1", *SMALL, "--out", tmp_path / "out"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "policy-waiter" in r.stderr and "does not wait for them" in r.stderr
    assert len(pd.read_parquet(tmp_path / "out" / "results.parquet")) == 4


def test_a_chdir_at_import_does_not_move_a_relative_out(tmp_path):
    """Before: ``os.chdir`` in the file moved a relative ``--out`` while the console named the old place."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    f = tmp_path / "mover.py"
    f.write_text(HEAD + f"import os\nos.chdir({str(elsewhere)!r})\n"
                 "POLICY = Policy('Mover', 'copy', order=lambda cl, ctx: list(range(len(cl))))\n")
    r = _cli(["run", "--policy-file", f, "--policies", "Mover", *SMALL, "--out", "rel_out"], tmp_path, cwd=work)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (work / "rel_out" / "results.parquet").exists() and not (elsewhere / "rel_out").exists()
    assert "-> rel_out/results.parquet" in r.stdout and "changed the working folder" in r.stderr
