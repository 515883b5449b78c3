"""Can a prebuilt llama.cpp wheel replace the compiled llama-cpp-python here? (issue 26.1)

For each wheel file given: its platform tag, the newest glibc / libstdc++ symbol versions its
shared libraries require (``objdump -T``), this machine's glibc, and whether its libraries load
(each in a fresh process). A wheel whose libraries do not load cannot be measured further: the
decision-letter log-probabilities, the features the suite uses (last-position scores, grammar,
chat template, tokenization) and the speed (``benchmarks/bench_llamacpp.py``) are compared only
for a wheel that loads. ``--pypi`` also asks the registry (pip, binary only) whether
llama-cpp-python itself has a prebuilt wheel for this platform.

    python benchmarks/check_prebuilt_engine.py [WHEEL ...] [--pypi] [--candidates REQ ...]
        [--measure REQ=ENGINE ...]

``--candidates``: requirements (``name==version``) fetched from the registry, binary only
(``pip download --no-deps --only-binary=:all:``), each recorded with what pip found (or why not)
and the same library check. ``--measure REQ=ENGINE``: a candidate that loads is installed in a
throw-away virtualenv (``--no-deps`` plus numpy and its pure-Python needs) and run through
``prebuilt_engine_probe.py`` (ENGINE: one of its ``ENGINES``) on the suite's decision
prompts (``bench_llamacpp.py``'s: 2 development templates x R1/B4/ALL/EMPTY, PSP, seed 0), beside
today's path (llama-cpp-python in this interpreter): token ids, decision-letter log-probabilities
(4 decimals; once with each engine's own tokenization, once on the reference's token ids),
grammar, chat template, and prompt-evaluation tokens/s with one thread.

``--paired-rounds N``: then N rounds of speed (:func:`paired_speed`), the reference beside each
candidate whose log-probabilities equal the reference's, in an order reversed every round.
``--keep-earlier``: the file's earlier runs stay in it (``earlier_runs``, each with its record).

Writes ``benchmarks/results/prebuilt_engines.json`` (commit, date, load, command: record.py).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from record import Recorder  # noqa: E402

ROOT = HERE.parent
VERSIONED = re.compile(r"\((GLIBC|GLIBCXX|CXXABI)_([0-9.]+)\)")


def _newest(versions: set[str]) -> str | None:
    return max(versions, key=lambda v: tuple(int(x) for x in v.split("."))) if versions else None


def symbol_needs(so: Path) -> dict:
    """Newest versioned glibc / libstdc++ symbol an ELF file imports, and its unversioned imports
    that this machine's libstdc++ lacks (a newer C++ runtime's)."""
    try:
        out = subprocess.run(["objdump", "-T", str(so)], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return {"error": f"objdump: {e}"}
    need: dict[str, set] = {"GLIBC": set(), "GLIBCXX": set(), "CXXABI": set()}
    for m in VERSIONED.finditer(out):
        need[m.group(1)].add(m.group(2))
    return {k: _newest(v) for k, v in need.items()}


def host() -> dict:
    libstdcxx = next((p for p in ("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/lib64/libstdc++.so.6")
                      if os.path.exists(p)), None)
    have = set()
    if libstdcxx:
        have = set(re.findall(r"GLIBCXX_([0-9.]+)", subprocess.run(["strings", libstdcxx], capture_output=True,
                                                                  text=True).stdout))
    return {"glibc": os.confstr("CS_GNU_LIBC_VERSION"), "libstdcxx_newest_GLIBCXX": _newest(have),
            "os": Path("/etc/os-release").read_text().split("PRETTY_NAME=")[-1].splitlines()[0].strip('"')
            if Path("/etc/os-release").exists() else ""}


def load_error(so: Path) -> str | None:
    """The error of loading ``so`` in a fresh process (None: it loads)."""
    code = "import ctypes, sys; ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)"
    env = dict(os.environ, LD_LIBRARY_PATH=f"{so.parent}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    r = subprocess.run([sys.executable, "-c", code, str(so)], capture_output=True, text=True, env=env, timeout=120)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1][-400:]


def check_wheel(wheel: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="wheel_") as d:
        return _check_wheel(wheel, Path(d))


def _check_wheel(wheel: Path, tmp: Path) -> dict:
    with zipfile.ZipFile(wheel) as z:
        meta = {n: z.read(n).decode(errors="replace") for n in z.namelist()
                if n.endswith(".dist-info/WHEEL") or n.endswith(".dist-info/METADATA")}
        libs = [n for n in z.namelist() if re.search(r"\.so(\.\d+)*$", n)]
        for n in libs:
            z.extract(n, tmp)
    wheel_meta = next((v for k, v in meta.items() if k.endswith("WHEEL")), "")
    pkg_meta = next((v for k, v in meta.items() if k.endswith("METADATA")), "")
    field = lambda text, key: next((ln.split(":", 1)[1].strip() for ln in text.splitlines()  # noqa: E731
                                    if ln.startswith(key + ":")), "")
    out = {"file": wheel.name, "name": field(pkg_meta, "Name"), "version": field(pkg_meta, "Version"),
           "license": field(pkg_meta, "License") or field(pkg_meta, "License-Expression"),
           "tags": [ln.split(":", 1)[1].strip() for ln in wheel_meta.splitlines() if ln.startswith("Tag:")],
           "bytes": wheel.stat().st_size, "libraries": {}}
    for n in libs:
        so = tmp / n
        out["libraries"][n] = dict(symbol_needs(so), load_error=load_error(so))
    out["loads_here"] = bool(libs) and all(v["load_error"] is None for v in out["libraries"].values())
    out["cpu_loads_here"] = cpu_loads(out["libraries"])
    return out


#: a library that fails only for a missing GPU driver or runtime is a GPU build, not the CPU engine
GPU_RUNTIME = re.compile(r"lib(cuda|cudart|cublas|vulkan|amdhip|hipblas|rocblas|OpenCL|sycl)[\w.-]*: cannot open")


def cpu_loads(libraries: dict) -> bool:
    """Whether every library of the wheel loads here, leaving out GPU builds that fail only for a
    missing GPU runtime (``libcuda.so.1``, ``libvulkan.so.1``, ...): a wheel with CUDA and Vulkan
    variants beside a CPU one counts when its CPU part loads."""
    cpu = {k: v for k, v in libraries.items() if not (v.get("load_error") and GPU_RUNTIME.search(v["load_error"]))}
    return bool(cpu) and all(v.get("load_error") is None for v in cpu.values())


def pypi_wheel(requirement: str) -> dict:
    """Whether pip finds a binary wheel of ``requirement`` for this interpreter and platform."""
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", d,
                            requirement], capture_output=True, text=True, timeout=600)
        files = sorted(os.listdir(d))
    return {"requirement": requirement, "binary_wheel_found": r.returncode == 0, "files": files,
            "pip_says": (r.stderr.strip().splitlines() or [""])[-1][-300:]}


#: pure-Python requirements a measured wheel needs beside numpy (installed from the registry)
MEASURE_DEPS = {"llama_cpp": ["typing-extensions", "diskcache", "jinja2"], "xllamacpp": [], "xllamacpp-noflash": [],
                "llama_cpp_cffi": ["cffi"], "cyllama": [], "ik_llama_cpp": []}


def fetch_candidate(requirement: str, folder: Path) -> dict:
    """Download ``requirement`` (binary only) into ``folder`` and check its wheel."""
    d = folder / re.sub(r"[^A-Za-z0-9_.-]", "_", requirement)
    d.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(d),
                        requirement], capture_output=True, text=True, timeout=900)
    wheels = sorted(d.glob("*.whl"))
    row = {"requirement": requirement, "binary_wheel_found": bool(wheels)}
    if not wheels:
        row["pip_says"] = (r.stderr.strip().splitlines() or [""])[-1][-300:]
        return row
    row.update(check_wheel(wheels[0]))
    row["wheel_path"] = str(wheels[0])
    if not row["libraries"]:
        row["why_not"] = "no shared library inside (pure Python: needs a llama.cpp built elsewhere)"
    elif not row["loads_here"]:
        errs = sorted({v["load_error"] for v in row["libraries"].values() if v["load_error"]})
        row["why_not"] = errs[0] if len(errs) == 1 else "; ".join(e[:160] for e in errs)
    return row


def decision_job() -> dict:
    """The suite's decision prompts, rendered as the embedded backend renders them, and the token
    ids of each option letter (the tokens the score rule matches)."""
    import tempfile as _t
    sys.path.insert(0, str(ROOT))
    from bench_llamacpp import _requests

    from crossprofile_lib.backends import get_backend
    from crossprofile_lib.prompts import LETTERS
    with _t.TemporaryDirectory() as cache:
        b = get_backend("llamacpp/smollm2-135m", cache=cache, n_threads=1)
        creqs = [b._decision_request(r) for r in _requests(b, 2)]
        return {"gguf": str(b.path), "prompts": [b.template.render(c.messages) for c in creqs],
                "letters": {c: [int(i) for i in b._choice_ids(c)] for c in LETTERS}, "threads": 1}


def probe(python: str, engine: str, job: dict, tmp: Path) -> dict:
    jp, op = tmp / f"job_{engine}.json", tmp / f"out_{engine}_{os.getpid()}.json"
    import json
    jp.write_text(json.dumps(job))
    r = subprocess.run(["nice", "-n", "10", python, str(HERE / "prebuilt_engine_probe.py"), engine, str(jp), str(op)],
                       capture_output=True, text=True, timeout=1800)
    if not op.exists():
        return {"ok": False, "error": (r.stderr.strip().splitlines() or ["no output"])[-1][-400:]}
    return json.loads(op.read_text())


def ref_speed(ref: dict) -> float | None:
    secs = sum(p["eval_s"] for p in ref["prompts"])
    return sum(len(p["tokens"]) for p in ref["prompts"]) / secs if secs else None


def summary(out: dict, ref: dict | None) -> dict:
    """Speed and agreement of one probe's output with the reference's (4 decimals)."""
    if not out.get("ok"):
        return {"ok": False, "error": out.get("error")}
    rows = out["prompts"]
    n_tok = [len(p["tokens"]) if p.get("tokens") else p.get("n_prompt_tokens") for p in rows]
    secs = sum(p["eval_s"] for p in rows)
    s = {"ok": True, "engine_version": out.get("engine_version"), "prompts": len(rows),
         "prompt_tokens": n_tok, "prompt_eval_s": round(secs, 3),
         "prompt_eval_tokens_per_s": round(sum(n_tok) / secs, 1) if secs else None,
         "grammar": out.get("grammar"), "chat_template_in_gguf_read": bool(out.get("chat_template"))
         and out["chat_template"] is not None, "tokenize": out.get("tokenize", "Llama.tokenize"),
         "repeatable": all(p.get("repeatable", True) for p in rows),
         "letter_logprobs": [{c: round(v, 4) for c, v in sorted(p["letter_logprobs"].items())} for p in rows]}
    for k in ("system_info", "llama_cpp_build", "chat_template_note"):  # what the engine says of its build
        if k in out:
            s[k] = out[k]
    if ref is not None and ref.get("ok"):
        rr = ref["prompts"]
        s["same_tokens_as_reference"] = [p.get("tokens") == q["tokens"] if p.get("tokens") is not None
                                         else p.get("n_prompt_tokens") == len(q["tokens"]) for p, q in zip(rows, rr)]

        def diff(key):
            pairs = [(p[key][c], q["letter_logprobs"][c]) for p, q in zip(rows, rr)
                     if key in p for c in p[key] if c in q["letter_logprobs"]]
            off = [(a, b) for a, b in pairs if round(a, 4) != round(b, 4)]
            return {"letters_compared": len(pairs),
                    "max_abs_diff": float(f"{max(abs(a - b) for a, b in pairs):.3g}") if pairs else None,
                    "letters_differing_at_4_decimals": len(off), "equal_to_4_decimals": bool(pairs) and not off}
        if s["prompt_eval_tokens_per_s"] and ref_speed(ref):
            s["speed_ratio_to_reference"] = round(s["prompt_eval_tokens_per_s"] / ref_speed(ref), 3)
        s["vs_reference_own_tokens"] = diff("letter_logprobs")
        s["vs_reference_same_token_ids"] = diff("letter_logprobs_reference_tokens")
        s["same_top_letter_ABCD"] = [max("ABCD", key=lambda c: p["letter_logprobs"].get(c, -1e9))
                                     == max("ABCD", key=lambda c: q["letter_logprobs"].get(c, -1e9)) for p, q in zip(rows, rr)]
    return s


def load_now() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def paired_speed(engines: dict[str, tuple[str, str]], job: dict, tmp: Path, rounds: int) -> dict:
    """Prompt-evaluation speed in rounds, the reference beside each candidate whose letter
    log-probabilities equal the reference's (only their speed decides): in each round every engine
    runs once, in an order that reverses from round to round (a load that drifts during a round
    weighs on both ends alike); a candidate's ratio is its tokens/s over the reference's in the same
    round. ``engines``: label -> (python, ENGINE); the label ``reference`` is today's path."""
    import statistics
    labels = list(engines)
    per: dict[str, list] = {k: [] for k in labels}
    loads = []
    for r in range(rounds):
        order = labels if r % 2 == 0 else labels[::-1]
        loads.append({"round": r + 1, "order": order, "load_average_before": load_now()})
        for k in order:
            py, engine = engines[k]
            s = summary(probe(py, engine, job, tmp), None)
            per[k].append(s.get("prompt_eval_tokens_per_s"))
        loads[-1]["load_average_after"] = load_now()
    out = {"rounds": rounds, "what": "prompt-evaluation tokens/s of the 8 prompts (each the faster of 2 passes), "
           "one thread; ratio = candidate / reference in the same round", "by_round": loads,
           "reference_tokens_per_s": per["reference"], "candidates": {}}
    for k in labels[1:]:
        ratios = [round(c / b, 3) for c, b in zip(per[k], per["reference"]) if c and b]
        out["candidates"][k] = {"tokens_per_s": per[k], "ratio_by_round": ratios,
                                "median_ratio": round(statistics.median(ratios), 3) if ratios else None}
    return out


