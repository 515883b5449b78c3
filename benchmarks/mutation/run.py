"""The mutation trial (issue 25): does the test suite catch deliberate bugs?

    .venv/bin/python benchmarks/mutation/run.py                 # every mutation in mutations.yaml
    .venv/bin/python benchmarks/mutation/run.py --only r1rel-b4-order-inside-tiers,headroom-point-not-bound
    .venv/bin/python benchmarks/mutation/run.py --list          # the set, without running anything
    make mutation                                               # the same as the first line

Each entry of ``benchmarks/mutation/mutations.yaml`` names a file, an exact snippet of it (which must
occur exactly once), its replacement (the bug), the tests that should catch it and a one-line
description. The trial copies the project (the files git tracks or would track: ``git ls-files -co
--exclude-standard``) into a temporary folder, runs every named test once on the unmutated copy (the
baseline: all must pass), then for each mutation applies it to the copy, runs its tests (``pytest -x``,
``nice -n 10``, a timeout), and restores the file. Byte-code caches are off (``PYTHONDONTWRITEBYTECODE``),
so a mutant never runs from a stale ``.pyc``; the copy's package shadows the editable install
(checked before the trial starts).

Outcome per mutation:

* ``killed`` -- a named test failed (pytest exit 1);
* ``survived`` -- every named test passed: the tests cannot tell the bug from the rule;
* ``equivalent`` -- survived, and the entry argues (``equivalent:``) why no test can fail on it;
* ``no-longer-applies`` -- the snippet is not in the file exactly once (the code moved; update the entry);
* ``timeout`` -- the tests ran past ``--timeout`` (reported, not counted as killed);
* ``broken`` -- pytest could not collect (exit 2-5): the mutant does not import; fix the entry;
* ``untested`` -- ``--without`` left the mutation no test (a comparison run, not a verdict).

The report goes to ``benchmarks/results/mutation.json`` (the commit, whether the tree was dirty, the
command, the machine's load, per mutation its outcome, time and first failing test) and a short
``benchmarks/results/mutation.md``. Run on demand, never in CI (it runs the selected tests ~50 times).
"""

from __future__ import annotations

