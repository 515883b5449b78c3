"""Templates: the YAML schema, the loader and the answer-key validator (SPEC section 2).

The loader parses one YAML file into a :class:`Template` (pydantic checks the types) and :func:`validate_template`
applies the rules of SPEC section 2, each failure a :class:`TemplateError` naming the file, the field and the rule:
1. all facts: the correct option wins strictly; 2. decoy group only: the decoy wins strictly; 3. support group only:
the correct option wins strictly; 4. role counts and polarities as specified, distinct fact texts, neutral ids, relevant
facts name a stated criterion and irrelevant ones none; 5. no hint words (:mod:`.hints`), no text addressing the
decision model, no fact ranking or comparing options, each fact names its own option and no other; 6. paraphrases.
Reading a file safely is :mod:`crossprofile_lib.safety.inputs`. The fact-length warning takes the caller's tokenizer;
the option count is a parameter (``n_options``, default 3).
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Iterable, Literal, Optional

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from crossprofile_lib.design import DOMAINS, DOMAINS_FILE
from crossprofile_lib.safety.inputs import TemplateError, parse_yaml, read_template_text, template_paths
from crossprofile_lib.task import hints
from crossprofile_lib.task.domains import domains_for

#: Exact role structure: (role, about) -> count of facts by polarity.
#: ``about`` is "correct", "decoy" or "any" (irrelevant facts may be about any option).
ROLE_STRUCTURE: dict[tuple[str, str, int], int] = {
    ("support", "correct", +1): 3,
    ("support", "decoy", -1): 2,
    ("decoy", "decoy", +1): 2,
    ("decoy", "correct", -1): 1,
    ("irrelevant", "any", +1): 2,
    ("irrelevant", "any", -1): 2,
}
N_FACTS = sum(ROLE_STRUCTURE.values())  # 12

FACT_ID_RE = re.compile(r"^F(?:0[1-9]|1[0-2])$")   # F01..F12 (templates/SCHEMA.md)

#: Fact lengths (tokens) outside this range draw a warning: the paper's R1 composition needs short facts
#: (the exact check is :mod:`.design_check`).
FACT_TOKENS_WARN = (12, 30)


class TemplateWarning(UserWarning):
    """A template passes the rules but something about it may change the paper's figures."""


