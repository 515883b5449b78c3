"""Memory policies (SPEC section 6), registered by the names the paper uses.

A policy spec is ``BASE[-kK][:FORMAT]``: ``BASE`` a registered policy (:mod:`.registry`): the copy policies
``R1``, ``B4``, ``Random``, ``M1``, ``R1-rel`` / ``R1-rel-oracle`` and the unbudgeted controls ``EMPTY``, ``ALL``,
``REF``, ``private-only``, ``shared-only`` (:mod:`.copy`), the repair ``BAL`` / ``BAL-oracle`` (:mod:`.bal`) and
``B3`` (:mod:`.b3`, a generated summary; needs a model); ``-k7`` the fixed-k control (exactly the first 7 claims
of the priority order, whatever their cost); ``:FORMAT`` a provenance format (:mod:`crossprofile_lib.task.provenance`;
the kept set is as for ``full``, only the labels change). Each policy declares what it needs (``Policy.needs``);
:func:`select_memory` receives those inputs from the caller, so policies import no backend.
"""

from __future__ import annotations

from crossprofile_lib.design import DEFAULT_POLICIES, HB_POLICIES, HEATMAP_POLICIES, WALK_POLICIES  # the policy lists
from crossprofile_lib.policies import plugins  # your own policies (a file, module:object, an entry point)
from crossprofile_lib.policies.b3 import cut_to_budget, summary_kept, summary_prompt, word_limit  # B3
from crossprofile_lib.policies.bal import balanced_order, order_bal, pack_balanced  # BAL, BAL-oracle
from crossprofile_lib.policies.copy import (  # registers R1 B4 Random M1 R1-rel(-oracle) EMPTY ALL REF private/shared-only
    claims_memory,
    order_b4,
    order_m1,
    order_r1,
    order_r1_rel,
    order_random,
    pack,
    relevance_metrics,
)
from crossprofile_lib.policies.registry import (
    NEEDS,
    REGISTRY,
    Policy,
    PolicyContext,
    PolicySpec,
    bases,
    parse_policy,
    register,
)
from crossprofile_lib.policies.select import PolicyInputs, select_memory
from crossprofile_lib.task.memory import Memory
