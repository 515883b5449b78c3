"""Memory policies (SPEC section 6), registered by the names the paper uses.

A policy spec is ``BASE[-kK][:FORMAT]``:

* ``BASE`` a registered policy: the copy policies ``R1``, ``B4``, ``Random``, ``M1``,
  ``R1-rel`` (tiers from the backend's relevance filter), ``R1-rel-oracle`` (tiers from the
  roles), and the repair ``BAL`` / ``BAL-oracle`` (balance-aware, :mod:`balance`); the unbudgeted controls ``EMPTY``, ``ALL``, ``REF``; the reference memories
  ``private-only``, ``shared-only``; and ``B3`` (a generated summary; needs a model backend).
* ``-k7`` the fixed-k control: keep exactly the first 7 claims of the policy's priority
  order, whatever their cost (removes the "R1 fits more lines" confound).
* ``:FORMAT`` a provenance format (``full`` by default, ``unlabeled``, ``shuffled``,
  ``first-speaker``, ``claim-id``; see :mod:`provenance`). The kept set is chosen exactly as
  for ``full``; only the shown labels change.

Copy policies pack whole claim lines greedily first-fit in priority order (a line that does
not fit is skipped and the walk goes on); lines are priced as the paper's labelled lines.
Kept lines are shown in first-mention order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from .budgets import line_cost
from .discussion import Claim, ClaimList, Transcript
from .provenance import FORMATS, render_lines

FIXED_K_DEFAULT = 7


@dataclass(frozen=True)
class PolicyContext:
    rng: np.random.Generator
    relevant: Optional[frozenset[int]] = None  # claim indices judged relevant (R1-rel)
    stances: Optional[tuple] = None            # one balance.Stance per claim (BAL)


Ordering = Callable[[ClaimList, PolicyContext], list[int]]


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


def _tiered_r1(cl: ClaimList, relevant: frozenset[int]) -> list[int]:
    r1 = order_r1(cl, None)
    return [i for i in r1 if i in relevant] + [i for i in r1 if i not in relevant]


def order_r1_rel(cl: ClaimList, ctx: PolicyContext) -> list[int]:
    """Relevance first: relevant tier, then the rest; R1 order inside tiers."""
    if ctx.relevant is None:
        raise ValueError("R1-rel needs a relevance filter (the backend supplies one)")
    return _tiered_r1(cl, ctx.relevant)


def order_bal(cl: ClaimList, ctx: PolicyContext) -> list[int]:
    """Balance-aware: keep each option's pro/con proportions (see :mod:`balance`)."""
    from .balance import balanced_order
    if ctx.stances is None:
        raise ValueError("BAL needs stances (the backend's stance call, or the oracle for BAL-oracle)")
    return balanced_order(cl, ctx.stances)


ORDERINGS: dict[str, Ordering] = {
    "R1": order_r1,
    "B4": order_b4,
    "Random": order_random,
    "M1": order_m1,
    "R1-rel": order_r1_rel,
    "R1-rel-oracle": order_r1_rel,  # same ordering; the runner passes the oracle tiers
    "BAL": order_bal,
    "BAL-oracle": order_bal,        # same ordering; the runner passes the oracle stances
}
UNBUDGETED = ("EMPTY", "ALL", "REF", "private-only", "shared-only")
GENERATED = ("B3",)
BASES = tuple(ORDERINGS) + UNBUDGETED + GENERATED

#: The paper's grid (with the controls) in the order tables show them.
DEFAULT_POLICIES = ("R1", "B4", "Random", "M1", "R1-rel", "R1-rel-oracle",
                    "R1-k7", "B4-k7", "Random-k7", "M1-k7", "R1-rel-k7",
                    "ALL:unlabeled", "ALL:shuffled", "R1:unlabeled", "B4:unlabeled",
                    "EMPTY", "ALL", "REF", "private-only", "shared-only")

_SPEC = re.compile(r"^(?P<base>.+?)(?:-k(?P<k>\d+))?(?::(?P<fmt>[a-z-]+))?$")


@dataclass(frozen=True)
class PolicySpec:
    name: str
    base: str
    fixed_k: Optional[int] = None
    fmt: str = "full"

    @property
    def budgeted(self) -> bool:
        return self.base in ORDERINGS and self.fixed_k is None or self.base in GENERATED

    @property
    def uses_rng(self) -> bool:
        """Whether building this memory draws random numbers (a seeded order or shuffled labels)."""
        return self.base == "Random" or self.fmt == "shuffled" or self.base in GENERATED

    @property
    def selection(self) -> str:
        if self.base in GENERATED:
            return "generated"
        if self.base in UNBUDGETED:
            return "unbudgeted"
        return "fixed-k" if self.fixed_k is not None else "budget"


