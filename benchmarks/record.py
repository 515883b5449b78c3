"""What every benchmark result file records beside its figures: the commit measured, the date, the
machine's load average before and after, and the command that produced it.

    from record import Recorder            # benchmarks/ is the script's folder
    rec = Recorder()                       # notes the command, the commit and the load now
    ... measure ...
    rec.write("benchmarks/results/x.json", {"figures": ...})

The README quotes speed figures only from files written this way (``tests/test_benchmark_records.py``
checks that each results file carries these fields). The machine is shared: the load average is
written as measured, never adjusted, so a figure taken under load says so.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the fields every results file carries (``record`` object)
FIELDS = ("commit", "dirty", "date", "command", "load_average_before", "load_average_after", "machine")


def commit(root: Path = ROOT) -> tuple[str, bool]:
    """(HEAD's commit, whether the work tree had uncommitted changes to tracked files); ("unknown",
    False) outside a git checkout."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip() != ""
        return head, dirty
    except (OSError, subprocess.SubprocessError):
        return "unknown", False


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "machine": platform.machine()}


class Recorder:
    """Notes the command, commit and load at construction; :meth:`header` adds the load after."""

    def __init__(self, command: str | None = None, argv: list[str] | None = None):
        self.command = command or "python " + " ".join(shlex.quote(a) for a in (argv or sys.argv))
        self.commit, self.dirty = commit()
        self.started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.load_before = load_average()

    def header(self) -> dict:
        return {"commit": self.commit, "dirty": self.dirty, "date": self.started, "command": self.command,
                "load_average_before": self.load_before, "load_average_after": load_average(),
                "machine": machine()}

    def write(self, path: str | Path, figures: dict) -> dict:
        """Write ``{"record": header, **figures}`` as JSON to ``path``; returns it."""
        out = {"record": self.header(), **figures}
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=2) + "\n")
        return out


def mark_rebased(results: Path = ROOT / "benchmarks" / "results", root: Path = ROOT) -> list[str]:
    """After a rebase: for each results file whose ``record.commit`` is no longer in HEAD's history,
    add ``record.rebased_as``, the commit of HEAD's history with the same subject line (the same
    change replayed onto a newer base; the figures stay those measured at ``commit``). Returns the
    files changed."""
    def git(*a):
        return subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True).stdout.strip()
    subjects = {}
    for line in git("log", "--format=%H %s", "HEAD").splitlines():
        h, _, subj = line.partition(" ")
        subjects.setdefault(subj, h)
    def records(x):  # every record in a file: the top one and any kept from earlier runs
        if isinstance(x, dict):
            if "commit" in x and "command" in x:
                yield x
            for v in x.values():
                yield from records(v)

    changed = []
    for p in sorted(Path(results).glob("*.json")):
        d = json.loads(p.read_text())
        touched = False
        for rec in records(d):
            c = rec.get("commit", "")
            if not c or subprocess.run(["git", "-C", str(root), "merge-base", "--is-ancestor", c, "HEAD"],
                                       capture_output=True).returncode == 0:
                continue
            new = subjects.get(git("log", "-1", "--format=%s", c))
            if new and rec.get("rebased_as") != new:
                rec["rebased_as"] = new
                rec["rebase_note"] = ("measured at 'commit' before a rebase; 'rebased_as' is the same change on the "
                                      "newer base (the figures were not measured again there)")
                touched = True
        if touched:
            p.write_text(json.dumps(d, indent=2) + "\n")
            changed.append(p.name)
    return changed


if __name__ == "__main__":
    if sys.argv[1:] == ["--mark-rebased"]:
        print("\n".join(mark_rebased()) or "nothing to mark")
    else:
        print("usage: python benchmarks/record.py --mark-rebased", file=sys.stderr)
        raise SystemExit(2)
