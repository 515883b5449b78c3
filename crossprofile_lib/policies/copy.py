"""The copy policies (SPEC section 6): ``R1``, ``B4``, ``Random``, ``M1``: a priority order over the claim list, packed
greedily first-fit (a line that does not fit is skipped), priced as labelled lines, shown in first-mention order.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from crossprofile_lib.policies.registry import Policy, PolicyContext, register
from crossprofile_lib.task.budgets import line_cost
from crossprofile_lib.task.discussion import ClaimList
from crossprofile_lib.task.memory import Memory
from crossprofile_lib.task.provenance import render_lines


def order_r1(cl: ClaimList, ctx: PolicyContext) -> list[int]:
    """Rarest first: fewest speakers first, ties by earlier first mention."""
    return sorted(range(len(cl)), key=lambda i: (cl.claims[i].count, cl.claims[i].first_mention))


def order_b4(cl: ClaimList, ctx: PolicyContext) -> list[int]:
    """First mention: earlier first mention first."""
    return sorted(range(len(cl)), key=lambda i: cl.claims[i].first_mention)


def order_random(cl: ClaimList, ctx: PolicyContext) -> list[int]:
    """A seeded permutation."""
    return [int(i) for i in ctx.rng.permutation(len(cl))]


def order_m1(cl: ClaimList, ctx: PolicyContext) -> list[int]:
    """Speaker rotation: round-robin over speakers in speaking order, each taking its next
    claim (in the order it stated them) not yet taken; exhausted speakers are skipped."""
    queues = [list(ix) for _, ix in cl.by_speaker]
    taken: list[int] = []
    seen: set[int] = set()
    while any(queues):
        for q in queues:
            while q and q[0] in seen:
                q.pop(0)
            if q:
                i = q.pop(0)
                seen.add(i)
                taken.append(i)
    return taken


def pack(cl: ClaimList, order: Sequence[int], budget: int, tokenizer) -> list[int]:
    """Greedy first-fit: walk ``order``; keep a claim if its labelled line still fits."""
    used, kept = 0, []
    for i in order:
        c = line_cost(cl.claims[i].line(), tokenizer)
        if used + c <= budget:
            kept.append(i)
            used += c
    return kept


def claims_memory(spec, cl: ClaimList, idx: Sequence[int], tokenizer, rng: np.random.Generator) -> Memory:
    """The memory keeping claims ``idx``, shown in first-mention order in the spec's format."""
    kept = tuple(cl.claims[i] for i in sorted(idx, key=lambda i: cl.claims[i].first_mention))
    rendered = render_lines(kept, spec.fmt, rng)
    lines = [t for t, _ in rendered]
    tokens = sum(line_cost(t, tokenizer) for t in lines)
    kind = "claims" if kept else "empty"
    return Memory(spec.name, kind, kept, tuple(n for _, n in rendered), "\n".join(lines), tokens)


register(Policy("R1", "copy", "rarest first", order=order_r1))
register(Policy("B4", "copy", "first mention", order=order_b4))
register(Policy("Random", "copy", "a seeded permutation", random=True, order=order_random))
register(Policy("M1", "copy", "speaker rotation", order=order_m1))
