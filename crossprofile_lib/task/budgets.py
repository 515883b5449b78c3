"""Token budgets (SPEC section 5).

``B(r) = floor(r * T_all)``: ``T_all`` prices all facts of the template, each written with
all agents' labels (``[A1,A2,A3,A4] text``) plus its newline, so the budget is the same for
every attribution variant of a template. A line costs its tokens plus one newline; a memory
costs the sum of its lines. A fixed 128-token budget is the control.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from crossprofile_lib.task.discussion import label
from crossprofile_lib.task.templates import Template
from crossprofile_lib.task.variants import agent_names

FIXED_CONTROL_TOKENS = 128
NEWLINE = "\n"


@dataclass(frozen=True)
class Budget:
    """``ratio`` (e.g. 0.6) or a fixed token count (``ratio`` None)."""

    ratio: Optional[float]
    fixed_tokens: Optional[int] = None

    @classmethod
    def parse(cls, s: str | float) -> "Budget":
        """``0.6`` -> ratio budget; ``128t`` or ``t128`` -> fixed budget of 128 tokens."""
        s = str(s).strip()
        if s.endswith("t") or s.startswith("t"):
            return cls(None, int(s.strip("t")))
        r = float(s)
        if not 0 < r <= 1:
            raise ValueError(f"budget ratio {r} is not in (0, 1]")
        return cls(r)

    @property
    def label(self) -> str:
        return f"{self.fixed_tokens}t" if self.ratio is None else f"{self.ratio:g}"

    def tokens(self, t_all: int) -> int:
        return self.fixed_tokens if self.ratio is None else math.floor(self.ratio * t_all)


def line_cost(line: str, tokenizer) -> int:
    """Tokens of one memory line plus its newline."""
    return tokenizer.count(line) + tokenizer.count(NEWLINE)


def memory_tokens(text: str, tokenizer) -> int:
    """Tokens of a memory text: the sum of its lines' costs (0 for an empty memory)."""
    return sum(line_cost(ln, tokenizer) for ln in text.split(NEWLINE)) if text else 0


def t_all(template: Template, tokenizer, n_agents: int = 4) -> int:
    """Tokens of every fact written with all ``n_agents`` labels, one line each."""
    full = label(agent_names(n_agents))
    return sum(line_cost(f"{full} {f.text}", tokenizer) for f in template.facts)


def budget_tokens(template: Template, budget: Budget, tokenizer, n_agents: int = 4) -> int:
    return budget.tokens(t_all(template, tokenizer, n_agents))
