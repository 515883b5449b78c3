"""One call that computes every statistic of a run, per (backend, model): what
``crossprofile stats DIR`` prints.

All statistics of a model share one template-bootstrap resample index matrix drawn from
``numpy.random.default_rng(seed)``; the social-proof fit uses its first ``fit_resamples`` rows.
The social-proof fit needs the decisions' rebuilt memories: the caller rebuilds them
(:func:`crossprofile_lib.rebuild.choice_data_by_model`) and hands them in as ``choice_data``;
this module only computes. Before anything, :func:`.analysis_set.prepare` refuses failed calls
(or drops them with ``allow_errors``) and keeps the analysis set (the formal templates);
each model's ``status`` is confirmatory only when :func:`.analysis_set.run_status` says so.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from . import tables as T
from .analysis_set import MIN_TEMPLATES_CONFIRMATORY, prepare, run_status
from .bootstrap import DEFAULT_RESAMPLES, TemplateBootstrap
from .contrasts import Prereg, evaluate_contrasts, load_prereg
from .netlead import net_lead_analysis
from .socialproof import fit_social_proof


def analyse_model(df: pd.DataFrame, prereg: Prereg, rng: np.random.Generator,
                  n_resamples: int = DEFAULT_RESAMPLES, choice_data=None,
                  regressions: bool = True, fit_resamples: Optional[int] = 1000, rows: Optional[dict] = None) -> dict:
    """Every statistic for the rows of one model (``df`` holds a single backend/model, already
    :func:`~.analysis_set.prepare`-d; ``rows`` is what ``prepare`` reported).

    ``choice_data``: ``(ChoiceData, info)`` for the social-proof fit, or a string saying why
    there is none (None: "not handed in").
    """
    boot = TemplateBootstrap.draw(df["template_id"].astype(str).unique(), n_resamples, rng)
    st = prereg.settings
    first = df.iloc[0]
    out = dict(backend=str(first["backend"]), model=str(first["model"]),
               decision_mode=str(first.get("decision_mode", "")), tokenizer=str(first["tokenizer"]),
               n_decisions=len(df), n_templates=len(boot.units), resamples=boot.n_resamples,
               level=boot.level, prereg=prereg.source)
    if out["backend"] == "ledger":
        out["note"] = "reference decider (a normative evidence counter), not a language model"
    out["headroom"] = T.headroom(df, boot, float(st["headroom_min_points"]))
    out["analysis_set"] = dict(rows or {}).get("analysis_set", {})
    out["failed_calls"] = dict(rows or {}).get("failed_calls", "")
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
    out["net_lead"] = net_lead_analysis(df, boot, st["net_lead_where"], regressions=regressions)
    if fit_resamples is not None and fit_resamples <= 0:
        out["social_proof"] = dict(skipped="not requested (--fit-resamples 0)")
    elif choice_data is None or isinstance(choice_data, str):
        out["social_proof"] = dict(skipped=choice_data or "no rebuilt choice data handed in")
    else:
        data, info = choice_data
        out["social_proof"] = fit_social_proof(data, boot, fit_resamples)
        out["social_proof"]["rebuild"] = info
    return out


def analyse(df: pd.DataFrame, prereg: Optional[Prereg] = None, n_resamples: int = DEFAULT_RESAMPLES,
            seed: int = 0, choice_data: Optional[dict] = None, regressions: bool = True,
            fit_resamples: Optional[int] = 1000, allow_errors: bool = False, analysis_set: str = "formal",
            rows: Optional[dict] = None) -> list[dict]:
    """:func:`analyse_model` for each (backend, model) of ``df``; each draws its resamples from
    ``numpy.random.default_rng(seed)`` (same seed and templates -> same index matrix).

    ``df`` is first :func:`~.analysis_set.prepare`-d (``allow_errors``, ``analysis_set``) unless
    ``rows`` (what an earlier ``prepare`` returned) says the caller did it. ``choice_data``:
    ``{(backend, model): (ChoiceData, info) or reason}`` from
    :func:`crossprofile_lib.rebuild.choice_data_by_model` on the prepared rows (None: no
    social-proof fit)."""
    prereg = prereg or load_prereg()
    if rows is None:
        df, rows = prepare(df, allow_errors, analysis_set)
    out = []
    for (backend, model), d in df.groupby(["backend", "model"], sort=True):
        cd = (choice_data or {}).get((str(backend), str(model)))
        out.append(analyse_model(d, prereg, np.random.default_rng(seed), n_resamples, cd,
                                 regressions, fit_resamples, rows))
        out[-1]["seed"] = seed
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
