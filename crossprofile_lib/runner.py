"""Run a grid: templates x variants x seeds x policies x budgets -> one row per decision.

The runner builds every task, discussion, claim list and memory, sends all decision
requests to the backend in one batch (LLM backends cache and parallelise them), and writes
the tidy table plus ``run.json``.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from . import __version__
from .budgets import Budget, t_all
from .balance import oracle_stances
from .decider import DecisionRequest, option_order, oracle_relevance
from .discussion import claim_list, make_task, scripted_discussion
from .evidence import composition
from .policies import DEFAULT_POLICIES, parse_policy, select_memory
from .results import git_commit, write_results
from .rng import stream
from .templates import load_templates
from .variants import VARIANT_NAMES, Variant, agent_names

DEFAULT_BUDGETS = ("0.4", "0.6", "0.8", "128t")


@dataclass
class RunConfig:
    backend: str = "ledger"
    templates: Sequence[str] = ("templates",)
    seeds: Sequence[int] = (0, 1, 2)
    budgets: Sequence[str] = DEFAULT_BUDGETS
    policies: Sequence[str] = DEFAULT_POLICIES
    variants: Sequence[str] = VARIANT_NAMES
    n_agents: int = 4
    n_options: int = 3
    tokenizer: Optional[str] = None
    backend_options: dict = field(default_factory=dict)


def _relevance_metrics(pred: frozenset[int], truth: frozenset[int]) -> tuple[float, float]:
    tp = len(pred & truth)
    prec = tp / len(pred) if pred else math.nan
    rec = tp / len(truth) if truth else math.nan
    return prec, rec


def build_requests(templates, cfg: RunConfig, backend):
    """Yield ``(request, row)`` pairs: the decision request and the row's known columns."""
    tok = backend.tokenizer
    budgets = [Budget.parse(b) for b in cfg.budgets]
    specs = [parse_policy(p) for p in cfg.policies]
    for t in templates:
        total = t_all(t, tok, cfg.n_agents)
        for vname in cfg.variants:
            v = Variant(vname)
            for seed in cfg.seeds:
                task = make_task(t, v, seed, cfg.n_agents)
                tr = scripted_discussion(task)
                cl = claim_list(tr, agent_names(cfg.n_agents))
                truth = oracle_relevance(cl, task)
                model_rel = None
                order = option_order(task)
                base = dict(template_id=t.id, template_version=t.version, domain=t.domain, variant=v.name,
                            support_attr=v.support_attr, decoy_attr=v.decoy_attr,
                            irrelevant_attr=v.irrelevant_attr, cell=v.cell, pooled_cell=v.pooled_cell, seed=seed, n_agents=cfg.n_agents,
                            t_all=total, option_order=",".join(order))
                stances = model_stances = None
                stance_agree = math.nan
                for spec in specs:
                    rel, rel_kind, stance_kind = None, "", ""
                    if spec.base == "BAL-oracle":
                        stances, stance_kind = oracle_stances(cl, task), "oracle"
                    elif spec.base == "BAL":
                        if model_stances is None:
                            model_stances = backend.stances(task, cl)
                            truth_st = oracle_stances(cl, task)
                            stance_agree = sum(a == b for a, b in zip(model_stances, truth_st)) / max(1, len(cl))
                        stances, stance_kind = model_stances, backend.relevance_kind
                    if spec.base == "R1-rel-oracle":
                        rel, rel_kind = truth, "oracle"
                    elif spec.base == "R1-rel":
                        if model_rel is None:
                            model_rel = backend.relevance(task, cl)
                        rel, rel_kind = model_rel, backend.relevance_kind
                    blist = budgets if spec.selection in ("budget", "generated") else [None]
                    for b in blist:
                        btok = b.tokens(total) if b is not None else None
                        key = f"{task.task_id}/{spec.name}/{b.label if b else '-'}"
                        rng = stream(seed, "policy", key) if spec.uses_rng else None
                        if spec.selection == "generated":
                            mem = backend.generate_memory(spec, task, tr, cl, btok, rng)
                        else:
                            mem = select_memory(spec, cl, btok, tok, rng, transcript=tr, relevant=rel,
                                                stances=stances)
                        comp = composition(task, mem)
                        prec, rec = _relevance_metrics(rel, truth) if rel is not None else (math.nan, math.nan)
                        row = dict(base, policy=spec.name, base_policy=spec.base, selection=spec.selection,
                                   label_format=spec.fmt, relevance_filter=rel_kind, stance_source=stance_kind,
                                   stance_agreement=stance_agree if spec.base == "BAL" else math.nan,
                                   budget_label=b.label if b else "none",
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
                                   relevance_invalid=bool(getattr(rel, "invalid", False)),
                                   error="; ".join(e for e in (getattr(rel, "error", ""),
                                                               (mem.meta or {}).get("error", "")) if e))
                        yield DecisionRequest(task, mem, order, key), row


def prefetch_model_calls(templates, cfg: RunConfig, backend) -> None:
    """Send a model backend's relevance-filter and B3 calls for the whole grid as one batch
    (concurrent / batched by the provider); :func:`build_requests` then finds them cached."""
    specs = [parse_policy(p) for p in cfg.policies]
    want_rel = any(s.base == "R1-rel" for s in specs)
    want_b3 = any(s.selection == "generated" for s in specs)
    want_stance = any(s.base == "BAL" for s in specs)
    if not (want_rel or want_b3 or want_stance) or not hasattr(backend, "prefetch"):
        return
    budgets = [Budget.parse(b) for b in cfg.budgets]
    rel, summ, stance = [], [], []
    for t in templates:
        total = t_all(t, backend.tokenizer, cfg.n_agents)
        for vname in cfg.variants:
            for seed in cfg.seeds:
                task = make_task(t, Variant(vname), seed, cfg.n_agents)
                tr = scripted_discussion(task)
                if want_rel or want_stance:
                    cl = claim_list(tr, agent_names(cfg.n_agents))
                    if want_rel:
                        rel.append((task, cl))
                    if want_stance:
                        stance.append((task, cl))
                if want_b3:
                    summ.extend((task, tr, b.tokens(total)) for b in budgets)
    backend.prefetch(relevance=rel, summaries=summ, stances=stance)


