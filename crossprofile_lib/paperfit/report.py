"""``fit_paper``: fit the reference decider to the paper's published figures, every table at once.

For each paper model column with enough figures (:func:`.figures.model_columns`): the least-squares
``(s, w, beta)`` (:mod:`.fit`), template-bootstrap percentile intervals (resample the templates,
refit), a profile interval (identification: where the loss profile stays within
``sigma^2 * chi2_1(0.95)`` of its minimum, ``sigma^2 = loss / (figures - 3)``, i.e. the misfit treated as
noise), and per figure: paper value, fitted prediction [bootstrap interval], residual and the
leave-one-figure-out prediction. Parameter-free memory figures are shown beside, and a recovery
check refits figures the ledger generated at known parameters. Every table is "fit to the paper's
published numbers; not a model run": the numbers in ``paper`` are the paper's, everything else is
the reference decider (backend ``ledger``) on this suite's templates.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd
from scipy.stats import chi2

from crossprofile_lib.paperfit.figures import (
    NOT_A_MODEL_RUN,
    NOT_SEPARATED,
    model_columns,
    needed_policies,
    select_figures,
    short,
)
from crossprofile_lib.paperfit.fit import BOUNDS, PARAMS, Fitter, recovery
from crossprofile_lib.paperfit.ledger import GRID, cache_key, default_cache_dir, load_or_build
from crossprofile_lib.paperfit.predict import evaluate_figures, figure_matrix
from crossprofile_lib.policies import DEFAULT_POLICIES
from crossprofile_lib.stats.bootstrap import TemplateBootstrap, percentile_interval

#: known parameters for the recovery check (besides each model's fitted point)
RECOVERY_TRUTHS = ((0.5, 0.0, 2.0), (1.0, 0.5, 1.0), (0.0, -0.5, 4.0))
PROFILE_POINTS = 25
FIT_VERSION = 4   # bump when the fit's method changes (part of the result cache key)
TABLES = ("params", "figures", "memory", "profiles", "recovery")


def ledger_model(theta) -> str:
    """The reference decider's model string (as :class:`ReferenceDecider.model` writes it)."""
    return f"reference-decider(sp={theta[0]:.3g},irr={theta[1]:.3g},beta={theta[2]:.3g})"


@dataclass
class PaperFit:
    params: pd.DataFrame       # model, parameter, estimate, lo, hi, profile_lo, profile_hi, at_bound
    figures: pd.DataFrame      # one row per (model, decision figure)
    memory: pd.DataFrame       # parameter-free figures: paper vs the ledger's memories
    profiles: pd.DataFrame     # model, parameter, value, loss, delta ((loss - min) / sigma^2; 95%: chi2_1 3.84)
    recovery: pd.DataFrame     # model, truth and estimate per parameter
    info: dict = field(default_factory=dict)

    title = NOT_A_MODEL_RUN


#: half-width of the fine profile window around the estimate: s, w, log(beta)
_FINE = (0.15, 0.8, 0.5)


def _profile_values(k: int, est: float) -> np.ndarray:
    """The coarse range of parameter k (:data:`PROFILE_POINTS` values across its bounds) plus a
    fine window of 21 values around the estimate (the interval's ends need the resolution)."""
    lo, hi = BOUNDS[k]
    off = np.linspace(-_FINE[k], _FINE[k], 21)
    if k == 2:
        v = np.concatenate([np.geomspace(lo, hi, PROFILE_POINTS), est * np.exp(off)])
    else:
        v = np.concatenate([np.linspace(lo, hi, PROFILE_POINTS), est + off])
    return np.unique(np.clip(np.round(v, 10), lo, hi))


def _profile_interval(values: np.ndarray, loss: np.ndarray, threshold: float) -> tuple[float, float]:
    """The range of ``values`` whose profile loss is within ``threshold`` (linear interpolation at
    the crossings; a bound of the parameter range when the profile never crosses)."""
    ok = loss <= threshold
    i0, i1 = np.flatnonzero(ok)[[0, -1]]
    def cross(a, b):
        if loss[a] == loss[b]:
            return values[a]
        return values[a] + (threshold - loss[a]) * (values[b] - values[a]) / (loss[b] - loss[a])
    lo = values[0] if i0 == 0 else cross(i0 - 1, i0)
    hi = values[-1] if i1 == len(values) - 1 else cross(i1, i1 + 1)
    return float(lo), float(hi)


