"""What the first (``--no-cache``) ``crossprofile stats`` spends beyond the bare tables, part by part,
in one process (CPU seconds of this process, ``time.process_time``), on a run folder:

    python benchmarks/bench_stats_parts.py RUN_DIR

(``RUN_DIR``: e.g. ``crossprofile run --backend ledger --out RUN_DIR --templates templates/formal --seeds 0,1,2``.)
Parts: importing statsmodels, the net-lead regressions (``regressions_fit``; then, timed again on their own,
its primary family's fixed-effects, variational mixed and GEE fits), the social-proof fit's choice data and
its refits. Writes ``benchmarks/results/stats_parts.json`` with the record
(``benchmarks/record.py``). One pass: a breakdown, not a timing to compare across commits.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import Recorder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    run = Path((argv or sys.argv[1:])[0])
    rec = Recorder()
    import numpy as np
    from threadpoolctl import threadpool_limits

    from crossprofile_lib.run.rebuild import choice_data_rebuilder
    from crossprofile_lib.run.results import read_header, read_results
    from crossprofile_lib.stats import netlead as N
    from crossprofile_lib.stats.analysis import BLAS_THREADS, load_blas_libraries
    from crossprofile_lib.stats.analysis_set import prepare
    from crossprofile_lib.stats.bootstrap import TemplateBootstrap
    from crossprofile_lib.stats.contrasts import load_prereg
    from crossprofile_lib.stats.socialproof import fit_social_proof
    df, prereg, cfg = read_results(run), load_prereg(), read_header(run).get("config")
    rows, _ = prepare(df, False, "formal", source=str(run))
    st = prereg.settings
    d = N.subset(rows, st["net_lead_where"])
    parts = {}
    load_blas_libraries()       # as analyse() does: scipy's BLAS limited too
    with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
        t = time.process_time()     # what the regressions import (statsmodels' genmod modules, not statsmodels.api)
        from statsmodels.genmod import cov_struct, families, generalized_estimating_equations, generalized_linear_model  # noqa: F401,E501

        from crossprofile_lib.stats.mixed_vb import model_class
        model_class()                  # statsmodels' bayes_mixed_glm
        parts["import statsmodels"] = time.process_time() - t
        t = time.process_time()
        N.regressions_fit(d, "R1")
        parts["net-lead regressions (regressions_fit: every fit of both families)"] = time.process_time() - t
        prim = N.prepare_family(d, "copy", "R1")
        r, ref = prim["rows"], prim["reference"] or "R1"
        for name, f in (("of which: fixed-effects logit, primary family", N.fixed_effects_logit),
                        ("of which: mixed logit (fit_vb), primary family", N.mixed_logit),
                        ("of which: GEE logit, primary family", N.gee_logit)):
            t = time.process_time()
            f(r, ref)
            parts[name] = time.process_time() - t
        boot = TemplateBootstrap.draw(rows["template_id"].astype(str).unique(), 10_000, np.random.default_rng(0))
        t = time.process_time()
        cd = choice_data_rebuilder(rows, cfg, None, st["social_proof_where"])(*rows[["backend", "model"]].iloc[0])
        parts["social-proof choice data"] = time.process_time() - t
        t = time.process_time()
        fit_social_proof(cd[0], boot, 1000)
        parts["social-proof fit, 1000 refits"] = time.process_time() - t
    out = rec.write(ROOT / "benchmarks" / "results" / "stats_parts.json",
                    {"run_rows": len(df), "regression_rows": len(d),
                     "cpu_s": {k: round(v, 2) for k, v in parts.items()},
                     "total_cpu_s": round(sum(v for k, v in parts.items() if not k.startswith("of which")), 2)})
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
