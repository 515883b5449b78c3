"""Markup in text a user supplies (template titles, descriptions, option and criterion names, fact texts; HiddenBench
task names and descriptions): found and named, never interpreted.

The book shows all of it as **plain text**: every page writes it into HTML escaped (``html.escape``: ``<script>``
appears as the characters ``<script>``), never into Markdown or MyST source (so a role such as ``{download}`x```,
a link ``[a](http://...)`` or an image ``![i](http://...)`` stays literal), and a figure title escapes ``$`` (no TeX
math). :func:`markup_notes` says so for each field that holds such markup, as ``validate`` warnings: the file is
valid, and the user learns how it will look.
"""

from __future__ import annotations

import re

#: (pattern, what it is) of the markup named
MARKUP = (
    (re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>"), "an HTML tag"),
    (re.compile(r"\{[A-Za-z][\w:+.-]*\}`[^`]*`"), "a MyST role"),
    (re.compile(r"^\s*(?:```|:::)\s*\{?[A-Za-z]", re.MULTILINE), "a MyST directive"),
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), "a Markdown image"),
    (re.compile(r"(?<!!)\[[^\]]+\]\([^)]*\)"), "a Markdown link"),
    (re.compile(r"\$[^$]*[\\^_{}][^$]*\$"), "TeX math"),  # not two prices ($4 and $5): a command, ^, _ or braces
)

HOW_SHOWN = ("the book shows it as plain text, exactly as written: HTML-escaped on every page, never read as "
             "Markdown or MyST, '$' literal in figure titles")


def markup_in(text) -> list[tuple[str, str]]:
    """``[(what, the first match)]`` for each kind of markup in ``text``."""
    if not isinstance(text, str):
        return []
    out = []
    for rx, what in MARKUP:
        m = rx.search(text)
        if m:
            out.append((what, m.group(0)))
    return out


def markup_notes(fields) -> list[str]:
    """One note per ``(field, text)`` of ``fields`` that holds markup, naming it and how the book shows it."""
    notes = []
    for field, text in fields:
        found = markup_in(text)
        if found:
            kinds = ", ".join(f"{what} ({snippet[:40]!r})" for what, snippet in found)
            notes.append(f"{field} holds {kinds}: {HOW_SHOWN}")
    return notes


def template_fields(t) -> list[tuple[str, str]]:
    """The user-written text of a template, by field name (``title``, ``options[1].name``, ``facts[3].text``...)."""
    out = [("title", t.title), ("description", t.description)]
    out += [(f"options[{i}].name", o.name) for i, o in enumerate(t.options)]
    out += [(f"criteria[{i}].name", c.name) for i, c in enumerate(t.criteria)]
    out += [(f"facts[{i}].text", f.text) for i, f in enumerate(t.facts)]
    return out
