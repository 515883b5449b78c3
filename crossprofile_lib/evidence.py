"""Per-decision evidence measures (SPEC section 8): kept composition, retention, net lead.

``net lead`` = net score of the correct option minus net score of the decoy over the kept
*relevant* facts (labels ignored). It runs from -3 (all three decoy facts, no support) to +5
(all five support facts, no decoy); every fact together gives +2.
"""

from __future__ import annotations

from dataclasses import dataclass

from .discussion import Task
from .policies import Memory

N_SUPPORT = 5


@dataclass(frozen=True)
class Composition:
    kept_support: int
    kept_decoy: int
    kept_irrelevant: int
    net_lead: int
    irrelevant_tone: int  # sum of polarities of kept irrelevant facts about the correct option
                          # minus those about the decoy (the regression's tone covariate)

    @property
    def retention(self) -> float:
        return self.kept_support / N_SUPPORT


def composition(task: Task, memory: Memory) -> Composition:
    t = task.template
    n = {"support": 0, "decoy": 0, "irrelevant": 0}
    lead = tone = 0
    for c in memory.kept:
        if c.fact_id is None:
            continue
        f = t.fact(c.fact_id)
        n[f.role] += 1
        sign = 1 if f.about == t.correct_option else -1 if f.about == t.decoy_option else 0
        if f.relevant:
            lead += sign * f.polarity
        else:
            tone += sign * f.polarity
    return Composition(n["support"], n["decoy"], n["irrelevant"], lead, tone)
