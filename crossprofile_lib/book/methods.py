"""Chapter 2: the catalogue (templates by domain, one rendered in full, validator margins and rejections, the
role-blindness check). Chapter 3 (methods): budget sizes, label costs, the 1/180 check of the paper's cell values,
R1's classic-side composition, the example decision prompt and the preregistered contrasts; chapter 9: what a rerun
costs (calls, prompt tokens, time at an ASSUMED latency and concurrency), then what this build's model sample took."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from crossprofile_lib.book.display import Markdown, admonition, mark_text
from crossprofile_lib.book.params import BookParams
from crossprofile_lib.book.runs import Run, resolve
from crossprofile_lib.book.tables import KEPT, grid_calls
from crossprofile_lib.design import MODEL_POLICIES, VARIANT_NAMES
from crossprofile_lib.paper_figures import load_paper_figures, paper_values
from crossprofile_lib.prompts import decision_prompt
from crossprofile_lib.stats.contrasts import load_prereg
from crossprofile_lib.task.budgets import Budget, t_all
from crossprofile_lib.task.decision import option_order
from crossprofile_lib.task.discussion import make_task
from crossprofile_lib.task.evidence import tone_balance
from crossprofile_lib.task.roleblind import RoleBlindness, role_blindness  # noqa: F401  (re-exported)
from crossprofile_lib.task.templates import TemplateError, load_template, load_templates, scores
from crossprofile_lib.task.tokenizer import default_tokenizer  # noqa: F401  (re-exported for the chapter)

#: Excess accuracy (points) above which the role-blindness check warns.
ROLE_EXCESS_MAX = 5.0


def roles_readable(rb: RoleBlindness) -> bool:
    """Whether text features beat the base rate by more than :data:`ROLE_EXCESS_MAX` points."""
    return 100 * rb.excess > ROLE_EXCESS_MAX


def templates_in(paths: Sequence[str]) -> list:
    """The templates under ``paths`` (relative paths resolve against the repository), validated."""
    return load_templates([str(resolve(p)) for p in paths])


def catalogue(tpl) -> pd.DataFrame:
    """One row per template: domain, set (formal or development), id and title."""
    return pd.DataFrame([{"domain": t.domain, "set": "development" if t.id.startswith("dev-") else "formal",
                          "id": t.id, "title": t.title} for t in tpl])


def count(cat: pd.DataFrame, which: str) -> int:
    """Templates of one set (``formal`` or ``development``)."""
    return int((cat.set == which).sum())


def domain_table(cat: pd.DataFrame) -> pd.DataFrame:
    """Templates per domain and set, with the first five titles of each domain."""
    titles = cat.groupby("domain")["title"].apply(lambda s: "; ".join(s.head(5)))
    return cat.groupby(["domain", "set"]).size().unstack(fill_value=0).assign(titles=titles)


def catalogue_takeaways(tpl, cat: pd.DataFrame, rb: RoleBlindness) -> list[str]:
    """Chapter 2's takeaways: how many templates load, and what the role-blindness check found."""
    return [
        f"{len(tpl)} templates load and pass the answer-key validator: {count(cat, 'formal')} formal (the analysis "
        f"set) in {cat[cat.set == 'formal'].domain.nunique()} domains and {count(cat, 'development')} development.",
        f"Role-blindness: text features predict a fact's role with {100 * rb.accuracy:.1f}% held-out accuracy against a "
        f"base rate of {100 * rb.base_rate:.1f}%, so the roles cannot be read off the text's style"
        + (" <b>only partly</b> (see the warning below)." if roles_readable(rb) else "."),
        tone_line(tpl)]


