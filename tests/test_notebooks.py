"""The book's notebooks: every chapter runs at small parameters, at the quick parameters (executed once
by the session's quick book build, tests/conftest.py ``quick_book``: each chapter checked here to be that
build's, every cell run, no error) and under ``pytest --nbval-lax`` at a set without the primary budget, with
one variant and the live widgets on; every parameter a
chapter declares is a field of BookParams defaulting to None; chapters import only the book and define
nothing; every figure is labelled and referenced; the helpers keep the honesty rules (captions name the
backend and model, paper values only in 'paper' columns, a failed headroom check is visible); runs are
never overwritten by another configuration; ``make book`` (``crossprofile book``) checks its variables
before running anything."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.md"))
sys.path.insert(0, str(ROOT / "scripts"))


#: The second parameter set: no primary budget anywhere, one variant (issue 15.1).
NO_PRIMARY = dict(budgets=["0.4"], variants=["PSP"], model_budgets=["0.4"], model_variants=["PSP"], hb_budgets=["0.4"])


def _small(runs_root: Path, extra: dict | None = None) -> dict:
    from crossprofile_lib import book
    return dict(book.QUICK, runs_root=str(runs_root), widgets=True, paper_templates=["templates/dev"],
                paper_seeds=[0], paper_budgets=["0.6"], fit_resamples=100, hb_seeds=[0], **(extra or {}))


@pytest.fixture(scope="module")
def small_notebooks(tmp_path_factory):
    """Each notebook converted with jupytext, the second parameter set (:data:`NO_PRIMARY`, live widgets on)
    injected by papermill (not run)."""
    import jupytext
    import papermill as pm
    d = tmp_path_factory.mktemp("notebooks")
    params = _small(d / "runs", NO_PRIMARY)
    out = {}
    for md in NOTEBOOKS:
        src = d / f"{md.stem}.src.ipynb"
        jupytext.write(jupytext.read(md), src)
        declared = pm.inspect_notebook(str(src))
        dst = d / f"{md.stem}.ipynb"
        pm.execute_notebook(str(src), str(dst), parameters={k: v for k, v in params.items() if k in declared},
                            prepare_only=True, progress_bar=False, kernel_name="python3")
        src.unlink()
        out[md.stem] = dst
    return out


def test_there_are_sixteen_chapters():
    """Thirteen chapters of the paper, the comparison page (14, every model side by side, issue 22), the messy
    discussion (15, issue 27) and your own policy (16, issue 22)."""
    assert [m.stem.split("-")[0] for m in NOTEBOOKS if m.stem != "intro"] == [f"{i:02d}" for i in range(1, 17)]


@pytest.fixture(scope="module")
def nbval_outcomes(small_notebooks) -> dict:
    """Every notebook under ``pytest --nbval-lax``, all in ONE pytest process (one interpreter start-up, not
    one per chapter), in chapter order, sharing the runs folder: per notebook, the failing or erroring cells
    (from pytest's JUnit XML report), or None where the report has no cell of it at all."""
    import xml.etree.ElementTree as ET
    d = next(iter(small_notebooks.values())).parent
    report = d / "nbval.xml"
    env = dict(os.environ, CROSSPROFILE_CACHE=str(d / "cache"), MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "-q", "-p", "no:cacheprovider",
                        "--rootdir", str(d), f"--junitxml={report}", *map(str, small_notebooks.values())],
                       cwd=d, env=env, capture_output=True, text=True, timeout=1800)
    cells: dict[str, list] = {}
    if report.is_file():
        for case in ET.parse(report).getroot().iter("testcase"):
            stem = case.get("classname", "").removesuffix(".ipynb").rsplit(".", 1)[-1]
            bad = [el for el in case if el.tag in ("failure", "error")]
            cells.setdefault(stem, []).extend(f"{case.get('name')}: {el.get('message', '')[:300]}\n{(el.text or '')[-3000:]}"
                                              for el in bad)
    tail = f"(pytest exit {r.returncode})\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}"
    return {name: (cells.get(name), tail) for name in small_notebooks}


@pytest.mark.slow
@pytest.mark.parametrize("name", [m.stem for m in NOTEBOOKS])
def test_notebook_runs_under_nbval(name, nbval_outcomes):
    failed, tail = nbval_outcomes[name]
    assert failed is not None, f"{name}: no cell of it in nbval's report {tail}"
    assert failed == [], f"{name} failed under nbval:\n" + "\n".join(failed)


