"""Tables the chapters share: heat maps, cell rows, contrasts with Holm, THE estimate of a policy in a cell
(:func:`cell_entry` / :func:`cell_value`), grid costs and cell gaps."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from crossprofile_lib.backends.ledger import ReferenceDecider
from crossprofile_lib.book.display import mark_kind, mark_text
from crossprofile_lib.book.paper import same_model_values
from crossprofile_lib.book.runs import Run, bootstrap, resolve, unit_column
from crossprofile_lib.design import CLASSIC, MIRROR, PRIMARY_BUDGET
from crossprofile_lib.policies import HEATMAP_POLICIES, parse_policy
from crossprofile_lib.policies.plugins import PLUGINS
from crossprofile_lib.policies.plugins import base as plugin_base
from crossprofile_lib.prompts import decision_prompt
from crossprofile_lib.run.rebuild import rebuild_choice_data, recorded_choice_data
from crossprofile_lib.run.runner import RunConfig, build_requests
from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.contrasts import evaluate_contrasts, load_prereg, parse_prereg
from crossprofile_lib.stats.format import fmt_p
from crossprofile_lib.stats.socialproof import fit_social_proof
from crossprofile_lib.stats.tables import label_effects, means_table
from crossprofile_lib.task.templates import load_templates
from crossprofile_lib.task.variants import VARIANT_NAMES

#: The kept-fact outcomes of a decision row (support, decoy, irrelevant).
KEPT = ("kept_support", "kept_decoy", "kept_irrelevant")


def accuracy_matrix(df: pd.DataFrame, budget: str = PRIMARY_BUDGET, policies: Optional[Sequence[str]] = None,
                    outcome: str = "correct") -> pd.DataFrame:
    """``(policy, variant)`` percentages at one budget (and unbudgeted rows), policies in ``policies`` order;
    default: the heat map's policies, then the run's policies of your own (``POLICY_FILES``)."""
    if policies is None:
        mine = [p for p in dict.fromkeys(df["policy"].astype(str)) if plugin_base(p) in PLUGINS]
        policies = [*HEATMAP_POLICIES, *mine]
    d = df[df["budget_label"].isin([budget, "none"])]
    m = 100 * d.pivot_table(index="policy", columns="variant", values=outcome, aggfunc="mean")
    return m.reindex([p for p in policies if p in m.index])


def at_budget(pre, budget: str):
    """``pre`` with its primary-budget filters moved to ``budget`` (a run without the primary budget)."""
    if budget == PRIMARY_BUDGET:
        return pre

    def move(where: dict) -> dict:
        return {k: (budget if k == "budget_label" and str(v) == PRIMARY_BUDGET else v) for k, v in where.items()}
    return replace(pre, contrasts=tuple(replace(c, terms=tuple(replace(t, where=move(t.where)) for t in c.terms))
                                        for c in pre.contrasts))


def contrasts_with_holm(run: Run, boot, families: Sequence[str] = ("confirmatory",), prereg=None,
                        budget: str = PRIMARY_BUDGET) -> pd.DataFrame:
    """The preregistered contrasts of ``families`` (at ``budget``, :func:`at_budget`) with 95% intervals,
    Holm p-values and **Holm-adjusted intervals**: the percentile interval at the level Holm's step-down tests
    each contrast (``1 - alpha / (m - i)`` for the ``i``-th smallest p), from the same resamples."""
    pre = at_budget(prereg if prereg is not None and not isinstance(prereg, (str, Path)) else load_prereg(prereg), budget)
    res = evaluate_contrasts(run.df, pre, boot)
    res = res[res["family"].isin(families)].reset_index(drop=True)
    res["holm_level"], res["lo_holm"], res["hi_holm"] = np.nan, np.nan, np.nan
    for fam in families:
        sel = res.index[(res["family"] == fam) & res["estimable"] & res["p"].notna()]
        if not len(sel):
            continue
        alpha = pre.families[fam].alpha if fam in pre.families else 0.05
        m = len(sel)
        order = res.loc[sel, "p"].sort_values(kind="stable").index
        for i, k in enumerate(order):
            level = 1 - alpha / (m - i)
            b = TemplateBootstrap(boot.units, boot.idx, level)
            r = evaluate_contrasts(run.df, pre, b).set_index("id").loc[res.at[k, "id"]]
            res.loc[k, ["holm_level", "lo_holm", "hi_holm"]] = [level, r["lo"], r["hi"]]
    return res


def same_model_paper(paper, run: Optional[Run] = None):
    """A contrast's paper values beside ``run`` (:func:`~.paper.same_model_values`; none for a model not in the
    paper); anything not a dict unchanged."""
    return (same_model_values(paper, run) or {}) if isinstance(paper, dict) else paper


def contrast_table(res: pd.DataFrame, run: Optional[Run] = None) -> pd.DataFrame:
    """A display table of :func:`contrasts_with_holm`, paper values (:func:`same_model_paper`) in 'paper' columns."""
    res = res.assign(paper=[same_model_paper(p, run) for p in res["paper"]])
    out = pd.DataFrame({
        "contrast": res["title"].to_numpy(),
        "estimate (points)": (res["estimate"].round(1).to_numpy() if run is None else  # marked at the number
                              [f"{v:+.1f}" + mark_text(mark_kind(run), run) if pd.notna(v) else "–" for v in res["estimate"]]),
        "95% interval": [f"[{l:.1f}, {h:.1f}]" if pd.notna(l) else "–" for l, h in zip(res["lo"], res["hi"])],
        "Holm-adjusted interval": [f"[{l:.1f}, {h:.1f}] ({100 * v:.1f}%)" if pd.notna(l) else "–"
                                   for l, h, v in zip(res["lo_holm"], res["hi_holm"], res["holm_level"])],
        "p": [fmt_p(p) for p in res["p"]], "Holm p": [fmt_p(p) for p in res["p_adjusted"]],
        "reject at 0.05": res["reject"].to_numpy()}, index=res["id"].to_numpy())
    for m in dict.fromkeys(m for p in res["paper"] if isinstance(p, dict) for m in p):
        out[("paper: " + m)] = [p.get(m, "") if isinstance(p, dict) else "" for p in res["paper"]]
    return out


#: How the cells are labelled: single-variant cells, pooled cells as secondary rows (SPEC section 3, revised).
CELL_LABELS = {"classic": f"classic ({CLASSIC})", "mirror": f"mirror ({MIRROR})"}
POOLED_LABELS = {"classic": "pooled classic (PS*)", "mirror": "pooled mirror (SP*)"}


def cell_rows(run: Run, boot, outcomes: Sequence[str] = ("correct",), pooled: bool = True) -> pd.DataFrame:
    """Per policy x budget x cell, long format: the classic (``PSP``) and mirror (``SPS``) cells, then with ``pooled``
    the pooled ``PS*`` / ``SP*`` cells as secondary rows (:data:`CELL_LABELS`, :data:`POOLED_LABELS`)."""
    df, parts = run.df, []
    cells = {"cell": CELL_LABELS, **({"pooled_cell": POOLED_LABELS} if pooled and "pooled_cell" in df.columns else {})}
    for col, labels in cells.items():
        d = df[df[col].isin(["classic", "mirror"])]
        if len(d):
            parts.append(means_table(d, ["policy", "budget_label", col], list(outcomes), boot)
                         .rename(columns={col: "cell"}).assign(cell=lambda x: x["cell"].map(labels)))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["policy", "budget_label", "cell", "outcome", "estimate", "lo", "hi"])


def select(t: pd.DataFrame, policies: Optional[Sequence[str]] = None, outcome: Optional[str] = None,
           cell: Optional[str] = None, budgets: Optional[Sequence[str]] = None) -> pd.DataFrame:
    """Rows of a long table for ``policies``, ``outcome``, ``cell`` (name or label) and ``budgets``; None: any."""
    if policies is not None:
        t = t[t["policy"].isin(list(policies))]
    if outcome is not None:
        t = t[t["outcome"] == outcome]
    if cell is not None:
        t = t[t["cell"] == CELL_LABELS.get(cell, cell)]
    if budgets is not None:
        t = t[t["budget_label"].astype(str).isin([str(b) for b in budgets])]
    return t


def cells_by_run(runs, outcomes: Sequence[str] = ("correct",), pooled: bool = True) -> dict:
    """Run label -> :func:`cell_rows` of that run (with its bootstrap) for ``outcomes``."""
    return {r.label: cell_rows(r, r.boot, outcomes, pooled=pooled) for r in runs if r is not None}


def holm_by_run(ch, runs=None, families: Sequence[str] = ("confirmatory",)) -> dict:
    """Run label -> :func:`contrasts_with_holm` at the budget chapter ``ch`` shows that run at."""
    return {r.label: contrasts_with_holm(r, r.boot, families=families, budget=ch.budget(r))
            for r in (ch.shown if runs is None else runs)}


def net_lead_where(ch, r: Run) -> dict:
    """prereg.yaml's net-lead rows (``settings.net_lead_where``), at the budget ``r`` is shown at."""
    w = dict(load_prereg().settings["net_lead_where"])
    if "budget_label" in w:
        w["budget_label"] = ch.budget(r)
    return w


