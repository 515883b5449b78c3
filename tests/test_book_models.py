"""Many models in one book (issue 22, items 1-2): model specs (BACKENDS), imported run folders (RUNS,
zero model calls, refused when run.json or the templates do not match), the paper-model mapping (a model
beside its OWN paper values only), the per-model headroom verdict, chapter 11's long comparison and the
comparison page's findings."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crossprofile_lib.book import compare, models, paper
from crossprofile_lib.book.experiments import BookRuns
from crossprofile_lib.book.models import (
    ModelSpec,
    ModelSpecError,
    RunImportError,
    import_run,
    paper_model_for,
    split_backends,
)
from crossprofile_lib.book.paper import long_comparison, reproduced
from crossprofile_lib.book.params import BookParams, BookParamsError
from crossprofile_lib.book.runs import Run, bootstrap, load_run
from crossprofile_lib.design import MODEL_POLICIES, VARIANT_NAMES
from crossprofile_lib.paper_figures import load_paper_figures
from crossprofile_lib.run.runner import RunConfig, run_to_dir

sys.path.insert(0, str(Path(__file__).parent))
import fake_openai_server as F  # noqa: E402

GRID = dict(templates=["templates/dev"], seeds=[0], budgets=["0.6"], policies=list(MODEL_POLICIES) + ["ALL:shuffled"],
            variants=list(VARIANT_NAMES))


# --------------------------------------------------------------------------- specs
def test_backends_split_only_where_a_known_provider_starts_a_spec():
    s = split_backends("llamacpp/smollm2-135m,openai/smol@seeds=0,1;templates=templates/dev,templates/formal,"
                       "deepseek/deepseek-v4-pro@templates=templates/formal;seeds=0")
    assert s == ["llamacpp/smollm2-135m", "openai/smol@seeds=0,1;templates=templates/dev,templates/formal",
                 "deepseek/deepseek-v4-pro@templates=templates/formal;seeds=0"]
    sp = ModelSpec.parse(s[1])
    assert sp.seeds == (0, 1) and sp.templates == ("templates/dev", "templates/formal") and sp.budgets is None
    assert ModelSpec.parse("openai/m@seeds=0+2").text == "openai/m@seeds=0+2"
    o = ModelSpec.parse("openai/m@opt.timeout=600;opt.base_url=http://127.0.0.1:9/v1")
    assert dict(o.backend_options) == {"timeout": 600, "base_url": "http://127.0.0.1:9/v1"}


@pytest.mark.parametrize("bad, rule", [("foo/x", "unknown provider"), ("openai", "provider/model"),
                                       ("openai/m@temp=1", "not key=value with a key of"),
                                       ("openai/m@seeds=x", "seeds are integers"),
                                       ("openai/m@variants=PXP", "unknown variant"),
                                       ("openai/m@templates=no/such/dir", "no/such/dir"),
                                       ("openai/m@seeds=0;seeds=1", "given twice")])
def test_a_bad_spec_is_refused_naming_the_spec_and_the_rule(bad, rule):
    with pytest.raises(ModelSpecError, match=rule):
        ModelSpec.parse(bad)


def test_book_params_take_backends_and_a_spec_keeps_its_own_sample():
    p = BookParams.quick(dict(backends=["openai/a@seeds=3;variants=PSP", "openai/b"]))
    br = BookRuns(p)
    a, b = br.specs()
    assert a.sample(p)["model_seeds"] == [3] and a.sample(p)["model_variants"] == ["PSP"]
    assert b.sample(p)["model_seeds"] == list(p.model_seeds)  # not given: the book's model_* parameter
    assert br.backend == "openai/a"  # the first spec is the primary model when BACKEND is empty
    with pytest.raises(BookParamsError, match="given twice"):
        BookParams.quick(dict(backends=["openai/a", "openai/a"]))
    # BACKEND keeps working: one model is a list of one, and it comes first
    assert [s.backend for s in BookRuns(BookParams.quick(dict(backend="openai/z", backends=["openai/a"]))).specs()] \
        == ["openai/z", "openai/a"]


def test_make_variables_backends_and_runs_are_checked_before_anything_runs(tmp_path):
    from crossprofile_lib.book.build import BookConfigError
    from crossprofile_lib.cli.book import book_params
    assert book_params(True, {"BACKENDS": "openai/a,openai/b@seeds=0,1"}).backends == ["openai/a", "openai/b@seeds=0+1"]
    with pytest.raises(BookConfigError, match="BACKENDS=.*unknown provider 'foo'"):
        book_params(True, {"BACKENDS": "foo/x"})
    (tmp_path / "empty").mkdir()
    with pytest.raises(BookConfigError, match=r"RUNS=.*: folder .*empty: .*run.json: no run header"):
        book_params(True, {"RUNS": str(tmp_path / "empty")})


# --------------------------------------------------------------------------- the paper's models
@pytest.mark.parametrize("name, paper", [
    ("vllm/Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct"), ("openai/meta-llama/Llama-3.1-8B-Instruct",
                                                                "Llama-3.1-8B-Instruct"),
    ("deepseek/deepseek-v4.1-flash", "DeepSeek-V4.1-Flash"), ("deepseek/deepseek-flash", "DeepSeek-V4.1-Flash"),
    ("deepseek/deepseek-v4-pro", "DeepSeek-V4-Pro"),
    ("llamacpp/smollm2-135m", None), ("openai/smollm2-135m", None), ("deepseek/deepseek-chat", None),
    ("vllm/Qwen/Qwen2.5-72B-Instruct", None), ("ledger", None)])
def test_paper_model_mapping(name, paper):
    assert paper_model_for(name) == paper


def test_a_mapping_to_a_model_the_paper_does_not_have_is_refused(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("rules:\n  - {pattern: 'x', paper: GPT-5}\n")
    with pytest.raises(ValueError, match=r"m.yaml: rules\[0\].paper 'GPT-5': not a model of"):
        models.paper_model_rules(str(f))


# --------------------------------------------------------------------------- runs
@pytest.fixture(scope="module")
def ledger_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "ledger"
    run_to_dir(RunConfig(backend="ledger", **GRID), out)
    return out


def as_model(run: Run, backend: str, model: str) -> Run:
    """The reference decider's decisions relabelled as a model's (to check what the book sets beside it)."""
    df = run.df.assign(backend=backend, model=model)
    r = Run(run.path, df, dict(run.header, backend=backend, model=model, decision_mode="generate"))
    r.boot = bootstrap(r, 200, 0)
    return r


def coin_flips(run: Run, backend: str, model: str) -> Run:
    """A model deciding by a seeded coin: its headroom check fails."""
    r = as_model(run, backend, model)
    r.df["correct"] = np.random.default_rng(0).random(len(r.df)) < 1 / 3
    return r


def test_reproduced_counts_only_informative_intervals_of_runs_with_headroom():
    ok, bad = models.ModelVerdict("confirmatory"), models.ModelVerdict("exploratory", "headroom failed")
    assert reproduced(64.0, 60.0, 55.0, 70.0, "%", ok) == "yes"
    assert reproduced(80.0, 60.0, 55.0, 70.0, "%", ok) == "no"
    assert reproduced(64.0, 50.0, 0.0, 100.0, "%", ok).startswith("not counted: interval spans 0 to 100")
    assert reproduced(64.0, 50.0, 10.0, 99.0, "%", ok) == "yes"  # 89 points wide: still informative
    assert reproduced(64.0, 60.0, 55.0, 70.0, "%", bad).startswith("not counted: exploratory")
    assert reproduced("23.6-31.8", 30.0, 25.0, 35.0, "%", ok).startswith("not scored")


def test_a_model_is_set_beside_its_own_paper_values_only(ledger_dir):
    ref = load_run(ledger_dir)
    qwen = as_model(ref, "vllm/Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct")
    smol = as_model(ref, "openai/smollm2-135m", "smollm2-135m")
    items = load_paper_figures()
    t = long_comparison(items, {"crossprofile": [qwen, smol, ref]}, n_resamples=200)
    q, s, r = (t[t["run"].str.startswith(x)] for x in ("vllm/Qwen", "openai/smollm2", "reference decider"))
    assert set(q["paper model"]) <= {"Qwen2.5-7B-Instruct", "models not separated", "range over models"}
    assert "Llama-3.1-8B-Instruct" not in set(q["paper model"]) and q["scored"].any()
    assert set(s["paper model"]) == {"(none)"} and not s["scored"].any() and (s["paper"] == "–").all()
    # the reference decider is not a model: one row per quantity, every paper model's value beside it, no verdict
    assert set(r["paper model"]) == {paper.AS_REFERENCE} and r["quantity"].is_unique and not r["scored"].any()
    assert (r["reproduced?"] == paper.REFERENCE_VERDICT).all() and r["run"].str.endswith("not a model").all()
    assert r["paper"].str.contains("Qwen2.5-7B-Instruct").any() and r["paper"].str.contains("Llama-3.1-8B-Instruct").any()
    assert not (t["reproduced?"].isin(["yes", "no"]) & t["reference"]).any()


def test_chapter_11_summary_counts_each_model_once_and_leaves_out_rows_with_no_paper_value(ledger_dir):
    ref = load_run(ledger_dir)
    qwen = as_model(ref, "vllm/Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct")
    smol = as_model(ref, "openai/smollm2-135m", "smollm2-135m")
    t = long_comparison(load_paper_figures(), {"crossprofile": [qwen, smol, ref]}, n_resamples=200)
    s = paper.model_summary(t).set_index("model")
    assert list(s.index) == [qwen.label, smol.label]  # one row per model; the reference decider is no model
    for run in (qwen, smol):
        rows = t[t["model"] == run.label]
        yes, no = int((rows["reproduced?"] == "yes").sum()), int((rows["reproduced?"] == "no").sum())
        assert (s.loc[run.label, "reproduced"], s.loc[run.label, "not reproduced"]) == (yes, no)
        assert s.loc[run.label, "not comparable"] == len(rows) - yes - no
    assert s.loc[qwen.label, "paper model"] == "Qwen2.5-7B-Instruct" and s.loc[qwen.label, "reproduced"] + \
        s.loc[qwen.label, "not reproduced"] > 0
    assert s.loc[smol.label, "reproduced"] == s.loc[smol.label, "not reproduced"] == 0
    assert s.loc[smol.label, "why not comparable"].endswith("no paper value (not one of the paper's models)")
    main = paper.main_rows(t)
    assert not (main["paper"] == "–").any() and not main["run"].str.contains("reference decider").any()
    assert set(main["run"]) == {qwen.label} and len(main) == int((t["model"] == qwen.label).sum() -
                                                                 ((t["model"] == qwen.label) & (t["paper"] == "–")).sum())
    n_smol = int((t["model"] == smol.label).sum())
    assert f"{n_smol} of {smol.label}" in paper.left_out_line(t)
    lines = paper.long_takeaways(t)
    assert not [x for x in lines if " 0 of 0 " in x or ": 0 of " in x], lines
    assert any("compared as a reference" in x for x in lines) and any(x.startswith(smol.label + ": none of its") for x in lines)
    refs = paper.reference_rows(t)
    assert len(refs) == int(t["reference"].sum()) and ref.label + ", not a model" in refs.columns


def test_two_reference_runs_of_one_name_get_a_column_each(ledger_dir, tmp_path):
    """RUNS= a reference-decider run beside the book's own: both are 'reference decider'; chapter 11 stopped with
    pandas' 'cannot reindex on an axis with duplicate labels'. Each keeps its own column, the second named by folder."""
    import shutil
    copy = tmp_path / "imported-ledger"
    shutil.copytree(ledger_dir, copy)
    a, b = load_run(ledger_dir), load_run(copy)
    t = long_comparison(load_paper_figures(), {"crossprofile": [a, b]}, n_resamples=200)
    refs = paper.reference_rows(t)
    cols = [c for c in refs.columns if c not in ("quantity", "paper (every model)", "computed in")]
    assert len(cols) == 2 and cols[1].endswith("· imported-ledger") and len(refs) == t["quantity"].nunique()
    assert (refs[cols[0]] == refs[cols[1]]).all()  # the same decisions, the same values


