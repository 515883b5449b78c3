"""A real browser reads EVERY page of the built book: headless Chromium (tests/browser.py).

The book is built once per session with small parameters (tests/conftest.py ``quick_book``: the README's quick
recipe in a fresh shell on a fresh clone, launch buttons on, one imported near-chance run;
``CROSSPROFILE_BOOK_HTML=DIR`` reuses an already built ``_build/html``; ``CROSSPROFILE_SCREENSHOTS=DIR`` keeps a
screenshot of every page and view there), served on 127.0.0.1, and
every HTML page is opened in Chromium, in the light and the dark theme, at 1280 and 390 px. On each
page and view the test checks that

* nothing overflows sideways: the page has no horizontal scroll, and no element of the article
  sticks out of the text column unless it sits in a scrolling container (wide tables scroll);
* captions are whole: no table or figure caption extends past the visible width of its container;
* MathJax typeset the maths without an error (no ``mjx-merror`` element, no raw ``$...\\cmd...$``);
* the console shows no error, no uncaught exception and no failed load;
* every image loaded (``naturalWidth > 0``) and is shown at least at 90% of its size (a figure drawn
  wider than the column shrinks its labels), and every "Figure N" caption (a numbered ``figcaption``, or
  a caption paragraph outside a figure) has its image;
* no request left the machine (every URL the page asked for is on 127.0.0.1; Chromium also resolves
  nothing else);
* in BOTH themes (the OS preference emulated; the theme follows it) the text of every box, caption and
  table has a WCAG contrast of at least 4.5 : 1 against what is actually behind it (:data:`CONTRAST`);
* at 1280 px and at 390 px (a phone): figures keep their text at 8 px or more (:func:`min_scale`), and a
  table that scrolls sideways keeps its row labels in view (a sticky first column).

Dead links are checked without the browser: every internal ``href``/``src`` of every page resolves
to a built file, and every ``#fragment`` to an element id on the target page.

Locally the test skips with a reason when Chromium is missing; on CI (``CI=true``) that fails.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import json
import os
import re
import threading
import urllib.parse
from pathlib import Path

import pytest
from browser import Browser, navigate, off_machine

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = ("_static", "_sources", "_images", "_panels_static")


@pytest.fixture(scope="module")
def built_book(chromium, quick_book):
    """The shared quick book's site (tests/conftest.py ``quick_book``: built once per session, launch buttons on),
    built only once Chromium is known to be there (``chromium`` first)."""
    return quick_book / "_build" / "html"


REFRESH = re.compile(r"""<meta[^>]+http-equiv=["']?refresh["']?[^>]*url=([^"'>]+)""", re.IGNORECASE)


def pages(html_dir: Path, redirects: bool = True) -> list[str]:
    """Every built HTML page (``redirects=False``: without the meta-refresh pages, e.g. index.html)."""
    return sorted(str(p.relative_to(html_dir)) for p in html_dir.rglob("*.html")
                  if not any(part in SKIP_DIRS for part in p.relative_to(html_dir).parts)
                  and (redirects or not REFRESH.search(p.read_text(errors="replace")[:2000])))


@pytest.fixture(scope="module")
def server(built_book):
    handler = functools.partial(_QuietHandler, directory=str(built_book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture(scope="module")
def browser(chromium, tmp_path_factory):
    b = Browser(chromium, tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


# --------------------------------------------------------------------------- in the page
#: Resolves when MathJax has typeset the page (true), at once on a page that loads no MathJax (null: Sphinx
#: adds it only to pages with maths; raw TeX left on such a page is still caught by INSPECT's ``raw_tex``),
#: or after 15 s (false).
WAIT_MATHJAX = """new Promise(res => { const t0 = Date.now();
    if (!document.querySelector('script[src*="mathjax" i]')) { res(null); return; }
    (function w() {
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) { mj.startup.promise.then(() => res(true)); return; }
    if (Date.now() - t0 > 15000) { res(false); return; } setTimeout(w, 100); })(); })"""

INSPECT = r"""(() => {
  const art = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const box = art.getBoundingClientRect();
  const clips = p => ['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(p).overflowX);
  const scroller = el => { for (let p = el.parentElement; p && p !== art; p = p.parentElement) if (clips(p)) return p;
                           return null; };
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
                     (typeof el.className === 'string' && el.className ? '.' + el.className.split(' ')[0] : '');
  const over = [];
  for (const el of art.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height || scroller(el)) continue;
    if (r.right > box.right + 2) over.push(`${name(el)} +${Math.round(r.right - box.right)}px`);
  }
  const cut = [];
  for (const c of art.querySelectorAll('caption, figcaption, .cp-caption, p.caption')) {
    const r = c.getBoundingClientRect();
    if (!r.width) continue;
    const s = scroller(c), cb = (s || art).getBoundingClientRect();
    if (r.right > cb.right + 2 || r.left < cb.left - 2) cut.push(c.innerText.slice(0, 80));
  }
  // a table that scrolls sideways keeps its row labels in view (a sticky first column)
  const loose = [];
  for (const t of art.querySelectorAll('table')) {
    const s = scroller(t);
    if (!s || s.scrollWidth <= s.clientWidth + 2) continue;
    const first = t.querySelector('tbody tr > th, tbody tr > td');
    if (first && getComputedStyle(first).position !== 'sticky')
      loose.push((t.querySelector('caption') || t).innerText.slice(0, 60));
  }
  const imgs = [...art.querySelectorAll('img')];
  const text = art.innerText;
  return {page_overflow: document.scrollingElement.scrollWidth - window.innerWidth, over: over.slice(0, 10),
          loose: loose.slice(0, 5),
          cut: cut.slice(0, 10), math: document.querySelectorAll('mjx-container').length,
          math_errors: [...document.querySelectorAll('mjx-merror, .MathJax_Error')].map(e => e.textContent).slice(0, 5),
          raw_tex: (text.match(/\$[^$\n]{1,80}\\[a-zA-Z]+[^$\n]{0,80}\$/g) || []).slice(0, 5),
          figs: [...art.querySelectorAll('.cp-caption, .caption, figcaption')]
                  .filter(c => /^Figure [0-9]/.test(c.innerText.trim())).length,
          min_scale: MIN_SCALE,
          shrunk: imgs.filter(i => i.naturalWidth > 0 && i.getBoundingClientRect().width < MIN_SCALE * i.naturalWidth)
                      .map(i => `${i.src.split('/').pop()} at `
                                + `${Math.round(100 * i.getBoundingClientRect().width / i.naturalWidth)}%`)
                      .slice(0, 5),
          imgs: imgs.length, broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src).slice(0, 5),
          title: document.title};
})()"""


def min_scale(width: int) -> float:
    """How far a figure may be scaled down at a viewport ``width``: on a desktop to 90% (a figure drawn
    wider than the column shrinks its labels); on a phone to 75%, where its smallest text (8 pt, 10.7 px;
    crossprofile_lib/book/style.py FONT) is still 8 px: figures scroll sideways there instead."""
    return 0.9 if width >= 600 else 0.75


#: The kinds of text the book sets apart (CSS class or element -> what it is): every flag, label, box and
#: caption. :data:`CONTRAST` measures each text element inside one of them (and any other paragraph, list
#: item or table cell of the article), and counts the kinds it met on the page;
#: :func:`test_every_page_renders_offline_legibly` fails unless the book carries every kind of
#: :data:`REQUIRED_KINDS` somewhere (the quick book imports a near-chance run for it: tests/conftest.py).
KINDS = {
    ".cp-flag": "the near-chance flag",
    ".cp-uninformative": "an interval that says nothing (greyed, marked †)",
    ".cp-no-signal": "the line in place of a panel without signal",
    ".cp-role": "a fact's role label (support, decoy, irrelevant)",
    ".cp-badge-label": "the provenance badge's label",
    ".cp-built-with": "the 'built with' line",
    ".cp-provenance": "the provenance badge",
    ".cp-provenance-warnings": "the badge's visible warnings",
    ".cp-takeaways": "the results box",
    ".cp-caption": "a figure caption",
    "caption": "a table caption",
    ".cp-mixed-build": "the mixed-build warning",
    ".cp-cite": "the cite block (page footer)",
    ".cp-repository": "the repository link (page footer)",
    ".admonition.note": "a note box",
    ".admonition.tip": "a tip box",
    ".admonition.warning": "a warning box",
    ".admonition.important": "an important box",
}
#: The kinds the test book must carry (all but the mixed-build warning, which a build that succeeds never shows).
REQUIRED_KINDS = tuple(k for k in KINDS if k != ".cp-mixed-build")

CONTRAST = r"""(() => {
  const KINDS = %s;
  const art = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const parse = c => { const m = c.match(/rgba?\(([^)]+)\)/); if (!m) return [0, 0, 0, 0];
                       const v = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number);
                       return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
  const over = (top, under) => { const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + under[i] * (1 - a)).concat([1]); };
  const background = el => {  // the colour behind el: its and its ancestors' backgrounds, composited
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let bg = [255, 255, 255, 1];
    for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
    return bg;
  };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
                     return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const name = el => el.tagName.toLowerCase() +
    (typeof el.className === 'string' && el.className.trim() ? '.' + el.className.trim().split(/\s+/).join('.') : '');
  const kinds = Object.keys(KINDS);
  const sel = kinds.join(', ') + ', .admonition, figcaption, td, th, p, li';
  const roots = [...art.querySelectorAll(sel), ...document.querySelectorAll('.cp-cite')];
  const seen = new Set(), low = [], found = {}, worst = {}; let n = 0;
  for (const box of roots) {
    for (const el of [box, ...box.querySelectorAll('*')]) {
      if (seen.has(el)) continue;
      seen.add(el);
      const own = [...el.childNodes].some(t => t.nodeType === 3 && t.textContent.trim());
      const r = el.getBoundingClientRect();
      if (!own || !r.width || !r.height || getComputedStyle(el).visibility === 'hidden') continue;
      const bg = background(el), fg = over(parse(getComputedStyle(el).color), bg);
      const k = ratio(fg, bg); n++;
      const mine = kinds.filter(s => el.closest(s));
      for (const s of mine) { found[s] = (found[s] || 0) + 1; worst[s] = Math.min(worst[s] || 99, k); }
      if (k < 4.5)
        low.push(`${k.toFixed(2)}:1 in ${mine.join(' ') || 'text'}: ${name(el)} "${el.textContent.trim().slice(0, 50)}"`);
    }
  }
  return {checked: n, low: low.slice(0, 8), n_low: low.length, found, worst,
          theme: document.documentElement.dataset.theme || ''};
})()""".replace("%s", json.dumps(KINDS))


def inspect_page(browser: Browser, url: str, shot: Path | None = None, theme: str = "light", width: int = 1280) -> dict:
    """The page's :data:`INSPECT` and :data:`CONTRAST` results at ``width`` px in ``theme``: the OS
    preference (``prefers-color-scheme``) is emulated, which the book's theme follows by default."""
    cdp = browser.page()
    try:
        cdp.call("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": theme}])
        cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=2200, deviceScaleFactor=1,
                 mobile=width < 600)
        navigate(cdp, url)
        typeset = cdp.evaluate(WAIT_MATHJAX)
        info = cdp.evaluate(f"const MIN_SCALE = {min_scale(width)};" + INSPECT)
        info["mathjax"] = typeset
        info["contrast"] = cdp.evaluate(CONTRAST)
        if shot is not None:
            cdp.screenshot(shot)
        info["requests"] = cdp.requests()
        info["errors"] = cdp.errors()
        return info
    finally:
        cdp.close()


