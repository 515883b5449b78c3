"""Token budgets (SPEC section 5): ``B(r) = floor(r * T_all)``, ``T_all`` pricing every fact with all agents'
labels (``[A1,A2,A3,A4] text``) plus its newline (the same for every variant). A line costs its tokens plus one
newline; a memory the sum of its lines. ``128t`` is the fixed control (parsed into ``config.Budget``).
"""

from __future__ import annotations

from crossprofile_lib.config import Budget  # noqa: F401  (the one budget type; re-exported)
from crossprofile_lib.task.discussion import label
from crossprofile_lib.task.templates import Template
from crossprofile_lib.task.variants import agent_names

NEWLINE = "\n"


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
    """``B(r)`` of ``template`` in tokens."""
    return budget.tokens(t_all(template, tokenizer, n_agents))
