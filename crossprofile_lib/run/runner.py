"""Run a grid: templates x variants x seeds x policies x budgets -> one row per decision; every task unit and its
memories built once (:mod:`crossprofile_lib.run.pipeline`), all decision requests sent to the backend in one batch."""

from __future__ import annotations

import hashlib
import math
import time
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from crossprofile_lib.backends import backend_for
from crossprofile_lib.backends.llm import TOP_LOGPROBS
from crossprofile_lib.design import HEADROOM_MIN_POINTS, NO_BUDGET
from crossprofile_lib.policies import relevance_metrics
from crossprofile_lib.rng import stream
from crossprofile_lib.run.config import RunConfig  # noqa: F401  (the run configuration; re-exported)
from crossprofile_lib.run.pipeline import (
    SCRIPTED,
    Protocol,
    TaskInputs,
    TaskUnit,
    memories,
    policy_rng,
    prefetch,
    specs_of,
    task_units,
    unsupported,
)
from crossprofile_lib.run.results import run_header, stamp, template_hashes, write_results
from crossprofile_lib.safety.outputs import clean_leftovers, locked_dir
from crossprofile_lib.stats.analysis_set import fallback_lines, relevance_fallback
from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.headroom import Headroom, headroom
from crossprofile_lib.task.decision import DecisionRequest
from crossprofile_lib.task.evidence import composition, encode_features, fact_table, option_features
from crossprofile_lib.task.extraction import MODEL_UNAVAILABLE
from crossprofile_lib.task.templates import load_templates


def protocol_of(cfg: RunConfig, backend=None, extractor=None) -> Protocol:
    """The run's :class:`~crossprofile_lib.run.pipeline.Protocol` (a :class:`ValueError` for extraction ``model``
    without an extractor: on the reference decider it is unavailable)."""
    if cfg.protocol == "scripted":
        if cfg.extraction != "oracle":
            raise ValueError(f"--extraction {cfg.extraction} needs --protocol messy (the scripted discussion's "
                             f"claims are its facts)")
        return SCRIPTED
    if cfg.extraction == "model" and extractor is None:
        if backend is None or getattr(backend, "decision_mode", "") == "ledger":
            raise ValueError(MODEL_UNAVAILABLE)
        raise ValueError(f"extraction level 'model' on backend '{backend.name}' needs the natural protocol's "
                         f"extractor passed to the runner (run_grid(..., extractor=...))")
    return Protocol("messy", cfg.extraction, cfg.opinion_rate, extractor)


def _units(templates, cfg: RunConfig, backend, extractor=None) -> list[TaskUnit]:
    return task_units(templates, cfg.variants, cfg.seeds, cfg.n_agents, backend.tokenizer,
                      protocol=protocol_of(cfg, backend, extractor))


def build_requests(templates, cfg: RunConfig, backend, units: Optional[Sequence[TaskUnit]] = None):
    """Yield ``(request, row)`` pairs: the decision request and the row's known columns (``units``: the grid's task
    units when already built)."""
    budgets = list(cfg.budgets)
    specs = specs_of(cfg.policies)
    if units is None:
        units = _units(templates, cfg, backend)
    for u in units:
        task, v, t = u.task, u.task.variant, u.task.template
        base = dict(template_id=t.id, template_version=t.version, domain=t.domain, variant=v.name,
                    support_attr=v.support_attr, decoy_attr=v.decoy_attr,
                    irrelevant_attr=v.irrelevant_attr, cell=v.cell, pooled_cell=v.pooled_cell, seed=task.seed,
                    n_agents=cfg.n_agents, t_all=u.t_all, option_order=",".join(u.order),
                    protocol=u.protocol.name, extraction=u.protocol.extraction,
                    opinion_rate=float(u.protocol.opinion_rate), n_claims=len(u.claims))
        if u.merge is not None:
            base.update(merge_precision=u.merge.precision, merge_recall=u.merge.recall,
                        split_rate=u.merge.split_rate, rare_rate=u.merge.rare_rate)
        x = TaskInputs(u, backend)
        facts = fact_table(t)
        for m in memories(u, specs, budgets, backend, task.task_id, policy_rng(task.seed), x):
            spec, mem, b, btok, rel = m.spec, m.memory, m.budget, m.budget_tokens, m.relevance
            comp = composition(task, mem)
            prec, rec = relevance_metrics(rel, x.truth) if rel is not None else (math.nan, math.nan)
            rel_error = rel.error if rel is not None else ""
            row = dict(base, policy=spec.name, base_policy=spec.base, selection=spec.selection,
                       label_format=spec.fmt, relevance_filter=m.relevance_kind, stance_source=m.stance_kind,
                       stance_agreement=(x.stance_agreement() if "stances" in spec.needs and spec.source == "model"
                                         else math.nan),
                       budget_label=b.label if b else NO_BUDGET,
                       budget_ratio=(b.ratio if b and b.ratio is not None else math.nan),
                       budget_tokens=(btok if btok is not None else -1),
                       memory_tokens=mem.tokens, memory_truncated=mem.truncated,
                       n_kept=mem.n_kept, kept_support=comp.kept_support,
                       kept_decoy=comp.kept_decoy, kept_irrelevant=comp.kept_irrelevant,
                       retention=comp.retention, net_lead=comp.net_lead,
                       irrelevant_tone=comp.irrelevant_tone,
                       relevance_precision=prec, relevance_recall=rec,
                       memory_sha=hashlib.sha256(mem.text.encode()).hexdigest()[:16],
                       memory_kind=mem.kind,
                       option_features=encode_features(option_features(task, mem, u.order, facts)),
                       relevance_invalid=bool(rel is not None and rel.invalid),
                       error="; ".join(e for e in (rel_error, (mem.meta or {}).get("error", "")) if e))
            yield DecisionRequest(task, mem, u.order, m.key), row


