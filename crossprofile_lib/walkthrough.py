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

from .book import REFERENCE, resolve
from .constants import PRIMARY_BUDGET
from .policies import WALK_POLICIES


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

    @property
    def agents(self) -> tuple[str, ...]:
        from .variants import agent_names
        return agent_names(self.task.n_agents)

    @property
    def facts_by_role(self) -> list:
        t = self.task.template
        return [f for role in ("support", "decoy", "irrelevant") for f in t.facts_by_role(role)]

    def kept_fact_ids(self, policy: str) -> set:
        return {c.fact_id for c in self.memories[policy].kept}

    def composition(self, policy: str):
        from .evidence import composition
        return composition(self.task, self.memories[policy])

    def html(self) -> str:
        """A static view: transcript, claim list, each memory and the decision (no JavaScript)."""
        t = self.task.template
        role = {f.id: f.role for f in t.facts}
        esc = html.escape
        tr = "".join(f"<li><b>{esc(u.speaker)}</b>: {esc(u.text)} <span class='cp-role cp-{role[u.fact_id]}'>"
                     f"{role[u.fact_id]}</span></li>" for u in self.transcript.utterances)
        cl = "".join(f"<tr><td>{c.first_mention + 1}</td><td>{esc(','.join(c.speakers))}</td><td>{c.count}</td>"
                     f"<td>{esc(c.text)}</td><td>{role[c.fact_id]}</td></tr>" for c in self.claims.claims)
        mem = []
        for p in self.policies:
            m, d = self.memories[p], self.decisions[p]
            c = self.composition(p)
            verdict = ("correct" if d.option == t.correct_option else
                       "decoy" if d.option == t.decoy_option else "third option")
            mem.append(f"<details><summary><b>{esc(p)}</b>: keeps {c.kept_support} support / {c.kept_decoy} decoy / "
                       f"{c.kept_irrelevant} irrelevant ({m.tokens} of {self.budget_tokens} tokens); net lead "
                       f"{c.net_lead:+d}; {REFERENCE} chooses <b>{esc(t.option(d.option).name)}</b> ({verdict})"
                       f"</summary><pre>{esc(m.text) or '(empty memory)'}</pre></details>")
        return (f"<p><b>{esc(t.title)}</b> ({esc(t.id)}), variant <b>{self.task.variant.name}</b>, seed "
                f"{self.task.seed}; correct option <b>{esc(t.option(t.correct_option).name)}</b>, decoy option "
                f"<b>{esc(t.option(t.decoy_option).name)}</b> (roles are never shown to a model). "
                f"Budget {self.budget_tokens} of T_all = {self.t_all} tokens. Decisions by the {REFERENCE} "
                f"({esc(self.decider)}).</p>"
                f"<details><summary>Scripted discussion ({len(self.transcript.utterances)} lines, speaker order "
                f"{', '.join(self.transcript.speaker_order)})</summary><ol>{tr}</ol></details>"
                f"<details><summary>Claim list ({len(self.claims)} claims)</summary><table><tr><th>first</th>"
                f"<th>speakers</th><th>n</th><th>text</th><th>role</th></tr>{cl}</table></details>"
                + "".join(mem))


def walkthrough(template, variant: str, seed: int = 0, budget: str = PRIMARY_BUDGET,
                policies: Sequence[str] = WALK_POLICIES, n_agents: int = 4, social_proof: float = 0.0) -> Walkthrough:
    """Build one task end to end with the reference decider (no model calls), through the
    pipeline (:mod:`crossprofile_lib.pipeline`)."""
    from .backends.ledger import ReferenceDecider
    from .budgets import Budget
    from .decider import DecisionRequest
    from .pipeline import build_task, memories, specs_of
    from .rng import stream
    dec = ReferenceDecider(social_proof=social_proof)
    u = build_task(template, variant, seed, n_agents, dec.tokenizer)
    task = u.task
    b = Budget.parse(budget)
    w = Walkthrough(task, u.transcript, u.claims, b.tokens(u.t_all), u.t_all, tuple(policies), decider=dec.model,
                    tokenizer=dec.tokenizer.name)
    for m in memories(u, specs_of(policies), [b], dec, task.task_id,
                      lambda spec, key: stream(seed, "policy", task.task_id, spec.name)):
        p = m.spec.name
        w.memories[p] = m.memory
        w.decisions[p] = dec.decide_one(DecisionRequest(task, m.memory, u.order, f"{task.task_id}/{p}"))
    return w


def find_template(template_id: str, paths: Sequence[str] = ("templates",)):
    from .templates import load_templates
    for t in load_templates([str(resolve(p)) for p in paths]):
        if t.id == template_id:
            return t
    raise KeyError(f"template '{template_id}' not found under {', '.join(map(str, paths))}")


def template_html(template, seed: int = 0, n_agents: int = 4) -> str:
    """One template rendered for the catalogue: task, options (key marked), criteria, and each
    fact with its role and its holders in the eight variants (seed ``seed``)."""
    from .discussion import make_task
    from .variants import VARIANT_NAMES
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