def run_grid(cfg: RunConfig, backend=None, templates=None, progress: bool = False) -> pd.DataFrame:
    """Run the grid and return the tidy table (not written; see :func:`run_to_dir`)."""
    from .backends import get_backend
    backend = backend or get_backend(cfg.backend, tokenizer=cfg.tokenizer, **cfg.backend_options)
    templates = templates if templates is not None else load_templates(cfg.templates, n_options=cfg.n_options,
                                                                       tokenizer=None)
    if progress and hasattr(backend, "progress"):
        backend.progress = True
    prefetch_model_calls(templates, cfg, backend)
    pairs = list(build_requests(templates, cfg, backend))
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
                   prompt_sha=meta.get("prompt_sha", ""), letter_logprobs=meta.get("letter_logprobs", ""))
        rows.append(row)
    df = pd.DataFrame(rows)
    for c in ("seed", "n_kept", "kept_support", "kept_decoy", "kept_irrelevant", "net_lead", "memory_tokens",
              "budget_tokens", "t_all", "n_agents", "template_version", "irrelevant_tone"):
        df[c] = df[c].astype("int64")
    return df


_SECRET = re.compile(r"key|token|secret|password", re.IGNORECASE)


def _redacted_config(cfg: RunConfig) -> dict:
    """The resolved configuration for ``run.json``; option values named like a secret are hidden."""
    d = asdict(cfg)
    from .redact import redact_url
    d["backend_options"] = {k: ("***" if _SECRET.search(k) else redact_url(v) if k == "base_url" else v)
                            for k, v in d["backend_options"].items()}
    return d


def headroom_check(df: pd.DataFrame, n_resamples: int = 10_000, seed: int = 0) -> dict:
    """SPEC section 8: ALL - EMPTY accuracy (points) with a template-bootstrap interval; a lower
    bound of 15 points or less marks the model's results exploratory."""
    from .stats.bootstrap import TemplateBootstrap
    from .stats.tables import headroom
    d = df[df["policy"].isin(["ALL", "EMPTY"])]
    boot = TemplateBootstrap.draw(d["template_id"].unique() if len(d) else ["-"], n_resamples,
                                  stream(seed, "headroom"))
    return headroom(df, boot)


def _report_model_run(df: pd.DataFrame, backend, header: dict) -> None:
    """Print the call counts and the headroom check at the end of a model run."""
    st = dict(getattr(backend, "stats", {}) or {})
    header["calls"] = {k: int(v) for k, v in sorted(st.items())}
    print(f"{backend.name} [{backend.decision_mode}]: {st.get('calls', 0)} model calls, "
          f"{st.get('cached', 0)} cache hits, {int(df['invalid'].sum())} invalid answers, "
          f"{header['errors']} errors")
    h = headroom_check(df)
    header["headroom"] = h
    header["status"] = h["status"]
    if h["estimate"] is None:
        print(f"headroom check: not run ({h['reason']}); results are exploratory")
    else:
        print(f"headroom check: ALL - EMPTY = {h['estimate']:+.1f} points (95% CI {h['lo']:+.1f} to "
              f"{h['hi']:+.1f}); {'PASS' if h['passed'] else 'FAIL'} -> results are {h['status']}")


def run_to_dir(cfg: RunConfig, out_dir: Path | str, backend=None, progress: bool = False
               ) -> tuple[pd.DataFrame, dict]:
    """Run the grid, write ``results.parquet`` and ``run.json``. Model runs also count calls,
    cache hits, invalid answers and errors (``header['errors']``; rows with ``error`` set) and
    print the headroom check. The output folder is locked for the whole run
    (:func:`crossprofile_lib.outdir.locked_dir`: a second run on it refuses at once)."""
    from .outdir import locked_dir
    with locked_dir(out_dir):
        return _run_to_locked_dir(cfg, out_dir, backend, progress)


def _run_to_locked_dir(cfg: RunConfig, out_dir: Path | str, backend=None, progress: bool = False
                       ) -> tuple[pd.DataFrame, dict]:
    from .backends import get_backend
    t0 = time.perf_counter()
    backend = backend or get_backend(cfg.backend, tokenizer=cfg.tokenizer, **cfg.backend_options)
    df = run_grid(cfg, backend, progress=progress)
    header = {
        "config": _redacted_config(cfg),
        "backend": backend.name,
        "model": backend.model,
        "decision_mode": backend.decision_mode,
        "tokenizer": backend.tokenizer.name,
        "package_version": __version__,
        "git_commit": git_commit(Path(__file__).resolve().parent),
        "rows": len(df),
        "seconds": round(time.perf_counter() - t0, 3),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "errors": int((df["error"] != "").sum()) if "error" in df else 0,
        "invalid": int(df["invalid"].sum()),
    }
    if getattr(backend, "decision_mode", "ledger") != "ledger":
        cache = getattr(backend, "cache", None)
        header["cache"] = getattr(cache, "path", None)
        _report_model_run(df, backend, header)
    write_results(df, out_dir, header)
    return df, header