def run_grid(cfg: RunConfig, backend=None, templates=None, progress: bool = False, extractor=None) -> pd.DataFrame:
    """Run the grid and return the tidy table (not written; see :func:`run_to_dir`). A policy the backend
    cannot run (:func:`crossprofile_lib.run.pipeline.unsupported`) is a :class:`ValueError` before any work."""
    backend = backend or backend_for(cfg)
    cannot = unsupported(cfg.policies, backend)
    if cannot:
        raise ValueError(f"backend '{backend.name}' cannot run {', '.join(cannot)}: " + "; ".join(cannot.values()))
    protocol_of(cfg, backend, extractor)  # a protocol the backend cannot run: refused before any work
    templates = templates if templates is not None else load_templates(cfg.templates, n_options=cfg.n_options)
    if progress:
        backend.progress = True
    units = _units(templates, cfg, backend, extractor)  # built once
    prefetch(units, specs_of(cfg.policies), list(cfg.budgets), backend)  # build_requests then finds them cached
    pairs = list(build_requests(templates, cfg, backend, units))
    decisions = backend.decide([r for r, _ in pairs])
    rows = []
    for (req, row), d in zip(pairs, decisions):
        t = req.task.template
        meta = d.meta or {}
        row.update(decision=d.option if d.option is not None else "",
                   decision_letter=d.letter or "",
                   correct=(d.option == t.correct_option) and not d.invalid,
                   chose_decoy=(d.option == t.decoy_option) and not d.invalid,
                   invalid=bool(d.invalid),
                   backend=backend.name, model=backend.model, decision_mode=backend.decision_mode,
                   tokenizer=backend.tokenizer.name,
                   error="; ".join(e for e in (row.get("error", ""), meta.get("error", "")) if e),
                   cached=bool(meta.get("cached", False)), call_retries=int(meta.get("retries", 0)),
                   format_retry=bool(meta.get("format_retry", False)), prompt_file=meta.get("prompt_file", ""),
                   prompt_sha=meta.get("prompt_sha", ""), letter_logprobs=meta.get("letter_logprobs", ""),
                   letters_missing=meta.get("letters_missing", ""))
        rows.append(row)
    return pd.DataFrame(rows).astype({c: "int64" for c in (
        "seed", "n_kept", "n_claims", "kept_support", "kept_decoy", "kept_irrelevant", "net_lead", "memory_tokens",
        "budget_tokens", "t_all", "n_agents", "template_version", "irrelevant_tone")})


def headroom_check(df: pd.DataFrame, n_resamples: int = 10_000, seed: int = 0) -> Headroom:
    """SPEC section 8: ALL - EMPTY accuracy (points) with a template-bootstrap interval; a lower bound of
    ``HEADROOM_MIN_POINTS`` (prereg.yaml) or less marks the model's results exploratory."""
    d = df[df["policy"].isin(["ALL", "EMPTY"])]
    boot = TemplateBootstrap.draw(d["template_id"].unique() if len(d) else ["-"], n_resamples,
                                  stream(seed, "headroom"))
    return headroom(df, boot, min_points=HEADROOM_MIN_POINTS)


def _report_model_run(df: pd.DataFrame, backend, header: dict) -> None:
    """Print the call counts and the headroom check at the end of a model run."""
    st = dict(backend.stats)
    header["calls"] = {k: int(v) for k, v in sorted(st.items())}
    print(f"{backend.name} [{backend.decision_mode}]: {st.get('calls', 0)} model calls, "
          f"{st.get('cached', 0)} cache hits, {int(df['invalid'].sum())} invalid answers, "
          f"{header['errors']} errors")
    if st.get("letters_missing"):
        print(f"score mode: {st['letters_missing']} decisions had option letters outside the log-probabilities the "
              f"server returned (top {TOP_LOGPROBS}); they count as -inf (column letters_missing)")
    fb = relevance_fallback(df)
    if fb:
        header["relevance_fallback"] = fb
        for line in fallback_lines(fb):
            print(line)
    h = headroom_check(df)
    header["headroom"] = h.as_dict()
    header["status"] = h.status
    if h.estimate is None:
        print(f"headroom check: not run ({h.reason}); results are exploratory")
    else:
        print(f"headroom check: ALL - EMPTY = {h.estimate:+.1f} points (95% CI {h.lo:+.1f} to "
              f"{h.hi:+.1f}); {'PASS' if h.passed else 'FAIL'} -> results are {h.status}")


def run_to_dir(cfg: RunConfig, out_dir: Path | str, backend=None, progress: bool = False, extractor=None
               ) -> tuple[pd.DataFrame, dict]:
    """Run the grid, write ``results.parquet`` and ``run.json``. Model runs also count calls, cache hits, invalid
    answers and errors (``header['errors']``; rows with ``error`` set) and print the headroom check. The output folder
    is locked for the whole run (:func:`crossprofile_lib.safety.outputs.locked_dir`: a second run refuses at once)."""
    with locked_dir(out_dir):
        clean_leftovers(out_dir, ("results.parquet", "run.json"))  # a write killed mid-way (kill -9)
        t0 = time.perf_counter()
        backend = backend or backend_for(cfg)
        df = run_grid(cfg, backend, progress=progress, extractor=extractor)
        header = stamp(run_header(cfg, backend), t0)
        header["templates_sha256"] = template_hashes(cfg.templates)
        header.update(rows=len(df), errors=int((df["error"] != "").sum()) if "error" in df else 0,
                      invalid=int(df["invalid"].sum()))
        if backend.decision_mode != "ledger":
            header["cache"] = backend.cache.path if backend.cache is not None else None
            _report_model_run(df, backend, header)
        write_results(df, out_dir, header)
        return df, header
