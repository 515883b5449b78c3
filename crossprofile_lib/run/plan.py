"""How many model calls a grid makes, per model, counted by the runner itself (no model needed).

:func:`call_plan` runs the grid through :func:`crossprofile_lib.run.runner.run_grid` -- the same
task units, prefetch batch (relevance filter, stances, B3 summaries) and decision requests a real
run sends -- against :class:`CountingBackend`, an LLM backend that answers every call at once
with a well-formed reply (an empty cache: every distinct call counts once, repeats of the same
call are deduplicated as the call cache would). So the figures are the calls a fresh run of the
grid sends to a model: one ``relevance`` call per task unit with a model relevance filter, one
``b3`` summary per unit and budget, one ``stance`` call per unit for model-stance ``BAL``, and
one ``decision`` call per distinct decision prompt. Not counted: the format-reminder retry of an
unparsable ``generate`` answer (at most one per decision call; it depends on the model), and
calls that fail and are retried by the transport.

    from crossprofile_lib.run.plan import call_plan, PAPER_DESIGN
    call_plan(PAPER_DESIGN)["calls"]   # {'b3': ..., 'decision': ..., 'relevance': ..., 'total': ...}

The budgets are priced with the offline tokenizer unless ``tokenizer`` names another one; a
model's own tokenizer moves a budget by a token here and there, which can merge or split a few
decision prompts, but not the relevance or B3 counts.
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
from crossprofile_lib.design import BUDGET_GRID, DEFAULT_POLICIES, VARIANT_NAMES
from crossprofile_lib.run.runner import RunConfig, run_grid
from crossprofile_lib.task.templates import load_templates
from crossprofile_lib.task.tokenizer import get_tokenizer

#: The paper's full design for one model: the 60 formal templates x 8 variants x 3 seeds, every
#: policy and control of the paper's grid plus the generated summary B3, the budgets of BUDGET_GRID.
PAPER_DESIGN = RunConfig(backend="plan/count", templates=["templates/formal"], seeds=[0, 1, 2],
                         budgets=list(BUDGET_GRID), policies=list(DEFAULT_POLICIES) + ["B3"],
                         variants=list(VARIANT_NAMES))


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


def call_plan(cfg: RunConfig = PAPER_DESIGN, templates=None, decision_mode: str = "generate",
              tokenizer: Optional[str] = None) -> dict:
    """The calls a fresh run of ``cfg`` sends to one model (see the module doc): ``calls`` by
    purpose and in total, ``decisions`` (rows of the results table), the grid's size and how long
    counting took. ``templates``: loaded templates (default: ``cfg.templates``)."""
    t0 = time.perf_counter()
    tok = get_tokenizer(tokenizer) if tokenizer else None
    backend = CountingBackend(decision_mode, tok)
    templates = templates if templates is not None else load_templates(cfg.templates, n_options=cfg.n_options)
    df = run_grid(replace(cfg, backend="plan/count"), backend=backend, templates=templates)
    calls = dict(sorted(backend.sent.items()))
    calls["total"] = sum(backend.sent.values())
    return {"calls": calls, "decisions": len(df), "templates": len(templates), "variants": len(cfg.variants),
            "seeds": len(cfg.seeds), "budgets": list(cfg.budgets), "policies": list(cfg.policies),
            "decision_mode": decision_mode, "tokenizer": backend.tokenizer.name,
            "deduplicated_decisions": int(backend.stats["deduplicated"]),
            "distinct_decision_prompts": int(df["prompt_sha"].nunique()),
            "not_counted": "format-reminder retries of unparsable generate answers (at most one per decision "
                           "call) and transport retries of failed calls",
            "counted_in_s": round(time.perf_counter() - t0, 2)}