def test_no_model_in_the_build_says_so_instead_of_counting_nothing(ledger_dir):
    t = long_comparison(load_paper_figures(), {"crossprofile": [load_run(ledger_dir)]}, n_resamples=200)
    assert paper.model_summary(t).empty and not paper.main_rows(t).shape[0]
    assert "no language model" in paper.left_out_line(t)
    lines = paper.long_takeaways(t)
    assert any("ran no language model" in x for x in lines) and not any(" of 0 " in x for x in lines)


def test_each_row_links_to_the_chapter_that_computes_it():
    from crossprofile_lib.book.display import Captions
    root = Path(__file__).resolve().parents[1]
    chapters = {it.chapter for it in load_paper_figures()}
    assert chapters <= set(paper.CHAPTER_PAGES), chapters - set(paper.CHAPTER_PAGES)
    for page in paper.CHAPTER_PAGES.values():
        assert (root / "notebooks" / f"{page}.md").exists(), page
    df = pd.DataFrame({"computed in": ["04-rarest-first", "08-hiddenbench"], "quantity": ["a <b>", "c"]})
    out = paper.chapter_links(Captions(11).table(df, "t", [], hide_index=True)).to_html()
    assert '<a href="04-rarest-first.html">chapter 4</a>' in out and '<a href="08-hiddenbench.html">chapter 8</a>' in out
    assert "a &lt;b&gt;" in out  # the other cells stay escaped


