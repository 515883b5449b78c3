"""``prereg.yaml``: the preregistration file, its model (:class:`PreregFile`, a docstring per field) and the
:class:`Prereg` it compiles to (filters merged, ``paper:`` references resolved in ``data/paper_figures.yaml``).
Every error is a :class:`PreregError` naming the file, the field (``contrasts[0].terms[1].weight``) and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError

from crossprofile_lib.config import ConfigModel, Number, rule, rule_errors
from crossprofile_lib.design import HEADROOM_MIN_POINTS, PRIMARY_BUDGET
from crossprofile_lib.paper_figures import PaperFiguresError, paper_values
from crossprofile_lib.paths import prereg_path
from crossprofile_lib.safety.inputs import PREREG_MAX_BYTES, load_yaml

DEFAULT_PREREG_PATH = prereg_path()


class PreregError(ValueError):
    """A preregistration file breaks a rule. ``str()`` names the file, the field and the rule."""

    def __init__(self, path: str, field: str, rule: str, message: str):
        self.path, self.field, self.rule = str(path), field, rule
        super().__init__(f"{path}: field '{field}': {rule}: {message}")


def _filter_value(v):
    for e in v if isinstance(v, list) else [v]:
        if e is not None and not isinstance(e, (str, int, float, bool)):
            raise rule("value", f"must be a scalar or list of scalars, found {e!r}")
    if isinstance(v, list) and not v:
        raise rule("value", "an empty list matches nothing")
    return v


#: A filter: results-table column -> a value (equality), a list of values (membership) or null (no filter).
Where = dict[str, Annotated[Any, AfterValidator(_filter_value)]]
Text = Annotated[str, BeforeValidator(lambda v: v if v is None else str(v))]


def _non_empty(v: str) -> str:
    if not v.strip():
        raise rule("required", "a non-empty string")
    return v


def _paper_ref(v):
    if v is None or isinstance(v, (str, dict)):
        return v
    raise rule("type", "a reference '<figure id>/<item label>' or a mapping model -> paper value")


class Defaults(ConfigModel):
    """What every contrast inherits."""

    outcome: Text = "correct"
    """The results column averaged (numeric or boolean: ``correct``, ``chose_decoy``, ``kept_support``...)."""
    scale: Number = 100.0
    """Multiplies the estimate (100: percentage points)."""
    where: Optional[Where] = None
    """Filters every term starts from (e.g. ``budget_label: "0.6"``, the primary budget)."""


def _alpha(v: float) -> float:
    if not 0 < v < 1:
        raise rule("range", "must lie in (0, 1)")
    return v


class FamilySpec(ConfigModel):
    """A family of contrasts whose p-values are adjusted together."""

    correction: Literal["holm", "none"] = "holm"
    """``holm`` (statsmodels' ``multipletests(method="holm")``) or ``none``."""
    alpha: Annotated[Number, AfterValidator(_alpha)] = 0.05
    """The family's level, in (0, 1)."""


class Settings(ConfigModel):
    """The analysis settings ``crossprofile stats`` reads (a file without them uses the bundled values)."""

    primary_budget: Text = PRIMARY_BUDGET
    """The budget label the report and the book show first (r = 0.6)."""
    headroom_min_points: Number = HEADROOM_MIN_POINTS
    """ALL - EMPTY must exceed this many points at the lower interval bound, else results are exploratory."""
    net_lead_where: Where = Field(default_factory=lambda: {"selection": "budget", "label_format": "full",
                                                           "budget_label": PRIMARY_BUDGET})
    """The rows of the net-lead regressions."""
    social_proof_where: Where = Field(default_factory=dict)
    """The rows the social-proof weight is fitted on (all by default)."""


class TermSpec(ConfigModel):
    """One weighted cell mean of a contrast."""

    weight: Number
    """The term's weight (every term needs one)."""
    where: Optional[Where] = None
    """The term's filters, merged over the contrast's."""


class ContrastSpec(ConfigModel):
    """``estimate = scale * sum_k weight_k * mean(outcome | rows matching where_k)``."""

    id: Annotated[str, AfterValidator(_non_empty)]
    """A unique, non-empty name (``H1``)."""
    title: Text = ""
    """What the contrast compares, in words."""
    family: Optional[str] = None
    """The family (declared under ``families``) whose correction adjusts its p-value; none: unadjusted."""
    outcome: Optional[Text] = None
    """The outcome column (default: ``defaults.outcome``)."""
    scale: Optional[Number] = None
    """The scale (default: ``defaults.scale``)."""
    test_value: Number = 0.0
    """The value the p-value tests against."""
    where: Optional[Where] = None
    """Filters merged over ``defaults.where`` for every term."""
    terms: Annotated[list[TermSpec], Field(min_length=1)]
    """A non-empty list of ``{weight, where}`` terms."""
    paper: Annotated[Any, AfterValidator(_paper_ref)] = None
    """The paper's values (``"<figure id>/<item label>"`` in data/paper_figures.yaml, or model -> value); shown only."""
    note: Text = ""
    """Free text shown with the contrast."""


class PreregFile(ConfigModel):
    """``prereg.yaml``: the contrasts ``crossprofile stats`` estimates and tests."""

    version: Any = None
    """The file format's version (1)."""
    defaults: Optional[Defaults] = None
    """What every contrast inherits (outcome, scale, filters)."""
    families: Optional[dict[str, Optional[FamilySpec]]] = None
    """Family name -> its correction and level."""
    settings: Optional[Settings] = None
    """The analysis settings (primary budget, headroom threshold, regression and fit rows)."""
    contrasts: Annotated[list[ContrastSpec], Field(min_length=1)]
    """A non-empty list of contrasts."""


@dataclass(frozen=True)
class Term:
    weight: float
    where: dict  # column -> value or list of values (merged; no None)


@dataclass(frozen=True)
class Contrast:
    id: str
    terms: tuple[Term, ...]
    title: str = ""
    family: Optional[str] = None
    outcome: str = "correct"
    scale: float = 100.0
    null: float = 0.0
    paper: Optional[dict] = None
    note: str = ""


@dataclass(frozen=True)
class Prereg:
    contrasts: tuple[Contrast, ...]
    families: dict = field(default_factory=dict)   # name -> FamilySpec (correction, alpha)
    settings: dict = field(default_factory=lambda: Settings().model_dump())
    source: str = "<built-in>"


def parse_prereg(doc: Any, path: str = "<prereg>") -> Prereg:
    """Validate a parsed YAML document (:class:`PreregFile`) and compile it into a :class:`Prereg`."""
    if not isinstance(doc, dict):
        raise PreregError(path, "<top>", "type", "the file must be a mapping with a 'contrasts' list")
    try:
        f = PreregFile.model_validate(doc)
    except ValidationError as e:   # an unknown key first (a misspelt key is also a missing one), else the first error
        fld, name, msg = sorted(rule_errors(e, PreregFile), key=lambda x: x[1] != "unknown key")[0]
        raise PreregError(path, fld or "<top>", name, msg) from None
    d = f.defaults or Defaults()
    families = {str(k): v or FamilySpec() for k, v in (f.families or {}).items()}
    settings = {**Settings().model_dump(), **(f.settings.model_dump(exclude_unset=True) if f.settings else {})}
    out, seen = [], set()
    for i, c in enumerate(f.contrasts):
        fld = f"contrasts[{i}]"
        if c.id in seen:
            raise PreregError(path, f"{fld}.id", "unique", f"id '{c.id}' is used twice")
        seen.add(c.id)
        if c.family is not None and c.family not in families:
            raise PreregError(path, f"{fld}.family", "declared", f"family '{c.family}' is not under 'families' "
                              f"(declared: {', '.join(families) or 'none'})")
        c_where = {**(d.where or {}), **(c.where or {})}
        terms = tuple(Term(t.weight, {k: v for k, v in {**c_where, **(t.where or {})}.items() if v is not None})
                      for t in c.terms)
        paper = c.paper
        if isinstance(paper, str):
            try:
                paper = paper_values(paper)
            except PaperFiguresError as e:
                raise PreregError(path, f"{fld}.paper", "paper reference", str(e)) from None
        out.append(Contrast(c.id, terms, c.title, c.family, c.outcome if c.outcome is not None else d.outcome,
                            c.scale if c.scale is not None else d.scale, c.test_value, paper, c.note))
    return Prereg(tuple(out), families, settings, str(path))


def _read(p: Path):
    # the safe-input layer: a regular file, size cap, strict UTF-8 and YAML, nested at most 12 levels
    return load_yaml(p, PREREG_MAX_BYTES, error=PreregError, max_depth=12, what="prereg file")


def load_prereg(path: str | Path | None = None, extra=()) -> Prereg:
    """Read a preregistration file (default: the bundled ``prereg.yaml``) with the ``extra`` files merged in."""
    p = Path(path) if path is not None else DEFAULT_PREREG_PATH
    doc = _read(p)
    out = parse_prereg(doc, str(p))
    for e in extra or ():
        out = merge_extra(out, doc, _read(Path(e)), str(e))
    return out


def merge_extra(base: Prereg, base_doc: dict, doc: Any, path: str) -> Prereg:
    """``base`` with an extra file's contrasts added: they inherit the main file's ``defaults`` unless it gives its own
    and may name any family of either file (corrected together); a family declared in both must be declared alike,
    ids are unique across the files and an extra file may not set ``settings``."""
    if not isinstance(doc, dict):
        raise PreregError(path, "<top>", "type", "the file must be a mapping with a 'contrasts' list")
    if "settings" in doc:
        raise PreregError(path, "settings", "extra file", "the analysis settings come from the main "
                          f"preregistration file ({base.source}); an extra file adds contrasts (and families)")
    fams = dict(base_doc.get("families") or {})
    for name, spec in (doc.get("families") or {}).items():
        if name in fams and (fams[name] or {}) != (spec or {}):
            raise PreregError(path, f"families.{name}", "unique", f"family '{name}' is declared differently in "
                              f"{base.source}")
        fams[name] = spec
    merged = {"version": doc.get("version", base_doc.get("version")),
              "defaults": doc["defaults"] if "defaults" in doc else base_doc.get("defaults"),
              "families": fams, **{k: v for k, v in doc.items() if k not in ("version", "defaults", "families")}}
    extra = parse_prereg(merged, path)
    seen = {c.id for c in base.contrasts}
    for i, c in enumerate(extra.contrasts):
        if c.id in seen:
            raise PreregError(path, f"contrasts[{i}].id", "unique", f"id '{c.id}' is already used in {base.source}")
    return Prereg(base.contrasts + extra.contrasts, {**base.families, **extra.families}, base.settings,
                  f"{base.source} + {path}")
