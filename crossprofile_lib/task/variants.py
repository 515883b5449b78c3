"""Attribution variants (SPEC section 3): each group (support, decoy, irrelevant) is **S**hared (held by every
agent) or **P**rivate (each fact held by one agent), named support-decoy-irrelevant (``PSP``). Private facts are
dealt group by group, each in a seeded order, to agents in a seeded rotation continuing across groups (as even
as possible).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crossprofile_lib.design import CELLS, ROLES, VARIANT_NAMES
from crossprofile_lib.task.templates import Template


@dataclass(frozen=True)
class Variant:
    name: str

    def __post_init__(self):
        if self.name not in VARIANT_NAMES:
            raise ValueError(f"variant '{self.name}' is not three letters of P/S (e.g. PSP)")

    def attr(self, role: str) -> str:
        """'shared' or 'private' for a role."""
        return "shared" if self.name[ROLES.index(role)] == "S" else "private"

    support_attr = property(lambda self: self.attr("support"))
    decoy_attr = property(lambda self: self.attr("decoy"))
    irrelevant_attr = property(lambda self: self.attr("irrelevant"))

    @property
    def cell(self) -> str:
        """'classic' (``PSP``), 'mirror' (``SPS``, every holder swapped: our reading, as the paper does not state
        the mirror's irrelevant level) or 'other' (SPEC section 3)."""
        return CELLS.get(self.name, "other")

    @property
    def pooled_cell(self) -> str:
        """The secondary, pooled cells: 'classic' for ``PS*`` and 'mirror' for ``SP*`` (mean over
        both irrelevant levels), else 'other'. Shown only in rows labelled "pooled"."""
        return {"PS": "classic", "SP": "mirror"}.get(self.name[:2], "other")


VARIANTS = tuple(Variant(n) for n in VARIANT_NAMES)


def agent_names(n_agents: int) -> tuple[str, ...]:
    if n_agents < 1:
        raise ValueError("n_agents must be at least 1")
    return tuple(f"A{i + 1}" for i in range(n_agents))


def assign_holders(template: Template, variant: Variant, n_agents: int,
                   rng: np.random.Generator) -> dict[str, tuple[str, ...]]:
    """Map fact id -> sorted tuple of the agents holding it."""
    agents = agent_names(n_agents)
    holders: dict[str, tuple[str, ...]] = {}
    rotation = [agents[i] for i in rng.permutation(n_agents)]
    cursor = 0
    for role in ROLES:  # support, decoy, irrelevant
        facts = template.facts_by_role(role)
        if variant.attr(role) == "shared":
            holders |= {f.id: agents for f in facts}
        else:
            for j in rng.permutation(len(facts)):
                holders[facts[j].id] = (rotation[cursor % n_agents],)
                cursor += 1
    return {f.id: holders[f.id] for f in template.facts}
