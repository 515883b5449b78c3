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


# --------------------------------------------------------------------------- issue 52: the first screen, the marks
#: The first screen a reader sees, desktop and phone (width, height in CSS px).
FIRST_SCREENS = ((1280, 800), (390, 844))

FIRST_SCREEN = r"""(() => {
  const box = document.querySelector('.cp-first-finding');
  if (!box) return {found: false};
  const r = box.getBoundingClientRect();
  return {found: true, top: r.top + window.scrollY, bottom: r.bottom + window.scrollY, height: window.innerHeight,
          text: box.innerText,
          marks: [...box.querySelectorAll('a.cp-mark')].map(m => [m.className, m.textContent, m.getAttribute('href')])};
})()"""


def first_screen(browser: Browser, url: str, width: int, height: int) -> dict:
    cdp = browser.page()
    try:
        cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                 mobile=width < 600)
        navigate(cdp, url)
        cdp.evaluate(WAIT_MATHJAX)
        return cdp.evaluate(FIRST_SCREEN)
    finally:
        cdp.close()


#: A paper value (two decimals: the composition, or a percentage) and a number of this build.
_PAPER = re.compile(r"The paper:.*?(\d+\.\d\d) / (\d+\.\d\d) / (\d+\.\d\d).*?\(paper, ", re.S)
_BUILD = re.compile(r"This build:\s*(\d+\.\d\d) / (\d+\.\d\d) / (\d+\.\d\d)\s*exact", re.S)


def first_screen_problems(info: dict, width: int, height: int) -> list[str]:
    """What breaks the rule: the landing page's first screen holds ONE finding of the paper, with the paper's value
    and this build's beside it, the build's number marked."""
    if not info.get("found"):
        return [f"[{width} px] no first-finding box on the landing page"]
    out = []
    if info["bottom"] > height + 1:
        out.append(f"[{width} px] the finding ends at {info['bottom']:.0f} px, below the first screen ({height} px)")
    if not _PAPER.search(info["text"]):
        out.append(f"[{width} px] no paper value labelled 'paper' in the box: {info['text'][:200]!r}")
    if not _BUILD.search(info["text"]):
        out.append(f"[{width} px] no number of this build marked 'exact' beside it: {info['text'][:300]!r}")
    kinds = {c.split()[-1] for c, _, _ in info["marks"]}
    if "cp-mark-exact" not in kinds:
        out.append(f"[{width} px] the build's number carries no exact mark: {info['marks']}")
    return out


def test_the_first_screen_rule_catches_a_box_below_the_fold_and_a_missing_paper_value():
    """The rule's near misses, by hand: a box ending below the fold, one without the paper's value, one whose number
    is unmarked, and none at all each fail; the right one passes."""
    text = ("A finding of the paper, and this build\nThe paper: ... keeps 4.98 / 0.01 / 4.00 support / decoy / "
            "irrelevant facts per memory (paper, Qwen2.5-7B-Instruct).\nThis build: 5.00 / 0.00 / 4.00 exact over ...")
    good = dict(found=True, top=300, bottom=700, height=844, text=text,
                marks=[["cp-mark cp-mark-exact", "exact", "glossary.html#term-exact"]])
    assert first_screen_problems(good, 390, 844) == []
    assert first_screen_problems(dict(good, bottom=900), 390, 844)
    assert first_screen_problems(dict(good, text=text.replace("(paper, ", "(")), 390, 844)
    assert first_screen_problems(dict(good, text=text.replace("4.00 exact", "4.00"), marks=[]), 390, 844)
    assert first_screen_problems(dict(found=False), 390, 844)


@pytest.mark.slow
def test_the_landing_pages_first_screen_holds_a_finding_of_the_paper_beside_this_build(built_book, server, browser):
    bad = []
    for width, height in FIRST_SCREENS:
        bad += first_screen_problems(first_screen(browser, f"{server}/book/intro.html", width, height), width, height)
    assert not bad, "\n".join(bad)


#: The three marks and their glossary terms (crossprofile_lib/book/display.py MARKS).
MARK_TERMS = {"cp-mark-exact": "term-exact", "cp-mark-reference": "term-reference-decider-mark",
              "cp-mark-model": "term-language-model-mark"}
#: Table cells of this build beside a paper value: chapters 11 and 14's "this run" columns, marked as text.
_CELL_MARK = re.compile(r"\u2039(exact|ref\. decider|LM: [^\u203a]+)\u203a(\s*\u2020)?\s*$")  # † : greyed

MARKS_JS = r"""(() => {
  const art = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const marks = [...art.querySelectorAll('a.cp-mark')].map(m => [m.className, m.textContent, m.getAttribute('href')]);
  // the columns of this build's numbers beside a paper value: "this run" (chapters 11 and 14) and chapter 11's
  // reference-decider columns (headed by the run, "... (ledger), not a model")
  const cells = [], marked = [];
  for (const t of art.querySelectorAll('table')) {
    const heads = [...t.querySelectorAll('thead tr:last-child th')].map(h => h.innerText.trim());
    const cols = heads.map((h, i) => /^this run$|\(ledger[^)]*\), not a model$/.test(h) ? i : -1).filter(i => i >= 0);
    for (const row of t.querySelectorAll('tbody tr')) {
      for (const i of cols) { const c = row.children[i]; if (c) cells.push(c.innerText.trim()); }
      for (const c of row.children) if (c.innerText.includes('\u2039')) marked.push(c.innerText.trim());
    }
  }
  const terms = [...document.querySelectorAll('dt[id^="term-"]')].map(d => d.id);
  return {marks, cells, marked, terms};
})()"""

