"""The decision call's interface and the reference decider ("evidence ledger").

Every backend takes :class:`DecisionRequest` s and returns :class:`Decision` s. The
**reference decider** is not a model of any LLM: it reads which facts a memory kept (by fact
id, never by text) and scores each option o as

    score(o) = sum over kept facts f about o of  polarity(f) * w(f) * (1 + s * (n_f - 1))

with ``w(f) = 1`` for relevant facts and ``irrelevant_weight`` for irrelevant ones, ``n_f`` the
number of speakers the memory line reveals (1 when labels are hidden) and ``s`` the
social-proof weight per extra label. It picks ``argmax`` (ties broken by a seeded draw)
when ``inverse_temperature`` is infinite, and otherwise samples from
``softmax(inverse_temperature * score)`` with a seeded generator. With the defaults
(0, 0, inf) it is the normative ceiling: what a perfect evidence counter decides from that
memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from .discussion import ClaimList, Task
from .policies import Memory
from .rng import stream

LETTERS = "ABCDEFGHIJ"


def option_order(task: Task) -> tuple[str, ...]:
    """Options in the order the decision prompt letters them: rotated by the seed."""
    ids = task.template.option_ids
    k = task.seed % len(ids)
    return ids[k:] + ids[:k]


@dataclass(frozen=True)
class DecisionRequest:
    task: Task
    memory: Memory
    option_order: tuple[str, ...]
    key: str  # unique within a run: task id / policy / budget


@dataclass(frozen=True)
class Decision:
    option: Optional[str]          # option id, None when invalid
    letter: Optional[str]
    invalid: bool = False
    raw: str = ""
    meta: dict = field(default_factory=dict)


def oracle_relevance(cl: ClaimList, task: Task) -> frozenset[int]:
    """Claims whose fact is a support or decoy fact (the oracle relevance filter)."""
    rel = {f.id for f in task.template.facts if f.relevant}
    return frozenset(i for i, c in enumerate(cl.claims) if c.fact_id in rel)


class ReferenceDecider:
    """The evidence ledger (see module doc). Backend name ``ledger``."""

    provider = "ledger"
    decision_mode = "ledger"
    relevance_kind = "oracle"

    def __init__(self, social_proof: float = 0.0, irrelevant_weight: float = 0.0,
                 inverse_temperature: float = math.inf, tokenizer=None):
        from .tokenizer import default_tokenizer
        self.social_proof = float(social_proof)
        self.irrelevant_weight = float(irrelevant_weight)
        self.inverse_temperature = float(inverse_temperature)
        self.tokenizer = tokenizer or default_tokenizer()

    @property
    def model(self) -> str:
        return (f"reference-decider(sp={self.social_proof:g},irr={self.irrelevant_weight:g},"
                f"beta={self.inverse_temperature:g})")

    @property
    def name(self) -> str:
        return "ledger"

    def relevance(self, task: Task, cl: ClaimList) -> frozenset[int]:
        return oracle_relevance(cl, task)

    def stances(self, task: Task, cl: ClaimList):
        """The ledger has no model: its stances are the oracle's."""
        from .balance import oracle_stances
        return oracle_stances(cl, task)

    def option_scores(self, task: Task, memory: Memory, order: Sequence[str]) -> np.ndarray:
        t = task.template
        s = np.zeros(len(order))
        pos = {o: j for j, o in enumerate(order)}
        for c, n in zip(memory.kept, memory.revealed):
            if c.fact_id is None:
                continue
            f = t.fact(c.fact_id)
            w = 1.0 if f.relevant else self.irrelevant_weight
            s[pos[f.about]] += f.polarity * w * (1.0 + self.social_proof * (max(n, 1) - 1))
        return s

    def decide_one(self, req: DecisionRequest) -> Decision:
        s = self.option_scores(req.task, req.memory, req.option_order)
        # common random numbers: the tie-break depends on the task and the kept facts only, so
        # two memories that keep the same facts (e.g. a policy and its unlabeled control)
        # break ties alike and differ only through what the ledger scores
        def rng():
            kept = ",".join(sorted(c.fact_id or c.text for c in req.memory.kept))
            return stream(req.task.seed, "ledger-decision", req.task.task_id, kept)
        if math.isinf(self.inverse_temperature):
            top = np.flatnonzero(np.abs(s - s.max()) <= 1e-9)
            j = int(top[rng().integers(len(top))]) if len(top) > 1 else int(top[0])
        else:
            z = self.inverse_temperature * (s - s.max())
            p = np.exp(z) / np.exp(z).sum()
            j = int(rng().choice(len(s), p=p))
        return Decision(req.option_order[j], LETTERS[j], False, raw=f"scores={s.tolist()}")

    def decide(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        return [self.decide_one(r) for r in requests]
