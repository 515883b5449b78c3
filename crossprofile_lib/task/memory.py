"""What the decision call sees: a :class:`Memory` (SPEC section 6).

A plain data type shared by the memory policies (which build it), the decision backends
(which show its text), the evidence measures and HiddenBench (which read which claims it kept).
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
