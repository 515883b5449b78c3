"""The GPU path without a GPU (issue 26.5): how many calls the paper's design makes per model, and
how fast the runner sends calls to an instant stand-in server.

1. **Count**: :func:`crossprofile_lib.run.plan.call_plan` on the paper's full design (60 formal
   templates x 8 variants x 3 seeds, every policy and control of the grid plus B3, budgets
   0.4/0.6/0.8 and 128t): the runner's own request builders against a counting backend, so the
   figures are the relevance-filter, B3 and decision calls a fresh run sends to one model.
2. **Rate**: every distinct decision call of a grid (the runner benchmark's: 10 development
   templates x 8 variants x 3 seeds x 7 policies x 3 budgets, about 4,000 calls) sent by
   ``openai/...`` end to end (prompts, cache keys, SQLite commits, the ``openai`` client, HTTP,
   parsing) to instant fake servers (``tests/fake_openai_server.py``, each its own process), with
   a fresh call cache each time:

   * one process, one server, concurrency 64 and 256;
   * one process, two base URLs (``--base-url URL1,URL2``: the backend spreads calls over them);
   * two processes at once, each half of the templates, both with the same two base URLs, one
     shared cache folder (what a user runs as two ``crossprofile run`` commands on disjoint
     ``--templates`` with the same ``--base-url URL1,URL2`` into the same ``CROSSPROFILE_CACHE``),
     then the whole grid again from that cache (the base URLs are part of a call's cache key, so
     the processes and the final run must name the same list);
   * the ``openai`` client alone against one server (no runner): the client's own ceiling;
   * the in-process vLLM engine (``vllm/...``) with an instant stand-in for ``vllm.LLM`` (the
     fake module of ``tests/test_backend_vllm.py``): every prompt of the grid goes to the engine
     in one ``generate`` call, no HTTP, so this is the runner's own cost on that path.

   On this 2-core machine the fake servers and the runner processes share the same two cores,
   so several processes can add at most what the cores leave; on a client machine with more
   cores each process adds its own rate.

    python benchmarks/bench_gpu_path.py [--skip-count]

Writes ``benchmarks/results/gpu_path.json`` (with the commit, date, load average and command:
``benchmarks/record.py``). Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from bench_runner import GRID, _client_only, _free_port, _requests  # noqa: E402
from record import Recorder  # noqa: E402

from crossprofile_lib.backends import get_backend  # noqa: E402

DEV = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "templates" / "dev").glob("*.yaml"))


def _server() -> tuple[subprocess.Popen, str]:
    port = _free_port()
    # a vLLM stand-in: vLLM's tokenize endpoint (budgets are priced by the served model's tokenizer, as a real
    # run's are) and owned_by vllm in GET /v1/models
    srv = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fake_openai_server.py"), "--port", str(port),
                            "--tokenize", "vllm", "--owned-by", "vllm"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    srv.stdout.readline()  # the server prints one line when it listens
    return srv, f"http://127.0.0.1:{port}/v1"


def _grid_requests(backend, templates: list[str]):
    out = []
    for t in templates:
        out += _requests(backend, *GRID, templates=t)
    return out


def send(urls: list[str], templates: list[str], concurrency: int, cache: str) -> dict:
    """Every decision of the grid on ``templates`` through ``openai/fake`` to ``urls``: calls, the
    decide() interval (time.time() at start and end) and calls/s."""
    b = get_backend("openai/fake", base_url=",".join(urls), cache=cache, concurrency=concurrency)
    reqs = _grid_requests(b, templates)
    t0 = time.time()
    ds = b.decide(reqs)
    t1 = time.time()
    assert b.stats["errors"] == 0 and not any(d.invalid for d in ds), dict(b.stats)
    return {"decisions": len(reqs), "calls": int(b.stats["calls"]), "cached": int(b.stats["cached"]),
            "start": t0, "end": t1, "seconds": round(t1 - t0, 3), "calls_per_s": round(b.stats["calls"] / (t1 - t0), 1)}


def one_process(urls: list[str], concurrency: int) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        r = send(urls, DEV, concurrency, cache)
    return {k: v for k, v in r.items() if k not in ("start", "end")} | {"servers": len(urls), "concurrency": concurrency}


def processes(urls: list[str], concurrency: int) -> dict:
    """Two runner processes at once, half the templates each, both with every base URL, one shared
    cache; then the whole grid from that cache in one process (same base URLs: same cache keys)."""
    shards = [DEV[i::len(urls)] for i in range(len(urls))]
    with tempfile.TemporaryDirectory() as cache:
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(
            {"urls": urls, "templates": s, "concurrency": concurrency, "cache": cache})], stdout=subprocess.PIPE,
            text=True, cwd=ROOT) for s in shards]
        outs = []
        for p in procs:
            out, _ = p.communicate()
            assert p.returncode == 0, f"worker failed ({p.returncode})"
            outs.append(json.loads(out.strip().splitlines()[-1]))
        calls = sum(o["calls"] for o in outs)
        span = max(o["end"] for o in outs) - min(o["start"] for o in outs)
        rerun = send(urls, DEV, concurrency, cache)
    return {"processes": len(urls), "servers": len(urls), "concurrency_each": concurrency, "calls": calls,
            "seconds": round(span, 3), "calls_per_s": round(calls / span, 1),
            "per_process_calls_per_s": [o["calls_per_s"] for o in outs],
            "rerun_from_shared_cache": {"decisions": rerun["decisions"], "calls": rerun["calls"],
                                        "seconds": rerun["seconds"],
                                        "decisions_per_s": round(rerun["decisions"] / rerun["seconds"], 1)}}


def in_process_vllm() -> dict:
    """Every decision through ``vllm/...`` with an instant stand-in engine (no GPU, no HTTP)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_backend_vllm import make_fake_vllm
    mod = make_fake_vllm()
    sys.modules["vllm"], sys.modules["vllm.sampling_params"] = mod, mod.sampling_params
    try:
        with tempfile.TemporaryDirectory() as cache:
            b = get_backend("vllm//models/stand-in", cache=cache)
            reqs = _grid_requests(b, DEV)
            t0 = time.perf_counter()
            b.decide(reqs)
            s = time.perf_counter() - t0
            eng = mod.LLM.instances[-1]
            return {"decisions": len(reqs), "calls": int(b.stats["calls"]), "engine_generate_calls": len(eng.calls),
                    "seconds": round(s, 3), "calls_per_s": round(b.stats["calls"] / s, 1)}
    finally:
        sys.modules.pop("vllm", None)
        sys.modules.pop("vllm.sampling_params", None)


