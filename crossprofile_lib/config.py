"""The shared pieces of every validated configuration (the ground floor: imports nothing of the suite).

Each configuration (``RunConfig``, ``HBConfig``, ``prereg.yaml``, ``data/paper_figures.yaml``) is a pydantic model
built from these types with a docstring per field; a validator states a rule by raising :func:`rule`, and
:func:`rule_errors` names the field and the rule of each error.
"""

from __future__ import annotations

import math
import os
import re
from fractions import Fraction
from types import UnionType
from typing import Annotated, Any, Callable, Iterable, Optional, Sequence, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, GetCoreSchemaHandler, Strict, ValidationError
from pydantic_core import PydanticCustomError, core_schema

from crossprofile_lib.design import VARIANT_NAMES

#: Every configuration: unknown keys refused, defaults validated too, attribute docstrings as field descriptions.
MODEL_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_default=True)

#: Seeds are 32-bit unsigned (larger ones would wrap onto small ones in some generators).
MAX_SEED = 2**32 - 1


class ConfigModel(BaseModel):
    """Base of the file models: unknown keys refused, one docstring per field."""

    model_config = MODEL_CONFIG


def rule(name: str, message: str) -> PydanticCustomError:
    """The error a validator raises for a broken rule ``name`` (``message`` is printed after it)."""
    return PydanticCustomError(name, message)


# --- budgets ----------------------------------------------------------------------------------

_FIXED = re.compile(r"^(?:([0-9]+)t|t([0-9]+))$")   # ASCII digits (int() would read other scripts' digits too)
#: The largest fixed token budget (far above any template's T_all of a few hundred tokens).
MAX_FIXED_TOKENS = 1_000_000


class Budget(str):
    """A token budget (SPEC section 5): the ratio ``r`` of ``B(r) = floor(r * T_all)`` or a fixed token count,
    the string being its canonical label (``0.60`` -> ``"0.6"``, ``t128`` -> ``"128t"``). Anything else raises
    :class:`ValueError` naming the rule: a ratio lies in (0, 1]; a fixed budget is at least 1 token.
    """

    ratio: Optional[float]
    fixed_tokens: Optional[int]

    def __new__(cls, value: "str | float | Budget") -> "Budget":
        if isinstance(value, Budget):
            return value
        ratio, fixed = _parse_budget(value)
        self = super().__new__(cls, f"{fixed}t" if ratio is None else f"{ratio:g}")
        self.ratio, self.fixed_tokens = ratio, fixed
        return self

    def __getnewargs__(self):
        return (str(self),)

    @classmethod
    def parse(cls, value: "str | float | Budget") -> "Budget":
        """The budget ``value`` names (see the class doc)."""
        return cls(value)

    @property
    def label(self) -> str:
        """``0.6`` or ``128t``: the ``budget_label`` column."""
        return str(self)

    def tokens(self, t_all: int) -> int:
        """``floor(r * t_all)`` of the decimal ratio as written (``0.7 * 90`` is 63, not 62.99...); a ratio pricing
        to 0 tokens is a ``ValueError`` (a budget is at least 1 token)."""
        if self.ratio is None:
            return self.fixed_tokens
        n = math.floor(Fraction(repr(self.ratio)) * t_all)
        if n < 1 <= t_all:
            raise ValueError(f"budget {self}: prices to 0 tokens for a task of T_all = {t_all} tokens "
                             f"(rule: a budget is at least 1 token; use a ratio of at least {1 / t_all:.3g})")
        return n

    def __repr__(self) -> str:
        return f"Budget({str(self)!r})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _validate_budget, json_schema_input_schema=core_schema.union_schema(
                [core_schema.str_schema(), core_schema.float_schema()]),
            serialization=core_schema.plain_serializer_function_ser_schema(str))


def _parse_budget(value) -> tuple[Optional[float], Optional[int]]:
    if isinstance(value, bool):
        raise ValueError(f"budget {value!r} is neither a ratio in (0, 1] (e.g. 0.6) nor a token count (e.g. 128t)")
    s = str(value).strip()
    if not s.isascii():
        raise ValueError(f"budget '{s}': write the number with ASCII digits")
    m = _FIXED.match(s)
    if m:
        n = int(m.group(1) or m.group(2))
        if n < 1:
            raise ValueError(f"budget '{s}': a fixed token budget must be at least 1 token")
        if n > MAX_FIXED_TOKENS:
            raise ValueError(f"budget '{s}': a fixed token budget is at most {MAX_FIXED_TOKENS} tokens")
        return None, n
    if s.startswith("-") and s.rstrip("t") != s:
        raise ValueError(f"budget '{s}': a fixed token budget must be at least 1 token")
    try:
        r = float(s)
    except ValueError:
        raise ValueError(f"budget '{s}' is neither a ratio in (0, 1] (e.g. 0.6) nor a token count "
                         f"(e.g. 128t)") from None
    if not (math.isfinite(r) and 0 < r <= 1):
        raise ValueError(f"budget ratio '{s}' is not in (0, 1]")
    return r, None


def _validate_budget(value) -> Budget:
    try:
        return Budget(value)
    except ValueError as e:
        raise rule("budget", str(e)) from None


# --- seeds and lists --------------------------------------------------------------------------

