"""``fit_paper``: fit the reference decider to the paper's published figures, every table at once. Per paper model
column: the weighted least-squares ``(s, w, beta)`` (weights re-estimated at the fit up to :data:`REWEIGHT_STEPS`
times); **parametric-bootstrap** intervals (figures redrawn at the paper's sample sizes, rounded as published,
refitted); a **profile** interval (loss within ``sigma^2 * chi2_1(0.95)`` of its minimum, ``sigma^2 = max(1, chi2 /
df)``); optionally a template-bootstrap interval; per figure the paper value, n, SD, prediction, residual, z, linked
group and leave-one-out prediction; a recovery check. Not a model run.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd
from scipy.stats import chi2

from crossprofile_lib.paper_figures import SAMPLE_TEMPLATES, paper_sampling
from crossprofile_lib.paperfit.figures import (
    NOT_A_MODEL_RUN,
    NOT_SEPARATED,
    model_columns,
    needed_policies,
    select_figures,
    short,
)
from crossprofile_lib.paperfit.fit import BOUNDS, PARAMS, Fitter, evaluate_figures, figure_matrix, recovery, whitener
from crossprofile_lib.paperfit.ledger import GRID, cache_key, default_cache_dir, load_or_build
from crossprofile_lib.paperfit.sampling import build_sampling
from crossprofile_lib.policies import DEFAULT_POLICIES
from crossprofile_lib.rng import stream
from crossprofile_lib.stats.bootstrap import TemplateBootstrap, percentile_interval
from crossprofile_lib.task.tokenizer import OfflineTokenizer, get_tokenizer

#: known parameters for the recovery check (besides each model's fitted point)
RECOVERY_TRUTHS = ((0.5, 0.0, 2.0), (1.0, 0.5, 1.0), (0.0, -0.5, 4.0))
PROFILE_POINTS = 25
FIT_VERSION = 5   # bump when the fit's method changes (part of the result cache key)
#: most re-estimations of the sampling weights at the current fit (stops earlier once theta settles)
REWEIGHT_STEPS = 6
#: redrawn figure sets per known parameter point in the recovery check
RECOVERY_DRAWS = 20
#: template-bootstrap resamples for the parameter-free memory figures' intervals
MEMORY_RESAMPLES = 1000
TABLES = ("params", "figures", "memory", "profiles", "recovery")


def ledger_model(theta) -> str:
    """The reference decider's model string (as :class:`ReferenceDecider.model` writes it)."""
    return f"reference-decider(sp={theta[0]:.3g},irr={theta[1]:.3g},beta={theta[2]:.3g})"


@dataclass
class PaperFit:
    params: pd.DataFrame       # model, parameter, estimate, lo, hi (parametric bootstrap), profile_lo, profile_hi,
    #                            template_lo, template_hi (template bootstrap, NaN unless asked), at_bound
    figures: pd.DataFrame      # one row per (model, decision figure)
    memory: pd.DataFrame       # parameter-free figures: paper vs the ledger's memories
    profiles: pd.DataFrame     # model, parameter, value, loss, delta ((loss - min) / sigma^2; 95%: chi2_1 3.84)
    recovery: pd.DataFrame     # model, truth, median refit and 95% range of the refits per parameter
    info: dict = field(default_factory=dict)

    title = NOT_A_MODEL_RUN


#: half-width of the fine profile window around the estimate: s, w, log(beta)
_FINE = (0.15, 0.8, 0.5)


def _profile_values(k: int, est: float) -> np.ndarray:
    """:data:`PROFILE_POINTS` values across parameter k's bounds plus 21 in a fine window around the estimate."""
    lo, hi = BOUNDS[k]
    off = np.linspace(-_FINE[k], _FINE[k], 21)
    v = np.concatenate([np.geomspace(lo, hi, PROFILE_POINTS), est * np.exp(off)] if k == 2
                       else [np.linspace(lo, hi, PROFILE_POINTS), est + off])
    return np.unique(np.clip(np.round(v, 10), lo, hi))


