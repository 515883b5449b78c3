"""R1 against B4 and Random in the classic and mirror cells: the landing page's headline numbers (computed from the
build's runs, never typed in) and chapter 4's findings (H1-H2); chapter 5: R1-rel keeps decoys, what the relevance
tier keeps, and why a near-perfect filter cannot give the paper's composition (a seeded noisy filter, no decider)."""

from __future__ import annotations

import html
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from crossprofile_lib.book.display import HTML, admonition, mark, mark_kind, mark_text, name_html, num, run_mark, variants_phrase
from crossprofile_lib.book.experiments import user_copy
from crossprofile_lib.book.explain import mechanism, why
from crossprofile_lib.book.models import run_paper_model, status_line
from crossprofile_lib.book.paper import load_paper_figures, paper_text, same_model_values, suite_values
from crossprofile_lib.book.runs import REFERENCE, Run
from crossprofile_lib.book.style import model_signal, policy_base
from crossprofile_lib.book.tables import CELL_LABELS, KEPT, cell_entry, cell_rows, cell_value, contrast_row, select
from crossprofile_lib.design import CLASSIC, FIXED_K_DEFAULT, HEADROOM_MIN_POINTS, MIRROR
from crossprofile_lib.paper_figures import paper_item
from crossprofile_lib.run.relevance_filter import tiering_compositions, tiering_summary
from crossprofile_lib.stats import tables as st
from crossprofile_lib.stats.format import fmt_ci, fmt_p
from crossprofile_lib.task.design_check import CLASSIC_RATIO, classic_fit
from crossprofile_lib.task.templates import load_templates
from crossprofile_lib.task.tokenizer import get_tokenizer

#: The policies of the central contrast.
HEAD = ("R1", "B4", "Random")
#: The paper's headline figures (ids in data/paper_figures.yaml) and how each row is labelled here.
HEADLINE = {"classic-r1-b4": f"classic cell {CLASSIC}", "mirror-r1-b4": f"mirror cell {MIRROR}",
            "cp-mean": "mean of 8 variants", "h1": "", "h3": "mean of 8 variants"}


def central_cells(ch) -> dict:
    """Run label -> accuracy per policy and cell (no pooled rows) at the run's shown budget."""
    return {r.label: ch.at(r, cell_rows(r, r.boot, ["correct"], pooled=False)) for r in ch.shown}


#: The pricings the landing page counts R1's exact classic composition under: the paper's two local models'.
FIRST_PRICINGS = (("qwen2.5", "Qwen2.5"), ("llama-3.1", "Llama-3.1"))
#: The classic composition R1 keeps by design (support, decoy, irrelevant), and the paper figure it reproduces.
R1_CLASSIC = (5, 0, 4)
R1_KEPT = tuple(f"classic-kept/R1 {k}" for k in ("support", "decoy", "irrelevant"))


def exact_composition(ch) -> dict:
    """R1's classic-cell composition, which no decider enters: the mean over this build's reference memories (R1,
    PSP, the primary budget) and, per pricing of :data:`FIRST_PRICINGS`, how many of the run's templates keep exactly
    5 / 0 / 4 (:func:`crossprofile_lib.task.design_check.classic_fit`: R1's walk over the classic cell's lines)."""
    ref = ch.ref
    d = ref.df[(ref.df.policy == "R1") & (ref.df.variant == CLASSIC) & (ref.df.budget_label == ch.budget(ref))]
    tpl = [t for t in load_templates([str(x) for x in ch.params.templates]) if t.id in set(d.template_id)]
    counts, missing = {}, {}
    for name, shown in FIRST_PRICINGS:
        try:
            tok = get_tokenizer(name)
        except Exception as e:  # noqa: BLE001 - a pricing that cannot be had here is named, never guessed
            missing[shown] = f"{type(e).__name__}"
            continue
        counts[shown] = sum(classic_fit(t, tok).kept == R1_CLASSIC for t in tpl)
    return dict(mean=tuple(float(d[k].mean()) for k in KEPT), n=len(d), exact=int((d[list(KEPT)].to_numpy()
                == np.array(R1_CLASSIC)).all(axis=1).sum()), templates=len(tpl), counts=counts, missing=missing,
                pricing=ref.header.get("tokenizer", "?"), budget=ch.budget(ref))


