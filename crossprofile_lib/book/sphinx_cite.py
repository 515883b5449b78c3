"""A Sphinx extension (``_config.yml``): the "cite this book" block and the repository link on every page.

The cite block is rendered from ``CITATION.cff`` (:func:`cite_html`) into the theme's footer. The repository link shows
only when ``REPOSITORY_URL`` is given at build time; every page records it in ``<meta name="crossprofile-repository">``
(empty: none), which ``make site`` compares before reusing a build."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Optional

import yaml

from crossprofile_lib.paths import checkout_root

CITATION = "CITATION.cff"


def citation_file(srcdir: Path) -> Path:
    """``CITATION.cff`` of the book being built (its folder, else the checkout it was staged from)."""
    for d in (Path(srcdir), checkout_root()):
        if d is not None and (d / CITATION).is_file():
            return d / CITATION
    raise FileNotFoundError(f"{CITATION}: not found in {srcdir} or the checkout (the book's cite block is rendered "
                            "from it; rule: keep CITATION.cff at the top of the repository)")


def _names(people) -> str:
    names = (p.get("name") or " ".join(x for x in (p.get("given-names"), p.get("family-names")) if x)
             for p in people or () if isinstance(p, dict))
    return ", ".join(x for x in names if x)


def _year(doc: dict) -> Optional[str]:
    d = doc.get("date-released")
    return str(d)[:4] if d else None


def bibtex(doc: dict, url: str = "") -> str:
    """The BibTeX entry of ``CITATION.cff``'s ``doc`` (fields the file does not record are left out)."""
    fields = [("title", doc.get("title")), ("author", " and ".join(
        "{" + x.strip() + "}" for x in _names(doc.get("authors")).split(", ") if x.strip())),
        ("version", doc.get("version")), ("year", _year(doc)), ("license", doc.get("license")), ("url", url or None)]
    body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields if v)
    return f"@software{{crossprofile,\n{body}\n}}"


def cite_html(cff: Path, url: str = "") -> str:
    """The cite block (HTML) from the file ``cff``; with ``url`` the repository link too."""
    try:
        doc = yaml.safe_load(Path(cff).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"{cff}: cannot be read as YAML ({e})") from None
    if not isinstance(doc, dict) or not doc.get("title"):
        raise ValueError(f"{cff}: no title (a CITATION.cff names at least its title and authors)")
    e = html.escape
    year = _year(doc)
    ref = " ".join(x for x in (
        f"{e(_names(doc.get('authors')))}{f' ({e(year)})' if year else ''}.",
        f"<i>{e(str(doc['title']))}</i>.",
        f"Version {e(str(doc['version']))}." if doc.get("version") else "",
        f"Licence {e(str(doc['license']))}." if doc.get("license") else "",
        f'<a href="{e(url)}">{e(url)}</a>' if url else "") if x)
    papers = [r for r in doc.get("references") or () if isinstance(r, dict) and r.get("title")]
    paper = "".join(f"<p>It reproduces and extends: <i>{e(str(r['title']))}</i>"
                    f"{' (' + e(_names(r.get('authors'))) + ')' if _names(r.get('authors')) else ''}.</p>"
                    for r in papers)
    repo = (f'<p class="cp-repository">Source code and issues: <a class="cp-repository-link" href="{e(url)}">'
            f"{e(url)}</a></p>") if url else (
        '<p class="cp-cite-source">Source code: this build names no repository (it was built without '
        "<code>REPOSITORY_URL</code>, so it links none rather than guess one); a published build "
        "(<code>make site</code> on GitHub Pages) links it here.</p>")
    return (f'<div class="cp-cite"><p class="cp-cite-title"><b>Cite this book</b> '
            f'<small>(from {CITATION})</small></p>'
            f"<p>{e(' '.join(str(doc.get('message') or '').split()))}</p><p class=\"cp-cite-ref\">{ref}</p>{paper}"
            f"<details><summary>BibTeX</summary><pre>{e(bibtex(doc, url))}</pre></details>{repo}</div>")


def repository_url(app) -> str:
    """The book's repository (``repository.url`` of its configuration; empty: none)."""
    return str((app.config.html_theme_options or {}).get("repository_url") or "").strip().rstrip("/")


def add_cite_block(app, config) -> None:
    opts = dict(config.html_theme_options or {})
    block = cite_html(citation_file(Path(app.srcdir)), repository_url(app))  # app.config is config
    opts["extra_footer"] = f"{opts.get('extra_footer') or ''}{block}"
    config.html_theme_options = opts


def add_meta(app, pagename, templatename, context, doctree) -> None:
    tag = f'<meta name="crossprofile-repository" content="{html.escape(repository_url(app))}" />\n'
    context["metatags"] = context.get("metatags", "") + tag


def setup(app):
    app.connect("config-inited", add_cite_block, priority=900)
    app.connect("html-page-context", add_meta)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
