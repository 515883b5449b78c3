"""Chapters 5, 6, 8 and 12 per model and with your own policy (issue 22, item 1 and 3):

* one block (or column) per language-model run of the book, never only the primary one;
* each beside the paper's value for the SAME model (paper_models.yaml), an unmapped model (SmolLM2) with
  no paper column, never another model's;
* a run that lacks what a chapter needs (label controls, a HiddenBench run, a labels-prompt rerun) is
  named in plain words;
* the user's policy (POLICY_FILES) joins every fixed policy list (the reference grids, the social-proof and
  group-size runs, HiddenBench, the model sample with ``Mine-k7`` and ``Mine:unlabeled``), and the numbers
  of the built-in policies do not move.

Quick parameters, the reference decider and the fake OpenAI server only: no model is loaded.
"""

from __future__ import annotations

import html
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crossprofile_lib import book
from crossprofile_lib.book import experiments
from crossprofile_lib.book.chapter import Chapter
from crossprofile_lib.book.display import Captions
from crossprofile_lib.book.experiments import BookRuns
from crossprofile_lib.book.hbruns import HBRun, hb_as_run, hiddenbench_run
from crossprofile_lib.book.params import BookParams
from crossprofile_lib.book.runs import Run, bootstrap, load_run
from crossprofile_lib.design import GROUP_SIZE_POLICIES, HB_POLICIES, MODEL_POLICIES, VARIANT_NAMES
from crossprofile_lib.run.runner import RunConfig, run_to_dir

sys.path.insert(0, str(Path(__file__).parent))
import fake_openai_server as F  # noqa: E402
from policy_registry import policy_registry_kept  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "policies" / "keep_longest.py"
QWEN, LLAMA = "Qwen2.5-7B-Instruct", "Llama-3.1-8B-Instruct"
GRID = dict(templates=["templates/dev"], seeds=[0], budgets=["0.6"],
            policies=list(MODEL_POLICIES) + ["ALL:shuffled", "R1:unlabeled"], variants=list(VARIANT_NAMES))


@pytest.fixture(scope="module", autouse=True)
def saved_registry():
    with policy_registry_kept():
        yield


def as_model(run: Run, backend: str, model: str, path: Path | None = None) -> Run:
    """The reference decider's decisions relabelled as a model's (to check what the book sets beside it)."""
    r = Run(path or run.path, run.df.assign(backend=backend, model=model),
            dict(run.header, backend=backend, model=model, decision_mode="generate"))
    r.boot = bootstrap(r, 200, 0)
    return r


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    out = tmp_path_factory.mktemp("ledger") / "ledger"
    run_to_dir(RunConfig(backend="ledger", **GRID), out)
    r = load_run(out)
    r.boot = bootstrap(r, 200, 0)
    return r


