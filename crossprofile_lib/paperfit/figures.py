"""Which of the paper's published figures the reference decider can predict: an item of ``data/paper_figures.yaml``
whose ``data`` is ``crossprofile`` and whose ``measure`` (prereg.yaml's contrast language) has a decision outcome is
fitted; memory outcomes are parameter-free comparisons. A value counts for a model column only when the item names
that model; "models not separated" values are predicted, never fitted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Optional, Sequence

from crossprofile_lib.design import PRIMARY_BUDGET
from crossprofile_lib.paper_figures import PAPER_FIGURES_PATH, PaperItem, load_paper_figures
from crossprofile_lib.policies import parse_policy
from crossprofile_lib.stats.contrasts import Contrast, parse_prereg

DECISION_OUTCOMES = ("correct", "chose_decoy")
MEMORY_OUTCOMES = ("kept_support", "kept_decoy", "kept_irrelevant", "relevance_precision", "relevance_recall")
#: the paper's model columns, short names for tables
SHORT = {"Qwen2.5-7B-Instruct": "Qwen", "Llama-3.1-8B-Instruct": "Llama", "DeepSeek-V4.1-Flash": "Flash",
         "DeepSeek-V4-Pro": "Pro"}
#: paper-value keys that name no single model (predicted at every fit, never fitted)
NOT_SEPARATED = ("models not separated", "range over models")
MIN_FIGURES = 3   # a model column is fitted only with at least this many figures (3 parameters)
NOT_A_MODEL_RUN = "the reference decider fitted to the paper's published numbers; not a model run"


@dataclass(frozen=True)
class Figure:
    """One paper item with its measure parsed: ``contrast`` holds the outcome, scale and terms."""

    ref: str            # "<figure id>/<item label>"
    label: str
    unit: str
    paper: dict         # model -> value (numbers only)
    contrast: Contrast
    kind: str           # "decision" (fitted) or "memory" (parameter-free)
    note: str = ""
    n: Optional[int] = None   # the paper's decisions per term mean (60 templates x 3 seeds); None: not derivable

    @property
    def outcome(self) -> str:
        return self.contrast.outcome


def _parse(item: PaperItem) -> Contrast:
    doc = {"defaults": {"outcome": "correct", "scale": 100, "where": {"budget_label": PRIMARY_BUDGET}},
           "contrasts": [{"id": item.ref, **item.measure}]}
    return parse_prereg(doc, f"{PAPER_FIGURES_PATH} ({item.ref}: measure)").contrasts[0]


def select_figures(items: Optional[Sequence[PaperItem]] = None) -> list[Figure]:
    """The predictable (``kind='decision'``) and parameter-free (``kind='memory'``) items, in file order."""
    items = load_paper_figures() if items is None else items
    out = []
    for it in items:
        if it.data != "crossprofile" or not it.measure:
            continue
        c = _parse(it)
        kind = "decision" if c.outcome in DECISION_OUTCOMES else "memory" if c.outcome in MEMORY_OUTCOMES else None
        if kind is None:
            continue
        paper = {k: float(v) for k, v in it.paper.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if paper:
            out.append(Figure(it.ref, it.label, it.unit, paper, c, kind, it.note, it.n))
    return out


def model_columns(figures: Sequence[Figure], min_figures: int = MIN_FIGURES) -> list[str]:
    """Paper models with at least ``min_figures`` predictable figures (file order of first use)."""
    count = Counter(m for f in figures if f.kind == "decision" for m in f.paper if m not in NOT_SEPARATED)
    return [m for m, n in count.items() if n >= min_figures]


def short(model: str) -> str:
    return SHORT.get(model, model)


def needed_policies(figures: Sequence[Figure], all_policies: Sequence[str]) -> tuple[list[str], list[str]]:
    """The policies (of ``all_policies`` where a term names none) and budget labels the figures' terms can match."""
    pols, budgets = [], []
    for f in figures:
        for t in f.contrast.terms:
            w = t.where
            if "policy" in w:
                cand = w["policy"] if isinstance(w["policy"], list) else [w["policy"]]
            else:
                cand = [p for p in all_policies
                        if _ok(parse_policy(p).selection, w.get("selection")) and _ok(parse_policy(p).fmt, w.get("label_format"))]
            pols += [str(p) for p in cand if str(p) not in pols]
            b = w.get("budget_label")
            for x in (b if isinstance(b, list) else [b]) if b is not None else []:
                if str(x) != "none" and str(x) not in budgets:
                    budgets.append(str(x))
    return [p for p in pols if parse_policy(p).selection != "generated"], budgets


def _ok(value, want) -> bool:
    return want is None or value in (want if isinstance(want, list) else [want])