def executed_problems(nb, want: dict) -> list[str]:
    """What is wrong with one chapter as a build executed it (an nbformat notebook): not of the build with the
    parameters ``want`` (its build record), a code cell that never ran (no execution count), an error output,
    or papermill's exception flag."""
    from crossprofile_lib.book.build import STAMP_KEY, build_id
    out = []
    rec = nb.metadata.get(STAMP_KEY) or {}
    if rec.get("id") != build_id(want):
        out.append(f"not executed by this build (record {rec.get('id')!r}, want {build_id(want)!r})")
    for i, c in enumerate(nb.cells):
        if c.cell_type != "code":
            continue
        if c.get("execution_count") is None and c.source.strip():
            out.append(f"cell {i} never ran")
        out += [f"cell {i}: {o.get('ename')}: {o.get('evalue')}" for o in c.get("outputs", [])
                if o.get("output_type") == "error"]
    if (nb.metadata.get("papermill") or {}).get("exception"):
        out.append("papermill recorded an exception")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", [m.stem for m in NOTEBOOKS])
def test_chapter_ran_whole_at_the_quick_parameters(name, quick_book):
    """At the quick parameters each chapter is executed once, by the session's quick book build (papermill: a
    cell error fails that build); here the chapter that build wrote is checked to be of the build with the
    quick parameters, every code cell run and no error output."""
    import nbformat

    from crossprofile_lib.book.build import STAMP_KEY
    # the build's parameters, as its landing page records them: the quick ones
    want = (nbformat.read(quick_book / "book" / "intro.ipynb", as_version=4).metadata.get(STAMP_KEY) or {}).get("params")
    assert want and {k: want.get(k) for k in _quick_core()} == json.loads(json.dumps(_quick_core())), want
    nb = nbformat.read(quick_book / "book" / f"{name}.ipynb", as_version=4)
    assert executed_problems(nb, want) == []


def _quick_core() -> dict:
    from crossprofile_lib import book
    return {k: book.QUICK[k] for k in ("templates", "seeds", "budgets", "backend")}


def test_the_executed_chapter_check_sees_each_fault():
    """:func:`executed_problems` flags each way a chapter can come out of a build wrong, and nothing on a whole one."""
    import nbformat

    from crossprofile_lib.book.build import STAMP_KEY, build_id
    params = {"templates": ["templates/dev"], "seeds": [0]}

    def nb(**cell):
        c = nbformat.v4.new_code_cell("x = 1", execution_count=1)
        c.update(cell)
        n = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t"), c])
        n.metadata[STAMP_KEY] = {"id": build_id(params), "params": params}
        return n

    assert executed_problems(nb(), params) == []
    assert executed_problems(nb(), {**params, "seeds": [1]})[0].startswith("not executed by this build")
    assert executed_problems(nb(execution_count=None), params) == ["cell 1 never ran"]
    err = nbformat.v4.new_output("error", ename="KeyError", evalue="'x'", traceback=[])
    assert executed_problems(nb(outputs=[err]), params) == ["cell 1: KeyError: 'x'"]
    bad = nb()
    bad.metadata["papermill"] = {"exception": True}
    assert executed_problems(bad, params) == ["papermill recorded an exception"]


def _declared(md) -> tuple[list, dict]:
    """The chapter's code cells and what papermill finds in its parameters cell."""
    import jupytext
    import papermill as pm
    nb = jupytext.read(md)
    code = [c for c in nb.cells if c.cell_type == "code"]
    tmp = md.parent.parent / f".pytest-params-{md.stem}.ipynb"
    try:
        jupytext.write(nb, tmp)
        return code, pm.inspect_notebook(str(tmp))
    finally:
        tmp.unlink(missing_ok=True)


