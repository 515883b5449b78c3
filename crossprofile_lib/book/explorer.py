"""One task end to end, for reading and for the classroom (chapters 1, 3 and 10): :func:`walkthrough`, :func:`explore`,
:func:`controls` (ipywidgets), :func:`exercises` and :func:`variant_views`. A **tie** (top score shared) is never
shown as "correct" (:func:`verdict`, :func:`outcome`)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import pandas as pd

from crossprofile_lib.backends.ledger import ReferenceDecider
from crossprofile_lib.book.display import HTML, admonition, details
from crossprofile_lib.book.runs import REFERENCE, resolve
from crossprofile_lib.design import BUDGET_GRID, CLASSIC, MIRROR, PRIMARY_BUDGET, VARIANT_NAMES
from crossprofile_lib.policies import WALK_POLICIES
from crossprofile_lib.policies.plugins import PLUGINS  # policies of your own (POLICY_FILES) join the dropdown
from crossprofile_lib.rng import stream
from crossprofile_lib.run.pipeline import build_task, memories, specs_of
from crossprofile_lib.task.budgets import Budget
from crossprofile_lib.task.decision import DecisionRequest, option_order
from crossprofile_lib.task.evidence import composition
from crossprofile_lib.task.templates import load_templates
from crossprofile_lib.task.variants import agent_names


@dataclass
class Walkthrough:
    """One template, variant and seed: holders, discussion, claim list, each policy's memory and the decision."""

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
        return agent_names(self.task.n_agents)

    @property
    def facts_by_role(self) -> list:
        t = self.task.template
        return [f for role in ("support", "decoy", "irrelevant") for f in t.facts_by_role(role)]

    def kept_fact_ids(self, policy: str) -> set:
        return {c.fact_id for c in self.memories[policy].kept}

    def composition(self, policy: str):
        return composition(self.task, self.memories[policy])

    def html(self) -> str:
        """A static view: the first policy in focus, the others, the discussion and claim list (ties shown)."""
        return Exploration(self, self.policies[0], self.social_proof).html()

    _repr_html_ = html  # renders itself in Jupyter


def walkthrough(template, variant: str, seed: int = 0, budget: str = PRIMARY_BUDGET,
                policies: Sequence[str] = WALK_POLICIES, n_agents: int = 4, social_proof: float = 0.0) -> Walkthrough:
    """Build one task end to end with the reference decider (no model calls)."""
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
    t = templates_by_id(paths).get(template_id)
    if t is None:
        raise KeyError(f"template '{template_id}' not found under {', '.join(map(str, paths))}")
    return t


@dataclass(frozen=True)
class Verdict:
    """The option the reference decider chose and ``tied`` (the options sharing the top score; a seeded draw)."""

    option: str
    tied: tuple[str, ...]
    scores: Mapping[str, float]

    def word(self, template) -> str:
        if len(self.tied) > 1:
            n = [template.option(o).name for o in self.tied]
            return f"tie between {', '.join(n[:-1])} and {n[-1]}, drawn by a seeded coin: not a win"
        return ("correct" if self.option == template.correct_option else
                "decoy" if self.option == template.decoy_option else "third option")


def outcome(view, policy: str) -> str:
    """``correct``, ``decoy``, ``third option``, or ``tie`` when the top score was shared."""
    v = verdict(view, policy, getattr(view, "social_proof", 0.0))
    return "tie" if len(v.tied) > 1 else v.word(view.task.template)


def verdict(view, policy: str, social_proof: float) -> Verdict:
    """Score ``view``'s memory of ``policy`` as the reference decider does and name any tie."""
    order = option_order(view.task)
    s = ReferenceDecider(social_proof=social_proof).option_scores(view.task, view.memories[policy], order)
    top = max(s)
    tied = tuple(o for o, v in zip(order, s) if abs(v - top) <= 1e-9)
    return Verdict(view.decisions[policy].option, tied, dict(zip(order, (float(v) for v in s))))


