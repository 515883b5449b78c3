"""Controlled HiddenBench (SPEC section 9): the scripted discussion on HiddenBench tasks, one claim per fact with its
``fact_id``. The format has no polarities, so the ``ledger`` decides nothing (``decided = False``) and reports what
each memory kept; ``R1-rel-oracle`` treats every fact as relevant (it equals R1 here).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from crossprofile_lib.hiddenbench.common import (
    PolicyPlan,
    build_memories,
    decide,
    decision_columns,
    fact_ids,
    task_view,
)
from crossprofile_lib.hiddenbench.importer import HiddenBenchTask
from crossprofile_lib.rng import stream
from crossprofile_lib.task.discussion import Transcript, Utterance, claim_list_from_utterances
from crossprofile_lib.task.variants import agent_names


def scripted_discussion(task: HiddenBenchTask, seed: int) -> Transcript:
    """Seeded speaker order; each speaker states its facts (shared + its hidden one) in a seeded order."""
    rng = stream(seed, "hb-controlled", task.id)
    agents = agent_names(task.n_agents)
    sids, hids = fact_ids(task)
    order = tuple(agents[i] for i in rng.permutation(len(agents)))
    utterances = []
    for speaker in order:
        k = agents.index(speaker)
        held = list(zip(sids, task.shared)) + [(hids[k], task.hidden[k])]
        for j in rng.permutation(len(held)):
            fid, text = held[j]
            utterances.append(Utterance(len(utterances), speaker, text, fid))
    return Transcript(order, tuple(utterances))


def run_controlled_chunk(units: Sequence[tuple[HiddenBenchTask, int]], plan: PolicyPlan, budgets: Sequence[str],
                         backend, base_columns: dict) -> Iterable[dict]:
    """Run ``(task, seed)`` units (one decision batch); yield one artefact record per unit, rows included."""
    staged = []
    for task, seed in units:
        view = task_view(task, seed)
        tr = scripted_discussion(task, seed)
        cl = claim_list_from_utterances(tr.utterances, tr.speaker_order, agent_names(task.n_agents))
        pairs = list(build_memories(view, cl, tr, plan, budgets, backend, view.task_id, by_ids=True))
        staged.append((task, seed, tr, cl, pairs))
    flat = [req for *_, pairs in staged for req, _ in pairs]
    decisions = decide(backend, flat)
    it = iter(decisions) if decisions is not None else None
    for task, seed, tr, cl, pairs in staged:
        rows, memories = [], []
        for req, row in pairs:
            d = next(it) if it is not None else None
            text = row.pop("memory_text")
            dc = decision_columns(task, req, d, row.pop("error"))
            memories.append(dict(policy=row["policy"], budget=row["budget_label"], text=text,
                                 tokens=row["memory_tokens"], kept=[c.fact_id for c in req.memory.kept],
                                 decision=(d.letter if d else None), raw=(d.raw if d else None), error=dc["error"]))
            rows.append(dict(base_columns, protocol="controlled", task_id=task.id, task_name=task.name,
                             n_agents=task.n_agents, n_options=task.n_options, n_shared=len(task.shared),
                             seed=seed, ablation="scripted", **row, **dc))
        yield dict(protocol="controlled", task_id=task.id, seed=seed, ablation="scripted",
                   errors=sum(1 for r in rows if r["error"]),
                   artefacts=dict(speaker_order=list(tr.speaker_order),
                                  transcript=[dict(speaker=u.speaker, text=u.text, fact_id=u.fact_id)
                                              for u in tr.utterances],
                                  claims=[dict(text=c.text, speakers=list(c.speakers), fact_id=c.fact_id,
                                               first_mention=c.first_mention) for c in cl.claims],
                                  memories=memories),
                   rows=dict(decisions=rows))
