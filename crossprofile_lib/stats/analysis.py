"""Every statistic of a run, per (backend, model): what ``crossprofile stats DIR`` prints. All statistics of a model
share one resample matrix from ``numpy.random.default_rng(seed)`` (the social-proof fit uses its first
``fit_resamples`` rows); the slow fits go through a :class:`.cache.FitCache` when one is given.
"""

from __future__ import annotations

import functools
import hashlib
import math
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from crossprofile_lib.stats import tables as T
from crossprofile_lib.stats.analysis_set import MIN_TEMPLATES_CONFIRMATORY, prepare, run_status
from crossprofile_lib.stats.bootstrap import DEFAULT_RESAMPLES, TemplateBootstrap
from crossprofile_lib.stats.cache import FitCache, table_hash
from crossprofile_lib.stats.contrasts import Prereg, evaluate_contrasts, load_prereg
from crossprofile_lib.stats.netlead import net_lead_analysis, regressions_fit, subset
from crossprofile_lib.stats.socialproof import fit_social_proof

#: BLAS threads during the analysis: one (the matrices are small; a fixed count keeps every printed digit the same).
BLAS_THREADS = 1


def load_blas_libraries() -> None:
    """Load scipy's BLAS first: ``threadpool_limits`` limits only the libraries already loaded."""
    import scipy.linalg  # noqa: F401


def analyse_model(df: pd.DataFrame, prereg: Prereg, seed: int = 0,
                  n_resamples: int = DEFAULT_RESAMPLES, choice_data=None,
                  regressions: bool = True, fit_resamples: Optional[int] = 1000, rows: Optional[dict] = None,
                  cache: Optional[FitCache] = None, choice_key: str = "") -> dict:
    """Every statistic for the prepared rows of one backend/model (``rows``: what ``prepare`` reported).
    ``choice_data``: see :func:`social_proof_cached`; ``choice_key`` identifies its inputs in the cache."""
    boot = TemplateBootstrap.draw(df["template_id"].astype(str).unique(), n_resamples, np.random.default_rng(seed))
    st = prereg.settings
    first = df.iloc[0]
    out = dict(backend=str(first["backend"]), model=str(first["model"]),
               decision_mode=str(first.get("decision_mode", "")), tokenizer=str(first["tokenizer"]),
               n_decisions=len(df), n_templates=len(boot.units), resamples=boot.n_resamples,
               level=boot.level, prereg=prereg.source)
    if out["backend"] == "ledger":
        out["note"] = "reference decider (a normative evidence counter), not a language model"
    out["headroom"] = T.headroom(df, boot, float(st["headroom_min_points"])).as_dict()
    rows = rows or {}
    out["analysis_set"] = rows.get("analysis_set", {})
    out["failed_calls"] = rows.get("failed_calls", "")
    out["status"], out["status_reasons"] = run_status(out["headroom"], out["analysis_set"], len(boot.units))
    out["status_label"] = out["status"] + (": " + "; ".join(out["status_reasons"]) if out["status_reasons"] else "")
    out["min_templates_confirmatory"] = MIN_TEMPLATES_CONFIRMATORY
    out["contrasts"] = evaluate_contrasts(df, prereg, boot)
    out["accuracy"] = T.accuracy_table(df, boot)
    out["cells"] = T.cell_table(df, boot, pooled=True)
    out["composition"] = T.composition_table(df, boot, pooled=True)
    out["relevance"] = T.relevance_table(df, boot)
    out["label_effects"] = T.label_effects(df, boot)
    out["support_shared_minus_private"] = T.support_shared_minus_private(df, boot)
    cache = cache or FitCache(None)

    def fit(d, reference):
        return cache.get("regressions", lambda: dict(rows=table_hash(d), reference=reference),
                         lambda: regressions_fit(d, reference))

    out["net_lead"] = net_lead_analysis(df, boot, st["net_lead_where"], regressions=regressions, fit=fit)
    if fit_resamples is not None and fit_resamples <= 0:
        out["social_proof"] = dict(skipped="not requested (--fit-resamples 0)")
    else:
        out["social_proof"] = social_proof_cached(subset(df, st["social_proof_where"]), boot, fit_resamples,
                                                  choice_data, cache, choice_key)
    return out


def social_proof_cached(rows: pd.DataFrame, boot: TemplateBootstrap, fit_resamples: Optional[int], choice_data,
                        cache: Optional[FitCache] = None, choice_key: str = "") -> dict:
    """:func:`~.socialproof.fit_social_proof` through ``cache``. ``choice_data``: ``(ChoiceData, info)``, a reason
    string, or a callable returning either (called only on a cache miss, so a cached fit skips the rebuild)."""
    def compute():
        cd = choice_data() if callable(choice_data) else choice_data
        if cd is None or isinstance(cd, str):
            return dict(skipped=cd or "no rebuilt choice data handed in")
        data, info = cd
        return dict(fit_social_proof(data, boot, fit_resamples), rebuild=info)
    def parts():      # hashed only when the cache is on
        return dict(rows=table_hash(rows), boot=hashlib.sha256(np.ascontiguousarray(boot.idx).tobytes()).hexdigest(),
                    units=list(boot.units), level=boot.level, fit_resamples=fit_resamples, inputs=choice_key)
    return (cache or FitCache(None)).get("social_proof", parts, compute)


def analyse(df: pd.DataFrame, prereg: Optional[Prereg] = None, n_resamples: int = DEFAULT_RESAMPLES,
            seed: int = 0, choice_data=None, regressions: bool = True,
            fit_resamples: Optional[int] = 1000, allow_errors: bool = False, analysis_set: str = "formal",
            rows: Optional[dict] = None, cache: Optional[FitCache] = None, choice_key: str = "") -> list[dict]:
    """:func:`analyse_model` for each (backend, model) of ``df``, :func:`~.analysis_set.prepare`-d first unless
    ``rows`` says the caller did. ``choice_data``: ``{(backend, model): (ChoiceData, info) or reason}`` or a
    callable ``(backend, model) -> (ChoiceData, info) or reason``, called only on a cache miss."""
    prereg = prereg or load_prereg()
    if rows is None:
        df, rows = prepare(df, allow_errors, analysis_set)
    load_blas_libraries()
    out = []
    with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
        for (backend, model), d in df.groupby(["backend", "model"], sort=True):
            key = (str(backend), str(model))
            cd = functools.partial(choice_data, *key) if callable(choice_data) else (choice_data or {}).get(key)
            out.append(dict(analyse_model(d, prereg, seed, n_resamples, cd, regressions, fit_resamples, rows,
                                          cache, choice_key), seed=seed))
    return out


def to_jsonable(x):
    """DataFrames -> lists of records; NaN -> None; numpy scalars -> Python."""
    if isinstance(x, pd.DataFrame):
        return [to_jsonable(r) for r in x.to_dict(orient="records")]
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, np.ndarray):
        return to_jsonable(x.tolist())
    if isinstance(x, Path):
        return str(x)
    return x