def test_a_run_failing_headroom_is_never_counted_as_agreement(ledger_dir):
    flips = coin_flips(load_run(ledger_dir), "vllm/Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct")
    assert models.headroom_verdict(flips).status == "exploratory"
    t = long_comparison(load_paper_figures(), {"crossprofile": [flips]}, n_resamples=200)
    assert not (t["reproduced?"] == "yes").any() and t["reproduced?"].str.startswith("not counted").any()
    tab = compare.finding_table(compare.FINDINGS[1], [flips], 200)
    assert tab["finding holds?"].str.startswith("not judged").all()


def test_findings_hold_by_their_rule_for_a_run_with_headroom(ledger_dir):
    ref = load_run(ledger_dir)
    ref.boot = bootstrap(ref, 200, 0)
    qwen = as_model(ref, "vllm/Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct")
    by = {f.key: compare.finding_table(f, [ref, qwen], 200) for f in compare.FINDINGS if f.data == "crossprofile"}
    h1 = by["h1"]
    # the reference decider is a mechanism, never scored (issue 52 item 3); a model run is judged by the rule
    assert list(h1["finding holds?"]) == [compare.NOT_SCORED, "holds"]
    assert h1["paper (same model)"].iloc[1] == "+64.6 (Qwen2.5-7B-Instruct)"
    assert "Llama" in h1["paper (same model)"].iloc[0]  # the reference row: every paper model, labelled
    assert h1["this run"].iloc[0].endswith("\u2039ref. decider\u203a")      # marked at the number
    assert "\u2039LM: Qwen2.5-7B-Instruct\u203a" in h1["this run"].iloc[1]
    swing = by["swing"]
    assert list(swing["finding holds?"]) == [compare.NOT_SCORED] * 2 + ["holds"] * 2  # the model: classic +, mirror -
    assert list(by["net-lead"]["finding holds?"])[-1] == "holds"  # saturated at 100, 100 still rises
    s = compare.summary([(f, by[f.key]) for f in compare.FINDINGS if f.key in by])
    assert list(s.columns) == ["reference decider (not a model)", qwen.label]


