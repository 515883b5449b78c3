"""The published book (issue 22, item 4): the Pages workflow, `make site` and its link check.

* the workflow (.github/workflows/pages.yml) is valid against GitHub's workflow schema (check-jsonschema's
  vendored copy, offline), and the check fails on a broken workflow; it builds with `make book`, checks the
  site and deploys with upload-pages-artifact + deploy-pages, launch buttons from the repository's URL;
* scripts/make_site.py copies the built book into a self-contained folder with .nojekyll, never replaces a
  folder it did not make, and its check names dead internal links and off-machine loads;
* (slow) the site folder of a quick build, served on 127.0.0.1, opens in headless Chromium with no
  request leaving the machine and no failed load, and passes the link check.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"
sys.path.insert(0, str(ROOT / "scripts"))
import make_site  # noqa: E402


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


def test_site_target_is_in_the_makefile():
    r = subprocess.run(["make", "-n", "site", "SITE_HTML=_build/html"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "scripts/make_site.py _build/html _site" in r.stdout
    assert "crossprofile book" not in r.stdout  # SITE_HTML given: no rebuild


def _tree(d: Path) -> Path:
    (d / "_static").mkdir(parents=True)
    (d / "_static" / "s.css").write_text("body { color: black; }")
    (d / "index.html").write_text('<meta http-equiv="refresh" content="0; url=intro.html">')
    (d / "intro.html").write_text('<link rel="stylesheet" href="_static/s.css"><p id="top"></p>'
                                  '<a href="ch.html#x">ch</a><a href="https://mybinder.org/v2/gh/a/b">binder</a>'
                                  '<link rel="canonical" href="https://example.org/intro.html">')
    (d / "ch.html").write_text('<h1 id="x">x</h1><a href="intro.html#top">back</a><img src="_static/s.css">')
    return d


def test_make_site_copies_adds_nojekyll_and_passes_a_clean_tree(tmp_path):
    html, site = _tree(tmp_path / "html"), tmp_path / "_site"
    assert make_site.main([str(html), str(site)]) == 0
    assert (site / ".nojekyll").is_file() and (site / "ch.html").is_file()
    assert make_site.check(site) == []
    assert make_site.main([str(html), str(site)]) == 0   # its own folder is replaced


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


# --- the real site in a real browser (needs a built book: slow) -----------------------------------

class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_site_folder_served_locally_loads_nothing_from_another_machine(tmp_path, chromium, quick_book):
    from browser import Browser, navigate, off_machine
    exe = chromium
    # the session's quick book (tests/conftest.py), built with REPOSITORY_URL: the launch buttons are on
    html = quick_book / "_build" / "html"
    site = tmp_path / "_site"
    assert make_site.main([str(html), str(site)]) == 0, "the link check failed on the built book"
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    browser = Browser(exe, tmp_path / "profile")
    bad = {}
    try:
        for page in make_site.pages(site):
            rel = page.relative_to(site).as_posix()
            cdp = browser.page()
            try:
                navigate(cdp, f"{base}/{rel}")
                away = off_machine(cdp.requests())
                failed = [e for e in cdp.errors() if "Failed to load" in e or "404" in e]
            finally:
                cdp.close()
            if away or failed:
                bad[rel] = away + failed
    finally:
        browser.close()
        httpd.shutdown()
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())