def first_finding(ch):
    """The landing page's first screen: ONE finding of the paper, its paper value and this build's beside it, each
    number marked (the composition is exact: no decider enters it), then the accuracy such a memory leads to (the
    decider's part) just below the box."""
    ref = ch.ref
    if ref is None:
        return admonition("warning", "No reference run", "This build has no reference run to set beside the paper.")
    c = exact_composition(ch)
    paper = " / ".join(f"{paper_item(k).paper[QWEN]:.2f}" for k in R1_KEPT)
    if not c["n"]:
        return admonition("warning", "The paper, and this build",
                          f"The paper's R1 keeps {paper} support / decoy / irrelevant facts in the classic cell "
                          f"(paper, {QWEN}); this build has no R1 memory of the classic cell ({CLASSIC}) at r = "
                          f"{html.escape(str(c['budget']))} to set beside it.")
    mean = " / ".join(f"{v:.2f}" for v in c["mean"])
    per = " and ".join(f"{v} of {c['templates']} templates under {k} pricing" for k, v in c["counts"].items())
    miss = "".join(f" ({html.escape(k)}'s tokenizer is not available here: not counted)" for k in c["missing"])
    t = ch.at(ref, cell_rows(ref, ref.boot, ["correct"], pooled=False))
    acc = cell_value(t, "R1", "classic")
    return HTML(
        '<div class="admonition important cp-first-finding"><p class="admonition-title">The paper, and this build'
        "</p>"
        f"<p><b>The paper:</b> in the classic cell (support private, decoys shared) rarest-first (R1) keeps "
        f"<b>{paper}</b> support / decoy / irrelevant facts (paper, {QWEN}).</p>"
        f"<p><b>This build:</b> <b>{mean}</b> {mark('exact')} (its {c['n']} R1 memories there, r = "
        f"{html.escape(str(c['budget']))}); at r = {CLASSIC_RATIO:g} exactly {'/'.join(map(str, R1_CLASSIC))} in {per} "
        f"{mark('exact')}{miss}.</p></div>"
        f"<p>No decider enters what a memory keeps. Which option it leads to is the decider's part: R1 then decides "
        f"<b>{num(acc, suffix='%')}</b> {run_mark(ref)} correctly there (paper: "
        f"{html.escape(paper_text('classic-r1-b4/R1'))}); <a href=\"04-rarest-first.html\">chapter 4</a> has every "
        "variant.</p>")


def headline_line(ch, r, t: pd.DataFrame) -> str:
    """One takeaway line: R1's classic-minus-mirror swing and B4 / Random beside it (HTML)."""
    a = {(p, c): cell_entry(t, p, c) for p in HEAD for c in ("classic", "mirror")}
    if a[("R1", "classic")] is None or a[("R1", "mirror")] is None:
        return f"{name_html(r)}: no classic/mirror decisions at r = {ch.budget(r)}."

    m = run_mark(r)

    def v(p, c):
        x = a[(p, c)]
        return "–" if x is None else f"{x.estimate:.1f}% {m}"
    swing = a[("R1", "classic")].estimate - a[("R1", "mirror")].estimate
    return (f"<b>{name_html(r)}</b>, r = {ch.budget(r)}: rarest-first (R1) "
            f"decides {v('R1', 'classic')} correctly in the classic cell {CLASSIC} (paper: "
            f"{html.escape(paper_text('classic-r1-b4/R1', run=r))}) and {v('R1', 'mirror')} in the "
            f"mirror cell {MIRROR} (paper: {html.escape(paper_text('mirror-r1-b4/R1', run=r))}), a swing of "
            f"<b>{swing:+.1f} points</b> {m} from who holds the decoys alone; first-mention (B4) {v('B4', 'classic')} / "
            f"{v('B4', 'mirror')}, Random {v('Random', 'classic')} / {v('Random', 'mirror')}.")


def random_line(ch, holm: dict) -> list[str]:
    """R1 - Random over the eight variants (H2) per run beside the paper's "no better than random", and for the
    reference decider why it differs (:func:`crossprofile_lib.book.explain.why`, computed)."""
    lines = []
    for r in ch.shown:
        h = contrast_row(holm[r.label], "H2") if r.label in holm else None
        if h is None:
            continue
        lines.append(f"{name_html(r)}: over {variants_phrase(r)} R1 - Random = <b>{fmt_ci(h.estimate, h.lo, h.hi)}"
                     f"</b> points {run_mark(r)}; the paper finds R1 no better than random "
                     f"({html.escape(paper_text('cp-mean/H2: R1 - Random', run=r))}).")
        if r.is_reference:
            lines.append(why(mechanism(ch.params), "cp-mean/H2: R1 - Random", float(h.estimate)))
    return lines


