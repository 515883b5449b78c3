"""The embedded model at its limit (issue 17.3): the runner vs a lean bare llama-cpp-python loop.

Paired and interleaved: every repetition runs each configuration once, in rotating order, on the
SAME decision prompts (dev templates, variant PSP, seed 0, R1/B4/ALL/EMPTY at r = .6), and the
figures are min and median seconds over repetitions plus the machine's load average before and
after. Configurations:

* ``lean``: a bare loop over llama-cpp-python: ``logits_all=False``, ``eval`` with the longest
  common prefix kept, the last position's logits, log-sum-exp, the option letters' tokens. Same
  prompt order as the runner (sorted by prompt text).
* ``runner``: ``LlamaCppBackend.decide`` on the same decision requests with a fresh call cache
  (prompt rendering, cache keys and writes, parsing included).
* ``old``: the previous score path (``logits_all=True`` + ``create_completion(logprobs=20)``,
  prompts in the runner's task order), for the record.
* ``runner-2t``: the runner with ``n_threads=2`` (the old default on this machine).

    python benchmarks/bench_llamacpp.py [--reps 3] [--templates 2]

Writes ``benchmarks/results/llamacpp.json``. Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

from crossprofile_lib.backends import get_backend  # noqa: E402
from crossprofile_lib.backends.llm import TOP_LOGPROBS, choice_logprobs  # noqa: E402
from crossprofile_lib.run.runner import RunConfig, build_requests  # noqa: E402
from crossprofile_lib.task.templates import load_templates  # noqa: E402


def _requests(backend, n_templates: int):
    cfg = RunConfig(templates=["templates/dev"], seeds=[0], budgets=["0.6"],
                    policies=["R1", "B4", "ALL", "EMPTY"], variants=["PSP"])
    ts = load_templates(["templates/dev"])[:n_templates]
    return [r for r, _ in build_requests(ts, cfg, backend)]


def lean_loop(path: str, prompts: list[str], letters: list[tuple[str, ...]], n_threads: int = 1) -> list[str]:
    from llama_cpp import Llama
    ll = Llama(model_path=path, n_ctx=1024, n_batch=512, n_threads=n_threads, n_threads_batch=n_threads,
               logits_all=False, seed=0, verbose=False)
    n_vocab = ll.n_vocab()
    text = [ll.detokenize([i]).decode("utf-8", errors="ignore").strip() for i in range(n_vocab)]
    ids = {c: np.array([i for i, t in enumerate(text) if t == c]) for c in "ABCDEFGHIJ"}
    out = [""] * len(prompts)
    for j in sorted(range(len(prompts)), key=lambda k: prompts[k]):
        toks = ll.tokenize(prompts[j].encode(), add_bos=True, special=True)
        prev = ll.input_ids[: ll.n_tokens]
        m = min(len(prev), len(toks))
        d = np.flatnonzero(prev[:m] != np.asarray(toks[:m], dtype=prev.dtype))
        ll.n_tokens = min(int(d[0]) if d.size else m, len(toks) - 1)
        ll.eval(toks[ll.n_tokens:])
        z = np.ctypeslib.as_array(ll._ctx.get_logits(), shape=(n_vocab,)).astype(np.float64)
        kth = np.partition(z, -TOP_LOGPROBS)[-TOP_LOGPROBS]
        best = max(((z[ids[c]].max(), -k, c) for k, c in enumerate(letters[j]) if z[ids[c]].max() >= kth),
                   default=(0, 0, ""))
        out[j] = best[2]
    return out


def old_loop(path: str, prompts: list[str], letters: list[tuple[str, ...]]) -> list[str]:
    from llama_cpp import Llama
    ll = Llama(model_path=path, n_ctx=4096, n_batch=512, n_threads=1, n_threads_batch=1, logits_all=True,
               seed=0, verbose=False)
    out = []
    for p, lt in zip(prompts, letters):
        r = ll.create_completion(p, max_tokens=1, temperature=0.0, logprobs=TOP_LOGPROBS)
        lps = choice_logprobs(r["choices"][0]["logprobs"]["top_logprobs"][0], lt)
        out.append(max(lps, key=lambda c: (lps[c], -lt.index(c))) if lps else "")
    return out


def runner(requests, n_threads: int) -> list[str]:
    with tempfile.TemporaryDirectory() as cache:
        b = get_backend("llamacpp/smollm2-135m", cache=cache, n_threads=n_threads)
        return [d.letter or "" for d in b.decide(requests)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--templates", type=int, default=2)
    ap.add_argument("--configs", default="lean,runner,old,runner-2t")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "llamacpp.json"))
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from record import Recorder
    rec = Recorder()
    with tempfile.TemporaryDirectory() as cache:
        b = get_backend("llamacpp/smollm2-135m", cache=cache)
        reqs = _requests(b, a.templates)
        creqs = [b._decision_request(r) for r in reqs]
        prompts = [b.template.render(c.messages) for c in creqs]
        letters = [tuple(c.choices) for c in creqs]
        path = str(b.path)
    configs = {"lean": lambda: lean_loop(path, prompts, letters),
               "runner": lambda: runner(reqs, 1),
               "old": lambda: old_loop(path, prompts, letters),
               "runner-2t": lambda: runner(reqs, 2)}
    names = [c for c in a.configs.split(",") if c]
    times = {c: [] for c in names}
    answers = {}
    load_before = os.getloadavg()
    for rep in range(a.reps):
        for c in names[rep % len(names):] + names[:rep % len(names)]:  # rotate the order
            t0 = time.perf_counter()
            answers[c] = configs[c]()
            times[c].append(time.perf_counter() - t0)
            print(f"rep {rep} {c}: {times[c][-1]:.2f} s", flush=True)
    res = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "load_average_before": load_before, "load_average_after": os.getloadavg()},
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "prompts": len(prompts), "reps": a.reps,
           "seconds": {c: {"min": round(min(v), 3), "median": round(statistics.median(v), 3), "all": [round(x, 3) for x in v]}
                       for c, v in times.items()},
           "same_answers_as_lean": {c: answers[c] == answers.get("lean", answers[c]) for c in names}}
    if "lean" in times:
        res["ratio_to_lean_median"] = {c: round(statistics.median(v) / statistics.median(times["lean"]), 3)
                                       for c, v in times.items()}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    res = rec.write(a.out, res)
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