#: where a call's client-side time goes, by the package its code lives in (cProfile's own time per function)
TIME_GROUPS = (("the openai client", ("/openai/",)), ("httpx, httpcore, anyio, h11 (HTTP)", ("/httpx", "/httpcore",
               "/anyio/", "/h11/")), ("asyncio and sockets", ("asyncio/", "selectors.py", "socket.py", "ssl.py")),
               ("pydantic (parsing the answers)", ("/pydantic",)), ("the suite (prompts, cache keys, parsing)",
               ("crossprofile_lib",)), ("SQLite (the call cache)", ("sqlite3",)))


def where_the_time_goes(url: str) -> dict:
    """One process, one server, concurrency 64, under cProfile: each group's share of the runner's own CPU time
    (the server is another process)."""
    import cProfile
    import pstats
    prof = cProfile.Profile()
    with tempfile.TemporaryDirectory() as cache:
        prof.enable()
        r = send([url], DEV, 64, cache)
        prof.disable()
    st = pstats.Stats(prof)
    own = {}
    for (file, _, name), (_, _, tt, _, _) in st.stats.items():
        if file == "~":  # a builtin: by what it is (a socket's send is the kernel's loopback write)
            group = ("asyncio and sockets" if any(k in name for k in ("socket", "select", "poll", "getpeername"))
                     else "SQLite (the call cache)" if "sqlite3" in name else "other (Python builtins, json, typing)")
        else:
            group = next((g for g, keys in TIME_GROUPS if any(k in file for k in keys)),
                         "other (Python builtins, json, typing)")
        own[group] = own.get(group, 0.0) + tt
    total = sum(own.values())
    return {"calls": r["calls"], "calls_per_s_under_profiler": r["calls_per_s"],
            "share_of_runner_cpu": {g: round(t / total, 3) for g, t in sorted(own.items(), key=lambda x: -x[1])}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-count", action="store_true", help="skip the call count (minutes on a loaded machine)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--only", default="", help="comma-separated rate configurations to (re)measure; the others are "
                                                "kept from the existing results file")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu_path.json"))
    a = ap.parse_args(argv)
    if a.worker:  # one runner process of the 'processes' measurement
        w = json.loads(a.worker)
        print(json.dumps(send(w["urls"], w["templates"], w["concurrency"], w["cache"])), flush=True)
        return 0
    rec = Recorder()
    res: dict = {}
    old = json.loads(Path(a.out).read_text()) if Path(a.out).exists() else {}
    if a.skip_count and "paper_design_calls_per_model" in old:  # keep the earlier count, with its own record
        res["paper_design_calls_per_model"] = old["paper_design_calls_per_model"]
        res["count_record"] = old.get("count_record", old.get("record"))
    if not a.skip_count:
        from crossprofile_lib.run.plan import call_plan
        res["paper_design_calls_per_model"] = {"generate": call_plan(decision_mode="generate")}
        print(json.dumps(res, indent=1), flush=True)
    servers = [_server() for _ in range(2)]
    urls = [u for _, u in servers]
    try:
        def client_only(n=4024, c=64):
            s = asyncio.run(_client_only(urls[0], n, c))
            return {"calls": n, "concurrency": c, "seconds": round(s, 3), "calls_per_s": round(n / s, 1)}

        rate = dict(old.get("rate_against_instant_fake_servers", {})) if a.only else {}
        if a.only:  # the kept configurations keep their run's record; the new ones get theirs in rate_records
            res["kept_rates_record"] = old.get("kept_rates_record", old.get("record"))
            res["rate_records"] = dict(old.get("rate_records", {}))
        for name, fn in (("one_process_one_server_c64", lambda: one_process(urls[:1], 64)),
                         ("one_process_one_server_c256", lambda: one_process(urls[:1], 256)),
                         ("one_process_two_base_urls_c256", lambda: one_process(urls, 256)),
                         ("two_processes_two_base_urls_c128_each", lambda: processes(urls, 128)),
                         ("openai_client_only_c64", client_only),
                         ("in_process_vllm_stand_in", in_process_vllm),
                         ("where_the_time_goes_one_server_c64", lambda: where_the_time_goes(urls[0]))):
            if a.only and name not in a.only.split(","):
                continue
            if a.only:
                res["rate_records"][name] = rec.header()
            try:
                rate[name] = fn()
            except Exception as e:  # a configuration that fails (e.g. connect timeouts under load) is recorded
                rate[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
            print(name, json.dumps(rate[name]), flush=True)
        res["rate_against_instant_fake_servers"] = rate
    finally:
        for srv, _ in servers:
            srv.kill()
            srv.wait()
    out = rec.write(a.out, res)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
