"""The interface every language-model backend implements (the reference decider mirrors it).

A backend is named ``provider/model`` and exposes:

* ``name`` (e.g. ``llamacpp/smollm2-135m``), ``provider``, ``model``, ``decision_mode``
  (``generate``, ``grammar``, ``score`` or ``ledger``), ``tokenizer`` (prices budgets) and
  ``relevance_kind`` (``model`` or ``oracle``);
* ``chat(requests) -> results``: one cached call per :class:`ChatRequest`, batched/concurrent
  as the provider allows. Every other model use (decisions, relevance filter, B3 summaries,
  HiddenBench's natural discussion and claim extraction, stance calls) goes through it, so
  caching, retries and resumability live in one place;
* ``decide(decision_requests) -> decisions``; ``relevance(task, claim_list) -> frozenset``;
  ``generate_memory(spec, task, transcript, claim_list, budget_tokens, rng) -> Memory`` (B3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence


@dataclass(frozen=True)
class ChatRequest:
    """One model call. ``messages`` are OpenAI-style ``{"role", "content"}`` dicts.

    ``purpose`` tags the call in logs (``decision``, ``relevance``, ``b3``, ``vote``, ...);
    ``prompt_file`` names the prompt template it was rendered from. ``choices`` (letters or
    strings) asks for a constrained answer (``grammar`` mode) or a scored one (``score``
    mode); ``json_schema`` asks for JSON output where the provider supports it.
    """

    messages: tuple[dict, ...]
    max_tokens: int = 512
    temperature: float = 0.0
    purpose: str = "decision"
    prompt_file: str = ""
    choices: Optional[tuple[str, ...]] = None
    json_schema: Optional[dict] = None
    stop: Optional[tuple[str, ...]] = None


@dataclass(frozen=True)
class ChatResult:
    text: str
    cached: bool = False
    error: Optional[str] = None      # set when the call failed after its retries
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    choice_logprobs: Optional[dict] = None  # score mode: choice -> log-probability
    meta: dict = field(default_factory=dict)


class ChatBackend:
    """Base class for model backends; concrete providers implement :meth:`chat`."""

    provider: str = ""
    model: str = ""
    decision_mode: str = "generate"
    relevance_kind: str = "model"

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model}"

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:  # pragma: no cover
        raise NotImplementedError