def measure(specs: list[str], rows: list[dict], tmp: Path, rounds: int = 0) -> dict:
    job = decision_job()
    t0 = load_now()
    ref = probe(sys.executable, "llama_cpp", job, tmp)
    ref_load = {"load_average_before": t0, "load_average_after": load_now()}
    if ref.get("ok"):
        job["reference_tokens"] = [p["tokens"] for p in ref["prompts"]]
    res = {"prompts": "bench_llamacpp.py's: 2 development templates x R1/B4/ALL/EMPTY at r=.6, variant PSP, seed 0",
           "threads": 1, "reference": dict(summary(ref, None), engine="llama-cpp-python (today's path)", **ref_load),
           "candidates": {}}
    same: dict[str, tuple[str, str]] = {}  # the candidates whose log-probabilities equal the reference's
    for spec in specs:
        req, engine = spec.rsplit("=", 1)
        engine = engine.strip()
        row = next((r for r in rows if r["requirement"] == req), None)
        if row is None or not (row.get("loads_here") or row.get("cpu_loads_here")):
            res["candidates"][req] = {"ok": False, "error": "does not load here (see candidates)"}
            continue
        venv = tmp / ("venv_" + re.sub(r"[^A-Za-z0-9]", "_", req))
        py = str(venv / "bin" / "python")
        if not venv.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([py, "-m", "pip", "install", "-q", "numpy", *MEASURE_DEPS.get(engine, [])], check=True)
            subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", row["wheel_path"]], check=True)
        t0 = load_now()
        res["candidates"][spec] = dict(summary(probe(py, engine, job, tmp), ref), engine=engine,
                                       load_average_before=t0, load_average_after=load_now())
        if res["candidates"][spec].get("vs_reference_own_tokens", {}).get("equal_to_4_decimals"):
            same[spec] = (py, engine)
    if rounds and same:
        res["paired_speed"] = paired_speed({"reference": (sys.executable, "llama_cpp"), **same}, job, tmp, rounds)
    return res


