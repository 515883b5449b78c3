"""The one function chain: task -> scripted (or messy) discussion -> claim list -> memories, used by the runner,
HiddenBench, the walkthrough and the rebuild for the social-proof fit.

:func:`build_task` builds one :class:`TaskUnit` (task, discussion, claim list, option order, ``T_all``) and
:func:`task_units` the grid's, once; :class:`TaskInputs` supplies what the policies need (relevance tiers and
stances from the backend, asked at most once per unit, or from the roles; the transcript; the summariser);
:func:`memories` yields one :class:`MemoryItem` per policy x budget; :func:`prefetch` sends a grid's relevance, stance
and B3 calls as one batch. What a backend is asked for follows :mod:`crossprofile_lib.run.capabilities`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Optional, Sequence

from crossprofile_lib.backends.base import MODEL_RELEVANCE, MODEL_STANCES, SUMMARISE, Relevance
from crossprofile_lib.policies import PolicySpec, parse_policy, select_memory, summary_prompt
from crossprofile_lib.rng import stream
from crossprofile_lib.run.capabilities import asks, unsupported  # noqa: F401  (unsupported: re-exported)
from crossprofile_lib.task.budgets import Budget, t_all
from crossprofile_lib.task.decision import option_order
from crossprofile_lib.task.discussion import ClaimList, Task, Transcript, claim_list, make_task, scripted_discussion
from crossprofile_lib.task.evidence import oracle_relevance, oracle_stances
from crossprofile_lib.task.extraction import LEVELS, MergeQuality, extract, merge_quality
from crossprofile_lib.task.memory import Memory
from crossprofile_lib.task.messy import check_opinion_rate, messy_discussion
from crossprofile_lib.task.variants import Variant, agent_names


@dataclass(frozen=True)
class Protocol:
    """How a unit's discussion is held and its claims extracted (issue 27).

    ``scripted`` (the default, SPEC section 4): every fact verbatim, claims by fact (extraction
    ``oracle`` only). ``messy`` (:mod:`crossprofile_lib.task.messy`): drawn wordings and fact-less
    lines at ``opinion_rate``; claims at ``extraction`` level (:mod:`crossprofile_lib.task.extraction`),
    ``model`` with a caller-given ``extractor``."""

    name: str = "scripted"
    extraction: str = "oracle"
    opinion_rate: float = 0.0
    extractor: Optional[Callable] = None

    def __post_init__(self):
        if self.name not in PROTOCOLS:
            raise ValueError(f"protocol '{self.name}' is not one of {', '.join(PROTOCOLS)}")
        if self.extraction not in LEVELS:
            raise ValueError(f"extraction level '{self.extraction}' is not one of {', '.join(LEVELS)}")
        if self.name == "scripted" and self.extraction != "oracle":
            raise ValueError(f"extraction level '{self.extraction}' needs the messy protocol (--protocol messy): "
                             f"the scripted discussion says every fact verbatim, its claims are the facts")
        check_opinion_rate(self.opinion_rate)


PROTOCOLS = ("scripted", "messy")
SCRIPTED = Protocol()


@dataclass(frozen=True)
class TaskUnit:
    """One task of a grid, built once."""

    task: Task
    transcript: Transcript
    claims: ClaimList
    order: tuple[str, ...]   # options in the order the decision prompt letters them
    t_all: int               # tokens of every fact with all labels (budgets are ratios of it)
    protocol: Protocol = SCRIPTED
    merge: Optional[MergeQuality] = None   # the messy protocol's extraction against its ground truth


def build_task(template, variant: Variant | str, seed: int, n_agents: int = 4, tokenizer=None,
               total: Optional[int] = None, protocol: Protocol = SCRIPTED) -> TaskUnit:
    """The task, its discussion (scripted unless ``protocol`` says messy), claim list and option order
    (``T_all`` priced with ``tokenizer``, or given as ``total`` when the caller priced the template already).
    The messy protocol's ground truth stays out of the unit's transcript and claims' ranking inputs; the
    unit keeps only its merge measures."""
    if total is None:
        if tokenizer is None:
            raise ValueError(f"template {template.id}: build_task needs a tokenizer (or T_all) to price the budgets")
        total = t_all(template, tokenizer, n_agents)
    task = make_task(template, variant, seed, n_agents)
    if protocol.name == "scripted":
        tr = scripted_discussion(task)
        cl = claim_list(tr, agent_names(n_agents))
        return TaskUnit(task, tr, cl, option_order(task), total)
    mt = messy_discussion(task, protocol.opinion_rate)
    ex = extract(mt, protocol.extraction, template, agent_names(n_agents), extractor=protocol.extractor)
    return TaskUnit(task, mt.transcript, ex.claims, option_order(task), total, protocol, merge_quality(mt, ex))


def task_units(templates, variants: Sequence[str], seeds: Sequence[int], n_agents: int, tokenizer,
               protocol: Protocol = SCRIPTED) -> list[TaskUnit]:
    """Every unit of a grid in grid order (template, variant, seed); ``T_all`` priced once per template."""
    out = []
    for t in templates:
        total = t_all(t, tokenizer, n_agents)
        out.extend(build_task(t, Variant(v), s, n_agents, total=total, protocol=protocol)
                   for v in variants for s in seeds)
    return out


def specs_of(policies: Iterable[str | PolicySpec]) -> list[PolicySpec]:
    return [parse_policy(p) if isinstance(p, str) else p for p in policies]


class TaskInputs:
    """What the policies need for one unit, each asked for at most once (see the module doc).

    ``oracle_rel`` / ``oracle_st`` read the roles (defaults: the template's, :mod:`evidence`)."""

    def __init__(self, unit: TaskUnit, backend, oracle_rel: Callable = oracle_relevance,
                 oracle_st: Callable = oracle_stances):
        self.unit, self.backend = unit, backend
        self._oracle_rel, self._oracle_st = oracle_rel, oracle_st
        self._cache: dict = {}

    def _once(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    @property
    def truth(self) -> frozenset[int]:
        """The oracle's relevant claims."""
        return self._once("truth", lambda: frozenset(self._oracle_rel(self.unit.claims, self.unit.task)))

    def relevance(self, source: str) -> tuple[Relevance, str]:
        """The relevance tiers and where they came from (``oracle`` or the backend's relevance kind)."""
        if source == "oracle":
            return Relevance.of(self.truth), "oracle"
        u = self.unit
        rel = self._once("rel", lambda: self.backend.relevance(u.task, u.claims) if len(u.claims) else Relevance.of(()))
        return (rel if isinstance(rel, Relevance) else Relevance.of(rel)), self.backend.relevance_kind

    def oracle_stances(self) -> tuple:
        return self._once("st-oracle", lambda: self._oracle_st(self.unit.claims, self.unit.task))

    def stances(self, source: str) -> tuple[tuple, str]:
        if source == "oracle":
            return self.oracle_stances(), "oracle"
        u = self.unit
        return self._once("st", lambda: self.backend.stances(u.task, u.claims)), self.backend.relevance_kind

    def stance_agreement(self) -> float:
        """Share of claims whose model stance equals the oracle's."""
        model, _ = self.stances("model")
        return sum(a == b for a, b in zip(model, self.oracle_stances())) / max(1, len(self.unit.claims))


@dataclass(frozen=True)
class MemoryItem:
    """One memory of a unit: the policy, the budget, the memory and the inputs it used."""

    spec: PolicySpec
    budget: Optional[Budget]
    budget_tokens: Optional[int]
    key: str
    memory: Memory
    relevance: Optional[Relevance] = None
    relevance_kind: str = ""
    stance_kind: str = ""


def memories(unit: TaskUnit, specs: Sequence[PolicySpec], budgets: Sequence[Budget], backend, key_prefix: str,
             rng_for: Callable, inputs: Optional[TaskInputs] = None) -> Iterator[MemoryItem]:
    """Every policy x budget memory of ``unit`` (unbudgeted policies once, budget ``None``).

    ``rng_for(spec, key)`` gives the policy's generator (or None); ``key`` is
    ``{key_prefix}/{policy}/{budget label or -}``."""
    x = inputs or TaskInputs(unit, backend)
    for spec in specs:
        summarise = backend.summarise if asks(spec, SUMMARISE, backend) else None
        rel = stances = None
        rel_kind = st_kind = ""
        if "relevance" in spec.needs:
            rel, rel_kind = x.relevance(spec.source)
        if "stances" in spec.needs:
            stances, st_kind = x.stances(spec.source)
        for b in (budgets if spec.selection in ("budget", "generated") else [None]):
            btok = b.tokens(unit.t_all) if b is not None else None
            key = f"{key_prefix}/{spec.name}/{b.label if b else '-'}"
            mem = select_memory(spec, unit.claims, btok, backend.tokenizer, rng_for(spec, key),
                                transcript=unit.transcript, relevant=rel, stances=stances, task=unit.task,
                                summarise=summarise)
            yield MemoryItem(spec, b, btok, key, mem, rel, rel_kind, st_kind)


def policy_rng(seed: int, label: str = "policy", always: bool = False) -> Callable:
    """``rng_for`` drawing ``stream(seed, label, key)`` for policies that use random numbers
    (or for every policy with ``always``)."""
    return lambda spec, key: stream(seed, label, key) if always or spec.uses_rng else None


def prefetch(units: Sequence[TaskUnit], specs: Sequence[PolicySpec], budgets: Sequence[Budget], backend) -> None:
    """Send a model backend's relevance, stance and B3 calls for all ``units`` as one batch."""
    want_rel, want_st, want_b3 = (any(asks(s, c, backend) for s in specs) for c in (MODEL_RELEVANCE, MODEL_STANCES, SUMMARISE))
    if not (want_rel or want_st or want_b3):
        return
    pairs = [(u.task, u.claims) for u in units]
    summ = [summary_prompt(u.task, u.transcript, b.tokens(u.t_all)) for u in units for b in budgets] if want_b3 else []
    backend.prefetch(relevance=pairs if want_rel else [], summaries=summ, stances=pairs if want_st else [])
