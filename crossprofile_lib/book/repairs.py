"""Chapter 12's repairs, measured (BAL's classic-minus-mirror gap, count-free formats, the 'labels are not evidence'
prompt, group size), one block per model; and chapter 16, your policies (``POLICY_FILES``) beside R1 and B4: a wrong
decision at a net lead of 0 or below is the memory's failure, above 0 the decider's (:func:`failures_by_net_lead`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from crossprofile_lib.book.display import Markdown, admonition, esc, num
from crossprofile_lib.book.experiments import user_copy
from crossprofile_lib.book.params import load_policy_file
from crossprofile_lib.book.runs import LABELS_PROMPT, REFERENCE, Run
from crossprofile_lib.book.tables import CELL_LABELS, cell_gaps, cell_rows
from crossprofile_lib.design import CLASSIC, LABELS_POLICIES, MIRROR, VARIANT_NAMES
from crossprofile_lib.policies.plugins import base

#: The policies the repairs are compared with.
POL = ("R1", "B4", "Random", "R1-rel", "R1-rel-oracle", "BAL", "BAL-oracle")
#: Policies whose full-label and count-free memories the format table sets side by side.
FORMAT_ROWS = ("R1", "R1:first-speaker", "B4", "B4:first-speaker", "BAL", "BAL:first-speaker", "BAL:claim-id",
               "BAL:unlabeled")
#: The policies of the group-size runs' table and figures.
GROUP_POLICIES = ("R1", "B4", "Random", "R1-rel", "BAL")
GAP, MEAN = "classic - mirror (points)", "mean accuracy (%)"


def with_mine(ch, policies: Sequence[str]) -> list[str]:
    """``policies`` followed by the policies of your own (POLICY_FILES), each once."""
    return list(dict.fromkeys([*policies, *ch.params.user_policies]))


def format_rows(ch) -> list[str]:
    """:data:`FORMAT_ROWS` and, for each copy policy of your own, its full and count-free memories."""
    mine = [f"{u}{f}" for u in user_copy(ch.params.user_policies) for f in ("", ":first-speaker", ":unlabeled")]
    return list(dict.fromkeys([*FORMAT_ROWS, *mine]))


def count_free_versus(ch) -> list[str]:
    """The memories of the count-free table: ALL, R1, B4, BAL and your own copy policies."""
    return list(dict.fromkeys(["ALL", "R1", "B4", "BAL", *user_copy(ch.params.user_policies)]))


def gaps_by_run(ch, runs: Sequence[Run], policies: Optional[Sequence[str]] = None) -> dict:
    """Run label -> :func:`cell_gaps` at its shown budget (``policies`` None: :data:`POL` and your own)."""
    policies = with_mine(ch, POL) if policies is None else list(policies)
    return {r.label: cell_gaps(r, r.boot, policies, ch.budget(r)) for r in runs}


def repair_takeaways(ch, gaps: dict, effects: dict) -> list[str]:
    """BAL's gap beside R1's and B4's (reference decider), and the count-free formats under social proof."""
    lines, ref, sp = [], ch.ref, ch.sp
    g = gaps[ref.label].set_index(["policy", "quantity"])["estimate"] if len(gaps[ref.label]) else pd.Series(dtype=float)

    def gap(p):
        return num(g.get((p, GAP)), sign=True)

    def mean(p):
        return num(g.get((p, MEAN)), suffix="%")
    if ("BAL", GAP) in g.index:
        lines.append(f"With the {REFERENCE} at r = {ch.budget(ref)}: BAL's classic-minus-mirror gap ({CLASSIC} - {MIRROR}) "
                     f"is <b>{gap('BAL')}</b> points, R1's {gap('R1')} and B4's {gap('B4')}; BAL's mean accuracy over the "
                     f"variants is {mean('BAL')} against R1-rel's {mean('R1-rel')}.")
    e = effects[sp.label]
    if not e.empty:
        a = e[(e.versus == "ALL") & (e.cell == CELL_LABELS["classic"])].set_index("label_format")["estimate"]
        if {"unlabeled", "first-speaker", "claim-id"} <= set(a.index):
            lines.append(f"Under a social-proof weight of {ch.params.social_proof:g}, removing the ALL memory's labels "
                         f"changes classic-cell accuracy by <b>{num(a['unlabeled'], sign=True)}</b> points, first-speaker "
                         f"labels by {num(a['first-speaker'], sign=True)} and claim ids by {num(a['claim-id'], sign=True)}.")
    return lines


def format_by_cell(run: Run, budget: str, rows: Sequence[str] = FORMAT_ROWS) -> pd.DataFrame:
    """Accuracy (%) by cell at ``budget`` of each policy of ``rows``, with full labels and count-free."""
    d = run.df[(run.df.budget_label == budget) & run.df.policy.isin(list(rows)) & (run.df.cell != "other")]
    t = (100 * d.pivot_table(index="policy", columns="cell", values="correct", aggfunc="mean")).round(1)
    t = t.rename(columns=CELL_LABELS)
    return t.reindex([p for p in rows if p in t.index])