#: Pages whose takeaways set this build's numbers beside the paper's, so carry marks at them.
MARKED_PAGES = ("intro", "04-rarest-first", "05-relevance", "06-social-proof", "07-net-evidence",
                "11-paper-vs-suite", "13-what-social-proof-explains", "14-models")


def mark_problems(page: str, info: dict) -> list[str]:
    """Every mark links to its glossary term and names what it is; every 'this run' cell beside the paper ends with
    a mark (or says why it has no number); a marked page has marks."""
    out = []
    for cls, text, href in info["marks"]:
        kind = next((k for k in MARK_TERMS if k in cls.split()), None)
        if kind is None or not (href or "").endswith("#" + MARK_TERMS[kind]):
            out.append(f"{page}: a mark {cls!r} {text!r} links to {href!r}, not its glossary term")
        if kind == "cp-mark-model" and not text.startswith("LM: "):
            out.append(f"{page}: a language-model mark does not name its model: {text!r}")
    for cell in info["cells"]:
        if cell and cell not in ("–", "") and not cell.startswith(("not in this run", "no comparable")) \
                and not _CELL_MARK.search(cell):
            out.append(f"{page}: a 'this run' cell beside the paper carries no mark: {cell!r}")
    if page in MARKED_PAGES and not info["marks"] and not info.get("marked"):
        out.append(f"{page}: no marked number at all")
    return out


def test_the_mark_rule_catches_an_unmarked_cell_and_a_wrong_link():
    ok = dict(marks=[["cp-mark cp-mark-exact", "exact", "glossary.html#term-exact"],
                     ["cp-mark cp-mark-model", "LM: SmolLM2-135M, near chance", "glossary.html#term-language-model-mark"]],
              cells=["-10.1 [-13.0, -7.2] \u2039ref. decider\u203a", "not in this run",
                     "-10.0 [-50.0, 40.0] \u2039LM: fixture, near chance\u203a \u2020"], terms=[])
    assert mark_problems("14-models", ok) == []
    assert mark_problems("14-models", dict(ok, cells=["-10.1 [-13.0, -7.2]"]))
    assert mark_problems("14-models", dict(ok, marks=[["cp-mark cp-mark-exact", "exact", "glossary.html#term-lm"]]))
    assert mark_problems("14-models", dict(ok, marks=[["cp-mark cp-mark-model", "model",
                                                       "glossary.html#term-language-model-mark"]]))
    assert mark_problems("intro", dict(marks=[], cells=[], marked=[], terms=[]))
    assert mark_problems("13-what-social-proof-explains", dict(marks=[], cells=[], marked=["5.00 \u2039exact\u203a"],
                                                               terms=[])) == []


@pytest.mark.slow
def test_every_number_beside_the_paper_carries_one_of_three_marks_explained_once(built_book, server, browser):
    """The three marks (exact, ref. decider, LM with its model) at the numbers, each linked to its glossary entry,
    which the glossary defines exactly once; the quick book's imported near-chance run is marked near chance."""
    bad, seen_near_chance = [], False
    for name in MARKED_PAGES + ("glossary",):
        cdp = browser.page()
        try:
            navigate(cdp, f"{server}/book/{name}.html")
            info = cdp.evaluate(MARKS_JS)
        finally:
            cdp.close()
        if name == "glossary":
            for term in MARK_TERMS.values():
                n = info["terms"].count(term)
                if n != 1:
                    bad.append(f"glossary: the term {term} is defined {n} times (once)")
            continue
        bad += mark_problems(name, info)
        seen_near_chance |= any("near chance" in c for c in info["cells"]) or any(
            "near chance" in t for _, t, _ in info["marks"])
    assert not bad, "\n".join(bad)
    assert seen_near_chance, "no language-model mark says 'near chance' for the quick book's near-chance run"


FIRST_BOX = r"""(() => {
  const art = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  // the results box; a page that has none in this build (chapter 16 without POLICY_FILES) opens with its note
  const e = art.querySelector('.cp-first-finding, .cp-takeaways') || art.querySelector('.admonition');
  if (!e) return null;
  return e.getBoundingClientRect().top + window.scrollY;
})()"""


@pytest.mark.slow
def test_every_chapters_first_results_box_starts_on_the_first_phone_screen(built_book, server, browser):
    """Issue 52 item 4: a reader on a phone (390 x 844) meets what this build found before scrolling: every chapter's
    first results box (the landing page's first finding, else the takeaways) starts within the first screen, with
    at least 120 px of it in view (chapters 10 and 14 have no such box: tests/test_book_first_box.py EXEMPT)."""
    from test_book_first_box import EXEMPT
    width, height = FIRST_SCREENS[1]
    late = []
    for page in pages(built_book, redirects=False):
        stem = Path(page).stem
        if not page.startswith("book/") or not (stem == "intro" or stem[:2].isdigit()) or stem in EXEMPT:
            continue
        cdp = browser.page()
        try:
            cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=True)
            navigate(cdp, f"{server}/{page}")
            top = cdp.evaluate(FIRST_BOX)
        finally:
            cdp.close()
        if top is None or top > height - 120:
            late.append(f"{stem}: first results box at {top if top is None else round(top)} px")
    assert not late, "first results boxes below the first phone screen:\n" + "\n".join(late)
