"""Chapter 15: the reference decider's grid under the messy protocol at each extraction level and along the opinion
rate, beside the scripted grid; :func:`messy_takeaways` says which findings keep their sign and which flip. Runs
``runs/ledger-messy-<level>-op<rate>`` (:func:`messy_run`); the model level needs a model backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from crossprofile_lib.book.runs import Run, bootstrap, ensure_run, reference_tokenizer, unit_column
from crossprofile_lib.book.tables import contrasts_with_holm, select
from crossprofile_lib.design import CLASSIC, GROUP_SIZE_POLICIES, MIRROR, PRIMARY_BUDGET
from crossprofile_lib.run.runner import RunConfig
from crossprofile_lib.stats.contrasts import evaluate_contrasts, parse_prereg
from crossprofile_lib.stats.tables import means_table
from crossprofile_lib.task.extraction import FUZZY_THRESHOLD, MODEL_UNAVAILABLE
from crossprofile_lib.task.messy import DEFAULT_OPINION_RATE

#: the extraction levels the reference grid runs (``model`` needs a model backend)
MESSY_LEVELS = ("oracle", "exact", "fuzzy")
#: the opinion-rate sweep, run at :data:`SWEEP_LEVEL`
MESSY_RATES = (0.0, 0.25, 0.5, 1.0)
SWEEP_LEVEL = "exact"
#: the policies of the chapter (the paper's copy policies, relevance-first, BAL and the controls)
MESSY_POLICIES = GROUP_SIZE_POLICIES
#: the policies whose compositions and accuracy the chapter shows
SHOWN = ("R1", "B4", "Random", "R1-rel", "BAL")
FINDINGS = (("H1", "H1: R1 - B4 swings with who holds the decoys"), ("H2", "H2: R1 - Random over all variants"),
            ("H3", "H3: R1-rel - R1 over all variants"), ("classic-R1-B4", "classic cell: R1 - B4"),
            ("mirror-R1-B4", "mirror cell: R1 - B4"), ("swing", "classic/mirror swing: (R1 - B4 | classic) - "
                                                                     "(R1 - B4 | mirror)"))


def messy_run(runs_root: str | Path, templates: Sequence[str], seeds: Sequence[int], budgets: Sequence[str],
              extraction: str, opinion_rate: float = DEFAULT_OPINION_RATE, tokenizer: Optional[str] = None,
              variants: Optional[Sequence[str]] = None) -> Run:
    """The reference decider's grid under the messy protocol (``runs/ledger-messy-<level>-op<rate>``)."""
    tok, why = reference_tokenizer(tokenizer)
    cfg = RunConfig(backend="ledger", templates=list(templates), seeds=list(seeds), budgets=list(budgets),
                    policies=list(MESSY_POLICIES), **({"variants": list(variants)} if variants else {}),
                    tokenizer=tok, protocol="messy", extraction=extraction, opinion_rate=float(opinion_rate))
    run = ensure_run(Path(runs_root) / f"ledger-messy-{extraction}-op{opinion_rate:g}", cfg)
    run.pricing_note = why
    return run


@dataclass
class MessyStudy:
    """The scripted grid, the messy grid per extraction level and the opinion-rate sweep."""

    scripted: Run
    levels: dict = field(default_factory=dict)      # level -> Run (default opinion rate)
    sweep: dict = field(default_factory=dict)       # opinion rate -> Run (SWEEP_LEVEL)
    budget: str = PRIMARY_BUDGET
    n_resamples: int = 1000
    boot_seed: int = 0

    @property
    def variants(self) -> dict:
        """``{name: run}``: scripted, then each level (the names the tables and figures use)."""
        return {"scripted": self.scripted, **{f"messy, {k}": r for k, r in self.levels.items()}}


