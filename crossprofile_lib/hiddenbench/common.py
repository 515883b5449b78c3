"""What both HiddenBench protocols share: the task as the decision call sees it, budgets, memories and their
composition.

**Task view** (:func:`task_view`): a :class:`HiddenBenchView` whose template skips the CrossProfile validator
(options ``O1..On`` named by the answers, ``decoy_option = ""``, shared facts ``S1..Sm`` and hidden ``H{i}`` held by
``A{i}``, all relevant; ``variant`` ``hiddenbench``); letters rotate by seed as for templates. **Budget**: ``T_all``
prices every fact with all agents' labels, ``B(r) = floor(r * T_all)``, the same for both protocols.
**Composition**: ``kept_hidden`` / ``kept_shared`` by fact id for scripted claims (and REF), by :mod:`.disclosure`'s
"restated in full" rule otherwise; ``hidden_retention = kept_hidden / n_hidden``; ``profile_complete``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Optional, Sequence

from crossprofile_lib.backends.base import CHAT
from crossprofile_lib.design import NO_BUDGET, PRIMARY_BUDGET
from crossprofile_lib.hiddenbench.disclosure import facts_restated
from crossprofile_lib.hiddenbench.importer import HiddenBenchTask
from crossprofile_lib.policies import HB_POLICIES, PolicySpec, parse_policy  # noqa: F401  (HB_POLICIES re-exported)
from crossprofile_lib.run.pipeline import TaskInputs, TaskUnit, capabilities_of, memories, policy_rng, unsupported
from crossprofile_lib.task.budgets import Budget, line_cost
from crossprofile_lib.task.decision import DecisionRequest, option_order
from crossprofile_lib.task.discussion import ClaimList, Task, Transcript, label
from crossprofile_lib.task.memory import Memory
from crossprofile_lib.task.templates import Fact, Option, Template
from crossprofile_lib.task.variants import agent_names

HB_BUDGETS = (PRIMARY_BUDGET,)


@dataclass(frozen=True)
class HiddenBenchVariant:
    """HiddenBench's fixed attribution in CrossProfile's words: hidden facts private, shared shared."""

    name: str = "hiddenbench"
    cell: str = "hiddenbench"
    support_attr: str = "private"
    decoy_attr: str = "shared"
    irrelevant_attr: str = "none"


@dataclass(frozen=True)
class HiddenBenchView(Task):
    """A HiddenBench task for one seed, in the shape backends take (see the module doc)."""

    source: Optional[HiddenBenchTask] = None

    @property
    def task_id(self) -> str:
        return f"hb-{self.source.id}/s{self.seed}"


def option_id(j: int) -> str:
    return f"O{j + 1}"


def fact_ids(task: HiddenBenchTask) -> tuple[list[str], list[str]]:
    """``(shared ids S1..Sm, hidden ids H1..Hn)``."""
    return [f"S{j + 1}" for j in range(len(task.shared))], [f"H{i + 1}" for i in range(task.n_agents)]


def task_view(task: HiddenBenchTask, seed: int) -> HiddenBenchView:
    opts = tuple(Option(id=option_id(j), name=a) for j, a in enumerate(task.answers))
    correct = option_id(task.correct_index)
    sids, hids = fact_ids(task)
    facts = tuple(Fact.model_construct(id=i, text=t, role="shared", about="", polarity=0, criterion=None)
                  for i, t in zip(sids, task.shared)) + tuple(
        Fact.model_construct(id=i, text=t, role="hidden", about=correct, polarity=1, criterion=None)
        for i, t in zip(hids, task.hidden))
    tpl = Template.model_construct(id=f"hb-{task.id}", version=1, domain="hiddenbench", title=task.name,
                                   description=task.description, criteria=(), options=opts,
                                   correct_option=correct, decoy_option="", facts=facts)
    agents = agent_names(task.n_agents)
    holders = {i: agents for i in sids} | {h: (agents[k],) for k, h in enumerate(hids)}
    return HiddenBenchView(tpl, HiddenBenchVariant(), seed, task.n_agents, holders, task)


def t_all(task: HiddenBenchTask, tokenizer) -> int:
    full = label(agent_names(task.n_agents))
    return sum(line_cost(f"{full} {f}", tokenizer) for f in (*task.shared, *task.hidden))


@dataclass(frozen=True)
class Composition:
    kept_hidden: int
    kept_shared: int
    n_hidden: int

    @property
    def hidden_retention(self) -> float:
        return self.kept_hidden / self.n_hidden if self.n_hidden else math.nan

    @property
    def profile_complete(self) -> bool:
        return self.kept_hidden == self.n_hidden


def composition_by_ids(task: HiddenBenchTask, memory: Memory) -> Composition:
    ids = {c.fact_id for c in memory.kept if c.fact_id}
    return Composition(sum(1 for i in ids if i.startswith("H")), sum(1 for i in ids if i.startswith("S")),
                       task.n_agents)


def composition_by_text(task: HiddenBenchTask, memory: Memory) -> Composition:
    lines = [ln for ln in memory.text.split("\n") if ln.strip()]
    return Composition(sum(facts_restated(task.hidden, lines)), sum(facts_restated(task.shared, lines)),
                       task.n_agents)


@dataclass(frozen=True)
class PolicyPlan:
    """Which policies run on a backend, and why the others are skipped."""

    specs: tuple[PolicySpec, ...]
    skipped: dict

    @classmethod
    def for_backend(cls, policies: Sequence[str], backend, protocol: str) -> "PolicyPlan":
        """The policies ``backend`` can run in ``protocol``: HiddenBench has no roles, so a policy's model
        inputs must come from the model (:func:`crossprofile_lib.run.pipeline.unsupported` with
        ``model_inputs``), stances are not implemented, and natural claims have no oracle relevance."""
        specs, skipped = [], {}
        cannot = unsupported(policies, backend, model_inputs=True)
        for p in policies:
            s = parse_policy(p)
            if "stances" in s.needs:
                skipped[s.name] = (f"{s.base} needs each claim's stance on the options; HiddenBench facts carry no "
                                   "polarities (not implemented for HiddenBench)")
            elif s.name in cannot:
                skipped[s.name] = cannot[s.name]
            elif "relevance" in s.needs and s.source == "oracle" and protocol == "natural":
                skipped[s.name] = "natural claims have no roles, so there is no oracle relevance"
            else:
                specs.append(s)
        return cls(tuple(specs), skipped)


def protocol_unsupported(protocol: str, backend, name: str) -> Optional[str]:
    """Why ``backend`` (an instance or its class; ``name`` as the user wrote it) cannot run ``protocol``; None
    when it can. The natural protocol is a discussion: it needs a model backend that chats."""
    if protocol == "natural" and CHAT not in capabilities_of(backend):
        return (f"the natural protocol needs a model backend with chat; '{name}' has none "
                f"(use e.g. --backend llamacpp/smollm2-135m)")
    return None


def _every_fact(cl: ClaimList, view) -> frozenset[int]:
    """HiddenBench's oracle relevance: every HiddenBench fact is relevant."""
    return frozenset(i for i, c in enumerate(cl.claims) if c.fact_id)


