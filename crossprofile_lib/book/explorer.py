"""One task end to end, for reading and for the classroom (chapters 1, 3 and 10): :func:`walkthrough`, :func:`explore`
(what it shows as data, :meth:`Exploration.data`, and as HTML, :func:`render`), :func:`controls` (ipywidgets, in
JupyterLab), :func:`live_explorer` (the published book's page, over the data :mod:`.explorer_export` exports) and
:func:`exercises`. A **tie** (top score shared) is never shown as "correct" (:func:`verdict`, :func:`outcome`)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Mapping, Optional, Sequence

import pandas as pd

from crossprofile_lib.backends.ledger import ReferenceDecider
from crossprofile_lib.book.display import HTML
from crossprofile_lib.book.explorer_walk import Walk, reason, walk
from crossprofile_lib.book.runs import REFERENCE, resolve
from crossprofile_lib.design import BUDGET_GRID, CLASSIC, MIRROR, PRIMARY_BUDGET, VARIANT_NAMES
from crossprofile_lib.policies import WALK_POLICIES
from crossprofile_lib.policies.plugins import PLUGINS  # policies of your own (POLICY_FILES) join the dropdown
from crossprofile_lib.policies.registry import PolicyContext
from crossprofile_lib.rng import stream
from crossprofile_lib.run.pipeline import TaskInputs, build_task, memories, specs_of
from crossprofile_lib.task.budgets import Budget
from crossprofile_lib.task.decision import DecisionRequest, option_order
from crossprofile_lib.task.evidence import composition
from crossprofile_lib.task.templates import load_templates
from crossprofile_lib.task.variants import agent_names


@dataclass
class Walkthrough:
    """One template, variant and seed: holders, discussion, claim list, each policy's memory, its walk (what it kept
    and dropped, and why: :mod:`.explorer_walk`) and the decision."""

    task: object
    transcript: object
    claims: object
    budget_tokens: int
    t_all: int
    policies: tuple
    memories: dict = field(default_factory=dict)
    decisions: dict = field(default_factory=dict)
    walks: dict = field(default_factory=dict)
    decider: str = ""
    tokenizer: str = ""
    social_proof: float = 0.0
    budget: str = PRIMARY_BUDGET

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
    dec = _decider(social_proof)
    u = build_task(template, variant, seed, n_agents, dec.tokenizer)
    task = u.task
    b = Budget.parse(budget)
    w = Walkthrough(task, u.transcript, u.claims, b.tokens(u.t_all), u.t_all, tuple(policies), decider=dec.model,
                    tokenizer=dec.tokenizer.name, social_proof=social_proof, budget=b.label)
    x = TaskInputs(u, dec)

    def rng_for(spec, key):
        return stream(seed, "policy", task.task_id, spec.name)

    for m in memories(u, specs_of(policies), [b], dec, task.task_id, rng_for, inputs=x):
        p = m.spec.name
        w.memories[p] = m.memory
        stances = x.stances(m.spec.source)[0] if "stances" in m.spec.needs else None
        w.walks[p] = walk(m.spec, u.claims, m.memory, m.budget_tokens, dec.tokenizer,
                          PolicyContext(rng_for(m.spec, m.key), m.relevance, stances))
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


#: The explorer's policies: every copy policy and control the book runs on the reference decider, the label controls
#: (labels on, off, shuffled) of R1, B4, BAL and ALL; policies of your own (POLICY_FILES) join them. B3 is not here: it
#: is a summary a language model writes.
EXPLORER_POLICIES = ("R1", "B4", "Random", "M1", "R1-rel", "R1-rel-oracle", "BAL", "BAL-oracle",
                     "R1:unlabeled", "R1:shuffled", "B4:unlabeled", "B4:shuffled", "BAL:unlabeled", "BAL:shuffled",
                     "R1-k7", "B4-k7", "Random-k7", "M1-k7", "R1-rel-k7",
                     "ALL", "ALL:unlabeled", "ALL:shuffled", "EMPTY", "REF", "private-only", "shared-only")
#: The social-proof weights of the explorer's slider (the book's own weights join them on the page).
SOCIAL_PROOF_STEPS = tuple(i / 4 for i in range(9))


@lru_cache(maxsize=64)
def _decider(social_proof: float) -> ReferenceDecider:
    return ReferenceDecider(social_proof=social_proof)


def verdict(view, policy: str, social_proof: float) -> Verdict:
    """Score ``view``'s memory of ``policy`` as the reference decider with that social-proof weight does, its
    choice (a tie drawn by its seeded coin) and any tie."""
    order = option_order(view.task)
    dec, mem = _decider(social_proof), view.memories[policy]
    s = dec.option_scores(view.task, mem, order)
    top = max(s)
    tied = tuple(o for o, v in zip(order, s) if abs(v - top) <= 1e-9)
    chosen = dec.decide_one(DecisionRequest(view.task, mem, order, f"{view.task.task_id}/{policy}")).option
    return Verdict(chosen, tied, dict(zip(order, (float(v) for v in s))))


def _cell(variant: str) -> str:
    return {CLASSIC: " (classic cell)", MIRROR: " (mirror cell)"}.get(variant, "")


def walk_caption(w: Walk) -> str:
    """The caption of a policy's walk table (the page's script writes the same)."""
    if w.rule == "fit":
        return (f"What {w.policy} keeps within {w.budget} tokens. Priority order: {w.doc}; a line that does not fit "
                "is skipped and the walk goes on")
    if w.rule == "packer":
        return f"What {w.policy} keeps within {w.budget} tokens. Priority order: {w.doc}; packed by its own rule"
    if w.rule == "fixed-k":
        return f"What {w.policy} keeps. Priority order: {w.doc}; the first {w.k} claims, whatever their cost"
    if w.rule == "transcript":
        return f"What {w.policy} shows: {w.doc}, every line of the discussion, repeats included"
    return f"What {w.policy} keeps: {w.doc}, unbudgeted"


def memory_data(view, policy: str, social_proof: float) -> dict:
    """Everything the explorer shows about ``policy``'s memory in ``view`` at the social-proof weight: the kept
    support/decoy/irrelevant counts, net lead, tokens, the memory text, the reference decider's scores, choice and
    verdict (a tie is a tie), and the walk (what it keeps and drops, and why). Plain strings and integers: the page's
    data must give the same dict (tests/test_explorer_live.py)."""
    t, cl = view.task.template, view.claims
    m, c, w = view.memories[policy], view.composition(policy), view.walks[policy]
    v = verdict(view, policy, social_proof)
    role = {f.id: f.role for f in t.facts}
    steps = [["" if s.rank is None else str(s.rank), ",".join(cl.claims[s.claim].speakers), cl.claims[s.claim].text,
              role.get(cl.claims[s.claim].fact_id, ""), s.cost, reason(w, s)] for s in w.steps]
    return {"policy": policy, "support": c.kept_support, "decoy": c.kept_decoy, "irrelevant": c.kept_irrelevant,
            "net_lead": c.net_lead, "tokens": m.tokens, "text": m.text, "choice": t.option(v.option).name,
            "verdict": v.word(t), "scores": [[t.option(o).name, f"{x:+g}"] for o, x in v.scores.items()],
            "caption": walk_caption(w), "steps": steps}


def task_data(view) -> dict:
    """The task's parts that no policy changes: holders, the scripted discussion and the claim list."""
    t, w = view.task.template, view
    role = {f.id: f.role for f in t.facts}
    var = w.task.variant
    return {"template": t.id, "title": t.title, "variant": var.name, "cell": _cell(var.name),
            "attrs": [var.support_attr, var.decoy_attr, var.irrelevant_attr], "seed": w.task.seed,
            "t_all": w.t_all, "correct": t.option(t.correct_option).name, "decoy": t.option(t.decoy_option).name,
            "speaker_order": list(w.transcript.speaker_order),
            "transcript": [[u.speaker, u.text, role[u.fact_id]] for u in w.transcript.utterances],
            "claims": [[c.first_mention + 1, ",".join(c.speakers), c.count, c.text, role[c.fact_id]]
                       for c in w.claims.claims]}