def messy_study(ch, levels: Sequence[str] = MESSY_LEVELS, rates: Sequence[float] = MESSY_RATES) -> MessyStudy:
    """Run (or load) the chapter's grids with the chapter's parameters (templates, seeds, variants, tokenizer)."""
    p = ch.params
    budget = PRIMARY_BUDGET if PRIMARY_BUDGET in [str(b) for b in p.budgets] else str(p.budgets[0])
    common = dict(templates=p.templates, seeds=p.seeds, budgets=[budget], tokenizer=p.tokenizer, variants=p.variants)
    st = MessyStudy(ch.ref, budget=budget, n_resamples=p.n_resamples, boot_seed=p.boot_seed)
    for lv in levels:
        st.levels[lv] = messy_run(p.runs_root, extraction=lv, opinion_rate=DEFAULT_OPINION_RATE, **common)
    for r in rates:
        st.sweep[float(r)] = (st.levels[SWEEP_LEVEL] if float(r) == DEFAULT_OPINION_RATE and SWEEP_LEVEL in st.levels
                              else messy_run(p.runs_root, extraction=SWEEP_LEVEL, opinion_rate=r, **common))
    for r in [st.scripted, *st.levels.values(), *st.sweep.values()]:
        if r.boot is None:
            r.boot = bootstrap(r, st.n_resamples, st.boot_seed)
    return st


def _at(run: Run, budget: str, policies: Sequence[str], variants: Optional[Sequence[str]] = None) -> pd.DataFrame:
    """``run``'s rows at ``budget`` for ``policies`` (and ``variants``; None: every variant)."""
    d = select(run.df, policies, budgets=[budget])
    return d if variants is None else d[d["variant"].isin(list(variants))]


def merge_table(st: MessyStudy) -> pd.DataFrame:
    """Per extraction level: claims per discussion, merge precision and recall, split and rare-looking rates (%)."""
    rows = []
    for lv, run in st.levels.items():
        d = run.df.drop_duplicates(["template_id", "variant", "seed"])
        rows.append({"extraction": lv, "claims per discussion": d["n_claims"].mean(),
                     "merge precision (%)": 100 * d["merge_precision"].mean(),
                     "merge recall (%)": 100 * d["merge_recall"].mean(),
                     "shared facts split (%)": 100 * d["split_rate"].mean(),
                     "shared facts looking rare (%)": 100 * d["rare_rate"].mean()})
    return pd.DataFrame(rows)


def composition_table(st: MessyStudy, cell: str = CLASSIC) -> pd.DataFrame:
    """Kept facts, claim lines and accuracy (%) per policy in ``cell``, one column block per protocol."""
    rows = []
    for name, run in st.variants.items():
        d = _at(run, st.budget, SHOWN, [cell])
        g = d.groupby("policy", sort=False)
        t = pd.DataFrame({"support": g["kept_support"].mean(), "decoy": g["kept_decoy"].mean(),
                          "irrelevant": g["kept_irrelevant"].mean(), "lines": g["n_kept"].mean(),
                          "accuracy (%)": 100 * g["correct"].mean()}).reindex([p for p in SHOWN if p in set(d["policy"])])
        rows.append(t.assign(protocol=name).reset_index())
    return pd.concat(rows, ignore_index=True)


def accuracy_by_variant(st: MessyStudy) -> pd.DataFrame:
    """Accuracy (%) per policy (rows) and attribution variant (columns), one row block per protocol."""
    out = []
    for name, run in st.variants.items():
        t = 100 * _at(run, st.budget, SHOWN).pivot_table(index="policy", columns="variant", values="correct", aggfunc="mean")
        t = t.reindex([p for p in SHOWN if p in t.index])
        t.insert(0, "protocol", name)
        out.append(t.reset_index())
    return pd.concat(out, ignore_index=True)


def _cell_contrasts(run: Run, budget: str) -> pd.DataFrame:
    """The mirror-cell R1 - B4 gap and the classic/mirror swing (points), in the language of ``prereg.yaml``."""
    r1b4 = [{"weight": 1, "where": {"policy": "R1"}}, {"weight": -1, "where": {"policy": "B4"}}]
    cs = [{"id": "mirror-R1-B4", "title": "mirror", "where": {"cell": "mirror"}, "terms": r1b4},
          {"id": "swing", "title": "swing", "terms": [
              {"weight": 1, "where": {"cell": "classic", "policy": "R1"}},
              {"weight": -1, "where": {"cell": "classic", "policy": "B4"}},
              {"weight": -1, "where": {"cell": "mirror", "policy": "R1"}},
              {"weight": 1, "where": {"cell": "mirror", "policy": "B4"}}]}]
    doc = {"defaults": {"outcome": "correct", "scale": 100, "where": {"budget_label": budget}}, "contrasts": cs}
    return evaluate_contrasts(run.df, parse_prereg(doc, "<messy cells>"), run.boot, template_col=unit_column(run.df))


