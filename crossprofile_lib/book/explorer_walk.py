"""What a memory policy keeps and what it drops, and why (chapter 10's explorer): :func:`walk` replays the policy's
own priority order and packing on one task (the functions the policy registered: :mod:`crossprofile_lib.policies`)
and checks that the replay keeps exactly the claims the policy's memory kept, so the explanation cannot drift from
the memory it explains; :func:`reason` puts one step into words.

Rules (:attr:`Walk.rule`): ``fit`` a copy policy packed greedily first-fit (a line that does not fit is skipped and
the walk goes on; SPEC section 6), ``packer`` a copy policy with a packing rule of its own (BAL), ``fixed-k`` the
fixed-k control (the first k claims of the priority order, whatever their cost), ``unbudgeted`` a control that keeps
claims by a rule of its own (ALL, EMPTY, private-only, shared-only), ``transcript`` REF (every line of the
discussion). The same sentences are written by the page's script (book/_static/cp-explorer/explorer.js), and
tests/test_explorer_live.py proves them equal for every step of a build's grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from crossprofile_lib.policies.registry import REGISTRY, PolicyContext, PolicySpec
from crossprofile_lib.task.budgets import line_cost
from crossprofile_lib.task.discussion import ClaimList
from crossprofile_lib.task.memory import Memory


@dataclass(frozen=True)
class Step:
    """One claim as the walk met it: ``claim`` its index in the claim list (first-mention order), ``rank`` its
    place in the policy's priority order (1 = first; None for a rule without one), ``cost`` the tokens of its
    labelled line plus the newline (what packing prices), ``left`` the tokens of the budget left when the walk
    reached it (greedy first-fit only)."""

    claim: int
    rank: Optional[int]
    cost: int
    left: Optional[int]
    kept: bool


@dataclass(frozen=True)
class Walk:
    """The steps of one policy on one task, in the order the policy considered the claims."""

    policy: str
    rule: str
    doc: str
    budget: Optional[int]
    k: Optional[int]
    steps: tuple[Step, ...]

    @property
    def used(self) -> int:
        """Tokens the kept lines cost as packing priced them."""
        return sum(s.cost for s in self.steps if s.kept)


class WalkMismatch(RuntimeError):
    """The replayed walk does not keep the claims the policy's memory kept (a bug: the explanation would lie)."""


def _kept_indices(cl: ClaimList, memory: Memory) -> set[int]:
    at = {c.first_mention: i for i, c in enumerate(cl.claims)}
    return {at[c.first_mention] for c in memory.kept if c.first_mention in at}


def walk(spec: PolicySpec, cl: ClaimList, memory: Memory, budget: Optional[int], tokenizer,
         ctx: Optional[PolicyContext] = None) -> Walk:
    """Replay ``spec`` on the claim list ``cl`` (its order from ``ctx``: the same generator, relevance tiers and
    stances the memory was built with) and explain ``memory``; :class:`WalkMismatch` when the replay keeps
    other claims than the memory."""
    pol = REGISTRY[spec.base]
    cost = [line_cost(c.line(), tokenizer) for c in cl.claims]
    kept = _kept_indices(cl, memory)
    n = len(cl)
    if memory.kind == "transcript":
        steps = tuple(Step(i, None, cost[i], None, True) for i in range(n))
        return Walk(spec.name, "transcript", pol.doc, budget, None, steps)
    if pol.kind != "copy":
        steps = tuple(Step(i, None, cost[i], None, i in kept) for i in range(n))
        return Walk(spec.name, "unbudgeted", pol.doc, budget, None, steps)
    order = [int(i) for i in pol.order(cl, ctx or PolicyContext(None))]
    if spec.fixed_k is not None:
        replay = set(order[:spec.fixed_k])
        steps = tuple(Step(i, r + 1, cost[i], None, r < spec.fixed_k) for r, i in enumerate(order))
        rule = "fixed-k"
    elif pol.packer is not None:
        replay = {int(i) for i in pol.packer(cl, order, budget, tokenizer, ctx or PolicyContext(None))}
        steps = tuple(Step(i, r + 1, cost[i], None, i in kept) for r, i in enumerate(order))
        rule = "packer"
    else:
        used, out, replay = 0, [], set()
        for r, i in enumerate(order):
            fits = used + cost[i] <= budget
            out.append(Step(i, r + 1, cost[i], budget - used, fits))
            if fits:
                used += cost[i]
                replay.add(i)
        steps, rule = tuple(out), "fit"
    if replay != kept or sorted(s.claim for s in steps) != list(range(n)):
        raise WalkMismatch(f"policy {spec.name}: replaying its order keeps claims {sorted(replay)}, its memory "
                           f"kept {sorted(kept)} (chapter 10's explorer explains a memory by replaying the policy: its "
                           "order must depend only on the claim list and the generator it is given, ctx.rng)")
    return Walk(spec.name, rule, pol.doc, budget, spec.fixed_k, steps)


def reason(w: Walk, s: Step) -> str:
    """One step in words. The page's script writes the same words."""
    if s.kept:
        return "kept"
    if w.rule == "fit":
        return f"dropped: its line needs {s.cost} tokens, {s.left} of {w.budget} left"
    if w.rule == "fixed-k":
        return f"dropped: the fixed-k control keeps the first {w.k} in priority order"
    if w.rule == "packer":
        return f"dropped: its own packing rule ({w.doc}) did not take it; {w.budget - w.used} of {w.budget} tokens left"
    return f"dropped: {w.policy} keeps {w.doc}"
