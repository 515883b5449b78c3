"""A Sphinx extension (``_config.yml``): each page keeps the first of identical scripts (sphinx-thebe's
configuration was declared twice: a SyntaxError in the browser's console)."""

from __future__ import annotations


def _key(js) -> tuple:
    attrs = getattr(js, "attributes", None) or {}
    return (str(getattr(js, "filename", js) or ""), attrs.get("body", ""))


def dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    files = context.get("script_files")
    if not files:
        return
    keep: dict = {}
    for js in files:
        keep.setdefault(_key(js), js)
    files[:] = keep.values()


def setup(app):
    app.connect("html-page-context", dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