def _finding_rows(run: Run, budget: str) -> list[dict]:
    """The :data:`FINDINGS` of ``run`` at ``budget`` (points, 95% interval), those it can estimate."""
    res = contrasts_with_holm(run, run.boot, families=("confirmatory", "exploratory"), budget=budget)
    res = pd.concat([res, _cell_contrasts(run, budget)], ignore_index=True).set_index("id")
    return [{"finding": title, "id": fid, "estimate": res.loc[fid, "estimate"], "lo": res.loc[fid, "lo"],
             "hi": res.loc[fid, "hi"]} for fid, title in FINDINGS if fid in res.index]


def findings(st: MessyStudy) -> pd.DataFrame:
    """H1-H3 and the R1 - B4 gaps per protocol (points, 95% interval), and each one's :func:`_verdict`."""
    t = pd.DataFrame([{"protocol": name, **r} for name, run in st.variants.items() for r in _finding_rows(run, st.budget)])
    if t.empty:
        return t
    base = t[t["protocol"] == "scripted"].set_index("id")
    return t.assign(verdict=["reference" if r["protocol"] == "scripted" or r["id"] not in base.index else
                             _verdict(*base.loc[r["id"], ["estimate", "lo", "hi"]], r["estimate"], r["lo"], r["hi"])
                             for _, r in t.iterrows()])


def _clear(lo: float, hi: float) -> bool:
    return bool(lo > 0 or hi < 0)


def _verdict(be, blo, bhi, e, lo, hi) -> str:
    """``survives`` (same side, same clarity), ``flips`` (clear on the other side), ``weakens`` (clear, now covers 0),
    ``strengthens`` (the other way round)."""
    if any(pd.isna(x) for x in (be, e, lo, hi, blo, bhi)):
        return "not estimable"
    side = np.sign(be)
    if _clear(lo, hi) and side != 0 and np.sign(e) == -side:
        return "flips"
    if _clear(blo, bhi) and not _clear(lo, hi):
        return "weakens"
    if not _clear(blo, bhi) and _clear(lo, hi):
        return "strengthens"
    return "survives"


def sweep_table(st: MessyStudy) -> pd.DataFrame:
    """Per opinion rate: classic and mirror accuracy of R1 and B4 (long) for ``figures.line_by``."""
    parts = []
    for rate, run in sorted(st.sweep.items()):
        d = _at(run, st.budget, ["R1", "B4"], [CLASSIC, MIRROR])
        if len(d):
            t = means_table(d.assign(cell=d["variant"]), ["policy", "cell"], ["correct"], run.boot)
            parts.append(t.assign(opinion_rate=rate))
    if not parts:
        return pd.DataFrame(columns=["policy", "cell", "opinion_rate", "estimate", "lo", "hi", "series"])
    t = pd.concat(parts, ignore_index=True)
    t["series"] = t["policy"] + " in " + t["cell"]
    return t


def sweep_findings(st: MessyStudy) -> pd.DataFrame:
    """The findings (points) per opinion rate at :data:`SWEEP_LEVEL`."""
    return pd.DataFrame([{"opinion_rate": rate, **r} for rate, run in sorted(st.sweep.items())
                         for r in _finding_rows(run, st.budget)])