def labels_prompt_table(model: Run, lab: Run) -> pd.DataFrame:
    """Accuracy (%) per variant, unbudgeted, with the default and the 'labels are not evidence' prompt."""
    both = pd.concat([model.df.assign(prompt="default"), lab.df.assign(prompt=LABELS_PROMPT)])
    both = both[both.policy.isin(LABELS_POLICIES)]
    return (100 * both.pivot_table(index=["prompt", "policy"], columns="variant", values="correct", aggfunc="mean")).round(1)


def labels_prompt_pairs(ch) -> list[tuple[Run, Optional[Run], str]]:
    """Per model: (its sample, its labels-prompt rerun or None, why there is none)."""
    br = ch.runs
    by_path = {}
    for sp in br.specs():
        r = br.model_for(sp)
        if r is not None:
            by_path.setdefault(r.path, sp)
    out = []
    for m in ch.all_models:
        sp = by_path.get(m.path)
        if sp is None:
            out.append((m, None, f"{m.label} is an imported run folder ({m.path}): the labels-prompt rerun would need "
                                 "model calls, so it is not shown for it"))
            continue
        lab = br.labels_prompt_for(sp)
        out.append((m, lab, "" if lab is not None else
                    f"{m.label}: the labels-prompt rerun could not run here ({br.skipped.get(sp.backend, 'unknown')})"))
    return out


def no_labels_prompt_note(ch):
    """Why the decision-prompt repair is not shown (no language-model run on this page)."""
    why = ch.runs.skipped.get(ch.runs.backend, "") if ch.runs.backend else "parameter backend is empty"
    return Markdown("No language-model run on this page, so the decision-prompt repair is not shown "
                    f"(it needs a model{': ' + why if why else ''}).")


def group_size_runs(ch) -> dict:
    """Number of agents -> the reference decider's run (4: the reference grid)."""
    return {n: (ch.ref if n == 4 else ch.runs.reference(n_agents=n)) for n in ch.params.group_sizes}


def group_size_rows(size_runs: dict, budget: str, policies: Sequence[str] = GROUP_POLICIES) -> pd.DataFrame:
    """Per group size, policy and cell at ``budget``: accuracy (%), mean kept facts, budget and T_all."""
    rows = []
    for n, r in size_runs.items():
        d = r.df[(r.df.budget_label == budget) & r.df.policy.isin(list(policies))]
        for (p, cell), x in d.groupby(["policy", "cell"]):
            rows.append({"agents": n, "policy": p, "cell": cell, "estimate": 100 * x.correct.mean(),
                         "kept support": x.kept_support.mean(), "kept decoy": x.kept_decoy.mean(),
                         "kept irrelevant": x.kept_irrelevant.mean(), "budget (tokens)": x.budget_tokens.mean(),
                         "T_all": x.t_all.mean()})
    return pd.DataFrame(rows)


def group_size_cell(t: pd.DataFrame, cell: str) -> pd.DataFrame:
    """The rows of :func:`group_size_rows` in one cell, as point estimates (``lo`` = ``hi`` = estimate)."""
    d = t[t.cell == cell]
    return d.assign(lo=d.estimate, hi=d.estimate)


def group_size_composition(t: pd.DataFrame) -> pd.DataFrame:
    """The classic cell by group size: T_all, budget, mean kept facts and accuracy (%)."""
    comp = t[t.cell == "classic"].pivot_table(index=["policy", "agents"], values=[
        "T_all", "budget (tokens)", "kept support", "kept decoy", "kept irrelevant", "estimate"])
    return comp.rename(columns={"estimate": "accuracy (%)"})


#: The paper's policies the page compares a policy of your own with.
COMPARED = ("R1", "B4")


def policies_in(run: Optional[Run], names: Sequence[str]) -> list[str]:
    """The specs of ``run`` whose base is one of ``names``, in the run's order."""
    if run is None:
        return []
    bases = set(names)
    return [p for p in dict.fromkeys(run.df["policy"].astype(str)) if base(p) in bases]


def _shown(df: pd.DataFrame, budget: str, policies: Sequence[str]) -> pd.DataFrame:
    """The rows of ``policies`` at ``budget`` (and the unbudgeted ones)."""
    return df[df["budget_label"].astype(str).isin([str(budget), "none"]) & df["policy"].isin(list(policies))]


def composition_by_variant(run: Run, policies: Sequence[str], budget: str) -> pd.DataFrame:
    """Policy x variant: ``support / decoy / irrelevant`` mean kept counts, the paper's variant order."""
    d = _shown(run.df, budget, [*policies, *COMPARED])
    g = d.groupby(["policy", "variant"])[["kept_support", "kept_decoy", "kept_irrelevant"]].mean()
    cell = g.apply(lambda r: f"{r['kept_support']:.1f} / {r['kept_decoy']:.1f} / {r['kept_irrelevant']:.1f}", axis=1)
    t = cell.unstack("variant")
    order = [p for p in [*policies, *COMPARED] if p in t.index]
    return t.reindex(index=order, columns=[v for v in VARIANT_NAMES if v in t.columns])


