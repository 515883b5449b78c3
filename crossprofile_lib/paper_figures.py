"""The paper's reported numbers: ONE source, ``data/paper_figures.yaml``, read by everything that shows a paper value
(none of them is a result of this suite). A **reference** names one item: ``"<figure id>/<item label>"``. An item's
``n`` is the paper's decisions behind each term's mean on :data:`SAMPLE_TEMPLATES` templates x 3 seeds;
:func:`paper_sampling` gives each model's templates and seeds and :func:`paper_n` its n. The file is validated by
:class:`PaperFiguresFile`; every error names the file, the field and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import yaml
from pydantic import AfterValidator, BeforeValidator, Field, ValidationError

from crossprofile_lib.config import ConfigModel, rule, rule_errors
from crossprofile_lib.paths import paper_figures_path

PAPER_FIGURES_PATH = paper_figures_path()

UNITS = ("%", "points", "facts")
#: the items' ``n`` are for a model run on this many templates (x 3 seeds)
SAMPLE_TEMPLATES = 60


class PaperFiguresError(ValueError):
    """``data/paper_figures.yaml`` (or a reference into it) breaks a rule; names file and field."""


# --- the file -------------------------------------------------------------------------------

Text = Annotated[str, BeforeValidator(lambda v: v if v is None else str(v))]


def _whole(what: str):
    """An ``AfterValidator``: a positive whole number (an int above 0, never a bool)."""
    def check(v):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise rule("range", f"a positive whole number of {what} (got {v!r})")
        return v
    return AfterValidator(check)


def _values(v: dict) -> dict:
    if not v:
        raise rule("required", "a mapping model -> paper value is required")
    return v


class PaperItemSpec(ConfigModel):
    """One number the paper reports, for one or more models."""

    label: Text
    """The quantity (``R1``, ``R1 - B4``); ``<figure id>/<label>`` is its reference."""
    unit: Literal[UNITS]
    """``%`` (an accuracy or rate), ``points`` (a difference of percentages) or ``facts`` (a mean count)."""
    paper: Annotated[dict[str, Union[int, float, str]], AfterValidator(_values)]
    """Model name -> the paper's value (a number, or a string for a reported range)."""
    measure: Optional[dict[str, Any]] = None
    """How this suite computes the same quantity, in prereg.yaml's contrast language (checked where it is
    used: :mod:`crossprofile_lib.paperfit.figures`); omitted where the suite has no comparable run."""
    note: Text = ""
    """Free text."""
    n: Annotated[Optional[Any], _whole("decisions")] = None
    """The paper's decisions behind each term's mean for a model run on 60 templates x 3 seeds; omitted where
    the paper does not let it be derived."""


class FigureSpec(ConfigModel):
    """One row of the paper's results, with its numbers."""

    id: Text
    """A unique id."""
    result: Text
    """What the paper's row says (SPEC wording)."""
    source: Text = ""
    """``SPEC 10``, ``SPEC 8`` or ``seed`` (a number the summary gives beyond SPEC's table)."""
    chapter: Text = ""
    """The book chapter that discusses it."""
    data: Literal["crossprofile", "hiddenbench", "natural"]
    """Which run this suite's value comes from."""
    items: list[PaperItemSpec]
    """The numbers."""


class Sample(ConfigModel):
    """How many templates and seeds a paper model ran."""

    templates: Annotated[Any, _whole("templates")]
    """Templates the model ran (the items' ``n`` are for 60)."""
    seeds: Annotated[Any, _whole("seeds")]
    """Seeds per template."""


class PaperFiguresFile(ConfigModel):
    """``data/paper_figures.yaml``: every number the paper reports, and only those."""

    version: Any = None
    """The file format's version (1)."""
    paper: Text = ""
    """The paper's title."""
    models: dict[str, Text] = Field(default_factory=dict)
    """Model name -> how the paper ran it."""
    sampling: Optional[dict[str, Sample]] = None
    """Model name -> its templates and seeds (a model not named ran 60 templates x 3 seeds)."""
    figures: list[FigureSpec]
    """The paper's figures."""


# --- the items --------------------------------------------------------------------------------

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
    """Every paper number of ``data/paper_figures.yaml`` as one :class:`PaperItem` each (the file is
    validated by :class:`PaperFiguresFile`; errors name the file, the field and the rule)."""
    return list(_load(str(Path(path).resolve())))


@lru_cache(maxsize=8)
def _file(path: str) -> PaperFiguresFile:
    """The validated file (read once per path)."""
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise PaperFiguresError(f"{p}: cannot be read as YAML ({e})") from None
    if not isinstance(doc, dict):
        raise PaperFiguresError(f"{p}: field 'figures': required: the file is a mapping with a 'figures' list")
    try:
        f = PaperFiguresFile.model_validate(doc)
    except ValidationError as e:
        fld, name, msg = sorted(rule_errors(e, PaperFiguresFile), key=lambda x: x[1] != "unknown key")[0]
        raise PaperFiguresError(f"{p}: field '{fld}': {name}: {msg}") from None
    return f


@lru_cache(maxsize=8)
def _load(path: str) -> tuple[PaperItem, ...]:
    p, f = Path(path), _file(path)
    out, seen = [], set()
    for i, fig in enumerate(f.figures):
        for j, it in enumerate(fig.items):
            item = PaperItem(fig.id, fig.result, fig.source, fig.chapter, fig.data, **it.model_dump())
            if item.ref in seen:
                raise PaperFiguresError(f"{p}: field 'figures[{i}].items[{j}].label': unique: duplicate reference "
                                        f"'{item.ref}'")
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
    return {m: v.model_dump() for m, v in (_file(str(Path(path).resolve())).sampling or {}).items()}


def paper_n(item: PaperItem, model: str, path: str | Path = PAPER_FIGURES_PATH) -> Optional[float]:
    """The paper's decisions per term mean of ``item`` for ``model``: ``item.n`` scaled by the model's
    templates over :data:`SAMPLE_TEMPLATES` and its seeds over 3 (None where ``n`` is not derivable)."""
    if item.n is None:
        return None
    s = paper_sampling(path).get(model, {"templates": SAMPLE_TEMPLATES, "seeds": 3})
    return item.n * s["templates"] / SAMPLE_TEMPLATES * s["seeds"] / 3