def _memory_html(d: dict, budget_tokens: int, open_: bool) -> str:
    esc = html.escape
    scores = ", ".join(f"{esc(n)} {s}" for n, s in d["scores"])
    rows = "".join(f"<tr><td>{r}</td><td>[{esc(who)}] {esc(text)} <span class='cp-role cp-{role}'>{role}</span></td>"
                   f"<td>{cost}</td><td>{esc(why)}</td></tr>" for r, who, text, role, cost, why in d["steps"])
    return (f"<details class='cp-memory' data-policy='{esc(d['policy'])}'{' open' if open_ else ''}><summary><b>"
            f"{esc(d['policy'])}</b>: keeps {d['support']} support / {d['decoy']} decoy / {d['irrelevant']} irrelevant "
            f"({d['tokens']} of {budget_tokens} tokens); net lead {d['net_lead']:+d}; the {REFERENCE} chooses "
            f"<b>{esc(d['choice'])}</b> (<span class='cp-verdict'>{esc(d['verdict'])}</span>)</summary>"
            f"<p>Scores: {scores}.</p><pre>{esc(d['text']) or '(empty memory)'}</pre>"
            f"<div class='cp-scroll'><table class='cp-walk'><caption>{esc(d['caption'])}</caption><tr><th>priority</th>"
            f"<th>claim</th><th>line tokens</th><th>kept or dropped, and why</th></tr>{rows}</table></div></details>")


