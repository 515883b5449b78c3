"""The classroom explorer (chapter 10): one task end to end, for a student.

* :func:`explore` builds one template in one attribution variant with the reference decider (no
  model calls, :func:`crossprofile_lib.book.walkthrough.walkthrough`) and returns an
  :class:`Exploration`, which renders itself in Jupyter (``_repr_html_``): the plain-Python path.
* :func:`controls` is the live version (ipywidgets): pick template, variant, policy, budget,
  social-proof weight and seed, and the memory and decision below change.
* A decision is called a **tie** when the top score is shared by several options (the reference
  decider then draws among them with a seeded coin): a tie is never shown as "correct".
* :func:`exercises` writes predict-then-check questions for the classic and mirror cells, their
  answers computed from the template in hand.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from crossprofile_lib.design import CLASSIC, MIRROR, PRIMARY_BUDGET

BUDGETS = ("0.4", "0.6", "0.8", "128t")
REFERENCE = "reference decider"


@dataclass(frozen=True)
class Verdict:
    """What the reference decider did with one memory: the option chosen, and whether the top
    score was shared (``tied``: the options sharing it; the choice among them was a seeded draw)."""

    option: str
    tied: tuple[str, ...]
    scores: Mapping[str, float]

    def word(self, template) -> str:
        kind = ("correct" if self.option == template.correct_option else
                "decoy" if self.option == template.decoy_option else "third option")
        if len(self.tied) > 1:
            n = [template.option(o).name for o in self.tied]
            names = ", ".join(n[:-1]) + " and " + n[-1]
            return f"tie between {names}, drawn by a seeded coin: not a win"
        return kind


def outcome(view, policy: str) -> str:
    """One word for a table cell: ``correct``, ``decoy``, ``third option``, or ``tie`` when the top
    score was shared (the seeded coin's pick is not a result)."""
    v = verdict(view, policy, getattr(view, "social_proof", 0.0))
    return "tie" if len(v.tied) > 1 else v.word(view.task.template)


def verdict(view, policy: str, social_proof: float) -> Verdict:
    """Score ``view``'s memory of ``policy`` as the reference decider does and name any tie."""
    from crossprofile_lib.backends.ledger import ReferenceDecider
    from crossprofile_lib.task.decision import option_order
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
        """Static HTML (no JavaScript): task, the focused policy's memory and decision, then the
        other policies, the scripted discussion and the claim list (collapsed)."""
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

    def _repr_html_(self) -> str:
        return self.html()


def explore(template, variant: str = CLASSIC, policy: str = "R1", budget: str = PRIMARY_BUDGET,
            social_proof: float = 0.0, seed: int = 0, policies: Optional[Sequence[str]] = None) -> Exploration:
    """One task end to end with ``policy`` in focus (``template``: a Template or a template id)."""
    from crossprofile_lib.book.walkthrough import WALK_POLICIES, find_template, walkthrough
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

    from crossprofile_lib.book.walkthrough import WALK_POLICIES
    from crossprofile_lib.task.variants import VARIANT_NAMES
    style = {"description_width": "110px"}
    pick = w.Dropdown(options=sorted(templates), value=template_id, description="template", style=style)
    var = w.Dropdown(options=[(v + _cell(v), v) for v in VARIANT_NAMES], value=variant, description="variant",
                     style=style)
    pol = w.Dropdown(options=list(dict.fromkeys((policy, *WALK_POLICIES))), value=policy, description="policy",
                     style=style)
    bud = w.Dropdown(options=list(dict.fromkeys((*BUDGETS, budget))), value=budget, description="budget r",
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
    """Predict-then-check questions for the classic and mirror cells (HTML); each answer is
    computed from ``template`` and hidden until the student opens it."""
    esc = html.escape
    items = []
    for v, name in ((CLASSIC, "classic"), (MIRROR, "mirror")):
        e = explore(template, v, "R1", budget, 0.0, seed, policies=("R1", "B4", "Random"))
        vs = e.verdicts()
        facts = []
        for p in ("R1", "B4"):
            c = e.view.composition(p)
            facts.append(f"{p} keeps {c.kept_support} support, {c.kept_decoy} decoy and {c.kept_irrelevant} "
                         f"irrelevant facts and the {REFERENCE} ends at <b>{esc(vs[p].word(e.template))}</b>")
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
