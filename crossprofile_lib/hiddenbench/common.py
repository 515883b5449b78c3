"""What both HiddenBench protocols share. **Task view**: a template that skips the validator (options ``O1..On``,
no decoy, shared facts ``S1..Sm`` and hidden ``H{i}`` held by ``A{i}``, all relevant). **Budget**: ``T_all`` prices
every fact with all agents' labels, ``B(r) = floor(r * T_all)``. **Composition**: ``kept_hidden`` / ``kept_shared``
by fact id for scripted claims, by :mod:`.disclosure`'s "restated in full" rule otherwise.

**Controlled protocol** (:func:`run_controlled_chunk`): the scripted discussion on HiddenBench tasks, one claim per
fact with its ``fact_id``. The format has no polarities, so the ``ledger`` decides nothing (``decided = False``) and
reports what each memory kept; ``R1-rel-oracle`` treats every fact as relevant (it equals R1 here).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from crossprofile_lib.backends.base import CHAT
from crossprofile_lib.design import NO_BUDGET, PRIMARY_BUDGET
from crossprofile_lib.hiddenbench.disclosure import facts_restated
from crossprofile_lib.hiddenbench.importer import HiddenBenchTask
from crossprofile_lib.policies import HB_POLICIES, PolicySpec, parse_policy  # noqa: F401  (HB_POLICIES re-exported)
from crossprofile_lib.rng import stream
from crossprofile_lib.run.pipeline import TaskUnit, capabilities_of, memories, policy_rng, unsupported
from crossprofile_lib.task.budgets import Budget, line_cost
from crossprofile_lib.task.decision import DecisionRequest, option_order
from crossprofile_lib.task.discussion import ClaimList, Task, Transcript, Utterance, claim_list_from_utterances, label
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


def composition(task: HiddenBenchTask, memory: Memory, by_ids: bool) -> Composition:
    """Kept facts by fact id (scripted claims, and memories of claims) or else by the "restated in full" rule."""
    if by_ids and memory.kind in ("claims", "transcript", "empty"):
        ids = {c.fact_id for c in memory.kept if c.fact_id}
        return Composition(sum(1 for i in ids if i.startswith("H")), sum(1 for i in ids if i.startswith("S")),
                           task.n_agents)
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
        """The policies ``backend`` can run in ``protocol`` (HiddenBench has no roles: model inputs come from the model,
        no stances, no oracle relevance for natural claims)."""
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
    """Why ``backend`` (instance or class) cannot run ``protocol`` (natural needs chat); None when it can."""
    if protocol == "natural" and CHAT not in capabilities_of(backend):
        return (f"the natural protocol needs a model backend with chat; '{name}' has none "
                f"(use e.g. --backend llamacpp/smollm2-135m)")
    return None


def build_memories(view: HiddenBenchView, cl: ClaimList, transcript: Transcript, plan: PolicyPlan,
                   budgets: Sequence[str], backend, key_prefix: str, by_ids: bool):
    """``(DecisionRequest, row of the memory's columns)`` for every policy x budget of one discussion."""
    task = view.source
    order = option_order(view)
    unit = TaskUnit(view, transcript, cl, order, t_all(task, backend.tokenizer))
    # the oracle's relevance reads the view's roles: shared and hidden facts are all relevant (task_view)
    for m in memories(unit, plan.specs, [Budget(b) for b in budgets], backend, key_prefix,
                      policy_rng(view.seed, "hb-policy", always=True)):
        spec, b, btok, mem = m.spec, m.budget, m.budget_tokens, m.memory
        comp = composition(task, mem, by_ids)
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


def decide(backend, requests: list) -> list:
    """The backend's decisions; ``None`` for each request under the ledger (it decides nothing)."""
    if backend.decision_mode == "ledger" or not requests:
        return [None] * len(requests)
    return backend.decide(requests)


def json_sha(obj) -> str:
    """The first 16 hex digits of the SHA-256 of ``obj`` as JSON with sorted keys."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def decision_columns(task: HiddenBenchTask, req: DecisionRequest, d, error: str = "") -> dict:
    """The decision columns of a row; ``d`` None: not decided (ledger). **A failed call is not a decision**: with a
    failed call (``error``, or the decision's) ``correct`` is missing and ``invalid`` False, as ``crossprofile run``."""
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
    """Failed rows of a session record (older records: decided without a letter, not invalid, or a failed call)."""
    if "errors" in rec:
        return int(rec["errors"])
    rows = [r for t in (rec.get("rows") or {}).values() for r in t]
    n = sum(1 for r in rows if r.get("decided") and not r.get("decision_letter") and not r.get("invalid"))
    calls = (rec.get("artefacts") or {}).get("calls") or []
    return n + sum(1 for c in calls if c.get("error"))


def scripted_discussion(task: HiddenBenchTask, seed: int) -> Transcript:
    """Seeded speaker order; each speaker states its facts (shared + its hidden one) in a seeded order."""
    rng = stream(seed, "hb-controlled", task.id)
    agents = agent_names(task.n_agents)
    sids, hids = fact_ids(task)
    order = tuple(agents[i] for i in rng.permutation(len(agents)))
    utterances = []
    for speaker in order:
        k = agents.index(speaker)
        held = list(zip(sids, task.shared)) + [(hids[k], task.hidden[k])]
        for j in rng.permutation(len(held)):
            fid, text = held[j]
            utterances.append(Utterance(len(utterances), speaker, text, fid))
    return Transcript(order, tuple(utterances))


def run_controlled_chunk(units: Sequence[tuple[HiddenBenchTask, int]], plan: PolicyPlan, budgets: Sequence[str],
                         backend, base_columns: dict) -> Iterable[dict]:
    """Run ``(task, seed)`` units (one decision batch); yield one artefact record per unit, rows included."""
    staged = []
    for task, seed in units:
        view = task_view(task, seed)
        tr = scripted_discussion(task, seed)
        cl = claim_list_from_utterances(tr.utterances, tr.speaker_order, agent_names(task.n_agents))
        pairs = list(build_memories(view, cl, tr, plan, budgets, backend, view.task_id, by_ids=True))
        staged.append((task, seed, tr, cl, pairs))
    decisions = iter(decide(backend, [req for *_, pairs in staged for req, _ in pairs]))
    for task, seed, tr, cl, pairs in staged:
        rows, memories = [], []
        for req, row in pairs:
            d = next(decisions)
            text = row.pop("memory_text")
            dc = decision_columns(task, req, d, row.pop("error"))
            memories.append(dict(policy=row["policy"], budget=row["budget_label"], text=text,
                                 tokens=row["memory_tokens"], kept=[c.fact_id for c in req.memory.kept],
                                 decision=(d.letter if d else None), raw=(d.raw if d else None), error=dc["error"]))
            rows.append(dict(base_columns, protocol="controlled", task_id=task.id, task_name=task.name,
                             n_agents=task.n_agents, n_options=task.n_options, n_shared=len(task.shared),
                             seed=seed, ablation="scripted", **row, **dc))
        yield dict(protocol="controlled", task_id=task.id, seed=seed, ablation="scripted",
                   errors=sum(1 for r in rows if r["error"]),
                   artefacts=dict(speaker_order=list(tr.speaker_order),
                                  transcript=[dict(speaker=u.speaker, text=u.text, fact_id=u.fact_id)
                                              for u in tr.utterances],
                                  claims=[dict(text=c.text, speakers=list(c.speakers), fact_id=c.fact_id,
                                               first_mention=c.first_mention) for c in cl.claims],
                                  memories=memories),
                   rows=dict(decisions=rows))