def render(d: dict) -> str:
    """The explorer's HTML for :meth:`Exploration.data` (the page's script renders the same data to the same HTML)."""
    esc = html.escape
    tr = "".join(f"<li><b>{esc(s)}</b>: {esc(text)} <span class='cp-role cp-{role}'>{role}</span></li>"
                 for s, text, role in d["transcript"])
    cl = "".join(f"<tr><td>{first}</td><td>{esc(who)}</td><td>{n}</td><td>{esc(text)}</td><td>{role}</td></tr>"
                 for first, who, n, text, role in d["claims"])
    others = "".join(_memory_html(m, d["budget_tokens"], False) for m in d["others"])
    sa, da, ia = d["attrs"]
    return (f"<div class='cp-explorer-view' data-variant='{d['variant']}' data-policy='{esc(d['policy'])}'>"
            f"<p><b>{esc(d['title'])}</b> ({esc(d['template'])}), variant <b>{d['variant']}</b>{d['cell']}: support "
            f"{sa}, decoy {da}, irrelevant {ia}; seed {d['seed']}; budget {d['budget_tokens']} of T_all = {d['t_all']} "
            f"tokens; social-proof weight {d['social_proof']}. Correct option <b>{esc(d['correct'])}</b>, decoy option "
            f"<b>{esc(d['decoy'])}</b> (roles are never shown to a model). Decisions by the {REFERENCE} "
            f"({esc(d['decider'])}), a normative evidence counter, not a language model.</p>"
            + _memory_html(d["focus"], d["budget_tokens"], True)
            + f"<details data-part='others'><summary>The other policies</summary>{others}</details>"
            f"<details data-part='discussion'><summary>Scripted discussion ({len(d['transcript'])} lines, speaker "
            f"order {', '.join(d['speaker_order'])})</summary><ol>{tr}</ol></details>"
            f"<details data-part='claims'><summary>Claim list ({len(d['claims'])} claims)</summary><div "
            f"class='cp-scroll'><table><tr><th>first</th><th>speakers</th><th>n</th><th>text</th><th>role</th></tr>"
            f"{cl}</table></div></details></div>")


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

    def data(self) -> dict:
        """What the explorer shows, as plain data (:func:`render` turns it into HTML)."""
        w = self.view
        return {**task_data(w), "budget": w.budget, "budget_tokens": w.budget_tokens,
                "social_proof": f"{self.social_proof:g}", "decider": ReferenceDecider(social_proof=self.social_proof).model,
                "policy": self.policy, "focus": memory_data(w, self.policy, self.social_proof),
                "others": [memory_data(w, p, self.social_proof) for p in w.policies if p != self.policy]}

    def html(self) -> str:
        """Static HTML: task, the focused policy's memory, its walk and decision, the others, discussion and claims."""
        return render(self.data())

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
    pol = w.Dropdown(options=list(dict.fromkeys((policy, *EXPLORER_POLICIES, *PLUGINS))), value=policy,
                     description="policy", style=style)
    bud = w.Dropdown(options=list(dict.fromkeys((*BUDGET_GRID, budget))), value=budget, description="budget r",
                     style=style)
    sp = w.FloatSlider(value=social_proof, min=SOCIAL_PROOF_STEPS[0], max=SOCIAL_PROOF_STEPS[-1],
                       step=SOCIAL_PROOF_STEPS[1] - SOCIAL_PROOF_STEPS[0], description="social proof", style=style)
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


#: The exercises' cells and what they ask about: R1 and B4 at social-proof weight 0, then ALL at weight 1.
EXERCISE_CELLS = ((CLASSIC, "classic"), (MIRROR, "mirror"))
EXERCISE_POLICIES, EXERCISE_SOCIAL_PROOF = ("R1", "B4"), 1.0