def headline_takeaways(ch, cells: dict, holm: Optional[dict] = None) -> list[str]:
    """One :func:`headline_line` per run, R1 - Random (:func:`random_line`) where ``holm`` is given, then why a run
    without signal is not interpreted."""
    return [headline_line(ch, r, cells[r.label]) for r in ch.shown] + (random_line(ch, holm) if holm else []) + [
        html.escape(sig.reason) + " Its numbers above are shown, not interpreted."
        for sig in (model_signal(r, r.boot) for r in ch.shown) if not sig.ok]


def central_contrast(t: pd.DataFrame) -> pd.DataFrame:
    """The central contrast's rows of a :func:`central_cells` table, cells named ``classic`` / ``mirror``."""
    t = t[t.policy.isin(HEAD)]
    return t.assign(cell=t["cell"].str.split(" ").str[0])


def headline_items() -> list:
    """The paper's headline numbers (:data:`HEADLINE`) that this suite can measure."""
    return [it for it in load_paper_figures()
            if it.figure_id in HEADLINE and it.data == "crossprofile" and it.measure and it.unit in ("%", "points")
            and any(isinstance(v, (int, float)) for v in it.paper.values())]


def paper_beside_run(items, r) -> pd.DataFrame:
    """Rows ``quantity, unit, estimate, lo, hi, paper_model, paper`` for :func:`~.figures.paper_vs_run`."""
    rows = []
    for it, v in zip(items, suite_values(items, r, r.boot)):
        if v is None or np.isnan(v["estimate"]):
            continue
        place = HEADLINE[it.figure_id]
        if "8 variants" in place and variants_phrase(r) != "all eight variants":
            place = place.replace("8 variants", variants_phrase(r).removeprefix("its "))
        q = f"{it.label}, {place}" if place else it.label
        for m, pv in (same_model_values(it.paper, r) or {}).items():  # a model beside its own paper model only
            if isinstance(pv, (int, float)):
                rows.append(dict(quantity=q, unit=it.unit, estimate=v["estimate"], lo=v["lo"], hi=v["hi"],
                                 paper_model=m, paper=float(pv)))
    return pd.DataFrame(rows)


def thresholds_note():
    """The box naming this build's thresholds (headroom, cells)."""
    return admonition("note", "Thresholds of this build",
                      f"Headroom: ALL - EMPTY accuracy must exceed {HEADROOM_MIN_POINTS:g} points at the lower "
                      f"95% bound (prereg.yaml). Classic cell {CLASSIC}, mirror cell {MIRROR} "
                      "(<a href='03-methods.html#spec-cells'>the specification, chapter 3</a>).")


#: The copy policies chapter 4 compares, and those of its every-budget table.
CORE = ("R1", "B4", "Random", "M1", "R1-rel")
COPY = ("R1", "B4", "Random", "M1")
#: The contrasts the takeaways state: id, what it measures, its paper item.
STATED = (("H1", "how much R1's lead over B4 depends on who holds the decoys", "h1/H1"),
          ("H2", "R1 - Random over all eight variants", "cp-mean/H2: R1 - Random"))


