"""The published book (issue 22, item 4): the Pages workflow, `make site` and its link check.

* the workflow (.github/workflows/pages.yml) is valid against GitHub's workflow schema (check-jsonschema's
  vendored copy, offline), and the check fails on a broken workflow; it builds with `make book`, checks the
  site and deploys with upload-pages-artifact + deploy-pages, launch buttons from the repository's URL;
* scripts/make_site.py copies the built book into a self-contained folder with .nojekyll, never replaces a
  folder it did not make, and its check names dead internal links and off-machine loads, from a relative
  folder (the default ``_site``) as from an absolute one;
* ``make site`` reuses a FINISHED build of the current parameters (``make_site.py --finished``: the build's
  stamp, every chapter's build id, REPOSITORY_URL, no newer source) and builds only without one;
* (slow) on ONE fresh clone, the README's quick recipe in a fresh shell, then the workflow's own ``run:`` steps,
  read from pages.yml (the quick book: BOOK_ARGS, which the workflow's ``make`` commands read from the
  environment): ``make site`` reuses the recipe's build (tests/conftest.py ``quick_clone``, the build the
  browser tests read too) and deploys a site folder that passes the check, with the cite block and the
  repository link on every page;
* (slow) the site folder of a quick build is that build's HTML byte for byte (plus .nojekyll), which
  tests/test_book_browser.py opens page by page in headless Chromium served on 127.0.0.1 (no request leaving
  the machine, no failed load), and passes the link check.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import make_site  # noqa: E402
from conftest import PAGES_WORKFLOW as WORKFLOW  # noqa: E402


def _schema_check(path: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or shutil.which("check-jsonschema")
    if exe is None:
        pytest.fail("check-jsonschema is missing: it is in the lint extra (make install)")
    return subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_pages_workflow_is_valid(tmp_path):
    r = _schema_check(WORKFLOW)
    assert r.returncode == 0, r.stdout + r.stderr
    # the linter is not a rubber stamp: a job without runs-on, and steps that are not a list, fail it
    doc = yaml.safe_load(WORKFLOW.read_text())
    broken = dict(doc, jobs={"build": {"steps": "make book"}})
    bad = tmp_path / "broken.yml"
    bad.write_text(yaml.safe_dump(broken))
    assert _schema_check(bad).returncode != 0


def test_pages_workflow_builds_checks_and_deploys():
    doc = yaml.safe_load(WORKFLOW.read_text())
    build, deploy = doc["jobs"]["build"], doc["jobs"]["deploy"]
    runs = "\n".join(s.get("run", "") for s in build["steps"])
    uses = [s.get("uses", "").split("@")[0] for s in build["steps"]]
    assert "make book" in runs and "make site" in runs and "make_site.py --check _site" in runs
    assert runs.index("make book") < runs.index("make site")
    assert "actions/upload-pages-artifact" in uses
    assert next(s for s in build["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact"))[
        "with"]["path"] == "_site"
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]
    assert deploy["needs"] == "build"
    assert doc["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert build["env"]["REPOSITORY_URL"] == "${{ github.server_url }}/${{ github.repository }}"


def _make_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("BACKEND", "MODEL", "BACKENDS", "RUNS", "TEMPLATES", "SEEDS",
                                                           "BUDGETS", "VARIANTS", "REPOSITORY_URL", "BOOK_ARGS",
                                                           "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return {**env, **extra}


def test_site_target_with_site_html_copies_that_build_and_builds_nothing(tmp_path):
    html, site = _tree(tmp_path / "html"), tmp_path / "_site"
    # SUBMAKE=false: a `make book` would fail the target, so rc 0 proves nothing was built
    r = subprocess.run(["make", "--no-print-directory", "site", f"SITE_HTML={html}", f"SITE={site}", "SUBMAKE=false"],
                       cwd=ROOT, capture_output=True, text=True, env=_make_env(), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (site / ".nojekyll").is_file() and "no dead internal link" in r.stdout


def _tree(d: Path) -> Path:
    (d / "_static").mkdir(parents=True)
    (d / "_static" / "s.css").write_text("body { color: black; }")
    (d / "index.html").write_text('<meta http-equiv="refresh" content="0; url=intro.html">')
    (d / "intro.html").write_text('<link rel="stylesheet" href="_static/s.css"><p id="top"></p>'
                                  '<a href="#top">top</a><a href="ch.html#x">ch</a><a href="https://mybinder.org/v2/gh/a/b">binder</a>'
                                  '<link rel="canonical" href="https://example.org/intro.html">')
    (d / "ch.html").write_text('<h1 id="x">x</h1><a href="intro.html#top">back</a><img src="_static/s.css">')
    return d


def test_make_site_copies_adds_nojekyll_and_passes_a_clean_tree(tmp_path):
    html, site = _tree(tmp_path / "html"), tmp_path / "_site"
    assert make_site.main([str(html), str(site)]) == 0
    assert (site / ".nojekyll").is_file() and (site / "ch.html").is_file()
    assert make_site.check(site) == []
    assert make_site.main([str(html), str(site)]) == 0   # its own folder is replaced


def test_site_check_passes_from_a_relative_folder_as_from_an_absolute_one(tmp_path, monkeypatch):
    """(Was: `make site` exited 2, "349 problem(s)": from the default relative _site every same-page #anchor
    was reported dead, while the same check of the absolute path passed.)"""
    site = _tree(tmp_path / "_site")
    (site / "ch.html").write_text('<h1 id="x">x</h1><a href="#x">here</a><a href="#gone">gone</a>')
    monkeypatch.chdir(tmp_path)
    want = ["ch.html: #gone (no element #gone on ch.html)"]
    assert make_site.check(Path("_site")) == want          # the same-page #x resolves; #gone is still dead
    assert make_site.check(site) == want
    (site / "ch.html").write_text('<h1 id="x">x</h1><a href="#x">here</a><a href="intro.html#top">back</a>')
    assert make_site.main(["--check", "_site"]) == 0


def test_make_site_keeps_a_folder_it_did_not_make(tmp_path, capsys):
    html, site = _tree(tmp_path / "html"), tmp_path / "mine"
    site.mkdir()
    (site / "notes.txt").write_text("keep me")
    with pytest.raises(SystemExit) as e:
        make_site.main([str(html), str(site)])
    assert e.value.code == 2 and "not a site folder made by this command" in capsys.readouterr().err
    assert (site / "notes.txt").read_text() == "keep me"


def test_site_check_names_dead_links_and_off_machine_loads(tmp_path):
    site = _tree(tmp_path / "s")
    (site / "ch.html").write_text('<a href="gone.html">g</a><a href="intro.html#nope">n</a>'
                                  '<script src="https://cdn.example.org/x.js"></script>'
                                  '<link rel="stylesheet" href="//fonts.example.org/f.css"><img src="_images/no.png">')
    (site / "_static" / "s.css").write_text('@import url("https://fonts.example.org/y.css");')
    got = sorted(make_site.check(site))
    assert got == sorted([
        "ch.html: gone.html (no such file in the site)",
        "ch.html: intro.html#nope (no element #nope on intro.html)",
        "ch.html: loads https://cdn.example.org/x.js from another machine",
        "ch.html: loads //fonts.example.org/f.css from another machine",
        "ch.html: _images/no.png (no such file in the site)",
        "_static/s.css: loads https://fonts.example.org/y.css from another machine",
        "intro.html: ch.html#x (no element #x on ch.html)",   # the new ch.html has no #x
    ]), got
    assert make_site.main(["--check", str(site)]) == 1


# --- make site reuses a finished build -------------------------------------------------------------

def _finished_build(out: Path, env: dict, url: str = "") -> Path:
    """A build of the quick parameters in ``out`` as ``crossprofile book --quick --out out`` leaves it when
    it finished: two executed chapters recording the build id, the HTML (with the repository ``url`` in
    its meta tag), and the stamp written last."""
    import nbformat
    import yaml

    from crossprofile_lib.book.build import STAMP_KEY, build_id
    from crossprofile_lib.cli.book import book_params
    values = json.loads(json.dumps(book_params(True, env).replace(runs_root=str(out.resolve() / "runs")).model_dump(),
                                   default=str))
    (out / "book").mkdir(parents=True)
    (out / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "book/intro",
                                                  "parts": [{"chapters": [{"file": "book/04-x"}, {"file": "book/glossary"}]}]}))
    (out / "book" / "glossary.md").write_text("# a text page: no notebook\n")
    for page in ("intro", "04-x"):
        nb = nbformat.v4.new_notebook()
        nb.metadata[STAMP_KEY] = {"id": build_id(values), "params": values}
        nbformat.write(nb, out / "book" / f"{page}.ipynb")
    html = _tree(out / "_build" / "html")
    meta = f'<meta name="crossprofile-repository" content="{url}" />'
    for p in ("index.html", "intro.html", "ch.html"):
        (html / p).write_text(meta + (html / p).read_text())
    (out / "_build" / "book_timing.json").write_text(json.dumps({"html_s": 12.5, "total_s": 40.0}))
    return html


def _older(p: Path, seconds: float = 5) -> None:
    t = p.stat().st_mtime - seconds
    os.utime(p, (t, t))


def test_finished_names_the_build_of_these_parameters_and_why_another_is_not(tmp_path):
    env = _make_env()
    out = tmp_path / "quick"
    html = _finished_build(out, env)
    args = ["--quick", "--out", str(out)]
    assert make_site.finished(args, env) == html.resolve()

    def why(**kw) -> str:
        with pytest.raises(make_site.NotFinished) as e:
            make_site.finished(kw.pop("args", args), {**env, **kw})
        return str(e.value)

    assert "other parameters (model_seeds" in why(SEEDS="1")                 # another parameter: rebuilt
    assert "other parameters" in why(args=["--out", str(out)])               # the default book is another build
    assert "REPOSITORY_URL=''" in why(REPOSITORY_URL="https://github.com/example/crossprofile")
    assert "--no-html" in why(args=[*args, "--no-html"])
    assert "no finished build" in why(args=["--quick", "--out", str(tmp_path / "none")])
    stamp = out / "_build" / "book_timing.json"
    _older(stamp)                                     # a chapter executed after the stamp: a build that did not finish
    assert "intro.ipynb was executed after the last finished build" in why()
    stamp.write_text(json.dumps({"html_s": 0.0}))     # --no-html wrote the stamp: no HTML built
    assert "built no HTML" in why()


def test_finished_sees_a_source_newer_than_the_build(tmp_path):
    env = _make_env()
    out, root = tmp_path / "quick", tmp_path / "checkout"
    _finished_build(out, env)
    (root / "notebooks").mkdir(parents=True)
    (root / "notebooks" / "04-x.md").write_text("# chapter\n")
    src = root / "notebooks" / "04-x.md"
    _older(src, 100)                                   # before the build started (its total_s: 40 s before the stamp)
    assert make_site.finished(["--quick", "--out", str(out)], env, root=root)
    _older(src, -100 + 20)                             # edited while the build ran: part of it may be older
    with pytest.raises(make_site.NotFinished, match=r"notebooks/04-x.md changed after the last finished build started"):
        make_site.finished(["--quick", "--out", str(out)], env, root=root)
    src.write_text("# chapter, edited\n")             # and after it
    with pytest.raises(make_site.NotFinished, match=r"notebooks/04-x.md changed after the last finished build started"):
        make_site.finished(["--quick", "--out", str(out)], env, root=root)


def test_make_site_reuses_a_finished_build_and_builds_only_without_one(tmp_path):
    out, site = tmp_path / "quick", tmp_path / "_site"
    _finished_build(out, _make_env())
    cmd = ["make", "--no-print-directory", "site", f"BOOK_ARGS=--quick --out {out}", f"SITE={site}", "SUBMAKE=false"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=_make_env(), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr      # SUBMAKE=false: had it run `make book`, the target would fail
    assert "reusing the finished build" in r.stdout and (site / "ch.html").is_file()
    _older(out / "_build" / "book_timing.json")
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=_make_env(), timeout=300)
    assert r.returncode != 0 and "make site: building the book: book/intro.ipynb was executed after" in r.stderr, \
        r.stdout + r.stderr
    r = subprocess.run(cmd + ["SEEDS=x"], cwd=ROOT, capture_output=True, text=True, env=_make_env(), timeout=300)
    assert r.returncode == 2 and "SEEDS=x" in r.stderr and "Nothing was run" in r.stderr, r.stdout + r.stderr


# --- the workflow's own steps on a fresh clone (slow) ------------------------------------------------

def _dry_run(cmd: str) -> str:
    """A ``make book ...`` command as a dry run (``make -n``): what it would run, printed."""
    return cmd.replace("make book", "make -n --no-print-directory book", 1)


def _step_command(run: str) -> str:
    """The one command of a ``run:`` step that starts with ``make book``."""
    cmds = [c for c in run.splitlines() if c.strip().startswith("make book")]
    assert len(cmds) == 1, f"the build step should be one `make book` command: {run!r}"
    return cmds[0]


@pytest.mark.slow
def test_readme_quick_recipe_and_the_pages_workflow_on_one_fresh_clone(quick_clone):
    """ONE quick build serves the README, the Pages workflow and the browser tests (tests/conftest.py
    ``quick_clone``; each used to build the book on its own):

    1. the README's quick recipe (tests/test_readme_recipes.py ``QUICK``), exactly as written, in a fresh shell
       (``env -i``: no virtualenv activated, an empty HOME, so an empty user cache and call cache) on a fresh
       clone, the Pages job's ``env`` (its expressions filled in as on github.com) and ``RUNS`` (the imported
       near-chance run the browser tests read) being the only other variables, built the book;
    2. every ``run:`` step of the Pages build job after it, exactly as pages.yml writes it, with that job ``env``
       and the quick book's variables (BOOK_ARGS, BACKEND=none, RUNS) in the environment, as `make` reads them:
       ``make site`` must REUSE the recipe's build (make_site.py --finished: the build id of the parameters the
       environment names, REPOSITORY_URL, no newer source), so the recipe built exactly the book the workflow's
       ``make book`` step builds; that step itself runs as a dry run (``make -n``), which must print the same
       ``crossprofile book`` command as the recipe's dry run. The uploaded folder passes the link check and
       carries the cite block and the repository link on every page."""
    from test_readme_recipes import QUICK
    clone, home, job_env, r = quick_clone.clone, quick_clone.home, quick_clone.job_env, quick_clone.result
    assert quick_clone.recipe == QUICK and r.returncode == 0
    html = quick_clone.out / "_build" / "html"
    for page in ("index", "book/intro", "book/01-hidden-profiles", "book/11-paper-vs-suite", "book/reference-make"):
        assert (html / f"{page}.html").is_file(), (f"{QUICK} built no {page}.html in {html}: "
                                                   f"{sorted(p.name for p in html.rglob('*.html'))[:40]}\n{r.stdout[-2000:]}")
    assert not (home / ".cache" / "pip").exists(), "make reinstalled: the clone's install stamp was not current"
    job = quick_clone.job

    # 2. the workflow's steps, the quick book's variables in the environment
    env = _make_env(**job_env)
    env.update(HOME=str(home), BOOK_ARGS="--quick --out _build/quick", BACKEND="none", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("VIRTUAL_ENV", None)
    runs = [s for s in job["steps"] if "run" in s]
    build_step = next(s for s in runs if "make book" in s["run"])
    dry = lambda cmd, e: subprocess.run(["bash", "-e", "-c", cmd], cwd=clone, env=e, capture_output=True,  # noqa: E731
                                        text=True, timeout=300)
    step_dry = dry(_dry_run(_step_command(build_step["run"])), env)
    recipe_dry = dry(_dry_run(QUICK), _make_env(HOME=str(home)))
    book_cmd = lambda out: [line for line in out.splitlines() if "crossprofile book" in line]  # noqa: E731
    assert step_dry.returncode == 0 and recipe_dry.returncode == 0, step_dry.stderr + recipe_dry.stderr
    assert book_cmd(step_dry.stdout) == book_cmd(recipe_dry.stdout) != [], (step_dry.stdout, recipe_dry.stdout)
    logs = []
    for step in runs[runs.index(build_step) + 1:]:
        r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", step["run"]], cwd=clone, env=env,
                           capture_output=True, text=True, timeout=3600)
        logs.append((step.get("name", step["run"]), r.stdout + r.stderr))
        assert r.returncode == 0, f"step {step.get('name')!r} failed (exit {r.returncode}):\n{logs[-1][1][-6000:]}"
    site_step = next(out for name, out in logs if "make site" in name or "site folder" in name)
    assert "reusing the finished build" in site_step and "executed " not in site_step, site_step[-3000:]
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    site = clone / upload["with"]["path"]
    assert (site / ".nojekyll").is_file() and make_site.check(site) == []
    url = env["REPOSITORY_URL"]
    shown = [p for p in make_site.pages(site) if not make_site.REFRESH.search(p.read_text(errors="replace")[:2000])]
    missing = [p.relative_to(site).as_posix() for p in shown
               if "Cite this book" not in p.read_text() or f'class="cp-repository-link" href="{url}"' not in p.read_text()]
    assert len(shown) >= 5 and not missing, f"pages without the cite block or the repository link: {missing}"


# --- the deployed folder is what the browser reads (needs a built book: slow) -------------------------

@pytest.mark.slow
def test_site_folder_is_the_built_html_the_browser_reads(tmp_path, quick_book):
    """The site folder ``make site`` deploys is the built book's HTML byte for byte (less Sphinx's build records),
    plus ``.nojekyll`` and its marker, and passes
    the link check; every page of that HTML is opened in headless Chromium, served on 127.0.0.1, by
    tests/test_book_browser.py::test_every_page_renders_offline_legibly (no request leaving the machine, no failed
    load, in four views), so the deployed folder is what the browser read (a second browser pass over the same
    bytes would only repeat it)."""
    import filecmp
    html = quick_book / "_build" / "html"
    site = tmp_path / "_site"
    assert make_site.main([str(html), str(site)]) == 0, "the link check failed on the built book"
    built = sorted(p.relative_to(html).as_posix() for p in html.rglob("*")
                   if p.is_file() and not set(p.relative_to(html).parts) & set(make_site.BUILD_RECORDS))
    copied = sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file())
    want = sorted([*built, ".nojekyll", make_site.MARKER])
    assert copied == want, set(copied) ^ set(want)
    _, differ, errors = filecmp.cmpfiles(html, site, built, shallow=False)
    assert not differ and not errors, (differ, errors)
    served = [p.relative_to(site).as_posix() for p in make_site.pages(site)]
    assert "book/intro.html" in served and len(served) >= 5
    # the browser test reads every one of them from the same HTML folder (its own page list) but the redirects
    # (index.html: a meta refresh to a page it reads)
    from test_book_browser import REFRESH
    from test_book_browser import pages as browser_pages
    read = set(browser_pages(html, redirects=False))
    for page in set(served) - read:
        m = REFRESH.search((site / page).read_text(errors="replace")[:2000])
        assert m and os.path.normpath(Path(page).parent / m.group(1)) in read, f"{page}: read by no browser test"


# --- the cite block and the repository link (crossprofile_lib/book/sphinx_cite.py) ------------------

def test_cite_block_is_rendered_from_citation_cff_and_links_the_repository_only_when_set(tmp_path):
    from crossprofile_lib.book.sphinx_cite import cite_html
    cff = tmp_path / "CITATION.cff"
    cff.write_text((ROOT / "CITATION.cff").read_text().replace("version: 0.1.0", "version: 9.8.7")
                   .replace('title: "CrossProfile:', 'title: "Renamed Suite:'))
    without = cite_html(cff)
    assert "Cite this book" in without and "Renamed Suite:" in without and "Version 9.8.7." in without
    assert "version = {9.8.7}" in without and "Rare, Relevant, and Still Wrong" in without  # BibTeX; the paper
    assert "cp-repository" not in without and "url = " not in without
    assert "names no repository" in without and "REPOSITORY_URL" in without   # said, never a guessed link (issue 52)
    url = "https://github.com/example/crossprofile"
    with_url = cite_html(cff, url)
    assert f'<a class="cp-repository-link" href="{url}">' in with_url and f"url = {{{url}}}" in with_url
    cff.write_text("cff-version: 1.2.0\nauthors: []\n")
    with pytest.raises(ValueError, match=r"CITATION.cff: no title"):
        cite_html(cff)


def _mini_book(d: Path) -> Path:
    """A two-page book with the project's _config.yml (its extensions) and a CITATION.cff of its own."""
    import yaml
    (d / "book" / "_static").mkdir(parents=True)
    for f in ("crossprofile.css", "favicon.svg"):
        shutil.copy2(ROOT / "book" / "_static" / f, d / "book" / "_static" / f)
    for f in ("_config.yml", "references.bib"):
        shutil.copy2(ROOT / f, d / f)
    (d / "CITATION.cff").write_text((ROOT / "CITATION.cff").read_text().replace('title: "CrossProfile:', 'title: "Mini Book:'))
    (d / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "book/intro",
                                                "chapters": [{"file": "book/other"}]}))
    (d / "book" / "intro.md").write_text("# Intro\n\nThe landing page.\n")
    (d / "book" / "other.md").write_text("# Other\n\nA chapter.\n")
    return d


