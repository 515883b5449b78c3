"""Chapter 5: R1-rel keeps decoys, what the relevance tier keeps, and why a near-perfect filter cannot give the paper's
composition (a seeded noisy filter; memories only, no decider)."""

from __future__ import annotations

import html
from typing import Sequence

import pandas as pd

from crossprofile_lib.book.display import name_html, num
from crossprofile_lib.book.experiments import user_copy
from crossprofile_lib.book.models import run_paper_model, status_line
from crossprofile_lib.book.paper import paper_text
from crossprofile_lib.book.runs import REFERENCE, Run
from crossprofile_lib.book.tables import CELL_LABELS, KEPT, cell_value, contrast_row
from crossprofile_lib.design import CLASSIC, FIXED_K_DEFAULT
from crossprofile_lib.paper_figures import paper_item
from crossprofile_lib.run.relevance_filter import tiering_compositions, tiering_summary
from crossprofile_lib.stats import tables as st
from crossprofile_lib.stats.format import fmt_p

#: The policies chapter 5 compares; with the BAL repair for the composition; the fixed-k controls.
REL = ("R1", "R1-rel", "R1-rel-oracle", "B4", "Random")
REL_AND_BAL = REL + ("BAL", "BAL-oracle")
FIXED_K = ("R1-k7", "R1-rel-k7", "B4-k7", "Random-k7", "M1-k7")
#: The paper model whose R1-rel composition the noisy filter is compared with.
QWEN = "Qwen2.5-7B-Instruct"

#: The chapter's note on the reference decider's R1-rel (folded into its provenance box).
ORACLE_NOTE = (
    "note", "The reference decider's relevance filter is the oracle",
    f"The {REFERENCE} has no language model, so its R1-rel uses the roles' relevance (support and decoy "
    "relevant, irrelevant not): for it R1-rel and R1-rel-oracle are the same policy. A model backend's R1-rel uses "
    "that model's own relevance-filter call, which sees only the description, the options and the fact texts.")


def relevance_takeaways(ch, cells: dict, holm: dict) -> list[str]:
    """H3 and the classic cell's R1-rel - R1 per run, the paper's values, and the social-proof run."""
    def classic(r, policy):
        return cell_value(ch.at(r, cells[r.label]), policy, "classic")
    lines = []
    for r in ch.shown:
        h3 = contrast_row(holm[r.label], "H3")
        same = "" if r.is_reference else (
            f" Paper, same model: H3 {paper_text('h3/H3: R1-rel - R1', run=r)}; classic cell R1-rel - R1 "
            f"{paper_text('classic-rel/R1-rel - R1', run=r)}; {html.escape(status_line(r))}")
        if h3 is not None:
            lines.append(f"{name_html(r)}: over all eight variants H3 = R1-rel - R1 = <b>{h3.estimate:+.1f}</b> points "
                         f"[{h3.lo:.1f}, {h3.hi:.1f}] (Holm p = {fmt_p(h3.p_adjusted)}); in the classic cell ({CLASSIC}) "
                         f"R1-rel - R1 = <b>{num(classic(r, 'R1-rel') - classic(r, 'R1'), sign=True)}</b> points and "
                         f"R1-rel-oracle - R1 = {num(classic(r, 'R1-rel-oracle') - classic(r, 'R1'), sign=True)} points "
                         f"at r = {ch.budget(r)}.{same}")
    lines.append(f"Paper (every model; beside the reference decider): H3 {paper_text('h3/H3: R1-rel - R1')}; "
                 "classic cell R1-rel - R1 "
                 f"{paper_text('classic-rel/R1-rel - R1')}, oracle {paper_text('classic-rel/oracle relevance - R1')}.")
    sp, ref = ch.sp, ch.ref
    if sp is not None and ref is not None:
        g0 = classic(ref, "R1-rel") - classic(ref, "R1")
        g1 = classic(sp, "R1-rel") - classic(sp, "R1")
        if g0 == g0 and g1 == g1:  # both estimable
            verdict = ("so in this build the weight on speaker labels is what makes R1-rel lose to R1 there"
                       if g1 < 0 <= g0 else
                       "so in this build R1-rel loses to R1 there with and without the weight" if g1 < 0 and g0 < 0 else
                       "so in this build the weight does not make R1-rel lose to R1 there")
            lines.append(f"With a social-proof weight of {ch.params.social_proof:g} the {REFERENCE}'s classic-cell "
                         f"R1-rel - R1 is <b>{num(g1, sign=True)}</b> points ({num(classic(sp, 'R1-rel'), suffix='%')} "
                         f"against {num(classic(sp, 'R1'), suffix='%')}); without it, {num(g0, sign=True)} points: "
                         f"{verdict}.")
    return lines


def accuracy_by_variant(ch, r: Run, policies: Sequence[str] = REL) -> pd.DataFrame:
    """Accuracy (%) per policy and variant (``all``: the mean over variants) at the budget the run is shown at."""
    t = ch.at(r, st.accuracy_table(r.df, r.boot))
    return t[t.policy.isin(list(policies))]