def _profile_interval(values: np.ndarray, loss: np.ndarray, threshold: float) -> tuple[float, float]:
    """The range of ``values`` whose profile loss is within ``threshold`` (interpolated at the crossings)."""
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
              with_recovery: bool = True, with_profiles: bool = True, items=None, use_cache: bool = True,
              tokenizer: Optional[str] = None, template_resamples: int = 0,
              recovery_draws: int = RECOVERY_DRAWS, sampling: Optional[dict] = None) -> PaperFit:
    """Fit every paper model column (module doc). ``resamples`` / ``template_resamples``: refits per model (0: none);
    ``sampling``: ``{model: {"templates": T, "seeds": S}}`` overriding the paper's samples. Cached under
    ``cache_dir`` (default ``$CROSSPROFILE_CACHE/paperfit``), keyed by every input."""
    t0 = time.perf_counter()
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    figs = select_figures(items)
    pols, buds = needed_policies(figs, DEFAULT_POLICIES)
    tok = _tokenizer_label(tokenizer)
    samp = dict(paper_sampling(), **(sampling or {}))
    dkey, _ = cache_key(templates, seeds, pols, buds, 4, tok, GRID)
    fkey = hashlib.sha256(json.dumps(dict(
        design=dkey, figures=[(f.ref, f.unit, f.paper, f.n, repr(f.contrast)) for f in figs], resamples=int(resamples),
        boot_seed=int(boot_seed), models=list(models) if models is not None else None, recovery=with_recovery,
        profiles=with_profiles, template_resamples=int(template_resamples), recovery_draws=int(recovery_draws),
        sampling=samp, version=FIT_VERSION), sort_keys=True, default=str).encode()).hexdigest()[:20]
    fdir = cache_dir / f"fit-{fkey}"
    if use_cache and (fdir / "info.json").exists():
        return _read(fdir)
    out = _fit(figs, pols, buds, templates, seeds, resamples, boot_seed, cache_dir, models, with_recovery,
               with_profiles, t0, tok, int(template_resamples), int(recovery_draws), samp)
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
        shutil.rmtree(tmp, ignore_errors=True)


