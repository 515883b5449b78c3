"""The numbers a reader is shown first, where the book computes them (issue 55: the book wing's mutation survivors):
the landing page's headline line (R1's classic - mirror swing with its sign, B4 and Random beside it in the right
cells), chapter 4's rarest-first takeaway, chapter 5's relevance takeaways and the social-proof verdict, and the
cell lookup every table uses. Hand-made cell tables whose numbers differ under each near miss (a swapped cell, a
flipped sign, a wrong policy); no model and no run folder is needed."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from crossprofile_lib.book import tables
from crossprofile_lib.book.headline import headline_line, rarest_takeaways, relevance_takeaways
from crossprofile_lib.book.runs import Run
from crossprofile_lib.book.tables import CELL_LABELS, cell_entry, cell_value, contrast_row

#: (classic, mirror) accuracy per policy: every number distinct, so a swapped cell or policy shows
CELLS = {"R1": (80.0, 30.0), "B4": (60.0, 40.0), "Random": (55.0, 45.0), "R1-rel": (72.0, 33.0),
         "R1-rel-oracle": (86.0, 31.0)}


def cells(values=CELLS) -> pd.DataFrame:
    rows = []
    for p, (c, m) in values.items():
        rows += [dict(policy=p, cell=CELL_LABELS["classic"], outcome="correct", estimate=c, lo=c - 5, hi=c + 5),
                 dict(policy=p, cell=CELL_LABELS["mirror"], outcome="correct", estimate=m, lo=m - 5, hi=m + 5),
                 dict(policy=p, cell=CELL_LABELS["classic"], outcome="chose_decoy", estimate=100 - c, lo=0, hi=100)]
    return pd.DataFrame(rows)


def run(backend="ledger", label_model="reference") -> Run:
    return Run(Path("runs/x"), pd.DataFrame({"backend": [backend], "model": [label_model]}),
               {"backend": backend, "model": label_model})


def text(html: str) -> str:
    """The prose without tags and without the paper's parentheses (their numbers are the paper's, not the run's)."""
    t = re.sub(r"<[^>]+>", "", html)
    t = re.sub(r"\(paper[^()]*(?:\([^()]*\)[^()]*)*\)", "", t)
    return " ".join(t.split())


def numbers(s: str) -> list[float]:
    return [float(x) for x in re.findall(r"[+-]?\d+\.\d", s)]


def test_cell_lookup_by_policy_cell_and_outcome():
    t = cells()
    assert cell_value(t, "B4", "mirror") == 40.0 and cell_value(t, "B4", "classic") == 60.0
    assert cell_value(t, "R1", "classic", "chose_decoy") == 20.0
    assert cell_entry(t, "R1", CELL_LABELS["mirror"]).estimate == 30.0      # a label works as well as a name
    assert cell_entry(t, "M1", "classic") is None and cell_value(t, "M1", "classic") != cell_value(t, "M1", "classic")


def test_headline_line_numbers_in_their_cells_and_the_swing_signed():
    ch = SimpleNamespace(budget=lambda r: "0.6")
    line = headline_line(ch, run(), cells())
    assert "r = 0.6" in line and "swing of <b>+50.0 points</b>" in line
    # R1 classic, mirror, the swing, B4 classic / mirror, Random classic / mirror, in that order
    assert numbers(text(line).split("r = 0.6", 1)[1]) == [80.0, 30.0, 50.0, 60.0, 40.0, 55.0, 45.0]
    # the mirror cell ahead: a negative swing keeps its sign
    flipped = headline_line(ch, run(), cells(dict(CELLS, R1=(30.0, 80.0))))
    assert "swing of <b>-50.0 points</b>" in flipped


def test_headline_line_without_r1_in_a_cell_says_so():
    ch = SimpleNamespace(budget=lambda r: "0.6")
    t = cells({k: v for k, v in CELLS.items() if k != "R1"})
    assert headline_line(ch, run(), t).endswith("no classic/mirror decisions at r = 0.6.")
    only_classic = cells().query("not (policy == 'R1' and cell == @CELL_LABELS['mirror'])")
    assert "no classic/mirror decisions" in headline_line(ch, run(), only_classic)
    # B4 missing: its places read a dash, the rest stays
    no_b4 = headline_line(ch, run(), cells({k: v for k, v in CELLS.items() if k != "B4"}))
    assert "first-mention (B4) – / –" in no_b4


def _holm(estimable=True):
    return pd.DataFrame([dict(id="H1", estimate=12.5, lo=3.1, hi=20.2, estimable=estimable, p_adjusted=0.012),
                         dict(id="H2", estimate=-4.5, lo=-9.0, hi=1.5, estimable=estimable, p_adjusted=0.2),
                         dict(id="H3", estimate=-7.5, lo=-11.0, hi=-2.0, estimable=estimable, p_adjusted=0.004)])


def _chapter(ref, sp=None, social_proof=0.5):
    params = SimpleNamespace(social_proof=social_proof, irrelevant_weight=0.0, inverse_temperature=1.0)
    return SimpleNamespace(ref=ref, sp=sp, model=None, shown=[ref], params=params,
                           budget=lambda r: "0.6", at=lambda r, t: t)


def test_contrast_row_only_when_estimable():
    assert contrast_row(_holm(), "H1").estimate == 12.5
    assert contrast_row(_holm(False), "H1") is None and contrast_row(_holm(), "H9") is None


def test_rarest_takeaway_reads_r1_and_b4_in_each_cell(monkeypatch):
    monkeypatch.setattr("crossprofile_lib.book.headline.why", lambda mech, ref, estimate: "WHY")
    monkeypatch.setattr("crossprofile_lib.book.headline.mechanism", lambda p: None)   # explain.py's sweep, not here
    ref = run()
    lines = rarest_takeaways(_chapter(ref), {ref.label: cells()}, {ref.label: _holm()})
    first = text(lines[0]).split("r = 0.6", 1)[1]
    assert numbers(first)[:4] == [80.0, 30.0, 60.0, 40.0]           # R1 classic, mirror; B4 classic, mirror
    from crossprofile_lib.stats.format import fmt_ci
    assert lines[1].startswith("H1 (") and f"= <b>{fmt_ci(12.5, 3.1, 20.2)}</b> points" in lines[1]
    assert lines[2].startswith("H2 (") and f"= <b>{fmt_ci(-4.5, -9.0, 1.5)}</b> points" in lines[2]
    assert lines[3] == "WHY"                                          # H2's explanation follows H2
    gone = rarest_takeaways(_chapter(ref), {ref.label: cells()}, {ref.label: _holm(False)})
    assert sum("is not estimable from this run" in x for x in gone) == 2


def test_relevance_takeaways_gap_and_social_proof_verdict(monkeypatch):
    monkeypatch.setattr("crossprofile_lib.book.headline.why", lambda mech, ref, estimate: "WHY")
    monkeypatch.setattr("crossprofile_lib.book.headline.mechanism", lambda p: None)   # explain.py's sweep, not here
    ref, sp = run(), run(label_model="reference, social proof")
    sp.tag = "sp"
    base = cells()                                                     # R1-rel - R1 = 72 - 80 = -8.0 classic
    lifted = cells(dict(CELLS, **{"R1-rel": (84.0, 33.0)}))            # +4.0 without the weight
    ch = _chapter(ref, sp=sp)
    lines = relevance_takeaways(ch, {ref.label: lifted, sp.label: base}, {ref.label: _holm()})
    h3 = text(lines[0])
    assert "H3 = R1-rel - R1 = -7.5 points" in h3
    assert "R1-rel - R1 = +4.0 points" in h3 and "R1-rel-oracle - R1 = +6.0 points" in h3
    last = text(lines[-1])
    # with the weight -8.0 (72.0% against 80.0%), without it +4.0: the weight is what makes R1-rel lose
    assert "is -8.0 points" in last and "72.0% against 80.0%" in last and "without it, +4.0 points" in last
    assert "the weight on speaker labels is what makes R1-rel lose to R1 there" in last
    both = relevance_takeaways(ch, {ref.label: base, sp.label: base}, {ref.label: _holm()})
    assert "loses to R1 there with and without the weight" in both[-1]
    neither = relevance_takeaways(ch, {ref.label: lifted, sp.label: lifted}, {ref.label: _holm()})
    assert "the weight does not make R1-rel lose to R1 there" in neither[-1]


@pytest.mark.parametrize("cell, label", [("classic", CELL_LABELS["classic"]), ("mirror", CELL_LABELS["mirror"])])
def test_cell_labels_name_the_papers_cells(cell, label):
    from crossprofile_lib.design import CLASSIC, MIRROR
    assert label == f"{cell} ({CLASSIC if cell == 'classic' else MIRROR})" and tables.CELL_LABELS[cell] == label


