"""The book as its readers meet it (issue 24): near chance decided from the run's measured headroom and
flagged at every number; intervals that span about 0-100 marked and greyed; results first (the
provenance badge under the first takeaways box); a partial rebuild cannot produce a mixed book; the
contrast check of the browser test catches unreadable text (tests/test_book_browser.py runs it on
every page, both themes, 1280 and 390 px)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from crossprofile_lib import book
from crossprofile_lib.book import build as B


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    return book.reference_run(tmp_path_factory.mktemp("runs"), ["templates/dev"], [0], ["0.6"])


def as_model(run, backend: str, df: pd.DataFrame | None = None):
    """The reference run's rows relabelled as a language model's run (``backend``)."""
    d = (run.df if df is None else df).copy()
    d["backend"], d["model"] = backend, backend.split("/")[-1]
    return book.Run(run.path, d, dict(run.header, backend=backend, model=backend.split("/")[-1], decision_mode="score"))


def no_headroom(run) -> pd.DataFrame:
    """``run``'s rows with ALL answered exactly as EMPTY (ALL - EMPTY = 0: the headroom check fails)."""
    df = run.df.copy()
    empty = df[df.policy == "EMPTY"].set_index(["template_id", "variant", "seed"])["correct"]
    is_all = df.policy == "ALL"
    df.loc[is_all, "correct"] = [empty[k] for k in zip(df.template_id[is_all], df.variant[is_all], df.seed[is_all])]
    return df


def test_near_chance_is_measured_not_read_from_the_model_name(ref):
    boot = book.bootstrap(ref, 200)
    named = as_model(ref, "llamacpp/smollm2-135m")          # the small model's NAME, but a run with headroom
    named.boot = boot
    assert not book.near_chance(named)
    assert not any("near chance" in n.data for n in book.run_notices(named, boot))
    other = as_model(ref, "openai/some-7b", no_headroom(ref))   # any name, no headroom: near chance
    other.boot = boot
    assert book.near_chance(other)
    assert any("near chance (measured)" in n.title for n in book.run_notices(other, boot))
    assert not book.near_chance(ref)                         # the reference decider never is


def test_a_near_chance_run_is_flagged_at_every_label(ref):
    boot = book.bootstrap(ref, 200)
    bad = as_model(ref, "openai/some-7b", no_headroom(ref))
    bad.boot = boot
    good = as_model(ref, "openai/other-7b")
    good.boot = boot
    cap = book.Captions(4)
    text = cap.text("Figure", "Accuracy.", [ref, bad, good])
    assert f"{bad.label} ({book.NEAR_CHANCE_FLAG})" in text
    assert f"{good.label} ({book.NEAR_CHANCE_FLAG})" not in text and "reference decider (ledger) (near" not in text
    assert book.NEAR_CHANCE_FLAG in book.name_html(bad) and book.NEAR_CHANCE_FLAG not in book.name_html(good)
    t = pd.DataFrame({bad.label: ["40.0 [30.0, 50.0]"], good.label: ["60.0 [50.0, 70.0]"]}, index=["R1"])
    html = cap.table(t, "Accuracy.", [bad, good]).to_html()
    assert f"{bad.label} ({book.NEAR_CHANCE_FLAG})" in html         # the column header says it
    assert f"{good.label} ({book.NEAR_CHANCE_FLAG})" not in html


@pytest.mark.parametrize("cell, marked", [("50.0 [0.0, 100.0]", True), ("33.3 [3.3, 96.7]", True),
                                          ("50.0 [5.0, 94.0]", False), ("50.0 [40.0, 60.0]", False),
                                          ("+12.0 [-50.0, 45.0]", True), ("n/a", False), (12.0, False)])
def test_intervals_spanning_about_0_to_100_are_marked(cell, marked):
    assert book.uninformative_cell(cell) is marked


def test_uninformative_cells_are_greyed_marked_and_explained(ref):
    cap = book.Captions(7)
    t = pd.DataFrame({"a": ["50.0 [0.0, 100.0]", "50.0 [40.0, 60.0]"]}, index=["R1", "B4"])
    html = cap.table(t, "Accuracy.", ref).to_html()
    assert "cp-uninformative" in html and "50.0 [0.0, 100.0] †" in html
    assert "50.0 [40.0, 60.0] †" not in html
    assert "Greyed cells marked † (1)" in html and "says nothing" in html
    plain = book.Captions(7).table(t.iloc[1:], "Accuracy.", ref).to_html()
    assert "cp-uninformative" not in plain and "†" not in plain


def test_results_first_the_badge_follows_the_first_takeaways_box():
    ch = book.setup({}, 1, reference=False, model=False)
    assert ch is not None
    first = book.takeaways(["a computed line"]).data
    assert first.index("What this build shows") < first.index("Provenance")
    assert "Built with" in first and "<details" in first                 # folded, one line visible
    assert "Provenance" not in book.takeaways(["again"]).data           # shown once per page


