"""Benchmark: every preregistered contrast with 10,000 template-bootstrap resamples over the
60 formal templates, against a straightforward pandas loop over resamples; plus the whole
`crossprofile stats` table set and the social-proof fit. Writes benchmarks/results/stats.json.

    python benchmarks/bench_stats.py [--resamples 10000] [--loop 200] [--repeat 5]

The results table is a reference-decider run (default parameters for the contrasts; a
stochastic ledger, social_proof=0.5, irrelevant_weight=0.3, inverse_temperature=2, for the
fit). The pandas loop is timed on --loop resamples (drawn from the same index matrix, and
checked to give the same numbers) and scaled to --resamples.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

from crossprofile_lib.decider import ReferenceDecider
from crossprofile_lib.runner import RunConfig, run_grid
from crossprofile_lib.stats import tables as T
from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.contrasts import evaluate_contrasts, load_prereg, row_mask
from crossprofile_lib.rebuild import rebuild_choice_data
from crossprofile_lib.stats.socialproof import fit_social_proof
from crossprofile_lib.templates import load_templates

ROOT = Path(__file__).resolve().parents[1]


def pandas_loop(df: pd.DataFrame, prereg, idx: np.ndarray, units) -> np.ndarray:
    """The straightforward way: per resample, concatenate the drawn templates' rows and
    compute each contrast from boolean filters. Returns ``(n_resamples, n_contrasts)``."""
    by_t = {t: g for t, g in df.groupby("template_id")}
    out = np.empty((len(idx), len(prereg.contrasts)))
    for b, row in enumerate(idx):
        r = pd.concat([by_t[units[i]] for i in row], ignore_index=True)
        for k, c in enumerate(prereg.contrasts):
            val = 0.0
            for t in c.terms:
                m = np.ones(len(r), dtype=bool)
                for col, v in t.where.items():
                    m &= r[col].isin(v if isinstance(v, list) else [str(v)]).to_numpy()
                val += t.weight * r.loc[m, c.outcome].astype(float).mean()
            out[b, k] = c.scale * val
    return out


def timed(fn, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = fn()
        ts.append(time.perf_counter() - t0)
    return res, ts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--loop", type=int, default=200, help="resamples timed in the pandas loop")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--fit-resamples", type=int, default=1000)
    args = ap.parse_args()
    templates = load_templates(ROOT / "templates" / "formal")
    cfg = RunConfig(templates=[str(ROOT / "templates" / "formal")])
    t0 = time.perf_counter()
    df = run_grid(cfg, templates=templates)
    run_s = time.perf_counter() - t0
    prereg = load_prereg()
    units = sorted(df.template_id.unique())

    def contrasts():
        boot = TemplateBootstrap.draw(units, args.resamples, np.random.default_rng(0))
        return evaluate_contrasts(df, prereg, boot)

    contrasts()  # warm-up: imports (statsmodels) are not part of the figure
    res, ts = timed(contrasts, args.repeat)

    def all_tables():
        boot = TemplateBootstrap.draw(units, args.resamples, np.random.default_rng(0))
        evaluate_contrasts(df, prereg, boot)
        for f in (T.accuracy_table, T.cell_table, T.composition_table, T.relevance_table, T.label_effects,
                  T.support_shared_minus_private):
            f(df, boot)
        T.headroom(df, boot)

    _, ts_tables = timed(all_tables, max(1, args.repeat // 2))

    boot = TemplateBootstrap.draw(units, args.resamples, np.random.default_rng(0))
    t0 = time.perf_counter()
    loop = pandas_loop(df, prereg, boot.idx[:args.loop], boot.units)
    loop_s = time.perf_counter() - t0
    # same numbers: the vectorised draws for the first --loop resamples equal the loop's
    sub = TemplateBootstrap(boot.units, boot.idx[:args.loop])
    unit = sub.codes(df.template_id.tolist())
    cols = []
    for c in prereg.contrasts:
        y = df[c.outcome].astype(float).to_numpy()
        val = 0
        for t in c.terms:
            m, _ = row_mask(df, t.where)
            S, N = sub.sums(unit, np.where(m, 0, -1), y, 1)
            _, d = sub.means(S, N)
            val = val + t.weight * d[:, 0]
        cols.append(c.scale * val)
    max_diff = float(np.nanmax(np.abs(np.column_stack(cols) - loop)))
    loop_full_s = loop_s / args.loop * args.resamples

    # the fitted social-proof weight on a stochastic ledger run
    led = ReferenceDecider(social_proof=0.5, irrelevant_weight=0.3, inverse_temperature=2)
    dfs = run_grid(cfg, backend=led, templates=templates)
    t0 = time.perf_counter()
    data, info = rebuild_choice_data(dfs, cfg, templates)
    rebuild_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sp = fit_social_proof(data, TemplateBootstrap.draw(units, args.resamples, np.random.default_rng(0)),
                          args.fit_resamples)
    fit_s = time.perf_counter() - t0

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    out = {
        "templates": len(units), "decisions": len(df), "contrasts": len(prereg.contrasts),
        "terms": sum(len(c.terms) for c in prereg.contrasts), "resamples": args.resamples,
        "contrasts_s_min": round(min(ts), 4), "contrasts_s_median": round(statistics.median(ts), 4),
        "all_tables_s_min": round(min(ts_tables), 3),
        "pandas_loop_resamples_timed": args.loop, "pandas_loop_s_for_timed": round(loop_s, 3),
        "pandas_loop_s_scaled_to_resamples": round(loop_full_s, 1),
        "speedup_vs_pandas_loop": round(loop_full_s / min(ts)),
        "max_abs_difference_vs_loop_points": max_diff,
        "socialproof_decisions": int(sp["n_decisions"]), "socialproof_patterns": int(sp["n_patterns"]),
        "socialproof_rebuild_s": round(rebuild_s, 2), "socialproof_fit_resamples": int(sp["resamples"]),
        "socialproof_fit_s": round(fit_s, 2),
        "socialproof_estimates": {r.parameter: [round(r.estimate, 4), round(r.lo, 4), round(r.hi, 4)]
                                  for r in sp["table"].itertuples()},
        "socialproof_true": {"social_proof": 0.5, "irrelevant_weight": 0.3, "inverse_temperature": 2.0},
        "grid_run_s": round(run_s, 2), "cores": cores, "python": platform.python_version(),
        "numpy": np.__version__, "machine": platform.machine(),
        "H1_H2_H3_reference_decider": {r.id: round(r.estimate, 2) for r in res.itertuples() if r.id in ("H1", "H2", "H3")},
    }
    print(json.dumps(out, indent=2))
    (ROOT / "benchmarks" / "results").mkdir(exist_ok=True)
    (ROOT / "benchmarks" / "results" / "stats.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
