"""The interface every backend implements (:class:`Backend`, the reference decider included).

A backend is named ``provider/model``. ``capabilities`` declares (never probes) what it does beyond deciding:
:data:`CHAT` (free-form model calls, e.g. HiddenBench's natural discussion), :data:`SUMMARISE` (B3),
:data:`MODEL_RELEVANCE` / :data:`MODEL_STANCES` (its relevance filter and stance call are a model's; without them
``relevance`` / ``stances`` answer with the oracle). Model backends also have ``chat(requests) -> results``: one cached
call per :class:`ChatRequest`, batched as the provider allows; every model use goes through it, so caching, retries
and resumability live in one place.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Optional, Protocol, Sequence, runtime_checkable

CHAT = "chat"
SUMMARISE = "summarise"
MODEL_RELEVANCE = "model-relevance"
MODEL_STANCES = "model-stances"
CAPABILITIES = (CHAT, SUMMARISE, MODEL_RELEVANCE, MODEL_STANCES)


class Relevance(frozenset):
    """Claim indices judged relevant, with ``error`` / ``invalid`` of the call that judged them."""

    error: str = ""
    invalid: bool = False

    @classmethod
    def of(cls, idx, error: str = "", invalid: bool = False) -> "Relevance":
        r = cls(idx)
        r.error, r.invalid = error, invalid
        return r


@runtime_checkable
class Backend(Protocol):
    """What the runner, the pipeline and HiddenBench call (see the module doc)."""

    provider: str
    model: str
    decision_mode: str
    relevance_kind: str
    capabilities: frozenset
    tokenizer: object
    tokenizer_source: str    # how the budgets' tokenizer was chosen (recorded in run.json)
    stats: Counter
    cache: object
    progress: bool

    @property
    def name(self) -> str: ...

    def decide(self, requests: Sequence) -> list: ...

    def relevance(self, task, cl) -> Relevance: ...

    def stances(self, task, cl) -> tuple: ...

    def summarise(self, prompt, max_tokens: int) -> "ChatResult": ...

    def prefetch(self, relevance=(), summaries=(), stances=()) -> None: ...


@dataclass(frozen=True)
class ChatRequest:
    """One model call: OpenAI-style ``messages``; ``purpose`` tags it (``decision``, ``relevance``, ``b3``, ...);
    ``choices`` asks for a constrained (``grammar``) or scored (``score``) answer, ``json_schema`` for JSON output."""

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
    """Base class for model backends; concrete providers implement :meth:`chat` (and
    :class:`~crossprofile_lib.backends.llm.LLMBackend` the decision, relevance and stance calls)."""

    provider: str = ""
    model: str = ""
    decision_mode: str = "generate"
    relevance_kind: str = "model"
    capabilities: frozenset = frozenset({CHAT, SUMMARISE})
    tokenizer_source: str = "the backend's tokenizer"
    cache = None
    progress: bool = False
    stats = MappingProxyType({})  # no counters; backends that count calls set a Counter per instance

    def summarise(self, prompt, max_tokens: int) -> "ChatResult":
        """One B3 summary call: ``prompt`` (a :class:`crossprofile_lib.prompts.Prompt`) as the user message."""
        return self.chat([summary_request(prompt, max_tokens)])[0]

    def prefetch(self, relevance=(), summaries=(), stances=()) -> None:
        """Send a grid's summary calls (``(prompt, max_tokens)``) as one batch (see LLMBackend)."""
        if summaries:
            self.chat([summary_request(p, m) for p, m in summaries])

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model}"

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:  # pragma: no cover
        raise NotImplementedError


def summary_request(prompt, max_tokens: int) -> ChatRequest:
    return ChatRequest((prompt.message(),), max_tokens=int(max_tokens), purpose="b3", prompt_file=prompt.file)
