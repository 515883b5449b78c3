"""What the decision call sees: a :class:`Memory` (SPEC section 6), built by the policies, shown by the backends,
read by the measures and HiddenBench.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crossprofile_lib.task.discussion import Claim


@dataclass(frozen=True)
class Memory:
    """What the decision call sees, and which claims it holds."""

    policy: str
    kind: str                      # 'claims', 'transcript', 'summary' or 'empty'
    kept: tuple[Claim, ...]        # in first-mention order
    revealed: tuple[int, ...]      # speakers each kept line reveals (social proof)
    text: str
    tokens: int
    truncated: bool = False
    meta: dict = field(default_factory=dict)

    @property
    def n_kept(self) -> int:
        return len(self.kept)

    def kept_facts(self) -> tuple[tuple[str, int], ...]:
        """``(fact id, speakers revealed)`` of each distinct fact the kept lines state, in kept order: a fact in
        two lines (an unmerged restatement) counts once with its most speakers; lines stating no fact are left out."""
        out: dict[str, int] = {}
        for c, n in zip(self.kept, self.revealed):
            if c.fact_id is not None:
                out[c.fact_id] = max(out.get(c.fact_id, n), n)
        return tuple(out.items())
