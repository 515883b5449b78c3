"""Building one memory: :func:`select_memory` (a policy spec, a claim list, a budget -> a :class:`Memory`).

A copy policy's order is packed into the budget (greedy first-fit, or the policy's own packer) unless the
spec is a fixed-k control; the other kinds build their memory themselves from :class:`PolicyInputs`. What a
policy of your own returns is checked on every call (:mod:`.guard`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

import crossprofile_lib.policies.guard as guard
from crossprofile_lib.policies.copy import claims_memory, pack
from crossprofile_lib.policies.registry import REGISTRY, PolicyContext, PolicySpec, parse_policy
from crossprofile_lib.task.discussion import ClaimList, Task, Transcript
from crossprofile_lib.task.memory import Memory


@dataclass(frozen=True)
class PolicyInputs:
    """Everything a policy may read for one memory (see ``Policy.needs``)."""

    claims: ClaimList
    tokenizer: object
    rng: Optional[np.random.Generator]
    budget: Optional[int] = None
    transcript: Optional[Transcript] = None
    relevant: Optional[frozenset[int]] = None
    stances: Optional[tuple] = None
    task: Optional[Task] = None
    summarise: Optional[Callable] = None


def select_memory(spec: PolicySpec | str, cl: ClaimList, budget: Optional[int], tokenizer,
                  rng: Optional[np.random.Generator], transcript: Optional[Transcript] = None,
                  relevant: Optional[frozenset[int]] = None, stances: Optional[tuple] = None,
                  task: Optional[Task] = None, summarise: Optional[Callable] = None) -> Memory:
    """Build the memory ``spec`` keeps from the claim list ``cl``."""
    spec = parse_policy(spec) if isinstance(spec, str) else spec
    pol = REGISTRY[spec.base]
    plugin = spec.base in guard.PLUGINS  # a policy of the user's: what it returns is checked
    if pol.kind != "copy":
        mem = pol.build(spec, PolicyInputs(cl, tokenizer, rng, budget, transcript, relevant, stances, task, summarise))
    else:
        ctx = PolicyContext(rng, relevant, stances)
        order = pol.order(cl, ctx)
        if plugin:
            order = _checked(spec, lambda: guard.check_order(spec.name, order, len(cl)))
        if spec.fixed_k is not None:
            idx = order[:spec.fixed_k]
        elif budget is None:
            raise ValueError(f"policy '{spec.name}' needs a token budget")
        elif pol.packer is not None:
            idx = pol.packer(cl, order, budget, tokenizer, ctx)
            if plugin:
                idx = _checked(spec, lambda: guard.check_order(spec.name, idx, len(cl)))
        else:
            idx = pack(cl, order, budget, tokenizer)
        mem = claims_memory(spec, cl, idx, tokenizer, rng)
    if plugin:
        mem = _checked(spec, lambda: guard.check_memory(spec, mem, cl, budget) or guard.own_memory(mem, cl))
    return mem


def _checked(spec: PolicySpec, check):
    """``check()`` of what a plug-in returned, contained (:func:`~.guard.contained`: whatever its objects raise
    while read is a refusal), its ValueError re-raised as the plug-in's :class:`~.guard.PolicyFileError`."""
    src = guard.PLUGINS[spec.base]
    with guard.contained(src.spec, f"policy '{spec.name}': what it returned", src.path):
        try:
            return check()
        except guard.PolicyFileError:
            raise
        except ValueError as e:
            raise guard.refusal(spec, str(e)) from None
