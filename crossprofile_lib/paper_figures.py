"""The paper's reported numbers: ONE source, ``data/paper_figures.yaml``.

Every paper value shown anywhere (prereg.yaml's ``paper:`` references, the book's "paper" columns,
HiddenBench's paper table, ``crossprofile fit-paper``) is read through this module; no other file
repeats a number. None of these values is a result of this suite.

A **reference** names one item: ``"<figure id>/<item label>"`` (e.g. ``"h3/H3: R1-rel - R1"``).

An item's ``n`` is the paper's number of decisions behind each term's mean for a model run on
:data:`SAMPLE_TEMPLATES` templates x 3 seeds (None where the paper does not let it be derived);
:func:`paper_sampling` gives each model's templates and seeds (``sampling:`` in the file) and
:func:`paper_n` the item's n for one model (scaled by its templates).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

import yaml

from crossprofile_lib.paths import paper_figures_path

PAPER_FIGURES_PATH = paper_figures_path()

UNITS = ("%", "points", "facts")
#: the items' ``n`` are for a model run on this many templates (x 3 seeds)
SAMPLE_TEMPLATES = 60


class PaperFiguresError(ValueError):
    """``data/paper_figures.yaml`` (or a reference into it) breaks a rule; names file and field."""


@dataclass(frozen=True)
class PaperItem:
    figure_id: str
    result: str
    source: str
    chapter: str
    data: str
    label: str
    unit: str
    paper: dict
    measure: Optional[dict] = None
    note: str = ""
    n: Optional[int] = None     # the paper's decisions per term mean (60 templates x 3 seeds); None: not derivable

    @property
    def ref(self) -> str:
        return f"{self.figure_id}/{self.label}"


def load_paper_figures(path: str | Path = PAPER_FIGURES_PATH) -> list[PaperItem]:
    """Every paper number of ``data/paper_figures.yaml`` as one :class:`PaperItem` each."""
    return list(_load(str(Path(path).resolve())))


@lru_cache(maxsize=8)
def _load(path: str) -> tuple[PaperItem, ...]:
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise PaperFiguresError(f"{p}: cannot be read as YAML ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("figures"), list):
        raise PaperFiguresError(f"{p}: field 'figures': required, a list")
    out, seen = [], set()
    for i, f in enumerate(doc["figures"]):
        for key in ("id", "result", "items", "data"):
            if not isinstance(f, dict) or key not in f:
                raise PaperFiguresError(f"{p}: field 'figures[{i}].{key}': required")
        for j, it in enumerate(f["items"]):
            where = f"{p}: field 'figures[{i}].items[{j}]"
            if not isinstance(it.get("paper"), dict) or not it["paper"]:
                raise PaperFiguresError(f"{where}.paper': a mapping model -> paper value is required")
            if it.get("unit") not in UNITS:
                raise PaperFiguresError(f"{where}.unit': one of {', '.join(UNITS)}")
            n = it.get("n")
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
                raise PaperFiguresError(f"{where}.n': a positive whole number of decisions (got {n!r})")
            item = PaperItem(str(f["id"]), f["result"], f.get("source", ""), f.get("chapter", ""), f["data"],
                             str(it["label"]), it["unit"], dict(it["paper"]), it.get("measure"),
                             str(it.get("note", "")), n)
            if item.ref in seen:
                raise PaperFiguresError(f"{where}.label': duplicate reference '{item.ref}'")
            seen.add(item.ref)
            out.append(item)
    return tuple(out)


def paper_item(ref: str, path: str | Path = PAPER_FIGURES_PATH) -> PaperItem:
    """The item a reference ``"<figure id>/<label>"`` names (error names the file and the ref)."""
    items = {it.ref: it for it in load_paper_figures(path)}
    if ref not in items:
        raise PaperFiguresError(f"{path}: no paper figure '{ref}' (a reference is '<figure id>/<item label>')")
    return items[ref]


def paper_values(ref: str, path: str | Path = PAPER_FIGURES_PATH) -> dict:
    """``{model: value}`` of the item ``ref`` names."""
    return dict(paper_item(ref, path).paper)


def paper_sampling(path: str | Path = PAPER_FIGURES_PATH) -> dict:
    """``{model: {"templates": int, "seeds": int}}``: each paper model's sample (``sampling:``)."""
    return {m: dict(v) for m, v in _sampling(str(Path(path).resolve()))}


@lru_cache(maxsize=8)
def _sampling(path: str) -> tuple:
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise PaperFiguresError(f"{p}: cannot be read as YAML ({e})") from None
    out = []
    for m, v in (doc.get("sampling") or {}).items():
        if not isinstance(v, dict) or any(not isinstance(v.get(k), int) or isinstance(v.get(k), bool) or v[k] < 1
                                          for k in ("templates", "seeds")):
            raise PaperFiguresError(f"{p}: field 'sampling.{m}': templates and seeds, positive whole numbers")
        out.append((str(m), (("templates", v["templates"]), ("seeds", v["seeds"]))))
    return tuple(out)


def paper_n(item: PaperItem, model: str, path: str | Path = PAPER_FIGURES_PATH) -> Optional[float]:
    """The paper's decisions per term mean of ``item`` for ``model``: ``item.n`` scaled by the model's
    templates over :data:`SAMPLE_TEMPLATES` and its seeds over 3 (None where ``n`` is not derivable)."""
    if item.n is None:
        return None
    s = paper_sampling(path).get(model, {"templates": SAMPLE_TEMPLATES, "seeds": 3})
    return item.n * s["templates"] / SAMPLE_TEMPLATES * s["seeds"] / 3
