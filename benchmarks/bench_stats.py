"""Benchmark of the inference (``crossprofile stats``), against honest baselines.

    python benchmarks/bench_stats.py [--resamples 10000] [--repeat 3] [--fit-resamples 1000]

Writes ``benchmarks/results/stats.json``. Every figure is the min and median over ``--repeat``
repetitions, the variants of one measurement interleaved (A B C, A B C, ...) so that a change of
machine load hits all of them alike; the 1-minute load average is recorded before each one.

1. **Contrast bootstrap**: every preregistered contrast of ``prereg.yaml`` with ``--resamples``
   template resamples over the 60 formal templates (reference decider, 3 seeds, default grid):
   the vectorised count-matrix products of :mod:`crossprofile_lib.stats.bootstrap` against a
   *careful numpy loop over the same resample indices* (per-template sums computed once; per
   resample, sum the drawn templates' rows and divide) -- the honest baseline; both must give
   the same numbers (checked). A per-resample pandas loop is not the baseline any more.
2. **Social-proof refits**: the batched Newton refits of :func:`fit_social_proof` against a loop
   of one L-BFGS-B fit per resample from the same warm start (timed on a subset, scaled).
3. **The command**: CPU seconds (user + system of the child process and its worker) and wall
   seconds of ``crossprofile stats`` on two run folders (the full reference grid of
   ``crossprofile run --backend ledger --templates templates/formal --seeds 0,1,2``, and a
   stochastic one: social_proof=0.5, irrelevant_weight=0.3, inverse_temperature=2), paired and
   interleaved: bare tables (``--no-regressions --fit-resamples 0``), default with an empty cache
   (``cold``) and default again (``warm``, the fits read from ``DIR/.stats_cache/``); the reports
   of ``cold`` and ``warm`` must be identical (recorded). The aim (issue 26): cold within 1.5x the
   bare tables, with every digit of the report unchanged (``tests/test_stats_golden.py``). (Commit
   f5c6d93's results also had ``cold_one_core``: that commit fitted the regressions in a forked
   worker by default, and pinning to one core ran them in-process; the worker cost more CPU and
   more wall time there, so it was removed.)

``--keep DIR`` reuses ``DIR/reference`` and ``DIR/stochastic`` where they already hold a run (the
same ``crossprofile run`` commands), so a rerun measures only ``stats``.

The file records the commit, date, load average and command (``benchmarks/record.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import Recorder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "crossprofile_lib.cli"]


def load() -> float:
    return round(os.getloadavg()[0], 2)


def summary(ts: list[float], loads: list[float]) -> dict:
    return {"min": round(min(ts), 4), "median": round(statistics.median(ts), 4),
            "all": [round(t, 4) for t in ts], "load_1min": loads}


def interleaved(fns: dict, repeat: int, clock=time.perf_counter) -> dict:
    """``{name: summary}`` of each function's time, the functions interleaved per repetition."""
    ts = {k: [] for k in fns}
    loads = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            loads[k].append(load())
            t0 = clock()
            fn()
            ts[k].append(clock() - t0)
    return {k: summary(ts[k], loads[k]) for k in fns}