def problems(page: str, info: dict) -> list[str]:
    out = []
    if info["page_overflow"] > 1:
        out.append(f"the page scrolls sideways by {info['page_overflow']} px")
    if info["over"]:
        out.append(f"elements stick out of the text column: {info['over']}")
    if info.get("loose"):
        out.append(f"wide tables whose row labels scroll away (no sticky first column): {info['loose']}")
    if info["cut"]:
        out.append(f"captions cut off: {info['cut']}")
    if info.get("mathjax") is False:
        out.append("MathJax did not finish typesetting within 15 s")
    if info["math_errors"]:
        out.append(f"MathJax errors: {info['math_errors']}")
    if info["raw_tex"]:
        out.append(f"raw TeX left: {info['raw_tex']}")
    if info["errors"]:
        out.append(f"console errors: {info['errors'][:5]}")
    if info["broken"]:
        out.append(f"images that did not load: {info['broken']}")
    if off_machine(info["requests"]):
        out.append(f"requests off this machine: {off_machine(info['requests'])[:5]}")
    if not info["requests"]:
        out.append("the devtools log recorded no request at all")
    if info["shrunk"]:
        out.append(f"figures scaled below {info['min_scale']:.0%} of their size (text under 8 px): {info['shrunk']}")
    if info["figs"] > info["imgs"]:
        out.append(f"{info['figs']} figure captions but {info['imgs']} images")
    c = info.get("contrast")
    if c is not None:
        if c["low"]:
            out.append(f"{c['n_low']} text element(s) below 4.5:1 contrast ({c['theme']} theme): {c['low']}")
        if not c["checked"]:
            out.append("no box or caption text found to check for contrast")
    return out