def check_seed(v: int) -> int:
    """A seed is an integer in ``0..MAX_SEED``."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"seed {v!r} is not an integer")
    if not 0 <= v <= MAX_SEED:
        raise ValueError(f"seed {v} is outside 0..{MAX_SEED} (seeds are 32-bit unsigned)")
    return v


def distinct(items: Iterable, what: str) -> list:
    """``items`` as a list when no item appears twice; else :class:`ValueError` naming the repeats."""
    items = list(items)
    seen: set = set()
    dups = [x for x in items if x in seen or seen.add(x)]
    if dups:
        raise ValueError(f"{what} {', '.join(map(str, dict.fromkeys(dups)))} given twice: each {what} may appear once")
    return items


def check_known(names: Iterable[str], known: Sequence[str], what: str) -> list[str]:
    """``names`` as a list when each is one of ``known``; else :class:`ValueError` naming the unknown ones."""
    names = list(names)
    bad = [v for v in names if v not in known]
    if bad:
        raise ValueError(f"unknown {what}(s) {', '.join(map(str, bad))} (known: {', '.join(known)})")
    return names


def check_variants(names: Iterable[str]) -> list[str]:
    """Variants are three letters of P/S (:data:`crossprofile_lib.design.VARIANT_NAMES`)."""
    return check_known(names, VARIANT_NAMES, "variant")


def checked(check: Callable, name: str) -> AfterValidator:
    """An ``AfterValidator`` running ``check`` (which raises :class:`ValueError`) as rule ``name``."""
    def run(v):
        try:
            check(v)
        except ValueError as e:
            raise rule(name, str(e)) from None
        return v
    return AfterValidator(run)


def distinct_list(what: str) -> AfterValidator:
    """An ``AfterValidator`` refusing repeats in a list field (rule ``unique``)."""
    return checked(lambda items: distinct(items, what), "unique")


def _paths(v):
    """One path or several, as strings (``Path`` objects accepted)."""
    if isinstance(v, (str, os.PathLike)):
        v = [v]
    return [os.fspath(p) if isinstance(p, os.PathLike) else p for p in v] if isinstance(v, (list, tuple)) else v


#: A number in a file: an int or a float, never a bool or a string.
Number = Annotated[float, Strict()]
Seed = Annotated[int, checked(check_seed, "seed")]
Seeds = Annotated[tuple[Seed, ...], distinct_list("seed")]
Budgets = Annotated[tuple[Budget, ...], distinct_list("budget")]
Variants = Annotated[tuple[str, ...], checked(check_variants, "variant"), distinct_list("variant")]
Paths = Annotated[tuple[str, ...], BeforeValidator(_paths)]


# --- errors ---------------------------------------------------------------------------------

#: pydantic's error types -> the rule names this suite prints.
RULES = {"missing": "required", "extra_forbidden": "unknown key", "unexpected_keyword_argument": "unknown key",
         "too_short": "required", "literal_error": "value", "enum": "value",
         "greater_than": "range", "greater_than_equal": "range", "less_than": "range", "less_than_equal": "range"}


def field_path(loc: Iterable) -> str:
    """``("contrasts", 0, "terms", 1, "weight")`` -> ``contrasts[0].terms[1].weight``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not re.fullmatch(r"[a-z]+(?:-[a-z]+)*\[.*\]", str(part)):  # pydantic's schema tags: list[int], function-after[...]
            out += ("." if out else "") + str(part)
    return out


def _unwrap(tp):
    """The type inside ``Optional[...]`` / ``Annotated[...]``."""
    while True:
        origin, args = get_origin(tp), get_args(tp)
        if origin is Annotated:
            tp = args[0]
        elif origin in (Union, UnionType) and type(None) in args and len(args) == 2:
            tp = next(a for a in args if a is not type(None))
        else:
            return tp


def _fields(cls) -> dict:
    return getattr(cls, "__pydantic_fields__", None) or {}  # a pydantic model's or dataclass's


def field_info(model, loc: Iterable):
    """``(fields of the model holding the last named part of loc, that part's FieldInfo or None)``, following
    ``loc`` through nested models, lists and mappings; ``({}, None)`` where it cannot."""
    tp, parent, info = model, {}, None
    for part in loc:
        tp = _unwrap(tp)
        if get_origin(tp) in (list, tuple, dict):
            tp, info = get_args(tp)[-1], None
            continue
        if isinstance(part, int):
            return {}, None
        parent = _fields(tp)
        if part not in parent:
            return parent, None
        info = parent[part]
        tp = info.annotation
    return parent, info


def rule_errors(e: ValidationError, model=None) -> list[tuple[str, str, str]]:
    """``(field, rule, message)`` per error of ``e``, in the order pydantic found them. With the ``model``
    that was validated, a missing field is explained by its docstring and an unknown key lists the
    allowed ones."""
    out = []
    for err in e.errors(include_url=False):
        kind = err["type"]
        name = RULES.get(kind, "type" if kind.endswith(("_type", "_parsing")) or kind == "is_instance_of" else kind)
        msg = err["msg"]
        if kind == "value_error":
            name, msg = "value", msg.removeprefix("Value error, ")
        elif model is not None and name in ("required", "unknown key"):
            parent, info = field_info(model, err["loc"])
            if name == "unknown key" and parent:
                msg = f"allowed keys: {', '.join(sorted(parent))}"
            elif name == "required" and info is not None and info.description:
                msg = info.description.rstrip(".")
                msg = (msg[0].lower() + msg[1:]).replace("``", "")
        out.append((field_path(err["loc"]), name, msg))
    return out