import argparse
import datetime as dt
import fnmatch
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
FIELDS = ("id", "area", "file", "original", "replacement", "tests", "description")
FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def load_mutations(path: Path = HERE / "mutations.yaml") -> list[dict]:
    """The entries of ``mutations.yaml``, each checked for its fields (a clear error naming the entry)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    items = doc["mutations"] if isinstance(doc, dict) else doc
    seen = set()
    for k, m in enumerate(items):
        missing = [f for f in FIELDS if not m.get(f)]
        if missing:
            raise SystemExit(f"{path}: mutations[{k}] ({m.get('id', '?')}): missing {', '.join(missing)}")
        if m["id"] in seen:
            raise SystemExit(f"{path}: mutations[{k}]: duplicate id '{m['id']}'")
        if m["original"] == m["replacement"]:
            raise SystemExit(f"{path}: {m['id']}: the replacement equals the original")
        if isinstance(m["tests"], str):
            m["tests"] = m["tests"].split()
        seen.add(m["id"])
    return items


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def copy_project(dest: Path) -> int:
    """Copy the files git tracks or would track (symbolic links kept as links) into ``dest``."""
    names = [n for n in git("ls-files", "-co", "--exclude-standard", "-z").split("\0") if n]
    for n in names:
        src, dst = ROOT / n, dest / n
        if not src.exists() and not src.is_symlink():
            continue   # deleted in the working tree, not yet committed
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        elif src.is_file():
            shutil.copy2(src, dst)
    return len(names)


def environment(copy: Path) -> dict:
    env = dict(os.environ)
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(copy), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", HYPOTHESIS_STORAGE_DIRECTORY=str(copy / ".hypothesis"))
    env.pop("CROSSPROFILE_CACHE", None)
    return env


def pytest(python: str, copy: Path, tests: list[str], timeout: float, nice: int) -> tuple[str, int, float, str]:
    """Run ``pytest -x`` on ``tests`` in the copy: ``(outcome, exit code, seconds, output tail)``."""
    cmd = ["nice", "-n", str(nice), python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header",
           "-W", "ignore::DeprecationWarning", *tests]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=copy, env=environment(copy), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return "timeout", -9, time.perf_counter() - t0, out[-3000:]
    rc = p.returncode
    outcome = {0: "survived", 1: "killed"}.get(rc, "broken")
    return outcome, rc, time.perf_counter() - t0, out[-3000:]


def apply(copy: Path, m: dict) -> str | None:
    """Write the mutant; return the original text to restore (None when the snippet does not apply)."""
    f = copy / m["file"]
    if not f.is_file():
        return None
    text = f.read_text(encoding="utf-8")
    if text.count(m["original"]) != 1:
        return None
    f.write_text(text.replace(m["original"], m["replacement"], 1), encoding="utf-8")
    return text


def record_of(report: dict) -> dict:
    """The ``record`` block every results file carries (benchmarks/record.py's fields), from the report's own."""
    return {"commit": report["commit"], "dirty": report["dirty"], "date": report["started"], "command": report["command"],
            "load_average_before": report["load_average_start"], "load_average_after": report["load_average_end"],
            "machine": {"cpus": report["cpus"], "python": report["python"]}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated mutation ids (default: all)")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per mutation's tests (default 600)")
    ap.add_argument("--nice", type=int, default=10)
    ap.add_argument("--python", default=sys.executable, help="the interpreter with the test dependencies")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "mutation.json"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary copy (its path is printed)")
    ap.add_argument("--without", default="", help="comma-separated globs of test selections to leave out (e.g. "
                    "'tests/test_weak_spots_*' to see what the suite caught before those tests); a mutation left "
                    "with no test is reported 'untested'")
    args = ap.parse_args(argv)
    muts = load_mutations()
    if args.only:
        want = [x.strip() for x in args.only.split(",") if x.strip()]
        unknown = sorted(set(want) - {m["id"] for m in muts})
        if unknown:
            ap.error(f"--only: unknown mutation id(s): {', '.join(unknown)}")
        muts = [m for m in muts if m["id"] in want]
    if args.without:
        pats = [x.strip() for x in args.without.split(",") if x.strip()]
        for m in muts:
            m["tests"] = [t for t in m["tests"] if not any(fnmatch.fnmatch(t.split("::")[0], p) for p in pats)]
    if args.list:
        for m in muts:
            print(f"{m['id']:44s} {m['area']:12s} {m['file']}: {m['description']}")
        return 0

    commit = git("rev-parse", "HEAD").strip()
    dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    started = dt.datetime.now(dt.timezone.utc)
    load0 = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="crossprofile-mutation-"))
    results, baseline = [], {}
    try:
        n = copy_project(tmp)
        print(f"copied {n} files to {tmp}", flush=True)
        probe = subprocess.run([args.python, "-c", "import crossprofile_lib; print(crossprofile_lib.__file__)"],
                               cwd=tmp, env=environment(tmp), capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(tmp)):
            raise SystemExit(f"the copy's package is not the one imported: {probe.stdout.strip()} {probe.stderr[-500:]}")
        selections = sorted({t for m in muts for t in m["tests"]})
        print(f"baseline: {len(selections)} test selections, unmutated", flush=True)
        outcome, rc, secs, tail = pytest(args.python, tmp, selections, max(args.timeout, 1800.0), args.nice)
        baseline = dict(passed=outcome == "survived", seconds=round(secs, 1), selections=selections)
        if outcome != "survived":
            print(tail, file=sys.stderr)
            raise SystemExit(f"baseline failed ({outcome}, exit {rc}): the unmutated tests must pass first")
        print(f"baseline passed in {secs:.0f} s", flush=True)
        for k, m in enumerate(muts, 1):
            orig = apply(tmp, m)
            rec = dict(id=m["id"], area=m["area"], file=m["file"], description=m["description"], tests=m["tests"])
            if m.get("equivalent"):
                rec["equivalent_argument"] = " ".join(str(m["equivalent"]).split())
            if orig is None:
                rec.update(outcome="no-longer-applies", seconds=0.0)
            elif not m["tests"]:
                (tmp / m["file"]).write_text(orig, encoding="utf-8")
                rec.update(outcome="untested", seconds=0.0)
            else:
                try:
                    outcome, rc, secs, tail = pytest(args.python, tmp, m["tests"], args.timeout, args.nice)
                finally:
                    (tmp / m["file"]).write_text(orig, encoding="utf-8")
                if outcome == "survived" and m.get("equivalent"):
                    outcome = "equivalent"
                rec.update(outcome=outcome, exit_code=rc, seconds=round(secs, 1))
                first = FAILED.search(tail)
                if outcome == "killed" and first:
                    rec["caught_by"] = first.group(1)
                if outcome in ("broken", "timeout", "survived"):
                    rec["output_tail"] = tail[-1200:]
            results.append(rec)
            print(f"[{k}/{len(muts)}] {rec['outcome']:18s} {m['id']} ({rec['seconds']:.0f} s)"
                  + (f"  <- {rec['caught_by']}" if rec.get("caught_by") else ""), flush=True)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    finished = dt.datetime.now(dt.timezone.utc)
    counts: dict[str, int] = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    report = dict(
        what="mutation trial (issue 25): deliberate bugs, one at a time, in a copy of the project",
        commit=commit, dirty=dirty, command=" ".join([Path(sys.executable).name, *sys.argv]),
        started=started.isoformat(timespec="seconds"), finished=finished.isoformat(timespec="seconds"),
        wall_s=round((finished - started).total_seconds(), 1), python=platform.python_version(),
        cpus=os.cpu_count(), load_average_start=[round(x, 2) for x in load0],
        load_average_end=[round(x, 2) for x in os.getloadavg()], timeout_s=args.timeout, nice=args.nice,
        baseline=baseline, counts=counts, mutations=results)
    report = {"record": record_of(report), **report}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    print(f"{counts} -> {out} and {out.with_suffix('.md')}")
    bad = {k: v for k, v in counts.items() if k in ("survived", "no-longer-applies", "broken", "timeout")}
    return 1 if bad else 0


def markdown(r: dict) -> str:
    lines = [
        "# Mutation trial",
        "",
        f"Commit `{r['commit'][:12]}`{' (working tree dirty)' if r['dirty'] else ''}, {r['started']}, "
        f"{r['wall_s'] / 60:.1f} min on {r['cpus']} CPUs (load average {r['load_average_start'][0]} at the start). "
        f"Command: `{r['command']}`. Each mutation is applied alone to a copy of the project and its tests run "
        f"with `pytest -x` (definitions: `benchmarks/mutation/mutations.yaml`; how: `benchmarks/mutation/run.py`).",
        "",
        "Outcomes: " + ", ".join(f"{v} {k}" for k, v in sorted(r["counts"].items())) + ".",
        "",
        "| mutation | area | outcome | caught by / argument | s |",
        "|---|---|---|---|---|",
    ]
    for m in r["mutations"]:
        why = m.get("caught_by") or m.get("equivalent_argument", "")
        lines.append(f"| `{m['id']}`: {m['description']} | {m['area']} | {m['outcome']} | {why} | {m['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
