"""R1-rel's mechanism: what strict relevance tiering keeps with a seeded filter that errs at a given precision and recall
(:func:`noisy_filter`, :func:`tiering_compositions`; ``relevance-filter``). Exploratory, not a model result.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from crossprofile_lib.policies import parse_policy, select_memory
from crossprofile_lib.rng import stream
from crossprofile_lib.run.pipeline import task_units
from crossprofile_lib.task.budgets import Budget
from crossprofile_lib.task.evidence import composition, oracle_relevance


def noisy_filter(truth: frozenset[int], n_claims: int, precision: float, recall: float,
                 rng: np.random.Generator) -> frozenset[int]:
    """Claims judged relevant by a filter of expected ``recall`` and (about) ``precision``: each claim in ``truth`` is
    kept with probability ``recall``, each other let in with ``q = |truth| * recall * (1 - precision) /
    (precision * n_other)`` (at most 1), so the expected false positives are ``TP * (1 - precision) / precision``."""
    if not (0 < precision <= 1 and 0 <= recall <= 1):
        raise ValueError("precision must be in (0, 1] and recall in [0, 1]")
    other = [i for i in range(n_claims) if i not in truth]
    rel = sorted(truth)
    keep = rng.random(len(rel)) < recall
    q = min(1.0, len(rel) * recall * (1 - precision) / (precision * len(other))) if other else 0.0
    let_in = rng.random(len(other)) < q
    return frozenset([i for i, k in zip(rel, keep) if k] + [j for j, k in zip(other, let_in) if k])


def tiering_compositions(templates, tokenizer, precision: float, recall: float, *, variants: Sequence[str] = ("PSP",),
                         seeds: Sequence[int] = (0, 1, 2), budget: str = "0.6", draws: int = 20,
                         n_agents: int = 4, seed: int = 0) -> pd.DataFrame:
    """One row per (template, variant, seed, draw): the kept support / decoy / irrelevant counts
    of R1-rel with a :func:`noisy_filter` at ``precision`` / ``recall``, and the filter's realised
    precision and recall. ``draws`` filters per task, each from a seeded stream."""
    spec, b = parse_policy("R1-rel"), Budget.parse(budget)
    rows = []
    for u in task_units(templates, variants, seeds, n_agents, tokenizer):
        truth = oracle_relevance(u.claims, u.task)
        btok = b.tokens(u.t_all)
        for d in range(draws):
            rng = stream(seed, "noisy-filter", u.task.task_id, precision, recall, d)
            rel = noisy_filter(truth, len(u.claims), precision, recall, rng)
            mem = select_memory(spec, u.claims, btok, tokenizer, None, relevant=rel)
            c = composition(u.task, mem)
            tp = len(rel & truth)
            rows.append(dict(template_id=u.task.template.id, variant=u.task.variant.name, seed=u.task.seed,
                             draw=d, precision=precision, recall=recall, kept_support=c.kept_support,
                             kept_decoy=c.kept_decoy, kept_irrelevant=c.kept_irrelevant,
                             realised_precision=tp / len(rel) if rel else np.nan,
                             realised_recall=tp / len(truth) if truth else np.nan))
    return pd.DataFrame(rows)


def tiering_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean kept composition and realised filter quality per (precision, recall)."""
    cols = ["kept_support", "kept_decoy", "kept_irrelevant", "realised_precision", "realised_recall"]
    return df.groupby(["precision", "recall"])[cols].mean().reset_index()
