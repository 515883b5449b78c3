"""How many model calls a grid makes, per model, counted by the runner itself against :class:`CountingBackend` (no
model needed; distinct calls counted once, as the call cache would; format-reminder and transport retries not counted).
Budgets are priced offline unless ``tokenizer`` says otherwise. ``crossprofile run --dry-run`` prints :func:`describe`:
calls per policy, the total and an estimate at :func:`measured_rate` (the latest burst in the call cache; a pause over
:data:`BURST_GAP_S` ends a burst) or ``--rate``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import replace
from typing import Optional

from crossprofile_lib.backends.base import ChatResult
from crossprofile_lib.backends.llm import LLMBackend
from crossprofile_lib.design import PAPER_DESIGN_GRID
from crossprofile_lib.run.runner import RunConfig, run_grid
from crossprofile_lib.task.templates import load_templates
from crossprofile_lib.task.tokenizer import get_tokenizer

#: The paper's full design for one model (:data:`crossprofile_lib.design.PAPER_DESIGN_GRID`), as a run configuration.
PAPER_DESIGN = RunConfig(backend="plan/count", **{k: list(v) for k, v in PAPER_DESIGN_GRID.items()})


class CountingBackend(LLMBackend):
    """Answers every call at once (well-formed replies; nothing leaves the process) and counts
    what reaches the "provider" by ``purpose``."""

    provider = "plan"

    def __init__(self, decision_mode: str = "generate", tokenizer=None):
        super().__init__("count", decision_mode, tokenizer, ":memory:")
        self.sent: Counter = Counter()

    def identity(self) -> dict:
        return {"provider": self.provider, "model": self.model, "base_url": None}

    def _reply(self, r) -> ChatResult:
        if r.purpose == "relevance":
            return ChatResult('{"relevant": [1, 2, 3]}')
        if r.purpose == "b3":  # a distinct summary per prompt, as a model's would be
            return ChatResult("Summary " + hashlib.sha256(json.dumps(r.messages).encode()).hexdigest()[:12])
        if r.purpose == "stance":
            return ChatResult("[]")
        if r.choices and self.decision_mode == "score":
            return ChatResult("", choice_logprobs={r.choices[0]: -0.1})
        return ChatResult(f"Decision: {r.choices[0] if r.choices else 'A'}")

    def _complete(self, requests, on_done) -> None:
        for j, r in enumerate(requests):
            self.sent[r.purpose] += 1
            on_done(j, self._reply(r))


#: seconds without a stored call that end a burst (:func:`measured_rate`)
BURST_GAP_S = 120.0
#: fewest calls a burst needs to give a rate
MIN_BURST = 20


def call_plan(cfg: RunConfig = PAPER_DESIGN, decision_mode: str = "generate", tokenizer: Optional[str] = None) -> dict:
    """The calls a fresh run of ``cfg`` sends to one model: ``calls`` by purpose and in total, ``decisions`` (rows),
    the grid's size and how long counting took."""
    t0 = time.perf_counter()
    backend = CountingBackend(decision_mode, get_tokenizer(tokenizer) if tokenizer else None)
    templates = load_templates(cfg.templates, n_options=cfg.n_options)
    df = run_grid(replace(cfg, backend="plan/count"), backend=backend, templates=templates)
    calls = dict(sorted(backend.sent.items()))
    calls["total"] = sum(backend.sent.values())
    first = df.drop_duplicates("prompt_sha")  # a distinct decision prompt is sent once: counted where first asked
    per_policy = {p: int((first["policy"] == p).sum()) for p in dict.fromkeys(df["policy"])}
    return {"calls": calls, "decisions": len(df), "templates": len(templates), "variants": len(cfg.variants),
            "seeds": len(cfg.seeds), "budgets": list(cfg.budgets), "policies": list(cfg.policies),
            "decision_mode": decision_mode, "tokenizer": backend.tokenizer.name,
            "deduplicated_decisions": int(backend.stats["deduplicated"]), "per_policy": per_policy,
            "distinct_decision_prompts": int(df["prompt_sha"].nunique()),
            "not_counted": "format-reminder retries of unparsable generate answers (at most one per decision "
                           "call) and transport retries of failed calls",
            "counted_in_s": round(time.perf_counter() - t0, 2)}


def measured_rate(cache, provider: str, model: str) -> Optional[tuple[float, str]]:
    """``(calls per second, what it was measured on)`` from the latest burst of stored calls of
    ``provider``/``model`` in ``cache`` (a :class:`~crossprofile_lib.backends.cache.CallCache`); None
    without such a burst."""
    times = cache.calls_timeline(provider, model)
    if len(times) < MIN_BURST:
        return None
    end = start = len(times) - 1
    while start > 0 and times[start] - times[start - 1] <= BURST_GAP_S:
        start -= 1
    n, span = end - start, times[end] - times[start]
    if n + 1 < MIN_BURST or span <= 0:
        return None
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(times[end]))
    return n / span, f"measured on {n + 1} calls of {provider}/{model} stored in {cache.path}, ending {when} UTC"


def _hms(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    m = round(seconds / 60)
    return f"{m} min" if m < 60 else f"{m // 60} h {m % 60:02d} min"


def describe(plan: dict, backend: str, grid: str, model_calls: bool = True,
             rate: Optional[tuple[float, str]] = None) -> list[str]:
    """The dry run's lines for a :func:`call_plan` result (see the module doc)."""
    lines = [f"dry run: {backend} ({plan['decision_mode']} mode); {grid}; "
             f"{plan['templates'] * plan['variants'] * plan['seeds']:,} task units, {plan['decisions']:,} decisions"]
    per, calls = plan["per_policy"], plan["calls"]
    width = max([len(p) for p in per] + [len("relevance filter")])
    if not model_calls:
        lines.append(f"total: {plan['decisions']:,} decisions; the reference decider makes no model calls")
        return lines
    lines.append(f"  {'policy':<{width}}  decision calls")
    lines += [f"  {p:<{width}}  {n:>10,}" for p, n in per.items()]
    lines += [f"  {label:<{width}}  {calls[key]:>10,}" for label, key in
              (("relevance filter", "relevance"), ("BAL stances", "stance"), ("B3 summaries", "b3")) if calls.get(key)]
    retries = (f" (+ at most {calls.get('decision', 0):,} format-reminder retries in generate mode)"
               if plan["decision_mode"] == "generate" else "")
    lines.append(f"total: {calls['total']:,} model calls{retries}; a fresh cache (calls already cached are not "
                 f"sent); budgets priced with {plan['tokenizer']}")
    if rate is None:
        lines.append("estimate: no measured rate (no burst of calls of this model in the call cache); pass --rate "
                     "CALLS_PER_S, or run a small grid first")
    else:
        r, src = rate
        lines.append(f"estimate: {calls['total']:,} calls at {r:.2f} calls/s = {_hms(calls['total'] / r)} (rate: {src})")
    return lines