@pytest.mark.slow
@pytest.mark.parametrize("url", ["", "https://github.com/example/crossprofile"])
def test_every_page_shows_the_cite_block_and_the_repository_link_when_set(tmp_path, url):
    """A real jupyter-book build (the project's configuration and extensions) without and with REPOSITORY_URL:
    every page, the search and index pages too, shows the cite block rendered from the book's CITATION.cff;
    the repository link and the theme's repository button only with the URL; every page records the URL."""
    from crossprofile_lib.book.build import config_args
    d = _mini_book(tmp_path / "mini")
    jb = Path(sys.executable).with_name("jupyter-book")
    r = subprocess.run([str(jb), "build", str(d), "-W", "-n", "--keep-going", *config_args(d, {"REPOSITORY_URL": url})],
                       cwd=d, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    html = d / "_build" / "html"
    shown = [p for p in make_site.pages(html) if not make_site.REFRESH.search(p.read_text()[:2000])]
    names = {p.relative_to(html).as_posix() for p in shown}
    assert {"book/intro.html", "book/other.html", "search.html", "genindex.html"} <= names, names
    for p in shown:
        t = p.read_text()
        assert "Cite this book" in t and "Mini Book:" in t, p
        assert f'<meta name="crossprofile-repository" content="{url}"' in t, p
        assert (f'class="cp-repository-link" href="{url}"' in t) == bool(url), p
        assert ("cp-repository" in t) == bool(url), p


def test_plain_make_site_after_a_quick_build_publishes_it_not_a_full_build(tmp_path, monkeypatch, capsys):
    """Issue 52: after the README's quick build (``--quick --out _build/quick``), plain ``make site`` (no BOOK_ARGS)
    reuses that finished build instead of starting a full default one; with BOOK_ARGS given, or with no finished
    build anywhere, it still answers 1 (build); a finished default build still wins."""
    quick = tmp_path / "_build" / "quick" / "_build"
    (quick / "html").mkdir(parents=True)
    (quick / "book_timing.json").write_text("{}")
    done = {("--quick", "--out", os.path.join("_build", "quick")): quick / "html"}

    def fake_finished(args, env=None, root=None):
        key = tuple(args)
        if key in done:
            return done[key]
        raise make_site.NotFinished(f"nothing finished for {list(args)}")
    monkeypatch.setattr(make_site, "finished", fake_finished)
    monkeypatch.setattr("crossprofile_lib.paths.book_root", lambda: tmp_path)
    assert make_site.main(["--finished"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == str(quick / "html") and "--quick --out _build/quick" in out.err
    assert make_site.main(["--finished", "--quick"]) == 1          # BOOK_ARGS given: those parameters only
    done[()] = tmp_path / "_build" / "html"
    assert make_site.main(["--finished"]) == 0 and capsys.readouterr().out.strip() == str(tmp_path / "_build" / "html")
    done.clear()
    assert make_site.main(["--finished"]) == 1                     # no finished build anywhere: build