def earlier_runs(path: Path) -> list[dict]:
    """The runs a results file holds, newest first: the file itself (its record, candidates and
    measurements) and the runs it kept. Each keeps its own record (commit, date, command, load):
    a new run adds candidates beside the earlier ones without restating their figures as its own."""
    import json
    if not path.exists():
        return []
    d = json.loads(path.read_text())
    kept = d.pop("earlier_runs", [])
    return [d, *kept]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheels", nargs="*", type=Path)
    ap.add_argument("--pypi", action="store_true", help="ask pip for a binary llama-cpp-python==0.3.36 wheel")
    ap.add_argument("--candidates", nargs="*", default=[], help="requirements to fetch (binary only) and check")
    ap.add_argument("--measure", nargs="*", default=[], help="REQ=ENGINE: measure a candidate that loads")
    ap.add_argument("--notes", default=str(HERE / "prebuilt_engine_notes.json"),
                    help="what was judged by reading a candidate (JSON: requirement -> note), recorded as is")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "prebuilt_engines.json"))
    ap.add_argument("--paired-rounds", type=int, default=0,
                    help="then N rounds of speed, the reference beside each candidate with equal log-probabilities")
    ap.add_argument("--keep-earlier", action="store_true",
                    help="keep what --out holds (each earlier run with its own record) under 'earlier_runs'")
    a = ap.parse_args(argv)
    earlier = earlier_runs(Path(a.out)) if a.keep_earlier else []
    rec = Recorder()
    res = {"host": host(), "wheels": [check_wheel(w) for w in a.wheels]}
    if a.pypi:
        res["llama_cpp_python_prebuilt"] = pypi_wheel("llama-cpp-python==0.3.36")
    if a.candidates:
        import json as _json
        notes = _json.loads(Path(a.notes).read_text()) if Path(a.notes).exists() else {}
        with tempfile.TemporaryDirectory(prefix="candidates_") as d:
            rows = [fetch_candidate(r, Path(d)) for r in a.candidates]
            for r in rows:
                if r["requirement"] in notes:
                    r["note"] = notes[r["requirement"]]
            if a.measure:
                res["measured"] = measure(a.measure, rows, Path(d), a.paired_rounds)
        for r in rows:
            r.pop("wheel_path", None)
        res["candidates"] = rows
    if earlier:
        res["earlier_runs"] = earlier
    out = rec.write(a.out, res)
    import json
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
