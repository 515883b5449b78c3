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
from crossprofile_lib.policies.select import PolicyInputs, select_memory  # noqa: E402
from crossprofile_lib.task.memory import Memory