def classic_composition(t: pd.DataFrame) -> pd.DataFrame:
    """Kept support / decoy / irrelevant per policy in the classic cell, wide, for ``composition_bars``."""
    return (t[t.cell == CELL_LABELS["classic"]].pivot_table(index="policy", columns="outcome", values="estimate",
                                                            sort=False).reset_index())


def composition_paper_text(run=None) -> str:
    """The paper's classic R1-rel and R1 compositions for a caption (a model run: its own model's only)."""
    if run is not None and not run.is_reference and run_paper_model(run) is None:
        return "none: not one of the paper's models"

    def three(p):
        return " / ".join(paper_text(f"classic-kept/{p} {k}", run=run) for k in ("support", "decoy", "irrelevant"))
    return f"R1-rel: {three('R1-rel')}; R1: {three('R1')}"


def fixed_k(ch) -> list[str]:
    """:data:`FIXED_K` and the fixed-k control of each copy policy of your own (``Mine-k7``)."""
    return list(dict.fromkeys([*FIXED_K, *[f"{u}-k{FIXED_K_DEFAULT}" for u in user_copy(ch.params.user_policies)]]))



def by_decider(ch, runs: Sequence[Run], cells: dict, policies: Sequence[str], outcome: str = "correct") -> pd.DataFrame:
    """The :func:`cell_rows` tables of ``runs`` at their shown budgets, stacked with a ``run`` column."""
    t = pd.concat([ch.at(r, cells[r.label]).assign(run=r.label) for r in runs])
    return t[(t.outcome == outcome) & t.policy.isin(list(policies))]


def relevance_filter_table(r: Run) -> pd.DataFrame:
    """Relevance-filter precision and recall (%) against the roles (:func:`crossprofile_lib.stats.tables.relevance_table`)."""
    return st.relevance_table(r.df, r.boot)


# --------------------------------------------------------------------------- the noisy filter
def paper_filter() -> dict:
    """The paper's R1-rel classic composition (Qwen) and its filter's precision and recall (fractions)."""
    return dict(composition=[paper_item(f"classic-kept/R1-rel {k}").paper[QWEN] for k in ("support", "decoy", "irrelevant")],
                precision=paper_item("relevance-filter/precision").paper["models not separated"] / 100,
                recall=paper_item("relevance-filter/recall").paper["models not separated"] / 100)


def noisy_filter_grid(tpl, tok, seeds: Sequence[int], budget: str, draws: int = 5) -> pd.DataFrame:
    """R1-rel's classic composition with a seeded noisy filter at the paper's quality, then over precision x
        recall in {1.0, 0.9, 0.8, 0.7}^2, with each row's distance to the paper's composition."""
    pf = paper_filter()
    grid = [(pf["precision"], pf["recall"])] + [(p, r) for p in (1.0, 0.9, 0.8, 0.7) for r in (1.0, 0.9, 0.8, 0.7)]
    rows = pd.concat([tiering_summary(tiering_compositions(tpl, tok, p, r, seeds=seeds, budget=budget, draws=draws))
                      for p, r in grid], ignore_index=True)
    euclid = ((rows[list(KEPT)] - pf["composition"]) ** 2).sum(axis=1) ** 0.5
    rows["distance to the paper"] = euclid
    return rows


def noisy_filter_takeaways(rows: pd.DataFrame, budget: str) -> list[str]:
    """What :func:`noisy_filter_grid` shows, in three computed lines (the verdict follows the grid)."""
    pf = paper_filter()
    comp, at_paper = pf["composition"], rows.iloc[0]
    best = rows.iloc[rows["distance to the paper"].idxmin()]
    d0, d1 = at_paper["distance to the paper"], best["distance to the paper"]
    if d1 >= d0:
        verdict = (f"On this grid no filter comes nearer to the paper's composition than the paper's own filter quality "
                   f"(distance {d0:.2f} facts).")
    else:
        verdict = (f"On this grid a filter worse than the paper's reported one comes nearer to its composition "
                   f"(distance {d1:.2f} facts against {d0:.2f} at the paper's filter quality): strict tiering with the "
                   "filter the paper measured does not give the composition it reports.")
    return [
        f"With the paper's filter quality (precision {pf['precision']:.1%}, recall {pf['recall']:.1%}) strict tiering keeps "
        f"{at_paper.kept_support:.2f} / {at_paper.kept_decoy:.2f} / {at_paper.kept_irrelevant:.2f} support / decoy / "
        f"irrelevant facts in {CLASSIC} at r = {budget}; the paper reports "
        f"{comp[0]:.2f} / {comp[1]:.2f} / {comp[2]:.2f} (paper, {QWEN}).",
        f"On this grid the composition nearest the paper's needs a filter of about {best.precision:.0%} precision and "
        f"{best.recall:.0%} recall ({best.kept_support:.2f} / {best.kept_decoy:.2f} / {best.kept_irrelevant:.2f}).",
        verdict,
    ]


def noisy_filter_table(rows: pd.DataFrame) -> pd.DataFrame:
    """:func:`noisy_filter_grid` with the book's column names."""
    return rows.rename(columns={"precision": "filter precision", "recall": "filter recall", "kept_support": "support",
                                "kept_decoy": "decoy", "kept_irrelevant": "irrelevant",
                                "realised_precision": "realised precision", "realised_recall": "realised recall"})
