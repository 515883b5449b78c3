"""Per-decision evidence measures (SPEC section 8): kept composition, retention, net lead; and
what the answer key says about a claim (its oracle relevance and :class:`Stance`).

``net lead`` = net score of the correct option minus net score of the decoy over the kept
*relevant* facts (labels ignored). It runs from -3 (all three decoy facts, no support) to +5
(all five support facts, no decoy); every fact together gives +2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .discussion import ClaimList, Task
from .memory import Memory

N_SUPPORT = 5


@dataclass(frozen=True)
class Stance:
    """What one claim says about the options: the option it is about, for or against it, and
    whether it bears on a stated criterion (BAL's input; from a model's stance call or the roles)."""

    option: Optional[str]   # option id the claim is about (None: unknown)
    polarity: int           # +1 for, -1 against, 0 unknown
    relevant: bool          # bears on a stated criterion


def oracle_relevance(cl: ClaimList, task: Task) -> frozenset[int]:
    """Claims whose fact is a support or decoy fact (the oracle relevance filter; R1-rel-oracle)."""
    rel = {f.id for f in task.template.facts if f.relevant}
    return frozenset(i for i, c in enumerate(cl.claims) if c.fact_id in rel)


def oracle_stances(cl: ClaimList, task: Task) -> tuple[Optional[Stance], ...]:
    """Stances read from the template's roles (the oracle-stance control; BAL-oracle)."""
    out = []
    for c in cl.claims:
        if c.fact_id is None:
            out.append(None)
            continue
        f = task.template.fact(c.fact_id)
        out.append(Stance(f.about, f.polarity, f.relevant))
    return tuple(out)


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
