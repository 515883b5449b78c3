"""A Sphinx extension (``_config.yml``): each chapter figure (image, then its :meth:`Captions.figure` caption) becomes one
numbered, labelled ``figure`` node for ``{numref}``, numbered as its caption says."""

from __future__ import annotations

import re

from docutils import nodes
from docutils.transforms import Transform

CAPTION = re.compile(r'^\s*<p class="caption cp-caption" data-cp-figure="(?P<label>[^"]+)" '
                     r'data-cp-number="(?P<number>[0-9.]+)"><strong>[^<]*</strong>\s*(?P<body>.*)</p>\s*$', re.DOTALL)


def _bundle(node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == "mime_bundle"


def _mime(bundle, prefix: str):
    return next((c for c in bundle.children if str(c.get("mime_type", "")).startswith(prefix)), None)


def _caption(bundle):
    """``(label, number, body HTML)`` of a caption output, or None."""
    part = _mime(bundle, "text/html")
    if part is None:
        return None
    raw = next(iter(part.findall(nodes.raw)), None)
    m = CAPTION.match(raw.astext()) if raw is not None else None
    return (m["label"], m["number"], m["body"]) if m else None


class FigureOutputs(Transform):
    """Image output + caption output -> one labelled ``figure`` node (see the module doc)."""

    default_priority = 500

    def apply(self, **kwargs) -> None:
        env = getattr(self.document.settings, "env", None)
        for bundle in list(self.document.findall(_bundle)):
            found = _caption(bundle)
            parent = bundle.parent
            if found is None or parent is None:
                continue
            i = parent.index(bundle)
            image = parent[i - 1] if i > 0 else None
            if image is None or not _bundle(image) or _mime(image, "image/") is None:
                continue
            label, number, body = found
            fig = nodes.figure("", classes=["cp-figure"])
            fig["names"].append(label)
            parent.remove(image)
            fig += image
            fig += nodes.caption("", "", nodes.raw("", body, format="html"))
            parent.replace(bundle, fig)
            self.document.note_explicit_target(fig, fig)
            if env is not None:
                numbers = env.__dict__.setdefault("cp_figure_numbers", {})
                numbers.setdefault(env.docname, {})[fig["ids"][0]] = tuple(int(x) for x in number.split("."))


def number_figures(app, env) -> list:
    """Give every wrapped figure its caption's number (Sphinx numbers figures across the whole book)."""
    for docname, mapping in getattr(env, "cp_figure_numbers", {}).items():
        env.toc_fignumbers.setdefault(docname, {}).setdefault("figure", {}).update(mapping)
    return []


def _purge(app, env, docname) -> None:
    getattr(env, "cp_figure_numbers", {}).pop(docname, None)


def _merge(app, env, docnames, other) -> None:
    theirs = getattr(other, "cp_figure_numbers", {})
    mine = env.__dict__.setdefault("cp_figure_numbers", {})
    mine.update({d: theirs[d] for d in docnames if d in theirs})


def setup(app):
    app.add_transform(FigureOutputs)
    app.connect("env-get-updated", number_figures, priority=900)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
