"""Memory policies (SPEC section 6), registered by the names the paper uses.

A policy spec is ``BASE[-kK][:FORMAT]``:

* ``BASE`` a registered policy (:mod:`.registry`): the copy policies ``R1``, ``B4``,
  ``Random``, ``M1`` (:mod:`.copy`), ``R1-rel`` / ``R1-rel-oracle`` (:mod:`.r1rel`: tiers from
  the backend's relevance filter / from the roles) and the repair ``BAL`` / ``BAL-oracle``
  (:mod:`.bal`); the unbudgeted controls ``EMPTY``, ``ALL``, ``REF`` and the reference
  memories ``private-only``, ``shared-only`` (:mod:`.reference`); and ``B3`` (:mod:`.b3`, a
  generated summary; needs a model).
* ``-k7`` the fixed-k control: keep exactly the first 7 claims of the policy's priority
  order, whatever their cost (removes the "R1 fits more lines" confound).
* ``:FORMAT`` a provenance format (``full`` by default, ``unlabeled``, ``shuffled``,
  ``first-speaker``, ``claim-id``; see :mod:`crossprofile_lib.task.provenance`). The kept set is
  chosen exactly as for ``full``; only the shown labels change.

Each policy declares what it needs (``Policy.needs``: the transcript, relevance tiers,
stances, a summariser); :func:`select_memory` receives those inputs from the caller (the
pipeline, :mod:`crossprofile_lib.run.pipeline`), so policies import no backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from crossprofile_lib.policies import (
    plugins,  # your own policies (a file, module:object, an entry point)
    reference,  # noqa: F401,E402  registers EMPTY ALL REF private-only shared-only
)
from crossprofile_lib.policies.b3 import cut_to_budget, summary_kept, summary_prompt, word_limit  # B3
from crossprofile_lib.policies.bal import balanced_order, oracle_stances, order_bal, pack_balanced  # BAL, BAL-oracle
from crossprofile_lib.policies.copy import (  # registers R1 B4 Random M1
    claims_memory,
    order_b4,
    order_m1,
    order_r1,
    order_random,
    pack,
)
from crossprofile_lib.policies.r1rel import oracle_relevance, order_r1_rel, relevance_metrics  # R1-rel, R1-rel-oracle
from crossprofile_lib.policies.registry import (
    DEFAULT_POLICIES,
    FIT_POLICIES,
    FIXED_K_DEFAULT,
    GROUP_SIZE_POLICIES,
    HB_POLICIES,
    HEATMAP_POLICIES,
    LABELS_POLICIES,
    MODEL_POLICIES,
    NEEDS,
    REFERENCE_POLICIES,
    REGISTRY,
    SOCIAL_PROOF_POLICIES,
    SWEEP_POLICIES,
    WALK_POLICIES,
    Policy,
    PolicyContext,
    PolicySpec,
    bases,
    parse_policy,
    register,
)
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
    plugin = spec.base in plugins.PLUGINS  # a policy of the user's: what it returns is checked
    if pol.kind != "copy":
        mem = pol.build(spec, PolicyInputs(cl, tokenizer, rng, budget, transcript, relevant, stances, task,
                                           summarise))
        if plugin:
            plugins.check_memory(spec, mem, cl, budget)
        return mem
    ctx = PolicyContext(rng, relevant, stances)
    order = pol.order(cl, ctx)
    if plugin:
        order = _checked(spec, lambda: plugins.check_order(spec.name, order, len(cl)))
    if spec.fixed_k is not None:
        idx = order[:spec.fixed_k]
    elif budget is None:
        raise ValueError(f"policy '{spec.name}' needs a token budget")
    elif pol.packer is not None:
        idx = pol.packer(cl, order, budget, tokenizer, ctx)
        if plugin:
            idx = _checked(spec, lambda: plugins.check_order(spec.name, idx, len(cl)))
    else:
        idx = pack(cl, order, budget, tokenizer)
    mem = claims_memory(spec, cl, idx, tokenizer, rng)
    if plugin:
        plugins.check_memory(spec, mem, cl, budget)
    return mem


def _checked(spec: PolicySpec, check):
    """``check()``, its ValueError re-raised as the plug-in's :class:`~.plugins.PolicyFileError`."""
    try:
        return check()
    except ValueError as e:
        src = plugins.PLUGINS[spec.base]
        raise plugins.PolicyFileError(src.spec, "trial" if plugins._TRIAL else "memory", str(e)) from None


__all__ = ["DEFAULT_POLICIES", "FIT_POLICIES", "FIXED_K_DEFAULT", "GROUP_SIZE_POLICIES", "HB_POLICIES",
           "HEATMAP_POLICIES", "LABELS_POLICIES", "MODEL_POLICIES", "REFERENCE_POLICIES", "SOCIAL_PROOF_POLICIES",
           "SWEEP_POLICIES", "NEEDS", "REGISTRY", "WALK_POLICIES", "Memory",
           "Policy", "PolicyContext", "PolicyInputs", "PolicySpec", "balanced_order", "bases", "claims_memory",
           "cut_to_budget", "oracle_relevance", "oracle_stances", "order_b4", "order_bal", "order_m1", "order_r1",
           "order_r1_rel", "order_random", "pack", "pack_balanced", "parse_policy", "register",
           "plugins", "relevance_metrics", "select_memory", "summary_kept", "summary_prompt", "word_limit"]