def rarest_takeaways(ch, cells: dict, holm: dict) -> list[str]:
    """R1 and B4 in the classic and mirror cells, H1 and H2 beside the paper, and the model sample's signal."""
    ref = ch.ref
    t = ch.at(ref, cells[ref.label])

    m = run_mark(ref)

    def pct(policy, cell):
        return num(cell_value(t, policy, cell), suffix="%") + f" {m}"
    lines = [f"With the {REFERENCE} at r = {ch.budget(ref)}, R1 decides <b>{pct('R1', 'classic')}</b> correctly in the "
             f"classic cell ({CLASSIC}) and <b>{pct('R1', 'mirror')}</b> in the mirror cell ({MIRROR}); B4 "
             f"(first mention) {pct('B4', 'classic')} and {pct('B4', 'mirror')} (paper: R1 "
             f"{html.escape(paper_text('classic-r1-b4/R1'))} and {html.escape(paper_text('mirror-r1-b4/R1'))}; B4 "
             f"{html.escape(paper_text('classic-r1-b4/B4'))} and {html.escape(paper_text('mirror-r1-b4/B4'))})."]
    for cid, what, paper in STATED:
        h = contrast_row(holm[ref.label], cid)
        if h is not None:
            lines.append(f"{cid} ({what}) = <b>{fmt_ci(h.estimate, h.lo, h.hi)}</b> points {m} (paper: "
                         f"{paper_text(paper)}).")
            if cid == "H2":
                lines.append(why(mechanism(ch.params), "cp-mean/H2: R1 - Random", float(h.estimate)))
        else:
            lines.append(f"{cid} ({what}) is not estimable from this run (it lacks the variants or policies it needs).")
    m = ch.model
    if m is not None:  # whether the model run's results have signal (its headroom check)
        sig = model_signal(m, m.boot)
        lines.append(f"{html.escape(m.label)}: " + ("its results have signal (headroom check passed)." if sig.ok else
                                                  "no signal to read (" + html.escape(sig.reason.split(': ', 1)[-1]) + ")"))
    return lines


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
        m = run_mark(r)
        if h3 is not None:
            gap = classic(r, 'R1-rel') - classic(r, 'R1')
            lines.append(f"{name_html(r)}: over {variants_phrase(r)} H3 = R1-rel - R1 = <b>{h3.estimate:+.1f}</b> points "
                         f"[{h3.lo:.1f}, {h3.hi:.1f}] {m} (Holm p = {fmt_p(h3.p_adjusted)}); in the classic cell "
                         f"({CLASSIC}) R1-rel - R1 = <b>{num(gap, sign=True)}</b> points {m} and "
                         f"R1-rel-oracle - R1 = {num(classic(r, 'R1-rel-oracle') - classic(r, 'R1'), sign=True)} points "
                         f"{m} at r = {ch.budget(r)}.{same}")
            if r.is_reference:
                lines.append(why(mechanism(ch.params), "classic-rel/R1-rel - R1", gap))
                lines.append(why(mechanism(ch.params), "h3/H3: R1-rel - R1", float(h3.estimate)))
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
            m = run_mark(ref)
            lines.append(f"With a social-proof weight of {ch.params.social_proof:g} the {REFERENCE}'s classic-cell "
                         f"R1-rel - R1 is <b>{num(g1, sign=True)}</b> points {m} ({num(classic(sp, 'R1-rel'), suffix='%')} "
                         f"against {num(classic(sp, 'R1'), suffix='%')}); without it, {num(g0, sign=True)} points {m}: "
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


#: Policies whose memory comes from a model call on a language model's run (a relevance, stance or summary call).
MODEL_MEMORY = ("R1-rel", "BAL", "B3", "REF")


def marked_kept(t: pd.DataFrame, run) -> pd.DataFrame:
    """A kept-facts table (rows ``(policy, cell)``, cells ``"est [lo, hi]"``) with each number's mark: ``exact`` where
    no model call made the memory (every policy of the reference decider; a model's copy policies and oracle
    controls, whose bases ``R1-rel-oracle`` and ``BAL-oracle`` are not in :data:`MODEL_MEMORY`), else the run's."""
    def kind(policy: str) -> str:
        model_call = not run.is_reference and policy_base(policy) in MODEL_MEMORY
        return mark_kind(run) if model_call else "exact"
    out = t.copy()
    for idx in out.index:
        pol = str(idx[0] if isinstance(idx, tuple) else idx)
        out.loc[idx] = [v if not isinstance(v, str) or v in ("", "–") else v + mark_text(kind(pol), run)
                        for v in out.loc[idx]]
    return out


def fixed_k(ch) -> list[str]:
    """:data:`FIXED_K` and the fixed-k control of each copy policy of your own (``Mine-k7``)."""
    return list(dict.fromkeys([*FIXED_K, *[f"{u}-k{FIXED_K_DEFAULT}" for u in user_copy(ch.params.user_policies)]]))


def by_decider(ch, runs: Sequence[Run], cells: dict, policies: Sequence[str], outcome: str = "correct") -> pd.DataFrame:
    """The :func:`cell_rows` tables of ``runs`` at their shown budgets, stacked with a ``run`` column."""
    return select(pd.concat([ch.at(r, cells[r.label]).assign(run=r.label) for r in runs]), policies, outcome)


def relevance_filter_table(r: Run) -> pd.DataFrame:
    """Relevance-filter precision and recall (%) against the roles (:func:`crossprofile_lib.stats.tables.relevance_table`)."""
    return st.relevance_table(r.df, r.boot)


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
