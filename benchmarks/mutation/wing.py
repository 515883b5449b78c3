"""One wing's mutation score by a standard tool (issue 55): mutmut 3, on a copy of the project.

    make mutation WING=paperfit                               # the wing's modules, its own tests
    .venv/bin/python benchmarks/mutation/wing.py paperfit     # the same
    .venv/bin/python benchmarks/mutation/wing.py book --tree work --keep mm-book   # the working tree, kept
    .venv/bin/python benchmarks/mutation/wing.py book --rerun-survivors mm-book    # after new tests: the survivors again
    .venv/bin/python benchmarks/mutation/wing.py book --explore mm-book "*x_headline*"  # all of some functions
    .venv/bin/python benchmarks/mutation/wing.py --list       # the wings, their modules and tests

The hand-written trial (``benchmarks/mutation/run.py``, ``make mutation`` with no WING) applies a list of bugs
somebody wrote; this one lets mutmut generate every mutant of its operator classes (numbers, comparisons,
arithmetic and boolean operators, string literals, keyword arguments, return values, dropped calls) in each
function of a wing's modules, so the blind spots show themselves rather than the bugs somebody thought of.

What a run does:

1. copies the project into a temporary folder: ``--tree HEAD`` (default) is ``git archive`` of the commit, so
   the result is that commit's, whatever is being edited in the checkout; ``--tree work`` copies the files git
   tracks or would track as they are now (the results file then says ``dirty``). Nothing in the checkout is
   mutated: mutmut writes its mutants into ``<copy>/mutants/``;
2. appends a ``[tool.mutmut]`` section to the copy's ``pyproject.toml`` from ``benchmarks/mutation/wings.yaml``:
   the wing's modules (``only_mutate``; a wing may be restricted to the modules holding its most user-visible
   rules, and the entry says so) and the wing's own test files (``pytest_add_cli_args_test_selection``);
3. runs ``nice -n 19 mutmut run --max-children N`` there (the console script). mutmut runs the selected tests once with a
   trampoline in every function to record which tests reach which function, then runs, for each mutant, only
   the tests that reached its function (per-function test selection), each in a forked worker with a CPU-time
   limit (mutmut's: 2 x 15 x (the tests' own time + 10 s): a CPU-time limit, so the machine's load does not turn a
   slow test into a timeout);
4. reads mutmut's per-file results (``mutants/**/*.py.meta``) and writes ``benchmarks/results/mutation_<wing>.json``
   (``benchmarks/record.py``'s record: commit, command, load before and after) with the counts (killed,
   survived, timed out, no tests, equivalent, other), the score (killed over the non-equivalent mutants; timed
   out mutants are reported, not counted as killed, and mutants no selected test reaches count as survivors),
   and every survivor with its diff.

A survivor listed under the wing's ``equivalent:`` in ``wings.yaml`` (mutant name -> one-line reason, and the
changed line the reason is about) is counted as equivalent; an entry whose mutant was killed or whose diff no
longer holds that line is reported as stale.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from record import Recorder  # noqa: E402

WINGS_FILE = HERE / "wings.yaml"
RESULTS = ROOT / "benchmarks" / "results"
#: top-level entries never copied into mutmut's folder (build output, caches, environments)
NOT_COPIED = {".git", ".venv", ".venv-vllm", "mutants", "_build", "_site", "runs", "build", ".hypothesis",
              ".pytest_cache", "crossprofile.egg-info", ".crossprofile_cache", "crossprofile_lib"}
#: pytest options every run gets: no tests that need the embedded model or vLLM, no cache folder
PYTEST_ARGS = ["-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning", "-m", "not llm and not vllm",
               "-o", "addopts="]
#: mutmut's exit codes -> the buckets the results file counts (mutmut.stats.status_by_exit_code)
BUCKET = {"killed": "killed", "survived": "survived", "timeout": "timeout", "no tests": "no_tests",
          "caught by type check": "killed", "segfault": "crashed", "suspicious": "suspicious",
          "skipped": "skipped", "not checked": "not_checked", "check was interrupted by user": "not_checked"}


def load_wings(path: Path = WINGS_FILE) -> dict:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    wings = doc["wings"]
    for name, w in wings.items():
        for key in ("modules", "tests"):
            if not w.get(key):
                raise SystemExit(f"{path}: wing {name}: missing '{key}'")
        for f in w["modules"]:
            if not (ROOT / f).is_file():
                raise SystemExit(f"{path}: wing {name}: module {f} does not exist")
        for t in w["tests"]:
            if not (ROOT / t.split("::")[0]).exists():
                raise SystemExit(f"{path}: wing {name}: test {t} does not exist")
        for key, eq in (w.get("equivalent") or {}).items():
            if not (isinstance(eq, dict) and eq.get("reason") and eq.get("line")):
                raise SystemExit(f"{path}: wing {name}: equivalent {key}: needs 'reason' and 'line'")
    return wings


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def copy_tree(dest: Path, tree: str) -> tuple[str, bool]:
    """The project at ``tree`` (a commit, or ``work`` for the working tree) in ``dest``: (commit, dirty)."""
    dest.mkdir(parents=True, exist_ok=True)
    if tree == "work":
        names = [n for n in git("ls-files", "-co", "--exclude-standard", "-z").split("\0") if n]
        for n in names:
            src, dst = ROOT / n, dest / n
            if not src.exists() and not src.is_symlink():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
            elif src.is_file():
                shutil.copy2(src, dst)
        head = git("rev-parse", "HEAD").strip()
        dirty = git("status", "--porcelain", "--untracked-files=no").strip() != ""
        return head, dirty
    commit = git("rev-parse", tree).strip()
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return commit, False


def toml_list(xs) -> str:
    return "[" + ", ".join(json.dumps(str(x)) for x in xs) + "]"


def configure(copy: Path, wing: dict) -> list[str]:
    """Append the wing's ``[tool.mutmut]`` section to the copy's pyproject.toml; returns the wing's test files the
    copy lacks (an older commit measured before they were written), which are left out of the selection."""
    missing = [t for t in wing["tests"] if not (copy / t.split("::")[0]).exists()]
    wing = dict(wing, tests=[t for t in wing["tests"] if t not in missing])
    also = sorted(p.name for p in copy.iterdir() if p.name not in NOT_COPIED and p.name != "pyproject.toml")
    section = "\n".join([
        "", "[tool.mutmut]",
        'source_paths = ["crossprofile_lib"]',
        f"only_mutate = {toml_list(wing['modules'])}",
        f"also_copy = {toml_list(also)}",
        f"pytest_add_cli_args = {toml_list(PYTEST_ARGS + list(wing.get('pytest_args', [])))}",
        f"pytest_add_cli_args_test_selection = {toml_list(wing['tests'])}",
        "use_git_change_detection = false",
        f"timeout_multiplier = {float(wing.get('timeout_multiplier', 15.0))}",
        # mutmut times a test's call, not its fixtures: a module fixture that fits a model (fit-paper, a run) would
        # make every mutant of a function it reaches a false timeout under a limit of 15 x (call + 1 s)
        f"timeout_constant = {float(wing.get('timeout_constant', 10.0))}",
        "",
    ])
    with open(copy / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write(section)
    return missing


#: imported by every new Python process of a run (``sitecustomize``): a test's subprocess inherits mutmut's
#: ``MUTANT_UNDER_TEST``; during the stats phase ("stats") its trampolines would look for mutmut's configuration in
#: the subprocess's folder (a test's temporary folder: none there) and fail the test, so there it runs the original
#: code (the stats record only the test process's own calls); a mutant's name is kept, so the subprocess runs it
SITECUSTOMIZE = """import os
if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    os.environ["MUTANT_UNDER_TEST"] = ""
"""


def environment(copy: Path) -> dict:
    env = dict(os.environ)
    # a test that starts `python -m crossprofile_lib.cli` (from any folder) imports the mutated package too; BLAS on
    # one thread; hypothesis' database inside the copy
    site = copy / ".wing-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               HYPOTHESIS_STORAGE_DIRECTORY=str(copy / ".hypothesis"),
               PYTHONPATH=os.pathsep.join([str(copy / "mutants"), str(site)]))
    env.pop("CROSSPROFILE_CACHE", None)
    return env


def mutmut(copy: Path, args: list[str], nice: int, log) -> int:
    # the console script, not ``python -m mutmut``: run as __main__, mutmut's module would be loaded twice and the
    # stats (which tests reach which function) recorded in the copy nobody reads
    cmd = ["nice", "-n", str(nice), str(Path(sys.executable).parent / "mutmut"), *args]
    p = subprocess.run(cmd, cwd=copy, env=environment(copy), stdout=log, stderr=subprocess.STDOUT)
    return p.returncode


GENERATE = """
import sys
from mutmut.__main__ import copy_src_dir, copy_also_copy_files, create_mutants, setup_source_paths
from mutmut.mutation.trampoline import set_mutant_under_test
set_mutant_under_test("mutant_generation")
copy_src_dir(); copy_also_copy_files(); setup_source_paths()
create_mutants(int(sys.argv[1]))
"""


def generate(copy: Path, nice: int, max_children: int, log) -> list[str]:
    """Write every mutant of the wing's modules (mutmut's own generation, as ``mutmut run`` starts) and return
    their names, sorted."""
    subprocess.run(["nice", "-n", str(nice), sys.executable, "-c", GENERATE, str(max_children)], cwd=copy,
                   env=environment(copy), stdout=log, stderr=subprocess.STDOUT, check=True)
    names = []
    for meta in (copy / "mutants").rglob("*.py.meta"):
        names += json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
    return sorted(names)


def refresh_tests(copy: Path, wing: dict) -> None:
    """Copy the working tree's tests/ into a kept folder's copy and let mutmut record again which tests reach which
    function (the wing's test list may have grown: a new tests/test_wing_<wing>.py)."""
    for dest in (copy / "mutants" / "tests", copy / "tests"):
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(ROOT / "tests", dest, ignore=shutil.ignore_patterns("__pycache__"))
    text = (copy / "pyproject.toml").read_text(encoding="utf-8").split("\n[tool.mutmut]")[0]
    (copy / "pyproject.toml").write_text(text, encoding="utf-8")
    configure(copy, wing)
    shutil.copy2(copy / "pyproject.toml", copy / "mutants" / "pyproject.toml")
    (copy / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)


def wilson(k: int, n: int, z: float = 1.96) -> list:
    if not n:
        return [None, None]
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return [round(c - h, 4), round(c + h, 4)]


def read_results(copy: Path, wing: dict) -> dict:
    """Per mutant: its status (mutmut's words) and, for those not killed, the diff."""
    from mutmut.stats import status_by_exit_code
    out = {}
    for meta in sorted((copy / "mutants").rglob("*.py.meta")):
        rel = meta.relative_to(copy / "mutants").as_posix()[: -len(".meta")]
        if rel not in wing["modules"]:
            continue
        d = json.loads(meta.read_text(encoding="utf-8"))
        for name, code in d["exit_code_by_key"].items():
            out[name] = {"module": rel, "status": status_by_exit_code[code], "exit_code": code}
    return out


def diffs(copy: Path, names: list[str]) -> dict:
    """mutmut's own diff of each named mutant (one process, in the copy)."""
    if not names:
        return {}
    script = ("import json, sys\nfrom mutmut.mutation.diff_apply import get_diff_for_mutant\nout = {}\n"
              "for n in json.loads(sys.stdin.read()):\n"
              "    try:\n        out[n] = get_diff_for_mutant(n)\n"
              "    except Exception as e:\n        out[n] = f'(no diff: {type(e).__name__}: {e})'\n"
              "print(json.dumps(out))\n")
    p = subprocess.run([sys.executable, "-c", script], cwd=copy, env=environment(copy), input=json.dumps(names),
                       capture_output=True, text=True)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {n: f"(no diff: {p.stderr[-300:]})" for n in names}


def changed_lines(diff: str) -> list[str]:
    return [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]


def summarise(name: str, wing: dict, results: dict, diff_by: dict, sampled: bool = False) -> dict:
    equivalent = wing.get("equivalent") or {}
    counts = {k: 0 for k in ("killed", "survived", "timeout", "no_tests", "equivalent", "crashed", "suspicious",
                             "skipped", "not_checked")}
    survivors, eq_list, stale = [], [], []
    for m, r in sorted(results.items()):
        bucket = BUCKET.get(r["status"], "suspicious")
        if bucket in ("survived", "no_tests") and m in equivalent:
            eq = equivalent[m]
            if eq["line"].strip() in changed_lines(diff_by.get(m, "")):
                counts["equivalent"] += 1
                eq_list.append({"mutant": m, "reason": eq["reason"], "diff": diff_by.get(m, "")})
                continue
            stale.append({"mutant": m, "why": "its diff no longer holds the line the reason is about"})
        elif m in equivalent:
            stale.append({"mutant": m, "why": f"listed as equivalent but {r['status']}"})
        counts[bucket] += 1
        if bucket not in ("killed",):
            survivors.append({"mutant": m, "module": r["module"], "status": r["status"], "diff": diff_by.get(m, "")})
    for m in equivalent:
        if m not in results and not sampled:   # a sample draws only some of the wing's mutants
            stale.append({"mutant": m, "why": "no such mutant in this run"})
    total = sum(counts.values())
    scored = total - counts["equivalent"] - counts["not_checked"]   # a stopped run: only the mutants it checked
    return {
        "counts": counts, "mutants": total, "non_equivalent": scored,
        "score": round(counts["killed"] / scored, 4) if scored else None,
        "score_with_timeouts": round((counts["killed"] + counts["timeout"]) / scored, 4) if scored else None,
        "by_module": by_module(results),
        "survivors": survivors, "equivalent": eq_list, "stale_equivalent": stale,
    }


def by_module(results: dict) -> dict:
    out: dict = {}
    for r in results.values():
        d = out.setdefault(r["module"], {})
        b = BUCKET.get(r["status"], "suspicious")
        d[b] = d.get(b, 0) + 1
    return dict(sorted(out.items()))


def portable_argv(argv: list[str]) -> list[str]:
    """The command as recorded in a results file: a work folder (``--keep``, ``--rerun-survivors``, ``--report``) is
    this machine's, so it is written ``DIR``; an ``--out`` inside the project is written relative to it."""
    out, hide = [], None
    for a in argv:
        if hide:
            out.append("DIR" if hide != "--out" else (os.path.relpath(a, ROOT) if Path(a).resolve().is_relative_to(ROOT)
                                                      else Path(a).name))
            hide = None
            continue
        flag, eq, val = a.partition("=")
        if flag in ("--keep", "--rerun-survivors", "--report", "--out"):
            if eq:
                out.append(flag + "=" + portable_argv([flag, val])[1])
                continue
            hide = flag
        out.append(a)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("wing", nargs="?", help="a wing of wings.yaml (book/reference-layout.md names them)")
    ap.add_argument("--list", action="store_true", help="list the wings, their modules and tests, and exit")
    ap.add_argument("--tree", default="HEAD", help="a commit to archive (default HEAD) or 'work': the working tree")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temporary folder, removed)")
    ap.add_argument("--rerun-survivors", metavar="DIR",
                    help="in a folder kept by --keep: copy the working tree's tests/ in and run the survivors again")
    ap.add_argument("--explore", nargs=2, metavar=("DIR", "PATTERN"),
                    help="in a folder kept by --keep: copy the working tree's tests/ in, run every mutant whose name "
                         "matches PATTERN (fnmatch, e.g. 'crossprofile_lib.task.hints.x_hint_*'; not only the "
                         "sample's), print those not killed with their diffs; writes no results file (a tool for "
                         "writing tests: a score comes from a fresh sample)")
    ap.add_argument("--report", metavar="DIR",
                    help="write the results file from a folder kept by --keep (its run finished or was stopped) and exit")
    ap.add_argument("--sample", type=int, default=0,
                    help="run a seeded random sample of this many of the wing's mutants (0: all); the score then "
                         "carries its 95%% Wilson interval")
    ap.add_argument("--seed", type=int, default=55, help="the sample's seed (random.Random; default 55)")
    ap.add_argument("--leave-out", default="", metavar="TESTS",
                    help="comma-separated test files of the wing left out of this run (e.g. its new tests, to measure "
                         "the score before them at the same commit; --rerun-survivors puts them back)")
    ap.add_argument("--note", default="", help="a sentence for the results file (how the run was made, if unusual); kept "
                         "with the run, so a later --rerun-survivors writes it again (with the first run's counts as first_run)")
    ap.add_argument("--max-children", type=int, default=2, help="mutmut's workers (default 2)")
    ap.add_argument("--nice", type=int, default=19)
    ap.add_argument("--out", help="results file (default benchmarks/results/mutation_<wing>.json)")
    args = ap.parse_args(argv)
    wings = load_wings()
    if args.list or not args.wing:
        for n, w in wings.items():
            print(f"{n}: {len(w['modules'])} modules ({' '.join(Path(m).name for m in w['modules'])}); "
                  f"tests: {' '.join(Path(t).name for t in w['tests'])}")
        return 0
    if args.wing not in wings:
        raise SystemExit(f"unknown wing {args.wing!r}: one of {', '.join(wings)}")
    wing = wings[args.wing]
    rec = Recorder(argv=portable_argv(sys.argv if argv is None else ["benchmarks/mutation/wing.py", *argv]))
    started = time.time()
    before = None
    if args.report:
        work = Path(args.report)
        copy = work / "project"
        state = json.loads((work / "tree.json").read_text())
        commit, dirty, tree, rc = state["commit"], state["dirty"], state["tree"], None
        log = open(work / "mutmut.log", "a", encoding="utf-8")
    elif args.explore:
        work = Path(args.explore[0])
        copy = work / "project"
        # the wing's own test files and the shared helpers (conftest, fixtures modules), not other wings' tests
        read = [f for f in sorted((ROOT / "tests").rglob("*.py"))
                if f.relative_to(ROOT).as_posix() in wing["tests"] or not f.name.startswith("test_")]
        digest = hashlib.sha256(b"".join(f.read_bytes() for f in read)).hexdigest()
        if (work / "explore-tests.sha256").exists() and (work / "explore-tests.sha256").read_text() == digest:
            print("tests unchanged since the last --explore: mutmut's test map kept", flush=True)
        else:   # new tests: copy them in; mutmut maps tests to functions again (the wing's tests run once)
            refresh_tests(copy, wing)
            (work / "explore-tests.sha256").write_text(digest)
        print(f"running every mutant matching {args.explore[1]!r} in {copy} (the working tree's tests); "
              f"log: {work}/explore.log", flush=True)
        with open(work / "explore.log", "a", encoding="utf-8") as log:
            rc = mutmut(copy, ["run", "--max-children", str(args.max_children), args.explore[1]], args.nice, log)
        found = {m: r for m, r in read_results(copy, wing).items() if fnmatch.fnmatchcase(m, args.explore[1])}
        left = sorted(m for m, r in found.items() if BUCKET.get(r["status"]) != "killed")
        print(f"{len(found)} mutants match; {len(found) - len(left)} killed; not killed: {len(left)} (mutmut exit {rc})")
        for m, d in diffs(copy, left).items():
            print(f"\n## {m} ({found[m]['status']})\n{d}")
        return 0
    elif args.rerun_survivors:
        work = Path(args.rerun_survivors)
        copy = work / "project"
        state = json.loads((work / "tree.json").read_text())
        commit, dirty = state["commit"], True   # new tests from the working tree
        refresh_tests(copy, wing)
        before = read_results(copy, wing)
        if state.get("seed") is not None:
            before = {m: r for m, r in before.items() if m in set(state["sample"])}
        again = [m for m, r in before.items() if BUCKET.get(r["status"]) != "killed"]
        (work / f"before-{int(time.time())}.json").write_text(json.dumps(before))
        log = open(work / "mutmut.log", "a", encoding="utf-8")
        rc = mutmut(copy, ["run", "--max-children", str(args.max_children), *again], args.nice, log) if again else 0
        tree = state["tree"] + " + tests/ of the working tree (survivors rerun)"
        state["tests_not_in_tree"] = []
        (work / "tree.json").write_text(json.dumps(state))
    else:
        work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix=f"mutation-{args.wing}-"))
        if (work / "project").exists():
            raise SystemExit(f"{work}/project exists: remove it, or use --rerun-survivors {work}")
        copy = work / "project"
        commit, dirty = copy_tree(copy, args.tree)
        tree = "working tree" if args.tree == "work" else f"git archive {commit}"
        (work / "tree.json").write_text(json.dumps({"commit": commit, "dirty": dirty, "tree": tree}))
        left_out = [t for t in args.leave_out.split(",") if t]
        state_missing = configure(copy, dict(wing, tests=[t for t in wing["tests"] if t not in left_out])) + left_out
        (work / "tree.json").write_text(json.dumps(dict(json.loads((work / "tree.json").read_text()),
                                                        tests_not_in_tree=state_missing)))
        print(f"mutating {len(wing['modules'])} modules of {args.wing} in {copy} ({tree}); log: {work}/mutmut.log",
              flush=True)
        log = open(work / "mutmut.log", "w", encoding="utf-8")
        names = generate(copy, args.nice, args.max_children, log)
        picked = names
        if args.sample and args.sample < len(names):
            picked = sorted(random.Random(args.seed).sample(names, args.sample))
        state = dict(json.loads((work / "tree.json").read_text()), population=len(names), sample=picked,
                     seed=args.seed if picked != names else None)
        (work / "tree.json").write_text(json.dumps(state))
        print(f"{len(names)} mutants; running {len(picked)}", flush=True)
        rc = mutmut(copy, ["run", "--max-children", str(args.max_children), *(picked if picked != names else [])],
                    args.nice, log)
    log.close()
    state = json.loads((work / "tree.json").read_text())
    results = read_results(copy, wing)
    if state.get("seed") is not None:    # a sample: only the mutants drawn
        results = {m: r for m, r in results.items() if m in set(state["sample"])}
    if before is not None:   # mutants not rerun keep their verdict (a changed test list may reset mutmut's)
        results = {m: (results.get(m, r) if m in again else r) for m, r in before.items()}
    if not results or all(BUCKET.get(r["status"]) == "not_checked" for r in results.values()):
        print(f"mutmut checked no mutant (exit {rc}); no results file written; see {work}/mutmut.log")
        return 2
    not_killed = [m for m, r in results.items() if BUCKET.get(r["status"]) != "killed"]
    diff_by = diffs(copy, not_killed)
    summary = summarise(args.wing, wing, results, diff_by, sampled=state.get("seed") is not None)
    note = args.note or state.get("note", "")
    if before is None:   # the run's own verdicts and note, kept for every later rerun of its survivors
        state.update(first_counts=summary["counts"], note=note)
        (work / "tree.json").write_text(json.dumps(state))
    figures = {
        "what": f"mutation score of the {args.wing} wing by mutmut (issue 55): every mutant mutmut generates in the "
                "wing's modules, each against the wing's own tests that reach its function",
        "tool": "mutmut " + __import__("importlib.metadata").metadata.version("mutmut"),
        "wing": args.wing, "tree": tree, "measured_commit": commit, "measured_dirty": dirty, "mutmut_exit": rc,
        "modules": wing["modules"], "restricted": wing.get("restricted", ""),
        "tests": [t for t in wing["tests"] if t not in state.get("tests_not_in_tree", [])],
        **({"tests_left_out": state["tests_not_in_tree"]} if state.get("tests_not_in_tree") else {}),
        "pytest_args": PYTEST_ARGS + list(wing.get("pytest_args", [])),
        "wall_s": round(time.time() - started, 1), **({"note": note} if note else {}), **summary,
    }
    if state.get("seed") is not None:
        scored, c = summary["non_equivalent"], summary["counts"]
        figures["sample"] = dict(population=state["population"], drawn=len(state["sample"]), seed=state["seed"],
                                 how="random.Random(seed).sample over the sorted names of every mutant mutmut "
                                     "generated in the wing's modules, drawn before any was run",
                                 score_wilson_95=wilson(c["killed"], scored))
    else:
        figures["population"] = state.get("population", summary["mutants"])
    if before is not None:
        figures["before_rerun"] = summarise(args.wing, wing, before, {**diffs(copy, [m for m, r in before.items()
                                                                                    if m not in diff_by]), **diff_by})["counts"]
        if state.get("first_counts"):   # the first run's verdicts, before any rerun
            figures["first_run"] = state["first_counts"]
        figures["tests_commit"] = git("rev-parse", "HEAD").strip()
        figures["tests_dirty"] = git("status", "--porcelain", "--", "tests").strip() != ""
    out = Path(args.out) if args.out else RESULTS / f"mutation_{args.wing}.json"
    written = rec.write(out, figures)
    written["record"].update(commit=commit, dirty=dirty)   # the tree measured, not the checkout's state
    out.write_text(json.dumps(written, indent=2) + "\n")
    c = summary["counts"]
    print(f"{args.wing}: {c['killed']} killed, {c['survived']} survived, {c['no_tests']} reached by no test, "
          f"{c['timeout']} timed out, {c['equivalent']} equivalent, of {summary['mutants']}: score "
          f"{summary['score']} -> {out}")
    if summary["stale_equivalent"]:
        print("stale equivalent entries:", ", ".join(s["mutant"] for s in summary["stale_equivalent"]))
    if not args.keep and not args.rerun_survivors and not args.report:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
