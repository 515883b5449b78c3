#!/usr/bin/env python3
"""The self-contained site folder (``make site``), and the link check the Pages workflow runs.

    python scripts/make_site.py _build/html _site     # copy the built book into _site/, add .nojekyll, check
    python scripts/make_site.py --check _site          # check a site folder only
    python scripts/make_site.py --finished [BOOK_ARGS]  # the finished build of these parameters, if any

``make site`` builds the book only when no finished build of the current parameters exists
(:func:`finished`; with no BOOK_ARGS, a finished build in a folder of its own under ``_build/``, such as the
README's quick build, is published instead of starting a full default build: :func:`other_finished`): the Make
variables (BACKEND, SEEDS, ..., REPOSITORY_URL) and ``BOOK_ARGS`` (e.g.
``--quick --out _build/quick``) are read as ``crossprofile book`` reads them. A build is *finished* when

* its last step ran: ``_build/book_timing.json`` (written only after every step of ``crossprofile book``
  passed, the HTML and its offline check included) records an HTML build, and is newer than every
  executed chapter of the table of contents (a build that failed after executing chapters leaves them
  newer than the stamp);
* every executed chapter records the current parameters' build id (``crossprofile_build``, the stamp the
  build writes into each notebook, :func:`crossprofile_lib.book.build.mixed_pages`);
* its pages record the current REPOSITORY_URL (``<meta name="crossprofile-repository">``, written by
  :mod:`crossprofile_lib.book.sphinx_cite`; the launch buttons and the repository link depend on it);
* no source of the book (``notebooks/``, ``book/``, ``_config.yml``, ``_toc.yml``, ``CITATION.cff``,
  ``references.bib``, the library's ``.py`` files) changed since the build started (the stamp's time less
  its ``total_s``).

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
import json
import os
import re
import shutil
import sys
import urllib.parse
from pathlib import Path

MARKER = ".crossprofile-site"
#: Sphinx's build records in ``_build/html``: not part of the site, never copied.
BUILD_RECORDS = (".buildinfo", ".doctrees")
SKIP_DIRS = ("_sources", "_static", "_images", "_panels_static")  # theme templates, not pages
REFRESH = re.compile(r"""<meta[^>]+http-equiv=["']?refresh["']?[^>]*url=([^"'>]+)""", re.IGNORECASE)
REMOTE = re.compile(r"^(?:https?:)?//", re.IGNORECASE)
#: <link rel=...> values that do not make the browser fetch anything
LINK_NO_FETCH = {"canonical", "alternate", "author", "license", "help", "search", "next", "prev", "index", "me",
                 "bookmark", "external"}
REPOSITORY_META = re.compile(r"""<meta\s+name=["']crossprofile-repository["']\s+content=["']([^"']*)["']""")
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
    site = site.resolve()  # a relative folder (the default _site) too: a same-page #anchor targets the page itself
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
            if not target.exists() or site not in target.parents:
                problems.append(f"{page}: {link} (no such file in the site)")
            elif u.fragment and target.suffix == ".html" and u.fragment not in parse(target).ids:
                problems.append(f"{page}: {link} (no element #{u.fragment} on {target.relative_to(site)})")
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
    shutil.copytree(html_dir, site, ignore=shutil.ignore_patterns(*BUILD_RECORDS))
    (site / ".nojekyll").write_text("")
    (site / MARKER).write_text(f"copied from {html_dir}\n")


#: What a book is built from, besides the executed chapters: newer than a build's stamp, the build is stale.
SOURCES = ("notebooks/*.md", "book/*.md", "book/_static/*.css", "book/_static/cp-explorer/*", "_config.yml", "_toc.yml",
           "CITATION.cff", "references.bib", "crossprofile_lib/**/*.py")


class NotFinished(Exception):
    """Why there is no finished build of the current parameters (``make site`` builds then)."""


def finished(book_args: list[str], env: dict | None = None, root: Path | None = None) -> Path:
    """The ``_build/html`` folder of the finished build of the parameters that ``crossprofile book
    BOOK_ARGS`` would build now (the Make variables in ``env``); :class:`NotFinished` naming why there is
    none; ``BookConfigError`` / ``LaunchConfigError`` for a bad variable (as ``crossprofile book`` says)."""
    import nbformat

    from crossprofile_lib.book.build import STAMP_KEY, build_id, check_url, toc_pages
    from crossprofile_lib.cli import book as cli
    from crossprofile_lib.paths import book_root

    env = os.environ if env is None else env
    ap = argparse.ArgumentParser(prog="make_site.py --finished")
    cli.add_arguments(ap)
    args = ap.parse_args(book_args)
    root = (root or book_root()).resolve()
    params = cli.book_params(args.quick, env)
    target = Path(args.out).resolve() if args.out else root
    if target != root:
        params = params.replace(runs_root=str(target / "runs"))
    want = build_id(json.loads(json.dumps(params.model_dump(), default=str)))
    html_dir = target / "_build" / "html"
    stamp = target / "_build" / "book_timing.json"
    if args.no_html:
        raise NotFinished("BOOK_ARGS has --no-html: a site needs the HTML")
    if not (html_dir / "index.html").is_file() or not stamp.is_file():
        raise NotFinished(f"no finished build in {target} (no {stamp.relative_to(target)} or no HTML)")
    try:
        timing = json.loads(stamp.read_text())
    except ValueError:
        raise NotFinished(f"{stamp} is not valid JSON") from None
    if not timing.get("html_s"):
        raise NotFinished(f"the last build in {target} built no HTML ({stamp.name}: html_s = 0)")
    t_stamp = stamp.stat().st_mtime
    for page in toc_pages(target):
        nb = target / (page + ".ipynb")
        if not nb.exists():
            continue  # a text page (.md)
        if nb.stat().st_mtime > t_stamp:
            raise NotFinished(f"{page}.ipynb was executed after the last finished build (a build that did not finish)")
        rec = nbformat.read(nb, as_version=4).metadata.get(STAMP_KEY) or {}
        if rec.get("id") != want:
            got = rec.get("params") if isinstance(rec.get("params"), dict) else {}
            now = json.loads(json.dumps(params.model_dump(), default=str))
            diff = sorted(k for k in set(got) | set(now) if got.get(k) != now.get(k)) or ["(no build record)"]
            raise NotFinished(f"{page}.ipynb was built with other parameters ({', '.join(diff[:6])})")
    url = (env.get("REPOSITORY_URL") or "").strip()
    url = check_url(url).rstrip("/") if url else ""
    m = REPOSITORY_META.search((html_dir / "index.html").read_text(errors="replace"))
    pages_of = pages(html_dir)
    m = m or next((x for x in (REPOSITORY_META.search(p.read_text(errors="replace")) for p in pages_of) if x), None)
    built_url = m.group(1) if m else None
    if built_url != url:
        raise NotFinished(f"the pages were built with REPOSITORY_URL={built_url!r}, now it is {url!r}"
                          if built_url is not None else "the pages record no REPOSITORY_URL (built by an older version)")
    started = t_stamp - float(timing.get("total_s") or 0.0)  # a source edited while it ran may be half in it
    for pattern in SOURCES:
        for f in root.glob(pattern):
            if f.is_file() and f.stat().st_mtime > started:
                raise NotFinished(f"{f.relative_to(root)} changed after the last finished build started")
    return html_dir


def other_finished(root: Path | None = None) -> tuple[Path, list[str]] | None:
    """With no BOOK_ARGS: the newest finished build in a folder of its own under ``_build/`` (a quick build made as
    the README says, ``--quick --out _build/quick``, or a default build given ``--out``) and the BOOK_ARGS that name
    it; None when there is none. Plain ``make site`` after a quick build publishes that build instead of starting a
    full default one (issue 52)."""
    from crossprofile_lib.paths import book_root
    root = (root or book_root()).resolve()
    found = []
    for stamp in sorted((root / "_build").glob("*/_build/book_timing.json")):
        out = stamp.parent.parent
        rel = os.path.relpath(out, root)
        for args in (["--quick", "--out", rel], ["--out", rel]):
            try:
                found.append((stamp.stat().st_mtime, finished(args, root=root), args))
                break
            except NotFinished:
                continue
            except Exception:  # noqa: BLE001 - a folder this script cannot read is no candidate
                break
    return (max(found)[1], max(found)[2]) if found else None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--finished"]:
        from crossprofile_lib.book.build import BookConfigError, LaunchConfigError
        try:
            print(finished(argv[1:]))
            return 0
        except NotFinished as e:
            other = other_finished() if not argv[1:] else None
            if other is not None:
                html_dir, args = other
                print(f"make site: no finished default build ({e}); reusing the finished build {html_dir} "
                      f"(BOOK_ARGS=\"{' '.join(args)}\"); for the default book run make book first", file=sys.stderr)
                print(html_dir)
                return 0
            print(f"make site: building the book: {e}", file=sys.stderr)
            return 1
        except (BookConfigError, LaunchConfigError) as e:
            print(f"make site: {e}. Nothing was run.", file=sys.stderr)
            return 2
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
