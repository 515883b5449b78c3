"""The embedded engine's compile (``make install-llm`` where pip's cache has no llama-cpp-python wheel), with and
without llama.cpp's "common" library (``scripts/llama_cpp_no_common.cmake``): the CPU each build takes and whether
the libraries the Python package loads (``llama_cpp/lib``) come out with the same machine code.

    python benchmarks/compile_engine.py [--sdist PATH] [--jobs 1] [--out benchmarks/results/compile_engine.json]

Both wheels are built at once, one compile job each by default, so that they share the machine alike; the CPU of
each is its process tree's user + system time (``os.wait4``). The comparison is of the ``.text``
section (``objcopy``) of each library both wheels have: the files differ elsewhere only in the build folder's
name compiled into messages. ``--builds default,no_common,make`` adds ``make install-llm``'s flags.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import ROOT, Recorder  # noqa: E402

VERSION = "0.3.36"
NO_COMMON = ROOT / "scripts" / "llama_cpp_no_common.cmake"
FLAGS = {"default": "-DGGML_NATIVE=OFF",
         "no_common": f"-DGGML_NATIVE=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE={NO_COMMON}",
         # make install-llm's flags: also without libmtmd (multimodal chat handlers, imported only for image input)
         "make": f"-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE={NO_COMMON}"}


def sdist(work: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q",
                    f"llama-cpp-python=={VERSION}", "-d", str(work)], check=True)
    return next(work.glob("llama_cpp_python-*.tar.gz"))


def text_digests(wheel: Path, work: Path) -> dict:
    """sha256 of the .text section of each shared library under llama_cpp/lib (the ones the package loads)."""
    out = {}
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(n for n in z.namelist() if n.startswith("llama_cpp/lib/") and ".so" in n):
            lib = work / Path(name).name
            lib.write_bytes(z.read(name))
            sec = work / (lib.name + ".text")
            subprocess.run(["objcopy", "-O", "binary", "--only-section=.text", str(lib), str(sec)], check=True)
            out[Path(name).name] = hashlib.sha256(sec.read_bytes()).hexdigest()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdist", type=Path, default=None, help="llama-cpp-python's source archive (default: pip download)")
    ap.add_argument("--jobs", type=int, default=1, help="compile jobs per build (default 1)")
    ap.add_argument("--builds", default="default,no_common", help=f"comma-separated, of {','.join(FLAGS)} "
                    "(default: default,no_common); each compared with the first")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "compile_engine.json")
    a = ap.parse_args()
    names = a.builds.split(",")
    if len(names) < 2 or not set(names) <= set(FLAGS):
        ap.error(f"--builds: two or more of {','.join(FLAGS)}")
    rec = Recorder()
    with tempfile.TemporaryDirectory(prefix="compile-engine-") as tmp:
        work = Path(tmp)
        src = a.sdist or sdist(work)
        procs, started = {}, time.monotonic()
        for name in names:
            flags = FLAGS[name]
            (work / name).mkdir()
            env = dict(os.environ, CMAKE_ARGS=flags, CMAKE_BUILD_PARALLEL_LEVEL=str(a.jobs))
            log = open(work / f"{name}.log", "w")
            procs[name] = subprocess.Popen([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir",
                                            str(src), "-w", str(work / name)], env=env, stdout=log, stderr=log)
        builds, ended = {}, {}
        while len(ended) < len(procs):  # each build as it ends: its own wall time and process tree's CPU
            pid, status, ru = os.wait4(-1, 0)
            name = next((n for n, p in procs.items() if p.pid == pid), None)
            if name is not None:
                ended[name] = (status, ru, time.monotonic() - started)
        for name, p in procs.items():
            status, ru, wall = ended[name]
            p.returncode = os.waitstatus_to_exitcode(status)
            wheel = next((work / name).glob("*.whl"), None)
            builds[name] = {"cmake_args": FLAGS[name].replace(str(ROOT), "<checkout>"), "exit": p.returncode,
                            "cpu_s": round(ru.ru_utime + ru.ru_stime, 1), "user_s": round(ru.ru_utime, 1),
                            "wall_s": round(wall, 1),
                            "wheel_files": sorted(zipfile.ZipFile(wheel).namelist()) if wheel else None}
            if wheel:
                (work / f"{name}-libs").mkdir()
                builds[name]["text_sha256"] = text_digests(wheel, work / f"{name}-libs")
            if p.returncode:
                print((work / f"{name}.log").read_text()[-3000:], file=sys.stderr)
        base = builds[names[0]]
        compared = {}
        for name in names[1:]:
            b = builds[name]
            libs = sorted(set(base.get("text_sha256") or {}) & set(b.get("text_sha256") or {}))
            compared[name] = {
                "libraries_compared": libs,
                "same_machine_code": bool(libs) and all(base["text_sha256"][x] == b["text_sha256"][x] for x in libs),
                "libraries_left_out": sorted(set(base.get("text_sha256") or {}) - set(b.get("text_sha256") or {})),
                "files_left_out": sorted(set(base["wheel_files"] or []) - set(b["wheel_files"] or [])),
                "cpu_saved_share": round(1 - b["cpu_s"] / base["cpu_s"], 3) if base["cpu_s"] else None}
        for b in builds.values():
            b.pop("wheel_files")
        figures = {"llama_cpp_python": VERSION, "jobs_per_build": a.jobs, "builds": builds,
                   f"against_{names[0]}": compared}
    rec.write(a.out, figures)
    for name, c in compared.items():
        print(f"{name}: {builds[name]['cpu_s']} CPU-s against {base['cpu_s']} ({names[0]}); same machine code in "
              f"{len(c['libraries_compared'])} libraries: {c['same_machine_code']}; left out: {c['libraries_left_out']}")
    ok = all(c["same_machine_code"] for c in compared.values()) and not any(b["exit"] for b in builds.values())
    return 0 if ok else 1

if __name__ == "__main__":
    sys.exit(main())
