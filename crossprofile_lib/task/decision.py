"""The decision call's interface: every backend takes :class:`DecisionRequest` s (task, memory, options in the order
the prompt letters them: :func:`option_order`) and returns :class:`Decision` s; the reference decider's rule is in
:class:`crossprofile_lib.backends.ledger.ReferenceDecider`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from crossprofile_lib.design import LETTERS  # noqa: E402,F401
from crossprofile_lib.task.discussion import Task
from crossprofile_lib.task.memory import Memory


def option_order(task: Task) -> tuple[str, ...]:
    """Options in the order the decision prompt letters them: rotated by the seed."""
    ids = task.template.option_ids
    k = task.seed % len(ids)
    return ids[k:] + ids[:k]


@dataclass(frozen=True)
class DecisionRequest:
    task: Task
    memory: Memory
    option_order: tuple[str, ...]
    key: str  # unique within a run: task id / policy / budget


@dataclass(frozen=True)
class Decision:
    option: Optional[str]          # option id, None when invalid
    letter: Optional[str]
    invalid: bool = False
    raw: str = ""
    meta: dict = field(default_factory=dict)
