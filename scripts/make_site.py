#!/usr/bin/env python3
"""The self-contained site folder (``make site``), and the link check the Pages workflow runs.

    python scripts/make_site.py _build/html _site     # copy the built book into _site/, add .nojekyll, check
    python scripts/make_site.py --check _site          # check a site folder only

The site folder is the built HTML as GitHub Pages (or any static server) serves it: a copy of
``_build/html`` with ``.nojekyll`` (so Pages serves ``_static/`` and ``_images/`` as they are) and a marker
file, ``.crossprofile-site``; an existing folder without that marker is never replaced (exit 2).

The check (exit 1 naming every problem, page by page):

* **dead links**: every internal ``href``/``src`` of every page resolves to a file of the site, and every
  ``#fragment`` to an element id on the target page (links to other sites are not followed: offline);
* **off-machine requests**: no page loads anything from another machine: no ``src`` (script, image,
  iframe, source) and no ``<link>`` other than a plain hyperlink-like ``rel`` (``canonical``, ``alternate``,
  ...) with an ``http(s)://`` or ``//`` URL, and no stylesheet that imports or ``url()``-loads one.
"""

from __future__ import annotations

import argparse
import html.parser
import re
import shutil
import sys
import urllib.parse
from pathlib import Path

MARKER = ".crossprofile-site"
SKIP_DIRS = ("_sources", "_static", "_images", "_panels_static")  # theme templates, not pages
REFRESH = re.compile(r"""<meta[^>]+http-equiv=["']?refresh["']?[^>]*url=([^"'>]+)""", re.IGNORECASE)
REMOTE = re.compile(r"^(?:https?:)?//", re.IGNORECASE)
#: <link rel=...> values that do not make the browser fetch anything
LINK_NO_FETCH = {"canonical", "alternate", "author", "license", "help", "search", "next", "prev", "index", "me",
                 "bookmark", "external"}
CSS_REMOTE = re.compile(r"""(?:@import\s+(?:url\()?|url\()\s*["']?((?:https?:)?//[^"')\s]+)""", re.IGNORECASE)


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []      # internal or external hrefs/srcs to check
        self.loads: list[str] = []      # URLs the browser fetches on opening the page

    def handle_starttag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        for k in ("id", "name"):
            if a.get(k):
                self.ids.add(a[k])
        if tag in ("a", "link") and a.get("href"):
            self.links.append(a["href"])
        if tag in ("img", "script", "source", "iframe", "embed", "audio", "video") and a.get("src"):
            self.links.append(a["src"])
            self.loads.append(a["src"])
        if tag == "link" and a.get("href"):
            rels = set(a.get("rel", "").lower().split())
            if not rels or rels - LINK_NO_FETCH:
                self.loads.append(a["href"])
        if tag == "meta":
            m = REFRESH.search(self.get_starttag_text() or "")
            if m:
                self.links.append(m.group(1).strip())


def pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if not any(d in p.relative_to(site).parts for d in SKIP_DIRS))


def check(site: Path) -> list[str]:
    """Every dead internal link and off-machine load of the site folder (empty: none)."""
    parsed: dict[Path, _Page] = {}

    def parse(p: Path) -> _Page:
        if p not in parsed:
            h = _Page()
            h.feed(p.read_text(errors="replace"))
            parsed[p] = h
        return parsed[p]

    problems = []
    for src in pages(site):
        page = src.relative_to(site).as_posix()
        h = parse(src)
        for url in h.loads:
            if REMOTE.match(url.strip()):
                problems.append(f"{page}: loads {url} from another machine")
        for link in h.links:
            u = urllib.parse.urlsplit(link.strip())
            if u.scheme or link.startswith("//"):
                continue  # another site (not followed offline), mailto:, data:, javascript:
            target = (src.parent / urllib.parse.unquote(u.path)).resolve() if u.path else src
            if target.is_dir():
                target = target / "index.html"
            if not target.exists() or site.resolve() not in target.parents:
                problems.append(f"{page}: {link} (no such file in the site)")
            elif u.fragment and target.suffix == ".html" and u.fragment not in parse(target).ids:
                problems.append(f"{page}: {link} (no element #{u.fragment} on {target.relative_to(site.resolve())})")
    for css in sorted(site.rglob("*.css")):
        for m in CSS_REMOTE.finditer(css.read_text(errors="replace")):
            problems.append(f"{css.relative_to(site).as_posix()}: loads {m.group(1)} from another machine")
    return problems


def make_site(html_dir: Path, site: Path) -> None:
    """Copy ``html_dir`` to ``site`` (replacing an earlier site folder only) and add ``.nojekyll``."""
    if not (html_dir / "index.html").is_file():
        raise SystemExit(f"make site: {html_dir}/index.html does not exist: build the book first (make book)")
    if site.exists():
        if not (site / MARKER).is_file():
            print(f"make site: {site} exists and is not a site folder made by this command (no {MARKER}); "
                  f"remove it or choose another folder. Nothing was changed.", file=sys.stderr)
            raise SystemExit(2)
        shutil.rmtree(site)
    shutil.copytree(html_dir, site, ignore=shutil.ignore_patterns(".buildinfo", ".doctrees"))
    (site / ".nojekyll").write_text("")
    (site / MARKER).write_text(f"copied from {html_dir}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="make_site.py", description=__doc__.splitlines()[0])
    ap.add_argument("html", nargs="?", default="_build/html", help="the built book (default _build/html)")
    ap.add_argument("site", nargs="?", default="_site", help="the site folder (default _site)")
    ap.add_argument("--check", metavar="DIR", help="only check the site folder DIR")
    args = ap.parse_args(argv)
    site = Path(args.check or args.site)
    if not args.check:
        make_site(Path(args.html), site)
    if not (site / "index.html").is_file():
        print(f"check: {site}/index.html does not exist", file=sys.stderr)
        return 1
    problems = check(site)
    n = len(pages(site))
    if problems:
        print(f"{site}: {len(problems)} problem(s) in {n} pages:\n  " + "\n  ".join(problems[:200]), file=sys.stderr)
        return 1
    print(f"{site}: {n} pages, no dead internal link, nothing loaded from another machine")
    return 0


if __name__ == "__main__":
    sys.exit(main())
