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

**Development and held-out halves** (issue 34). The entries of the ``issue-34`` pool (written from the code,
package by package) are split by :func:`draw_heldout`: a seeded ``numpy.random.Generator``
(:data:`HELDOUT_SEED`) picks half of the pool's ids, sorted, before any result is seen; the draw is kept in
``benchmarks/mutation/heldout.yaml`` (``--draw-heldout`` writes it once; every run checks the file against a
fresh draw, so the held-out set cannot be hand-edited). Tests may be added for survivors of the development
half; the held-out half's kill rate is the trial's estimate of the share of unseen single-point bugs the
named tests catch (``--split held-out`` runs only those; ``--split development`` the rest).

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
#: the seed of the held-out draw (issue 34); changing it, or the pool, invalidates the held-out estimate
HELDOUT_SEED = 34_2026_12_02
HELDOUT_POOL = "issue-34"
HELDOUT_FILE = HERE / "heldout.yaml"
SPLITS = ("all", "development", "held-out")
#: tests no copy of the project can pass: they run ``make`` targets that install the project's own .venv
#: (the copy has none); deselected from every selection (they test the Makefile, not the code mutated here)
DESELECT = ("tests/test_book_readers.py::test_chapter_9_recipe_runs_as_written_in_a_fresh_shell",
            "tests/test_book_readers.py::test_make_chapter_names_a_missing_chapter",
            "tests/test_book_readers.py::test_make_lab_prints_a_link_to_chapter_10_without_news")
FAILED = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", re.MULTILINE)  # a parametrized id may hold spaces


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


def draw_heldout(pool_ids, seed: int = HELDOUT_SEED) -> list[str]:
    """Half of ``pool_ids`` (rounded down), drawn by a seeded Generator from the sorted ids; sorted."""
    import numpy as np
    ids = sorted(pool_ids)
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(ids), size=len(ids) // 2, replace=False)
    return sorted(ids[int(i)] for i in pick)


