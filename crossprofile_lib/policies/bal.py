"""Balance-aware memory (``BAL``): a repair the paper proposes (accuracy follows the net evidence balance a
memory keeps) but does not build. Each claim's **stance** (option, for/against, relevant or not) comes from one
stance call per claim list (``BAL``) or from the roles (``BAL-oracle``); speaker counts are ignored.

Order: buckets ``(relevant, option, polarity)``, relevant tier first; inside a tier the next claim comes from
the bucket with the largest deficit ``share_b * (m + 1) - kept_b`` (ties: larger share, then earlier first
mention), first-mention order inside a bucket; claims without a stance last. Packing (:func:`pack_balanced`):
the owed bucket takes its first claim that fits; when none fits the tier stops (no jumping to another bucket);
irrelevant claims then fill the rest the same way, stance-less ones first-fit. ``BAL-k7`` takes the first k.
"""

from __future__ import annotations

from typing import Optional, Sequence

from crossprofile_lib.policies.registry import Policy, PolicyContext, register
from crossprofile_lib.task.budgets import line_cost
from crossprofile_lib.task.discussion import ClaimList
from crossprofile_lib.task.evidence import Stance


def _buckets(stances, tier: bool, by_first) -> dict[tuple, list[int]]:
    out: dict[tuple, list[int]] = {}
    for i in by_first:
        s = stances[i]
        if s is not None and s.relevant == tier and s.option is not None and s.polarity != 0:
            out.setdefault((s.option, s.polarity), []).append(i)
    return out


def _walk(cl: ClaimList, buckets: dict[tuple, list[int]], room: Optional[int] = None,
          cost=None) -> tuple[list[int], int]:
    """Largest-deficit walk over ``buckets``. With ``room`` (tokens left) and ``cost(i)``, a
    pick must fit; the walk stops when the bucket owed a claim has none that fits.
    Returns the picks and the tokens they use."""
    total = sum(len(v) for v in buckets.values())
    share = {b: len(v) / total for b, v in buckets.items()} if total else {}
    left = {b: list(v) for b, v in buckets.items()}
    kept = {b: 0 for b in buckets}
    out: list[int] = []
    used = 0
    while any(left.values()):
        live = [b for b in left if left[b]]
        b = max(live, key=lambda b: (share[b] * (len(out) + 1) - kept[b], share[b],
                                     -cl.claims[left[b][0]].first_mention))
        pick = next((i for i in left[b] if room is None or used + cost(i) <= room), None)
        if pick is None:
            break  # the bucket owed a claim cannot take one: stop, keeping the proportions
        left[b].remove(pick)
        kept[b] += 1
        used += cost(pick) if cost else 0
        out.append(pick)
    return out, used


def _check(cl: ClaimList, stances) -> list[int]:
    if len(stances) != len(cl):
        raise ValueError(f"BAL needs one stance per claim ({len(cl)} claims, {len(stances)} stances)")
    return sorted(range(len(cl)), key=lambda i: cl.claims[i].first_mention)


def balanced_order(cl: ClaimList, stances: Sequence[Optional[Stance]]) -> list[int]:
    """Priority order of claim indices for ``BAL`` (see the module docstring)."""
    by_first = _check(cl, stances)
    order = [i for tier in (True, False) for i in _walk(cl, _buckets(stances, tier, by_first))[0]]
    taken = set(order)
    return order + [i for i in by_first if i not in taken]


def pack_balanced(cl: ClaimList, stances: Sequence[Optional[Stance]], budget: int, tokenizer) -> list[int]:
    """Claim indices ``BAL`` keeps within ``budget`` tokens (lines priced with their labels)."""
    by_first = _check(cl, stances)

    def cost(i: int) -> int:
        return line_cost(cl.claims[i].line(), tokenizer)

    kept: list[int] = []
    used = 0
    for tier in (True, False):
        picks, u = _walk(cl, _buckets(stances, tier, by_first), budget - used, cost)
        kept += picks
        used += u
    for i in by_first:
        if stances[i] is None and used + cost(i) <= budget:
            kept.append(i)
            used += cost(i)
    return kept


def order_bal(cl: ClaimList, ctx: PolicyContext) -> list[int]:
    """Balance-aware priority order (the fixed-k control takes its first k)."""
    if ctx.stances is None:
        raise ValueError("BAL needs stances (the backend's stance call, or the oracle for BAL-oracle)")
    return balanced_order(cl, ctx.stances)


def _pack(cl: ClaimList, order, budget: int, tokenizer, ctx: PolicyContext) -> list[int]:
    return pack_balanced(cl, ctx.stances, budget, tokenizer)  # packs by deficit, not first-fit


NEEDS_STANCES = frozenset({"stances"})
register(Policy("BAL", "copy", "balance-aware (model stances)", needs=NEEDS_STANCES, source="model",
                order=order_bal, packer=_pack))
register(Policy("BAL-oracle", "copy", "balance-aware (roles)", needs=NEEDS_STANCES, source="oracle",
                order=order_bal, packer=_pack))
