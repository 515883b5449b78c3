"""The one function chain: task -> scripted (or messy) discussion -> claim list -> memories, used by the runner,
HiddenBench, the walkthrough and the rebuild for the social-proof fit; and which backend can run which policy.

**Capabilities.** A policy declares what it needs (``Policy.needs``) and where a needed input comes from (``source``:
``model`` or ``oracle``); a backend declares its ``capabilities`` (:data:`crossprofile_lib.backends.base.CAPABILITIES`).
:data:`NEED_CAPABILITY` maps one onto the other and :func:`unsupported` answers "can this backend run these policies"
for every caller (the CLI before anything runs, the runner, HiddenBench; :func:`asks` here). Without the capability:
``transcript`` always runs; ``relevance`` and ``stances`` answer from the roles, except where model inputs are required
(HiddenBench); ``summarise`` (B3) cannot run. The oracle variants read the roles everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Optional, Sequence

from crossprofile_lib.backends.base import MODEL_RELEVANCE, MODEL_STANCES, SUMMARISE, Relevance
from crossprofile_lib.policies import PolicySpec, parse_policy, select_memory, summary_prompt
from crossprofile_lib.rng import stream
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
    """How a unit's discussion is held and its claims extracted (issue 27): ``scripted`` (SPEC section 4, every fact
    verbatim, extraction ``oracle`` only) or ``messy`` (:mod:`crossprofile_lib.task.messy`; claims at ``extraction``
    level, ``model`` with a caller-given ``extractor``)."""

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


@dataclass(frozen=True)
class Requirement:
    """What one policy need asks of a backend."""

    capability: Optional[str]   # the capability that supplies it (None: the runner has it)
    model_source_only: bool     # only a policy whose ``source`` is ``model`` asks the backend
    oracle_fallback: bool       # without the capability the backend answers from the roles
    why: str                    # why a policy cannot run without it (``{base}``: the policy's base name)


#: need (``Policy.needs``) -> what it asks of a backend (see the module doc's table).
NEED_CAPABILITY: dict[str, Requirement] = {
    "transcript": Requirement(None, False, True, ""),
    "relevance": Requirement(MODEL_RELEVANCE, True, True, "{base} needs a model relevance filter (the backend has none)"),
    "stances": Requirement(MODEL_STANCES, True, True, "{base} needs a model stance call (the backend has none)"),
    "summarise": Requirement(SUMMARISE, False, False,
                             "{base} is a generated summary and needs a language-model backend (this one writes none)"),
}


def capabilities_of(backend) -> frozenset:
    """The declared capabilities of ``backend``: an instance, a class (nothing is loaded) or the set itself."""
    return frozenset(backend) if isinstance(backend, (set, frozenset)) else frozenset(backend.capabilities)


def asks(spec: PolicySpec, capability: str, backend) -> bool:
    """Whether policy ``spec`` has ``backend`` do ``capability`` (it needs it and the backend has it)."""
    if capability not in capabilities_of(backend):
        return False
    return any(r.capability == capability and (spec.source == "model" or not r.model_source_only)
               for r in (NEED_CAPABILITY[n] for n in spec.needs))


def unsupported(policy_specs: Iterable[str | PolicySpec], backend, model_inputs: bool = False) -> dict[str, str]:
    """Policy name -> why ``backend`` (an instance, its class or its capabilities) cannot run it; empty when it can
    run them all. ``model_inputs``: the caller has no roles to fall back on (HiddenBench), so a model-sourced
    relevance or stance need requires the capability."""
    caps = capabilities_of(backend)
    out = {}
    for s in specs_of(policy_specs):
        for need in sorted(s.needs):
            r = NEED_CAPABILITY[need]
            if not (r.capability is None or r.capability in caps or (r.model_source_only and s.source != "model")
                    or (r.oracle_fallback and not model_inputs)):
                out[s.name] = r.why.format(base=s.base)
                break
    return out


class TaskInputs:
    """What the policies need for one unit, each asked for at most once; the oracle's relevance (``oracle_rel``)
    and stances read the roles (default: the template's, :mod:`crossprofile_lib.task.evidence`)."""

    def __init__(self, unit: TaskUnit, backend, oracle_rel: Callable = oracle_relevance):
        self.unit, self.backend, self._oracle_rel = unit, backend, oracle_rel
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
        return self._once("st-oracle", lambda: oracle_stances(self.unit.claims, self.unit.task))

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
    """Every policy x budget memory of ``unit`` (unbudgeted policies once, budget ``None``). ``rng_for(spec, key)``
    gives the policy's generator (or None); ``key`` is ``{key_prefix}/{policy}/{budget label or -}``."""
    x = inputs or TaskInputs(unit, backend)
    for spec in specs:
        summarise = backend.summarise if asks(spec, SUMMARISE, backend) else None
        rel, rel_kind = x.relevance(spec.source) if "relevance" in spec.needs else (None, "")
        stances, st_kind = x.stances(spec.source) if "stances" in spec.needs else (None, "")
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
