"""A small Sphinx extension for the book (listed in ``_config.yml``): page scripts each once.

sphinx-thebe (which Jupyter Book 1.x always loads) registers its inline configuration script
once per environment read, and Jupyter Book reads twice, so every page declared
``const THEBE_JS_URL`` twice: a SyntaxError in every reader's console (the browser test checks
for console errors). This keeps the first of identical scripts on each page.
"""

from __future__ import annotations


def _key(js) -> tuple:
    attrs = getattr(js, "attributes", None) or {}
    return (str(getattr(js, "filename", js) or ""), attrs.get("body", ""))


def dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    files = context.get("script_files")
    if not files:
        return
    seen, keep = set(), []
    for js in files:
        k = _key(js)
        if k in seen:
            continue
        seen.add(k)
        keep.append(js)
    files[:] = keep


def setup(app):
    app.connect("html-page-context", dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