def contrast_row(res: pd.DataFrame, cid: str):
    """The row of contrast ``cid``, or None when it is absent or not estimable."""
    t = res.set_index("id")
    return t.loc[cid] if cid in t.index and t.loc[cid].estimable else None


def paper_by_title(res: pd.DataFrame, run: Optional[Run] = None) -> dict:
    """Contrast title -> its paper values (:func:`same_model_paper`), for the forest plot."""
    return {row.title: same_model_paper(row.paper, run) for row in res.itertuples()}


def not_estimable_reason(res: pd.DataFrame) -> str:
    """Why a run's contrasts are not estimable (their reasons, or that the run lacks what they need)."""
    return "; ".join(sorted(set(res.reason.astype(str)))) or "the run lacks the policies or cells"


def cell_entry(t: pd.DataFrame, policy: str, cell: str, outcome: str = "correct"):
    """The row of ``policy`` in ``cell`` (name or label) and ``outcome`` of a :func:`cell_rows` table, or None."""
    v = t[(t["policy"] == policy) & (t["cell"] == CELL_LABELS.get(cell, cell))]
    if "outcome" in v.columns:
        v = v[v["outcome"] == outcome]
    return v.iloc[0] if len(v) else None


def cell_value(t: pd.DataFrame, policy: str, cell: str, outcome: str = "correct") -> float:
    """The estimate of :func:`cell_entry` (NaN when absent)."""
    r = cell_entry(t, policy, cell, outcome)
    return float(r["estimate"]) if r is not None else float("nan")


