"""Is it the machine or the code? Times the paper preset's dry run (``crossprofile run --dry-run --preset paper``,
pure Python, no model) at several commits back to back, alternating, with this checkout's .venv.

    python benchmarks/time_dry_run.py [--rounds 2] COMMIT [COMMIT ...] [--out benchmarks/results/dry_run_ab.json]

Each commit is checked out in a temporary ``git worktree``; equal times at two commits measured minutes apart
mean a slower build on another day is the machine's, not the code's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from record import ROOT, Recorder

DRY = ["-m", "crossprofile_lib.cli", "run", "--dry-run", "--preset", "paper", "--backend",
       "openai/qwen2.5-7b-instruct"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("commits", nargs="+")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "dry_run_ab.json"))
    a = ap.parse_args(argv)
    rec = Recorder()
    tmp = Path(tempfile.mkdtemp(prefix="dry-ab-"))
    trees = {}
    for c in a.commits:
        full = subprocess.run(["git", "-C", str(ROOT), "rev-parse", c], capture_output=True, text=True,
                              check=True).stdout.strip()
        trees[full] = tmp / full[:7]
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach", str(trees[full]), full],
                       check=True, capture_output=True)
    seconds = {c: [] for c in trees}
    try:
        for _ in range(a.rounds):
            for c, tree in trees.items():
                t0 = time.perf_counter()
                subprocess.run([sys.executable, *DRY], cwd=tree, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
                               check=True, capture_output=True)
                seconds[c].append(round(time.perf_counter() - t0, 1))
                print(c[:7], seconds[c][-1], "s", flush=True)
    finally:
        for tree in trees.values():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    rec.write(a.out, {"what": "seconds of the paper preset's dry run, alternating commits", "command_timed":
                      "python " + " ".join(DRY), "seconds": seconds})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
