"""How many model calls the paper's full design sends to one model (issue 26.5; the README quotes this
file): :func:`crossprofile_lib.run.plan.call_plan` on :data:`~crossprofile_lib.run.plan.PAPER_DESIGN`
(60 formal templates x 8 variants x 3 seeds, every policy and control plus B3, the budget grid), once per
pricing: the paper's models' own tokenizers (what an HTTP run against a vLLM server serving them gets)
and the offline approximation. A dry run: nothing is sent.

    python benchmarks/count_paper_calls.py [--tokenizers qwen2.5,llama-3.1,offline]

Writes ``benchmarks/results/paper_calls.json`` through :mod:`record` (commit, date, load, command).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from record import Recorder  # noqa: E402

from crossprofile_lib.run.plan import PAPER_DESIGN, call_plan  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizers", default="qwen2.5,llama-3.1,offline")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "paper_calls.json"))
    a = ap.parse_args(argv)
    rec = Recorder(argv=[sys.argv[0]] + (argv if argv is not None else sys.argv[1:]))
    plans = {}
    for tok in [t.strip() for t in a.tokenizers.split(",") if t.strip()]:
        plan = call_plan(PAPER_DESIGN, decision_mode="generate", tokenizer=None if tok == "offline" else tok)
        plans[tok] = plan
        print(f"{tok}: {plan['calls']['total']:,} calls ({plan['distinct_decision_prompts']:,} distinct decision "
              f"prompts of {plan['decisions']:,} decisions)", flush=True)
    rec.write(a.out, {"what": "model calls of the paper's full design for one model (a dry run: call_plan)",
                      "plans": plans})
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
