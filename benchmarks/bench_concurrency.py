"""Concurrency against a queueing server: fixed limits against the ``auto`` rule (issue 28.6).

The fake OpenAI-compatible server (``tests/fake_openai_server.py``, its own process) works on at
most ``capacity`` requests at once, each for ``latency`` seconds, and queues the rest, as a busy
model server does (a llama.cpp server has capacity 1 per slot, vLLM a batch of sequences). For
each capacity the same calls (distinct prompts) go through ``openai/...`` with a fixed concurrency
(8, 32, 256) and with ``concurrency=auto`` (the per-URL AIMD rule of
:mod:`crossprofile_lib.backends.concurrency`), with a client timeout that a long queue exceeds.
Reported per case: calls per second, median and 95th-percentile latency of the answered attempts,
retries (each a timed-out attempt whose work the server did anyway), failed calls, and where the
auto rule's limit ended. The ideal rate is ``capacity / latency``.

Writes ``benchmarks/results/concurrency.json`` (commit, date, load, command). Speed is measured
here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from crossprofile_lib.backends import get_backend  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from record import Recorder  # noqa: E402

from crossprofile_lib.backends.base import ChatRequest  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(capacity: int, latency: float):
    port = _free_port()
    p = subprocess.Popen([sys.executable, str(ROOT / "tests/fake_openai_server.py"), "--port", str(port),
                          "--capacity", str(capacity), "--latency-s", str(latency)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    p.stdout.readline()
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(100):
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2).read()
            break
        except OSError:
            time.sleep(0.1)
    return p, url


def _requests(n: int, tag: str) -> list:
    return [ChatRequest(({"role": "user", "content": f"[{tag}] Call {i}: which option? Decision: A, B or C."},),
                        max_tokens=16) for i in range(n)]


def one_case(capacity: int, latency: float, concurrency, n: int, timeout: float) -> dict:
    p, url = _serve(capacity, latency)
    try:
        b = get_backend("openai/fake", base_url=url, cache=":memory:", tokenizer="offline", concurrency=concurrency,
                        timeout=timeout, max_retries=3, retry_wait=0.2, retry_wait_max=2.0, circuit_breaker=0)
        reqs = _requests(n, f"{capacity}-{concurrency}-{time.time()}")
        t0 = time.perf_counter()
        res = b.chat(reqs)
        secs = time.perf_counter() - t0
    finally:
        p.kill()
        p.wait()
    ok = [r.latency_s for r in res if r.error is None]
    rec = b.record()["concurrency"]
    out = dict(capacity=capacity, latency_s=latency, concurrency=concurrency, calls=n, seconds=round(secs, 2),
               calls_per_s=round(n / secs, 1), ideal_calls_per_s=round(capacity / latency, 1),
               p50_latency_s=round(float(np.median(ok)), 3) if ok else None,
               p95_latency_s=round(float(np.percentile(ok, 95)), 3) if ok else None,
               retries=int(b.stats["retries"]), failed=int(b.stats["errors"]))
    if rec["mode"] == "auto":
        u = rec["per_url"][0]
        out.update(auto_final_limit=u["final"], auto_peak_limit=u["peak"], auto_overloads=u["overloads"],
                   auto_queueing_signals=u["queueing"])
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capacities", default="8,48")
    ap.add_argument("--latency", type=float, default=0.25)
    ap.add_argument("--calls", type=int, default=600)
    ap.add_argument("--timeout", type=float, default=5.0, help="client timeout per request (s)")
    ap.add_argument("--concurrency", default="8,32,256,auto")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/concurrency.json"))
    a = ap.parse_args(argv)
    rec = Recorder(command="python benchmarks/bench_concurrency.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    cases = []
    for cap in [int(x) for x in a.capacities.split(",")]:
        for c in a.concurrency.split(","):
            c = c if c == "auto" else int(c)
            r = one_case(cap, a.latency, c, a.calls, a.timeout)
            print(json.dumps(r), flush=True)
            cases.append(r)
    rec.write(a.out, dict(settings=dict(latency_s=a.latency, calls=a.calls, client_timeout_s=a.timeout,
                                         max_retries=3), cases=cases))
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