def _jsonable(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    return str(x)


def _read(fdir: Path) -> PaperFit:
    info = dict(json.loads((fdir / "info.json").read_text()), fit_cache_hit=True)
    return PaperFit(*(pd.read_parquet(fdir / f"{n}.parquet") for n in TABLES), info=info)


def _tokenizer_label(spec: Optional[str]) -> Optional[str]:
    """The tokenizer spec as the design's cache key sees it: None for the offline default, else ``spec`` (a bad spec
    raises ``get_tokenizer``'s ``ValueError``)."""
    tok = get_tokenizer(spec)
    return None if isinstance(tok, OfflineTokenizer) and spec in (None, "", "offline", OfflineTokenizer.name) else spec


def _weighted_fit(F: Fitter, S, design, y, used, kappa: float) -> tuple[dict, np.ndarray, int, tuple]:
    """Fit with the sampling weights re-estimated at the current fit: the fit, the covariance ``V`` at it, steps and
    the atom proportions ``(pc, pd_)`` at it."""
    full = F.fit(y, used)
    steps = 0
    for steps in range(1, REWEIGHT_STEPS + 1):
        pc, pd_ = S.proportions(design.probability(full["theta"]))
        new = F.refine(y, used, full["theta"], whitener(S.covariance(pc, pd_, kappa)[np.ix_(used, used)]))
        moved = np.max(np.abs(np.array([new["theta"][0] - full["theta"][0], new["theta"][1] - full["theta"][1],
                                        math.log(new["theta"][2] / full["theta"][2])])))
        full = new
        if moved < 1e-3:
            break
    pc, pd_ = S.proportions(design.probability(full["theta"]))
    return full, S.covariance(pc, pd_, kappa), steps, (pc, pd_)


def _fit(figs, pols, buds, templates, seeds, resamples, boot_seed, cache_dir, models, with_recovery, with_profiles,
         t0, tokenizer, template_resamples, recovery_draws, samp) -> PaperFit:
    dec = [f for f in figs if f.kind == "decision"]
    mem = [f for f in figs if f.kind == "memory"]
    design = load_or_build(templates, seeds, pols, buds, cache_dir, tokenizer=tokenizer)
    t_design = time.perf_counter()
    fm = figure_matrix(design, dec)
    F = Fitter(design, fm)
    S = build_sampling(design, dec)
    tboot = (TemplateBootstrap.draw(design.units, template_resamples, stream(boot_seed, "paperfit", "templates"))
             if template_resamples else None)
    models = list(models) if models is not None else model_columns(figs)
    prow, frow, profrows, recrows, fits = [], [], [], [], {}
    for m in models:
        y = np.array([f.paper.get(m, np.nan) for f in dec])
        used = ~np.isnan(y) & fm.estimable
        if used.sum() < 3:
            continue
        ps = samp.get(m, {"templates": SAMPLE_TEMPLATES, "seeds": 3})
        kappa = ps["templates"] * ps["seeds"] / (len(design.units) * len(seeds))   # paper decisions per design row
        full, V, steps, (pc, pd_) = _weighted_fit(F, S, design, y, used, kappa)
        H = whitener(V[np.ix_(used, used)])
        link = S.linkage(used)
        df = link["n_independent"] - 3
        th_b = pr_b = None
        n_failed = 0
        if resamples:
            Y = S.draw(pc, pd_, kappa, int(resamples), stream(boot_seed, "paperfit", "parametric", m))
            th_b, pr_b, n_failed = F.refit_many(Y, used, full["theta"], H)
        th_t, n_failed_t = None, 0
        if tboot is not None:
            th_t, _, n_failed_t = F.refit_many([y] * len(tboot.weights), used, full["theta"], H, tboot.weights)
        loo = F.leave_one_out(y, used, full, V)
        pred = F.predict(full["theta"])
        n = int(used.sum())
        sigma2 = max(1.0, full["loss"] / df) if df > 0 else 1.0
        thr = full["loss"] + sigma2 * chi2.ppf(0.95, 1)
        null = link.pop("null")
        incons = float(np.linalg.norm(null @ np.where(used, y, 0.0)[used])) if len(null) else 0.0
        fits[m] = dict(theta=[float(v) for v in full["theta"]], loss=full["loss"], chi2=full["loss"], df=df,
                       p_fit=float(chi2.sf(full["loss"], df)) if df > 0 else math.nan, rmse=full["rmse"],
                       n_figures=n, n_independent=link["n_independent"], linked_groups=link["groups"],
                       inconsistency=incons, kappa=kappa, paper_sample=samp.get(m), profile_sigma2=sigma2,
                       reweight_steps=steps, unconverged_refits=n_failed, unconverged_template_refits=n_failed_t,
                       model=ledger_model(full["theta"]))
        for k, name in enumerate(PARAMS):
            lo = hi = plo = phi = tlo = thi = math.nan
            if th_b is not None:
                lo, hi = (float(v) for v in percentile_interval(th_b[:, k]))
            if th_t is not None:
                tlo, thi = (float(v) for v in percentile_interval(th_t[:, k]))
            if with_profiles:
                vals = _profile_values(k, full["theta"][k])
                prof = F.profile(y, used, full, k, vals, H)
                plo, phi = _profile_interval(vals, prof, thr)
                profrows += [dict(model=short(m), parameter=name, value=v, loss=L,
                                  delta=(L - full["loss"]) / sigma2 if sigma2 > 0 else math.nan)
                             for v, L in zip(vals, prof)]
            prow.append(dict(model=short(m), parameter=name, estimate=full["theta"][k], lo=lo, hi=hi,
                             profile_lo=plo, profile_hi=phi, template_lo=tlo, template_hi=thi,
                             at_bound=full["at_bound"][k]))
        group = {ref: g + 1 for g, refs in enumerate(link["groups"]) for ref in refs}
        sd = np.sqrt(np.clip(np.diag(V), 0.0, None))
        for i, f in enumerate(dec):
            other = next((f.paper[k] for k in NOT_SEPARATED if k in f.paper), math.nan)
            role = ("fitted" if used[i] else "held out (paper names no model)" if not math.isnan(other)
                    else "not estimable" if not fm.estimable[i] else "prediction only")
            pv = y[i] if not math.isnan(y[i]) else other
            lo, hi = ((float(v) for v in percentile_interval(pr_b[:, i]))
                      if pr_b is not None and np.isfinite(pr_b[:, i]).any() else (math.nan, math.nan))
            n_src, n_val = (("paper", f.n * ps["templates"] / SAMPLE_TEMPLATES * ps["seeds"] / 3) if f.n is not None
                            else ("this suite's design", kappa * S.n_term[i]))
            frow.append(dict(model=short(m), figure=f.ref, unit=f.unit, paper=pv, n=n_val, n_source=n_src,
                             sd=sd[i], fit=pred[i], lo=lo, hi=hi, residual=pred[i] - pv,
                             z=(pred[i] - pv) / sd[i] if sd[i] > 0 else math.nan, loo=loo[i],
                             linked=(f"group {group[f.ref]}" if f.ref in group and used[i] else ""), role=role))
        if with_recovery:
            truths = list(RECOVERY_TRUTHS) + [tuple(full["theta"])]
            for r in recovery(F, used, truths, stream(boot_seed, "paperfit", "recovery", m), S, kappa,
                              max(1, int(recovery_draws))):
                q = np.percentile(r["estimates"], [2.5, 97.5], axis=0)
                cols = dict(true=r["truth"], fit=r["estimate"], lo=q[0], hi=q[1])
                recrows.append(dict(model=short(m), **{f"{p}_{c}": v[k] for c, v in cols.items()
                                                       for k, p in enumerate(PARAMS)},
                                    draws=len(r["estimates"]), rmse=r["rmse"]))
    memory = _memory_table(design, mem, TemplateBootstrap.draw(design.units, MEMORY_RESAMPLES,
                                                               stream(boot_seed, "paperfit", "memory")))
    info = dict(title=NOT_A_MODEL_RUN, backend="ledger", fits=fits, templates=list(templates), seeds=list(seeds),
                n_templates=len(design.units), n_decisions=len(design.rows), n_patterns=int(design.Xp.shape[0]),
                n_atoms=S.n_atoms, aliases=list(S.aliases), tokenizer=get_tokenizer(tokenizer).name,
                tokenizer_spec=tokenizer, resamples=int(resamples) if resamples else 0,
                template_resamples=int(template_resamples), recovery_draws=int(recovery_draws),
                interval="parametric bootstrap (the paper's figures redrawn at the paper's sample sizes)",
                boot_seed=boot_seed, policies=pols, budgets=buds,
                cache_key=design.key, cache_hit=design.from_cache, seconds=dict(
                    design=t_design - t0, fit=time.perf_counter() - t_design, total=time.perf_counter() - t0))
    return PaperFit(pd.DataFrame(prow), pd.DataFrame(frow), memory, pd.DataFrame(profrows), pd.DataFrame(recrows),
                    info)


def _memory_table(design, mem, boot) -> pd.DataFrame:
    """Parameter-free figures: the paper's value per model beside the ledger's memories' value."""
    if not mem:
        return pd.DataFrame()
    ev = evaluate_figures(design.rows, mem, boot)
    rows = []
    for f, (_, e) in zip(mem, ev.iterrows()):
        for m, v in f.paper.items():
            rows.append(dict(figure=f.ref, unit=f.unit, paper_model=short(m), paper=v, ledger=e["estimate"],
                             lo=e["lo"], hi=e["hi"]))
    return pd.DataFrame(rows)


def predict_at(theta, templates: Sequence[str] = ("templates/formal",), seeds: Sequence[int] = (0, 1, 2),
               cache_dir=None, items=None, tokenizer: Optional[str] = None) -> pd.Series:
    """Every predictable figure from the reference decider at ``theta`` = (s, w, beta) (e.g. ``s = 0``: no social
    proof)."""
    figs = select_figures(items)
    dec = [f for f in figs if f.kind == "decision"]
    pols, buds = needed_policies(figs, DEFAULT_POLICIES)
    design = load_or_build(templates, seeds, pols, buds, cache_dir, tokenizer=_tokenizer_label(tokenizer))
    fm = figure_matrix(design, dec)
    p = design.probability(np.asarray(theta, dtype=float))
    return pd.Series(fm.predict(p), index=[f.ref for f in dec], name=ledger_model(theta))


def predict_grid(thetas, templates: Sequence[str] = ("templates/formal",), seeds: Sequence[int] = (0, 1, 2),
                 cache_dir=None, items=None, tokenizer: Optional[str] = None) -> pd.DataFrame:
    """Every predictable figure (rows) at each ``theta`` = (s, w, beta) of ``thetas`` (columns, in order): one design
    loaded once for a sweep (:func:`predict_at` for one point)."""
    figs = select_figures(items)
    dec = [f for f in figs if f.kind == "decision"]
    pols, buds = needed_policies(figs, DEFAULT_POLICIES)
    design = load_or_build(templates, seeds, pols, buds, cache_dir, tokenizer=_tokenizer_label(tokenizer))
    fm = figure_matrix(design, dec)
    th = np.atleast_2d(np.asarray(thetas, dtype=float))
    P = design.probability(th)
    return pd.DataFrame({i: fm.predict(P[i]) for i in range(len(th))}, index=[f.ref for f in dec])
