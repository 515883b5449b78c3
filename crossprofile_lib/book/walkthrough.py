"""One task end to end, for reading rather than for statistics.

:func:`walkthrough` builds one template in one attribution variant for one seed with the
reference decider (no model calls): the holders, the scripted discussion, the claim list,
each policy's memory at one budget, and the decision. Chapter 1 draws eight of them as the
concept figure; chapter 10's explorer shows them. :func:`template_html` renders a template for
the catalogue of chapter 2.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Sequence

from crossprofile_lib.book.runs import resolve
from crossprofile_lib.design import PRIMARY_BUDGET
from crossprofile_lib.policies import WALK_POLICIES


@dataclass
class Walkthrough:
    """One template in one variant for one seed: who holds what, the scripted discussion,
    the claim list, each policy's memory at one budget and the reference decider's choice.

    Used by chapter 1's concept figure and chapter 10's explorer."""

    task: object
    transcript: object
    claims: object
    budget_tokens: int
    t_all: int
    policies: tuple
    memories: dict = field(default_factory=dict)
    decisions: dict = field(default_factory=dict)
    decider: str = ""
    tokenizer: str = ""
    social_proof: float = 0.0

    @property
    def agents(self) -> tuple[str, ...]:
        from crossprofile_lib.task.variants import agent_names
        return agent_names(self.task.n_agents)

    @property
    def facts_by_role(self) -> list:
        t = self.task.template
        return [f for role in ("support", "decoy", "irrelevant") for f in t.facts_by_role(role)]

    def kept_fact_ids(self, policy: str) -> set:
        return {c.fact_id for c in self.memories[policy].kept}

    def composition(self, policy: str):
        from crossprofile_lib.task.evidence import composition
        return composition(self.task, self.memories[policy])

    def html(self) -> str:
        """A static view (no JavaScript), the explorer's: the first policy's memory and decision
        in focus, the other policies, the scripted discussion and the claim list; a decision on a
        tied top score is shown as a tie (:mod:`crossprofile_lib.book.explorer`)."""
        from crossprofile_lib.book.explorer import Exploration
        return Exploration(self, self.policies[0], self.social_proof).html()

    def _repr_html_(self) -> str:  # renders itself in Jupyter
        return self.html()


def walkthrough(template, variant: str, seed: int = 0, budget: str = PRIMARY_BUDGET,
                policies: Sequence[str] = WALK_POLICIES, n_agents: int = 4, social_proof: float = 0.0) -> Walkthrough:
    """Build one task end to end with the reference decider (no model calls), through the
    pipeline (:mod:`crossprofile_lib.run.pipeline`)."""
    from crossprofile_lib.backends.ledger import ReferenceDecider
    from crossprofile_lib.rng import stream
    from crossprofile_lib.run.pipeline import build_task, memories, specs_of
    from crossprofile_lib.task.budgets import Budget
    from crossprofile_lib.task.decision import DecisionRequest
    dec = ReferenceDecider(social_proof=social_proof)
    u = build_task(template, variant, seed, n_agents, dec.tokenizer)
    task = u.task
    b = Budget.parse(budget)
    w = Walkthrough(task, u.transcript, u.claims, b.tokens(u.t_all), u.t_all, tuple(policies), decider=dec.model,
                    tokenizer=dec.tokenizer.name, social_proof=social_proof)
    for m in memories(u, specs_of(policies), [b], dec, task.task_id,
                      lambda spec, key: stream(seed, "policy", task.task_id, spec.name)):
        p = m.spec.name
        w.memories[p] = m.memory
        w.decisions[p] = dec.decide_one(DecisionRequest(task, m.memory, u.order, f"{task.task_id}/{p}"))
    return w


def find_template(template_id: str, paths: Sequence[str] = ("templates",)):
    from crossprofile_lib.task.templates import load_templates
    for t in load_templates([str(resolve(p)) for p in paths]):
        if t.id == template_id:
            return t
    raise KeyError(f"template '{template_id}' not found under {', '.join(map(str, paths))}")


def template_html(template, seed: int = 0, n_agents: int = 4) -> str:
    """One template rendered for the catalogue: task, options (key marked), criteria, and each
    fact with its role and its holders in the eight variants (seed ``seed``)."""
    from crossprofile_lib.task.discussion import make_task
    from crossprofile_lib.task.variants import VARIANT_NAMES
    esc = html.escape
    t = template
    tasks = {v: make_task(t, v, seed, n_agents) for v in VARIANT_NAMES}
    key = {t.correct_option: " (correct)", t.decoy_option: " (decoy)"}
    opts = "; ".join(f"<b>{esc(o.name)}</b>{key.get(o.id, ' (alternative)')}" for o in t.options)
    crit = "; ".join(esc(c.name) for c in t.criteria)
    head = "".join(f"<th>{v}</th>" for v in VARIANT_NAMES)
    rows = []
    for role in ("support", "decoy", "irrelevant"):
        for f in t.facts_by_role(role):
            hold = "".join(f"<td>{'all' if len(tasks[v].holders[f.id]) == n_agents else ','.join(tasks[v].holders[f.id])}"
                           f"</td>" for v in VARIANT_NAMES)
            rows.append(f"<tr><td>{f.id}</td><td><span class='cp-role cp-{role}'>{role}</span></td>"
                        f"<td>{esc(t.option(f.about).name)} {'+' if f.polarity > 0 else '−'}</td>"
                        f"<td>{esc(f.criterion or '–')}</td><td>{esc(f.text)}</td>{hold}</tr>")
    return (f"<p><b>{esc(t.title)}</b> <code>{esc(t.id)}</code> (domain: {esc(t.domain)}). {esc(t.description)}</p>"
            f"<p>Options: {opts}. Criteria (equal weight): {crit}.</p>"
            f"<table><tr><th>id</th><th>role</th><th>about</th><th>criterion</th><th>text</th>{head}</tr>"
            + "".join(rows) + "</table>"
            f"<p>Holders per variant for seed {seed} (<i>all</i> = shared by the {n_agents} agents). Roles, "
            "the key and the polarity column are never shown to any model.</p>")

