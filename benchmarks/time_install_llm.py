"""How long ``make install-llm`` takes with an EMPTY pip cache (issue 36.2): the recipe's own pip commands, read
from the Makefile, run in a fresh virtualenv with a fresh ``PIP_CACHE_DIR`` (every wheel downloaded; nothing
can come from an earlier build). The engines have no dependencies, so the base install ``make install`` puts
under them is left out; it is timed by ``benchmarks/fresh_machine.sh``.

    python benchmarks/time_install_llm.py

Writes ``benchmarks/results/install_llm.json`` (each command's wall seconds, whether anything compiled).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from record import Recorder  # noqa: E402


def recipe() -> list[str]:
    mk = (ROOT / "Makefile").read_text()
    body = mk[mk.index("$(LLM_STAMP): $(STAMP)"):mk.index("install-llm: $(LLM_STAMP)")]
    return [ln.strip() for ln in body.splitlines()[1:] if ln.startswith("\t$(PIP) install")]


def main() -> int:
    rec = Recorder()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        env = {**os.environ, "PIP_CACHE_DIR": str(Path(tmp) / "pip-cache")}
        for line in recipe():
            args = line.replace("$(PIP)", f"{venv}/bin/python -m pip").replace("$(CONSTRAINTS)", "-c constraints.txt")
            t0 = time.perf_counter()
            p = subprocess.run(args, shell=True, cwd=ROOT, env=env, capture_output=True, text=True)
            rows.append({"command": line, "wall_s": round(time.perf_counter() - t0, 1), "rc": p.returncode,
                         "compiled": bool(re.search(r"Building wheel", p.stdout + p.stderr))})
            if p.returncode:
                print(p.stdout[-2000:], p.stderr[-2000:])
                break
        freeze = subprocess.run([f"{venv}/bin/python", "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    out = rec.write(ROOT / "benchmarks/results/install_llm.json",
                    {"pip_cache": "empty (fresh PIP_CACHE_DIR)", "commands": rows,
                     "total_wall_s": round(sum(r["wall_s"] for r in rows), 1),
                     "compiled_anything": any(r["compiled"] for r in rows), "installed": freeze.split()})
    print(out)
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
