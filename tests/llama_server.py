"""A real local llama.cpp OpenAI-compatible server for the tests that need one (127.0.0.1 only).

* ``xllamacpp`` (preferred; a prebuilt wheel, installed by ``make install-llm``): llama.cpp's own C++
  server (``llama-server``) in-process, started by this file as a script: ``python tests/llama_server.py
  --model GGUF --port N [--n_ctx 4096] [--n_threads T] [--api_key KEY]``. Flash attention off, as the
  embedded engine, one slot; its default repetition penalty is set to llama-cpp-python's server's 1.1
  (llama-server's own is 1.0), so the tests that pin the paper's sampling still see a default to override.
* ``llama-cpp-python`` (``python -m llama_cpp.server``) where xllamacpp is absent.

:func:`command` gives the command line, :data:`KIND` the one used, :data:`TOKENIZE_KIND` the kind of
tokenize endpoint the suite finds there (``server:<kind>:<model>``).
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
import threading
from pathlib import Path

KIND = ("xllamacpp" if importlib.util.find_spec("xllamacpp") else
        "llama-cpp-python" if importlib.util.find_spec("llama_cpp") else None)
TOKENIZE_KIND = {"xllamacpp": "llama.cpp", "llama-cpp-python": "llama-cpp-python", None: None}[KIND]
MISSING = "no real llama.cpp server is installed (xllamacpp: make install-llm; or llama-cpp-python[server])"


def command(gguf: str, port: int, n_ctx: int = 4096, n_threads: int | None = None, api_key: str | None = None,
            alias: str = "smollm2-135m") -> list[str]:
    """The server's command line; ``alias``: the name the tests' backend uses (``openai/smollm2-135m``), served
    beside the file name (the suite refuses a name the server does not serve)."""
    if KIND == "xllamacpp":
        cmd = [sys.executable, str(Path(__file__).resolve()), "--model", gguf, "--port", str(port), "--n_ctx", str(n_ctx),
               "--alias", alias]
    else:
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1", "--port", str(port),
               "--n_ctx", str(n_ctx), "--n_batch", "512", "--verbose", "False", "--model_alias", alias]
    if n_threads:
        cmd += ["--n_threads", str(n_threads)] + (["--n_threads_batch", str(n_threads)] if KIND != "xllamacpp" else [])
    return cmd + (["--api_key", api_key] if api_key else [])


def serve() -> None:
    import xllamacpp as x
    ap = argparse.ArgumentParser(description="llama.cpp's server (xllamacpp) on 127.0.0.1")
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--n_ctx", type=int, default=4096)
    ap.add_argument("--n_threads", type=int, default=None)
    ap.add_argument("--api_key", default=None)
    ap.add_argument("--alias", default=None, help="another name the model is served under (GET /v1/models)")
    a = ap.parse_args()
    p = x.CommonParams()
    p.model.path = a.model
    p.model_alias = {Path(a.model).name} | ({a.alias} if a.alias else set())
    p.hostnames, p.port = ["127.0.0.1"], a.port
    p.n_ctx, p.n_batch, p.n_ubatch, p.n_parallel = a.n_ctx, 512, 512, 1
    if a.n_threads:
        p.cpuparams.n_threads = p.cpuparams_batch.n_threads = a.n_threads
    p.flash_attn_type = x.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
    p.sampling.penalty_repeat = 1.1
    p.warmup = False
    if a.api_key:
        p.api_keys = [a.api_key]
    srv = x.Server(p)
    print(f"listening on {srv.listening_address}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()


if __name__ == "__main__":
    serve()