def grid_calls(templates: Sequence[str], seeds: Sequence[int], budgets: Sequence[str], policies: Sequence[str],
               variants: Optional[Sequence[str]] = None, n_agents: int = 4, sample: int = 400,
               seed: int = 0) -> dict:
    """How many model calls a grid makes and the mean prompt tokens of its decision calls.

    Decision requests are built as the runner builds them (the reference decider standing in); relevance calls:
    one per task for ``R1-rel``, stance calls one per task for ``BAL``, B3 summaries one per task and budget.
    Tokens: the offline tokenizer over a seeded sample of rendered prompts."""
    specs = [parse_policy(p) for p in policies]
    copy = [s.name for s in specs if s.selection != "generated"]
    cfg = RunConfig(backend="ledger", templates=list(templates), seeds=list(seeds), budgets=list(budgets),
                    policies=copy, variants=list(variants or VARIANT_NAMES), n_agents=n_agents)
    tpl = load_templates([str(resolve(t)) for t in templates])
    stub = ReferenceDecider()
    reqs = [r for r, _ in build_requests(tpl, cfg, stub)]
    tasks = len(tpl) * len(cfg.variants) * len(cfg.seeds)
    pick = np.random.default_rng(seed).choice(len(reqs), size=min(sample, len(reqs)), replace=False) if reqs else []
    toks = [stub.tokenizer.count(decision_prompt(reqs[i].task, reqs[i].memory, reqs[i].option_order).text)
            for i in pick]
    n_b3 = sum(s.selection == "generated" for s in specs) * len(budgets) * tasks
    return dict(tasks=tasks, decisions=len(reqs) + n_b3,
                relevance_calls=tasks if any(s.base == "R1-rel" for s in specs) else 0,
                stance_calls=tasks if any(s.base == "BAL" for s in specs) else 0,
                b3_calls=n_b3, mean_prompt_tokens=float(np.mean(toks)) if toks else 0.0)