#: Every page is read in both themes, on a desktop and a phone.
VIEWS = (("light", 1280), ("dark", 1280), ("light", 390), ("dark", 390))


@pytest.mark.slow
def test_every_page_renders_offline_legibly(built_book, server, browser, tmp_path_factory):
    # screenshots of every page and view only where asked for (CROSSPROFILE_SCREENSHOTS=DIR: to look at them);
    # the checks read the live page, not the pictures
    keep = os.environ.get("CROSSPROFILE_SCREENSHOTS")
    shots = Path(keep or tmp_path_factory.mktemp("screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    found = pages(built_book, redirects=False)
    assert "book/intro.html" in found and len(found) >= 5, found
    bad, maths, kinds, worst = {}, 0, {}, {}
    for page in found:
        for theme, width in VIEWS:
            info = inspect_page(browser, f"{server}/{page}",
                                shots / f"{Path(page).stem}-{theme}-{width}.png" if keep else None, theme, width)
            if info["contrast"]["theme"] != theme:
                bad.setdefault(page, []).append(f"asked for the {theme} theme, the page shows "
                                                f"{info['contrast']['theme'] or 'none'}")
            maths += info["math"]
            for k, v in info["contrast"]["found"].items():
                kinds.setdefault(k, set()).add(page)
                w = worst.setdefault(f"{theme} {width}", {})
                w[k] = round(min(w.get(k, 99), info["contrast"]["worst"][k]), 2)
            p = problems(page, info)
            if p:
                bad.setdefault(page, []).extend(f"[{theme}, {width} px] {x}" for x in p)
    # the lowest contrast of each kind, per view (read by the report of issue 35)
    (shots / "contrast.json").write_text(json.dumps({"worst": worst, "pages": {k: sorted(v) for k, v in kinds.items()}},
                                                    indent=1, sort_keys=True))
    assert not bad, "pages with problems:\n" + "\n".join(f"{k}: {'; '.join(v)}" for k, v in bad.items())
    assert maths > 0, "no typeset maths on any page"
    absent = [f"{k} ({KINDS[k]})" for k in REQUIRED_KINDS if k not in kinds]
    assert not absent, f"the book read carries no {', '.join(absent)}: their contrast went unmeasured"


@pytest.mark.slow
def test_cite_block_and_repository_link_on_every_page(built_book):
    """Every page (search and index too) shows the cite block rendered from CITATION.cff, and the
    repository link: the quick book is built with REPOSITORY_URL (tests/conftest.py)."""
    import yaml
    from conftest import QUICK_BOOK_REPOSITORY
    title = html.escape(yaml.safe_load((ROOT / "CITATION.cff").read_text())["title"])
    shown = pages(built_book, redirects=False)
    bad = [p for p in shown if title not in (t := (built_book / p).read_text()) or "Cite this book" not in t
           or f'class="cp-repository-link" href="{QUICK_BOOK_REPOSITORY}"' not in t
           or f'<meta name="crossprofile-repository" content="{QUICK_BOOK_REPOSITORY}"' not in t]
    assert len(shown) >= 5 and not bad, f"pages without the cite block or the repository link: {bad}"
    assert "search.html" in shown and "genindex.html" in shown


# --------------------------------------------------------------------------- links, without the browser
class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("id", "name"):
            if a.get(k):
                self.ids.add(a[k])
        for k in ("href", "src"):
            if a.get(k) and tag in ("a", "img", "link", "script", "source", "iframe"):
                self.links.append(a[k])
        m = REFRESH.search(self.get_starttag_text() or "") if tag == "meta" else None
        if m:
            self.links.append(m.group(1).strip())


def dead_links(html_dir: Path) -> list[str]:
    parsed = {}

    def parse(p: Path) -> _Links:
        if p not in parsed:
            h = _Links()
            h.feed(p.read_text(errors="replace"))
            parsed[p] = h
        return parsed[p]

    dead = []
    for page in pages(html_dir):
        src = html_dir / page
        for link in parse(src).links:
            u = urllib.parse.urlsplit(link)
            if u.scheme in ("http", "https", "mailto", "data", "javascript") or link.startswith("//"):
                continue
            target = (src.parent / urllib.parse.unquote(u.path)).resolve() if u.path else src
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                dead.append(f"{page}: {link} (no file)")
            elif u.fragment and target.suffix == ".html" and u.fragment not in parse(target).ids:
                dead.append(f"{page}: {link} (no element #{u.fragment})")
    return dead


@pytest.mark.slow
def test_no_dead_internal_link(built_book):
    dead = dead_links(built_book)
    assert not dead, f"{len(dead)} dead link(s):\n" + "\n".join(dead[:30])


def test_dead_link_check_catches_missing_files_and_anchors(tmp_path):
    (tmp_path / "a.html").write_text('<p id="x"></p><a href="b.html#y">b</a><a href="c.html">c</a>'
                                     '<a href="#x">self</a><a href="https://example.org/">out</a>')
    (tmp_path / "b.html").write_text('<p id="z"></p>')
    assert sorted(dead_links(tmp_path)) == ["a.html: b.html#y (no element #y)", "a.html: c.html (no file)"]
