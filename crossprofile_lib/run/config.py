"""The run configuration: :class:`RunConfig`, one grid on one backend, built by ``crossprofile run`` and the book and
recorded in ``run.json`` (secrets masked). A pydantic dataclass: a bad value raises a :class:`ValueError` naming the
field and the rule; budgets are parsed into :class:`~crossprofile_lib.config.Budget`; lists become tuples.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import Field
from pydantic.dataclasses import dataclass

from crossprofile_lib.config import MODEL_CONFIG, Budgets, Paths, Seeds, Variants, checked, distinct_list
from crossprofile_lib.design import BUDGET_GRID, DEFAULT_POLICIES, N_AGENTS, VARIANT_NAMES
from crossprofile_lib.policies import parse_policy
from crossprofile_lib.task.messy import DEFAULT_OPINION_RATE


def check_backend_name(spec: str) -> None:
    """``ledger`` or ``provider/model``. Whether the provider is one of the suite's is checked when the backend
    is built from the name (:func:`crossprofile_lib.backends.get_backend`; the command line checks it first):
    a backend of your own, passed to the runner as an object, may carry any name."""
    provider, slash, model = spec.partition("/")
    if not provider.strip() or spec != spec.strip() or (slash and not model.strip()):
        raise ValueError(f"backend '{spec}' is not 'ledger' or 'provider/model'")


BackendSpec = Annotated[str, checked(check_backend_name, "backend")]
#: Every policy spec is one the registry knows (``BASE[-kK][:FORMAT]``, :func:`parse_policy`).
Policies = Annotated[tuple[str, ...], checked(lambda specs: [parse_policy(p) for p in specs], "policy"),
                     distinct_list("policy")]


@dataclass(config=MODEL_CONFIG, frozen=True)
class RunConfig:
    """One grid: templates x variants x seeds x policies x budgets, decided by one backend."""

    backend: BackendSpec = "ledger"
    """``ledger`` (the reference decider) or ``provider/model`` with a known provider (``--backend``)."""
    templates: Paths = ("templates",)
    """Template files, folders or globs (``--templates``); ``templates/...`` not found in the working folder
    means the bundled templates."""
    seeds: Seeds = (0, 1, 2)
    """Distinct seeds in ``0..2^32-1``; each seed deals the facts and rotates the options (``--seeds``)."""
    budgets: Budgets = BUDGET_GRID
    """Distinct token budgets: ratios of ``T_all`` in (0, 1] and fixed counts (``128t``) (``--budgets``)."""
    policies: Policies = DEFAULT_POLICIES
    """Distinct policy specs ``BASE[-kK][:FORMAT]`` (``--policies``; default: the paper's grid)."""
    variants: Variants = VARIANT_NAMES
    """Distinct attribution variants, three letters of P/S (``--variants``; default: all 8)."""
    n_agents: Annotated[int, Field(ge=2)] = N_AGENTS
    """Agents per discussion, at least 2 (``--agents``)."""
    n_options: Annotated[int, Field(ge=2)] = 3
    """Options per template, at least 2 (``--options``): templates with another count are refused."""
    tokenizer: Optional[str] = None
    """The budgets' tokenizer: ``offline``, ``gguf:PATH``, ``hf:FOLDER`` or ``PATH/tokenizer.json``; None: the
    backend's (``--tokenizer``)."""
    protocol: Literal["scripted", "messy"] = "scripted"
    """The controlled discussion (``--protocol``): ``scripted`` (SPEC section 4, every fact verbatim; the
    default) or ``messy`` (paraphrases, restatements and fact-less lines: :mod:`crossprofile_lib.task.messy`)."""
    extraction: Literal["oracle", "exact", "fuzzy", "model"] = "oracle"
    """Claim extraction (``--extraction``, :mod:`crossprofile_lib.task.extraction`): ``oracle`` (by fact: the
    scripted protocol's only level), ``exact``, ``fuzzy`` or ``model`` (a model backend's extractor)."""
    opinion_rate: Annotated[float, Field(ge=0.0, le=1.0)] = DEFAULT_OPINION_RATE
    """The messy protocol's share of fact lines followed by a fact-less line, in [0, 1] (``--opinion-rate``;
    default :data:`crossprofile_lib.task.messy.DEFAULT_OPINION_RATE`); not used by the scripted protocol."""
    backend_options: dict[str, Any] = Field(default_factory=dict)
    """Keyword options of the backend's class, e.g. ``social_proof`` for the ledger (``--backend-option``
    and the model options); values named like a secret are masked in ``run.json``."""


#: the fields of the messy protocol (issue 27); a scripted run's record leaves them out
PROTOCOL_FIELDS = ("protocol", "extraction", "opinion_rate")


def protocol_free(d: dict) -> dict:
    """A configuration dict as recorded: a scripted run's without :data:`PROTOCOL_FIELDS`, so its ``run.json``
    (and the book's stored-run comparison) is what it was before the messy protocol existed."""
    if d.get("protocol", "scripted") == "scripted":
        return {k: v for k, v in d.items() if k not in PROTOCOL_FIELDS}
    return dict(d)
