"""Relevance first (``R1-rel``, ``R1-rel-oracle``): the relevant tier, then the rest, R1 order inside each. The tiers
come from the backend's relevance filter (R1-rel) or the roles (:func:`oracle_relevance`); the runner scores the
model's against the oracle (:func:`relevance_metrics`).
"""

from __future__ import annotations

import math

from crossprofile_lib.policies.copy import order_r1
from crossprofile_lib.policies.registry import Policy, PolicyContext, register
from crossprofile_lib.task.discussion import ClaimList
from crossprofile_lib.task.evidence import oracle_relevance  # noqa: F401  (R1-rel-oracle's tiers)


def order_r1_rel(cl: ClaimList, ctx: PolicyContext) -> list[int]:
    """Relevance first: relevant tier, then the rest; R1 order inside tiers."""
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


NEEDS_RELEVANCE = frozenset({"relevance"})
register(Policy("R1-rel", "copy", "relevant tier first (model filter)", needs=NEEDS_RELEVANCE, source="model",
                order=order_r1_rel))
register(Policy("R1-rel-oracle", "copy", "relevant tier first (roles)", needs=NEEDS_RELEVANCE, source="oracle",
                order=order_r1_rel))
