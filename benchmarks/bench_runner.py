"""Runner throughput with model backends (``make bench-runner``).

1. **Runner overhead**: every decision of a grid (4,560 decisions, about 4,000 distinct prompts)
   through ``openai/...``: with the HTTP transport stubbed out (the runner's own cost: prompt
   rendering, cache keys, one SQLite commit per call, asyncio workers, tenacity, parsing), end to
   end against the instant fake server (``tests/fake_openai_server.py``, its own process), the
   ``openai`` client alone against that server, and a rerun served from the cache.
2. **Concurrent vs sequential** against llama.cpp's OpenAI-compatible server
   (tests/llama_server.py: xllamacpp's llama-server, else ``python -m llama_cpp.server``; SmolLM2-135M) in
   score mode: the same prompts at concurrency 1 and 4.
3. ``--decision-modes``: the embedded model's three decision modes on the same 6 decisions.

Writes ``benchmarks/results/runner.json``. Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from crossprofile_lib.backends import get_backend  # noqa: E402
from crossprofile_lib.run.runner import RunConfig, build_requests  # noqa: E402
from crossprofile_lib.task.templates import load_templates  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, proc, limit: float = 120) -> None:
    t0 = time.time()
    while True:
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2).read()
            return
        except OSError:
            if proc.poll() is not None or time.time() - t0 > limit:
                raise RuntimeError(f"server at {url} did not start")
            time.sleep(0.2)


def _requests(backend, policies, variants, seeds, templates="templates/dev"):
    cfg = RunConfig(templates=[templates], seeds=seeds, budgets=["0.4", "0.6", "0.8"], policies=policies,
                    variants=variants)
    return [r for r, _ in build_requests(load_templates([templates]), cfg, backend)]


GRID = (["R1", "B4", "Random", "M1", "ALL", "R1:unlabeled", "B4:unlabeled"],
        ["PPP", "PPS", "PSP", "PSS", "SPP", "SPS", "SSP", "SSS"], [0, 1, 2])


async def _client_only(url: str, n: int, concurrency: int) -> float:
    """The openai client alone (no runner): n chat calls, seconds."""
    import openai
    c = openai.AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0)
    it = iter(range(n))

    async def worker():
        for i in it:
            await c.chat.completions.create(model="fake", messages=[{"role": "user", "content": f"Decision {i}"}],
                                            max_tokens=8, temperature=0)
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    s = time.perf_counter() - t0
    await c.close()
    return s


def bench_overhead(concurrency: int) -> dict:
    """Runner overhead: (a) the transport stubbed out (prompt rendering, cache keys, SQLite writes,
    asyncio workers, tenacity, parsing); (b) end to end through the openai client to the instant
    fake server in its own process; (c) the openai client alone against that server; (d) a rerun
    served from the cache."""
    from crossprofile_lib.backends.base import ChatResult
    out = {"concurrency": concurrency}
    with tempfile.TemporaryDirectory() as tmp:
        b = get_backend("openai/fake", base_url="http://127.0.0.1:9/v1", cache=tmp, concurrency=concurrency,
                        tokenizer="offline")

        async def instant(client, r):
            return ChatResult("Decision: A")
        b._send = instant
        reqs = _requests(b, *GRID)
        t0 = time.perf_counter()
        b.decide(reqs)
        s = time.perf_counter() - t0
        out["decisions"] = len(reqs)
        out["stubbed_transport"] = {"calls": b.stats["calls"], "seconds": round(s, 3),
                                    "calls_per_s": round(b.stats["calls"] / s, 1)}
    port = _free_port()
    srv = subprocess.Popen([sys.executable, str(ROOT / "tests/fake_openai_server.py"), "--port", str(port)],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    srv.stdout.readline()
    url = f"http://127.0.0.1:{port}/v1"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            b = get_backend("openai/fake", base_url=url, cache=tmp, concurrency=concurrency, tokenizer="offline")
            reqs = _requests(b, *GRID)
            t0 = time.perf_counter()
            ds = b.decide(reqs)
            s = time.perf_counter() - t0
            assert b.stats["errors"] == 0 and not any(d.invalid for d in ds)
            calls = b.stats["calls"]
            out["fake_server"] = {"calls": calls, "seconds": round(s, 3), "calls_per_s": round(calls / s, 1)}
            b2 = get_backend("openai/fake", base_url=url, cache=tmp, concurrency=concurrency, tokenizer="offline")
            t0 = time.perf_counter()
            b2.decide(reqs)
            s = time.perf_counter() - t0
            assert b2.stats["calls"] == 0
            out["rerun_from_cache"] = {"decisions": len(reqs), "seconds": round(s, 3),
                                       "decisions_per_s": round(len(reqs) / s, 1)}
        s = asyncio.run(_client_only(url, calls, concurrency))
        out["openai_client_only"] = {"calls": calls, "seconds": round(s, 3), "calls_per_s": round(calls / s, 1)}
    finally:
        srv.kill()
        srv.wait()
    return out


def bench_llama_server(n_prompts: int, concurrencies=(1, 4), repeats: int = 2) -> dict:
    """The same score-mode prompts at each concurrency, interleaved (1, 4, 1, 4, ...) after one
    warm-up call, so load drifts on a shared machine hit both alike; the median is reported."""
    from crossprofile_lib.backends.llamacpp import model_path
    gguf = str(model_path("smollm2-135m"))
    port = _free_port()
    threads = os.cpu_count() or 1
    sys.path.insert(0, str(ROOT / "tests"))
    import llama_server  # a real llama.cpp server: xllamacpp's llama-server, else llama_cpp.server
    if llama_server.KIND is None:
        raise SystemExit(llama_server.MISSING)
    srv = subprocess.Popen(llama_server.command(gguf, port, n_threads=threads),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    out = {"prompts": n_prompts, "mode": "score", "server": llama_server.KIND, "server_threads": threads, "runs": []}
    try:
        _wait(url, srv)
        kw = dict(base_url=url, decision_mode="score", chat_template=f"gguf:{gguf}", tokenizer=f"gguf:{gguf}")
        b = get_backend("openai/smollm2-135m", concurrency=1, cache=":memory:", **kw)
        reqs = _requests(b, ["R1", "B4", "ALL"], ["PSP", "SPS"], [0, 1],
                         templates="templates/dev/dev-hospital-01.yaml")[:n_prompts]
        b.decide(reqs[:1])  # warm-up
        for _ in range(repeats):
            for c in concurrencies:
                b = get_backend("openai/smollm2-135m", concurrency=c, cache=":memory:", **kw)
                t0 = time.perf_counter()
                b.decide(reqs)
                s = time.perf_counter() - t0
                out["runs"].append({"concurrency": c, "calls": b.stats["calls"], "seconds": round(s, 2)})
    finally:
        srv.terminate()
        srv.wait(20)
    import statistics
    out["median_calls_per_s"] = {
        str(c): round(statistics.median(r["calls"] / r["seconds"] for r in out["runs"] if r["concurrency"] == c), 3)
        for c in concurrencies}
    return out


def bench_decision_modes() -> dict:
    """The embedded model in each decision mode on the same 6 decisions (the measurement quoted in
    :mod:`crossprofile_lib.backends.llamacpp`): invalid answers, letters chosen, time."""
    cfg = RunConfig(templates=["templates/dev/dev-hospital-01.yaml", "templates/dev/dev-bus-route-01.yaml",
                               "templates/dev/dev-it-vendor-01.yaml"],
                    seeds=[0], budgets=["0.6"], policies=["R1", "ALL"], variants=["PSP"])
    from crossprofile_lib.run.runner import run_grid
    out = {}
    for mode in ("score", "grammar", "generate"):
        b = get_backend("llamacpp/smollm2-135m", decision_mode=mode, cache=":memory:")
        c, w = time.process_time(), time.perf_counter()
        df = run_grid(cfg, b)
        out[mode] = {"decisions": len(df), "invalid": int(df.invalid.sum()),
                     "format_retries": int(df.format_retry.sum()), "correct": int(df.correct.sum()),
                     "letters": df.decision_letter.tolist(), "model_calls": b.stats["calls"],
                     "wall_s": round(time.perf_counter() - w, 1), "cpu_s": round(time.process_time() - c, 1)}
        print(mode, out[mode], flush=True)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--llama-prompts", type=int, default=12, help="prompts for the llama.cpp server part (0: skip)")
    p.add_argument("--decision-modes", action="store_true", help="also compare the embedded model's decision modes")
    p.add_argument("--out", default=str(ROOT / "benchmarks/results/runner.json"))
    a = p.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from record import Recorder
    rec = Recorder()
    res = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                       "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    res["runner_overhead"] = bench_overhead(a.concurrency)
    print(json.dumps(res["runner_overhead"], indent=2), flush=True)
    if a.llama_prompts:
        res["llama_server"] = bench_llama_server(a.llama_prompts)
        print(json.dumps(res["llama_server"], indent=2), flush=True)
    if a.decision_modes:
        res["embedded_decision_modes"] = bench_decision_modes()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    rec.write(a.out, res)
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