def fit_paper(templates: Sequence[str] = ("templates/formal",), seeds: Sequence[int] = (0, 1, 2),
              resamples: int = 1000, boot_seed: int = 0, cache_dir=None, models: Optional[Sequence[str]] = None,
              with_recovery: bool = True, with_profiles: bool = True, items=None, use_cache: bool = True) -> PaperFit:
    """Fit every paper model column; see the module doc. ``items``: paper items (default: the file).

    The result is cached under ``cache_dir`` (default ``$CROSSPROFILE_CACHE/paperfit``) keyed by the
    ledger design's key (templates' bytes, seeds, policies, budgets, grid, package version), the
    figures' definitions and paper values, ``resamples``, ``boot_seed``, ``models`` and the options:
    a second call with the same inputs reads the tables back and computes nothing."""
    t0 = time.perf_counter()
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    figs = select_figures(items)
    pols, buds = needed_policies(figs, DEFAULT_POLICIES)
    dkey, _ = cache_key(templates, seeds, pols, buds, 4, None, GRID)
    fkey = hashlib.sha256(json.dumps(dict(
        design=dkey, figures=[(f.ref, f.unit, f.paper, repr(f.contrast)) for f in figs], resamples=int(resamples),
        boot_seed=int(boot_seed), models=list(models) if models is not None else None, recovery=with_recovery,
        profiles=with_profiles, version=FIT_VERSION), sort_keys=True, default=str).encode()).hexdigest()[:20]
    fdir = cache_dir / f"fit-{fkey}"
    if use_cache and (fdir / "info.json").exists():
        return _read(fdir, t0)
    out = _fit(figs, pols, buds, templates, seeds, resamples, boot_seed, cache_dir, models, with_recovery,
               with_profiles, t0)
    out.info.update(fit_key=fkey, fit_cache_hit=False)
    if use_cache:
        _write(out, fdir)
    return out


