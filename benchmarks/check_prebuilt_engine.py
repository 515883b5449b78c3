"""Can a prebuilt llama.cpp wheel replace the compiled llama-cpp-python here? (issue 26.1)

For each wheel file given: its platform tag, the newest glibc / libstdc++ symbol versions its
shared libraries require (``objdump -T``), this machine's glibc, and whether its libraries load
(each in a fresh process). A wheel whose libraries do not load cannot be measured further: the
decision-letter log-probabilities, the features the suite uses (last-position scores, grammar,
chat template, tokenization) and the speed (``benchmarks/bench_llamacpp.py``) are compared only
for a wheel that loads. ``--pypi`` also asks the registry (pip, binary only) whether
llama-cpp-python itself has a prebuilt wheel for this platform.

    python benchmarks/check_prebuilt_engine.py WHEEL [WHEEL ...] [--pypi]

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
           "license": field(pkg_meta, "License"), "tags": [ln.split(":", 1)[1].strip() for ln in wheel_meta.splitlines()
                                                            if ln.startswith("Tag:")],
           "bytes": wheel.stat().st_size, "libraries": {}}
    for n in libs:
        so = tmp / n
        out["libraries"][n] = dict(symbol_needs(so), load_error=load_error(so))
    out["loads_here"] = bool(libs) and all(v["load_error"] is None for v in out["libraries"].values())
    return out


def pypi_wheel(requirement: str) -> dict:
    """Whether pip finds a binary wheel of ``requirement`` for this interpreter and platform."""
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", d,
                            requirement], capture_output=True, text=True, timeout=600)
        files = sorted(os.listdir(d))
    return {"requirement": requirement, "binary_wheel_found": r.returncode == 0, "files": files,
            "pip_says": (r.stderr.strip().splitlines() or [""])[-1][-300:]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheels", nargs="*", type=Path)
    ap.add_argument("--pypi", action="store_true", help="ask pip for a binary llama-cpp-python==0.3.36 wheel")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "prebuilt_engines.json"))
    a = ap.parse_args(argv)
    rec = Recorder()
    res = {"host": host(), "wheels": [check_wheel(w) for w in a.wheels]}
    if a.pypi:
        res["llama_cpp_python_prebuilt"] = pypi_wheel("llama-cpp-python==0.3.36")
    out = rec.write(a.out, res)
    import json
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
