"""The copy policies (SPEC section 6): ``R1``, ``B4``, ``Random``, ``M1``, ``R1-rel`` / ``R1-rel-oracle``: a priority
order over the claim list, packed greedily first-fit (a line that does not fit is skipped), priced as labelled lines,
shown in first-mention order; and the unbudgeted controls ``EMPTY``, ``ALL``, ``REF`` (the transcript),
``private-only`` (claims one speaker stated) and ``shared-only`` (the others).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from crossprofile_lib.policies.registry import Policy, PolicyContext, register
from crossprofile_lib.task.budgets import line_cost, memory_tokens
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
    taken: dict[int, None] = {}   # an ordered set
    while any(queues):
        for q in queues:
            while q and q[0] in taken:
                q.pop(0)
            if q:
                taken[q.pop(0)] = None
    return list(taken)


def order_r1_rel(cl: ClaimList, ctx: PolicyContext) -> list[int]:
    """Relevance first: the relevant tier (the backend's relevance filter, or the roles:
    :func:`crossprofile_lib.task.evidence.oracle_relevance`), then the rest; R1 order inside tiers."""
    if ctx.relevant is None:
        raise ValueError("R1-rel needs a relevance filter (the backend supplies one)")
    r1 = order_r1(cl, ctx)
    return [i for i in r1 if i in ctx.relevant] + [i for i in r1 if i not in ctx.relevant]


def relevance_metrics(pred: frozenset[int], truth: frozenset[int]) -> tuple[float, float]:
    """Precision and recall of the judged-relevant claims against the oracle's (NaN when undefined)."""
    tp = len(pred & truth)
    prec = tp / len(pred) if pred else math.nan
    rec = tp / len(truth) if truth else math.nan
    return prec, rec


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
    return Memory(spec.name, "claims" if kept else "empty", kept, tuple(n for _, n in rendered), "\n".join(lines),
                  sum(line_cost(t, tokenizer) for t in lines))


register(Policy("R1", "copy", "rarest first", order=order_r1))
register(Policy("B4", "copy", "first mention", order=order_b4))
register(Policy("Random", "copy", "a seeded permutation", random=True, order=order_random))
register(Policy("M1", "copy", "speaker rotation", order=order_m1))
NEEDS_RELEVANCE = frozenset({"relevance"})
register(Policy("R1-rel", "copy", "relevant tier first (model filter)", needs=NEEDS_RELEVANCE, source="model",
                order=order_r1_rel))
register(Policy("R1-rel-oracle", "copy", "relevant tier first (roles)", needs=NEEDS_RELEVANCE, source="oracle",
                order=order_r1_rel))


def _empty(spec, x) -> Memory:
    return Memory(spec.name, "empty", (), (), "", 0)


def _keep(pred):
    def build(spec, x) -> Memory:
        return claims_memory(spec, x.claims, [i for i, c in enumerate(x.claims.claims) if pred(c)], x.tokenizer, x.rng)
    return build


def _ref(spec, x) -> Memory:
    if x.transcript is None:
        raise ValueError("REF needs the transcript")
    text = x.transcript.render()
    return Memory(spec.name, "transcript", tuple(x.claims.claims), tuple(c.count for c in x.claims.claims), text,
                  memory_tokens(text, x.tokenizer))


register(Policy("EMPTY", "unbudgeted", "no memory", build=_empty))
register(Policy("ALL", "unbudgeted", "every claim", build=_keep(lambda c: True)))
register(Policy("REF", "unbudgeted", "the transcript", needs=frozenset({"transcript"}), build=_ref))
register(Policy("private-only", "unbudgeted", "claims one speaker stated", build=_keep(lambda c: c.count == 1)))
register(Policy("shared-only", "unbudgeted", "claims several speakers stated", build=_keep(lambda c: c.count > 1)))