def accuracy_by_cell(run: Run, policies: Sequence[str], budget: str) -> pd.DataFrame:
    """Long table (policy, cell, estimate, lo, hi) of accuracy in the classic / mirror (and pooled) cells."""
    t = _shown(cell_rows(run, run.boot), budget, [*policies, *COMPARED])
    order = {p: i for i, p in enumerate([*policies, *COMPARED])}
    return t.sort_values("policy", key=lambda s: s.map(order), kind="stable")


def failures_by_net_lead(run: Run, policy: str, budget: str) -> pd.DataFrame:
    """Per net lead of what ``policy`` kept: decisions, share, accuracy, wrong ones, decoy share, whose failure."""
    d = _shown(run.df, budget, [policy])
    rows = []
    for lead, g in d.groupby("net_lead", sort=True):
        wrong = g[~g["correct"].astype(bool)]
        rows.append({"net lead": int(lead), "decisions": len(g), "share (%)": 100 * len(g) / len(d),
                     "accuracy (%)": 100 * g["correct"].astype(float).mean(), "wrong": len(wrong),
                     "wrong: chose the decoy (%)": 100 * wrong["chose_decoy"].astype(float).mean() if len(wrong)
                     else float("nan"),
                     "a wrong decision here is": "the memory's failure" if lead <= 0 else "the decider's failure"})
    return pd.DataFrame(rows, columns=["net lead", "decisions", "share (%)", "accuracy (%)", "wrong",
                                       "wrong: chose the decoy (%)", "a wrong decision here is"])


def failure_summary(run: Run, policy: str, budget: str) -> str:
    """One sentence: how many of ``policy``'s wrong decisions come from memories with net lead <= 0."""
    d = _shown(run.df, budget, [policy])
    wrong = d[~d["correct"].astype(bool)]
    if d.empty:
        return f"{policy} has no decisions at r = {budget} in this run."
    if wrong.empty:
        return f"{policy} made no wrong decision at r = {budget} ({len(d)} decisions)."
    mem = int((wrong["net_lead"] <= 0).sum())
    return (f"{policy}: {len(wrong)} of {len(d)} decisions wrong at r = {budget}; {mem} of them "
            f"({100 * mem / len(wrong):.0f}%) from memories whose net lead was 0 or below (the memory's failure), "
            f"{len(wrong) - mem} with a positive net lead (the decider's).")


def no_policy_note():
    """The notice of a book built without POLICY_FILES."""
    return admonition("note", "No policy of your own in this build",
                      "This page shows a memory policy of your own beside the paper's R1 and B4. Build the book with "
                      "<code>make book POLICY_FILES=examples/policies/keep_longest.py</code> (or your own file; see "
                      "the reference page <i>A memory policy of your own</i>, book/reference-policies.md) and it shows "
                      "that policy's composition per cell, "
                      "its accuracy in the classic and mirror cells, and where it fails and why.")


def recorded_policy_files(runs) -> list[dict]:
    """The policy files the shown runs recorded (``run.json``'s ``policy_files``: an imported run's own policies), once
    each by SHA-256."""
    out = {}
    for r in runs:
        for rec in (getattr(r, "header", None) or {}).get("policy_files") or ():
            if isinstance(rec, dict) and rec.get("sha256"):
                out.setdefault(rec["sha256"], rec)
    return list(out.values())


def user_policies_shown(ch) -> list[str]:
    """The page's policies of your own: POLICY_FILES', then those the shown runs recorded (a RUNS= folder built with
    a policy file shows it without POLICY_FILES)."""
    rec = [n for f in recorded_policy_files(ch.shown) for n in f.get("policies", ())]
    return list(dict.fromkeys([*ch.params.user_policies, *rec]))


def policy_files_note(params, runs=()) -> str:
    """HTML: the files behind the page's policies, by file name (never the machine's path) with their SHA-256, those
    of POLICY_FILES and those the shown runs recorded (the run headers record the same)."""
    items = {}
    for f in params.policy_files:
        src = load_policy_file(f)
        items.setdefault(src.sha256, (Path(f).name, src.policies, "POLICY_FILES"))
    for rec in recorded_policy_files(runs):
        name = Path(str(rec.get("path") or rec.get("spec") or "?")).name
        items.setdefault(rec["sha256"], (name, tuple(rec.get("policies", ())), "recorded by an imported run"))
    return "<ul>" + "".join(f"<li><code>{esc(name)}</code>: {esc(', '.join(pols))} (SHA-256 <code>{esc(sha[:12])}"
                            f"</code>; {esc(how)})</li>" for sha, (name, pols, how) in items.items()) + "</ul>"