# --------------------------------------------------------------------------- one book, one build
def _stamped(path: Path, params: dict | None) -> None:
    nb = nbformat.v4.new_notebook()
    if params is not None:
        nb.metadata[B.STAMP_KEY] = {"id": B.build_id(params), "params": params}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _book_root(tmp_path: Path) -> Path:
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nparts:\n  - caption: c\n    chapters:\n"
                                       "      - file: book/01-a\n      - file: book/02-b\n      - file: book/glossary\n")
    return tmp_path


def test_mixed_pages_names_each_page_from_another_build(tmp_path):
    root = _book_root(tmp_path)
    now, old = {"seeds": [0, 1], "backend": ""}, {"seeds": [0], "backend": ""}
    _stamped(root / "book" / "intro.ipynb", now)
    _stamped(root / "book" / "01-a.ipynb", now)
    assert B.mixed_pages(root, now) == []                                # glossary is text: nothing to compare
    _stamped(root / "book" / "02-b.ipynb", old)
    bad = B.mixed_pages(root, now)
    assert len(bad) == 1 and bad[0].startswith("book/02-b: built with seeds=[0]") and "seeds=[0, 1]" in bad[0]
    _stamped(root / "book" / "02-b.ipynb", None)
    assert B.mixed_pages(root, now) == ["book/02-b: no build record (executed by an older build)"]


def test_a_partial_rebuild_in_the_checkout_refuses_a_mixed_book(tmp_path, monkeypatch, capsys):
    """``--only 01`` re-executes chapter 1 with new parameters; chapter 2 is left from an older
    build, so the HTML step refuses (before jupyter-book runs) and names it."""
    root = _book_root(tmp_path)
    (root / "notebooks").mkdir()
    for n in ("intro", "01-a", "02-b"):
        (root / "notebooks" / f"{n}.md").write_text("# x\n")
    params = book.BookParams.quick()
    old = json.loads(json.dumps(params.replace(seeds=[7]).model_dump(), default=str))
    _stamped(root / "book" / "02-b.ipynb", old)

    class NoRuns:
        def __init__(self, p):
            pass

        def prepare(self, log=None):
            return {}

    def fake_execute(md, out_dir, values, cwd):
        _stamped(out_dir / f"{md.stem}.ipynb", json.loads(json.dumps(values, default=str)))
        return 0.0

    monkeypatch.setattr(B, "BookRuns", NoRuns)
    monkeypatch.setattr(B, "execute", fake_execute)
    monkeypatch.setattr(B, "config_args", lambda target, env: [])
    monkeypatch.setattr(B.subprocess, "call", lambda *a, **k: pytest.fail("jupyter-book must not run"))
    rc = B.build(params, root, only=("01",), log=lambda s: None)
    err = capsys.readouterr().err
    assert rc == 1 and "mixed book" in err and "book/02-b: built with" in err and "seeds=[7]" in err
    assert "book/01-a" not in err and "book/intro" not in err


# --------------------------------------------------------------------------- the contrast check itself
def test_the_contrast_check_catches_unreadable_box_text(tmp_path):
    """The browser test's contrast check (tests/test_book_browser.py CONTRAST) on two tiny pages: text
    the colour of its box (the dark-mode defect) fails it, the same box with readable text passes."""
    from browser import Browser, navigate, require_chromium
    from test_book_browser import CONTRAST
    exe = require_chromium()
    page = ('<html data-theme="dark"><body><article class="bd-article"><div class="admonition" '
            'style="background:#1e2124"><p style="color:{fg}">What this build shows: R1 decides 96.7%</p>'
            '</div><p class="cp-caption" style="color:#333">Figure 1. Backend and model: x</p></article></body></html>')
    bad, good = tmp_path / "bad.html", tmp_path / "good.html"
    bad.write_text(page.format(fg="#202326"))
    good.write_text(page.format(fg="#ced6dd").replace("color:#333", "color:#111"))
    b = Browser(exe, tmp_path / "profile")
    try:
        cdp = b.page()
        navigate(cdp, bad.as_uri())
        low = cdp.evaluate(CONTRAST)
        navigate(cdp, good.as_uri())
        ok = cdp.evaluate(CONTRAST)
        cdp.close()
    finally:
        b.close()
    assert low["checked"] >= 2 and any("What this build shows" in x for x in low["low"])
    assert ok["checked"] >= 2 and ok["low"] == [], ok