def _cell(variant: str) -> str:
    return {CLASSIC: " (classic cell)", MIRROR: " (mirror cell)"}.get(variant, "")


@dataclass
class Exploration:
    """One task end to end with one policy in focus; renders itself in Jupyter."""

    view: object
    policy: str
    social_proof: float

    @property
    def template(self):
        return self.view.task.template

    def verdicts(self) -> dict[str, Verdict]:
        return {p: verdict(self.view, p, self.social_proof) for p in self.view.policies}

    def _memory(self, p: str, v: Verdict, open_: bool) -> str:
        t, esc = self.template, html.escape
        m, c = self.view.memories[p], self.view.composition(p)
        scores = ", ".join(f"{esc(t.option(o).name)} {s:+g}" for o, s in v.scores.items())
        return (f"<details class='cp-memory' data-policy='{esc(p)}'{' open' if open_ else ''}><summary><b>{esc(p)}</b>: "
                f"keeps {c.kept_support} support / {c.kept_decoy} decoy / {c.kept_irrelevant} irrelevant "
                f"({m.tokens} of {self.view.budget_tokens} tokens); net lead {c.net_lead:+d}; the {REFERENCE} chooses "
                f"<b>{esc(t.option(v.option).name)}</b> (<span class='cp-verdict'>{esc(v.word(t))}</span>)</summary>"
                f"<p>Scores: {scores}.</p><pre>{esc(m.text) or '(empty memory)'}</pre></details>")

    def html(self) -> str:
        """Static HTML: task, the focused policy's memory and decision, the others, discussion and claims."""
        w, t, esc = self.view, self.template, html.escape
        role = {f.id: f.role for f in t.facts}
        vs = self.verdicts()
        tr = "".join(f"<li><b>{esc(u.speaker)}</b>: {esc(u.text)} <span class='cp-role cp-{role[u.fact_id]}'>"
                     f"{role[u.fact_id]}</span></li>" for u in w.transcript.utterances)
        cl = "".join(f"<tr><td>{c.first_mention + 1}</td><td>{esc(','.join(c.speakers))}</td><td>{c.count}</td>"
                     f"<td>{esc(c.text)}</td><td>{role[c.fact_id]}</td></tr>" for c in w.claims.claims)
        others = "".join(self._memory(p, vs[p], False) for p in w.policies if p != self.policy)
        var = w.task.variant
        return (f"<div class='cp-explorer-view' data-variant='{var.name}' data-policy='{esc(self.policy)}'>"
                f"<p><b>{esc(t.title)}</b> ({esc(t.id)}), variant <b>{var.name}</b>{_cell(var.name)}: support "
                f"{var.support_attr}, decoy {var.decoy_attr}, irrelevant {var.irrelevant_attr}; seed {w.task.seed}; "
                f"budget {w.budget_tokens} of T_all = {w.t_all} tokens; social-proof weight {self.social_proof:g}. "
                f"Correct option <b>{esc(t.option(t.correct_option).name)}</b>, decoy option "
                f"<b>{esc(t.option(t.decoy_option).name)}</b> (roles are never shown to a model). Decisions by the "
                f"{REFERENCE} ({esc(w.decider)}), a normative evidence counter, not a language model.</p>"
                + self._memory(self.policy, vs[self.policy], True)
                + f"<details><summary>The other policies</summary>{others}</details>"
                f"<details><summary>Scripted discussion ({len(w.transcript.utterances)} lines, speaker order "
                f"{', '.join(w.transcript.speaker_order)})</summary><ol>{tr}</ol></details>"
                f"<details><summary>Claim list ({len(w.claims)} claims)</summary><div class='cp-scroll'><table>"
                f"<tr><th>first</th><th>speakers</th><th>n</th><th>text</th><th>role</th></tr>{cl}</table></div>"
                "</details></div>")

    _repr_html_ = html