#: Markup a template's text may not hold (it reaches prompts and HTML pages): a tag or comment (``<b``, ``<!--``),
#: a character reference (``&lt;``) or a ``javascript:`` URL; a comparison such as ``under < 5 days`` is fine.
MARKUP_RE = re.compile(r"<\s*[A-Za-z!/?]|&(?:#\d+|#x[0-9A-Fa-f]+|[A-Za-z][A-Za-z0-9]*);|javascript\s*:", re.IGNORECASE)
#: Template, option and criterion ids: safe file-name tokens (letters, digits, ``-``, ``_``; ``.`` in template ids).
TEMPLATE_ID_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9_-])?$")
TOKEN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def _nonblank(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    if m := MARKUP_RE.search(v):
        raise PydanticCustomError("markup", f"markup is not allowed in template text (found "
                                            f"{v[m.start():m.start() + 12]!r}): write plain text, as it reaches "
                                            f"prompts and the book's pages")
    return v


def _collapse(v: str) -> str:
    return _nonblank(" ".join(v.split()))


def _token(pattern: re.Pattern, what: str):
    def check(v: str) -> str:
        if not pattern.match(v):
            dots = " ('.' inside)" if what == "template id" else ""
            raise PydanticCustomError("id", f"{what} {v[:40]!r} is not a safe name: letters, digits, '-' and "
                                            f"'_'{dots}, starting with a letter or digit")
        return v
    return check


def _domain(v: str, info: ValidationInfo) -> str:
    allowed = (info.context or {}).get("domains", DOMAINS)
    if v not in allowed:
        extra = sorted(set(allowed) - set(DOMAINS))
        raise PydanticCustomError("domain", f"domain {v[:60]!r} is not one of the {len(DOMAINS)} decision domains "
                                            f"(templates/SCHEMA.md): {', '.join(DOMAINS)}"
                                            + (f", nor one a {DOMAINS_FILE} adds ({', '.join(extra)})" if extra else "")
                                            + f"; to add a domain of your own, list it in a file {DOMAINS_FILE} in "
                                              f"the template's folder or a folder above it")
    return v


def _strict_polarity(v):
    if type(v) is not int:  # YAML true or 1.0 would pass as 1
        raise PydanticCustomError("strict", f"polarity must be the integer -1 or 1, not {type(v).__name__} "
                                            f"{str(v)[:20]!r}")
    return v


#: A string that is not empty or blank and holds no markup (kept as written).
Text = Annotated[str, AfterValidator(_nonblank)]
#: Running text (description, fact text): whitespace collapsed to single spaces, not empty, no markup.
Prose = Annotated[str, AfterValidator(_collapse)]
TemplateId = Annotated[str, AfterValidator(_nonblank), AfterValidator(_token(TEMPLATE_ID_RE, "template id"))]
TokenId = Annotated[str, AfterValidator(_nonblank), AfterValidator(_token(TOKEN_ID_RE, "id"))]
Domain = Annotated[str, AfterValidator(_nonblank), AfterValidator(_domain)]
Polarity = Annotated[Literal[-1, 1], BeforeValidator(_strict_polarity)]
#: pydantic error types and the rule they are reported under
_RULES = {"markup": "schema (markup)", "id": "schema (id)", "domain": "schema (domain)", "strict": "schema (strict type)",
          "int_type": "schema (strict type)"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Criterion(_Model):
    id: TokenId
    name: Text


class Option(_Model):
    id: TokenId
    name: Text
    aliases: tuple[Text, ...] = ()

    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


class Fact(_Model):
    id: Text
    text: Prose
    role: Literal["support", "decoy", "irrelevant"]
    about: Text
    polarity: Polarity
    criterion: Optional[Text] = None
    #: other wordings of the same fact (same option, criterion, polarity, role), for the messy protocol
    #: (:mod:`crossprofile_lib.task.messy`); empty, or at least 2 for every fact (rule ``paraphrases``)
    paraphrases: tuple[Prose, ...] = ()

    @property
    def relevant(self) -> bool:
        return self.role != "irrelevant"


class Template(_Model):
    id: TemplateId
    version: StrictInt
    domain: Domain
    title: Text
    description: Prose
    criteria: tuple[Criterion, ...]
    options: tuple[Option, ...]
    correct_option: Text
    decoy_option: Text
    facts: tuple[Fact, ...]

    @field_validator("version")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v < 1:
            raise ValueError("version must be 1 or more")
        return v

    # -- convenience -------------------------------------------------------------------
    def option(self, option_id: str) -> Option:
        return {o.id: o for o in self.options}[option_id]

    def fact(self, fact_id: str) -> Fact:
        return {f.id: f for f in self.facts}[fact_id]

    def facts_by_role(self, role: str) -> tuple[Fact, ...]:
        return tuple(f for f in self.facts if f.role == role)

    @property
    def option_ids(self) -> tuple[str, ...]:
        return tuple(o.id for o in self.options)


def scores(template: Template, facts: Iterable[Fact]) -> dict[str, int]:
    """Score of each option over ``facts``: sum of polarities of the *relevant* facts about it."""
    out = {o: 0 for o in template.option_ids}
    for f in facts:
        if f.relevant:
            out[f.about] += f.polarity
    return out


def _strict_winner(score: dict[str, int]) -> Optional[str]:
    best = max(score.values())
    top = [o for o, s in score.items() if s == best]
    return top[0] if len(top) == 1 else None


def _mentions(text: str, name: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", text, re.IGNORECASE) is not None


def validate_template(t: Template, path: str = "<template>", n_options: int = 3,
                      tokenizer=None) -> list[str]:
    """Apply rules 1-6 to ``t``; raise :class:`TemplateError` on the first broken rule. With a ``tokenizer``
    (``name``, ``count(text)``) return (and warn, :class:`TemplateWarning`) the fact-length warnings."""
    R4, R5 = "rule 4 (role structure)", "rule 5 (hint check)"
    # --- structure: options, criteria, ids -------------------------------------------
    if len(t.options) != n_options:
        raise TemplateError(path, "options", R4, f"expected {n_options} options, found {len(t.options)}")
    ids = [o.id for o in t.options]
    if len(set(ids)) != len(ids):
        raise TemplateError(path, "options", R4, f"option ids are not distinct: {ids}")
    for fld in ("correct_option", "decoy_option"):
        if getattr(t, fld) not in ids:
            raise TemplateError(path, fld, R4, f"'{getattr(t, fld)}' is not an option id")
    if t.decoy_option == t.correct_option:
        raise TemplateError(path, "decoy_option", R4, "decoy option equals the correct option")
    if not 2 <= len(t.criteria) <= 6:
        raise TemplateError(path, "criteria", R4, f"expected 2-6 criteria, found {len(t.criteria)}")
    crit_ids = {c.id for c in t.criteria}
    if len(crit_ids) != len(t.criteria):
        raise TemplateError(path, "criteria", R4, "criterion ids are not distinct")
    if len(t.facts) != N_FACTS:
        raise TemplateError(path, "facts", R4, f"expected {N_FACTS} facts, found {len(t.facts)}")
    seen_ids, seen_texts = set(), {}
    for i, f in enumerate(t.facts):
        fld = f"facts[{i}]"
        if not FACT_ID_RE.match(f.id):
            raise TemplateError(path, f"{fld}.id", R4, f"fact id '{f.id}' is not neutral (expected F01-F12)")
        if f.id in seen_ids:
            raise TemplateError(path, f"{fld}.id", R4, f"duplicate fact id '{f.id}'")
        seen_ids.add(f.id)
        key = f.text.lower()
        if key in seen_texts:
            raise TemplateError(path, f"{fld}.text", R4, f"same text as facts[{seen_texts[key]}]")
        seen_texts[key] = i
        if f.about not in ids:
            raise TemplateError(path, f"{fld}.about", R4, f"'{f.about}' is not an option id")
        if f.relevant:
            if f.criterion is None:
                raise TemplateError(path, f"{fld}.criterion", R4, f"a {f.role} fact must name a criterion")
            if f.criterion not in crit_ids:
                raise TemplateError(path, f"{fld}.criterion", R4, f"'{f.criterion}' is not a criterion id")
        elif f.criterion is not None:
            raise TemplateError(path, f"{fld}.criterion", R4, "an irrelevant fact bears on no criterion (use null)")
    # --- rules 1-3: the answer key ---------------------------------------------------
    checks = (
        ("rule 1 (all facts: correct wins strictly)", t.facts, t.correct_option),
        ("rule 2 (decoy group only: decoy wins strictly)", t.facts_by_role("decoy"), t.decoy_option),
        ("rule 3 (support group only: correct wins strictly)", t.facts_by_role("support"), t.correct_option),
    )
    for rule, facts, want in checks:
        sc = scores(t, facts)
        if _strict_winner(sc) != want:
            raise TemplateError(path, "facts", rule, f"scores {sc}; expected '{want}' to win strictly")
    # --- role counts and polarities --------------------------------------------------
    found: Counter = Counter()
    for i, f in enumerate(t.facts):
        about = "any" if f.role == "irrelevant" else {t.correct_option: "correct", t.decoy_option: "decoy"}.get(f.about)
        if about is None:
            raise TemplateError(path, f"facts[{i}].about", R4,
                                f"a {f.role} fact must be about the correct or the decoy option")
        key = (f.role, about, f.polarity)
        if key not in ROLE_STRUCTURE:
            raise TemplateError(path, f"facts[{i}].polarity", R4,
                                f"no {f.role} fact may have polarity {f.polarity:+d} about the {key[1]} option")
        found[key] += 1
    for key, n in ROLE_STRUCTURE.items():
        if found[key] != n:
            role, about, pol = key
            raise TemplateError(path, "facts", R4,
                                f"expected {n} {role} facts with polarity {pol:+d}"
                                + ("" if about == "any" else f" about the {about} option") + f", found {found[key]}")
    # --- rule 5: hints ---------------------------------------------------------------
    for fld, text in _hint_fields(t):
        if h := hints.find_hint(text):
            raise TemplateError(path, fld, R5, hints.describe(h))
        if c := hints.find_address(text) or (hints.find_comparison(text, n_options) if fld.startswith("facts[") else None):
            raise TemplateError(path, fld, R5, hints.describe_comparison(c))
    for i, f in enumerate(t.facts):
        named = [o.id for o in t.options if any(_mentions(f.text, n) for n in o.names())]
        if f.about not in named:
            raise TemplateError(path, f"facts[{i}].text", R5,
                                f"the fact does not name the option it is about ('{t.option(f.about).name}')")
        if len(named) > 1:
            raise TemplateError(path, f"facts[{i}].text", R5,
                                f"the fact names several options {named}: facts must not compare options")
    check_paraphrases(t, path, n_options)
    # --- warnings: fact length -------------------------------------------------------
    if tokenizer is None:
        return []
    lo, hi = FACT_TOKENS_WARN
    msgs = [f"{path}: field 'facts[{i}].text': fact length {n} tokens ({tokenizer.name}) is outside {lo}-{hi}; "
            f"the paper's R1 composition in PSP at r=.6 may not hold"
            for i, n in enumerate(tokenizer.count(f.text) for f in t.facts) if not lo <= n <= hi]
    for m in msgs:
        warnings.warn(m, TemplateWarning, stacklevel=2)
    return msgs


PARAPHRASES = "rule 6 (paraphrases)"
MIN_PARAPHRASES = 2


def paraphrase_count(t: Template) -> int:
    """Complete paraphrase sets of ``t`` (the fewest paraphrases any fact has; 0: none)."""
    return min(len(f.paraphrases) for f in t.facts) if t.facts else 0


def paraphrase_set(t: Template, k: int) -> Template:
    """``t`` with every fact's text replaced by its paraphrase ``k`` (0-based; where the set is incomplete, a fact
    without paraphrase ``k`` keeps its text) and no paraphrases: the template the answer-key, hint and design rules
    are computed on for that set."""
    facts = tuple(f.model_copy(update=dict(text=f.paraphrases[k] if len(f.paraphrases) > k else f.text, paraphrases=()))
                  for f in t.facts)
    return t.model_copy(update=dict(facts=facts))


def check_paraphrases(t: Template, path: str = "<template>", n_options: int = 3) -> None:
    """Rule 6: paraphrases are optional, but a template that has any gives every fact at least
    :data:`MIN_PARAPHRASES`, each distinct (case aside) from its fact's text and its other
    paraphrases; and each paraphrase set (:func:`paraphrase_set`) passes rules 1-5 like the facts.
    An error names the template file, the field ``facts[i].paraphrases[k]``, the fact id and the rule."""
    if not any(f.paraphrases for f in t.facts):
        return
    for i, f in enumerate(t.facts):
        if len(f.paraphrases) < MIN_PARAPHRASES:
            raise TemplateError(path, f"facts[{i}].paraphrases", PARAPHRASES,
                                f"fact {f.id} has {len(f.paraphrases)} paraphrase(s); a template with paraphrases "
                                f"gives every fact at least {MIN_PARAPHRASES}")
        seen = {f.text.lower(): "its text"}
        for k, p in enumerate(f.paraphrases):
            if p.lower() in seen:
                raise TemplateError(path, f"facts[{i}].paraphrases[{k}]", PARAPHRASES,
                                    f"fact {f.id}: paraphrase {k} repeats {seen[p.lower()]}")
            seen[p.lower()] = f"paraphrase {k}"
    for k in range(max(len(f.paraphrases) for f in t.facts)):
        try:
            validate_template(paraphrase_set(t, k), path, n_options=n_options)
        except TemplateError as e:
            fld = e.field
            if fld.startswith("facts[") and fld.endswith(".text"):
                i = int(fld[6:fld.index("]")])
                fld = f"facts[{i}].paraphrases[{k}]"
                detail = f"fact {t.facts[i].id}, paraphrase {k}: {e.detail}"
            else:
                detail = f"paraphrase set {k}: {e.detail}"
            raise TemplateError(path, fld, e.rule, detail) from None


def _hint_fields(t: Template) -> list[tuple[str, str]]:
    """Every free text of a template that rule 5 reads, with its field name."""
    out = [("title", t.title), ("description", t.description), ("domain", t.domain)]
    out += [(f"criteria[{i}].name", c.name) for i, c in enumerate(t.criteria)]
    for i, o in enumerate(t.options):
        out.append((f"options[{i}].name", o.name))
        out += [(f"options[{i}].aliases[{j}]", a) for j, a in enumerate(o.aliases)]
    return out + [(f"facts[{i}].text", f.text) for i, f in enumerate(t.facts)]


def parse_template(path: Path | str, text: Optional[str] = None) -> Template:
    """Parse one file (or ``text`` said to come from it) into a :class:`Template` (types only), after the
    file guards and the strict YAML loader; the same file text is parsed once per process (a grid reloads
    the same 60 files on every run; an edited file is a new text; a Template is frozen)."""
    return _parse(path, read_template_text(path) if text is None else text, domains_for(path))


@lru_cache(maxsize=4096)
def _parse(path: Path | str, text: str, domains: frozenset[str]) -> Template:
    raw = parse_yaml(path, text)
    if not isinstance(raw, dict):
        raise TemplateError(path, "<file>", "schema", "a template file must hold a mapping"
                            f" (found {type(raw).__name__ if raw is not None else 'an empty file'})")
    try:
        return Template.model_validate(raw, context={"domains": domains})
    except ValidationError as e:
        err = e.errors()[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if j else str(p))
                      for j, p in enumerate(err["loc"]))
        raise TemplateError(path, loc or "<file>", _RULES.get(err["type"], "schema"), err["msg"]) from None


def load_template(path: Path | str, n_options: int = 3, tokenizer=None) -> Template:
    """Load and validate one template file."""
    t = parse_template(path)
    validate_template(t, str(path), n_options=n_options, tokenizer=tokenizer)
    return t


UNIQUE_ID = "unique template id"


def load_templates(paths, n_options: int = 3, tokenizer=None) -> list[Template]:
    """Load and validate every template under ``paths``; raise on the first invalid file or repeated id."""
    out, seen = [], {}
    for p in template_paths(paths):
        t = load_template(p, n_options=n_options, tokenizer=tokenizer)
        if t.id in seen:
            raise TemplateError(p, "id", UNIQUE_ID, f"template id '{t.id}' also used by {seen[t.id]}")
        seen[t.id] = p
        out.append(t)
    return out