def test_import_of_a_folder_made_elsewhere_checks_run_json_and_templates(ledger_dir, tmp_path):
    good = tmp_path / "copy"
    shutil.copytree(ledger_dir, good)
    run = import_run(good)
    assert isinstance(run, Run) and len(run.df) == len(load_run(ledger_dir).df)

    def broken(name, edit):
        d = tmp_path / name
        shutil.copytree(ledger_dir, d)
        h = json.loads((d / "run.json").read_text())
        edit(h)
        (d / "run.json").write_text(json.dumps(h))
        return d
    d = broken("rows", lambda h: h.update(rows=h["rows"] + 1))
    with pytest.raises(RunImportError, match=rf"RUNS={d}: run.json records \d+ rows, results.parquet holds"):
        import_run(d)
    d = broken("sha", lambda h: h["templates_sha256"].update({k: "0" * 64 for k in h["templates_sha256"]}))
    with pytest.raises(RunImportError, match=r"differ from the files here"):
        import_run(d)
    d = broken("nosha", lambda h: h.pop("templates_sha256"))
    with pytest.raises(RunImportError, match=r"records no templates_sha256"):
        import_run(d)
    d = broken("policies", lambda h: h["config"].update(policies=["R1"]))
    with pytest.raises(RunImportError, match=r"config.policies does not match"):
        import_run(d)
    with pytest.raises(RunImportError, match="not a folder"):
        import_run(tmp_path / "nothing")


def test_gaps_say_what_a_run_cannot_show(ledger_dir, tmp_path):
    run = load_run(ledger_dir)
    assert models.gaps(run) == []
    thin = Run(run.path, run.df[run.df["policy"].isin(["R1", "B4"]) & (run.df["variant"] == "PSP")], run.header)
    g = models.gaps(thin)
    assert any("Random" in x and "not in this run" in x for x in g) and any("SPS" in x for x in g)