@pytest.fixture(scope="module")
def three_models(ledger):
    return [as_model(ledger, "vllm/Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
            as_model(ledger, "llamacpp/smollm2-135m", "smollm2-135m"),
            as_model(ledger, "openai/meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct")]


def chapter(number, params, ref, models, sp=None, runs=None) -> Chapter:
    return Chapter(number, params, runs or BookRuns(params), Captions(number), ref=ref, sp=sp or ref,
                   model=models[0] if models else None, models=list(models))


def paper_cols(t) -> list:
    return [c for c in t.columns if "paper" in (c[-1] if isinstance(c, tuple) else str(c))]


# --------------------------------------------------------------------------- the paper beside its own model
def test_paper_text_for_a_run_gives_its_own_model_only(ledger, three_models):
    qwen, smol, llama = three_models
    item = "classic-labels/ALL unlabeled - ALL"
    assert book.paper_text(item, run=qwen) == f"+14.4 ({QWEN})"
    assert book.paper_text(item, run=llama) == f"+13.3 ({LLAMA})"
    assert book.paper_text(item, run=smol) == "– (not one of the paper's models)"
    assert book.paper_text(item, run=ledger) == book.paper_text(item)  # the reference decider: every model
    assert QWEN in book.paper_text(item) and LLAMA in book.paper_text(item)
    assert book.composition_paper_text(smol) == "none: not one of the paper's models"
    assert LLAMA not in book.composition_paper_text(qwen)


# --------------------------------------------------------------------------- chapter 6
def test_chapter_6_shows_a_block_per_model_each_beside_its_own_paper_value(ledger, three_models):
    qwen, smol, llama = three_models
    ch = chapter(6, BookParams.quick(), ledger, three_models)
    runs = book.deciders(ch)
    assert [r.label for r in runs[2:]] == [m.label for m in three_models]  # every model, not only the primary
    shared = book.support_shared_by_run(runs)
    wide = book.support_shared_wide(runs, shared)
    tops = list(dict.fromkeys(c[0] for c in wide.columns))
    assert [m.label for m in three_models] == [t for t in tops if t != ledger.label]
    assert wide[(qwen.label, f"paper: {QWEN}")]["ALL"] == "+21.0"
    assert wide[(llama.label, f"paper: {LLAMA}")]["ALL"] == "+13.8"
    assert [c for c in wide.columns if c[0] == smol.label] == [(smol.label, "this run")]  # unmapped: no paper
    assert [c for c in wide.columns if c[0] == ledger.label] == [(ledger.label, "this run")]
    assert not any(QWEN in c[1] for c in wide.columns if c[0] == llama.label)

    effects = book.label_effects_by_run(runs)
    for m, pm, value in ((qwen, QWEN, "+14.4"), (llama, LLAMA, "+13.3")):
        t = book.same_model_paper_column(book.ci_pivot(book.label_controls(ch, m, effects[m.label]),
                                                       ["versus", "label_format"], "cell"), m, book.LABEL_ITEMS)
        assert paper_cols(t) == [f"paper: {pm}"] and t.loc[("ALL", "unlabeled"), f"paper: {pm}"] == value
    t = book.same_model_paper_column(book.ci_pivot(book.label_controls(ch, smol, effects[smol.label]),
                                                   ["versus", "label_format"], "cell"), smol, book.LABEL_ITEMS)
    assert paper_cols(t) == []
    lines = [html.unescape(x) for x in book.label_takeaways(runs, effects)]
    smol_line = next(x for x in lines if x.startswith(smol.label))
    assert "not one of the paper's models" in smol_line and QWEN not in smol_line and "confirmatory" in smol_line
    assert f"({QWEN})" in next(x for x in lines if x.startswith(qwen.label))
    assert LLAMA not in next(x for x in lines if x.startswith(qwen.label))


def test_chapter_6_names_a_run_without_label_controls(ledger, tmp_path):
    thin = as_model(Run(ledger.path, ledger.df[~ledger.df.policy.str.contains(":")], ledger.header),
                    "openai/imported", "imported", path=tmp_path / "imported-run")
    effects = book.label_effects_by_run([ledger, thin])
    assert book.label_gap(ledger, effects) is None
    gap = book.label_gap(thin, effects)
    assert thin.label in gap and "imported-run" in gap and "no label controls" in gap
    assert any("imported-run" in html.unescape(x) for x in book.label_takeaways([ledger, thin], effects))


def test_exploratory_models_are_marked_so(ledger):
    flips = as_model(ledger, "vllm/Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct")
    flips.df["correct"] = np.random.default_rng(0).random(len(flips.df)) < 1 / 3
    assert book.verdict_word(flips) == "exploratory" and "exploratory" in book.status_line(flips)
    assert book.verdict_word(ledger) == ""


# --------------------------------------------------------------------------- chapter 8
@pytest.fixture(scope="module")
def hb_model(tmp_path_factory):
    """A real controlled HiddenBench run of a model (the fake OpenAI server) on two fixture tasks."""
    root = tmp_path_factory.mktemp("hb")
    fake, url, stop = F.start()
    try:
        h = hiddenbench_run(root, "openai/fake", seeds=[0], limit=2, policies=["R1", "B3", "ALL", "EMPTY"],
                            budgets=["0.4", "0.6", "0.8"],
                            backend_options={"base_url": url, "retry_wait": 0.01, "tokenizer_fallback": "offline"})
    finally:
        stop()
    assert h is not None and "controlled" in h.tables
    return h


def relabel(h: HBRun, backend: str, model: str) -> HBRun:
    return HBRun(h.path, dict(h.header, backend=backend, model=model), h.tables)


def test_chapter_8_tables_put_only_the_same_models_paper_beside_each_model(hb_model):
    qwen = relabel(hb_model, "vllm/Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct")
    smol = relabel(hb_model, "llamacpp/smollm2-135m", "smollm2-135m")
    assert paper_cols(book.model_controlled_table(qwen)) == [f"paper {QWEN}"]
    assert paper_cols(book.model_controlled_table(smol)) == []
    assert {c[1] for c in book.r1_b3_table(hb_as_run(qwen), 200, 0).columns if c[0] == "paper"} == {QWEN}
    assert not [c for c in book.r1_b3_table(hb_as_run(smol), 200, 0).columns if c[0] == "paper"]
    runs = [hb_as_run(qwen), hb_as_run(smol)]
    lines = [html.unescape(x) for x in book.hb_takeaways(None, runs, 200, 0)]
    assert any(x.startswith(qwen.label) and f"({QWEN})" in x and LLAMA not in x for x in lines)
    assert any(x.startswith(smol.label) and "not one of the paper's models" in x for x in lines)
    assert "exploratory" in book.hb_status(smol, 0) or "confirmatory" in book.hb_status(smol, 0)


def test_chapter_8_shows_every_models_hiddenbench_run_and_names_one_without(ledger, hb_model, tmp_path):
    a = relabel(hb_model, "openai/a", "a")
    b = relabel(hb_model, "openai/b", "b")
    cp_a = as_model(ledger, "openai/a", "a")
    imported = as_model(ledger, "openai/elsewhere", "elsewhere", path=tmp_path / "copied-run")
    ch = chapter(8, BookParams.quick(), ledger, [cp_a, imported])
    ch.hb_models, ch.hb_model = [a, b], a
    assert [h.backend for h in ch.all_hb_models] == ["openai/a", "openai/b"]
    missing = book.hb_missing(ch, ch.all_hb_models)
    assert len(missing) == 1 and imported.label in missing[0] and "copied-run" in missing[0]


# --------------------------------------------------------------------------- chapter 12
def test_chapter_12_gives_each_model_its_own_labels_prompt_rerun_and_names_an_imported_one(ledger, tmp_path,
                                                                                           monkeypatch):
    p = BookParams.quick(dict(backends=["openai/a", "openai/b@seeds=3"]))
    br = BookRuns(p)
    a, b = as_model(ledger, "openai/a", "a", tmp_path / "a"), as_model(ledger, "openai/b", "b", tmp_path / "b")
    imported = as_model(ledger, "openai/c", "c", path=tmp_path / "copied-c")
    made = {"openai/a": a, "openai/b": b}
    reruns = []
    monkeypatch.setattr(BookRuns, "model_for", lambda self, sp: made[sp.backend])
    monkeypatch.setattr(BookRuns, "labels_prompt_for", lambda self, sp: reruns.append(sp.text) or made[sp.backend])
    ch = chapter(12, p, ledger, [a, b, imported], runs=br)
    pairs = book.labels_prompt_pairs(ch)
    assert [m.label for m, _, _ in pairs] == [a.label, b.label, imported.label]
    assert pairs[0][1] is a and pairs[1][1] is b and reruns == ["openai/a", "openai/b@seeds=3"]
    assert pairs[2][1] is None and "copied-c" in pairs[2][2] and "imported" in pairs[2][2]


def test_each_spec_reruns_the_labels_prompt_with_its_own_sample_and_options(monkeypatch):
    seen = []
    monkeypatch.setattr(experiments, "model_run", lambda *a, **k: seen.append((a, k)))
    br = BookRuns(BookParams.quick(dict(backends=["openai/a@opt.base_url=http://127.0.0.1:9/v1", "openai/b@seeds=3"])))
    for sp in br.specs():
        br.labels_prompt_for(sp)
    (a_args, a_kw), (b_args, b_kw) = seen
    assert a_args[1] == "openai/a" and a_kw["backend_options"]["base_url"] == "http://127.0.0.1:9/v1"
    assert a_kw["suffix"] == book.LABELS_PROMPT  # the primary model's folder as before
    assert b_args[1] == "openai/b" and b_args[3] == [3] and b_kw["suffix"].startswith(book.LABELS_PROMPT + "@")
    assert a_kw["backend_options"]["decision_prompt"] == b_kw["backend_options"]["decision_prompt"] == book.LABELS_PROMPT


# --------------------------------------------------------------------------- your own policy everywhere
def test_model_sample_and_hiddenbench_get_the_user_policy_with_its_controls(monkeypatch):
    model_calls, hb_calls = [], []
    monkeypatch.setattr(experiments, "model_run", lambda *a, **k: model_calls.append(k.get("policies")))
    monkeypatch.setattr(experiments, "hiddenbench_run", lambda *a, **k: hb_calls.append(k.get("policies")))
    mine = BookRuns(BookParams.quick(dict(backends=["openai/a", "openai/b"], policy_files=[str(EXAMPLE)])))
    for sp in mine.specs():
        mine.model_for(sp)
    mine.hiddenbench()
    mine.hiddenbench_for("openai/a")
    for pol in model_calls:
        assert pol[:len(MODEL_POLICIES)] == list(MODEL_POLICIES)
        assert {"Longest", "Longest-k7", "Longest:unlabeled"} <= set(pol)
    for pol in hb_calls:
        assert pol[:len(HB_POLICIES)] == list(HB_POLICIES) and {"Longest", "Longest-k7", "Longest:unlabeled"} <= set(pol)
    model_calls.clear(), hb_calls.clear()
    plain = BookRuns(BookParams.quick(dict(backends=["openai/a"])))
    plain.model_for(plain.specs()[0])
    plain.hiddenbench()
    assert model_calls == [None] and hb_calls == [None]  # without POLICY_FILES: the built-in grids


@pytest.fixture(scope="module")
def grids(tmp_path_factory):
    root = tmp_path_factory.mktemp("grids")
    plain = BookRuns(BookParams.quick(runs_root=str(root / "plain")))
    mine = BookRuns(BookParams.quick(runs_root=str(root / "mine"), policy_files=[str(EXAMPLE)]))
    return plain, mine


def _builtin_rows(run: Run, builtin: set) -> pd.DataFrame:
    keys = ["template_id", "seed", "variant", "budget_label", "policy"]
    cols = keys + ["correct", "chose_decoy", "kept_support", "kept_decoy", "kept_irrelevant"]
    d = run.df[run.df["policy"].astype(str).isin(builtin)][cols]
    return d.sort_values(keys).reset_index(drop=True)


def test_user_policy_joins_the_social_proof_and_group_size_runs_and_built_ins_do_not_move(grids):
    plain, mine = grids
    for make in (lambda br: br.social_proof(), lambda br: br.reference(n_agents=3)):
        a, b = make(plain), make(mine)
        builtin = set(a.df["policy"].astype(str))
        assert not any(p.startswith("Longest") for p in builtin)
        pd.testing.assert_frame_equal(_builtin_rows(a, builtin), _builtin_rows(b, builtin))
        assert "Longest" in set(b.df["policy"])
    sp = mine.social_proof().df["policy"]
    assert {"Longest:unlabeled", "Longest:shuffled", "Longest:first-speaker"} <= set(sp)
    assert set(mine.reference(n_agents=3).df["policy"]) == set(GROUP_SIZE_POLICIES) | {"Longest"}


def test_fixed_policy_tables_of_chapters_5_and_12_list_the_user_policy(grids):
    plain, mine = grids
    ref, sp = mine.reference(), mine.social_proof()
    for r in (ref, sp):
        r.boot = bootstrap(r, 200, 0)
    ch = chapter(12, mine.params, ref, [], sp=sp, runs=mine)
    gaps = book.gaps_by_run(ch, [ref])[ref.label]
    assert "Longest" in set(gaps["policy"]) and "BAL" in set(gaps["policy"])
    fmt = book.format_by_cell(sp, "0.6", book.format_rows(ch))
    assert {"Longest", "Longest:first-speaker", "Longest:unlabeled", "R1:first-speaker"} <= set(fmt.index)
    effects = book.label_effect_rows(sp, sp.boot)
    assert "Longest" in set(book.label_controls(ch, sp, effects, versus=book.count_free_versus(ch), formats=None).versus)
    assert "Longest" in set(book.label_controls(ch, ref, book.label_effect_rows(ref, ref.boot)).versus)  # chapter 6
    cells = book.cells_by_run([ref, sp])
    assert "Longest-k7" in set(book.select(cells[ref.label], book.fixed_k(ch), "correct")["policy"])  # chapter 5
    assert "Longest" in set(book.by_decider(ch, [ref, sp], cells, book.with_mine(ch, ["R1", "R1-rel", "B4"]))["policy"])
    rows = book.group_size_rows({3: mine.reference(n_agents=3), 4: ref}, "0.6", book.with_mine(ch, book.GROUP_POLICIES))
    assert set(rows[rows.policy == "Longest"]["agents"]) == {3, 4}
    # without POLICY_FILES the lists are the built-in ones
    pch = chapter(12, plain.params, ref, [], runs=plain)
    assert book.with_mine(pch, book.POL) == list(book.POL) and book.fixed_k(pch) == list(book.FIXED_K)
    assert book.format_rows(pch) == list(book.repairs.FORMAT_ROWS) and book.count_free_versus(pch) == ["ALL", "R1", "B4", "BAL"]