@pytest.mark.parametrize("md", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_first_every_default_none_and_a_book_parameter(md):
    """A `parameters` cell comes first; every name in it is a field of BookParams and defaults to None
    (the book's default, resolved by book.setup): no chapter holds a copy of a default."""
    from crossprofile_lib.book import BookParams
    code, declared = _declared(md)
    assert "parameters" in code[0].metadata.get("tags", []), f"{md.name}: the first code cell is not tagged parameters"
    assert declared, f"{md.name}: the parameters cell declares nothing"
    for k, v in declared.items():
        assert k in BookParams.model_fields, f"{md.name}: parameter {k} is not a field of BookParams"
        assert v["default"] == "None", f"{md.name}: parameter {k} = {v['default']} (a copy of a default; write None)"


def test_paper_figures_hold_every_spec_section_10_number():
    from crossprofile_lib.book import load_paper_figures
    items = load_paper_figures()
    vals = {v for it in items for v in it.paper.values()}
    spec10 = [88.2, 87.7, 51.3, 59.0, 91.3, 90.3, 5.6, 4.6, 35.4, 36.4, 64.0, 63.0, 64.5, 63.4, 96.7, 97.2, 26.1,
              31.1, 22.2, 18.3, 96.1, 95.6, -22.2, -20.0, -32.2, -23.3, -31.1, 99.4, 98.9, 4.43, 1.89, 2.16, 4.98,
              0.01, 4.00, 21.0, 13.8, 14.4, 13.3, 72.8, 97.2, 12.8, 13.5, 10.3, 76.0, 75.6, 96.2, 96.1, 71.1,
              "23.6-31.8", "22.1-33.8", "61.5-89.7", "33.8-36.9", 64.6, 62.6, -0.5, -0.4, 72.6, 74.6]
    missing = [v for v in spec10 if not any(v == w or (isinstance(v, float) and isinstance(w, (int, float))
                                                       and math.isclose(v, w)) for w in vals)]
    assert not missing, f"data/paper_figures.yaml lacks paper numbers {missing}"
    for it in items:
        assert it.paper, it.label
        assert all(isinstance(m, str) and m for m in it.paper), f"{it.figure_id}: every paper value names its model"


def test_paper_vs_suite_puts_paper_values_only_under_paper(tmp_path):
    from crossprofile_lib import book
    from crossprofile_lib.book import load_paper_figures, paper_vs_suite
    run = book.reference_run(tmp_path / "runs", ["templates/dev"], [0], ["0.6"])
    items = load_paper_figures()
    t = paper_vs_suite(items, {"crossprofile": [run]}, n_resamples=50)
    assert set(t.columns.get_level_values(0)) <= {"result", "quantity", "unit", "paper", "this suite"}
    suite_cols = [c for c in t.columns if c[0] == "this suite"]
    assert suite_cols == [("this suite", run.label)] and "reference decider" in run.label
    for c in t.columns:
        if c[0] == "paper":
            assert all(v == "" or isinstance(v, (int, float, str)) and "[" not in str(v) for v in t[c])
    row = [it.figure_id for it in items].index("classic-r1-b4")
    assert t[suite_cols[0]].iloc[row].startswith("100.0")   # R1 keeps every support fact in the classic cell


def test_natural_discussion_fills_its_paper_rows():
    # two tasks: a hand-checkable natural run (group vote right on t1 only; t2 discloses 2 of 4 hidden facts)
    import pandas as pd

    from crossprofile_lib import book
    from crossprofile_lib.book import load_paper_figures, paper_vs_suite
    dec = pd.DataFrame([dict(task_id=t, seed=0, ablation=a, policy=p, budget_label=b, decided=True, correct=c)
                        for t, a, p, b, c in [("t1", "baseline", "REF", "none", True), ("t2", "baseline", "REF", "none", False),
                                              ("t1", "evidence-first", "REF", "none", True),
                                              ("t2", "evidence-first", "REF", "none", True),
                                              ("t1", "baseline", "R1", "0.6", True), ("t2", "baseline", "R1", "0.6", True),
                                              ("t1", "baseline", "B3", "0.6", False), ("t2", "baseline", "B3", "0.6", True)]])
    ses = pd.DataFrame(dict(task_id=["t1", "t2", "t1", "t2"], seed=0, ablation=["baseline"] * 2 + ["evidence-first"] * 2,
                            group_correct=[True, False, False, False], disclosure_rate=[0.0, 0.5, 1.0, 1.0]))
    hb = book.HBRun(Path("x"), dict(backend="openai/m", model="m", data_source="fixture"),
                    {"natural": {"decisions": dec, "sessions": ses}})
    run = book.hb_natural_as_run(hb)
    items = load_paper_figures()
    t = paper_vs_suite(items, {"natural": [run]}, n_resamples=50)
    col = [c for c in t.columns if c[0] == "this suite"][0]
    assert col[1].endswith("· natural")
    got = {it.label: t[col].iloc[k].split(" ")[0] for k, it in enumerate(items) if it.data == "natural"}
    assert got == {"group vote": "50.0", "REF": "50.0", "ALL": "not", "EMPTY": "not", "R1 - B3": "50.0",
                   "hidden facts restated in full (disclosure rate)": "25.0", "evidence-first prompt, REF change": "50.0"}
    assert book.hb_natural_as_run(book.HBRun(Path("x"), {}, {"controlled": {}})) is None


def test_captions_name_backend_and_reference_decider(tmp_path):
    from crossprofile_lib import book
    run = book.reference_run(tmp_path / "runs", ["templates/dev"], [0], ["0.6"])
    cap = book.Captions(4)
    text = cap.text("Figure", "Accuracy.", run)
    assert text == "Figure 4.1. Accuracy. Backend and model: reference decider (ledger)."
    assert cap.notebook == "04-rarest-first"
    assert cap.text("Table", "Both.", [run, run]).count("reference decider") == 1   # named once, not per run
    box = book.provenance_box([("reference grid", run, book.run_notices(run))]).data
    assert "Backend: ledger" in box and "not a language model" in box and run.model in box and "<details" in box


def test_failed_headroom_shows_a_warning(tmp_path):
    from crossprofile_lib import book
    run = book.reference_run(tmp_path / "runs", ["templates/dev"], [0], ["0.6"])
    boot = book.bootstrap(run, 200)
    assert not any("Headroom check failed" in b.data for b in book.run_notices(run, boot))
    df = run.df.copy()
    empty = df[df.policy == "EMPTY"].set_index(["template_id", "variant", "seed"])["correct"]
    is_all = df.policy == "ALL"
    df.loc[is_all, "correct"] = [empty[k] for k in zip(df.template_id[is_all], df.variant[is_all], df.seed[is_all])]
    bad = book.Run(run.path, df, run.header)
    boxes = [b.data for b in book.run_notices(bad, boot)]
    assert any("Headroom check failed" in b and "exploratory" in b for b in boxes)


def test_few_templates_flag_the_intervals(tmp_path):
    from crossprofile_lib import book
    run = book.reference_run(tmp_path / "runs", ["templates/dev"], [0], ["0.6"])   # 10 templates
    assert not any("intervals are not reliable" in b.data for b in book.run_notices(run, book.bootstrap(run, 50)))
    two = book.Run(run.path, run.df[run.df.template_id.isin(sorted(run.df.template_id.unique())[:2])], run.header)
    boxes = [b.data for b in book.run_notices(two, book.bootstrap(two, 50))]
    assert any("Only 2 templates: intervals are not reliable" in b for b in boxes)
    assert not any("intervals are not reliable" in b.data for b in book.run_notices(two))   # no intervals shown


def test_near_chance_follows_the_measured_headroom_not_the_name():
    """(Was: a run NAMED SmolLM2 is called near chance.) The book decides from the run's own headroom
    check; tests/test_book_readers.py has the cases (a SmolLM2-named run with headroom is not flagged)."""
    import pandas as pd

    from crossprofile_lib import book
    run = book.Run(Path("x"), pd.DataFrame({"policy": ["R1"] * 30, "template_id": ["t"] * 30, "correct": [False] * 30}),
                   {"backend": "openai/any", "model": "any", "decision_mode": "score"})
    assert any("near chance" in b.data for b in book.run_notices(run))       # 0 of 30: not above chance


def test_make_variables_set_the_model_run():
    import build_book
    p = build_book.parameters(env={"BACKEND": "deepseek", "MODEL": "deepseek-flash", "TEMPLATES": "templates/formal",
                                   "SEEDS": "0,1,2", "BUDGETS": "0.4,0.6", "VARIANTS": "PSP,SPP"})
    assert p["backend"] == "deepseek/deepseek-flash"
    assert p["model_templates"] == ["templates/formal"] and p["model_seeds"] == [0, 1, 2]
    assert p["model_budgets"] == ["0.4", "0.6"] and p["model_variants"] == ["PSP", "SPP"]
    assert build_book.parameters(env={"BACKEND": "none"})["backend"] == ""
    assert build_book.parameters(env={})["widgets"] is False
    assert build_book.parameters(env={"BACKEND": ""})["backend"] == "llamacpp/smollm2-135m"   # empty = default


@pytest.mark.parametrize("env, names", [
    ({"BUDGETS": "0.7x"}, "BUDGETS=0.7x"), ({"BUDGETS": "0.4,0.4"}, "given twice"), ({"SEEDS": "a"}, "SEEDS=a"),
    ({"VARIANTS": "PXP"}, "unknown variant"), ({"TEMPLATES": "no/such/dir"}, "TEMPLATES=no/such/dir"),
    ({"BACKEND": "foo/bar"}, "unknown provider 'foo'"), ({"BACKEND": "openai"}, "name the model"),
    ({"MODEL": "x"}, "set BACKEND too"), ({"RESAMPLES": "10"}, "RESAMPLES=10"),
    ({"HIDDENBENCH": "no/such.json"}, "does not exist"), ({"JOBS": "0"}, "JOBS=0")])
def test_a_bad_make_variable_stops_before_anything_runs(env, names, tmp_path, monkeypatch, capsys):
    import build_book

    from crossprofile_lib import book
    called = []
    monkeypatch.setattr(book.BookRuns, "prepare", lambda *a, **k: called.append(1) or {})
    for k in ("BACKEND", "MODEL", "TEMPLATES", "SEEDS", "BUDGETS", "VARIANTS", "RESAMPLES", "HIDDENBENCH", "JOBS"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert build_book.main(["--no-html", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert names in err and "Nothing was run" in err
    assert not called and not (tmp_path / "b").exists()


def test_make_book_budgets_without_the_primary_budget_are_accepted(tmp_path, monkeypatch):
    import build_book

    from crossprofile_lib import book
    p = build_book.parameters(env={"BUDGETS": "0.4", "VARIANTS": "PSP"})
    assert p["model_budgets"] == ["0.4"] and p["model_variants"] == ["PSP"]
    monkeypatch.setattr(book.BookRuns, "prepare", lambda *a, **k: pytest.fail("ran experiments"))
    assert build_book.main(["--only", "99-nope", "--no-html", "--out", str(tmp_path / "b")]) == 2   # refused up front


def test_offline_check_flags_cdn_scripts(tmp_path):
    import build_book
    (tmp_path / "a.html").write_text('<script src="../_static/mathjax/tex-chtml-full.js"></script>'
                                     '<a href="https://mybinder.org">binder</a>')
    assert build_book.check_offline(tmp_path) == []
    (tmp_path / "b.html").write_text('<script defer src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js">')
    (tmp_path / "c.html").write_text('<link rel="stylesheet" href="//fonts.example.org/x.css">')
    assert len(build_book.check_offline(tmp_path)) == 2


def test_mathjax_is_vendored_and_configured():
    import yaml
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    mj = cfg["sphinx"]["config"]["mathjax_path"]
    assert not mj.startswith(("http:", "https:", "//"))
    static = [ROOT / s for s in cfg["sphinx"]["config"]["html_static_path"]]
    assert any((s / mj).exists() for s in static)
    assert cfg["execute"]["execute_notebooks"] == "off" and cfg["only_build_toc_files"] is True
    assert not cfg["launch_buttons"]["binderhub_url"] and not cfg["launch_buttons"]["colab_url"]  # REPOSITORY_URL
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for p in toc["parts"] for c in p["chapters"]]
    executed = [Path(toc["root"]).name] + [Path(f).name for f in files if not (ROOT / f).with_suffix(".md").exists()]
    assert sorted(executed) == sorted(m.stem for m in NOTEBOOKS)  # every notebook once; text pages live in book/
    assert all(p.get("caption") for p in toc["parts"])
    json.dumps(cfg)  # plain data


def test_hiddenbench_data_source_box_names_the_fixture_and_the_subset():
    from crossprofile_lib import book
    fixture = dict(data_is_fixture=True, data_source="fixture", n_tasks=1, n_tasks_in_file=6)
    box = book.data_source_box(book.HBRun(Path("x"), fixture, {})).data
    assert "FIXTURE, not HiddenBench" in box and "this run used 1 of its 6 valid tasks" in box
    assert "its intervals resample only 1 task and say little" in box
    full = book.data_source_box(book.HBRun(Path("x"), dict(fixture, n_tasks=6), {})).data
    assert "this run used" not in full
    user = dict(data_is_fixture=False, data_source="hiddenbench", data_path="/d/benchmark_all_clean.json",
                data_sha256="ab" * 32, n_tasks=65, n_tasks_in_file=65, malformed_records=[])
    box = book.data_source_box(book.HBRun(Path("x"), user, {})).data
    assert "benchmark_all_clean.json" in box and "65 valid tasks, 0 malformed)" in box and "/d/" not in box


# --------------------------------------------------------------------------- the book library
def _chapters_code(md):
    import jupytext
    nb = jupytext.read(md)
    return [c.source for c in nb.cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])]


@pytest.mark.parametrize("md", [m for m in NOTEBOOKS if m.stem[:2].isdigit() and m.stem[:2] != "10"],
                         ids=lambda p: p.stem)
def test_chapters_retype_no_budget_cell_or_paper_value(md):
    """The primary budget, the cells and the paper's values come from constants, runs and
    data/paper_figures.yaml: no chapter's code retypes "0.6" or a paper number."""
    import re

    from crossprofile_lib.book import load_paper_figures
    code = "\n".join(_chapters_code(md))
    assert '"0.6"' not in code and "'0.6'" not in code, f"{md.name} retypes the primary budget"
    paper = {str(v) for it in load_paper_figures() for v in it.paper.values()
             if isinstance(v, float) and abs(v) >= 1 and v != int(v)}
    typed = set(re.findall(r"(?<![\w.])-?\d+\.\d+(?![\w.])", code))
    assert not (typed & paper), f"{md.name} types paper values {sorted(typed & paper)}"


def test_every_chapter_uses_the_one_preamble():
    """Every page resolves its parameters and shows its "built with" line through book.setup, once."""
    for md in NOTEBOOKS:
        code = "\n".join(_chapters_code(md))
        assert code.count("book.setup(") == 1, md.name
        assert "open_runs" not in code and "SKIPPED" not in code and "book_tables" not in code, md.name


def test_a_run_folder_is_never_overwritten_by_another_configuration(tmp_path):
    from crossprofile_lib import book
    a = book.reference_run(tmp_path / "runs", ["templates/dev"], [0], ["0.6"], policies=["R1", "ALL"])
    stamp = (a.path / "results.parquet").stat().st_mtime_ns
    b = book.reference_run(tmp_path / "runs", ["templates/dev"], [0], ["0.4"], policies=["R1", "ALL"])
    assert a.path.name == "ledger" and b.path.name == f"ledger-{book.config_digest(b.header['config'])}"
    assert (a.path / "results.parquet").stat().st_mtime_ns == stamp                 # the book's run untouched
    assert set(b.df.budget_label) == {"0.4", "none"} and set(a.df.budget_label) == {"0.6", "none"}
    again = book.reference_run(tmp_path / "runs", ["templates/dev"], [0], ["0.4"], policies=["R1", "ALL"])
    assert again.path == b.path and not list(b.path.glob(".crossprofile.lock"))   # found, not rerun; unlocked


def test_a_missing_model_is_a_reason_not_a_module_global(tmp_path):
    from crossprofile_lib import book
    runs = book.BookRuns(dict(runs_root=str(tmp_path / "runs"), backend="llamacpp/" + str(tmp_path / "none.gguf"),
                              model_templates=["templates/dev"]))
    assert runs.model() is None
    why = runs.skipped[runs.backend]     # the reason names the missing file and the rule it broke
    assert str(tmp_path / "none.gguf") in why and "no such alias" in why and "GGUF file" in why, why
    assert book.BookRuns(dict(runs_root=str(tmp_path / "runs"))).skipped == {}
    assert not hasattr(book, "SKIPPED")


def test_cells_are_psp_and_sps_with_pooled_secondary_rows(tmp_path):
    from crossprofile_lib import book
    run = book.reference_run(tmp_path / "runs", ["templates/dev"], [0], ["0.6"], policies=["R1", "B4"])
    t = book.cell_rows(run, book.bootstrap(run, 50))
    t = t[(t.budget_label == "0.6") & (t.outcome == "correct")].set_index(["policy", "cell"])["estimate"]
    d = run.df[run.df.budget_label == "0.6"]
    for pol in ("R1", "B4"):
        x = d[d.policy == pol]
        assert t[(pol, "classic (PSP)")] == pytest.approx(100 * x[x.variant == "PSP"].correct.mean())
        assert t[(pol, "mirror (SPS)")] == pytest.approx(100 * x[x.variant == "SPS"].correct.mean())
        assert t[(pol, "pooled classic (PS*)")] == pytest.approx(100 * x[x.variant.str[:2] == "PS"].correct.mean())
        assert t[(pol, "pooled mirror (SP*)")] == pytest.approx(100 * x[x.variant.str[:2] == "SP"].correct.mean())
    old = run.df.assign(cell=run.df.variant.str[:2].map({"PS": "classic", "SP": "mirror"}).fillna("other"))
    assert (book.with_cells(old).cell == run.df.cell).all()     # a folder from before SPEC 3's revision reads the same


def test_primary_budget_falls_back_with_a_notice(tmp_path):
    from crossprofile_lib import book
    from crossprofile_lib.design import PRIMARY_BUDGET
    run = book.reference_run(tmp_path / "runs", ["templates/dev"], [0], ["0.4"], policies=["R1"])
    b, why = book.primary_budget(run)
    assert b == "0.4" and f"no r = {PRIMARY_BUDGET}" in why
    assert book.primary_budget(book.reference_run(tmp_path / "runs", ["templates/dev"], [0], [PRIMARY_BUDGET],
                                                  policies=["R1"])) == (PRIMARY_BUDGET, "")
    from crossprofile_lib.stats.contrasts import load_prereg
    moved = book.at_budget(load_prereg(), "0.4")
    h1 = {c.id: c for c in moved.contrasts}["H1"]
    assert all(t.where.get("budget_label") == "0.4" for t in h1.terms)


def test_built_with_line_names_parameters_commit_and_date():
    from crossprofile_lib import book
    text = book.built_with_text(dict(book.DEFAULTS, backend="openai/qwen"))
    for part in ("backend openai/qwen", "templates templates/formal", "seeds 0, 1, 2", "budgets 0.4, 0.6, 0.8, 128t",
                 "model budgets 0.6", "commit ", "date 20"):
        assert part in text, part
    assert "model budgets" not in book.built_with_text(dict(book.DEFAULTS, backend=""))


def test_confirmatory_tables_use_the_formal_templates():
    from crossprofile_lib import book
    from crossprofile_lib.task.templates import load_templates
    tpl = load_templates([str(book.resolve(t)) for t in book.DEFAULTS["templates"]])
    assert len(tpl) == 60 and not any(t.id.startswith("dev-") for t in tpl)
    assert book.DEFAULTS["hb_budgets"] == ["0.4", "0.6", "0.8"]     # "R1 - B3, mean over budgets" as the paper


def test_paper_text_reads_the_one_source():
    from crossprofile_lib import book
    assert book.paper_text("h3/H3: R1-rel - R1") == "+8.5 (Qwen2.5-7B-Instruct) / +15.6 (Llama-3.1-8B-Instruct)"
    with pytest.raises(book.PaperFiguresError):
        book.paper_text("h3/no such item")


# --------------------------------------------------------------------------- thin chapters
#: What a chapter may import: the book's namespace and its submodules.
BOOK = "crossprofile_lib.book"


def chapter_violations(source: str) -> list[str]:
    """Imports of anything but crossprofile_lib.book, and any def, class or lambda, in one code cell."""
    import ast
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            bad += [f"import {a.name}" for a in node.names if not (a.name == BOOK or a.name.startswith(BOOK + "."))]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            ok = mod == BOOK or mod.startswith(BOOK + ".") or (mod == "crossprofile_lib" and
                                                              [a.name for a in node.names] == ["book"])
            if not ok or node.level:
                bad.append(f"from {mod} import {', '.join(a.name for a in node.names)}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bad.append(f"def {node.name}")
        elif isinstance(node, ast.Lambda):
            bad.append("lambda")
    return bad


def test_the_chapter_checker_sees_imports_defs_and_lambdas():
    assert chapter_violations("from crossprofile_lib import book\nfrom crossprofile_lib.book import figures\n"
                              "import crossprofile_lib.book.explorer\nx = [book.num(1) for _ in range(2)]") == []
    assert chapter_violations("import pandas as pd") == ["import pandas"]
    assert chapter_violations("from crossprofile_lib.design import CLASSIC") == ["from crossprofile_lib.design import CLASSIC"]
    assert chapter_violations("from crossprofile_lib import book, design") != []
    assert chapter_violations("from IPython.display import display") != []
    assert chapter_violations("def f(x):\n    return x") == ["def f"]
    assert chapter_violations("f = lambda x: x") == ["lambda"]
    assert chapter_violations("if True:\n    class A: pass") == ["def A"]


@pytest.mark.parametrize("md", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapters_import_only_the_book_and_define_nothing(md):
    """Chapters only compose the book's library: every import is crossprofile_lib.book, and no cell
    defines a function, a class or a lambda (analysis lives in crossprofile_lib/book/)."""
    import jupytext
    nb = jupytext.read(md)
    bad = {i: v for i, c in enumerate(nb.cells) if c.cell_type == "code" for v in [chapter_violations(c.source)] if v}
    assert not bad, f"{md.name}: code cells that do more than compose crossprofile_lib.book: {bad}"


@pytest.mark.parametrize("md", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_numref_names_a_figure_of_its_chapter(md):
    """The text's {numref}`fig-NAME` references name figures the chapter draws (cap.figure(..., name="NAME"))."""
    import re
    text = md.read_text()
    refs = set(re.findall(r"\{numref\}`(fig-[\w-]+)`", text))
    names = set(re.findall(r'name=f?"([\w{}-]+)"', text))
    drawn = {f"fig-{n}" for n in names if "{" not in n} | {f"fig-{n.replace('{cell}', c)}" for n in names if "{cell}" in n
                                                          for c in ("classic", "mirror")}
    assert refs <= drawn, f"{md.name}: numref to figures it does not draw: {sorted(refs - drawn)}"
    if names:
        assert refs, f"{md.name}: draws figures but its text references none of them"


def test_figure_captions_carry_a_unique_label_and_their_number():
    from crossprofile_lib import book
    cap = book.Captions(4)
    a, b = cap.figure("A.", "x", name="heat").data, cap.figure("B.", "x", name="heat").data
    assert 'data-cp-figure="fig-heat" data-cp-number="4.1"><strong>Figure 4.1.</strong> A.' in a
    assert 'data-cp-figure="fig-heat-2" data-cp-number="4.2"' in b            # a second one of that name
    assert 'data-cp-figure="fig-04-rarest-first-3"' in cap.figure("C.", "x").data   # no name: still addressable
    assert 'data-cp-number="0.1"' in book.Captions("intro").figure("D.", "x").data


def test_the_sphinx_extension_makes_a_numbered_labelled_figure():
    """Image output + caption output (as myst-nb parses them) -> one figure node with the label, the
    caption without its typed number, and the caption's number for {numref}."""
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document

    from crossprofile_lib import book
    from crossprofile_lib.book.sphinx_figures import FigureOutputs, number_figures

    class Env:
        docname, toc_fignumbers = "book/04-rarest-first", {"book/04-rarest-first": {"figure": {"x": (7,)}}}

    doc = new_document("<test>", get_default_settings(Parser))
    doc.settings.env = Env()

    def bundle(mime, child):
        b = nodes.container(nb_element="mime_bundle")
        part = nodes.container(mime_type=mime)
        part += child
        b += part
        return b

    out = nodes.container(classes=["cell_output"])
    out += bundle("image/png", nodes.image(uri="a.png"))
    out += bundle("text/html", nodes.raw("", book.Captions(4).figure("Accuracy.", "x", name="heat").data, format="html"))
    out += bundle("text/html", nodes.raw("", "<p>a table</p>", format="html"))     # not a caption: left alone
    doc += out
    FigureOutputs(doc).apply()
    figs = list(doc.findall(nodes.figure))
    assert len(figs) == 1 and figs[0]["ids"] == ["fig-heat"] and doc.nameids["fig-heat"] == "fig-heat"
    assert isinstance(figs[0][0], nodes.container) and list(figs[0].findall(nodes.image))
    cap = figs[0][1].astext()
    assert isinstance(figs[0][1], nodes.caption) and cap.startswith("Accuracy.") and "Figure 4.1" not in cap
    assert len(out.children) == 2                                                  # the figure and the table
    number_figures(None, doc.settings.env)
    assert Env.toc_fignumbers["book/04-rarest-first"]["figure"]["fig-heat"] == (4, 1)


# --------------------------------------------------------------------------- the book's parameters
def test_book_params_resolve_none_to_the_defaults_and_name_a_bad_one():
    from crossprofile_lib import book
    p = book.BookParams.resolve({"seeds": None, "model_budgets": ["0.4"], "budget": None})
    assert p.seeds == book.DEFAULTS["seeds"] == [0, 1, 2] and p.model_budgets == ["0.4"] and p.shown_budget == "0.6"
    assert book.BookParams.quick().templates == ["templates/dev"] and book.QUICK["backend"] == ""
    for bad, words in [({"model_budgets": ["0.7x"]}, ("model_budgets", "0.7x", "neither a ratio", "BUDGETS")),
                       ({"budgets": ["0.6", "0.60"]}, ("budgets", "given twice")),
                       ({"seeds": [0, 0]}, ("seeds", "given twice")),
                       ({"model_seeds": [-1]}, ("model_seeds", "outside 0..", "SEEDS")),
                       ({"variants": ["PXP"]}, ("variants", "PXP")),
                       ({"templates": ["no/such/dir"]}, ("templates", "no/such/dir")),
                       ({"n_resamples": 10}, ("n_resamples", "100", "RESAMPLES")),
                       ({"hiddenbench_path": "no/such.json"}, ("hiddenbench_path", "does not exist", "HIDDENBENCH")),
                       ({"hb_ablations": ["loud"]}, ("hb_ablations", "unknown ablation")),
                       ({"widgets": "maybe"}, ("widgets",)),
                       ({"no_such_parameter": 1}, ("no_such_parameter", "not a book parameter"))]:
        with pytest.raises(book.BookParamsError) as e:
            book.BookParams.resolve(bad)
        assert all(w in str(e.value) for w in words), (bad, str(e.value))


def test_every_book_parameter_is_documented():
    from crossprofile_lib import book
    undocumented = [k for k, f in book.BookParams.model_fields.items() if not (f.description or "").strip()]
    assert not undocumented, undocumented


def test_setup_resolves_a_chapters_none_parameters(tmp_path):
    from crossprofile_lib import book
    ch = book.setup({"runs_root": str(tmp_path / "runs"), "templates": None, "seeds": [1], "budget": None,
                     "unrelated_global": 3}, 3, reference=False, model=False, show=False)
    assert ch.params.templates == ["templates/formal"] and ch.params.seeds == [1] and ch.params.shown_budget == "0.6"
    with pytest.raises(book.BookParamsError, match="seeds"):
        book.setup({"seeds": ["x"]}, 3, reference=False, model=False, show=False)


# --------------------------------------------------------------------------- the build command
def test_crossprofile_book_is_a_command_with_the_builds_checks(tmp_path, monkeypatch, capsys):
    from crossprofile_lib import book
    from crossprofile_lib.cli import main
    monkeypatch.setattr(book.BookRuns, "prepare", lambda *a, **k: pytest.fail("ran experiments"))
    monkeypatch.setenv("SEEDS", "0,0")
    assert main(["book", "--no-html", "--out", str(tmp_path / "b")]) == 2
    assert "SEEDS=0,0" in capsys.readouterr().err and not (tmp_path / "b").exists()
    monkeypatch.delenv("SEEDS")
    assert main(["book", "--only", "99-nope", "--no-html", "--out", str(tmp_path / "b")]) == 2
    monkeypatch.setenv("REPOSITORY_URL", "https://github.com/OWNER/crossprofile")   # refused before staging
    assert main(["book", "--no-html", "--out", str(tmp_path / "b")]) == 2
    assert "REPOSITORY_URL" in capsys.readouterr().err and not (tmp_path / "b").exists()
    monkeypatch.delenv("REPOSITORY_URL")
    assert main(["book", "--help"]) == 0 and "--quick" in capsys.readouterr().out


def test_crossprofile_book_needs_a_checkout(tmp_path, monkeypatch, capsys):
    from crossprofile_lib import paths
    from crossprofile_lib.cli import main
    monkeypatch.delenv("CROSSPROFILE_ROOT", raising=False)
    monkeypatch.setattr(paths, "package_dir", lambda: tmp_path / "site-packages" / "crossprofile_lib")
    assert main(["book", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "built from a checkout" in err and "CROSSPROFILE_ROOT" in err
