"""``ledger``: the reference decider ("evidence ledger"), a backend that is not a model.

It reads which facts a memory kept (by fact id, never by text) and scores each option o as

    score(o) = sum over kept facts f about o of  polarity(f) * w(f) * (1 + s * (n_f - 1))

with ``w(f)`` 1 for relevant facts and ``irrelevant_weight`` for irrelevant ones, ``n_f`` the speakers the memory
line reveals (1 when labels are hidden; a fact kept in several lines counts once with its largest label:
:meth:`~crossprofile_lib.task.memory.Memory.kept_facts`) and ``s`` the social-proof weight per extra label. It picks
the ``argmax`` (ties by a seeded draw) when ``inverse_temperature`` is infinite, else samples from
``softmax(inverse_temperature * score)``. Options are strict numbers (``social_proof``, ``irrelevant_weight`` finite;
``inverse_temperature`` at least 0, ``inf`` allowed; no boolean or NaN). With the defaults (0, 0, inf) it is the
normative ceiling: what a perfect evidence counter decides from that memory. It makes no model calls: its relevance
filter and stances are the oracle's, and it cannot write a B3 summary.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

import numpy as np

from crossprofile_lib.backends.base import Relevance
from crossprofile_lib.rng import stream
from crossprofile_lib.safety.inputs import option_number
from crossprofile_lib.task.decision import LETTERS, Decision, DecisionRequest
from crossprofile_lib.task.discussion import ClaimList, Task
from crossprofile_lib.task.evidence import oracle_relevance, oracle_stances
from crossprofile_lib.task.memory import Memory
from crossprofile_lib.task.tokenizer import default_tokenizer


class ReferenceDecider:
    """The evidence ledger (see module doc). Backend name ``ledger``."""

    provider = name = "ledger"
    decision_mode = "ledger"
    relevance_kind = "oracle"
    capabilities: frozenset = frozenset()
    tokenizer_source: str = "given (--tokenizer) or the offline default"
    cache = None

    def __init__(self, social_proof: float = 0.0, irrelevant_weight: float = 0.0,
                 inverse_temperature: float = math.inf, tokenizer=None):
        # strict values: a boolean is not 1, NaN/inf would make every score NaN, and a negative
        # inverse temperature would silently pick the worst-supported option
        self.social_proof = option_number("backend ledger", "social_proof", social_proof)
        self.irrelevant_weight = option_number("backend ledger", "irrelevant_weight", irrelevant_weight)
        self.inverse_temperature = option_number("backend ledger", "inverse_temperature", inverse_temperature, low=0,
                                                 allow_inf=True)
        self.tokenizer = tokenizer or default_tokenizer()
        self.stats: Counter = Counter()
        self.progress = False

    @property
    def model(self) -> str:
        return (f"reference-decider(sp={self.social_proof:g},irr={self.irrelevant_weight:g},"
                f"beta={self.inverse_temperature:g})")

    def relevance(self, task: Task, cl: ClaimList) -> Relevance:
        """The ledger has no model: its relevance filter is the oracle's."""
        return Relevance.of(oracle_relevance(cl, task))

    def stances(self, task: Task, cl: ClaimList):
        """The ledger has no model: its stances are the oracle's."""
        return oracle_stances(cl, task)

    def summarise(self, prompt, max_tokens: int):
        raise ValueError("B3 is a generated summary: it needs a model backend, not the reference decider")

    def prefetch(self, relevance=(), summaries=(), stances=()) -> None:
        """Nothing to send: the ledger makes no model calls."""

    def option_scores(self, task: Task, memory: Memory, order: Sequence[str]) -> np.ndarray:
        t = task.template
        s = np.zeros(len(order))
        pos = {o: j for j, o in enumerate(order)}
        for fid, n in memory.kept_facts():  # a fact restated in several kept lines counts once
            f = t.fact(fid)
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