def explore(template, variant: str = CLASSIC, policy: str = "R1", budget: str = PRIMARY_BUDGET,
            social_proof: float = 0.0, seed: int = 0, policies: Optional[Sequence[str]] = None) -> Exploration:
    """One task end to end with ``policy`` in focus (``template``: a Template or a template id)."""
    if isinstance(template, str):
        template = find_template(template)
    pols = tuple(policies or WALK_POLICIES)
    if policy not in pols:
        pols = (policy, *pols)
    view = walkthrough(template, variant, seed=seed, budget=budget, policies=pols, social_proof=social_proof)
    return Exploration(view, policy, social_proof)


def controls(templates: Mapping[str, object], template_id: str, variant: str = CLASSIC, policy: str = "R1",
             budget: str = PRIMARY_BUDGET, social_proof: float = 0.0, seed: int = 0):
    """The live explorer: dropdowns and sliders above an output that re-renders on every change."""
    import ipywidgets as w
    from IPython.display import display

    style = {"description_width": "110px"}
    pick = w.Dropdown(options=sorted(templates), value=template_id, description="template", style=style)
    var = w.Dropdown(options=[(v + _cell(v), v) for v in VARIANT_NAMES], value=variant, description="variant",
                     style=style)
    pol = w.Dropdown(options=list(dict.fromkeys((policy, *WALK_POLICIES, *PLUGINS))), value=policy, description="policy",
                     style=style)
    bud = w.Dropdown(options=list(dict.fromkeys((*BUDGET_GRID, budget))), value=budget, description="budget r",
                     style=style)
    sp = w.FloatSlider(value=social_proof, min=0.0, max=2.0, step=0.25, description="social proof", style=style)
    sd = w.IntSlider(value=seed, min=0, max=9, description="seed", style=style)
    out = w.Output()
    out.add_class("cp-explorer-output")

    def show(_=None):
        e = explore(templates[pick.value], var.value, pol.value, bud.value, sp.value, sd.value)
        out.clear_output(wait=True)
        with out:
            display(e)

    for c in (pick, var, pol, bud, sp, sd):
        c.observe(show, names="value")
    show()
    return w.VBox([w.HBox([pick, var]), w.HBox([pol, bud]), w.HBox([sp, sd]), out])


def exercises(template, budget: str = PRIMARY_BUDGET, seed: int = 0) -> str:
    """Predict-then-check questions (HTML) for the classic and mirror cells, answers computed and hidden."""
    esc = html.escape
    items = []
    for v, name in ((CLASSIC, "classic"), (MIRROR, "mirror")):
        e = explore(template, v, "R1", budget, 0.0, seed, policies=("R1", "B4", "Random"))
        vs = e.verdicts()
        kept = {p: e.view.composition(p) for p in ("R1", "B4")}
        facts = [f"{p} keeps {c.kept_support} support, {c.kept_decoy} decoy and {c.kept_irrelevant} irrelevant facts "
                 f"and the {REFERENCE} ends at <b>{esc(vs[p].word(e.template))}</b>" for p, c in kept.items()]
        sp = explore(template, v, "ALL", budget, 1.0, seed, policies=("ALL",))
        items.append(
            f"<li><b>The {name} cell, {v}.</b> <i>Predict</i>: at r = {budget}, "
            f"how many decoy facts does rarest-first (R1) keep, and how many does first-mention (B4) keep? Which "
            f"ends correct? Then raise the social-proof weight to 1 with policy ALL: does the decision change? "
            f"<i>Check</i> with the controls (variant {v}), then open the answer."
            f"<details><summary>Answer for {esc(template.id)}, seed {seed}</summary><p>{'; '.join(facts)}. With "
            f"ALL and social-proof weight 1 the {REFERENCE} ends at <b>{esc(sp.verdicts()['ALL'].word(sp.template))}"
            f"</b>.</p></details></li>")
    return "<ol class='cp-exercises'>" + "".join(items) + "</ol>"