def heldout_ids(muts: list[dict], write: bool = False) -> set[str]:
    """The held-out ids: read from :data:`HELDOUT_FILE` and checked against a fresh draw over the pool
    (``write``: create the file when it does not exist). A pool that changed since the draw is an error
    (its estimate would no longer be of an unseen set): add new entries to another pool instead."""
    pool = [m["id"] for m in muts if m.get("pool") == HELDOUT_POOL]
    if not HELDOUT_FILE.exists():
        if not write:
            raise SystemExit(f"{HELDOUT_FILE}: missing; draw it once with --draw-heldout (before any result)")
        drawn = draw_heldout(pool)
        HELDOUT_FILE.write_text(
            "# The held-out half of the issue-34 pool (benchmarks/mutation/run.py draw_heldout): drawn by\n"
            f"# numpy.random.default_rng({HELDOUT_SEED}).choice over the {len(pool)} sorted pool ids, before any\n"
            "# result was seen. No test may be written from these mutations' outcomes.\n"
            + yaml.safe_dump({"seed": HELDOUT_SEED, "pool": HELDOUT_POOL, "pool_size": len(pool), "held_out": drawn},
                             sort_keys=False), encoding="utf-8")
    rec = yaml.safe_load(HELDOUT_FILE.read_text(encoding="utf-8"))
    if rec.get("seed") != HELDOUT_SEED or rec.get("pool_size") != len(pool):
        raise SystemExit(f"{HELDOUT_FILE}: drawn with seed {rec.get('seed')} over {rec.get('pool_size')} ids; the pool "
                         f"now has {len(pool)} (seed {HELDOUT_SEED}): the held-out set is no longer the one drawn")
    if sorted(rec["held_out"]) != draw_heldout(pool, rec["seed"]):
        raise SystemExit(f"{HELDOUT_FILE}: its held-out ids are not the seeded draw over the pool (edited by hand?)")
    return set(rec["held_out"])


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a proportion k / n."""
    if not n:
        return float("nan"), float("nan")
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return c - h, c + h


def package_of(path: str) -> str:
    parts = Path(path).parts
    return parts[1] if len(parts) > 2 and parts[0] == "crossprofile_lib" else Path(path).stem


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


def pytest(python: str, copy: Path, tests: list[str], timeout: float, nice: int, stop_first: bool = True,
           tail: int = 3000) -> tuple[str, int, float, str]:
    """Run ``pytest -x`` (``stop_first``) on ``tests`` in the copy: ``(outcome, exit code, seconds, output tail)``."""
    cmd = ["nice", "-n", str(nice), python, "-m", "pytest", *(["-x"] if stop_first else []), "-q", "-p",
           "no:cacheprovider", "--no-header",
           "-W", "ignore::DeprecationWarning", *(f"--deselect={d}" for d in DESELECT), *tests]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=copy, env=environment(copy), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return "timeout", -9, time.perf_counter() - t0, out[-tail:]
    rc = p.returncode
    outcome = {0: "survived", 1: "killed"}.get(rc, "broken")
    return outcome, rc, time.perf_counter() - t0, out[-tail:]


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
    ap.add_argument("--split", choices=SPLITS, default="all",
                    help="all (default), development (all but the held-out half) or held-out (issue 34's estimate)")
    ap.add_argument("--combine", nargs="+", metavar="REPORT", default=None,
                    help="merge finished reports (e.g. the held-out run, then the development run) into --out and exit; "
                         "the held-out estimate is taken from the first report that ran the held-out half")
    ap.add_argument("--finish-partial", metavar="PARTIAL", default=None,
                    help="write the report (--out) of a trial cut short from its <out>.partial.json, saying so, and exit")
    ap.add_argument("--draw-heldout", action="store_true",
                    help=f"write {HELDOUT_FILE.name} (the seeded held-out draw) if it does not exist, and exit")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per mutation's tests (default 600)")
    ap.add_argument("--nice", type=int, default=10)
    ap.add_argument("--python", default=sys.executable, help="the interpreter with the test dependencies")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "mutation.json"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary copy (its path is printed)")
    ap.add_argument("--baseline", choices=("full", "lazy", "deferred"), default="full",
                    help="full (default): every named test must pass unmutated before the trial; lazy: only the "
                         "test that killed a mutation is rerun unmutated, at once; deferred: those tests all in one "
                         "run after the last mutation (a kill by a test that also fails unmutated is reported "
                         "'broken'), for a loaded machine. SIGTERM stops a trial after the current mutation and "
                         "still checks and reports what ran")
    ap.add_argument("--order-seed", type=int, default=None,
                    help="run the mutations in an order drawn from this seed (a trial cut short is then a random "
                         "subsample); default: file order")
    ap.add_argument("--without", default="", help="comma-separated globs of test selections to leave out (e.g. "
                    "'tests/test_weak_spots_*' to see what the suite caught before those tests); a mutation left "
                    "with no test is reported 'untested'")
    args = ap.parse_args(argv)
    if args.combine:
        return combine([Path(x) for x in args.combine], Path(args.out))
    if args.finish_partial:
        return finish_partial(Path(args.finish_partial), Path(args.out))
    muts = load_mutations()
    held = heldout_ids(muts, write=args.draw_heldout)
    if args.draw_heldout:
        print(f"{HELDOUT_FILE}: {len(held)} held-out ids (seed {HELDOUT_SEED})")
        return 0
    for m in muts:
        m["split"] = "held-out" if m["id"] in held else "development"
    if args.split != "all":
        muts = [m for m in muts if m["split"] == args.split]
    if args.only:
        want = [x.strip() for x in args.only.split(",") if x.strip()]
        unknown = sorted(set(want) - {m["id"] for m in muts})
        if unknown:
            ap.error(f"--only: unknown mutation id(s): {', '.join(unknown)}")
        muts = [m for m in muts if m["id"] in want]
    if args.order_seed is not None:
        import numpy as np
        muts = [muts[int(i)] for i in np.random.default_rng(args.order_seed).permutation(len(muts))]
    if args.without:
        pats = [x.strip() for x in args.without.split(",") if x.strip()]
        for m in muts:
            m["tests"] = [t for t in m["tests"] if not any(fnmatch.fnmatch(t.split("::")[0], p) for p in pats)]
    if args.list:
        for m in muts:
            print(f"{m['id']:44s} {m['area']:12s} {m['split']:11s} {m['file']}: {m['description']}")
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
        checked: dict[str, bool] = {}
        if args.baseline == "full":
            print(f"baseline: {len(selections)} test selections, unmutated", flush=True)
            outcome, rc, secs, tail = pytest(args.python, tmp, selections, max(args.timeout, 1800.0), args.nice)
            baseline = dict(mode="full", passed=outcome == "survived", seconds=round(secs, 1), selections=selections)
            if outcome != "survived":
                print(tail, file=sys.stderr)
                raise SystemExit(f"baseline failed ({outcome}, exit {rc}): the unmutated tests must pass first")
            print(f"baseline passed in {secs:.0f} s", flush=True)
        else:
            baseline = dict(mode=args.baseline, passed=None, seconds=0.0, selections=selections, checked=checked)
        partial = dict(commit=commit, dirty=dirty, started=started.isoformat(timespec="seconds"), baseline=baseline)
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        for k, m in enumerate(muts, 1):
            if stop:
                print(f"stopped by SIGTERM after {k - 1} of {len(muts)} mutations", flush=True)
                break
            orig = apply(tmp, m)
            rec = dict(id=m["id"], area=m["area"], package=package_of(m["file"]), split=m["split"],
                       pool=m.get("pool", ""), file=m["file"], description=m["description"], tests=m["tests"])
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
                    if args.baseline == "lazy":  # the killing test must pass on the unmutated code
                        node = first.group(1)
                        if node not in checked:
                            o2, _, s2, _ = pytest(args.python, tmp, [node], args.timeout, args.nice)
                            checked[node] = o2 == "survived"
                            baseline["seconds"] = round(baseline["seconds"] + s2, 1)
                        if not checked[node]:
                            outcome = "broken"
                            rec.update(outcome=outcome, broken_reason=f"{node} fails unmutated too")
                if outcome in ("broken", "timeout", "survived"):
                    rec["output_tail"] = tail[-1200:]
            results.append(rec)
            write_partial(Path(args.out), dict(partial, mutations=results, planned=len(muts)))
            print(f"[{k}/{len(muts)}] {rec['outcome']:18s} {m['id']} ({rec['seconds']:.0f} s)"
                  + (f"  <- {rec['caught_by']}" if rec.get("caught_by") else ""), flush=True)
        if args.baseline == "deferred":  # every killing test, unmutated, in one run
            nodes = sorted({r["caught_by"] for r in results if r.get("caught_by")})
            if nodes:
                print(f"deferred baseline: {len(nodes)} killing tests, unmutated", flush=True)
                o2, rc2, s2, tail2 = pytest(args.python, tmp, ["--continue-on-collection-errors", "-rfE", *nodes],
                                            max(args.timeout, 1800.0), args.nice, stop_first=False, tail=200_000)
                cmd_fail = set(FAILED.findall(tail2))
                baseline.update(passed=o2 == "survived", seconds=round(s2, 1), checked={n: n not in cmd_fail for n in nodes})
                if o2 not in ("survived", "killed"):
                    baseline["note"] = f"the deferred check itself ended {o2} (exit {rc2}): kills are unconfirmed"
                for r in results:
                    if r.get("caught_by") in cmd_fail:
                        r.update(outcome="broken", broken_reason=f"{r['caught_by']} fails unmutated too")
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
        order_seed=args.order_seed, planned=len(muts), baseline=baseline, counts=counts, heldout=heldout_summary(results),
        by_package=by_package(results), mutations=results)
    report = {"record": record_of(report), **report}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    out.with_suffix(".partial.json").unlink(missing_ok=True)
    print(f"{counts} -> {out} and {out.with_suffix('.md')}")
    bad = {k: v for k, v in counts.items() if k in ("survived", "no-longer-applies", "broken", "timeout")}
    return 1 if bad else 0


def write_partial(out: Path, d: dict) -> None:
    """The results so far (``<out>.partial.json``), rewritten after every mutation: a trial cut short
    (a deadline, a lost machine) keeps what it measured; removed when the full report is written."""
    part = out.with_suffix(".partial.json")
    part.parent.mkdir(parents=True, exist_ok=True)
    d = dict(d, heldout=heldout_summary(d["mutations"]))
    part.write_text(json.dumps(d, indent=2) + "\n", encoding="utf-8")


def finish_partial(part: Path, out: Path) -> int:
    """The report of a trial that was stopped before its last mutation (from its partial file)."""
    d = json.loads(part.read_text(encoding="utf-8"))
    muts = d["mutations"]
    counts: dict[str, int] = {}
    for m in muts:
        counts[m["outcome"]] = counts.get(m["outcome"], 0) + 1
    now = dt.datetime.now(dt.timezone.utc)
    wall = (now - dt.datetime.fromisoformat(d["started"])).total_seconds()
    report = dict(what=f"mutation trial, CUT SHORT: {len(muts)} of {d['planned']} planned mutations ran (in a seeded "
                       "random order, so those that ran are a random subsample)",
                  commit=d["commit"], dirty=d["dirty"], command=f"run.py --finish-partial {part.name}",
                  started=d["started"], finished=now.isoformat(timespec="seconds"), wall_s=round(wall, 1),
                  python=platform.python_version(), cpus=os.cpu_count(), load_average_start=[],
                  load_average_end=[round(x, 2) for x in os.getloadavg()], baseline=d["baseline"], counts=counts,
                  planned=d["planned"], heldout=heldout_summary(muts), by_package=by_package(muts), mutations=muts)
    report["load_average_start"] = report["load_average_end"]
    report = {"record": record_of(report), **report}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    print(f"{counts} ({len(muts)} of {d['planned']}) -> {out} and {out.with_suffix('.md')}")
    return 0


def combine(paths: list[Path], out: Path) -> int:
    """One report from several runs of disjoint (or overlapping: later wins) sets of mutations."""
    reps = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    by_id: dict = {}
    for r in reps:
        for m in r["mutations"]:
            by_id[m["id"]] = m
    muts = list(by_id.values())
    counts: dict[str, int] = {}
    for m in muts:
        counts[m["outcome"]] = counts.get(m["outcome"], 0) + 1
    held = next((r["heldout"] for r in reps if r.get("heldout", {}).get("ran")), heldout_summary(muts))
    first, last = reps[0], reps[-1]
    report = dict(first, what=first["what"] + f" (combined from {', '.join(p.name for p in paths)})",
                  command=" ; ".join(r["command"] for r in reps), finished=last["finished"],
                  wall_s=round(sum(r["wall_s"] for r in reps), 1), load_average_end=last["load_average_end"],
                  parts=[dict(file=p.name, commit=r["commit"], dirty=r["dirty"], started=r["started"],
                              counts=r["counts"], baseline_seconds=r["baseline"].get("seconds")) for p, r in zip(paths, reps)],
                  counts=counts, heldout=held, by_package=by_package(muts), mutations=muts)
    report["record"] = record_of(report)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    print(f"{counts} -> {out} and {out.with_suffix('.md')}")
    return 0


def heldout_summary(results: list[dict]) -> dict:
    """Kill rate of the held-out half (equivalent mutations left out of the denominator) and its interval."""
    h = [r for r in results if r.get("split") == "held-out" and r["outcome"] != "equivalent"]
    k = sum(r["outcome"] == "killed" for r in h)
    lo, hi = wilson(k, len(h))
    return dict(seed=HELDOUT_SEED, pool=HELDOUT_POOL, ran=len(h), killed=k, rate=(k / len(h) if h else None),
                wilson_95=[lo, hi], equivalent=sum(r.get("split") == "held-out" and r["outcome"] == "equivalent"
                                                    for r in results),
                survived=[r["id"] for r in h if r["outcome"] != "killed"])


def by_package(results: list[dict]) -> dict:
    out: dict = {}
    for r in results:
        d = out.setdefault(r.get("package", "?"), {})
        d[r["outcome"]] = d.get(r["outcome"], 0) + 1
    return dict(sorted(out.items()))


def heldout_line(h: dict, planned: int | None = None) -> str:
    """The README-ready sentence of the held-out estimate (``planned``: the held-out size, when a trial was cut
    short and only a random subsample ran)."""
    if not h.get("ran"):
        return "No held-out mutation ran in this trial."
    which = (f"{h['ran']} single-point bugs, a seeded random subsample of the {planned} held out," if planned
             and planned > h["ran"] else f"{h['ran']} single-point bugs")
    return (f"On a held-out half of the mutations written from the code (issue 34; {which} drawn before any result "
            f"by numpy.random.default_rng({h['seed']}), no test written from their outcomes), "
            f"the named tests catch {h['killed']} of {h['ran']} ({100 * h['rate']:.0f}%; 95% Wilson interval "
            f"{100 * h['wilson_95'][0]:.0f}-{100 * h['wilson_95'][1]:.0f}%): the trial's estimate of the share of "
            f"unseen bugs of this kind the tests would catch.")


def markdown(r: dict) -> str:
    lines = [
        "# Mutation trial",
        "",
        f"Commit `{r['commit'][:12]}`{' (working tree dirty)' if r['dirty'] else ''}, {r['started']}, "
        f"{r['wall_s'] / 60:.1f} min on {r['cpus']} CPUs (load average {r['load_average_start'][0]} at the start). "
        f"Command: `{r['command']}`. Each mutation is applied alone to a copy of the project and its tests run "
        f"with `pytest -x` (definitions: `benchmarks/mutation/mutations.yaml`; how: `benchmarks/mutation/run.py`).",
        "",
        *([f"**Cut short:** {len(r['mutations'])} of {r['planned']} planned mutations ran (a seeded random order: "
           "a random subsample).", ""] if r.get("planned") and r["planned"] > len(r["mutations"]) else []),
        "Outcomes: " + ", ".join(f"{v} {k}" for k, v in sorted(r["counts"].items())) + ".",
        "",
        "**Held-out estimate (README line):** " + heldout_line(r.get("heldout", {}), r.get("planned")),
        "",
        *([("Runs combined: " + "; ".join(f"`{p['file']}` (commit `{p['commit'][:12]}`"
                                           f"{', dirty' if p['dirty'] else ''}, {p['started']}: "
                                           + ", ".join(f"{v} {k}" for k, v in sorted(p["counts"].items())) + ")"
                                           for p in r["parts"]) + "."), ""] if r.get("parts") else []),
        "By package: " + "; ".join(f"{p} " + ", ".join(f"{v} {k}" for k, v in sorted(c.items()))
                                   for p, c in r.get("by_package", {}).items()) + ".",
        "",
        "| mutation | area | split | outcome | caught by / argument | s |",
        "|---|---|---|---|---|---|",
    ]
    for m in r["mutations"]:
        why = m.get("caught_by") or m.get("equivalent_argument", "")
        lines.append(f"| `{m['id']}`: {m['description']} | {m['area']} | {m.get('split', '')} | {m['outcome']} | {why} "
                     f"| {m['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
