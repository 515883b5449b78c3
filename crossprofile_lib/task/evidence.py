"""Per-decision evidence measures (SPEC section 8) and the answer key's view of a claim (oracle relevance,
:class:`Stance`). ``net lead`` = net score of the correct option minus the decoy's over the kept *relevant*
facts: -3 (all decoy facts, no support) to +5 (all support, no decoy); every fact gives +2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from crossprofile_lib.task.discussion import ClaimList, Task
from crossprofile_lib.task.memory import Memory

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
    facts = [None if c.fact_id is None else task.template.fact(c.fact_id) for c in cl.claims]
    return tuple(None if f is None else Stance(f.about, f.polarity, f.relevant) for f in facts)


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
    for fid, _ in memory.kept_facts():  # a fact kept in several lines counts once
        f = t.fact(fid)
        n[f.role] += 1
        sign = 1 if f.about == t.correct_option else -1 if f.about == t.decoy_option else 0
        if f.relevant:
            lead += sign * f.polarity
        else:
            tone += sign * f.polarity
    return Composition(n["support"], n["decoy"], n["irrelevant"], lead, tone)


def template_tone(template) -> int:
    """A template's irrelevant-fact tone: the polarities of its irrelevant facts about the correct option minus
    those about the decoy (facts about the third option count 0), the :class:`Composition` covariate over all 12
    facts. Negative: the irrelevant facts lean toward the decoy (praise it or run down the correct option)."""
    return sum((1 if f.about == template.correct_option else -1 if f.about == template.decoy_option else 0)
               * f.polarity for f in template.facts if not f.relevant)


def tone_balance(templates) -> dict[str, int]:
    """Templates whose irrelevant facts lean toward the decoy, toward the correct option, or neither
    (SPEC section 2: about as many each way)."""
    tones = [template_tone(t) for t in templates]
    return {"decoy": sum(x < 0 for x in tones), "correct": sum(x > 0 for x in tones),
            "neither": sum(x == 0 for x in tones)}


# --- per-option evidence a memory shows (the social-proof fit's features) ----------------------
#: columns of :func:`option_features`: relevant polarity, relevant polarity x (speakers - 1),
#: irrelevant polarity, irrelevant polarity x (speakers - 1)
FEATURES = ("relevant", "relevant_extra_speakers", "irrelevant", "irrelevant_extra_speakers")


def fact_table(template) -> dict:
    """``fact id -> (option the fact is about, feature column, polarity)`` of a template."""
    return {f.id: (f.about, 0 if f.relevant else 2, f.polarity) for f in template.facts}


def option_features(task: Task, memory: Memory, order: Sequence[str], facts: Optional[dict] = None) -> np.ndarray:
    """``(K, 4)`` features (:data:`FEATURES`) of each option in ``order`` from a memory's kept facts
    and the speaker counts their labels reveal. ``facts``: the template's :func:`fact_table`."""
    facts = facts if facts is not None else fact_table(task.template)
    pos = {o: j for j, o in enumerate(order)}
    x = np.zeros((len(order), 4))
    for fid, n in memory.kept_facts():  # a fact kept in several lines counts once
        about, k, polarity = facts[fid]
        x[pos[about], k] += polarity
        x[pos[about], k + 1] += polarity * (max(n, 1) - 1)
    return x


def encode_features(x: np.ndarray) -> str:
    """The results column ``option_features``: integers, options separated by ``;``, columns by
    ``,`` in the option order of the row (``"1,0,0,0;-1,-3,0,0;0,0,1,0"``)."""
    return ";".join(",".join(str(int(v)) for v in row) for row in x)


def decode_features(s: str) -> np.ndarray:
    """Inverse of :func:`encode_features`: ``(K, 4)`` floats."""
    return np.array([[float(v) for v in row.split(",")] for row in s.split(";")])