def exercises_data(template, budget: str = PRIMARY_BUDGET, seed: int = 0) -> dict:
    """The exercises' answers for ``template`` (:func:`render_exercises`): per cell, what R1 and B4 keep and the
    decision (weight 0), and the decision from ALL at weight 1."""
    cells = []
    for v, name in EXERCISE_CELLS:
        e = explore(template, v, "R1", budget, 0.0, seed, policies=("R1", "B4", "Random"))
        kept = [[p, d["support"], d["decoy"], d["irrelevant"], d["verdict"]]
                for p in EXERCISE_POLICIES for d in [memory_data(e.view, p, 0.0)]]
        sp = explore(template, v, "ALL", budget, EXERCISE_SOCIAL_PROOF, seed, policies=("ALL",))
        cells.append({"variant": v, "name": name, "kept": kept,
                      "all": memory_data(sp.view, "ALL", EXERCISE_SOCIAL_PROOF)["verdict"]})
    return {"template": template.id, "budget": str(Budget.parse(budget)), "seed": seed, "cells": cells}


def render_exercises(d: dict) -> str:
    """The exercises' HTML (the page's script renders the same data to the same HTML)."""
    esc = html.escape
    items = []
    for c in d["cells"]:
        facts = [f"{p} keeps {s} support, {dc} decoy and {i} irrelevant facts and the {REFERENCE} ends at "
                 f"<b>{esc(word)}</b>" for p, s, dc, i, word in c["kept"]]
        items.append(
            f"<li><b>The {c['name']} cell, {c['variant']}.</b> <i>Predict</i>: at r = {d['budget']}, "
            f"how many decoy facts does rarest-first (R1) keep, and how many does first-mention (B4) keep? Which "
            f"ends correct? Then raise the social-proof weight to 1 with policy ALL: does the decision change? "
            f"<i>Check</i> with the controls (variant {c['variant']}), then open the answer."
            f"<details><summary>Answer for {esc(d['template'])}, seed {d['seed']}</summary><p>{'; '.join(facts)}. "
            f"With ALL and social-proof weight 1 the {REFERENCE} ends at <b>{esc(c['all'])}</b>.</p></details></li>")
    return "<ol class='cp-exercises'>" + "".join(items) + "</ol>"


def exercises(template, budget: str = PRIMARY_BUDGET, seed: int = 0) -> str:
    """Predict-then-check questions (HTML) for the classic and mirror cells, answers computed and hidden."""
    return render_exercises(exercises_data(template, budget, seed))


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


def templates_by_id(paths: Sequence[str] = ("templates",)) -> dict:
    """Template id -> template, for every template under ``paths`` (the explorer's choices)."""
    return {t.id: t for t in load_templates([str(resolve(p)) for p in paths])}


#: The page's script and stylesheet, from chapter 10's page (book/10-explorer.html): book/_static/cp-explorer/.
LIVE_ASSETS = "../_static/cp-explorer/"


def live_explorer(template, variant: str = CLASSIC, policy: str = "R1", budget: str = PRIMARY_BUDGET,
                  social_proof: float = 0.0, seed: int = 0):
    """Chapter 10's live explorer in the built book: the page's script (book/_static/cp-explorer/explorer.js) adds the
    controls and re-renders on every change from the data the build exported (:mod:`.explorer_export`), in the
    reader's browser; until it has (or without scripts) the page shows the library's own view of these settings,
    which is what the script renders for them."""
    e = explore(template, variant, policy, budget, social_proof, seed)
    return HTML(f"<link rel='stylesheet' href='{LIVE_ASSETS}explorer.css'>"
                f"<div class='cp-live' data-cp-live='view'><div class='cp-live-view'>{e.html()}</div>"
                f"<p class='cp-caption'>Decisions by the {REFERENCE} (backend ledger: a normative evidence counter, not "
                "a language model), computed by the library when this book was built and looked up by your browser; "
                "no model is asked anything on this page.</p></div>"
                f"<script src='{LIVE_ASSETS}explorer.js' defer></script>")


def live_exercises(template, budget: str = PRIMARY_BUDGET, seed: int = 0):
    """The exercises for the live page: their answers follow the explorer's template, budget and seed."""
    return HTML(f"<div class='cp-live' data-cp-live='exercises'><div class='cp-live-exercises'>"
                f"{exercises(template, budget, seed)}</div></div>")