def cell_gaps(run: Run, boot, policies: Sequence[str], budget: str = PRIMARY_BUDGET) -> pd.DataFrame:
    """Per policy: classic minus mirror accuracy and the mean over variants (points, 95% intervals)."""
    have = set(run.df["policy"])
    cs = [c for p in policies if p in have for c in (
        {"id": f"{p}|gap", "title": f"{p}: classic - mirror", "where": {"policy": p},
         "terms": [{"weight": 1, "where": {"cell": "classic"}}, {"weight": -1, "where": {"cell": "mirror"}}]},
        {"id": f"{p}|mean", "title": f"{p}: mean over variants", "where": {"policy": p}, "terms": [{"weight": 1, "where": {}}]})]
    if not cs:
        return pd.DataFrame()
    doc = {"defaults": {"outcome": "correct", "scale": 100, "where": {"budget_label": [budget, "none"]}},
           "contrasts": cs}
    res = evaluate_contrasts(run.df, parse_prereg(doc, "<cell gaps>"), boot, template_col=unit_column(run.df))
    res["policy"] = res["id"].str.split("|").str[0]
    res["quantity"] = res["id"].str.split("|").str[1].map({"gap": "classic - mirror (points)",
                                                            "mean": "mean accuracy (%)"})
    return res


def social_proof_fit(run: Run, fit_resamples: Optional[int] = 1000) -> dict:
    """Fit the reference decider's (social proof, irrelevant weight, inverse temperature) to a run's
    decisions: the option features the run recorded, else from its memories rebuilt from its config."""
    cfg = run.header.get("config", {})
    paths = [str(resolve(t)) for t in cfg.get("templates", ["templates"])]
    data, info = recorded_choice_data(run.df) or rebuild_choice_data(run.df, cfg, templates=paths)
    out = fit_social_proof(data, run.boot if run.boot is not None else bootstrap(run, fit_resamples or 1000),
                           fit_resamples)
    out["rebuild"] = info
    return out


def label_effect_rows(run: Run, boot, pooled: bool = True) -> pd.DataFrame:
    """:func:`~crossprofile_lib.stats.tables.label_effects` per cell (as :func:`cell_rows`) and over all variants."""
    labels = {**CELL_LABELS, "all": "all variants"}
    t = label_effects(run.df, boot)
    if t.empty:
        return t
    parts = [t[t["cell"].isin(list(labels))].assign(cell=lambda x: x["cell"].map(labels))]
    if pooled and "pooled_cell" in run.df.columns:
        p = label_effects(run.df.assign(cell=run.df["pooled_cell"]), boot)
        parts.append(p[p["cell"].isin(list(POOLED_LABELS))].assign(cell=lambda x: x["cell"].map(POOLED_LABELS)))
    return pd.concat(parts, ignore_index=True)