def variant_walkthroughs(template, seed: int = 0, budget: str = PRIMARY_BUDGET, policy: str = "R1",
                         others: Sequence[str] = ("B4", "ALL")) -> list[Walkthrough]:
    """``template`` in each of the eight attribution variants (``policy`` first, then ``others``)."""
    return [walkthrough(template, v, seed=seed, budget=budget, policies=[policy, *others]) for v in VARIANT_NAMES]


def kept_counts(view: Walkthrough, policy: str) -> str:
    """``"support/decoy/irrelevant"`` facts that ``policy`` keeps in ``view``."""
    c = view.composition(policy)
    return f"{c.kept_support}/{c.kept_decoy}/{c.kept_irrelevant}"


def concept_takeaways(views: Sequence[Walkthrough], policy: str, budget: str) -> list[str]:
    """Chapter 1's takeaways: what ``policy`` keeps in the classic and mirror cells, and the decision."""
    by = {v.task.variant.name: v for v in views}
    t, seed = views[0].task.template, views[0].task.seed
    return [
        f"Template {t.id}, seed {seed}, r = {budget}: {policy} keeps <b>{kept_counts(by[CLASSIC], policy)}</b> "
        f"support/decoy/irrelevant facts in the classic cell {CLASSIC} and <b>{kept_counts(by[MIRROR], policy)}</b> in "
        f"the mirror cell {MIRROR}; the fact texts are the same, only their holders differ.",
        f"From those memories the {REFERENCE}'s decision is: <b>{outcome(by[CLASSIC], policy)}</b> in "
        f"{CLASSIC} and <b>{outcome(by[MIRROR], policy)}</b> in {MIRROR}."]


def policy_choices(views: Sequence[Walkthrough]):
    """Per variant and policy: kept support/decoy/irrelevant facts and the choice (a tie never "correct")."""
    rows = []
    for v in views:
        for p in dict.fromkeys(v.policies):  # the policy in focus may also be one of the defaults
            rows.append({"variant": v.task.variant.name, "cell": v.task.variant.cell, "policy": p,
                         "kept support/decoy/irrelevant": kept_counts(v, p), "net lead": v.composition(p).net_lead,
                         "choice": outcome(v, p)})
    return pd.DataFrame(rows).pivot(index=["variant", "cell"], columns="policy",
                                    values=["kept support/decoy/irrelevant", "choice"])


def variant_views(template, policy: str = "R1", budget: str = PRIMARY_BUDGET, social_proof: float = 0.0,
                  seed: int = 0, open_variant: str = CLASSIC) -> list:
    """Chapter 10's static view: one collapsible :class:`Exploration` per variant, then its caption."""
    out = []
    for v in VARIANT_NAMES:
        e = explore(template, v, policy, budget, social_proof, seed)
        var = e.view.task.variant
        out.append(details(f"Variant {v}{_cell(v)}: support {var.support_attr}, decoy {var.decoy_attr}, "
                           f"irrelevant {var.irrelevant_attr}", e.html(), open_=(v == open_variant)))
    out.append(HTML(f"<p class='cp-caption'>Static view of template {template.id}, policy {policy} in focus, seed "
                    f"{seed}, budget r = {budget}, social-proof weight {social_proof:g}. Backend: ledger, the "
                    "reference decider (a normative evidence counter, not a language model).</p>"))
    return out


def templates_by_id(paths: Sequence[str] = ("templates",)) -> dict:
    """Template id -> template, for every template under ``paths`` (the explorer's choices)."""
    return {t.id: t for t in load_templates([str(resolve(p)) for p in paths])}


def static_note(template, policy: str):
    """The box announcing chapter 10's static view (the built book has no kernel behind it)."""
    return admonition(
        "note", "Static view: open with make lab for live controls",
        f"This copy was executed without live controls (parameter <code>widgets = False</code>, as the book "
        f"builds it), so it shows template {template.id} with policy {policy} in all eight variants below. "
        "For the live explorer run <code>make lab</code> in the project folder and run this notebook there.")