def _write(out: PaperFit, fdir: Path) -> None:
    tmp = fdir.with_name(f".{fdir.name}.{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        getattr(out, name).to_parquet(tmp / f"{name}.parquet", index=False)
    (tmp / "info.json").write_text(json.dumps(out.info, default=_jsonable, indent=1))
    try:
        os.replace(tmp, fdir)
    except OSError:      # another process wrote the same entry first
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


def _jsonable(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    return str(x)


def _read(fdir: Path, t0: float) -> PaperFit:
    info = json.loads((fdir / "info.json").read_text())
    info.update(fit_cache_hit=True)
    info["seconds"] = dict(info.get("seconds", {}), this_call=time.perf_counter() - t0)
    return PaperFit(*(pd.read_parquet(fdir / f"{n}.parquet") for n in TABLES), info=info)


def _fit(figs, pols, buds, templates, seeds, resamples, boot_seed, cache_dir, models, with_recovery,
         with_profiles, t0) -> PaperFit:
    dec = [f for f in figs if f.kind == "decision"]
    mem = [f for f in figs if f.kind == "memory"]
    design = load_or_build(templates, seeds, pols, buds, cache_dir)
    t_design = time.perf_counter()
    fm = figure_matrix(design, dec)
    F = Fitter(design, fm)
    boot = TemplateBootstrap.draw(design.units, max(1, int(resamples)), np.random.default_rng(boot_seed))
    models = list(models) if models is not None else model_columns(figs)
    prow, frow, profrows, recrows, fits = [], [], [], [], {}
    rng = np.random.default_rng(boot_seed)
    for m in models:
        y = np.array([f.paper.get(m, np.nan) for f in dec])
        used = ~np.isnan(y) & fm.estimable
        if used.sum() < 3:
            continue
        full = F.fit(y, used)
        th_b, pr_b, n_failed = F.bootstrap(y, used, full, boot.weights) if resamples else (None, None, 0)
        loo = F.leave_one_out(y, used, full)
        pred = F.predict(full["theta"])
        n = int(used.sum())
        sigma2 = full["loss"] / max(1, n - 3)
        thr = full["loss"] + sigma2 * chi2.ppf(0.95, 1)
        fits[m] = dict(theta=[float(v) for v in full["theta"]], loss=full["loss"], rmse=full["rmse"], n_figures=n,
                       unconverged_refits=n_failed,
                       model=ledger_model(full["theta"]))
        for k, name in enumerate(PARAMS):
            lo = hi = plo = phi = math.nan
            if th_b is not None:
                lo, hi = (float(v) for v in percentile_interval(th_b[:, k]))
            if with_profiles:
                vals = _profile_values(k, full["theta"][k])
                prof = F.profile(y, used, full, k, vals)
                plo, phi = _profile_interval(vals, prof, thr)
                profrows += [dict(model=short(m), parameter=name, value=v, loss=L,
                                  delta=(L - full["loss"]) / sigma2 if sigma2 > 0 else math.nan)
                             for v, L in zip(vals, prof)]
            prow.append(dict(model=short(m), parameter=name, estimate=full["theta"][k], lo=lo, hi=hi,
                             profile_lo=plo, profile_hi=phi, at_bound=full["at_bound"][k]))
        for i, f in enumerate(dec):
            other = next((f.paper[k] for k in NOT_SEPARATED if k in f.paper), math.nan)
            role = ("fitted" if used[i] else "held out (paper names no model)" if not math.isnan(other)
                    else "not estimable" if not fm.estimable[i] else "prediction only")
            pv = y[i] if not math.isnan(y[i]) else other
            lo, hi = ((float(v) for v in percentile_interval(pr_b[:, i]))
                      if pr_b is not None and np.isfinite(pr_b[:, i]).any() else (math.nan, math.nan))
            frow.append(dict(model=short(m), figure=f.ref, unit=f.unit, paper=pv, fit=pred[i], lo=lo, hi=hi,
                             residual=pred[i] - pv, loo=loo[i], role=role))
        if with_recovery:
            truths = list(RECOVERY_TRUTHS) + [tuple(full["theta"])]
            for r in recovery(F, used, truths, rng):
                recrows.append(dict(model=short(m), **{f"{p}_true": r["truth"][k] for k, p in enumerate(PARAMS)},
                                    **{f"{p}_fit": r["estimate"][k] for k, p in enumerate(PARAMS)}, rmse=r["rmse"]))
    memory = _memory_table(design, mem, boot)
    info = dict(title=NOT_A_MODEL_RUN, backend="ledger", fits=fits, templates=list(templates), seeds=list(seeds),
                n_templates=len(design.units), n_decisions=len(design.rows), n_patterns=int(design.Xp.shape[0]),
                resamples=int(resamples) if resamples else 0, boot_seed=boot_seed, policies=pols, budgets=buds,
                cache_key=design.key, cache_hit=design.from_cache, seconds=dict(
                    design=t_design - t0, fit=time.perf_counter() - t_design, total=time.perf_counter() - t0,
                    **{f"design_{k}": v for k, v in design.seconds.items()}))
    return PaperFit(pd.DataFrame(prow), pd.DataFrame(frow), memory, pd.DataFrame(profrows), pd.DataFrame(recrows),
                    info)


def _memory_table(design, mem, boot) -> pd.DataFrame:
    """Parameter-free figures: the paper's value per model beside the ledger's memories' value."""
    if not mem:
        return pd.DataFrame()
    ev = evaluate_figures(design.rows, mem, TemplateBootstrap(boot.units, boot.idx[:min(1000, boot.n_resamples)]))
    rows = []
    for f, (_, e) in zip(mem, ev.iterrows()):
        for m, v in f.paper.items():
            rows.append(dict(figure=f.ref, unit=f.unit, paper_model=short(m), paper=v, ledger=e["estimate"],
                             lo=e["lo"], hi=e["hi"]))
    return pd.DataFrame(rows)


def predict_at(theta, templates: Sequence[str] = ("templates/formal",), seeds: Sequence[int] = (0, 1, 2),
               cache_dir=None, items=None) -> pd.Series:
    """Every predictable figure (index: figure reference) from the reference decider at ``theta`` =
    (s, w, beta) on the cached grid: e.g. a fitted point with ``s = 0`` (no social proof) shows what
    social proof contributes to each figure."""
    figs = select_figures(items)
    dec = [f for f in figs if f.kind == "decision"]
    pols, buds = needed_policies(figs, DEFAULT_POLICIES)
    design = load_or_build(templates, seeds, pols, buds, cache_dir)
    fm = figure_matrix(design, dec)
    p = design.probability(np.asarray(theta, dtype=float))
    return pd.Series(fm.predict(p), index=[f.ref for f in dec], name=ledger_model(theta))