# --------------------------------------------------------------------------- tables as printed
def test_tables_print_counts_booleans_headers_and_p_values_as_a_reader_reads_them(ref):
    t = pd.DataFrame({("quantity", ""): ["a", "b"], ("estimate", "kept_support"): [1.25, 2.5],
                      ("n", ""): [1440.0, 180.0], ("reject", ""): [True, False], ("p", ""): [0.0, 0.0423]})
    html = book.Captions(9).table(t, "Counts.", ref).to_html()
    assert "1440" in html and "1440.00" not in html and "1440.0<" not in html
    assert "Yes" in html and "No" in html and "True" not in html
    assert "&lt; 0.001" in html and "0.042" in html and "0.000" not in html
    assert "(&#x27;quantity&#x27;, &#x27;&#x27;)" not in html and "('quantity', '')" not in html
    assert "estimate · kept support" in html and "kept_support" not in html
    assert "2.50" in book.Captions(9).table(t, "x", ref, precision=2).to_html()      # estimates keep decimals


def test_a_count_named_column_with_fractions_is_not_rounded(ref):
    t = pd.DataFrame({"n": [2.5, 3.0]})
    assert "2.5" in book.Captions(9).table(t, "x", ref).to_html()


# --------------------------------------------------------------------------- recipes, as written, in a fresh shell
ROOT = Path(__file__).resolve().parents[1]


def fresh_shell(cmd: str, timeout: float, **kw):
    """``cmd`` in bash with a bare environment (no activated venv, PATH /usr/bin:/bin), from the checkout."""
    import os
    import subprocess
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, **kw)