def build_memories(view: HiddenBenchView, cl: ClaimList, transcript: Transcript, plan: PolicyPlan,
                   budgets: Sequence[str], backend, key_prefix: str, by_ids: bool):
    """Yield ``(DecisionRequest, row)`` for every policy x budget of one discussion
    (:func:`crossprofile_lib.run.pipeline.memories`).

    ``row`` holds the memory's columns (policy, budget, tokens, composition, memory text and
    its sha); the caller adds the decision columns.
    """
    task = view.source
    order = option_order(view)
    unit = TaskUnit(view, transcript, cl, order, t_all(task, backend.tokenizer))
    inputs = TaskInputs(unit, backend, oracle_rel=_every_fact)
    for m in memories(unit, plan.specs, [Budget(b) for b in budgets], backend, key_prefix,
                      policy_rng(view.seed, "hb-policy", always=True), inputs):
        spec, b, btok, mem = m.spec, m.budget, m.budget_tokens, m.memory
        comp = (composition_by_ids(task, mem) if by_ids and mem.kind in ("claims", "transcript", "empty")
                else composition_by_text(task, mem))
        row = dict(policy=spec.name, base_policy=spec.base, selection=spec.selection, label_format=spec.fmt,
                   budget_label=b.label if b else NO_BUDGET,
                   budget_ratio=(b.ratio if b and b.ratio is not None else math.nan),
                   budget_tokens=(btok if btok is not None else -1), t_all=unit.t_all,
                   memory_kind=mem.kind, memory_tokens=mem.tokens, memory_truncated=bool(mem.truncated),
                   n_kept=mem.n_kept, kept_hidden=comp.kept_hidden, kept_shared=comp.kept_shared,
                   n_hidden=comp.n_hidden, hidden_retention=comp.hidden_retention,
                   profile_complete=comp.profile_complete, option_order=",".join(order),
                   memory_sha=hashlib.sha256(mem.text.encode()).hexdigest()[:16], memory_text=mem.text,
                   error="; ".join(e for e in ((m.relevance.error if m.relevance is not None else ""),
                                               (mem.meta or {}).get("error", "")) if e))
        yield DecisionRequest(view, mem, order, m.key), row


def decide(backend, requests: list) -> Optional[list]:
    """The backend's decisions, or ``None`` for the ledger (see :mod:`controlled`)."""
    if backend.decision_mode == "ledger" or not requests:
        return None
    return backend.decide(requests)


def decision_columns(task: HiddenBenchTask, req: DecisionRequest, d, error: str = "") -> dict:
    """The decision columns of a row; ``d`` None = not decided (ledger). ``error``: a failed call
    before the decision (the memory's relevance filter or summary, the session's discussion).

    **A failed call is not a decision**: a row whose decision call (or ``error``) failed keeps the
    message in ``error``, ``decided`` True (a model was asked), ``correct`` missing and
    ``invalid`` False, exactly as ``crossprofile run`` records it; every table refuses such rows
    (:func:`crossprofile_lib.stats.analysis_set.check_failed_calls`)."""
    if d is None:
        return dict(decided=False, decision="", decision_letter="", decision_answer="", correct=None,
                    invalid=False, decision_raw="", error=error)
    error = "; ".join(e for e in (error, (d.meta or {}).get("error", "")) if e)
    correct_id = option_id(task.correct_index)
    answer = req.task.template.option(d.option).name if d.option else ""
    return dict(decided=True, decision=d.option or "", decision_letter=d.letter or "", decision_answer=answer,
                correct=None if error else bool(d.option == correct_id and not d.invalid),
                invalid=bool(d.invalid) and not error, decision_raw=(d.raw or "")[:2000], error=error)


def record_errors(rec: dict) -> int:
    """Failed rows of a session record (``artefacts/*.jsonl``). Records written before the ``error``
    column say it differently: a decided row with no letter and not ``invalid`` (a failed decision
    call), or a failed call in the session's call log."""
    if "errors" in rec:
        return int(rec["errors"])
    rows = [r for t in (rec.get("rows") or {}).values() for r in t]
    n = sum(1 for r in rows if r.get("decided") and not r.get("decision_letter") and not r.get("invalid"))
    calls = (rec.get("artefacts") or {}).get("calls") or []
    return n + sum(1 for c in calls if c.get("error"))
