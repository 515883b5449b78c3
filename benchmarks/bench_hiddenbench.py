"""Benchmark: HiddenBench's own overhead at the paper's scale (65 tasks x 3 seeds x 4 ablations).

No model is involved: a synthetic 65-task file (the fixture's tasks, renamed) runs through
(a) the controlled protocol on the reference decider (composition only) and (b) the natural
protocol on an *echo* backend (every agent restates its facts; claims = sentences; decisions
= the first option), so the figure is the cost of prompts, parsing, merging, memories,
disclosure and streaming artefacts, not of a model. Peak Python memory is measured with
``tracemalloc`` (artefacts are streamed per chunk, so it stays flat as tasks grow).
Writes ``benchmarks/results/hiddenbench.json``.

    python benchmarks/bench_hiddenbench.py [--tasks 65]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from crossprofile_lib.backends.base import CHAT, MODEL_RELEVANCE, ChatBackend, ChatResult
from crossprofile_lib.hiddenbench.importer import FIXTURE_PATH
from crossprofile_lib.hiddenbench.run import HBConfig, run_hiddenbench
from crossprofile_lib.task.decision import Decision
from crossprofile_lib.task.tokenizer import default_tokenizer

ROOT = Path(__file__).resolve().parents[1]


class EchoBackend(ChatBackend):
    """Valid but uninformed answers: votes A, messages restate the agent's facts."""

    provider, model, decision_mode, relevance_kind = "echo", "echo-v1", "generate", "model"
    capabilities = frozenset({CHAT, MODEL_RELEVANCE})  # a relevance filter; no B3 summaries

    def __init__(self):
        self.tokenizer = default_tokenizer()

    def chat(self, requests):
        out = []
        for r in requests:
            text = r.messages[-1]["content"]
            if r.purpose.startswith("hb-vote"):
                out.append(ChatResult('{"vote": "A", "rationale": "echo"}'))
            elif r.purpose.startswith("hb-message"):
                facts = re.findall(r"^\d+\. (.*)$", text.split("This is round")[0], re.MULTILINE)
                out.append(ChatResult(" ".join(facts)))
            elif r.purpose.startswith("hb-extract"):
                msg = text.split("Message:\n", 1)[1].split("\n\nList every", 1)[0]
                out.append(ChatResult("\n".join(f"- {s}" for s in re.split(r"(?<=\.)\s+", msg) if s)))
            else:
                out.append(ChatResult("yes"))
        return out

    def relevance(self, task, cl):
        return frozenset(range(len(cl)))

    def decide(self, requests):
        return [Decision(r.option_order[0], "A", False, raw="Decision: A") for r in requests]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=65)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from record import Recorder
    rec = Recorder()
    recs = json.loads(FIXTURE_PATH.read_text())
    tmp = Path(tempfile.mkdtemp(prefix="bench_hb_"))
    big = [dict(recs[i % len(recs)], id=i + 1, description=f"(case {i}) " + recs[i % len(recs)]["description"])
           for i in range(args.tasks)]
    path = tmp / "synthetic.json"
    path.write_text(json.dumps(big))
    out = {"tasks": args.tasks, "cpus": os.cpu_count(), "python": platform.python_version()}
    t0 = time.perf_counter()
    h = run_hiddenbench(HBConfig(hiddenbench=str(path)), tmp / "controlled")
    out["controlled_ledger_s"] = round(time.perf_counter() - t0, 3)
    out["controlled_rows"] = h["protocols"]["controlled"]["rows"]["decisions"]
    tracemalloc.start()
    t0 = time.perf_counter()
    h = run_hiddenbench(HBConfig(backend="echo/echo-v1", hiddenbench=str(path), protocols=["natural"],
                                 policies=["R1", "B4", "Random", "M1", "R1-rel", "EMPTY", "ALL", "REF",
                                           "private-only", "shared-only"]),
                        tmp / "natural", backend=EchoBackend())
    out["natural_echo_s"] = round(time.perf_counter() - t0, 3)
    out["natural_peak_python_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
    tracemalloc.stop()
    out["natural_sessions"] = h["protocols"]["natural"]["rows"]["sessions"]
    out["natural_artefacts_mib"] = round((tmp / "natural/artefacts/natural.jsonl").stat().st_size / 2**20, 1)
    print(json.dumps(out, indent=2))
    res = ROOT / "benchmarks" / "results"
    res.mkdir(parents=True, exist_ok=True)
    rec.write(res / "hiddenbench.json", out)


if __name__ == "__main__":
    main()