def chapter_recipes() -> list[str]:
    """The `make chapter` commands of chapter 9's "One chapter" block (continuation lines joined)."""
    text = (ROOT / "notebooks" / "09-rerun.md").read_text()
    block = text.split("## One chapter", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [c.strip() for c in block.replace("\\\n", " ").splitlines() if c.strip().startswith("make chapter")]


@pytest.mark.slow
def test_chapter_9_recipe_runs_as_written_in_a_fresh_shell():
    import shutil
    shutil.rmtree(ROOT / "_build" / "chapters" / "01-hidden-profiles.ipynb", ignore_errors=True)
    recipes = chapter_recipes()
    assert len(recipes) >= 3 and recipes[0].startswith("make chapter NAME=01"), recipes
    first = recipes[0].split("#")[0].strip()
    r = fresh_shell(first, 900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = ROOT / "_build" / "chapters" / "01-hidden-profiles.ipynb"
    assert f"make chapter: wrote {out.relative_to(ROOT)}" in r.stdout and out.exists()
    # the kernel on local sockets (papermill --engine crossprofile), so ipykernel does not warn about TCP
    assert "without encryption" not in r.stdout + r.stderr, r.stderr[-2000:]
    nb = nbformat.read(out, as_version=4)
    src = "\n".join(c.source for c in nb.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert 'policy = "B4"' in src                                           # the recipe's parameter arrived
    streams = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o["output_type"] == "stream"]
    assert streams == []                                                    # no progress or log lines in the cells
    for rest in recipes[1:]:                                                # the model recipes parse as written
        d = fresh_shell(rest.split("#")[0].replace("make chapter", "make -n chapter", 1), 120)
        assert d.returncode == 0 and "papermill" in d.stdout, d.stdout + d.stderr


def test_make_chapter_names_a_missing_chapter():
    r = fresh_shell("make chapter NAME=99", 120)
    assert r.returncode != 0 and "NAME=99: no such chapter" in r.stdout + r.stderr


def unquoted_checkout_paths(makefile: str) -> list[str]:
    """Recipe lines that pass ``$(CURDIR)`` outside double quotes: in a checkout whose path has a space
    (``~/My Projects/crossprofile``) the shell splits it (``make lab`` failed there: "No such directory")."""
    return [line.strip() for line in makefile.splitlines()
            if line.startswith("\t") and "$(CURDIR)" in line.replace('"$(CURDIR)"', "")]


def test_the_makefile_quotes_the_checkout_path():
    assert unquoted_checkout_paths((ROOT / "Makefile").read_text()) == []
    assert unquoted_checkout_paths('\tjupyter lab --root_dir=$(CURDIR) \\\n') == ["jupyter lab --root_dir=$(CURDIR) \\"]
    assert unquoted_checkout_paths('\tpapermill --cwd "$(CURDIR)"\n# $(CURDIR) in a comment\n') == []


@pytest.mark.slow
def test_make_lab_prints_a_link_to_chapter_10_without_news():
    """``make lab LAB_ARGS=--no-browser`` in a fresh shell: the link it prints opens chapter 10, not the
    Launcher; the lab's settings turn the news pop-up and update checks off."""
    import os
    import signal
    import socket
    import subprocess
    import time
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    proc = subprocess.Popen(["bash", "-c", f"make lab LAB_ARGS='--no-browser --ServerApp.port={port}'"], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen, url = [], None
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and url is None:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if f"127.0.0.1:{port}/" in line and "http" in line:
                url = line[line.index("http"):].split()[0]
    finally:  # the whole group (make, jupyter lab, its kernels), however it ended
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                pass
            time.sleep(2 if sig == signal.SIGTERM else 0)
    assert url is not None, "".join(seen)[-3000:]
    assert "/lab/tree/notebooks/10-explorer.md" in url, url
    settings = json.loads((ROOT / ".venv" / "share" / "jupyter" / "lab" / "settings" / "overrides.json").read_text())
    assert settings["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"


def test_an_interval_spanning_0_to_100_never_counts_as_agreement():
    from crossprofile_lib.book.models import ModelVerdict
    from crossprofile_lib.book.paper import reproduced
    ok = ModelVerdict("confirmatory")
    assert reproduced(64.0, 50.0, 0.0, 100.0, "%", ok) == "not counted: interval spans 0 to 100, says nothing"
    assert reproduced(96.7, 90.0, 85.0, 99.0, "%", ok) == "yes"
    assert reproduced(22.2, 30.0, 25.0, 35.0, "%", ok) == "no"
    assert reproduced(0.5, 1.0, 0.0, 100.0, "facts", ok) == "yes"         # facts: no 0-100 scale, never "uninformative"


def test_spec_references_point_to_the_books_own_specification():
    html = book.docstring_html("crossprofile_lib.stats.bootstrap")
    assert "SPEC section" not in html and '<a href="03-methods.html#spec-statistics">' in html
    methods = (ROOT / "notebooks" / "03-methods.md").read_text()
    from crossprofile_lib.book.display import SPEC_SECTIONS
    for target in SPEC_SECTIONS.values():                        # every label exists on the methods page
        if "#" in target:
            assert f"({target.split('#')[1]})=" in methods, target
    prose = [p for p in (ROOT / "notebooks").glob("*.md") if not p.name.startswith("11-")] + [ROOT / "book" / "glossary.md"]
    assert not [p.name for p in prose if "SPEC section" in p.read_text()]


def test_a_partial_book_in_its_own_folder_builds_with_links_to_left_out_chapters(tmp_path):
    """``--only 06 --out DIR``: the landing page and the glossary link to every chapter ({doc},
    {ref}); in the partial book those chapters are absent, and the HTML build (warnings as errors)
    must still pass (the staged config quiets exactly those link warnings), while any other warning
    still fails it. Real jupyter-book on the staged folder, with small executed pages."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "partial"
    B.stage(root, out, only=("06",))
    cfg = __import__("yaml").safe_load((out / "_config.yml").read_text())
    assert set(B.PARTIAL_BOOK_QUIET) <= set(cfg["sphinx"]["config"]["suppress_warnings"])
    full = tmp_path / "full"
    B.stage(root, full)
    kept = __import__("yaml").safe_load((full / "_config.yml").read_text())["sphinx"]["config"]["suppress_warnings"]
    assert not set(B.PARTIAL_BOOK_QUIET) & set(kept) and set(kept) <= set(cfg["sphinx"]["config"]["suppress_warnings"])

    def page(path, text):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, path)

    page(out / "book" / "intro.ipynb", "# Intro\n\nSee {doc}`04-rarest-first` and {ref}`spec-cells`.\n")
    page(out / "book" / "06-social-proof.ipynb", "# 6. Social proof\n\nText.\n")
    jb = Path(sys.executable).with_name("jupyter-book")
    r = subprocess.run([str(jb), "build", str(out), "-W", "-n", "--keep-going"], cwd=out, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert (out / "_build" / "html" / "book" / "06-social-proof.html").exists()
    # a warning of another kind still fails the partial book
    page(out / "book" / "06-social-proof.ipynb", "# 6. Social proof\n\n```{nosuchdirective}\n```\n")
    r = subprocess.run([str(jb), "build", str(out), "-W", "-n", "--keep-going", "--all"], cwd=out,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode != 0


def test_chapters_run_on_the_local_socket_engine_and_an_older_install_falls_back(monkeypatch):
    """The book's chapters run through papermill's engine ``crossprofile`` (pyproject.toml registers it: the kernel
    on local sockets, crossprofile_lib/book/kernel.py); an editable install made before that registration has no such
    engine, and the build then runs on papermill's default instead of stopping."""
    from papermill.engines import papermill_engines

    from crossprofile_lib.book.build import chapter_engine
    from crossprofile_lib.book.kernel import LocalSocketEngine
    assert chapter_engine() == "crossprofile" and papermill_engines.get_engine("crossprofile") is LocalSocketEngine
    monkeypatch.delitem(papermill_engines._engines, "crossprofile")
    assert chapter_engine() is None