def careful_numpy_loop(S: np.ndarray, N: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Resampled cell means ``(B, J)`` with a Python loop over resamples: per resample, the drawn
    templates' per-template sums ``S``, ``N`` ``(T, J)`` are added up (``idx`` ``(B, T)``)."""
    out = np.empty((idx.shape[0], S.shape[1]))
    for b, row in enumerate(idx):
        out[b] = S[row].sum(axis=0) / N[row].sum(axis=0)
    return out


def contrast_cells(df: pd.DataFrame, prereg, boot):
    """Per-template sums and counts of every contrast term's rows, and how terms combine."""
    from crossprofile_lib.stats.contrasts import row_mask
    unit = boot.codes(df["template_id"].astype(str).tolist())
    S_cols, N_cols, combos = [], [], []
    for c in prereg.contrasts:
        y = df[c.outcome].astype(float).to_numpy()
        terms = []
        for t in c.terms:
            m, _ = row_mask(df, t.where)
            S, N = boot.sums(unit, np.where(m, 0, -1), y, 1)
            terms.append((len(S_cols), t.weight))
            S_cols.append(S)
            N_cols.append(N)
        combos.append((c.scale, terms))
    return np.hstack(S_cols), np.hstack(N_cols), combos


def combine(means: np.ndarray, combos) -> np.ndarray:
    return np.column_stack([scale * sum(w * means[:, j] for j, w in terms) for scale, terms in combos])


def bench_contrasts(df, prereg, args) -> dict:
    from crossprofile_lib.stats.bootstrap import TemplateBootstrap
    from crossprofile_lib.stats.contrasts import evaluate_contrasts
    units = sorted(df["template_id"].astype(str).unique())
    boot = TemplateBootstrap.draw(units, args.resamples, np.random.default_rng(0))
    S, N, combos = contrast_cells(df, prereg, boot)
    with np.errstate(invalid="ignore", divide="ignore"):
        vec = combine(boot.means(S, N)[1], combos)
        loop = combine(careful_numpy_loop(S, N, boot.idx), combos)
    diff = float(np.nanmax(np.abs(vec - loop)))
    full = evaluate_contrasts(df, prereg, boot)     # warm-up, and the estimates reported
    fresh = lambda: TemplateBootstrap(boot.units, boot.idx)   # noqa: E731  (no cached count matrix)

    def vectorised():
        b = fresh()
        with np.errstate(invalid="ignore", divide="ignore"):
            combine(b.means(S, N)[1], combos)

    def numpy_loop():
        with np.errstate(invalid="ignore", divide="ignore"):
            combine(careful_numpy_loop(S, N, fresh().idx), combos)

    t = interleaved({"vectorised_count_matrix": vectorised, "careful_numpy_loop": numpy_loop,
                     "evaluate_contrasts_end_to_end": lambda: evaluate_contrasts(df, prereg, fresh())}, args.repeat)
    return {"resamples": args.resamples, "templates": len(units), "contrasts": len(prereg.contrasts),
            "terms": int(S.shape[1]), "max_abs_difference_points": diff, "timings_s": t,
            "speedup_vs_careful_loop_median": round(t["careful_numpy_loop"]["median"]
                                                    / t["vectorised_count_matrix"]["median"], 1),
            "estimates_reference_decider": {r.id: round(float(r.estimate), 2) for r in full.itertuples()
                                            if r.estimable}}


def bench_refits(run_dir: Path, args) -> dict:
    from crossprofile_lib.run.rebuild import rebuild_choice_data
    from crossprofile_lib.run.results import read_header, read_results
    from crossprofile_lib.stats.bootstrap import TemplateBootstrap
    from crossprofile_lib.stats.socialproof import batched_newton, fit, patterns
    df = read_results(run_dir)
    t0 = time.process_time()
    data, _ = rebuild_choice_data(df, read_header(run_dir)["config"])
    rebuild_cpu = time.process_time() - t0
    boot = TemplateBootstrap.draw(sorted(set(map(str, data.template))), args.resamples, np.random.default_rng(0))
    Xp, C = patterns(data, boot.units)
    full = fit(Xp, C.sum(axis=0))["theta"]
    n = min(args.loop_refits, args.fit_resamples)
    Wp = boot.weights[:args.fit_resamples] @ C
    res = {}

    def batched():
        res["batched"] = np.vstack([batched_newton(Xp, Wp[i:i + 100], full)[0] for i in range(0, len(Wp), 100)])

    def loop():
        res["loop"] = np.array([fit(Xp, Wp[i], starts=(full,))["theta"] for i in range(n)])

    t = interleaved({"batched_newton_all": batched, f"lbfgs_loop_{n}": loop}, max(1, args.repeat - 1),
                    clock=time.process_time)
    per = t[f"lbfgs_loop_{n}"]["median"] / n
    return {"decisions": len(data), "patterns": int(Xp.shape[0]), "fit_resamples": args.fit_resamples,
            "rebuild_cpu_s": round(rebuild_cpu, 2), "cpu_s": t,
            "lbfgs_loop_scaled_to_fit_resamples_s": round(per * args.fit_resamples, 2),
            "speedup_vs_lbfgs_loop": round(per * args.fit_resamples / t["batched_newton_all"]["median"], 1),
            "max_abs_difference_first_loop_resamples": float(np.abs(res["batched"][:n] - res["loop"]).max())}


def child_times(cmd: list[str]) -> tuple[float, float, str]:
    """(CPU seconds: user + system of the child and its own children, wall seconds, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, cwd=ROOT).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, out


#: the command's variants, interleaved per repetition: bare tables, default with an empty cache, and
#: default again (the fits read from the cache)
VARIANTS = ("bare", "cold", "warm")


def bench_command(run_dir: Path, args) -> dict:
    base = CLI + ["stats", str(run_dir), "--resamples", str(args.resamples)]
    cache = run_dir / ".stats_cache"
    cpu = {k: [] for k in VARIANTS}
    wall = {k: [] for k in VARIANTS}
    loads = {k: [] for k in VARIANTS}
    outputs = {}
    for _ in range(args.repeat):
        for k in VARIANTS:
            if k.startswith("cold"):
                shutil.rmtree(cache, ignore_errors=True)
            loads[k].append(load())
            # each option once (the command refuses an option given twice)
            cmd = base + (["--no-regressions", "--fit-resamples", "0"] if k == "bare"
                          else ["--fit-resamples", str(args.fit_resamples)])
            c, w, text = child_times(cmd)
            cpu[k].append(c)
            wall[k].append(w)
            outputs.setdefault(k, text)
            assert outputs[k] == text, f"{k}: the report changed between repetitions"
    out = {"cpu_s": {k: summary(cpu[k], loads[k]) for k in VARIANTS},
           "wall_s": {k: summary(wall[k], loads[k]) for k in VARIANTS},
           "warm_report_identical_to_cold_report": outputs["warm"] == outputs["cold"]}
    for clock in ("cpu_s", "wall_s"):
        for k in ("cold", "warm"):
            out[f"{k}_over_bare_median_{clock[:-2]}"] = round(out[clock][k]["median"] / out[clock]["bare"]["median"], 2)
    return out


def make_run(out: Path, options: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(CLI + ["run", "--backend", "ledger", "--out", str(out), "--templates", "templates/formal",
                          "--seeds", "0,1,2"] + options, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--fit-resamples", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--loop-refits", type=int, default=100, help="resamples timed in the L-BFGS-B loop")
    ap.add_argument("--keep", default=None, help="keep the two run folders here (default: a temporary folder)")
    ap.add_argument("--command-only", action="store_true",
                    help="measure only the command on the reference grid (part 3); the other parts are kept from "
                         "the existing results file, which must be of the same commit")
    args = ap.parse_args()
    rec = Recorder()
    from crossprofile_lib.stats.contrasts import load_prereg
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="bench_stats_"))
    runs = {"reference": (tmp / "reference", []),
            "stochastic": (tmp / "stochastic", ["--backend-option", "social_proof=0.5", "--backend-option",
                                                "irrelevant_weight=0.3", "--backend-option", "inverse_temperature=2"])}
    if args.command_only:
        runs = {"reference": runs["reference"]}
    made = {k: round(make_run(d, o), 1) for k, (d, o) in runs.items() if not (d / "results.parquet").exists()}
    df = pd.read_parquet(runs["reference"][0] / "results.parquet")
    out = {"date": time.strftime("%Y-%m-%d"), "python": platform.python_version(), "numpy": np.__version__,
           "machine": platform.machine(), "cores": len(os.sched_getaffinity(0)), "load_1min_at_start": load(),
           "decisions": len(df), "run_s": made}
    from threadpoolctl import threadpool_limits

    from crossprofile_lib.stats.analysis import BLAS_THREADS
    out["blas_threads"] = BLAS_THREADS      # as crossprofile stats runs them
    dest = ROOT / "benchmarks" / "results" / "stats.json"
    if args.command_only:
        old = json.loads(dest.read_text())
        was = old.get("record", {}).get("commit", "")
        same = was == rec.commit or subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", was, rec.commit, "--",
                                                    "crossprofile_lib"]).returncode == 0
        if not same:
            raise SystemExit(f"--command-only: {dest} measured commit {was}; crossprofile_lib changed since (rerun all)")
        out.update({k: old[k] for k in ("contrast_bootstrap", "social_proof_refits") if k in old})
        out["parts_1_2_record"] = old["record"]
        out["stats_command_cpu_s"] = dict(old.get("stats_command_cpu_s", {}), reference=bench_command(
            runs["reference"][0], args))
    else:
        with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
            out["contrast_bootstrap"] = bench_contrasts(df, load_prereg(), args)
            out["social_proof_refits"] = bench_refits(runs["stochastic"][0], args)
        out["stats_command_cpu_s"] = {k: bench_command(d, args) for k, (d, _) in runs.items()}
    out["load_1min_at_end"] = load()
    out = rec.write(dest, out)
    print(json.dumps(out, indent=1))
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