def tone_line(tpl) -> str:
    """The irrelevant facts' tone over the formal templates (SPEC section 2: balanced), computed from the files."""
    formal = [t for t in tpl if not t.id.startswith("dev-")] or list(tpl)
    b = tone_balance(formal)
    return (f"Irrelevant facts' tone (praise of the decoy or criticism of the correct option, minus the reverse): "
            f"<b>{b['decoy']}</b> of {len(formal)} {'formal ' if len(formal) < len(tpl) else ''}templates lean toward "
            f"the decoy and <b>{b['correct']}</b> toward the correct option ({b['neither']} neither), so the tone "
            + ("favours neither option across the set." if abs(b['decoy'] - b['correct']) <= max(2, len(formal) // 20)
               else f"<b>leans toward the {'decoy' if b['decoy'] > b['correct'] else 'correct option'}</b> across "
                    "the set (the specification asks for balance)."))


def first_per_domain(tpl) -> list[tuple[str, object]]:
    """(domain, template) per domain: its first formal template (else its first development one)."""
    first = {}
    for t in sorted(tpl, key=lambda t: (t.id.startswith("dev-"), t.id)):
        first.setdefault(t.domain, t)
    return sorted(first.items())


def validator_margins(tpl) -> pd.DataFrame:
    """Min / mean / max over the templates of validator rules 1-3's margins (all positive: all pass)."""
    def margin(s: dict, o: str) -> int:
        return s[o] - max(v for k, v in s.items() if k != o)
    rows = [{"template": t.id,
             "all facts: correct - best other": margin(scores(t, t.facts), t.correct_option),
             "decoy group: decoy - best other": margin(scores(t, t.facts_by_role("decoy")), t.decoy_option),
             "support group: correct - best other": margin(scores(t, t.facts_by_role("support")), t.correct_option)}
            for t in tpl]
    return pd.DataFrame(rows).set_index("template").describe().loc[["min", "mean", "max"]]


def rejections(broken_dir: str | Path) -> pd.DataFrame:
    """What the validator says about each file of the rejection corpus (``expected.yaml`` left out)."""
    def error(f: Path) -> str:
        try:
            load_template(f)
            return "(accepted!)"
        except TemplateError as e:
            return f"field '{e.field}': {e.rule}: {e.detail}"
    return pd.DataFrame([{"file": f.name, "error": error(f)} for f in sorted(resolve(broken_dir).glob("*.yaml"))
                         if f.name != "expected.yaml"]).set_index("file")


def role_blindness_table(rb: RoleBlindness) -> pd.DataFrame:
    """The role-blindness check as one table row (percentages)."""
    return pd.DataFrame({"held-out accuracy (%)": [100 * rb.accuracy], "base rate (%)": [100 * rb.base_rate],
                         "excess (points)": [100 * rb.excess], "facts": [rb.n_facts], "folds": [rb.n_folds]},
                        index=["text-feature classifier"])


def per_role_recall(rb: RoleBlindness) -> str:
    """``"support 40%, decoy 10%, ..."``."""
    return ", ".join(f"{k} {100 * v:.0f}%" for k, v in rb.per_role_recall.items())


def role_blindness_note(rb: RoleBlindness):
    """The verdict box: a note when text features do not beat the base rate, else a warning."""
    ok = not roles_readable(rb)
    return admonition("note" if ok else "warning", "Role-blindness",
                      f"The text-feature classifier {'does not beat' if ok else 'beats'} the base rate "
                      f"({100 * rb.accuracy:.1f}% vs {100 * rb.base_rate:.1f}%).")


def template_html(template, seed: int = 0, n_agents: int = 4) -> str:
    """One template rendered: task, options (key marked), criteria, each fact's role and holders per variant."""
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


#: Tasks behind one single-variant classic/mirror percentage of the paper: 60 templates x 3 seeds.
CELL_TASKS = 180


def budget_takeaways(tpl: Sequence, tok) -> list[str]:
    """Chapter 3's takeaways: the analysis set's size and the range of T_all; the cells' reading."""
    sizes = [t_all(t, tok) for t in tpl]
    return [
        f"The analysis set has {len(tpl)} templates; a memory may spend B(r) = floor(r x T_all) tokens, where T_all "
        f"ranges from {min(sizes)} to {max(sizes)} tokens here ({tok.name} tokenizer).",
        "The classic cell is the single variant PSP and the mirror cell SPS, as the paper's figures are (see the "
        "section on cells below); the pooled PS*/SP* cells are secondary rows labelled 'pooled'."]


def of_180(v: float, unit: str) -> Optional[int]:
    """The k in k/180 that reproduces the printed paper value ``v`` (None when no k does)."""
    scale, digits = (1, 2) if unit == "facts" else (100, 1)
    k = round(v * CELL_TASKS / scale)
    return k if round(k * scale / CELL_TASKS, digits) == round(v, digits) else None


def paper_cell_values() -> pd.DataFrame:
    """Every classic/mirror value of the paper with the k of k/180 that prints as it (paper values)."""
    rows = []
    for it in load_paper_figures():
        if not it.figure_id.startswith(("classic-", "mirror-")):
            continue
        for m, v in it.paper.items():
            if isinstance(v, (int, float)):
                k = of_180(v, it.unit)
                rows.append({"figure": it.figure_id, "quantity": it.label, "model": m, "paper": v, "unit": it.unit,
                             "k of 180": "–" if k is None else k, "multiple of 1/180": k is not None})
    return pd.DataFrame(rows)


def classic_side_composition(ref: Run, budget: str, model: str = "Qwen2.5-7B-Instruct") -> pd.DataFrame:
    """R1's mean kept facts in PSP, PSS and pooled, beside the paper's for ``model``."""
    d = ref.df[(ref.df.policy == "R1") & (ref.df.budget_label == budget) & ref.df.variant.str.startswith("PS")]
    comp = d.groupby("variant")[list(KEPT)].mean()
    comp.loc["PS* (pooled)"] = d[list(KEPT)].mean()
    comp = comp.map(lambda v: f"{v:.2f}" + mark_text("exact"))  # what R1 keeps: no decider involved
    comp["paper (R1, classic)"] = " / ".join(f"{paper_values(f'classic-kept/R1 {k}')[model]:.2f}"
                                             for k in ("support", "decoy", "irrelevant"))
    return comp


def label_costs(tok) -> pd.DataFrame:
    """Tokens of a four-label prefix, a one-label prefix, a newline and a number."""
    texts = ["[A1,A2,A3,A4] ", "[A2] ", "\n", "2024"]
    return pd.DataFrame({"text": [t.replace("\n", "\\n") for t in texts],
                         "tokens": [tok.count(t) for t in texts]}).set_index("text")


def budget_sizes(tpl: Sequence, tok, budgets: Sequence[str]) -> pd.DataFrame:
    """Min / mean / max over the templates of T_all and of B(r) for each ratio budget (tokens)."""
    ta = pd.Series([t_all(t, tok) for t in tpl])
    out = pd.DataFrame({"T_all": ta.describe()[["min", "mean", "max"]]})
    for r in [b for b in budgets if not b.endswith("t")]:
        out[f"B({r})"] = pd.Series([Budget.parse(r).tokens(x) for x in ta]).describe()[["min", "mean", "max"]]
    return out


def decision_prompt_html(view, policy: str = "R1") -> str:
    """The decision prompt of ``view``'s task with ``policy``'s memory, verbatim, with its file and hash."""
    pr = decision_prompt(view.task, view.memories[policy], option_order(view.task))
    return (f"<p>File <code>prompts/{pr.file}</code>, sha {pr.sha}:</p><pre style='white-space: pre-wrap'>"
            f"{html.escape(pr.text)}</pre>")


def prereg_table() -> pd.DataFrame:
    """The preregistered contrasts of prereg.yaml (paper values for comparison only)."""
    pre = load_prereg()
    return pd.DataFrame([{"id": c.id, "family": c.family, "contrast": c.title,
                          "paper": ", ".join(f"{m}: {v:+g}" for m, v in (c.paper or {}).items())}
                         for c in pre.contrasts]).set_index("id")


PAPER_GRID = "the paper's CrossProfile grid"
MODEL_SAMPLE = "this book's model sample"


def hours_column(p: BookParams) -> str:
    return f"hours at {p.api_seconds_per_call:g} s/call, {p.api_concurrency} at once"


def grid_costs(p: BookParams) -> pd.DataFrame:
    """One row per grid (the paper's, this book's model sample): calls, prompt tokens, hours (and cost)."""
    grids = {PAPER_GRID: (p.paper_templates, p.paper_seeds, p.paper_budgets, p.paper_policies, None),
             MODEL_SAMPLE: (p.model_templates, p.model_seeds, p.model_budgets, list(MODEL_POLICIES), p.model_variants)}
    rows, hours = {}, hours_column(p)
    for name, g in grids.items():
        c = grid_calls(*g)  # templates, seeds, budgets, policies, variants
        calls = c["decisions"] + c["relevance_calls"] + c["stance_calls"]
        tokens = c["decisions"] * c["mean_prompt_tokens"] / 1e6
        rows[name] = {**c, "model calls": calls, "prompt tokens (millions, decisions)": tokens,
                      hours: calls * p.api_seconds_per_call / p.api_concurrency / 3600}
        if p.price_per_million_prompt_tokens:
            rows[name]["prompt cost at the given price"] = tokens * p.price_per_million_prompt_tokens
    return pd.DataFrame(rows).T


def cost_takeaways(tab: pd.DataFrame, p: BookParams) -> list[str]:
    """The paper grid's calls and hours, and that a rebuild makes no model calls."""
    g = tab.loc[PAPER_GRID]
    return [
        f"The paper's CrossProfile grid makes <b>{g['model calls']:,.0f}</b> model calls "
        f"({g['decisions']:,.0f} decisions); at the assumed {p.api_seconds_per_call:g} s per call with "
        f"{p.api_concurrency} at once that is about {g[hours_column(p)]:.1f} hours.",
        "A rebuild with the same parameters answers every call from the call cache and makes no model calls."]


def measured_note(m: Optional[Run]):
    """What the model sample took when its run folder was written (from its run header)."""
    if m is None:
        return Markdown("No language-model run on this page (parameter `backend` is empty or the backend is unavailable).")
    n = len(m.df)
    return Markdown(
        f"**Measured here:** the model sample of {m.label} ({n} decisions on {m.n_templates} templates) took "
        f"{m.header.get('seconds', float('nan')):.0f} s when its run folder was written ({m.header.get('created', '?')}; "
        "calls already in the call cache then cost nothing), about "
        f"{m.header.get('seconds', 0) / max(n, 1):.2f} s per decision including its relevance calls. Rebuilding "
        "the book answers it from the call cache. The paper reports 8,466 valid and 174 invalid decisions for "
        "DeepSeek V4.1-Flash on CrossProfile (paper value).")
