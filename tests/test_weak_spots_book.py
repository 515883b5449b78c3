"""Issue 25: the book build's refusal of pages that load anything over the network (the post-build check,
``check_offline``), on built-page fixtures: a page that loads a remote script, stylesheet, image or font is
named; near misses (the same tags with local files, a plain link to another site, a URL shown as text) are
not. The check is imported from where the build keeps it (``crossprofile_lib.book.build``, else
``scripts/build_book.py``)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _check_offline():
    try:
        return importlib.import_module("crossprofile_lib.book.build").check_offline
    except ImportError:
        sys.path.insert(0, str(ROOT / "scripts"))
        return importlib.import_module("build_book").check_offline


check_offline = _check_offline()

PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>Chapter</title>
<link rel="stylesheet" href="_static/styles/theme.css">
<script src="_static/scripts/bootstrap.js"></script>
{head}</head><body><main><p>Accuracy by policy.</p>{body}</main></body></html>
"""

REMOTE = {
    "script": ('<script defer src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>', ""),
    "protocol-relative script": ("<script src='//cdn.example.org/require.min.js'></script>", ""),
    "stylesheet": ('<link rel="stylesheet" type="text/css" href="https://fonts.googleapis.com/css?family=Lato">',
                   ""),
    "image": ("", '<img alt="binder" src="https://mybinder.org/badge_logo.svg">'),
    "image srcset": ("", '<img alt="f" src="_images/f.png" srcset="_images/f.png 1x, https://example.org/f2.png 2x">'),
    "inline font": ("<style>@font-face { font-family: X; src: url('https://fonts.gstatic.com/x.woff2'); }</style>", ""),
    "preloaded font": ('<link rel="preload" as="font" href="https://fonts.gstatic.com/s/lato.woff2" crossorigin>', ""),
    "iframe": ("", '<iframe src="https://www.youtube.com/embed/xyz"></iframe>'),
    "styled background": ("", '<div style="background: url(//example.org/bg.png)">x</div>'),
}

LOCAL = {
    "local script and stylesheet": ('<script src="../_static/mathjax/tex-chtml-full.js"></script>'
                                    '<link rel="stylesheet" href="../_static/custom.css">', ""),
    "local image and font": ("<style>@font-face { font-family: X; src: url('_static/fonts/x.woff2'); }</style>",
                             '<img alt="figure 1" src="_images/fig1.png" srcset="_images/fig1.png 1x">'),
    "data uri image": ("", '<img alt="dot" src="data:image/png;base64,iVBORw0KGgo=">'),
    "plain links to other sites": ("", '<a href="https://mybinder.org/v2/gh/x/y">launch</a> '
                                       '<a class="reference external" href="//example.org/paper.pdf">paper</a>'),
    "a URL shown as text": ("", "<pre>&lt;script src=\"https://cdn.example.org/x.js\"&gt;</pre>"
                                "<p>set CROSSPROFILE_BASE_URL=http://HOST:8000/v1 or https://api.deepseek.com</p>"),
}


def _site(tmp_path, head="", body="", css=None):
    html = tmp_path / "html"
    (html / "chapters").mkdir(parents=True)
    (html / "index.html").write_text(PAGE.format(head="", body=""))
    (html / "chapters" / "04.html").write_text(PAGE.format(head=head, body=body))
    if css is not None:
        (html / "_static").mkdir()
        (html / "_static" / "custom.css").write_text(css)
    return html


def test_a_clean_site_passes(tmp_path):
    assert check_offline(_site(tmp_path)) == []


@pytest.mark.parametrize("kind", list(REMOTE))
def test_a_page_that_loads_a_remote_resource_is_named(tmp_path, kind):
    head, body = REMOTE[kind]
    bad = check_offline(_site(tmp_path, head, body))
    assert len(bad) == 1, bad
    assert bad[0].startswith(str(Path("chapters") / "04.html") + ":"), bad   # the page, relative to the site


@pytest.mark.parametrize("kind", list(LOCAL))
def test_near_misses_are_not_refused(tmp_path, kind):
    head, body = LOCAL[kind]
    assert check_offline(_site(tmp_path, head, body)) == []


def test_a_stylesheet_that_imports_a_remote_font_is_named(tmp_path):
    css = "@import url('https://fonts.googleapis.com/css2?family=Inter');\nbody { font-family: Inter; }\n"
    bad = check_offline(_site(tmp_path, css=css))
    assert len(bad) == 1 and bad[0].startswith(str(Path("_static") / "custom.css") + ":"), bad
    ok = "@font-face { font-family: X; src: url(../fonts/x.woff2) format('woff2'); }\n"
    assert check_offline(_site(tmp_path / "ok", css=ok)) == []


def test_every_remote_load_on_a_page_is_listed(tmp_path):
    head = REMOTE["script"][0] + REMOTE["stylesheet"][0]
    bad = check_offline(_site(tmp_path, head, REMOTE["image"][1]))
    assert len(bad) == 3
