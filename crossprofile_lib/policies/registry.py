"""The policy registry: one :class:`Policy` per base name (kind ``copy``, ``unbudgeted`` or ``generated``, and what it
**needs** from the caller, :data:`NEEDS`) and the spec grammar ``BASE[-kK][:FORMAT]`` (the policy lists live in
:mod:`crossprofile_lib.design`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from crossprofile_lib.task.provenance import FORMATS

#: What a policy may need from its caller: ``transcript`` (REF), ``relevance`` (R1-rel tiers),
#: ``stances`` (BAL), ``summarise`` (B3: a callable that sends one prompt to a model).
NEEDS = ("transcript", "relevance", "stances", "summarise")


@dataclass(frozen=True)
class PolicyContext:
    """What an ordering reads besides the claim list."""

    rng: Optional[np.random.Generator]
    relevant: Optional[frozenset[int]] = None  # claim indices judged relevant (R1-rel)
    stances: Optional[tuple] = None            # one evidence.Stance per claim (BAL)


@dataclass(frozen=True)
class Policy:
    """A registered memory policy: copy policies give ``order(claims, ctx)`` and optionally ``packer(claims, order,
    budget, tokenizer, ctx)`` (default greedy first-fit), the others ``build(spec, inputs)``; ``source``: where a
    needed input comes from, ``model`` (the backend) or ``oracle`` (the roles: the control isolating model errors)."""

    name: str
    kind: str
    doc: str = ""
    needs: frozenset = frozenset()
    source: str = ""
    random: bool = False
    order: Optional[Callable] = None
    packer: Optional[Callable] = None
    build: Optional[Callable] = None

    def __post_init__(self):
        if self.kind not in ("copy", "unbudgeted", "generated"):
            raise ValueError(f"policy {self.name}: kind '{self.kind}' is not copy, unbudgeted or generated")
        unknown = set(self.needs) - set(NEEDS)
        if unknown:
            raise ValueError(f"policy {self.name}: unknown needs {sorted(unknown)} (known: {', '.join(NEEDS)})")


REGISTRY: dict[str, Policy] = {}


def register(policy: Policy) -> Policy:
    if policy.name in REGISTRY:
        raise ValueError(f"policy '{policy.name}' is registered twice")
    REGISTRY[policy.name] = policy
    return policy


def bases() -> tuple[str, ...]:
    return tuple(REGISTRY)


#: Called with a base name the registry does not know; one returns True when it registered it (the
#: plug-in loader, :mod:`.plugins`, loads the installed packages' policies this way).
UNKNOWN_BASE_HOOKS: list[Callable[[str], bool]] = []


# --- specs -------------------------------------------------------------------------------------

_SPEC = re.compile(r"^(?P<base>.+?)(?:-k(?P<k>\d+))?(?::(?P<fmt>[a-z-]+))?$")


@dataclass(frozen=True)
class PolicySpec:
    name: str
    base: str
    fixed_k: Optional[int] = None
    fmt: str = "full"
    policy: Optional[Policy] = field(default=None, compare=False, repr=False)

    def _pol(self) -> Policy:
        return self.policy or REGISTRY[self.base]

    @property
    def needs(self) -> frozenset:
        return self._pol().needs

    @property
    def source(self) -> str:
        return self._pol().source

    @property
    def budgeted(self) -> bool:
        kind = self._pol().kind
        return kind == "copy" and self.fixed_k is None or kind == "generated"

    @property
    def uses_rng(self) -> bool:
        """Whether building this memory draws random numbers (a seeded order or shuffled labels)."""
        return self._pol().random or self.fmt == "shuffled"

    @property
    def selection(self) -> str:
        kind = self._pol().kind
        if kind != "copy":
            return kind  # generated, unbudgeted
        return "fixed-k" if self.fixed_k is not None else "budget"


def parse_policy(spec: str) -> PolicySpec:
    m = _SPEC.match(spec.strip())
    if m and m.group("base") not in REGISTRY:
        for hook in UNKNOWN_BASE_HOOKS:
            if hook(m.group("base")):
                break
    if not m or m.group("base") not in REGISTRY:
        raise ValueError(f"unknown policy '{spec}' (bases: {', '.join(bases())}; "
                         f"suffixes -kN and :FORMAT with FORMAT in {', '.join(FORMATS)})")
    base, k, fmt = m.group("base"), m.group("k"), m.group("fmt") or "full"
    if fmt not in FORMATS:
        raise ValueError(f"policy '{spec}': unknown provenance format '{fmt}' (known: {', '.join(FORMATS)})")
    if k is not None and REGISTRY[base].kind != "copy":
        copies = ", ".join(n for n, p in REGISTRY.items() if p.kind == "copy")
        raise ValueError(f"policy '{spec}': fixed-k applies to copy policies only ({copies})")
    if k is not None and int(k) < 1:
        raise ValueError(f"policy '{spec.strip()}': a fixed-k policy keeps at least 1 claim (e.g. {base}-k7)")
    return PolicySpec(spec.strip(), base, int(k) if k is not None else None, fmt, REGISTRY[base])
