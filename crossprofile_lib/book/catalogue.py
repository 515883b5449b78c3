"""The benchmark's catalogue (chapter 2): templates by domain, one rendered in full, validator margins and
rejections, and the role-blindness check."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Sequence

import pandas as pd

from crossprofile_lib.book.display import admonition
from crossprofile_lib.book.runs import resolve
from crossprofile_lib.design import VARIANT_NAMES
from crossprofile_lib.task.discussion import make_task
from crossprofile_lib.task.roleblind import RoleBlindness, role_blindness  # noqa: F401  (re-exported)
from crossprofile_lib.task.templates import TemplateError, load_template, load_templates, scores

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
        + (" <b>only partly</b> (see the warning below)." if roles_readable(rb) else ".")]


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
    rej = []
    for f in sorted(resolve(broken_dir).glob("*.yaml")):
        if f.name == "expected.yaml":
            continue
        try:
            load_template(f)
            rej.append({"file": f.name, "error": "(accepted!)"})
        except TemplateError as e:
            rej.append({"file": f.name, "error": f"field '{e.field}': {e.rule}: {e.detail}"})
    return pd.DataFrame(rej).set_index("file")


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