def parse_policy(spec: str) -> PolicySpec:
    m = _SPEC.match(spec.strip())
    if not m or m.group("base") not in BASES:
        raise ValueError(f"unknown policy '{spec}' (bases: {', '.join(BASES)}; "
                         f"suffixes -kN and :FORMAT with FORMAT in {', '.join(FORMATS)})")
    base, k, fmt = m.group("base"), m.group("k"), m.group("fmt") or "full"
    if fmt not in FORMATS:
        raise ValueError(f"policy '{spec}': unknown provenance format '{fmt}' (known: {', '.join(FORMATS)})")
    if k is not None and base not in ORDERINGS:
        raise ValueError(f"policy '{spec}': fixed-k applies to copy policies only ({', '.join(ORDERINGS)})")
    return PolicySpec(spec.strip(), base, int(k) if k is not None else None, fmt)


@dataclass(frozen=True)
class Memory:
    """What the decision call sees, and which claims it holds."""

    policy: str
    kind: str                      # 'claims', 'transcript', 'summary' or 'empty'
    kept: tuple[Claim, ...]        # in first-mention order
    revealed: tuple[int, ...]      # speakers each kept line reveals (social proof)
    text: str
    tokens: int
    truncated: bool = False
    meta: dict = field(default_factory=dict)

    @property
    def n_kept(self) -> int:
        return len(self.kept)


def pack(cl: ClaimList, order: Sequence[int], budget: int, tokenizer) -> list[int]:
    """Greedy first-fit: walk ``order``; keep a claim if its labelled line still fits."""
    used, kept = 0, []
    for i in order:
        c = line_cost(cl.claims[i].line(), tokenizer)
        if used + c <= budget:
            kept.append(i)
            used += c
    return kept


def _claims_memory(spec: PolicySpec, cl: ClaimList, idx: Sequence[int], tokenizer,
                   rng: np.random.Generator) -> Memory:
    kept = tuple(cl.claims[i] for i in sorted(idx, key=lambda i: cl.claims[i].first_mention))
    rendered = render_lines(kept, spec.fmt, rng)
    lines = [t for t, _ in rendered]
    tokens = sum(line_cost(t, tokenizer) for t in lines)
    kind = "claims" if kept else "empty"
    return Memory(spec.name, kind, kept, tuple(n for _, n in rendered), "\n".join(lines), tokens)


def select_memory(spec: PolicySpec | str, cl: ClaimList, budget: Optional[int], tokenizer,
                  rng: np.random.Generator, transcript: Optional[Transcript] = None,
                  relevant: Optional[frozenset[int]] = None, stances: Optional[tuple] = None) -> Memory:
    """Build the memory ``spec`` keeps from the claim list ``cl`` (all policies but B3)."""
    spec = parse_policy(spec) if isinstance(spec, str) else spec
    b = spec.base
    if b == "EMPTY":
        return Memory(spec.name, "empty", (), (), "", 0)
    if b == "ALL":
        return _claims_memory(spec, cl, range(len(cl)), tokenizer, rng)
    if b == "private-only":
        return _claims_memory(spec, cl, [i for i, c in enumerate(cl.claims) if c.count == 1], tokenizer, rng)
    if b == "shared-only":
        return _claims_memory(spec, cl, [i for i, c in enumerate(cl.claims) if c.count > 1], tokenizer, rng)
    if b == "REF":
        if transcript is None:
            raise ValueError("REF needs the transcript")
        text = transcript.render()
        tokens = sum(line_cost(ln, tokenizer) for ln in text.split("\n")) if text else 0
        return Memory(spec.name, "transcript", tuple(cl.claims), tuple(c.count for c in cl.claims), text, tokens)
    if b in GENERATED:
        raise ValueError(f"{b} is a generated summary: it needs a model backend, not the reference decider")
    order = ORDERINGS[b](cl, PolicyContext(rng, relevant, stances))
    if spec.fixed_k is not None:
        idx = order[:spec.fixed_k]
    elif budget is None:
        raise ValueError(f"policy '{spec.name}' needs a token budget")
    elif b in ("BAL", "BAL-oracle"):
        from .balance import pack_balanced  # packs by deficit, not first-fit (see balance)
        idx = pack_balanced(cl, stances, budget, tokenizer)
    else:
        idx = pack(cl, order, budget, tokenizer)
    return _claims_memory(spec, cl, idx, tokenizer, rng)