def test_a_book_from_an_imported_model_run_makes_zero_model_calls(tmp_path, monkeypatch):
    """A model run made 'elsewhere' (a real HTTP server), copied, then built into a book's runs with the
    server's request counter and the backend factory both watched: no model call, no backend built."""
    monkeypatch.setenv("CROSSPROFILE_CACHE", str(tmp_path / "cache"))
    fake, url, stop = F.start()
    try:
        made = tmp_path / "elsewhere" / "openai-fake"
        cfg = RunConfig(backend="openai/fake", backend_options={"base_url": url, "retry_wait": 0.01,
                                                                "tokenizer_fallback": "offline"},
                        **{**GRID, "templates": ["templates/dev/dev-hospital-01.yaml"]})
        run_to_dir(cfg, made)
        sent = fake.received
        assert sent > 0
        copy = tmp_path / "here" / "openai-fake"
        shutil.copytree(made, copy)

        import crossprofile_lib.run.runner as runner
        real = runner.backend_for

        def only_ledger(c, *a, **k):
            assert c.backend == "ledger", f"a model backend was built: {c.backend}"
            return real(c, *a, **k)
        monkeypatch.setattr(runner, "backend_for", only_ledger)
        p = BookParams.quick(dict(runs=[str(copy)], runs_root=str(tmp_path / "runs")))
        br = BookRuns(p)
        got = br.models()
        assert [r.backend for r in got] == ["openai/fake"] and got[0].path == copy
        from crossprofile_lib.book.chapter import setup
        ch = setup({"runs": [str(copy)], "runs_root": str(tmp_path / "runs"), "templates": ["templates/dev"],
                    "seeds": [0], "budgets": ["0.6"], "backend": "", "n_resamples": 200}, 11, show=False)
        assert [r.label for r in ch.shown][1:] == [got[0].label] and ch.model is not None
        assert fake.received == sent  # the call counter: zero calls for the imported run
    finally:
        stop()


def test_chapter_contrast_tables_put_only_the_same_models_paper_column_beside_a_run(ledger_dir):
    from crossprofile_lib.book.tables import contrast_table, contrasts_with_holm
    ref = load_run(ledger_dir)
    ref.boot = bootstrap(ref, 200, 0)
    res = contrasts_with_holm(ref, ref.boot)
    llama = as_model(ref, "vllm/meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B-Instruct")
    smol = as_model(ref, "llamacpp/smollm2-135m", "smollm2-135m")
    cols = lambda t: [c for c in t.columns if str(c).startswith("paper: ")]  # noqa: E731
    assert "paper: Qwen2.5-7B-Instruct" in cols(contrast_table(res, ref))  # the reference: every model
    assert cols(contrast_table(res, llama)) == ["paper: Llama-3.1-8B-Instruct"]
    assert cols(contrast_table(res, smol)) == []


def test_two_runs_of_one_backend_get_labels_of_their_own(ledger_dir, tmp_path):
    a = as_model(load_run(ledger_dir), "openai/smollm2-135m", "smollm2-135m")
    b = Run(tmp_path / "openai-smollm2-135m-abc", a.df, a.header)
    c = as_model(load_run(ledger_dir), "llamacpp/smollm2-135m", "smollm2-135m")
    la, lb, lc = (r.label for r in models.unique_labels([a, b, c]))
    assert la != lb and lb.endswith("openai-smollm2-135m-abc") and lc == c.label  # a unique label stays as it was


def test_a_stored_run_is_not_read_as_this_books_once_a_template_file_changed(tmp_path):
    """Same configuration, edited template: the old answers are neither shown as this book's nor overwritten."""
    from crossprofile_lib.book.runs import ensure_run
    tdir = tmp_path / "templates"
    shutil.copytree(Path(__file__).resolve().parents[1] / "templates" / "dev", tdir)
    cfg = RunConfig(backend="ledger", templates=[str(tdir)], seeds=[0], budgets=["0.6"], policies=["R1", "ALL"],
                    variants=["PSP"])
    first = ensure_run(tmp_path / "runs" / "ledger", cfg)
    assert ensure_run(tmp_path / "runs" / "ledger", cfg).path == first.path  # unchanged: found, not rerun
    f = sorted(tdir.rglob("*.yaml"))[0]
    f.write_text(f.read_text() + "\n# edited\n")
    second = ensure_run(tmp_path / "runs" / "ledger", cfg)
    assert second.path != first.path and (first.path / "results.parquet").exists()
    assert ensure_run(tmp_path / "runs" / "ledger", cfg).path == second.path


def test_the_every_run_net_lead_title_names_every_run_not_the_first_only():
    a = pd.DataFrame({"net_lead": [-2, 0, 3], "n": [5, 5, 5], "estimate": [10.0, 50.0, 95.0], "lo": 0.0, "hi": 100.0})
    b = pd.DataFrame({"net_lead": [-1, 4, 5], "n": [3, 3, 0], "estimate": [30.0, 40.0, 99.0], "lo": 0.0, "hi": 100.0})
    msg = compare.net_lead_message({"reference decider (not a model)": a, "smol · near chance": b})
    assert "reference decider (not a model) 10% at -2 to 95% at +3" in msg
    assert "smol · near chance 30% at -1 to 40% at +4" in msg  # a lead with no decisions is not drawn
    assert compare.net_lead_message({}) == "No decisions to draw"
