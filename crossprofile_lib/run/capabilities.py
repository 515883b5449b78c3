"""Which backend can run which policy: one table from a policy's needs to a backend's capabilities.

A policy declares what it needs (``Policy.needs``, :data:`crossprofile_lib.policies.NEEDS`) and where a needed
input comes from (``source``: ``model`` or ``oracle``); a backend declares its ``capabilities``
(:data:`crossprofile_lib.backends.base.CAPABILITIES`). :data:`NEED_CAPABILITY` maps one onto the other and
:func:`unsupported` answers "can this backend run these policies" for every caller (the CLI before anything runs,
the runner, HiddenBench, the pipeline: :func:`asks`). Without the capability: ``transcript`` always runs;
``relevance`` (``model-relevance``) and ``stances`` (``model-stances``) answer from the roles, except where model
inputs are required (HiddenBench); ``summarise`` (B3) cannot run. The oracle variants read the roles everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from crossprofile_lib.backends.base import MODEL_RELEVANCE, MODEL_STANCES, SUMMARISE
from crossprofile_lib.policies import PolicySpec, parse_policy


@dataclass(frozen=True)
class Requirement:
    """What one policy need asks of a backend."""

    capability: Optional[str]   # the capability that supplies it (None: the runner has it)
    model_source_only: bool     # only a policy whose ``source`` is ``model`` asks the backend
    oracle_fallback: bool       # without the capability the backend answers from the roles
    why: str                    # why a policy cannot run without it (``{base}``: the policy's base name)


#: need (``Policy.needs``) -> what it asks of a backend (see the module doc's table).
NEED_CAPABILITY: dict[str, Requirement] = {
    "transcript": Requirement(None, False, True, ""),
    "relevance": Requirement(MODEL_RELEVANCE, True, True, "{base} needs a model relevance filter (the backend has none)"),
    "stances": Requirement(MODEL_STANCES, True, True, "{base} needs a model stance call (the backend has none)"),
    "summarise": Requirement(SUMMARISE, False, False,
                             "{base} is a generated summary and needs a language-model backend (this one writes none)"),
}


def capabilities_of(backend) -> frozenset:
    """The declared capabilities of ``backend``: an instance, a class (nothing is loaded) or the set itself."""
    return frozenset(backend) if isinstance(backend, (set, frozenset)) else frozenset(backend.capabilities)


def _spec(p: str | PolicySpec) -> PolicySpec:
    return parse_policy(p) if isinstance(p, str) else p


def asks(spec: PolicySpec, capability: str, backend) -> bool:
    """Whether policy ``spec`` has ``backend`` do ``capability`` (it needs it and the backend has it)."""
    if capability not in capabilities_of(backend):
        return False
    return any(r.capability == capability and (spec.source == "model" or not r.model_source_only)
               for r in (NEED_CAPABILITY[n] for n in spec.needs))


def unsupported(policy_specs: Iterable[str | PolicySpec], backend, model_inputs: bool = False) -> dict[str, str]:
    """Policy name -> why ``backend`` cannot run it; empty when it can run them all.

    ``backend``: an instance, its class or its capabilities. ``model_inputs``: the caller has no roles to
    fall back on (HiddenBench), so a model-sourced relevance or stance need requires the capability."""
    caps = capabilities_of(backend)
    out = {}
    for s in map(_spec, policy_specs):
        for need in sorted(s.needs):
            r = NEED_CAPABILITY[need]
            if r.capability is None or r.capability in caps or (r.model_source_only and s.source != "model"):
                continue
            if r.oracle_fallback and not model_inputs:
                continue
            out[s.name] = r.why.format(base=s.base)
            break
    return out