def _model_run(model="Qwen2.5-7B-Instruct", n=400):
    df = pd.DataFrame({"backend": ["openai"] * n, "model": [model] * n, "correct": [1] * (3 * n // 4) + [0] * (n // 4),
                       "policy": ["ALL"] * (n // 2) + ["EMPTY"] * (n // 2), "template_id": [f"t{i % 20}" for i in range(n)]})
    return Run(Path("runs/m"), df, {"backend": "openai", "model": model})


def test_kept_facts_carry_the_mark_of_what_made_the_memory():
    from crossprofile_lib.book.display import mark_kind, mark_text
    from crossprofile_lib.book.headline import marked_kept
    idx = pd.MultiIndex.from_tuples([("R1-rel", "classic"), ("R1", "classic"), ("R1-rel-oracle", "classic"),
                                     ("BAL-k7", "mirror"), ("B3", "classic")])
    t = pd.DataFrame({"support": ["4.0 [3.0, 5.0]", "–", "5.0 [5.0, 5.0]", "3.5 [3.0, 4.0]", "2.0 [1.0, 3.0]"],
                      "decoy": ["1.0 [0.5, 1.5]", "", "0.0 [0.0, 0.0]", "1.5 [1.0, 2.0]", "0.5 [0.0, 1.0]"]}, index=idx)
    m = _model_run()
    lm, exact = mark_text(mark_kind(m), m), mark_text("exact", m)
    assert lm != exact
    out = marked_kept(t, m)
    assert out.loc[("R1-rel", "classic"), "support"] == "4.0 [3.0, 5.0]" + lm      # a relevance call made it
    assert out.loc[("BAL-k7", "mirror"), "decoy"] == "1.5 [1.0, 2.0]" + lm
    assert out.loc[("B3", "classic"), "support"] == "2.0 [1.0, 3.0]" + lm
    assert out.loc[("R1-rel-oracle", "classic"), "support"] == "5.0 [5.0, 5.0]" + exact   # the roles made it
    assert out.loc[("R1", "classic"), "support"] == "–" and out.loc[("R1", "classic"), "decoy"] == ""
    ref = marked_kept(t, run())
    assert ref.loc[("R1-rel", "classic"), "support"] == "4.0 [3.0, 5.0]" + mark_text("exact", run())
    assert t.loc[("R1-rel", "classic"), "support"] == "4.0 [3.0, 5.0]"                  # the input is not changed


def test_classic_composition_is_the_classic_cell_wide():
    from crossprofile_lib.book.headline import classic_composition
    rows = []
    for p, (s, d, i) in {"R1": (5.0, 0.0, 4.0), "B4": (3.0, 2.0, 1.0)}.items():
        for outcome, v in (("kept_support", s), ("kept_decoy", d), ("kept_irrelevant", i)):
            rows += [dict(policy=p, cell=CELL_LABELS["classic"], outcome=outcome, estimate=v),
                     dict(policy=p, cell=CELL_LABELS["mirror"], outcome=outcome, estimate=v + 10)]
    w = classic_composition(pd.DataFrame(rows)).set_index("policy")
    assert list(w.index) == ["R1", "B4"]
    assert (w.loc["R1", "kept_support"], w.loc["R1", "kept_decoy"], w.loc["B4", "kept_irrelevant"]) == (5.0, 0.0, 1.0)


def test_composition_paper_text_names_the_models_it_may():
    from crossprofile_lib.book.headline import composition_paper_text
    from crossprofile_lib.book.paper import paper_text
    assert composition_paper_text(_model_run("smol", 4)) == "none: not one of the paper's models"
    q = composition_paper_text(_model_run())
    assert q.startswith("R1-rel: " + paper_text("classic-kept/R1-rel support", run=_model_run()) + " / ")
    assert "; R1: " + paper_text("classic-kept/R1 support", run=_model_run()) in q
    assert composition_paper_text(None).count(" / ") == 4


def _noisy(distances):
    return pd.DataFrame(dict(precision=[0.994, 1.0, 0.8], recall=[0.989, 1.0, 0.7], kept_support=[4.1, 4.9, 4.4],
                             kept_decoy=[0.2, 0.0, 1.9], kept_irrelevant=[3.7, 4.0, 2.2],
                             **{"distance to the paper": distances}))


def test_noisy_filter_takeaways_follow_the_grid():
    from crossprofile_lib.book.headline import noisy_filter_takeaways, paper_filter
    pf = paper_filter()
    nearer = noisy_filter_takeaways(_noisy([2.5, 3.0, 0.4]), "0.6")
    assert "keeps 4.10 / 0.20 / 3.70 support / decoy / irrelevant facts" in nearer[0] and "r = 0.6" in nearer[0]
    assert f"{pf['composition'][0]:.2f} / {pf['composition'][1]:.2f} / {pf['composition'][2]:.2f}" in nearer[0]
    assert "about 80% precision and 70% recall (4.40 / 1.90 / 2.20)" in nearer[1]
    assert "(distance 0.40 facts against 2.50 at the paper's filter quality)" in nearer[2]
    assert nearer[2].endswith("strict tiering with the filter the paper measured does not give the composition it reports.")
    same = noisy_filter_takeaways(_noisy([0.4, 3.0, 0.4]), "0.6")
    assert same[2].startswith("On this grid no filter comes nearer") and "(distance 0.40 facts)" in same[2]
    assert "about 99% precision and 99% recall" in same[1]


@pytest.mark.parametrize("sign, lo, hi, holds", [("+", 0.1, 9.0, True), ("+", 0.0, 9.0, False), ("+", -3.0, -1.0, False),
                                                 ("-", -9.0, -0.1, True), ("-", -9.0, 0.0, False), ("-", 1.0, 3.0, False),
                                                 ("0", -1.0, 1.0, True), ("0", 0.0, 2.0, True), ("0", -2.0, 0.0, True),
                                                 ("0", 0.5, 2.0, False), ("0", -2.0, -0.5, False)])
def test_a_findings_sign_rule_at_its_edges(sign, lo, hi, holds):
    from crossprofile_lib.book.compare import _judge_sign
    assert _judge_sign(sign, (lo + hi) / 2, lo, hi) is holds


def test_a_finding_is_not_judged_without_an_estimate_an_informative_interval_or_headroom():
    from crossprofile_lib.book.compare import _gate
    from crossprofile_lib.book.models import ModelVerdict
    ok, weak = ModelVerdict("confirmatory"), ModelVerdict("exploratory", "headroom failed")
    assert _gate(float("nan"), 0.0, 1.0, "%", ok) == "not in this run" and _gate(None, 0, 1, "%", ok) == "not in this run"
    assert _gate(50.0, 4.0, 95.0, "%", ok) == "not judged: interval spans 4 to 95"     # 91 points wide
    assert _gate(50.0, 6.0, 95.0, "%", ok) is None                                    # 89: informative
    assert _gate(3.0, 0.0, 95.0, "facts", ok) is None                                 # facts: never too wide
    assert _gate(50.0, 40.0, 60.0, "%", weak) == "not judged: exploratory (headroom failed)"
    assert _gate(50.0, 40.0, 60.0, "%", ModelVerdict("reference")) is None


def test_summary_joins_each_runs_verdicts_once_and_fills_missing_runs():
    from crossprofile_lib.book.compare import FINDINGS, summary
    f1, f2 = FINDINGS[0], FINDINGS[2]
    t1 = pd.DataFrame({"run": ["a", "b"], "finding holds?": ["holds", "does not hold"]})
    t2 = pd.DataFrame({"run": ["a", "a", "a"],
                       "finding holds?": ["(see below)", "holds", "not judged: interval spans 1 to 99 (x)"]})
    s = summary([(f1, t1), (f2, t2)])
    assert list(s.index) == [f1.title, f2.title] and list(s.columns) == ["a", "b"]
    assert s.loc[f1.title, "a"] == "holds" and s.loc[f1.title, "b"] == "does not hold"
    assert s.loc[f2.title, "a"] == "holds; not judged: interval spans 1 to 99" and s.loc[f2.title, "b"] == "no run of this kind"
    t3 = pd.DataFrame({"run": ["a", "a"], "finding holds?": ["holds", "holds"]})
    assert summary([(f1, t3)]).loc[f1.title, "a"] == "holds"


def test_coverage_note_says_which_paper_models_ran():
    from crossprofile_lib.book.compare import coverage_note
    assert coverage_note([run()]).startswith("This build ran no language model")
    smol = _model_run("smol", 4)
    assert coverage_note([run(), smol]).startswith("<b>No GPU model ran for this build, and none of its runs is one "
                                                   "of the paper's models</b> (")
    q = _model_run()
    note = coverage_note([run(), smol, q])
    assert note.startswith("This build's runs of the paper's models: ") and "= Qwen2.5-7B-Instruct" in note
    assert "smol" not in note.split(":", 1)[1].split(". Each")[0]


def test_net_lead_message_reads_the_lowest_and_highest_lead_with_decisions():
    from crossprofile_lib.book.compare import net_lead_message
    a = pd.DataFrame({"net_lead": [2, -2, 0, 5], "estimate": [80.0, 20.4, 55.0, 99.0], "n": [10, 12, 9, 0]})
    assert net_lead_message({"ref": a}) == "Accuracy by net lead, lowest to highest: ref 20% at -2 to 80% at +2"
    assert net_lead_message({"ref": a.assign(n=0)}) == "No decisions to draw"


def test_accuracy_matrix_at_one_budget_in_policy_order():
    from crossprofile_lib.book.tables import accuracy_matrix
    df = pd.DataFrame({"policy": ["R1", "R1", "B4", "B4", "EMPTY", "R1"], "variant": ["PSP", "SPS", "PSP", "SPS", "PSP", "PSP"],
                       "budget_label": ["0.6", "0.6", "0.6", "0.6", "none", "0.3"], "correct": [1, 0, 1, 1, 0, 0]})
    m = accuracy_matrix(df, "0.6", policies=["R1", "EMPTY", "B4", "M1"])
    assert list(m.index) == ["R1", "EMPTY", "B4"]                    # asked order (not sorted); M1 has no rows
    assert m.loc["R1", "PSP"] == 100.0 and m.loc["R1", "SPS"] == 0.0 and m.loc["B4", "SPS"] == 100.0
    assert m.loc["EMPTY", "PSP"] == 0.0                               # unbudgeted rows are in every budget's matrix
    assert accuracy_matrix(df, "0.3", policies=["R1"]).loc["R1", "PSP"] == 0.0


def test_select_by_policy_outcome_cell_and_budget():
    from crossprofile_lib.book.tables import select
    t = cells().assign(budget_label=["0.6", "0.3", "0.6"] * len(CELLS))
    s = select(t, policies=["R1", "B4"], outcome="correct", cell="classic", budgets=[0.6])
    assert list(s.policy) == ["R1", "B4"] and list(s.estimate) == [80.0, 60.0]
    assert len(select(t, cell=CELL_LABELS["mirror"])) == len(CELLS) and len(select(t)) == len(t)
    assert list(select(t, outcome="chose_decoy", policies=["R1"]).estimate) == [20.0]


def test_contrast_table_writes_estimates_intervals_and_the_same_models_paper_values():
    from crossprofile_lib.book.tables import contrast_table, not_estimable_reason
    res = pd.DataFrame([dict(id="H1", title="H1: t", estimate=12.345, lo=3.14, hi=20.26, lo_holm=1.0, hi_holm=22.0,
                             holm_level=0.975, p=0.0123, p_adjusted=0.0246, reject=True,
                             paper={"Qwen2.5-7B-Instruct": "31.5", "Llama-3.1-8B-Instruct": "20.0"}),
                        dict(id="H2", title="H2: t", estimate=float("nan"), lo=float("nan"), hi=float("nan"),
                             lo_holm=float("nan"), hi_holm=float("nan"), holm_level=float("nan"), p=float("nan"),
                             p_adjusted=float("nan"), reject=False, paper="n/a")])
    t = contrast_table(res)
    assert list(t.index) == ["H1", "H2"] and t.loc["H1", "estimate (points)"] == 12.3
    assert t.loc["H1", "95% interval"] == "[3.1, 20.3]" and t.loc["H2", "95% interval"] == "–"
    assert t.loc["H1", "Holm-adjusted interval"] == "[1.0, 22.0] (97.5%)" and bool(t.loc["H1", "reject at 0.05"])
    assert t.loc["H1", "paper: Qwen2.5-7B-Instruct"] == "31.5" and t.loc["H2", "paper: Qwen2.5-7B-Instruct"] == ""
    m = contrast_table(res, _model_run())
    assert m.loc["H1", "estimate (points)"].startswith("+12.3") and m.loc["H2", "estimate (points)"] == "–"
    assert "paper: Llama-3.1-8B-Instruct" not in m.columns and m.loc["H1", "paper: Qwen2.5-7B-Instruct"] == "31.5"
    assert not_estimable_reason(pd.DataFrame({"reason": ["b", "a", "b"]})) == "a; b"
    assert not_estimable_reason(pd.DataFrame({"reason": pd.Series([], dtype=str)})) == "the run lacks the policies or cells"


def test_net_lead_rows_follow_the_budget_the_run_is_shown_at():
    from crossprofile_lib.book.tables import net_lead_where
    from crossprofile_lib.stats.prereg import load_prereg
    w0 = dict(load_prereg().settings["net_lead_where"])
    w = net_lead_where(SimpleNamespace(budget=lambda r: "0.3"), run())
    assert w == dict(w0, budget_label="0.3") and "budget_label" in w0


# --------------------------------------------------------------------------- on a real reference run (the ledger)
@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    from crossprofile_lib.book.runs import bootstrap, load_run
    from crossprofile_lib.run.runner import RunConfig, run_to_dir
    out = tmp_path_factory.mktemp("wing-book") / "ledger"
    run_to_dir(RunConfig(backend="ledger", templates=["templates/dev"], seeds=[0], budgets=["0.6", "0.3"],
                         policies=["R1", "B4", "Random", "R1-rel", "R1-rel-oracle", "ALL", "ALL:unlabeled", "ALL:shuffled"],
                         variants=["PSP", "SPS", "PPP"]), out)
    r = load_run(out)
    r.boot = bootstrap(r, 200, 0)
    return r


def _ch(ref, **kw):
    params = SimpleNamespace(templates=["templates/dev"], social_proof=0.5, irrelevant_weight=0.0, inverse_temperature=1.0)
    base = dict(ref=ref, sp=None, model=None, shown=[ref], params=params, budget=lambda r: "0.6",
                at=lambda r, t: t[t.budget_label.astype(str) == "0.6"] if isinstance(r, Run) else pytest.fail("no run"))
    return SimpleNamespace(**{**base, **kw})


def test_exact_composition_counts_rs_classic_memories_at_the_shown_budget(ledger):
    from crossprofile_lib.book.headline import R1_CLASSIC, exact_composition
    from crossprofile_lib.book.tables import KEPT
    c = exact_composition(_ch(ledger))
    df = ledger.df
    d = df[(df.policy == "R1") & (df.variant == "PSP") & (df.budget_label == "0.6")]
    assert c["n"] == len(d) > 0 and c["budget"] == "0.6" and c["templates"] == d.template_id.nunique()
    assert c["mean"] == tuple(float(d[k].mean()) for k in KEPT)
    assert c["exact"] == int((d[list(KEPT)].to_numpy() == R1_CLASSIC).all(axis=1).sum())
    assert c["pricing"] == ledger.header.get("tokenizer", "?") and set(c["counts"]) | set(c["missing"]) == {"Qwen2.5",
                                                                                                        "Llama-3.1"}


def test_first_finding_sets_this_builds_composition_beside_the_papers(ledger):
    from crossprofile_lib.book.headline import exact_composition, first_finding
    from crossprofile_lib.book.tables import cell_rows
    ch = _ch(ledger)
    c = exact_composition(ch)
    html_ = first_finding(ch).data
    assert "<b>" + " / ".join(f"{v:.2f}" for v in c["mean"]) + "</b>" in html_
    from crossprofile_lib.book.display import mark
    assert f"(its {c['n']} R1 memories there, r = 0.6)" in html_ and html_.count(mark("exact")) == 2
    acc = cell_value(ch.at(ledger, cell_rows(ledger, ledger.boot, ["correct"], pooled=False)), "R1", "classic")
    assert f"R1 then decides <b>{acc:.1f}%</b>" in html_
    none = first_finding(_ch(None))
    assert "No reference run" in str(none.data if hasattr(none, "data") else none)
    empty = first_finding(_ch(ledger, budget=lambda r: "0.9"))
    assert "this build has no R1 memory of the classic cell" in str(empty.data if hasattr(empty, "data") else empty)


def test_accuracy_by_variant_central_contrast_and_by_decider(ledger):
    from crossprofile_lib.book.headline import accuracy_by_variant, by_decider, central_contrast
    from crossprofile_lib.book.tables import cell_rows
    ch = _ch(ledger)
    t = accuracy_by_variant(ch, ledger, ("R1", "B4"))
    assert set(t.policy) == {"R1", "B4"} and (t.budget_label.astype(str) == "0.6").all()
    cells_ = cell_rows(ledger, ledger.boot, ["correct"], pooled=False)
    cc = central_contrast(cells_)
    assert set(cc.policy) <= {"R1", "B4", "Random"} and set(cc.cell) == {"classic", "mirror"}
    b = by_decider(ch, [ledger], {ledger.label: cells_}, ["R1"])
    assert set(b.run) == {ledger.label} and set(b.policy) == {"R1"} and (b.budget_label.astype(str) == "0.6").all()


def test_headline_takeaways_one_line_per_run_from_its_own_cells(ledger):
    from crossprofile_lib.book.headline import headline_line, headline_takeaways
    ch = _ch(ledger)
    lines = headline_takeaways(ch, {ledger.label: cells()})
    assert lines[0] == headline_line(ch, ledger, cells()) and "swing of <b>+50.0 points</b>" in lines[0]


def test_paper_beside_run_sets_each_headline_number_beside_its_paper_value(ledger):
    from crossprofile_lib.book.headline import headline_items, paper_beside_run
    t = paper_beside_run(headline_items(), ledger)
    assert len(t) and set(t.columns) == {"quantity", "unit", "estimate", "lo", "hi", "paper_model", "paper"}
    assert t.paper.map(lambda x: isinstance(x, float)).all() and (t.lo <= t.estimate).all()


def test_findings_without_runs_are_empty_tables_and_net_lead_tables_without_runs_are_empty():
    from crossprofile_lib.book.compare import COLUMNS, FINDINGS, findings, net_lead_tables
    out = findings({}, 50, 0)
    assert [f for f, _ in out] == list(FINDINGS) and all(list(t.columns) == COLUMNS and t.empty for _, t in out)
    assert net_lead_tables([]) == {}


def test_the_natural_paper_table_is_the_papers():
    from crossprofile_lib.book.hbtables import natural_paper_table
    from crossprofile_lib.hiddenbench.measures import paper_table
    t = natural_paper_table()
    assert t.equals(paper_table("natural")) and list(t.columns) == ["paper low", "paper high"]


def test_noisy_filter_table_names_its_columns():
    from crossprofile_lib.book.headline import noisy_filter_table
    t = noisy_filter_table(pd.DataFrame(columns=["precision", "recall", "kept_support", "kept_decoy", "kept_irrelevant",
                                                 "realised_precision", "realised_recall", "distance to the paper"]))
    assert list(t.columns) == ["filter precision", "filter recall", "support", "decoy", "irrelevant",
                               "realised precision", "realised recall", "distance to the paper"]


def test_at_budget_moves_the_primary_budget_filters_only():
    from crossprofile_lib.book.tables import at_budget
    from crossprofile_lib.design import PRIMARY_BUDGET
    from crossprofile_lib.stats.prereg import load_prereg
    pre = load_prereg()
    assert at_budget(pre, PRIMARY_BUDGET) is pre
    moved = at_budget(pre, "0.3")
    for c0, c1 in zip(pre.contrasts, moved.contrasts):
        for t0, t1 in zip(c0.terms, c1.terms):
            want = {k: ("0.3" if k == "budget_label" and str(v) == PRIMARY_BUDGET else v) for k, v in t0.where.items()}
            assert t1.where == want
    assert any(t.where.get("budget_label") == "0.3" for c in moved.contrasts for t in c.terms)


def test_contrast_table_columns_and_a_model_missing_from_a_contrasts_paper_values():
    from crossprofile_lib.book.tables import contrast_table
    res = pd.DataFrame([dict(id=i, title=f"{i}: t", estimate=1.0, lo=0.5, hi=1.5, lo_holm=0.4, hi_holm=1.6, holm_level=0.99,
                             p=0.01, p_adjusted=0.02, reject=True, paper=p)
                        for i, p in (("H1", {"M1": "3", "M2": "4"}), ("H3", {"M1": "5"}))])
    t = contrast_table(res)
    assert list(t.columns[:7]) == ["contrast", "estimate (points)", "95% interval", "Holm-adjusted interval", "p",
                                   "Holm p", "reject at 0.05"]
    assert list(t["contrast"]) == ["H1: t", "H3: t"] and t.loc["H3", "paper: M2"] == "" and t.loc["H1", "paper: M2"] == "4"


def test_rarest_takeaway_says_whether_the_model_run_has_signal(monkeypatch):
    monkeypatch.setattr("crossprofile_lib.book.headline.why", lambda mech, ref, estimate: "WHY")
    monkeypatch.setattr("crossprofile_lib.book.headline.mechanism", lambda p: None)
    monkeypatch.setattr("crossprofile_lib.book.headline.model_signal",
                        lambda m, boot: SimpleNamespace(ok=False, reason="smol: accuracy 34% is chance: 3 options"))
    ref, m = run(), _model_run("smol", 4)
    lines = rarest_takeaways(SimpleNamespace(**{**vars(_chapter(ref)), "model": m}), {ref.label: cells()},
                             {ref.label: _holm()})
    assert lines[-1].endswith("no signal to read (accuracy 34% is chance: 3 options)")
    monkeypatch.setattr("crossprofile_lib.book.headline.model_signal", lambda m, boot: SimpleNamespace(ok=True, reason=""))
    ok = rarest_takeaways(SimpleNamespace(**{**vars(_chapter(ref)), "model": m}), {ref.label: cells()}, {ref.label: _holm()})
    assert ok[-1].endswith("its results have signal (headroom check passed).")


def test_relevance_takeaways_name_a_model_runs_own_paper_values(monkeypatch):
    from crossprofile_lib.book.paper import paper_text
    monkeypatch.setattr("crossprofile_lib.book.headline.why", lambda mech, ref, estimate: "WHY")
    monkeypatch.setattr("crossprofile_lib.book.headline.status_line", lambda r: "STATUS")
    q = _model_run()
    ch = SimpleNamespace(**{**vars(_chapter(run())), "shown": [q], "sp": None})
    lines = relevance_takeaways(ch, {q.label: cells()}, {q.label: _holm()})
    assert f"Paper, same model: H3 {paper_text('h3/H3: R1-rel - R1', run=q)}; classic cell R1-rel - R1 " \
           f"{paper_text('classic-rel/R1-rel - R1', run=q)}; STATUS" in lines[0]
    assert "WHY" not in lines                                  # no explanation of a model's numbers


def _as_model(r: Run) -> Run:
    from crossprofile_lib.book.runs import bootstrap
    m = Run(r.path, r.df.assign(backend="openai", model="Qwen2.5-7B-Instruct"),
            dict(r.header, backend="openai", model="Qwen2.5-7B-Instruct", decision_mode="generate"))
    m.boot = bootstrap(m, 200, 0)
    return m


def test_a_rising_finding_is_not_judged_when_one_of_its_quantities_is_not(ledger):
    """A run without headroom (no ALL / EMPTY here) is exploratory: the 'rises' verdict on the last row names why,
    never 'holds' or 'does not hold'."""
    from crossprofile_lib.book.compare import FAILS, FINDINGS, HOLDS, finding_table
    rises = next(f for f in FINDINGS if f.rule == ("rises",) and f.data == "crossprofile")
    t = finding_table(rises, [_as_model(ledger)], 50)
    verdicts = list(t["finding holds?"])
    assert verdicts[:-1] == ["(see below)"] * (len(rises.refs) - 1)
    assert verdicts[-1] not in (HOLDS, FAILS) and verdicts[-1].startswith(("not judged", "not in this run"))


def test_hb_takeaways_read_r1_and_b4s_complete_profiles():
    from crossprofile_lib.book.hbtables import hb_takeaways
    from crossprofile_lib.book.runs import REFERENCE
    d = pd.DataFrame(dict(policy=["R1", "R1", "B4", "B4"], budget_label=["0.6"] * 4, decided=[False] * 4,
                          correct=[None] * 4, invalid=[0] * 4, kept_hidden=[4, 2, 1, 1], kept_shared=[1, 1, 2, 2],
                          hidden_retention=[1.0, 0.5, 0.25, 0.25], profile_complete=[1, 0, 0, 0]))
    lines = hb_takeaways(SimpleNamespace(decisions=lambda protocol: d), None, 100, 0)
    assert lines[0] == (f"What the memories keep ({REFERENCE}, r = 0.6): R1 holds the complete hidden profile in "
                        "<b>50%</b> of memories, B4 (first mention) in 0%.")
    assert lines[1].startswith("No model decided HiddenBench tasks on this page")


def test_one_session_shows_the_first_natural_session_without_its_rows(tmp_path):
    import json

    from crossprofile_lib.book.hbtables import one_session
    hb = SimpleNamespace(path=tmp_path, label="smol", header={"data_source": "fixture"})
    assert one_session(hb) is None
    (tmp_path / "artefacts").mkdir()
    rec = dict(task_id="5", seed=0, ablation="baseline", votes=[{"agent": "A1", "letter": "B<"}], rows={"votes": [1]})
    (tmp_path / "artefacts" / "natural.jsonl").write_text(json.dumps(rec) + "\n")
    html_ = str(one_session(hb).data)
    assert "Session 5 / seed 0 / baseline: votes, messages, claims, memories, decisions (smol, data fixture)" in html_
    assert "&quot;letter&quot;: &quot;B&lt;&quot;" in html_ and "rows" not in html_.split("<pre", 1)[1]


def test_random_line_per_run_with_the_reference_deciders_why(monkeypatch):
    from crossprofile_lib.book.headline import random_line
    from crossprofile_lib.stats.format import fmt_ci
    monkeypatch.setattr("crossprofile_lib.book.headline.why", lambda mech, ref, estimate: f"WHY {estimate}")
    monkeypatch.setattr("crossprofile_lib.book.headline.mechanism", lambda p: None)
    ref, q = run(), _model_run()
    ch = SimpleNamespace(**{**vars(_chapter(ref)), "shown": [ref, q]})
    lines = random_line(ch, {ref.label: _holm(), q.label: _holm(False)})
    assert len(lines) == 2 and f"R1 - Random = <b>{fmt_ci(-4.5, -9.0, 1.5)}</b> points" in lines[0]
    assert lines[1] == "WHY -4.5"


def test_grid_calls_count_each_kind_of_call():
    from crossprofile_lib.book.tables import grid_calls
    g = grid_calls(["templates/dev"], [0, 1], ["0.6", "0.3"], ["R1", "B3", "R1-rel", "BAL"], variants=["PSP", "SPS"],
                   sample=20)
    tasks = 10 * 2 * 2
    assert g["tasks"] == tasks and g["b3_calls"] == tasks * 2 and g["relevance_calls"] == tasks == g["stance_calls"]
    assert g["decisions"] == 3 * 2 * tasks + g["b3_calls"] and g["mean_prompt_tokens"] > 50
    none = grid_calls(["templates/dev"], [0], ["0.6"], ["B3"], variants=["PSP"])
    assert none["mean_prompt_tokens"] == 0.0 and none["decisions"] == none["b3_calls"] == 10


def test_noisy_filter_grid_is_the_papers_quality_then_sixteen_filters_with_their_distance():
    from crossprofile_lib.book.headline import noisy_filter_grid, paper_filter
    from crossprofile_lib.book.tables import KEPT
    from crossprofile_lib.task.templates import load_templates
    from crossprofile_lib.task.tokenizer import get_tokenizer
    tpl = [t for t in load_templates(["templates/dev"]) if t.id == "dev-hospital-01"]
    rows = noisy_filter_grid(tpl, get_tokenizer("offline"), seeds=[0], budget="0.6", draws=1)
    pf = paper_filter()
    assert len(rows) == 17 and (rows.precision.iloc[0], rows.recall.iloc[0]) == (pf["precision"], pf["recall"])
    assert sorted(set(rows.precision.iloc[1:])) == [0.7, 0.8, 0.9, 1.0] == sorted(set(rows.recall.iloc[1:]))
    d = ((rows[list(KEPT)] - pf["composition"]) ** 2).sum(axis=1) ** 0.5
    assert rows["distance to the paper"].tolist() == pytest.approx(d.tolist())
    perfect = rows[(rows.precision == 1.0) & (rows.recall == 1.0)].iloc[0]
    assert perfect.kept_irrelevant == 0.0                       # a perfect filter keeps no irrelevant fact


def test_the_heat_map_shows_the_runs_policies_of_your_own_after_the_books(monkeypatch):
    from crossprofile_lib.book import tables as T
    monkeypatch.setitem(T.PLUGINS, "Mine", object())
    df = pd.DataFrame({"policy": ["R1", "Mine", "Mine:shuffled", "B4"], "variant": ["PSP"] * 4,
                       "budget_label": ["0.6"] * 4, "correct": [1, 0, 1, 1]})
    m = T.accuracy_matrix(df, "0.6")
    assert list(m.index) == [p for p in T.HEATMAP_POLICIES if p in ("R1", "B4")] + ["Mine", "Mine:shuffled"]
    assert m.loc["Mine", "PSP"] == 0.0 and m.loc["Mine:shuffled", "PSP"] == 100.0


def test_headroom_warning_names_the_run_and_its_interval():
    from crossprofile_lib.book.hbtables import headroom_warning
    tasks = [f"t{i}" for i in range(12)]
    d = pd.DataFrame(dict(task_id=tasks * 2, policy=["ALL"] * 12 + ["EMPTY"] * 12, decided=True,
                          correct=[1, 0] * 6 + [0, 1] * 6))
    w = headroom_warning(SimpleNamespace(decisions=lambda protocol: d, label="smol <x>"), 0)
    text = str(getattr(w, "data", w))
    assert "Headroom check failed" in text and "tasks for smol &lt;x&gt;; the lower bound must exceed" in text
    assert "over 12 tasks" in text
    good = d.assign(correct=[1] * 12 + [0] * 12)
    assert headroom_warning(SimpleNamespace(decisions=lambda protocol: good, label="big"), 0) is None


def test_label_effect_rows_single_cells_then_pooled_ones(ledger):
    from crossprofile_lib.book.tables import CELL_LABELS, POOLED_LABELS, label_effect_rows
    t = label_effect_rows(ledger, ledger.boot)
    cells_ = list(dict.fromkeys(t.cell))
    assert set(CELL_LABELS.values()) <= set(cells_) and "all variants" in cells_
    assert set(POOLED_LABELS.values()) & set(cells_) and list(t.index) == list(range(len(t)))
    single = label_effect_rows(ledger, ledger.boot, pooled=False)
    assert not set(POOLED_LABELS.values()) & set(single.cell) and len(single) < len(t)
    assert t.iloc[:len(single)].reset_index(drop=True).equals(single.reset_index(drop=True))


# --------------------------------------------------------------------------- issue 55, fresh sample (seed 56)
def test_coverage_note_without_a_model_is_one_sentence_naming_the_reference_decider():
    from crossprofile_lib.book.compare import coverage_note
    assert coverage_note([run()]) == ("This build ran no language model: every table shows the reference decider only "
                                      "(a normative evidence counter, not a model) beside the paper's values for each "
                                      "of the paper's models.")


def test_contrast_table_prints_the_holm_p_value_of_each_contrast():
    from crossprofile_lib.book.tables import contrast_table
    res = pd.DataFrame([dict(id="H1", title="H1: t", estimate=5.0, lo=1.0, hi=9.0, lo_holm=0.5, hi_holm=9.5,
                             holm_level=0.975, p=0.0123, p_adjusted=0.0369, reject=True, paper="n/a"),
                        dict(id="H2", title="H2: t", estimate=1.0, lo=-2.0, hi=4.0, lo_holm=-3.0, hi_holm=5.0,
                             holm_level=0.95, p=0.4, p_adjusted=0.00001, reject=False, paper="n/a")])
    t = contrast_table(res)
    assert list(t["p"]) == ["0.0123", "0.4000"] and list(t["Holm p"]) == ["0.0369", "<1e-4"]


def test_holm_by_run_takes_the_runs_given_else_the_chapters_shown_each_at_its_budget(monkeypatch):
    seen = []
    monkeypatch.setattr(tables, "contrasts_with_holm",
                        lambda r, boot, families, budget: seen.append((r.label, budget, families)) or budget)
    a, b = run(), _model_run()
    budgets = {a.label: "0.6", b.label: "0.3"}
    ch = SimpleNamespace(shown=[a], budget=lambda r: budgets[r.label])
    assert tables.holm_by_run(ch, runs=[b]) == {b.label: "0.3"}
    assert tables.holm_by_run(ch) == {a.label: "0.6"}
    assert seen == [(b.label, "0.3", ("confirmatory",)), (a.label, "0.6", ("confirmatory",))]


def test_exact_composition_names_a_pricing_that_cannot_be_had_by_its_error(ledger, monkeypatch):
    from crossprofile_lib.book import headline

    def no_tokenizer(name):
        raise LookupError(name)
    monkeypatch.setattr(headline, "get_tokenizer", no_tokenizer)
    c = headline.exact_composition(_ch(ledger))
    assert c["counts"] == {} and c["missing"]
    assert set(c["missing"]) == {shown for _, shown in headline.FIRST_PRICINGS}
    assert set(c["missing"].values()) == {"LookupError"}


def test_cell_gaps_are_points_classic_minus_mirror_and_the_mean_in_percent(ledger):
    from crossprofile_lib.book.tables import cell_gaps
    df = ledger.df.copy()
    df.loc[df.policy == "R1", "correct"] = True                      # R1 always right: mean 100, gap 0
    df.loc[df.policy == "B4", "correct"] = df.loc[df.policy == "B4", "cell"] == "classic"   # B4 right in classic only
    r = Run(ledger.path, df, ledger.header)
    res = cell_gaps(r, ledger.boot, ["R1", "B4", "NOPE"], budget="0.6").set_index("id")
    assert sorted(res.index) == ["B4|gap", "B4|mean", "R1|gap", "R1|mean"]
    assert res.loc["R1|mean", "estimate"] == pytest.approx(100.0) and res.loc["R1|gap", "estimate"] == pytest.approx(0.0)
    assert res.loc["B4|gap", "estimate"] == pytest.approx(100.0)
    assert 0 < res.loc["B4|mean", "estimate"] < 100
    assert res.loc["B4|gap", "quantity"] == "classic - mirror (points)" and res.loc["R1|mean", "quantity"] == "mean accuracy (%)"
    assert cell_gaps(r, ledger.boot, ["NOPE"]).empty


def _small_prereg_doc():
    return {"version": 1, "defaults": {"outcome": "correct", "scale": 100, "where": {"budget_label": "0.6"}},
            "families": {"confirmatory": {"correction": "holm", "alpha": 0.1}},
            "contrasts": [
                {"id": "X1", "title": "R1 - B4", "family": "confirmatory",
                 "terms": [{"weight": 1, "where": {"policy": "R1"}}, {"weight": -1, "where": {"policy": "B4"}}]},
                {"id": "X2", "title": "R1 - Random", "family": "confirmatory",
                 "terms": [{"weight": 1, "where": {"policy": "R1"}}, {"weight": -1, "where": {"policy": "Random"}}]}]}


def test_contrasts_with_holm_reads_the_prereg_given_as_an_object_or_a_file(ledger, tmp_path):
    import yaml

    from crossprofile_lib.book.tables import contrasts_with_holm
    from crossprofile_lib.stats.prereg import parse_prereg
    obj = contrasts_with_holm(ledger, ledger.boot, prereg=parse_prereg(_small_prereg_doc(), "<test>"))
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(_small_prereg_doc()))
    for res in (obj, contrasts_with_holm(ledger, ledger.boot, prereg=path),
                contrasts_with_holm(ledger, ledger.boot, prereg=str(path))):
        assert list(res["id"]) == ["X1", "X2"]
        # Holm at alpha 0.1 over 2 contrasts: the smaller p tested at 1 - 0.1/2 = 95%, the other at 1 - 0.1/1 = 90%
        est = res[res["estimable"] & res["p"].notna()]
        if len(est) == 2:
            assert sorted(est["holm_level"]) == pytest.approx([0.9, 0.95])
    assert len(obj[obj["estimable"] & obj["p"].notna()]) == 2


def test_contrasts_with_holm_sets_a_holm_level_and_interval_on_every_tested_contrast(ledger):
    from crossprofile_lib.book.tables import contrasts_with_holm
    res = contrasts_with_holm(ledger, ledger.boot)
    tested = res[(res["family"] == "confirmatory") & res["estimable"] & res["p"].notna()]
    m = len(tested)
    assert m >= 2 and tested["holm_level"].notna().all() and tested["lo_holm"].notna().all()
    # the i-th smallest p (from 0) is tested at 1 - 0.05 / (m - i): 0.95 for the largest
    levels = tested.sort_values("p", kind="stable")["holm_level"].tolist()
    assert levels == pytest.approx([1 - 0.05 / (m - i) for i in range(m)])
    # a wider level gives an interval at least as wide
    assert ((tested["hi_holm"] - tested["lo_holm"]) >= (tested["hi"] - tested["lo"]) - 1e-9).all()


def test_net_lead_tables_read_the_prereg_rows_at_the_shown_budget_and_mark_exploratory_runs(ledger, monkeypatch):
    from crossprofile_lib.book import compare
    from crossprofile_lib.book.tables import net_lead_where
    run_name = compare.run_name
    ch = _ch(ledger)
    t = compare.net_lead_tables([ledger], ch)
    assert list(t) == [run_name(ledger)]
    w = net_lead_where(ch, ledger)
    d = ledger.df
    mask = pd.Series(True, index=d.index)
    for k, v in w.items():
        mask &= d[k].astype(str).isin([str(x) for x in v]) if isinstance(v, (list, tuple)) else d[k].astype(str) == str(v)
    assert mask.sum() < len(d) and int(t[run_name(ledger)]["n"].sum()) == int(mask.sum())
    monkeypatch.setattr(compare, "headroom_verdict", lambda r: SimpleNamespace(counts=False))
    assert list(compare.net_lead_tables([ledger], ch)) == [run_name(ledger) + " (exploratory: no headroom)"]


def test_a_models_sample_names_its_own_number_of_variants_in_findings_and_headline_rows(ledger):
    from crossprofile_lib.book.compare import FINDINGS, finding_table
    from crossprofile_lib.book.headline import headline_items, paper_beside_run
    rel = next(f for f in FINDINGS if f.key == "relevance")
    t = finding_table(rel, [ledger], 50, 0)
    assert list(t["quantity"]) == ["H3: R1-rel - R1, 3 variants (of 8)", "classic cell (PSP): R1-rel - R1"]
    q = set(paper_beside_run(headline_items(), ledger)["quantity"])
    assert any(x.endswith("mean of 3 variants (of 8)") for x in q)
    assert not any("8 variants" in x.replace("(of 8)", "") for x in q)


def test_finding_why_explains_the_reference_deciders_value_of_each_crossprofile_quantity(ledger, monkeypatch):
    from crossprofile_lib.book import compare
    rel = next(f for f in compare.FINDINGS if f.key == "relevance")
    t = compare.finding_table(rel, [ledger], 50, 0)
    est = t.attrs["estimates"]
    mech = object()
    monkeypatch.setattr(compare, "mechanism", lambda params: mech if params == "P" else pytest.fail("params"))
    monkeypatch.setattr(compare, "why", lambda m, ref, v: f"{ref}={v:.3f}" if m is mech else pytest.fail("mechanism"))
    out = compare.finding_why(rel, t, [ledger], "P")
    name = compare.run_name(ledger)
    assert out.data == ("<ul class='cp-why'>" + "".join(f"<li>{ref}={est[(name, ref)]:.3f}</li>" for ref in rel.refs)
                        + "</ul>")
    assert compare.finding_why(rel, t, [_as_model(ledger)], "P") is None                # a model: no mechanism
    tuned = Run(ledger.path, ledger.df, dict(ledger.header, config={"backend_options": {"x": 1}}))
    assert compare.finding_why(rel, t, [tuned], "P") is None                            # a tuned decider: none
    assert compare.finding_why(rel, compare.finding_table(rel, [], 50, 0), [ledger], "P") is None
    assert compare.finding_why(dataclasses.replace(rel, data="hiddenbench"), t, [ledger], "P") is None


def test_social_proof_fit_uses_the_recorded_features_else_rebuilds_from_the_runs_templates(ledger, tmp_path):
    from crossprofile_lib.book.tables import social_proof_fit
    out = social_proof_fit(ledger, fit_resamples=20)
    assert out["rebuild"]["source"] == "option_features recorded at run time"
    cfg = dict(ledger.header.get("config", {}), templates=[str(tmp_path / "no-such-templates")])
    bare = Run(ledger.path, ledger.df.drop(columns=["option_features"]), dict(ledger.header, config=cfg))
    with pytest.raises(FileNotFoundError, match="no-such-templates"):
        social_proof_fit(bare, fit_resamples=20)


def test_the_comparison_page_takes_the_reference_and_every_model_and_each_models_controlled_hiddenbench(monkeypatch):
    from crossprofile_lib.book import compare
    monkeypatch.setattr(compare, "hb_as_run", lambda h, protocol: None if h is None else (h, protocol))
    ref, m = run(), _model_run()
    ch = SimpleNamespace(ref=ref, all_models=[None, m], all_hb_models=["hb-a", None, "hb-b"])
    assert compare.comparison_page_runs(ch) == {"crossprofile": [ref, m],
                                                "hiddenbench": [("hb-a", "controlled"), ("hb-b", "controlled")]}
    assert compare.comparison_page_runs(SimpleNamespace(ref=None, all_models=[], all_hb_models=[])) == {
        "crossprofile": [], "hiddenbench": []}


def _rel_setup(monkeypatch):
    """relevance_takeaways with its helpers made visible: each explanation names its mechanism's weight, the paper
    quantity and the estimate; each mark names its run; the chapter's lookups accept a run only."""
    monkeypatch.setattr("crossprofile_lib.book.headline.why", lambda mech, ref, estimate: f"WHY[{mech}|{ref}|{estimate}]")
    monkeypatch.setattr("crossprofile_lib.book.headline.mechanism", lambda p: f"MECH[{p.social_proof}]")
    monkeypatch.setattr("crossprofile_lib.book.headline.status_line", lambda r: f"STATUS[{r.label}]")
    monkeypatch.setattr("crossprofile_lib.book.headline.run_mark", lambda r: f"<{r.label}>")
    ref = Run(Path("runs/x"), pd.DataFrame({"backend": ["ledger"] * 4, "model": ["reference"] * 4,
                                            "variant": ["a", "b", "c", "d"]}), {"backend": "ledger", "model": "reference"})
    sp = run(label_model="reference, social proof")
    sp.tag = "sp"

    def at(r, t):
        assert isinstance(r, Run)
        return t
    ch = SimpleNamespace(ref=ref, sp=sp, model=None, shown=[ref], params=SimpleNamespace(social_proof=0.5),
                         budget=lambda r: f"B({r.label})", at=at)
    return ch, ref, sp


def test_relevance_takeaways_whole_lines_for_the_reference_decider(monkeypatch):
    from crossprofile_lib.book.paper import paper_text
    ch, ref, sp = _rel_setup(monkeypatch)
    lifted = cells(dict(CELLS, **{"R1-rel": (84.0, 33.0)}))           # classic R1-rel - R1 = 84 - 80 = +4.0
    lines = relevance_takeaways(ch, {ref.label: lifted, sp.label: lifted}, {ref.label: _holm()})
    mk = "<reference decider (ledger)>"
    assert lines == [
        f"reference decider (ledger): over its 4 variants (of 8) H3 = R1-rel - R1 = <b>-7.5</b> points [-11.0, -2.0] "
        f"{mk} (Holm p = 0.0040); in the classic cell (PSP) R1-rel - R1 = <b>+4.0</b> points {mk} and "
        f"R1-rel-oracle - R1 = +6.0 points {mk} at r = B(reference decider (ledger)).",
        "WHY[MECH[0.5]|classic-rel/R1-rel - R1|4.0]",
        "WHY[MECH[0.5]|h3/H3: R1-rel - R1|-7.5]",
        f"Paper (every model; beside the reference decider): H3 {paper_text('h3/H3: R1-rel - R1')}; classic cell "
        f"R1-rel - R1 {paper_text('classic-rel/R1-rel - R1')}, oracle {paper_text('classic-rel/oracle relevance - R1')}.",
        f"With a social-proof weight of 0.5 the reference decider's classic-cell R1-rel - R1 is <b>+4.0</b> points {mk} "
        f"(84.0% against 80.0%); without it, +4.0 points {mk}: so in this build the weight does not make R1-rel lose "
        "to R1 there."]


def test_relevance_takeaways_whole_line_for_a_model_run_with_its_own_paper_values(monkeypatch):
    from crossprofile_lib.book.paper import paper_text
    ch, ref, sp = _rel_setup(monkeypatch)
    q = _model_run()
    lines = relevance_takeaways(SimpleNamespace(**{**vars(ch), "shown": [q], "sp": None}), {q.label: cells()},
                                {q.label: _holm()})
    mk = f"<{q.label}>"
    assert lines[0] == (
        f"{q.label}: over all eight variants H3 = R1-rel - R1 = <b>-7.5</b> points [-11.0, -2.0] {mk} (Holm p = 0.0040); "
        f"in the classic cell (PSP) R1-rel - R1 = <b>-8.0</b> points {mk} and R1-rel-oracle - R1 = +6.0 points {mk} at "
        f"r = B({q.label}). Paper, same model: H3 {paper_text('h3/H3: R1-rel - R1', run=q)}; classic cell R1-rel - R1 "
        f"{paper_text('classic-rel/R1-rel - R1', run=q)}; STATUS[{q.label}]")
    assert len(lines) == 2 and lines[1].startswith("Paper (every model; beside the reference decider): H3 ")


WEIGHT_MAKES = "so in this build the weight on speaker labels is what makes R1-rel lose to R1 there"
LOSES_BOTH = "so in this build R1-rel loses to R1 there with and without the weight"
DOES_NOT = "so in this build the weight does not make R1-rel lose to R1 there"


@pytest.mark.parametrize("with_weight, without, verdict", [
    (-8.0, 4.0, WEIGHT_MAKES), (-8.0, 0.0, WEIGHT_MAKES),       # no loss without the weight includes a tie
    (-8.0, -2.0, LOSES_BOTH),
    (0.0, 4.0, DOES_NOT), (0.5, 2.0, DOES_NOT),                   # a tie or a small gain with the weight is no loss
    (4.0, -8.0, DOES_NOT), (0.0, -8.0, DOES_NOT), (0.5, -2.0, DOES_NOT)])
def test_social_proof_verdict_at_its_edges(monkeypatch, with_weight, without, verdict):
    ch, ref, sp = _rel_setup(monkeypatch)

    def gap(g):
        return cells(dict(CELLS, **{"R1-rel": (80.0 + g, 33.0)}))    # R1 classic is 80.0
    last = relevance_takeaways(ch, {ref.label: gap(without), sp.label: gap(with_weight)}, {ref.label: _holm()})[-1]
    mk = "<reference decider (ledger)>"
    assert last == (f"With a social-proof weight of 0.5 the reference decider's classic-cell R1-rel - R1 is "
                    f"<b>{with_weight:+.1f}</b> points {mk} ({80.0 + with_weight:.1f}% against 80.0%); without it, "
                    f"{without:+.1f} points {mk}: {verdict}.")


def test_no_social_proof_line_when_either_runs_gap_cannot_be_had(monkeypatch):
    ch, ref, sp = _rel_setup(monkeypatch)
    no_rel = cells({k: v for k, v in CELLS.items() if k != "R1-rel"})
    for ref_t, sp_t in [(cells(), no_rel), (no_rel, cells())]:
        last = relevance_takeaways(ch, {ref.label: ref_t, sp.label: sp_t}, {ref.label: _holm()})[-1]
        assert last.startswith("Paper (every model; beside the reference decider)")


def _stub_finding_inputs(monkeypatch, vals, status="confirmatory", reason=""):
    """finding_table over hand-set estimates: suite_values reads ``vals`` ((run label, paper ref) -> (est, lo, hi));
    bootstrap and the headroom check record what they are given."""
    from crossprofile_lib.book import compare
    from crossprofile_lib.book.models import ModelVerdict
    calls = []
    monkeypatch.setattr(compare, "bootstrap", lambda r, n, seed: calls.append(("boot", r.label, n, seed)) or f"BOOT[{r.label}]")
    monkeypatch.setattr(compare, "headroom_verdict",
                        lambda r, boot: calls.append(("headroom", r.label, boot)) or ModelVerdict(status, reason))
    monkeypatch.setattr(compare, "suite_values", lambda items, r, boot, data: [
        None if (r.label, it.ref) not in vals else dict(zip(("estimate", "lo", "hi"), vals[(r.label, it.ref)]))
        for it in items])
    return calls


def test_finding_table_rows_the_reference_unscored_and_a_models_sign_verdicts(monkeypatch):
    from crossprofile_lib.book.compare import FINDINGS, finding_table
    from crossprofile_lib.book.runs import bootstrap
    ref, q = run(), _model_run()
    q.boot = own = bootstrap(q, 20, 0)
    calls = _stub_finding_inputs(monkeypatch, {
        (ref.label, "classic-r1-b4/R1 - B4"): (30.0, 25.0, 35.0),
        (q.label, "classic-r1-b4/R1 - B4"): (12.0, 4.5, 19.5), (q.label, "mirror-r1-b4/R1 - B4"): (-6.0, -11.0, 1.0)})
    swing = next(f for f in FINDINGS if f.key == "swing")
    t = finding_table(swing, [ref, q], 5000, 7)
    # at most 2000 resamples, the seed passed on; the headroom check uses the run's own bootstrap where it has one
    assert calls == [("boot", ref.label, 2000, 7), ("headroom", ref.label, f"BOOT[{ref.label}]"),
                     ("boot", q.label, 2000, 7), ("headroom", q.label, own)]
    lm = " ‹LM: Qwen2.5-7B-Instruct›"
    assert t.to_dict("records") == [
        {"run": "reference decider (not a model)", "quantity": "classic cell (PSP): R1 - B4",
         "this run": "30.0 [25.0, 35.0] ‹ref. decider›",
         "paper (same model)": "+70.6 (Qwen2.5-7B-Instruct) / +66.1 (Llama-3.1-8B-Instruct)",
         "finding holds?": "not scored: a mechanism (why: below)"},
        {"run": "reference decider (not a model)", "quantity": "mirror cell (SPS): R1 - B4", "this run": "not in this run",
         "paper (same model)": "-73.9 (Qwen2.5-7B-Instruct)", "finding holds?": "not scored: a mechanism (why: below)"},
        {"run": "openai (? mode)", "quantity": "classic cell (PSP): R1 - B4", "this run": "12.0 [4.5, 19.5]" + lm,
         "paper (same model)": "+70.6 (Qwen2.5-7B-Instruct)", "finding holds?": "holds"},
        {"run": "openai (? mode)", "quantity": "mirror cell (SPS): R1 - B4", "this run": "-6.0 [-11.0, 1.0]" + lm,
         "paper (same model)": "-73.9 (Qwen2.5-7B-Instruct)", "finding holds?": "does not hold"}]   # covers 0
    est = t.attrs["estimates"]
    assert est[("reference decider (not a model)", "classic-r1-b4/R1 - B4")] == 30.0
    assert est[("openai (? mode)", "mirror-r1-b4/R1 - B4")] == -6.0
    assert est[("reference decider (not a model)", "mirror-r1-b4/R1 - B4")] != est[
        ("reference decider (not a model)", "mirror-r1-b4/R1 - B4")]                                # NaN: not in the run


def test_finding_table_an_exploratory_model_is_not_judged_and_names_why(monkeypatch):
    from crossprofile_lib.book.compare import FINDINGS, finding_table
    q = _model_run()
    _stub_finding_inputs(monkeypatch, {(q.label, "classic-r1-b4/R1 - B4"): (12.0, 4.5, 19.5),
                                       (q.label, "mirror-r1-b4/R1 - B4"): (-6.0, -60.0, 50.0)},
                         status="exploratory", reason="headroom 2.0 points")
    swing = next(f for f in FINDINGS if f.key == "swing")
    assert list(finding_table(swing, [q], 100)["finding holds?"]) == [
        "not judged: exploratory (headroom 2.0 points)", "not judged: interval spans -60 to 50"]


NET_LEAD = ("net-lead/net lead -2", "net-lead/net lead +2", "net-lead/net lead >= +4")


@pytest.mark.parametrize("got, verdict", [
    (((40.0, 30.0, 50.0), (60.0, 50.0, 70.0), (60.0, 52.0, 68.0)), "holds"),           # a tie does not break a rise
    (((40.0, 30.0, 52.0), (60.0, 50.0, 70.0), (60.0, 52.0, 68.0)), "does not hold"),   # first hi = last lo: no gap
    (((40.0, 30.0, 50.0), (70.0, 60.0, 80.0), (60.0, 52.0, 68.0)), "does not hold"),   # the last falls back
    (((40.0, 30.0, 50.0), (39.0, 50.0, 70.0), (60.0, 52.0, 68.0)), "does not hold"),   # the middle falls back
    (((40.0, 30.0, 50.0), None, (60.0, 52.0, 68.0)), "not in this run"),
    (((40.0, 0.0, 99.0), (60.0, 50.0, 70.0), (60.0, 52.0, 68.0)), "not judged: interval spans 0 to 99")])
def test_a_rising_findings_verdict_on_its_last_row(monkeypatch, got, verdict):
    from crossprofile_lib.book.compare import FINDINGS, finding_table
    q = _model_run()
    _stub_finding_inputs(monkeypatch, {(q.label, ref): g for ref, g in zip(NET_LEAD, got) if g is not None})
    nl = next(f for f in FINDINGS if f.key == "net-lead")
    t = finding_table(nl, [q], 100)
    assert list(t["finding holds?"]) == ["(see below)", "(see below)", verdict]
    assert list(t["quantity"]) == ["net lead -2", "net lead +2", "net lead >= +4"]


def test_finding_table_of_a_models_sample_names_its_variants_and_its_paper_model(monkeypatch):
    from crossprofile_lib.book.compare import FINDINGS, finding_table
    q = _model_run("SmolLM2-360M-Instruct", 8)
    q = Run(q.path, q.df.assign(variant=["PSP", "SPS"] * 4), q.header)
    _stub_finding_inputs(monkeypatch, {(q.label, "h3/H3: R1-rel - R1"): (2.0, -1.0, 5.0)})
    rel = next(f for f in FINDINGS if f.key == "relevance")
    t = finding_table(rel, [q], 100)
    assert list(t["quantity"]) == ["H3: R1-rel - R1, 2 variants (of 8)", "classic cell (PSP): R1-rel - R1"]
    assert list(t["paper (same model)"]) == ["– (not one of the paper's models)"] * 2
    assert list(t["this run"]) == ["2.0 [-1.0, 5.0] ‹LM: SmolLM2-360M-Instruct›", "not in this run"]
    assert list(t["finding holds?"]) == ["does not hold", "not in this run"]


def test_rarest_takeaways_whole_lines_r1_and_b4_per_cell_then_h1_h2_and_h2s_why(monkeypatch):
    from crossprofile_lib.book.paper import paper_text
    ch, ref, _ = _rel_setup(monkeypatch)
    mk = "<reference decider (ledger)>"
    lines = rarest_takeaways(ch, {ref.label: cells()}, {ref.label: _holm()})
    assert lines == [
        f"With the reference decider at r = B(reference decider (ledger)), R1 decides <b>80.0% {mk}</b> correctly in "
        f"the classic cell (PSP) and <b>30.0% {mk}</b> in the mirror cell (SPS); B4 (first mention) 60.0% {mk} and "
        f"40.0% {mk} (paper: R1 {paper_text('classic-r1-b4/R1')} and {paper_text('mirror-r1-b4/R1')}; B4 "
        f"{paper_text('classic-r1-b4/B4')} and {paper_text('mirror-r1-b4/B4')}).",
        f"H1 (how much R1's lead over B4 depends on who holds the decoys) = <b>12.5 [3.1, 20.2]</b> points {mk} "
        f"(paper: {paper_text('h1/H1')}).",
        f"H2 (R1 - Random over all eight variants) = <b>-4.5 [-9.0, 1.5]</b> points {mk} "
        f"(paper: {paper_text('cp-mean/H2: R1 - Random')}).",
        "WHY[MECH[0.5]|cp-mean/H2: R1 - Random|-4.5]"]
    only_h2 = _holm().assign(estimable=[False, True, True])
    gone = rarest_takeaways(ch, {ref.label: cells()}, {ref.label: only_h2})
    assert gone[1] == ("H1 (how much R1's lead over B4 depends on who holds the decoys) is not estimable from this "
                       "run (it lacks the variants or policies it needs).")
    assert gone[2:] == lines[2:]


def test_headline_line_whole_for_a_model_with_its_own_paper_values(monkeypatch):
    ch, ref, _ = _rel_setup(monkeypatch)
    q = _model_run()
    mk = "<openai (? mode)>"
    assert headline_line(ch, q, cells()) == (
        f"<b>openai (? mode)</b>, r = B(openai (? mode)): rarest-first (R1) decides 80.0% {mk} correctly in the classic "
        f"cell PSP (paper: 96.7 (Qwen2.5-7B-Instruct)) and 30.0% {mk} in the mirror cell SPS (paper: 22.2 "
        f"(Qwen2.5-7B-Instruct)), a swing of <b>+50.0 points</b> {mk} from who holds the decoys alone; first-mention "
        f"(B4) 60.0% {mk} / 40.0% {mk}, Random 55.0% {mk} / 45.0% {mk}.")
    assert headline_line(ch, ref, cells({k: v for k, v in CELLS.items() if k != "R1"})) == (
        "reference decider (ledger): no classic/mirror decisions at r = B(reference decider (ledger)).")
    no_random = headline_line(ch, ref, cells({k: v for k, v in CELLS.items() if k != "Random"}))
    assert no_random.endswith(", Random – / –.") and "(B4) 60.0% <reference decider (ledger)> / 40.0%" in no_random


def test_first_finding_whole_box_from_a_hand_set_composition(monkeypatch):
    import crossprofile_lib.book.headline as h
    ch, ref, _ = _rel_setup(monkeypatch)
    ref.boot = "BOOT"
    comp = dict(n=12, mean=(4.25, 0.5, 1.75), budget="0.6", templates=10, counts={"qwen": 7, "llama": 6},
                missing=["gemma", "x<y"])
    monkeypatch.setattr(h, "exact_composition", lambda c: comp)
    monkeypatch.setattr(h, "cell_rows", lambda r, boot, outs, pooled: cells()
                        if (r is ref and boot == "BOOT" and outs == ["correct"] and pooled is False) else pytest.fail("args"))
    monkeypatch.setattr(h, "mark", lambda k: f"[{k}]")
    assert h.first_finding(ch).data == (
        '<div class="admonition important cp-first-finding"><p class="admonition-title">The paper, and this build</p>'
        "<p><b>The paper:</b> in the classic cell (support private, decoys shared) rarest-first (R1) keeps "
        "<b>4.98 / 0.01 / 4.00</b> support / decoy / irrelevant facts (paper, Qwen2.5-7B-Instruct).</p>"
        "<p><b>This build:</b> <b>4.25 / 0.50 / 1.75</b> [exact] (its 12 R1 memories there, r = 0.6); at r = 0.6 "
        "exactly 5/0/4 in 7 of 10 templates under qwen pricing and 6 of 10 templates under llama pricing [exact] "
        "(gemma's tokenizer is not available here: not counted) (x&lt;y's tokenizer is not available here: not "
        "counted).</p></div><p>No decider enters what a memory keeps. Which option it leads to is the decider's part: "
        "R1 then decides <b>80.0%</b> <reference decider (ledger)> correctly there (paper: 96.7 (Qwen2.5-7B-Instruct) "
        '/ 97.2 (Llama-3.1-8B-Instruct)); <a href="04-rarest-first.html">chapter 4</a> has every variant.</p>')
    monkeypatch.setattr(h, "exact_composition", lambda c: dict(comp, n=0, budget="0<9"))
    assert h.first_finding(ch).data == (
        '<div class="admonition warning"><p class="admonition-title">The paper, and this build</p><p>The paper\'s R1 '
        "keeps 4.98 / 0.01 / 4.00 support / decoy / irrelevant facts in the classic cell (paper, Qwen2.5-7B-Instruct); "
        "this build has no R1 memory of the classic cell (PSP) at r = 0&lt;9 to set beside it.</p></div>")
    assert h.first_finding(SimpleNamespace(ref=None)).data == (
        '<div class="admonition warning"><p class="admonition-title">No reference run</p><p>This build has no '
        "reference run to set beside the paper.</p></div>")


def test_hb_takeaways_one_line_per_estimated_quantity_of_each_model_beside_its_paper_value(monkeypatch):
    import crossprofile_lib.book.hbtables as hb
    from crossprofile_lib.book.paper import paper_text
    calls = []
    monkeypatch.setattr(hb, "bootstrap", lambda r, n, seed: calls.append((r.label, n, seed)) or f"BOOT[{r.label}]")
    got = {("hb-r1-b3/R1", "BOOT[openai (? mode)]"): dict(estimate=61.25, lo=52.0, hi=70.5),
           ("hb-r1-b3/B3", "BOOT[openai (? mode)]"): dict(estimate=float("nan"), lo=float("nan"), hi=float("nan")),
           ("hb-r1-b3/R1 - B3", "BOOT[openai (? mode)]"): dict(estimate=-3.0, lo=-9.5, hi=4.0)}
    monkeypatch.setattr(hb, "suite_values", lambda items, r, boot, data: [
        got.get((it.ref, boot)) if data == "hiddenbench" else pytest.fail(data) for it in items])
    q = _model_run()
    lines = hb.hb_takeaways(None, [None, q], 5000, 3)
    assert calls == [("openai (? mode)", 2000, 3)]                     # at most 2000 resamples, the seed passed on
    assert lines == [
        f"openai (? mode): R1 = <b>61.2</b> [52.0, 70.5] (paper, same model: {paper_text('hb-r1-b3/R1', run=q)}).",
        f"openai (? mode): R1 - B3 = <b>-3.0</b> [-9.5, 4.0] (paper, same model: {paper_text('hb-r1-b3/R1 - B3', run=q)})."]
    assert hb.hb_takeaways(None, q, 10, 0) == lines                    # one run as well as a list
    assert calls[-1] == ("openai (? mode)", 10, 0)


def test_paper_beside_run_rows_per_estimated_item_and_paper_model(monkeypatch):
    import crossprofile_lib.book.headline as h
    items = {it.ref: it for it in h.headline_items()}
    pick = [items[k] for k in ("cp-mean/R1", "cp-mean/Random", "h1/H1", "mirror-r1-b4/R1 - B4")]
    vals = {"cp-mean/R1": dict(estimate=10.0, lo=5.0, hi=15.0), "h1/H1": dict(estimate=-2.5, lo=-4.0, hi=-1.0),
            "cp-mean/Random": dict(estimate=float("nan"), lo=1.0, hi=2.0),          # not estimated: no row
            "mirror-r1-b4/R1 - B4": dict(estimate=-30.0, lo=-40.0, hi=-20.0)}
    monkeypatch.setattr(h, "suite_values", lambda its, r, boot: [vals.get(it.ref) for it in its]
                        if boot == f"BOOT[{r.label}]" else pytest.fail("not the run's bootstrap"))
    ref = run()
    ref.boot = f"BOOT[{ref.label}]"
    assert h.paper_beside_run(pick, ref).to_dict("records") == [
        dict(quantity="R1, mean of 8 variants", unit="%", estimate=10.0, lo=5.0, hi=15.0,
             paper_model="Qwen2.5-7B-Instruct", paper=64.0),
        dict(quantity="R1, mean of 8 variants", unit="%", estimate=10.0, lo=5.0, hi=15.0,
             paper_model="Llama-3.1-8B-Instruct", paper=63.0),
        dict(quantity="H1", unit="points", estimate=-2.5, lo=-4.0, hi=-1.0, paper_model="Qwen2.5-7B-Instruct", paper=64.6),
        dict(quantity="H1", unit="points", estimate=-2.5, lo=-4.0, hi=-1.0, paper_model="Llama-3.1-8B-Instruct", paper=62.6),
        dict(quantity="H1", unit="points", estimate=-2.5, lo=-4.0, hi=-1.0, paper_model="DeepSeek-V4.1-Flash", paper=62.6),
        dict(quantity="R1 - B4, mirror cell SPS", unit="points", estimate=-30.0, lo=-40.0, hi=-20.0,
             paper_model="Qwen2.5-7B-Instruct", paper=-73.9)]
    q = _model_run()
    q = Run(q.path, q.df.assign(variant=["PSP", "SPS", "PPP", "SSS"] * 100), q.header)   # a 4-variant sample
    q.boot = f"BOOT[{q.label}]"
    assert h.paper_beside_run(pick, q).to_dict("records") == [      # beside its own paper model only
        dict(quantity="R1, mean of 4 variants (of 8)", unit="%", estimate=10.0, lo=5.0, hi=15.0,
             paper_model="Qwen2.5-7B-Instruct", paper=64.0),
        dict(quantity="H1", unit="points", estimate=-2.5, lo=-4.0, hi=-1.0, paper_model="Qwen2.5-7B-Instruct", paper=64.6),
        dict(quantity="R1 - B4, mirror cell SPS", unit="points", estimate=-30.0, lo=-40.0, hi=-20.0,
             paper_model="Qwen2.5-7B-Instruct", paper=-73.9)]
    assert h.paper_beside_run([items["cp-mean/Random"]], q).empty


@pytest.mark.parametrize("passes, n_tasks, flagged, expected", [
    (True, 12, False, "smol: confirmatory (headroom ALL - EMPTY = 21.5 points [16.0, 27.0] over 12 tasks; the lower "
                      "bound must exceed 15)."),
    (True, 10, False, "smol: confirmatory (headroom ALL - EMPTY = 21.5 points [16.0, 27.0] over 10 tasks; the lower "
                      "bound must exceed 15)."),                                    # 10 tasks are enough
    (False, 12, False, "smol: exploratory (headroom ALL - EMPTY = 21.5 points [16.0, 27.0] over 12 tasks; the lower "
                       "bound must exceed 15)."),
    (True, 9, False, "smol: exploratory (headroom ALL - EMPTY = 21.5 points [16.0, 27.0] over 9 tasks; the lower "
                     "bound must exceed 15; only 9 tasks, too few for the check to mean much)."),
    (True, 12, True, "smol: exploratory (headroom ALL - EMPTY = 21.5 points [16.0, 27.0] over 12 tasks; the lower "
                     "bound must exceed 15; its accuracies are not above chance)."),
    (False, 12, True, "smol: exploratory (headroom ALL - EMPTY = 21.5 points [16.0, 27.0] over 12 tasks; the lower "
                      "bound must exceed 15)."),
    (None, 0, False, "smol: exploratory (headroom not measured: no ALL and EMPTY decisions).")])
def test_hb_status_sentence_confirmatory_only_with_headroom_enough_tasks_and_signal(monkeypatch, passes, n_tasks,
                                                                                   flagged, expected):
    import crossprofile_lib.book.hbtables as hb
    seen = []

    def headroom(d, rng):
        seen.append((d, int(rng.integers(10 ** 6))))
        return None if passes is None else SimpleNamespace(passes=passes, n_tasks=n_tasks, difference=21.5, low=16.0,
                                                           high=27.0)
    monkeypatch.setattr(hb, "headroom", headroom)
    monkeypatch.setattr(hb, "hb_as_run", lambda h, protocol: "RUN" if protocol == "controlled" and h is smol else None)
    monkeypatch.setattr(hb, "near_chance", lambda r: flagged if r == "RUN" else pytest.fail("run"))
    smol = SimpleNamespace(label="smol", decisions=lambda protocol: f"D[{protocol}]")
    assert hb.hb_status(smol, 5) == expected
    assert seen == [("D[controlled]", 670790)]                 # the controlled decisions, resampled with seed 5


def test_exact_composition_of_hand_made_rows_only_r1_classic_at_the_shown_budget(monkeypatch):
    import crossprofile_lib.book.headline as h
    rows = [  # policy, variant, budget, template, support, decoy, irrelevant
        ("R1", "PSP", "0.6", "t1", 5, 0, 4), ("R1", "PSP", "0.6", "t2", 4, 1, 4), ("R1", "PSP", "0.6", "t1", 5, 0, 4),
        ("R1", "SPS", "0.6", "t3", 1, 1, 1), ("B4", "PSP", "0.6", "t4", 2, 2, 2), ("R1", "PSP", "0.3", "t5", 3, 3, 3)]
    df = pd.DataFrame(rows, columns=["policy", "variant", "budget_label", "template_id", "kept_support", "kept_decoy",
                                     "kept_irrelevant"])
    ref = Run(Path("runs/x"), df.assign(backend="ledger", model="reference"),
              {"backend": "ledger", "model": "reference", "tokenizer": "qwen2.5"})
    loaded = []
    monkeypatch.setattr(h, "load_templates", lambda paths: loaded.append(paths) or [
        SimpleNamespace(id=i) for i in ("t1", "t2", "t3", "t4", "t5", "t6")])
    monkeypatch.setattr(h, "get_tokenizer", lambda name: name if name == "qwen2.5" else (_ for _ in ()).throw(
        OSError("no such tokenizer")))
    fit = {"t1": (5, 0, 4), "t2": (5, 0, 4)}
    monkeypatch.setattr(h, "classic_fit", lambda t, tok: SimpleNamespace(kept=fit[t.id]) if tok == "qwen2.5" else None)
    ch = SimpleNamespace(ref=ref, budget=lambda r: "0.6" if r is ref else pytest.fail("run"),
                         params=SimpleNamespace(templates=[Path("templates/dev")]))
    assert h.exact_composition(ch) == dict(mean=(14 / 3, 1 / 3, 4.0), n=3, exact=2, templates=2,
                                           counts={"Qwen2.5": 2}, missing={"Llama-3.1": "OSError"},
                                           pricing="qwen2.5", budget="0.6")
    assert loaded == [["templates/dev"]]                                # the chapter's templates, as strings
    fit["t2"] = (4, 1, 4)
    assert h.exact_composition(ch)["counts"] == {"Qwen2.5": 1}


def test_random_line_whole_lines_per_run_and_the_reference_deciders_why(monkeypatch):
    from crossprofile_lib.book.headline import headline_takeaways, random_line
    from crossprofile_lib.book.paper import paper_text
    ch, ref, _ = _rel_setup(monkeypatch)
    q = _model_run()
    ch.shown = [ref, q]
    lines = random_line(ch, {ref.label: _holm(), q.label: _holm().assign(estimate=[1.0, 2.0, 3.0])})
    assert lines == [
        "reference decider (ledger): over its 4 variants (of 8) R1 - Random = <b>-4.5 [-9.0, 1.5]</b> points "
        "<reference decider (ledger)>; the paper finds R1 no better than random "
        f"({paper_text('cp-mean/H2: R1 - Random')}).",
        "WHY[MECH[0.5]|cp-mean/H2: R1 - Random|-4.5]",
        "openai (? mode): over all eight variants R1 - Random = <b>2.0 [-9.0, 1.5]</b> points <openai (? mode)>; the "
        f"paper finds R1 no better than random ({paper_text('cp-mean/H2: R1 - Random', run=q)})."]
    assert random_line(ch, {q.label: _holm(False)}) == []          # a run without H2, or without contrasts: no line
    # the headline takeaways carry these lines only when given the contrasts
    ch.shown = [ref]
    monkeypatch.setattr("crossprofile_lib.book.headline.headline_line", lambda c, r, t: f"HEAD[{r.label}]")
    monkeypatch.setattr("crossprofile_lib.book.headline.model_signal", lambda r, boot: SimpleNamespace(ok=True))
    assert headline_takeaways(ch, {ref.label: cells()}, {ref.label: _holm()}) == ["HEAD[reference decider (ledger)]",
                                                                                 *lines[:2]]
    assert headline_takeaways(ch, {ref.label: cells()}) == ["HEAD[reference decider (ledger)]"]


def test_one_session_whole_block_indented_json_cut_at_20000_characters(monkeypatch):
    import crossprofile_lib.book.hbtables as hb
    recs = {"natural": [dict(task_id="7", seed=2, ablation="no-memory", votes=[1], rows=[9], when=Path("x"))]}
    monkeypatch.setattr(hb, "iter_artefacts", lambda path, kind: iter(recs.get(kind, [])) if path == "P" else iter([]))
    h = SimpleNamespace(path="P", label="smol", header={"data_source": "fixture"})
    assert hb.one_session(h).data == (
        "<details><summary>Session 7 / seed 2 / no-memory: votes, messages, claims, memories, decisions (smol, data "
        "fixture)</summary><pre style='white-space: pre-wrap'>{\n &quot;task_id&quot;: &quot;7&quot;,\n &quot;seed&quot;: "
        "2,\n &quot;ablation&quot;: &quot;no-memory&quot;,\n &quot;votes&quot;: [\n  1\n ],\n &quot;when&quot;: "
        "&quot;x&quot;\n}</pre></details>")
    recs["natural"] = [dict(notes="a" * 30000)]
    out = hb.one_session(h).data        # the JSON text '{\n "notes": "aaa...' cut to 20000 characters, then escaped
    assert out == ("<details><summary>Session ? / seed ? / ?: votes, messages, claims, memories, decisions (smol, data "
                   "fixture)</summary><pre style='white-space: pre-wrap'>{\n &quot;notes&quot;: &quot;" + "a" * 19987
                   + "</pre></details>")


def test_summary_keeps_a_verdict_up_to_its_first_parenthesis():
    from crossprofile_lib.book.compare import FINDINGS, summary
    t = pd.DataFrame({"run": ["m", "m"], "finding holds?": [
        "not judged: exploratory (headroom failed (ALL - EMPTY 3.0 points))", "does not hold"]})
    assert summary([(FINDINGS[0], t)]).to_dict() == {"m": {FINDINGS[0].title: "not judged: exploratory; does not hold"}}


def test_coverage_note_whole_sentences():
    from crossprofile_lib.book.compare import coverage_note
    assert coverage_note([run()]) == (
        "This build ran no language model: every table shows the reference decider only (a normative evidence counter, "
        "not a model) beside the paper's values for each of the paper's models.")
    smol, tiny = _model_run("smol<1>", 4), _model_run("tiny", 4)
    tiny.tag = "t"
    assert coverage_note([run(), smol, tiny]) == (
        f"<b>No GPU model ran for this build, and none of its runs is one of the paper's models</b> (openai (? mode), "
        f"{tiny.label.replace('<', '&lt;').replace('>', '&gt;')}): no paper value is set beside them, and their rows show "
        "the pipeline running, not the paper's effects. Rerun with BACKENDS= on a GPU machine or import its run folders "
        "with RUNS= to fill the paper's columns.")
    q = _model_run()
    q.tag = "q"
    assert coverage_note([run(), smol, q]) == (
        f"This build's runs of the paper's models: {q.label} = Qwen2.5-7B-Instruct. Each is set beside its own paper "
        "values only.")


def test_net_lead_message_names_each_runs_lowest_and_highest_lead_in_order():
    from crossprofile_lib.book.compare import net_lead_message
    a = pd.DataFrame({"net_lead": [4, -3, 1], "estimate": [91.6, 12.4, 50.0], "n": [5, 7, 3]})
    b = pd.DataFrame({"net_lead": [0, -1], "estimate": [66.0, 33.3], "n": [4, 0]})
    c = pd.DataFrame({"net_lead": [1], "estimate": [10.0], "n": [0]})
    assert net_lead_message({"ref": a, "empty": c, "m<1>": b}) == (
        "Accuracy by net lead, lowest to highest: ref 12% at -3 to 92% at +4; m<1> 66% at +0 to 66% at +0")


def test_net_lead_tables_without_a_chapter_read_every_row_and_bootstrap_a_run_without_one(monkeypatch):
    from crossprofile_lib.book import compare
    from crossprofile_lib.book.models import ModelVerdict
    monkeypatch.setattr(compare, "accuracy_by_net_lead", lambda d, boot: (len(d), boot))
    monkeypatch.setattr(compare, "bootstrap", lambda r, n, seed: f"BOOT[{r.label}, {n}, {seed}]")
    monkeypatch.setattr(compare, "headroom_verdict", lambda r: ModelVerdict("confirmatory" if r.is_reference else
                                                                            "exploratory"))
    from crossprofile_lib.book.runs import bootstrap
    ref, q = run(), _model_run("smol", 8)
    q.boot = own = bootstrap(q, 20, 0)
    empty = Run(Path("runs/e"), pd.DataFrame({"backend": pd.Series([], dtype=str)}), {"backend": "openai"})
    assert compare.net_lead_tables([ref, empty, q]) == {
        "reference decider (not a model)": (1, "BOOT[reference decider (ledger), 200, 0]"),
        "openai (? mode) · near chance (exploratory: no headroom)": (8, own)}


def test_r1_b3_table_caps_resamples_and_keeps_only_the_same_models_paper_columns(monkeypatch):
    import crossprofile_lib.book.hbtables as hb
    seen = []
    cols = pd.MultiIndex.from_tuples([("quantity", ""), ("paper", "Qwen2.5-7B-Instruct"), ("paper", "Llama-3.1-8B-Instruct"),
                                      ("this suite", "q"), ("result", "")])

    def paper_vs_suite(items, runs, n_resamples, seed):
        seen.append(([it.ref for it in items], {k: [r.label for r in v] for k, v in runs.items()}, n_resamples, seed))
        return pd.DataFrame([["R1", 70.0, 60.0, 55.0, "x"], ["B3", 50.0, 40.0, 45.0, "y"]], columns=cols)
    monkeypatch.setattr(hb, "paper_vs_suite", paper_vs_suite)
    q = _model_run()
    t = hb.r1_b3_table(q, 5000, 4)
    assert seen == [(["hb-r1-b3/R1", "hb-r1-b3/B3", "hb-r1-b3/R1 - B3, mean over budgets", "hb-r1-b3/R1 - B3"],
                     {"hiddenbench": ["openai (? mode)"]}, 2000, 4)]
    assert list(t.columns) == [("paper", "Qwen2.5-7B-Instruct"), ("this suite", "q")]
    assert list(t.index) == ["R1", "B3"] and t.to_numpy().tolist() == [[70.0, 55.0], [50.0, 45.0]]
    hb.r1_b3_table(q, 300, 0)
    assert seen[-1][2:] == (300, 0)
    assert list(hb.r1_b3_table(run(), 300, 0).columns) == [("paper", "Qwen2.5-7B-Instruct"),
                                                          ("paper", "Llama-3.1-8B-Instruct"), ("this suite", "q")]


def test_by_decider_stacks_each_runs_cells_at_its_budget_for_the_outcome_asked():
    from crossprofile_lib.book.headline import by_decider
    ref, sp = run(), run(label_model="reference, social proof")
    sp.tag = "sp"
    ch = SimpleNamespace(at=lambda r, t: t.assign(at=r.label) if isinstance(r, Run) else pytest.fail("run"))
    b = by_decider(ch, [ref, sp], {ref.label: cells(), sp.label: cells(dict(CELLS, R1=(1.0, 2.0)))}, ["R1"])
    assert b[["run", "at", "cell", "estimate"]].to_numpy().tolist() == [
        [ref.label, ref.label, "classic (PSP)", 80.0], [ref.label, ref.label, "mirror (SPS)", 30.0],
        [sp.label, sp.label, "classic (PSP)", 1.0], [sp.label, sp.label, "mirror (SPS)", 2.0]]
    d = by_decider(ch, [ref], {ref.label: cells()}, ["R1", "B4"], "chose_decoy")
    assert d[["policy", "estimate"]].to_numpy().tolist() == [["R1", 20.0], ["B4", 40.0]]


def test_noisy_filter_grid_order_arguments_and_euclidean_distance_by_hand(monkeypatch):
    import crossprofile_lib.book.headline as h
    calls = []
    monkeypatch.setattr(h, "paper_filter", lambda: {"precision": 0.85, "recall": 0.75, "composition": [5.0, 0.0, 4.0]})
    kept = {(0.85, 0.75): (2.0, 4.0, 4.0), (1.0, 1.0): (5.0, 0.0, 4.0)}        # distance 5 (3-4-5) and 0

    def comps(tpl, tok, p, r, seeds, budget, draws):
        calls.append((tpl, tok, p, r, seeds, budget, draws))
        return (p, r)
    monkeypatch.setattr(h, "tiering_compositions", comps)
    monkeypatch.setattr(h, "tiering_summary", lambda pr: pd.DataFrame(
        [dict(precision=pr[0], recall=pr[1], **dict(zip(KEPT_COLS, kept.get(pr, (6.0, 2.0, 5.0)))))]))
    rows = h.noisy_filter_grid("TPL", "TOK", [3], "0.3", draws=2)
    grid = [(0.85, 0.75)] + [(p, r) for p in (1.0, 0.9, 0.8, 0.7) for r in (1.0, 0.9, 0.8, 0.7)]
    assert calls == [("TPL", "TOK", p, r, [3], "0.3", 2) for p, r in grid]
    assert list(zip(rows.precision, rows.recall)) == grid and list(rows.index) == list(range(17))
    assert rows["distance to the paper"].tolist() == pytest.approx([5.0, 0.0] + [6 ** 0.5] * 15)   # (1, 2, 1)
    assert h.noisy_filter_grid("TPL", "TOK", [3], "0.3") is not None and calls[-1][-1] == 5         # 5 draws by default


KEPT_COLS = ("kept_support", "kept_decoy", "kept_irrelevant")


def test_cell_rows_single_cells_then_pooled_ones_labelled(monkeypatch):
    calls = []

    def means_table(d, by, outcomes, boot):
        calls.append((by, list(outcomes), boot))
        g = d.groupby(by, sort=True).size().reset_index(name="estimate")
        return g.assign(outcome="+".join(outcomes), lo=0.0, hi=100.0)
    monkeypatch.setattr(tables, "means_table", means_table)
    df = pd.DataFrame({"policy": ["R1", "R1", "R1", "B4"], "budget_label": ["0.6"] * 4,
                       "cell": ["classic", "mirror", "other", "classic"],
                       "pooled_cell": ["classic", "classic", "mirror", "other"]})
    r = Run(Path("runs/x"), df.assign(backend="ledger", model="reference"), {"backend": "ledger"})
    t = tables.cell_rows(r, "BOOT", ["correct", "chose_decoy"])
    assert calls == [(["policy", "budget_label", "cell"], ["correct", "chose_decoy"], "BOOT"),
                     (["policy", "budget_label", "pooled_cell"], ["correct", "chose_decoy"], "BOOT")]
    assert t[["policy", "cell", "estimate", "outcome"]].to_numpy().tolist() == [
        ["B4", "classic (PSP)", 1, "correct+chose_decoy"], ["R1", "classic (PSP)", 1, "correct+chose_decoy"],
        ["R1", "mirror (SPS)", 1, "correct+chose_decoy"],
        ["R1", "pooled classic (PS*)", 2, "correct+chose_decoy"], ["R1", "pooled mirror (SP*)", 1, "correct+chose_decoy"]]
    assert list(t.index) == list(range(5))
    single = tables.cell_rows(r, "BOOT", pooled=False)
    assert calls[-1] == (["policy", "budget_label", "cell"], ["correct"], "BOOT") and len(single) == 3
    no_pooled = Run(r.path, r.df.drop(columns="pooled_cell"), r.header)
    assert len(tables.cell_rows(no_pooled, "BOOT")) == 3
    none = tables.cell_rows(Run(r.path, r.df.assign(cell="other", pooled_cell="other"), r.header), "BOOT")
    assert none.empty and list(none.columns) == ["policy", "budget_label", "cell", "outcome", "estimate", "lo", "hi"]


def test_social_proof_fit_passes_recorded_data_else_the_rebuild_and_the_runs_bootstrap(monkeypatch):
    calls = []
    monkeypatch.setattr(tables, "resolve", lambda t: Path("/root") / t)
    monkeypatch.setattr(tables, "bootstrap", lambda r, n: f"BOOT[{n}]")
    monkeypatch.setattr(tables, "fit_social_proof", lambda data, boot, n: calls.append((data, boot, n)) or {"w": 0.5})
    recorded = {"yes": ("DATA", {"source": "recorded"})}
    monkeypatch.setattr(tables, "recorded_choice_data", lambda df: recorded.get(df.attrs.get("k")))
    monkeypatch.setattr(tables, "rebuild_choice_data", lambda df, cfg, templates: (
        "REBUILT", {"source": "rebuilt", "cfg": cfg, "templates": templates}))
    df = pd.DataFrame({"backend": ["ledger"]})
    df.attrs["k"] = "yes"
    r = Run(Path("runs/x"), df, {"backend": "ledger", "config": {"templates": ["tA", "tB"]}})
    assert tables.social_proof_fit(r, 30) == {"w": 0.5, "rebuild": {"source": "recorded"}}
    assert calls[-1] == ("DATA", "BOOT[30]", 30)
    r.boot = "OWN"
    tables.social_proof_fit(r, None)
    assert calls[-1] == ("DATA", "OWN", None)
    bare = Run(Path("runs/x"), pd.DataFrame({"backend": ["ledger"]}), {"backend": "ledger"})
    assert tables.social_proof_fit(bare, None) == {"w": 0.5, "rebuild": {"source": "rebuilt", "cfg": {},
                                                                          "templates": ["/root/templates"]}}
    assert calls[-1] == ("REBUILT", "BOOT[1000]", None)                  # no count: 1000 resamples for the bootstrap
    withcfg = Run(Path("runs/x"), pd.DataFrame({"backend": ["ledger"]}), {"backend": "ledger",
                                                                          "config": {"templates": ["tA", "tB"]}})
    assert tables.social_proof_fit(withcfg, 7)["rebuild"]["templates"] == ["/root/tA", "/root/tB"]


def test_label_effect_rows_by_hand_cells_then_all_variants_then_pooled(monkeypatch):
    calls = []

    def label_effects(df, boot):
        calls.append((list(df["cell"]), boot))
        return pd.DataFrame({"cell": list(dict.fromkeys(df["cell"])) + ["all"], "effect": range(len(set(df["cell"])) + 1)})
    monkeypatch.setattr(tables, "label_effects", label_effects)
    df = pd.DataFrame({"cell": ["classic", "other", "mirror"], "pooled_cell": ["mirror", "classic", "x"]})
    r = Run(Path("runs/x"), df.assign(backend="ledger"), {"backend": "ledger"})
    t = tables.label_effect_rows(r, "BOOT")
    assert calls == [(["classic", "other", "mirror"], "BOOT"), (["mirror", "classic", "x"], "BOOT")]
    assert t.to_dict("list") == {"cell": ["classic (PSP)", "mirror (SPS)", "all variants", "pooled mirror (SP*)",
                                          "pooled classic (PS*)"], "effect": [0, 2, 3, 0, 1]}
    assert tables.label_effect_rows(r, "BOOT", pooled=False)["cell"].tolist() == ["classic (PSP)", "mirror (SPS)",
                                                                                  "all variants"]
    monkeypatch.setattr(tables, "label_effects", lambda df, boot: pd.DataFrame())
    assert tables.label_effect_rows(r, "BOOT").empty


def test_central_cells_per_shown_run_its_correct_rows_without_pooled_cells_at_its_budget(monkeypatch):
    import crossprofile_lib.book.headline as h
    ref, sp = run(), run(label_model="reference, social proof")
    sp.tag = "sp"
    ref.boot, sp.boot = "B0", "B1"
    monkeypatch.setattr(h, "cell_rows", lambda r, boot, outs, pooled: f"ROWS[{r.label}|{boot}|{outs}|{pooled}]")
    ch = SimpleNamespace(shown=[ref, sp], at=lambda r, t: f"AT[{r.label}]{t}" if isinstance(r, Run) else pytest.fail("run"))
    assert h.central_cells(ch) == {
        ref.label: f"AT[{ref.label}]ROWS[{ref.label}|B0|['correct']|False]",
        sp.label: f"AT[{sp.label}]ROWS[{sp.label}|B1|['correct']|False]"}


def test_cell_gaps_prereg_document_per_present_policy(monkeypatch):
    seen = {}
    monkeypatch.setattr(tables, "parse_prereg", lambda doc, name: seen.update(doc=doc, name=name) or "PRE")
    monkeypatch.setattr(tables, "unit_column", lambda df: "UNIT")

    def evaluate(df, pre, boot, template_col):
        seen.update(pre=pre, boot=boot, col=template_col)
        ids = [c["id"] for c in seen["doc"]["contrasts"]]
        return pd.DataFrame({"id": ids, "estimate": [float(i + 1) for i in range(len(ids))]})
    monkeypatch.setattr(tables, "evaluate_contrasts", evaluate)
    r = Run(Path("runs/x"), pd.DataFrame({"policy": ["B4", "R1", "B4"], "backend": "ledger"}), {"backend": "ledger"})
    res = tables.cell_gaps(r, "BOOT", ["R1", "NOPE", "B4"], budget="0.3")
    assert seen["doc"] == {
        "defaults": {"outcome": "correct", "scale": 100, "where": {"budget_label": ["0.3", "none"]}},
        "contrasts": [
            {"id": "R1|gap", "title": "R1: classic - mirror", "where": {"policy": "R1"},
             "terms": [{"weight": 1, "where": {"cell": "classic"}}, {"weight": -1, "where": {"cell": "mirror"}}]},
            {"id": "R1|mean", "title": "R1: mean over variants", "where": {"policy": "R1"},
             "terms": [{"weight": 1, "where": {}}]},
            {"id": "B4|gap", "title": "B4: classic - mirror", "where": {"policy": "B4"},
             "terms": [{"weight": 1, "where": {"cell": "classic"}}, {"weight": -1, "where": {"cell": "mirror"}}]},
            {"id": "B4|mean", "title": "B4: mean over variants", "where": {"policy": "B4"},
             "terms": [{"weight": 1, "where": {}}]}]}
    assert (seen["name"], seen["pre"], seen["boot"], seen["col"]) == ("<cell gaps>", "PRE", "BOOT", "UNIT")
    assert res.to_dict("list") == {"id": ["R1|gap", "R1|mean", "B4|gap", "B4|mean"], "estimate": [1.0, 2.0, 3.0, 4.0],
                                   "policy": ["R1", "R1", "B4", "B4"],
                                   "quantity": ["classic - mirror (points)", "mean accuracy (%)"] * 2}
    tables.cell_gaps(r, "BOOT", ["R1"])
    assert seen["doc"]["defaults"]["where"] == {"budget_label": ["0.6", "none"]}    # the primary budget by default


def test_contrasts_with_holm_levels_by_hand_per_family_with_its_alpha(monkeypatch):
    nan = float("nan")
    pre = SimpleNamespace(families={"confirmatory": SimpleNamespace(alpha=0.1)})
    seen = []
    monkeypatch.setattr(tables, "at_budget", lambda p, budget: seen.append(("at", p, budget)) or p)
    monkeypatch.setattr(tables, "load_prereg", lambda p=None: seen.append(("load", p)) or pre)
    monkeypatch.setattr(tables, "TemplateBootstrap", lambda units, idx, level: SimpleNamespace(units=units, idx=idx,
                                                                                              level=level))

    def evaluate(df, p, boot):
        assert p is pre and boot.units == "U" and boot.idx == "I"
        w = 10 * getattr(boot, "level", 0.5)
        return pd.DataFrame({"id": ["X1", "X2", "X3", "X4", "X5", "X6"],
                             "family": ["confirmatory"] * 4 + ["exploratory", "other"],
                             "estimable": [True, True, True, False, True, True],
                             "p": [0.03, 0.01, nan, 0.2, 0.02, 0.04], "lo": [-w] * 6, "hi": [w] * 6})
    monkeypatch.setattr(tables, "evaluate_contrasts", evaluate)
    r = Run(Path("runs/x"), pd.DataFrame({"backend": ["ledger"]}), {"backend": "ledger"})
    boot = SimpleNamespace(units="U", idx="I")
    res = tables.contrasts_with_holm(r, boot, families=("confirmatory", "other"), prereg=pre, budget="0.3")
    assert seen == [("at", pre, "0.3")]
    assert list(res["id"]) == ["X1", "X2", "X3", "X4", "X6"] and list(res.index) == list(range(5))
    # confirmatory (alpha 0.1, two tested): X2 (p 0.01) at 1 - 0.1/2, X1 at 1 - 0.1/1; other (alpha 0.05 by default)
    assert res["holm_level"].tolist() == pytest.approx([0.9, 0.95, nan, nan, 0.95], nan_ok=True)
    assert res["lo_holm"].tolist() == pytest.approx([-9.0, -9.5, nan, nan, -9.5], nan_ok=True)
    assert res["hi_holm"].tolist() == pytest.approx([9.0, 9.5, nan, nan, 9.5], nan_ok=True)
    assert res["lo"].tolist() == [-5.0] * 5                                  # the 95% columns: from the first pass
    tables.contrasts_with_holm(r, boot, prereg="my.yaml")
    assert seen[-2:] == [("load", "my.yaml"), ("at", pre, "0.6")]
    only = tables.contrasts_with_holm(r, boot)                                 # the confirmatory family by default
    assert list(only["id"]) == ["X1", "X2", "X3", "X4"] and seen[-2] == ("load", None)


def test_grid_calls_by_hand_config_counts_and_a_seeded_token_sample(monkeypatch):
    seen = {}
    monkeypatch.setattr(tables, "resolve", lambda t: Path("/r") / t)
    monkeypatch.setattr(tables, "load_templates", lambda paths: seen.update(paths=paths) or ["T1", "T2"])
    monkeypatch.setattr(tables, "ReferenceDecider", lambda: SimpleNamespace(tokenizer=SimpleNamespace(count=len)))

    def build_requests(tpl, cfg, stub):
        seen.update(tpl=tpl, cfg=cfg)
        return [(SimpleNamespace(task=i, memory="m", option_order="o"), None) for i in range(10)]
    monkeypatch.setattr(tables, "build_requests", build_requests)
    monkeypatch.setattr(tables, "decision_prompt", lambda task, memory, order: SimpleNamespace(
        text="x" * (task + 1) if (memory, order) == ("m", "o") else ""))        # request i: i + 1 tokens
    g = tables.grid_calls(("tA",), (0, 1, 2), ("0.6", "0.3"), ["R1", "B3", "R1-rel-k7"])
    cfg = seen["cfg"]
    assert seen["paths"] == ["/r/tA"] and seen["tpl"] == ["T1", "T2"]
    assert (cfg.backend, cfg.templates, cfg.seeds, tuple(map(str, cfg.budgets)), cfg.policies, cfg.variants,
            cfg.n_agents) == ("ledger", ("tA",), (0, 1, 2), ("0.6", "0.3"), ("R1", "R1-rel-k7"),
                              ("PPP", "PPS", "PSP", "PSS", "SPP", "SPS", "SSP", "SSS"), 4)
    # 2 templates x 8 variants x 3 seeds = 48 tasks; B3: one summary per task and budget; every request's tokens
    assert g == dict(tasks=48, decisions=10 + 96, relevance_calls=48, stance_calls=0, b3_calls=96, mean_prompt_tokens=5.5)
    # a sample of 3 of the 10 requests: seed 0 draws requests 5, 9, 6 (6 + 10 + 7 tokens); seed 7 draws 7, 5, 6
    assert tables.grid_calls(["tA"], [0], ["0.6"], ["R1"], sample=3)["mean_prompt_tokens"] == pytest.approx(23 / 3)
    few = tables.grid_calls(["tA"], [0], ["0.6"], ["BAL"], variants=["PSP"], n_agents=3, sample=3, seed=7)
    assert few == dict(tasks=2, decisions=10, relevance_calls=0, stance_calls=2, b3_calls=0, mean_prompt_tokens=7.0)
    assert (seen["cfg"].variants, seen["cfg"].n_agents) == (("PSP",), 3)
    assert tables.grid_calls(["tA"], [0], ["0.6"], ["BAL-oracle"], variants=["PSP"])["stance_calls"] == 0  # no model


def test_contrast_table_whole_rows_for_a_model_and_for_the_reference():
    from crossprofile_lib.book.tables import contrast_table
    nan = float("nan")
    res = pd.DataFrame([dict(id="H1", title="H1: t", estimate=12.34, lo=3.14, hi=20.26, lo_holm=-1.04, hi_holm=22.0,
                             holm_level=0.975, p=0.0123, p_adjusted=0.0246, reject=True,
                             paper={"Qwen2.5-7B-Instruct": "31.5", "Llama-3.1-8B-Instruct": "20.0"}),
                        dict(id="H2", title="H2: t", estimate=nan, lo=nan, hi=nan, lo_holm=nan, hi_holm=nan,
                             holm_level=nan, p=nan, p_adjusted=nan, reject=False, paper="n/a")])
    blank = {"95% interval": "–", "Holm-adjusted interval": "–", "p": "", "Holm p": "", "reject at 0.05": False}
    assert contrast_table(res, _model_run()).to_dict("index") == {
        "H1": {"contrast": "H1: t", "estimate (points)": "+12.3 ‹LM: Qwen2.5-7B-Instruct›", "95% interval": "[3.1, 20.3]",
               "Holm-adjusted interval": "[-1.0, 22.0] (97.5%)", "p": "0.0123", "Holm p": "0.0246", "reject at 0.05": True,
               "paper: Qwen2.5-7B-Instruct": "31.5"},
        "H2": {"contrast": "H2: t", "estimate (points)": "–", **blank, "paper: Qwen2.5-7B-Instruct": ""}}
    ref = contrast_table(res).to_dict("index")
    assert ref["H1"] == {"contrast": "H1: t", "estimate (points)": 12.3, "95% interval": "[3.1, 20.3]",
                         "Holm-adjusted interval": "[-1.0, 22.0] (97.5%)", "p": "0.0123", "Holm p": "0.0246",
                         "reject at 0.05": True, "paper: Qwen2.5-7B-Instruct": "31.5", "paper: Llama-3.1-8B-Instruct": "20.0"}
    h2 = ref["H2"]
    est = h2.pop("estimate (points)")
    assert est != est                                                                 # NaN: not estimated
    assert h2 == {"contrast": "H2: t", **blank, "paper: Qwen2.5-7B-Instruct": "", "paper: Llama-3.1-8B-Instruct": ""}


def test_headroom_warning_whole_box_from_a_hand_set_check(monkeypatch):
    import crossprofile_lib.book.hbtables as hb
    checks = {"fail": SimpleNamespace(passes=False, difference=4.25, low=-2.0, high=10.5, n_tasks=14),
              "pass": SimpleNamespace(passes=True, difference=40.0, low=20.0, high=60.0, n_tasks=14)}
    monkeypatch.setattr(hb, "headroom", lambda d, rng: checks.get(d) if int(rng.integers(10 ** 6)) == 670790 else None)
    smol = SimpleNamespace(label="smol <x>", decisions=lambda protocol: "fail" if protocol == "controlled" else "pass")
    assert hb.headroom_warning(smol, 5).data == (
        '<div class="admonition warning"><p class="admonition-title">Headroom check failed: exploratory results</p>'
        "<p>ALL - EMPTY = 4.2 points [-2.0, 10.5] over 14 tasks for smol &lt;x&gt;; the lower bound must exceed 15 "
        "points.</p></div>")
    assert hb.headroom_warning(smol, 0) is None                          # another seed: no check here, no box
    assert hb.headroom_warning(SimpleNamespace(label="big", decisions=lambda protocol: "pass"), 5) is None


def test_hb_missing_names_each_model_without_a_hiddenbench_run_and_why():
    from crossprofile_lib.book.hbtables import hb_missing
    a = SimpleNamespace(backend="openai/a", label="A", path=Path("runs/a"))
    b = SimpleNamespace(backend="openai/b", label="B", path=Path("runs/b"))
    c = SimpleNamespace(backend="openai/c", label="C", path=Path("runs/c"))
    runs = SimpleNamespace(skipped={"hiddenbench:openai/b": "no GPU"}, models=lambda: [c])
    ch = SimpleNamespace(all_models=[a, b, c], runs=runs)
    assert hb_missing(ch, [SimpleNamespace(backend="openai/a")]) == [
        "B (run folder runs/b) has no HiddenBench run in this book: it could not run here (no GPU).",
        "C (run folder runs/c) has no HiddenBench run in this book: it is an imported CrossProfile run folder; import "
        "its HiddenBench folder too (RUNS=...) to show it here."]
    assert hb_missing(SimpleNamespace(all_models=[], runs=runs), []) == [   # no models listed: the book's runs
        "C (run folder runs/c) has no HiddenBench run in this book: it is an imported CrossProfile run folder; import "
        "its HiddenBench folder too (RUNS=...) to show it here."]


def test_accuracy_matrix_defaults_to_the_primary_budget_and_reads_the_outcome_asked():
    from crossprofile_lib.book.tables import accuracy_matrix
    df = pd.DataFrame({"policy": ["B4", "R1", "R1", "R1", "Zed"], "variant": ["PSP", "PSP", "PSP", "SPS", "PSP"],
                       "budget_label": ["0.6", "0.6", "0.3", "0.6", "0.6"], "correct": [1, 1, 0, 0, 1],
                       "chose_decoy": [0, 0, 1, 1, 0]})
    m = accuracy_matrix(df)                               # r = 0.6; the heat map's policies in its order, no others
    assert list(m.index) == ["R1", "B4"] and list(m.columns) == ["PSP", "SPS"]
    assert m.fillna(-1).to_numpy().tolist() == [[100.0, 0.0], [100.0, -1]]           # no B4 row in SPS: NaN
    d = accuracy_matrix(df, "0.3", outcome="chose_decoy")
    assert d.to_dict("index") == {"R1": {"PSP": 100.0}}


def test_paper_cell_every_model_for_the_reference_else_the_runs_own_or_why_not():
    from crossprofile_lib.book.compare import _paper_cell
    from crossprofile_lib.paper_figures import paper_item
    it = paper_item("mirror-r1-b4/R1 - B4")                           # the paper reports Qwen only
    h1 = paper_item("h1/H1")
    assert _paper_cell(h1, run()) == "+64.6 (Qwen2.5-7B-Instruct) / +62.6 (Llama-3.1-8B-Instruct) / +62.6 (DeepSeek-V4.1-Flash)"
    assert _paper_cell(h1, _model_run()) == "+64.6 (Qwen2.5-7B-Instruct)"
    assert _paper_cell(it, _model_run("Llama-3.1-8B-Instruct")) == "– (not reported for Llama-3.1-8B-Instruct)"
    assert _paper_cell(it, _model_run("smol")) == "– (not one of the paper's models)"


def test_composition_paper_text_whole_for_the_reference_and_a_paper_model_the_paper_did_not_measure():
    from crossprofile_lib.book.headline import composition_paper_text
    q = "(Qwen2.5-7B-Instruct)"
    whole = f"R1-rel: 4.43 {q} / 1.89 {q} / 2.16 {q}; R1: 4.98 {q} / 0.01 {q} / 4.00 {q}"
    assert composition_paper_text(None) == whole == composition_paper_text(run()) == composition_paper_text(_model_run())
    no = "– (not reported for Llama-3.1-8B-Instruct)"
    assert composition_paper_text(_model_run("Llama-3.1-8B-Instruct")) == (
        f"R1-rel: {no} / {no} / {no}; R1: {no} / {no} / {no}")


def test_paper_filter_is_the_papers_r1_rel_composition_and_its_filters_quality_as_fractions():
    from crossprofile_lib.book.headline import paper_filter
    pf = paper_filter()
    assert pf["composition"] == [4.43, 1.89, 2.16]
    assert pf["precision"] == pytest.approx(0.994) and pf["recall"] == pytest.approx(0.989)


def test_thresholds_note_whole_box():
    from crossprofile_lib.book.headline import thresholds_note
    assert thresholds_note().data == (
        '<div class="admonition note"><p class="admonition-title">Thresholds of this build</p><p>Headroom: ALL - EMPTY '
        "accuracy must exceed 15 points at the lower 95% bound (prereg.yaml). Classic cell PSP, mirror cell SPS (<a "
        "href='03-methods.html#spec-cells'>the specification, chapter 3</a>).</p></div>")


def test_findings_one_table_per_finding_from_the_runs_of_its_data_kind(monkeypatch):
    from crossprofile_lib.book import compare
    monkeypatch.setattr(compare, "finding_table", lambda f, runs, n, seed: (f.key, list(runs), n, seed))
    out = compare.findings({"crossprofile": ["A", "B"], "hiddenbench": ["H"]}, 300, 9)
    assert [f for f, _ in out] == list(compare.FINDINGS)
    assert [t for _, t in out] == [
        ("r1-random", ["A", "B"], 300, 9), ("h1", ["A", "B"], 300, 9), ("swing", ["A", "B"], 300, 9),
        ("relevance", ["A", "B"], 300, 9), ("labels", ["A", "B"], 300, 9), ("support-shared", ["A", "B"], 300, 9),
        ("net-lead", ["A", "B"], 300, 9), ("hb-r1-b3", ["H"], 300, 9), ("hb-reference", ["H"], 300, 9)]
    assert compare.findings({})[0][1] == ("r1-random", [], 2000, 0)        # no runs of a kind; defaults 2000, seed 0


def test_model_controlled_table_joins_only_the_same_models_paper_column(monkeypatch):
    import crossprofile_lib.book.hbtables as hb
    paper = pd.DataFrame({"paper Qwen2.5-7B-Instruct": [1.0, 2.0], "paper Llama-3.1-8B-Instruct": [3.0, 4.0],
                          "paper range over models": [5.0, 6.0]}, index=["R1", "B3"])
    monkeypatch.setattr(hb, "paper_table", lambda kind: paper if kind == "controlled" else pytest.fail(kind))
    monkeypatch.setattr(hb, "controlled_summary", lambda d, budget: pd.DataFrame(
        {"accuracy": [50.0, 40.0]}, index=["R1", "ALL"]) if (d, budget) == ("D", "0.6") else pytest.fail("args"))
    q = _model_run()
    q.decisions = lambda protocol: "D" if protocol == "controlled" else "N"
    t = hb.model_controlled_table(q)
    assert t.fillna(-1).to_dict("index") == {
        "ALL": {"accuracy": 40.0, "paper Qwen2.5-7B-Instruct": -1, "paper range over models": -1},
        "B3": {"accuracy": -1, "paper Qwen2.5-7B-Instruct": 2.0, "paper range over models": 6.0},
        "R1": {"accuracy": 50.0, "paper Qwen2.5-7B-Instruct": 1.0, "paper range over models": 5.0}}
    monkeypatch.setattr(hb, "paper_table", lambda kind: paper[["paper Llama-3.1-8B-Instruct"]])
    assert hb.model_controlled_table(q).to_dict("index") == {"R1": {"accuracy": 50.0}, "ALL": {"accuracy": 40.0}}


def test_natural_table_reads_the_runs_natural_tables_at_the_primary_budget(monkeypatch):
    import crossprofile_lib.book.hbtables as hb
    monkeypatch.setattr(hb, "natural_summary", lambda s, v, d, budget: (s, v, d, budget))
    h = SimpleNamespace(tables={"natural": {"sessions": "S", "votes": "V", "decisions": "D"},
                                "controlled": {"sessions": "x", "votes": "y", "decisions": "z"}})
    assert hb.natural_table(h) == ("S", "V", "D", "0.6")


def test_kept_table_drops_accuracy_invalid_and_decisions_of_the_controlled_reference_run(monkeypatch):
    import crossprofile_lib.book.hbtables as hb
    monkeypatch.setattr(hb, "controlled_summary", lambda d, budget: pd.DataFrame(
        {"accuracy": [1.0], "invalid": [0], "decisions": [3], "kept_hidden": [2.5], "kept_shared": [1.0]}, index=["R1"])
        if (d, budget) == ("D", "0.6") else pytest.fail("args"))
    t = hb.kept_table(SimpleNamespace(decisions=lambda protocol: "D" if protocol == "controlled" else "N"))
    assert t.to_dict("index") == {"R1": {"kept_hidden": 2.5, "kept_shared": 1.0}}


def test_relevance_filter_table_and_accuracy_by_variant_read_the_runs_rows_with_its_bootstrap(monkeypatch):
    import crossprofile_lib.book.headline as h
    r = run()
    r.boot = "BOOT"
    monkeypatch.setattr(h.st, "relevance_table", lambda df, boot: ("REL", len(df), boot))
    assert h.relevance_filter_table(r) == ("REL", 1, "BOOT")
    monkeypatch.setattr(h.st, "accuracy_table", lambda df, boot: pd.DataFrame(
        {"policy": ["R1", "M1", "B4"], "boot": [boot] * 3}))
    ch = SimpleNamespace(at=lambda x, t: t.assign(at=x.label) if isinstance(x, Run) else pytest.fail("run"))
    t = h.accuracy_by_variant(ch, r)
    assert t.to_dict("list") == {"policy": ["R1", "B4"], "boot": ["BOOT"] * 2, "at": [r.label] * 2}   # REL's only
    assert list(h.accuracy_by_variant(ch, r, ["M1"]).policy) == ["M1"]


def test_noisy_filter_takeaways_whole_lines():
    from crossprofile_lib.book.headline import noisy_filter_takeaways
    first = ("With the paper's filter quality (precision 99.4%, recall 98.9%) strict tiering keeps 4.10 / 0.20 / 3.70 "
             "support / decoy / irrelevant facts in PSP at r = {}; the paper reports 4.43 / 1.89 / 2.16 (paper, "
             "Qwen2.5-7B-Instruct).")
    assert noisy_filter_takeaways(_noisy([2.5, 3.0, 0.4]), "0.6") == [
        first.format("0.6"),
        "On this grid the composition nearest the paper's needs a filter of about 80% precision and 70% recall "
        "(4.40 / 1.90 / 2.20).",
        "On this grid a filter worse than the paper's reported one comes nearer to its composition (distance 0.40 facts "
        "against 2.50 at the paper's filter quality): strict tiering with the filter the paper measured does not give "
        "the composition it reports."]
    assert noisy_filter_takeaways(_noisy([0.4, 3.0, 0.4]), "0.3") == [   # a tie keeps the paper's own quality
        first.format("0.3"),
        "On this grid the composition nearest the paper's needs a filter of about 99% precision and 99% recall "
        "(4.10 / 0.20 / 3.70).",
        "On this grid no filter comes nearer to the paper's composition than the paper's own filter quality (distance "
        "0.40 facts)."]


def test_finding_table_defaults_a_full_runs_names_and_an_estimate_without_an_interval(monkeypatch):
    from crossprofile_lib.book.compare import FINDINGS, finding_table
    q = _model_run()                                                   # no variant column: all eight variants
    nan = float("nan")
    calls = _stub_finding_inputs(monkeypatch, {(q.label, "h3/H3: R1-rel - R1"): (5.0, nan, nan)})
    rel = next(f for f in FINDINGS if f.key == "relevance")
    t = finding_table(rel, [q])
    assert calls[0] == ("boot", q.label, 2000, 0)                      # 2000 resamples, seed 0 by default
    assert list(t["quantity"]) == ["H3: R1-rel - R1, 8 variants", "classic cell (PSP): R1-rel - R1"]
    assert list(t["this run"]) == ["5.0 ‹LM: Qwen2.5-7B-Instruct›", "not in this run"]


def test_cells_by_run_per_run_with_its_bootstrap_outcomes_and_pooling(monkeypatch):
    monkeypatch.setattr(tables, "cell_rows", lambda r, boot, outcomes, pooled: (boot, tuple(outcomes), pooled))
    a, b = run(), run(label_model="reference, social proof")
    b.tag = "sp"
    a.boot, b.boot = "BA", "BB"
    assert tables.cells_by_run([a, None, b]) == {a.label: ("BA", ("correct",), True), b.label: ("BB", ("correct",), True)}
    assert tables.cells_by_run([a], ["chose_decoy"], pooled=False) == {a.label: ("BA", ("chose_decoy",), False)}


def test_cell_entry_first_matching_row_and_tables_without_an_outcome_column():
    t = pd.DataFrame({"policy": ["R1", "R1", "R1"], "cell": [CELL_LABELS["classic"]] * 3, "estimate": [1.0, 2.0, 3.0]})
    assert cell_entry(t, "R1", "classic").estimate == 1.0 and cell_value(t, "R1", "classic", "chose_decoy") == 1.0
    assert cell_entry(t, "R1", "mirror") is None
    o = t.assign(outcome=["chose_decoy", "correct", "correct"])
    assert cell_value(o, "R1", "classic") == 2.0 and cell_value(o, "R1", "classic", "chose_decoy") == 1.0


def test_hb_takeaways_no_memory_line_without_both_r1_and_b4(monkeypatch):
    import crossprofile_lib.book.hbtables as hb
    seen = []
    monkeypatch.setattr(hb, "controlled_summary", lambda d, budget: seen.append((d, budget)) or pd.DataFrame(
        {"profile_complete": [40.0]}, index=["R1"]))
    lines = hb.hb_takeaways(SimpleNamespace(decisions=lambda protocol: f"D[{protocol}]"), None, 100, 0)
    assert seen == [("D[controlled]", "0.6")] and lines == [
        "No model decided HiddenBench tasks on this page (the reference decider reports what the memories keep only); "
        "accuracy needs a model backend (parameter <code>backend</code>)."]


def test_headline_items_are_the_papers_measurable_headline_numbers_in_percent_or_points():
    from crossprofile_lib.book.headline import headline_items
    assert [it.ref for it in headline_items()] == [
        "cp-mean/R1", "cp-mean/Random", "cp-mean/H2: R1 - Random", "h1/H1", "h3/R1-rel", "h3/H3: R1-rel - R1",
        "classic-r1-b4/R1", "classic-r1-b4/B4", "classic-r1-b4/R1 - B4", "mirror-r1-b4/R1", "mirror-r1-b4/B4",
        "mirror-r1-b4/R1 - B4"]
    assert {it.unit for it in headline_items()} == {"%", "points"}


def test_marked_kept_a_models_call_policies_with_suffixes_and_fixed_k_take_its_mark():
    from crossprofile_lib.book.display import mark_kind, mark_text
    from crossprofile_lib.book.headline import marked_kept
    m = _model_run()
    lm, exact = mark_text(mark_kind(m), m), mark_text("exact", m)
    idx = pd.MultiIndex.from_tuples([(p, "classic") for p in ("REF", "BAL:shuffled", "R1-rel-k7", "BAL-oracle", "B4-k7",
                                                              "M1")])
    t = pd.DataFrame({"support": ["1.0", "2.0", "3.0", "4.0", "5.0", "6.0"], "decoy": ["0.5"] * 6}, index=idx)
    assert marked_kept(t, m)["support"].tolist() == ["1.0" + lm, "2.0" + lm, "3.0" + lm, "4.0" + exact, "5.0" + exact,
                                                    "6.0" + exact]


def test_rarest_takeaway_reads_the_model_runs_own_signal_not_an_absent_run(monkeypatch):
    # 300 of 400 correct: a Wilson interval far above chance, so the model run has signal; with the run left out of
    # the check the line would read "no signal to read (no run)"
    monkeypatch.setattr("crossprofile_lib.book.headline.why", lambda mech, ref, estimate: "WHY")
    monkeypatch.setattr("crossprofile_lib.book.headline.mechanism", lambda p: None)
    ref, m = run(), _model_run("Qwen2.5-7B-Instruct", 400)
    m.boot = None
    lines = rarest_takeaways(SimpleNamespace(**{**vars(_chapter(ref)), "model": m}), {ref.label: cells()},
                             {ref.label: _holm()})
    assert lines[-1] == f"{m.label}: its results have signal (headroom check passed)."


def test_marked_kept_strips_only_a_numeric_fixed_k_and_a_format_from_the_policy_name():
    from crossprofile_lib.book.display import mark_kind, mark_text
    from crossprofile_lib.book.headline import marked_kept
    from crossprofile_lib.book.style import policy_base
    assert [policy_base(p) for p in ("BAL-k7:unlabeled", "R1-rel-k12", "BAL-kind", "B3:shuffled", "R1-rel-oracle")] == [
        "BAL", "R1-rel", "BAL-kind", "B3", "R1-rel-oracle"]
    m = _model_run()
    lm, exact = mark_text(mark_kind(m), m), mark_text("exact", m)
    idx = pd.MultiIndex.from_tuples([(p, "classic") for p in ("BAL-k7:unlabeled", "BAL-kind", "R1-rel-oracle-k7")])
    t = pd.DataFrame({"support": ["1.0", "2.0", "3.0"], "decoy": ["0.5"] * 3}, index=idx)
    assert marked_kept(t, m)["support"].tolist() == ["1.0" + lm, "2.0" + exact, "3.0" + exact]