def _pts(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{x:+.1f}"


def messy_takeaways(st: MessyStudy, f: pd.DataFrame, m: pd.DataFrame, comp: pd.DataFrame,
                    sw: pd.DataFrame) -> list[str]:
    """The chapter's takeaways, every number and verdict read from the runs."""
    out = []
    for _, r in m.iterrows():
        out.append(f"Under <b>{r['extraction']}</b> extraction a discussion yields {r['claims per discussion']:.1f} "
                   f"claims; merge recall {r['merge recall (%)']:.0f}%, precision "
                   f"{'n/a' if pd.isna(r['merge precision (%)']) else format(r['merge precision (%)'], '.0f') + '%'}; "
                   f"{r['shared facts looking rare (%)']:.0f}% of shared facts end up with a claim that shows a single "
                   f"speaker.")
    if not f.empty:
        for lv in [k for k in st.variants if k != "scripted"]:
            d = f[f["protocol"] == lv]
            flips, keeps = (list(d.loc[d["verdict"] == v, "finding"]) for v in ("flips", "survives"))
            other = [f"{r['finding']} {r['verdict']}" for _, r in d.iterrows()
                     if r["verdict"] not in ("flips", "survives")]
            out.append(f"<b>{lv}</b>: " + "; ".join(x for x in (
                ("flips: " + ", ".join(flips)) if flips else "no finding flips",
                ("keeps its verdict: " + ", ".join(keeps)) if keeps else "",
                ", ".join(other)) if x) + ".")
    if not comp.empty:
        c = comp[comp["policy"] == "R1"].set_index("protocol")
        if "scripted" in c.index:
            for name in c.index.drop("scripted"):
                out.append(f"R1 in the classic cell ({CLASSIC}) keeps {c.loc[name, 'support']:.2f} / "
                           f"{c.loc[name, 'decoy']:.2f} / {c.loc[name, 'irrelevant']:.2f} support / decoy / irrelevant "
                           f"facts under {name} (scripted: {c.loc['scripted', 'support']:.2f} / "
                           f"{c.loc['scripted', 'decoy']:.2f} / {c.loc['scripted', 'irrelevant']:.2f}); accuracy "
                           f"{c.loc[name, 'accuracy (%)']:.1f}% against {c.loc['scripted', 'accuracy (%)']:.1f}%.")
    if not sw.empty:
        h = sw[sw["finding"] == FINDINGS[0][1]].sort_values("opinion_rate")
        if len(h) > 1:
            out.append(f"Along the opinion-rate sweep ({SWEEP_LEVEL} extraction), H1 goes from "
                       f"{_pts(h['estimate'].iloc[0])} points at rate {h['opinion_rate'].iloc[0]:g} to "
                       f"{_pts(h['estimate'].iloc[-1])} at rate {h['opinion_rate'].iloc[-1]:g}.")
    out.append(f"The fuzzy level merges at rapidfuzz token_sort_ratio &ge; {FUZZY_THRESHOLD:g}. The model level "
               f"is not part of the reference grid: {MODEL_UNAVAILABLE}.")
    return out


def findings_pivot(f: pd.DataFrame) -> pd.DataFrame:
    """:func:`findings` as a display table: one row per finding, ``estimate [lo, hi] (verdict)`` per protocol."""
    if f.empty:
        return f
    cell = ["not estimable in this grid" if pd.isna(r["estimate"]) or pd.isna(r["lo"]) else
            f"{r['estimate']:+.1f} [{r['lo']:+.1f}, {r['hi']:+.1f}]" + ("" if r["verdict"] == "reference"
                                                                       else f" ({r['verdict']})")
            for _, r in f.iterrows()]
    t = f.assign(value=cell).pivot(index="finding", columns="protocol", values="value")
    order = [t for _, t in FINDINGS if t in set(f["finding"])]
    cols = ["scripted"] + [c for c in t.columns if c != "scripted"]
    return t.reindex(order)[cols]


def cell_bars(st: MessyStudy, cell: str = CLASSIC, policies: Sequence[str] = SHOWN) -> pd.DataFrame:
    """Accuracy (%) with 95% intervals per protocol and policy in ``cell``, long, for ``figures.interval_bars``."""
    parts = []
    for name, run in st.variants.items():
        d = _at(run, st.budget, policies, [cell])
        if len(d):
            t = means_table(d, ["policy"], ["correct"], run.boot)
            parts.append(t.assign(protocol=name.replace("messy, ", "")))
    if not parts:
        return pd.DataFrame()
    t = pd.concat(parts, ignore_index=True)
    order = {p: i for i, p in enumerate(policies)}
    return t.sort_values("policy", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def runs_of(st: MessyStudy) -> list:
    """Every run of the study (for figure stamps and captions)."""
    return [st.scripted, *st.levels.values(), *[r for r in st.sweep.values() if r not in st.levels.values()]]
