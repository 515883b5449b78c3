"""The paper's vocabulary and grids, in one place (the ground floor: imports nothing of the suite): roles and variants
(classic :data:`CLASSIC` = PSP, mirror :data:`MIRROR` = SPS), budgets (:data:`PRIMARY_BUDGET`, :data:`BUDGET_GRID`),
the headroom rule (:data:`HEADROOM_MIN_POINTS`), option :data:`LETTERS`, label formats, the policy lists and the
``ledger`` backend's label :data:`REFERENCE`. ``prereg.yaml`` may override the analysis settings for ``crossprofile
stats``; the bundled file states the values below, and a test keeps them equal.
"""

from __future__ import annotations

from itertools import product
from pathlib import Path

import yaml

# --- the task (SPEC sections 2-3) --------------------------------------------------------------------

#: Fact roles, in the order variants name them (support-decoy-irrelevant).
ROLES = ("support", "decoy", "irrelevant")
#: The eight attribution variants: S(hared) or P(rivate) per role, e.g. ``PSP``.
VARIANT_NAMES = tuple("".join(v) for v in product("PS", repeat=3))
#: The textbook hidden profile (support private, decoy shared, irrelevant private) and its full swap.
CLASSIC, MIRROR = "PSP", "SPS"
CELLS = {CLASSIC: "classic", MIRROR: "mirror"}
#: The file that lists decision domains, the 12 of the formal templates (SPEC section 2) bundled as the default: data,
#: not code (``resources/templates/domains.yaml``; a user's own ``domains.yaml`` adds to it, :mod:`.task.domains`).
DOMAINS_FILE = "domains.yaml"
#: The paper's 12 decision domains, read from the bundled file.
DOMAINS = tuple(yaml.safe_load((Path(__file__).parent / "resources" / "templates" / DOMAINS_FILE)
                               .read_text(encoding="utf-8"))["domains"])
#: Agents per discussion in the formal design.
N_AGENTS = 4
#: Option letters of the decision prompt (options rotated by seed, then lettered).
LETTERS = "ABCDEFGHIJ"

# --- budgets (SPEC section 5) ----------------------------------------------------------------------

PRIMARY_BUDGET = "0.6"
#: The paper's budget grid: the ratios and the fixed control.
BUDGET_GRID = ("0.4", "0.6", "0.8", "128t")
#: Label of rows with no budget (unbudgeted and fixed-k policies).
NO_BUDGET = "none"

# --- inference (SPEC section 8) --------------------------------------------------------------------

#: ALL - EMPTY must exceed this many points at the lower 95% bound, else a model's results are exploratory.
HEADROOM_MIN_POINTS = 15.0

# --- memories (SPEC section 6) ---------------------------------------------------------------------

#: Provenance label formats: ``full`` is the paper's ``[A1,A3] text``; see ``task.provenance``.
LABEL_FORMATS = ("full", "unlabeled", "shuffled", "first-speaker", "claim-id")
#: Lines kept by the fixed-k control.
FIXED_K_DEFAULT = 7

#: The order tables list policies in (others follow alphabetically).
POLICY_ORDER = ("R1", "B4", "Random", "M1", "R1-rel", "R1-rel-oracle", "B3", "R1-k7", "B4-k7", "Random-k7",
                "M1-k7", "R1-rel-k7", "R1:unlabeled", "B4:unlabeled", "ALL", "ALL:unlabeled", "ALL:shuffled",
                "EMPTY", "REF", "private-only", "shared-only")
#: The order tables list budget labels in.
BUDGET_ORDER = BUDGET_GRID + ("none",)
#: The paper's grid (with the controls) in the order tables show them.
DEFAULT_POLICIES = ("R1", "B4", "Random", "M1", "R1-rel", "R1-rel-oracle",
                    "R1-k7", "B4-k7", "Random-k7", "M1-k7", "R1-rel-k7",
                    "ALL:unlabeled", "ALL:shuffled", "R1:unlabeled", "B4:unlabeled",
                    "EMPTY", "ALL", "REF", "private-only", "shared-only")
#: HiddenBench's grid: the paper's copy policies, B3 and the reference memories.
HB_POLICIES = ("R1", "B4", "Random", "M1", "R1-rel", "B3",
               "EMPTY", "ALL", "REF", "private-only", "shared-only")
#: The walkthrough's (chapters 1 and 10): one task end to end on the reference decider.
WALK_POLICIES = ("R1", "B4", "Random", "M1", "R1-rel-oracle", "BAL-oracle", "ALL", "ALL:unlabeled", "EMPTY")
#: The book's reference-decider grid: the paper's policies and controls plus the BAL repair.
REFERENCE_POLICIES = DEFAULT_POLICIES + ("BAL", "BAL-oracle")
#: Provenance formats compared under a social-proof reference decider (SPEC 6 and issue 8).
SOCIAL_PROOF_POLICIES = tuple(p if f == "full" else f"{p}:{f}" for p in ("ALL", "R1", "B4", "BAL")
                              for f in LABEL_FORMATS) + ("Random", "R1-rel", "EMPTY")
GROUP_SIZE_POLICIES = ("R1", "B4", "Random", "M1", "R1-rel", "BAL", "ALL", "EMPTY")
#: The social-proof sweep of chapter 6 needs only the ALL memory in its formats (unbudgeted).
SWEEP_POLICIES = tuple("ALL" if f == "full" else f"ALL:{f}" for f in LABEL_FORMATS)
#: The stochastic reference decider of chapter 7 (parameter recovery of the social-proof fit).
FIT_POLICIES = ("R1", "B4", "Random", "R1-rel", "ALL", "ALL:unlabeled", "ALL:shuffled", "EMPTY")
#: What a language-model sample runs (EMPTY and ALL give its headroom check).
MODEL_POLICIES = ("R1", "B4", "Random", "R1-rel", "R1-rel-oracle", "BAL", "BAL-oracle", "ALL", "ALL:unlabeled", "EMPTY")
#: The model sample rerun with the 'labels are not evidence' decision prompt (chapter 12).
LABELS_POLICIES = ("ALL", "ALL:unlabeled")
#: The rows of the book's accuracy heatmap.
HEATMAP_POLICIES = ("R1", "B4", "Random", "M1", "R1-rel", "R1-rel-oracle", "BAL", "BAL-oracle",
                    "R1-k7", "B4-k7", "Random-k7", "M1-k7", "R1-rel-k7",
                    "private-only", "shared-only", "ALL", "REF", "EMPTY")

#: The paper's full design for one model (``crossprofile run --preset paper``; ``run.plan.PAPER_DESIGN``): the 60
#: formal templates x 8 variants x 3 seeds, every policy and control of the paper's grid plus the generated
#: summary B3, the budgets of :data:`BUDGET_GRID`.
PAPER_DESIGN_GRID = {"templates": ("templates/formal",), "seeds": (0, 1, 2), "variants": VARIANT_NAMES,
                     "policies": DEFAULT_POLICIES + ("B3",), "budgets": BUDGET_GRID}
#: ``crossprofile run --preset NAME``: the grid options of a whole design (options given beside it override them).
PRESETS = {"paper": {k: list(v) for k, v in PAPER_DESIGN_GRID.items()}}

# --- labels ----------------------------------------------------------------------------------------

#: What every table and caption calls the ``ledger`` backend: a normative evidence counter, not a model.
REFERENCE = "reference decider"
