"""The rules a memory policy of your own must keep (:mod:`.plugins`): :func:`select_memory` checks every order and
memory of a plug-in policy (:data:`PLUGINS`) with :func:`check_order` / :func:`check_memory`, raising
:class:`PolicyFileError` naming the file (rule ``trial`` while loading, ``memory`` during a run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


class PolicyFileError(ValueError):
    """A policy file (or module, or entry point) breaks a rule; ``str()`` names it and the rule."""

    def __init__(self, source: str, rule: str, message: str):
        self.source, self.rule = str(source), rule
        super().__init__(f"{source}: {rule}: {message}")


@dataclass(frozen=True)
class PolicySource:
    """Where plug-in policies came from: ``origin`` ``file``, ``module`` or ``entry point``."""

    origin: str
    spec: str            # what was given: the path, ``module:object`` or ``dist:entry-point``
    path: str            # the Python file it read (resolved)
    sha256: str          # of that file's bytes
    policies: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"origin": self.origin, "spec": self.spec, "path": self.path, "sha256": self.sha256,
                "policies": list(self.policies)}


#: policy name -> its source (plug-ins only)
PLUGINS: dict[str, PolicySource] = {}
#: whether the loader's trial is running (the rule an error names: ``trial`` or ``memory``)
TRIAL = [False]


# --- the checks on what a policy returns -------------------------------------------------------

def check_order(name: str, order, n: int) -> list[int]:
    """A copy policy's order (or packer's kept list): claim indices in ``0..n-1``, none twice."""
    try:
        idx = list(order)
    except TypeError:
        raise ValueError(f"policy '{name}' returned {type(order).__name__}, not a list of claim indices") from None
    out = []
    for i in idx:
        if isinstance(i, bool) or not isinstance(i, (int,)) and not hasattr(i, "__index__"):
            raise ValueError(f"policy '{name}' returned {i!r}, not a claim index (an integer 0..{n - 1})")
        i = int(i)
        if not 0 <= i < n:
            raise ValueError(f"policy '{name}' returned claim {i}, which does not exist "
                             f"(the claim list has {n} claims: 0..{n - 1})")
        out.append(i)
    if len(set(out)) < len(out):
        raise ValueError(f"policy '{name}' returned a claim index twice ({out})")
    return out


def check_memory(spec, memory, cl, budget: Optional[int]) -> None:
    """The memory a plug-in policy built keeps claims of ``cl`` only, each once, and a budgeted one stays
    within ``budget`` tokens. Raises :class:`PolicyFileError` naming the policy's file."""
    src = PLUGINS.get(spec.base)
    label = src.spec if src else spec.base
    claims = set(cl.claims)
    try:
        for c in memory.kept:
            if c not in claims:
                raise ValueError(f"policy '{spec.name}' kept a claim that is not in the claim list: {c!r:.120}")
        if len(set(memory.kept)) < len(memory.kept):
            raise ValueError(f"policy '{spec.name}' kept a claim twice")
        if spec.budgeted and budget is not None and memory.tokens > budget:
            raise ValueError(f"policy '{spec.name}' built a memory of {memory.tokens} tokens, over its budget of "
                             f"{budget} tokens")
    except ValueError as e:
        raise PolicyFileError(label, "trial" if TRIAL[0] else "memory", str(e)) from None
