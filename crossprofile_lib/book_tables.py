"""Tables the book's chapters share, and the paper-value comparison.

* :func:`accuracy_matrix` -- ``(policy, variant)`` accuracy at one budget, for the heat maps;
* :func:`contrasts_with_holm` / :func:`contrast_table` -- the preregistered contrasts with
  95% and Holm-adjusted intervals;
* :func:`load_paper_figures` / :func:`paper_vs_suite` -- every number of SPEC section 10
  (``data/paper_figures.yaml``) beside this suite's estimate, the paper's values in columns
  labelled ``paper`` and this suite's in columns naming the backend and model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from .book import PAPER_FIGURES, Run, bootstrap, fmt_ci, resolve, unit_column

HEATMAP_POLICIES = ("R1", "B4", "Random", "M1", "R1-rel", "R1-rel-oracle", "BAL", "BAL-oracle",
                    "R1-k7", "B4-k7", "Random-k7", "M1-k7", "R1-rel-k7",
                    "private-only", "shared-only", "ALL", "REF", "EMPTY")


def accuracy_matrix(df: pd.DataFrame, budget: str = "0.6", policies: Sequence[str] = HEATMAP_POLICIES,
                    outcome: str = "correct") -> pd.DataFrame:
    """``(policy, variant)`` percentages at one budget (unbudgeted and fixed-k rows included),
    policies in ``policies`` order (those absent from the run left out)."""
    d = df[df["budget_label"].isin([budget, "none"])]
    m = 100 * d.pivot_table(index="policy", columns="variant", values=outcome, aggfunc="mean")
    return m.reindex([p for p in policies if p in m.index])


def contrasts_with_holm(run: Run, boot, families: Sequence[str] = ("confirmatory",), prereg=None) -> pd.DataFrame:
    """The preregistered contrasts of ``families`` with 95% percentile intervals, Holm-adjusted
    p-values and **Holm-adjusted intervals**: the percentile interval at the level at which
    Holm's step-down procedure tests that contrast (``1 - alpha / (m - i)`` for the contrast with
    the ``i``-th smallest p, ``i = 0 .. m-1``), drawn from the same resamples. Such an interval
    excludes the null value when Holm rejects (up to the bootstrap's discreteness).
    """
    from .stats.bootstrap import TemplateBootstrap
    from .stats.contrasts import evaluate_contrasts, load_prereg
    pre = prereg if prereg is not None and not isinstance(prereg, (str, Path)) else load_prereg(prereg)
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


def contrast_table(res: pd.DataFrame) -> pd.DataFrame:
    """A display table of :func:`contrasts_with_holm` (paper values in columns labelled 'paper')."""
    out = pd.DataFrame({
        "contrast": res["title"].to_numpy(),
        "estimate (points)": res["estimate"].round(1).to_numpy(),
        "95% interval": [f"[{l:.1f}, {h:.1f}]" if pd.notna(l) else "–" for l, h in zip(res["lo"], res["hi"])],
        "Holm-adjusted interval": [f"[{l:.1f}, {h:.1f}] ({100 * v:.1f}%)" if pd.notna(l) else "–"
                                   for l, h, v in zip(res["lo_holm"], res["hi_holm"], res["holm_level"])],
        "p": res["p"].to_numpy(), "Holm p": res["p_adjusted"].to_numpy(),
        "reject at 0.05": res["reject"].to_numpy()}, index=res["id"].to_numpy())
    models = list(dict.fromkeys(m for p in res["paper"] if isinstance(p, dict) for m in p))
    for m in models:
        out[("paper: " + m)] = [p.get(m, "") if isinstance(p, dict) else "" for p in res["paper"]]
    return out



from .paper_figures import PaperFiguresError, PaperItem, load_paper_figures  # noqa: E402,F401  (the one loader)


def suite_values(items: Sequence[PaperItem], run: Run, boot, data: str = "crossprofile") -> list[Optional[dict]]:
    """This suite's estimate and interval for each item whose ``data`` matches (else None)."""
    from .stats.contrasts import PreregError, evaluate_contrasts, parse_prereg
    idx = [k for k, it in enumerate(items) if it.data == data and it.measure]
    out: list[Optional[dict]] = [None] * len(items)
    contrasts = []
    for k in idx:
        m = dict(items[k].measure)
        contrasts.append({"id": f"item{k}", **{key: m[key] for key in ("outcome", "scale", "where", "terms") if key in m}})
    for k, c in zip(idx, contrasts):  # one by one: a column missing for one item must not sink the rest
        doc = {"defaults": {"outcome": "correct", "scale": 100, "where": {"budget_label": "0.6"}},
               "contrasts": [c]}
        try:
            r = evaluate_contrasts(run.df, parse_prereg(doc, str(PAPER_FIGURES)), boot,
                                   template_col=unit_column(run.df)).iloc[0]
        except (PreregError, KeyError, ValueError) as e:
            out[k] = dict(estimate=np.nan, lo=np.nan, hi=np.nan, reason=str(e))
            continue
        out[k] = dict(estimate=r.estimate, lo=r.lo, hi=r.hi, reason=r.reason)
    return out


def paper_vs_suite(items: Sequence[PaperItem], runs: dict, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """A wide table: one row per paper number; columns ``('paper', model)`` with the paper's
    values and ``('this suite', run label)`` with this suite's estimate [95% interval].

    ``runs`` maps a data kind (``crossprofile``, ``hiddenbench``) to a list of runs.
    """
    models = list(dict.fromkeys(m for it in items for m in it.paper))
    rows = pd.DataFrame({("result", ""): [it.result for it in items],
                         ("quantity", ""): [it.label for it in items],
                         ("unit", ""): [it.unit for it in items]})
    for m in models:
        rows[("paper", m)] = [it.paper.get(m, "") for it in items]
    for data, rs in runs.items():
        for run in rs:
            if run is None:
                continue
            vals = suite_values(items, run, bootstrap(run, n_resamples, seed), data)
            col = ("this suite", run.label + ("" if data == "crossprofile" else f" · {data}"))
            rows[col] = [("–" if v is None else "not in this run" if np.isnan(v["estimate"]) else
                          fmt_ci(v["estimate"], v["lo"], v["hi"], 2 if it.unit == "facts" else 1))
                         for it, v in zip(items, vals)]
    rows.columns = pd.MultiIndex.from_tuples(rows.columns)
    return rows



def grid_calls(templates: Sequence[str], seeds: Sequence[int], budgets: Sequence[str], policies: Sequence[str],
               variants: Optional[Sequence[str]] = None, n_agents: int = 4, sample: int = 400,
               seed: int = 0) -> dict:
    """How many model calls a grid makes, and how many prompt tokens its decision calls carry.

    Decision requests are built exactly as the runner builds them (with the reference decider as
    a stand-in, so nothing is called); relevance-filter calls are one per task when a model
    ``R1-rel`` policy runs, stance calls one per task for ``BAL``, B3 summaries one per task and
    budget. Prompt tokens are the offline tokenizer's count over a seeded sample of rendered
    decision prompts (a model's own tokenizer differs by a few percent).
    """
    from .decider import ReferenceDecider
    from .policies import parse_policy
    from .prompts import decision_prompt
    from .runner import RunConfig, build_requests
    from .templates import load_templates
    from .variants import VARIANT_NAMES
    specs = [parse_policy(p) for p in policies]
    copy = [s.name for s in specs if s.selection != "generated"]
    cfg = RunConfig(backend="ledger", templates=list(templates), seeds=list(seeds), budgets=list(budgets),
                    policies=copy, variants=list(variants or VARIANT_NAMES), n_agents=n_agents)
    tpl = load_templates([str(resolve(t)) for t in templates])
    stub = ReferenceDecider()
    reqs = [r for r, _ in build_requests(tpl, cfg, stub)]
    tasks = len(tpl) * len(cfg.variants) * len(cfg.seeds)
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(reqs), size=min(sample, len(reqs)), replace=False) if reqs else []
    toks = [stub.tokenizer.count(decision_prompt(reqs[i].task, reqs[i].memory, reqs[i].option_order).text)
            for i in pick]
    n_b3 = sum(s.selection == "generated" for s in specs) * len(budgets) * tasks
    return dict(tasks=tasks, decisions=len(reqs) + n_b3,
                relevance_calls=tasks if any(s.base == "R1-rel" for s in specs) else 0,
                stance_calls=tasks if any(s.base == "BAL" for s in specs) else 0,
                b3_calls=n_b3, mean_prompt_tokens=float(np.mean(toks)) if toks else 0.0)


def cell_gaps(run: Run, boot, policies: Sequence[str], budget: str = "0.6") -> pd.DataFrame:
    """Per policy: classic-cell minus mirror-cell accuracy and the mean over all variants, in
    points, with 95% intervals (contrasts in the language of ``prereg.yaml``)."""
    from .stats.contrasts import evaluate_contrasts, parse_prereg
    present = [p for p in policies if p in set(run.df["policy"])]
    cs = []
    for p in present:
        cs.append({"id": f"{p}|gap", "title": f"{p}: classic - mirror", "where": {"policy": p},
                   "terms": [{"weight": 1, "where": {"cell": "classic"}}, {"weight": -1, "where": {"cell": "mirror"}}]})
        cs.append({"id": f"{p}|mean", "title": f"{p}: mean over variants", "where": {"policy": p},
                   "terms": [{"weight": 1, "where": {}}]})
    if not cs:
        return pd.DataFrame()
    doc = {"defaults": {"outcome": "correct", "scale": 100, "where": {"budget_label": [budget, "none"]}},
           "contrasts": cs}
    res = evaluate_contrasts(run.df, parse_prereg(doc, "<cell gaps>"), boot, template_col=unit_column(run.df))
    res["policy"] = res["id"].str.split("|").str[0]
    res["quantity"] = res["id"].str.split("|").str[1].map({"gap": "classic - mirror (points)",
                                                            "mean": "mean accuracy (%)"})
    return res
