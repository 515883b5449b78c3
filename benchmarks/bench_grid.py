"""Benchmark: the full reference-decider grid (all templates, 3 seeds, every budget, every
policy and control). Prints wall time and decisions per second; writes benchmarks/results/grid.json.

    python benchmarks/bench_grid.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import Recorder  # noqa: E402

from crossprofile_lib.run.runner import RunConfig, run_grid  # noqa: E402
from crossprofile_lib.task.templates import load_templates  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rec = Recorder()
    t0 = time.perf_counter()
    templates = load_templates(ROOT / "templates")
    load_s = time.perf_counter() - t0
    cfg = RunConfig(templates=[str(ROOT / "templates")])
    times, rows = [], 0
    load_before = os.getloadavg()
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        df = run_grid(cfg, templates=templates)
        times.append(time.perf_counter() - t0)
        rows = len(df)
    out = {"templates": len(templates), "decisions": rows, "load_validate_s": round(load_s, 3),
           "grid_s_min": round(min(times), 3), "grid_s_median": round(statistics.median(times), 3),
           "grid_s_all": [round(t, 3) for t in times],
           "us_per_decision_min": round(1e6 * min(times) / rows, 1),
           "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
           "load_average_before": [round(x, 2) for x in load_before],
           "load_average_after": [round(x, 2) for x in os.getloadavg()],
           "decisions_per_s": round(rows / min(times)), "cpus": os.cpu_count(),
           "python": platform.python_version(), "machine": platform.machine()}
    print(json.dumps(out, indent=2))
    (ROOT / "benchmarks" / "results").mkdir(exist_ok=True)
    rec.write(ROOT / "benchmarks" / "results" / "grid.json", out)


if __name__ == "__main__":
    main()
