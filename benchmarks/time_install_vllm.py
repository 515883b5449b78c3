"""What the vLLM path costs on this machine kind (issue 50): ``make install-vllm`` with an EMPTY pip cache into a
fresh folder (every wheel downloaded, torch 2.13.0+cpu from the machine's local wheels), the size of the
environment, the SmolLM2 conversion (``crossprofile hf-folder`` into a fresh folder), and a vLLM server's start to its
first ``GET /v1/models`` answer (tests/vllm_server.py, the tests' settings), each timed once.

    python benchmarks/time_install_vllm.py

Writes ``benchmarks/results/install_vllm.json``. The machine is shared: the load average is recorded beside the
figures, never adjusted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from record import Recorder  # noqa: E402


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def main() -> int:
    rec = Recorder()
    res: dict = {"pip_cache": "empty (fresh PIP_CACHE_DIR)"}
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv-vllm"
        env = {**os.environ, "PIP_CACHE_DIR": str(Path(tmp) / "pip-cache")}
        t0 = time.perf_counter()
        p = subprocess.run(["make", "--no-print-directory", "install-vllm", f"VLLM_VENV={venv}"], cwd=ROOT, env=env,
                           capture_output=True, text=True)
        res["install"] = {"command": "make install-vllm VLLM_VENV=<fresh folder>", "rc": p.returncode,
                          "wall_s": round(time.perf_counter() - t0, 1),
                          # what pip cached: wheels from this machine kind's local indexes (file://) are not cached
                          "pip_cache_mb": round(_du(Path(tmp) / "pip-cache") / 2**20),
                          "environment_mb": round(_du(venv) / 2**20)}
        if p.returncode:
            print(p.stdout[-3000:], p.stderr[-3000:])
        else:
            os.environ["CROSSPROFILE_VLLM_PYTHON"] = str(venv / "bin" / "python")
            import vllm_server as V
            models = Path(tmp) / "models"
            t0 = time.perf_counter()
            c = subprocess.run([str(venv / "bin" / "python"), "-m", "crossprofile_lib.cli", "hf-folder", "--out",
                                str(models)], cwd=ROOT, env=V.env(), capture_output=True, text=True)
            folder = Path(c.stdout.strip().splitlines()[-1]) if c.returncode == 0 else None
            res["convert_smollm2"] = {"command": "crossprofile hf-folder --out <fresh folder>", "rc": c.returncode,
                                      "wall_s": round(time.perf_counter() - t0, 1),
                                      "folder_mb": round(_du(folder) / 2**20) if folder else None}
            if folder:
                t0 = time.perf_counter()
                with V.serve(folder, "smollm2-135m", Path(tmp) / "server.log"):
                    res["server_start"] = {"command": "python -m vllm.entrypoints.openai.api_server (tests/vllm_server.py "
                                                      "settings)", "first_models_answer_s": round(time.perf_counter() - t0, 1)}
        shutil.rmtree(venv, ignore_errors=True)
    out = rec.write(ROOT / "benchmarks/results/install_vllm.json", res)
    print(out)
    return 0 if res["install"]["rc"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
