"""The HiddenBench run configuration: :class:`HBConfig`, built by ``crossprofile hiddenbench run`` and recorded in
``hiddenbench_run.json`` (secrets masked); a pydantic dataclass like :class:`~crossprofile_lib.run.config.RunConfig`.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

from pydantic import Field
from pydantic.dataclasses import dataclass

from crossprofile_lib.config import MODEL_CONFIG, Budgets, Seeds, check_known, checked, distinct_list
from crossprofile_lib.design import HB_POLICIES
from crossprofile_lib.hiddenbench.ablations import DEFAULT_ABLATIONS, parse_ablations
from crossprofile_lib.hiddenbench.common import HB_BUDGETS
from crossprofile_lib.hiddenbench.natural import MAX_WORDS
from crossprofile_lib.run.config import BackendSpec, Policies

PROTOCOLS = ("controlled", "natural")
Protocols = Annotated[tuple[str, ...], checked(lambda names: check_known(names, PROTOCOLS, "protocol"), "protocol"),
                      distinct_list("protocol")]
Ablations = Annotated[tuple[str, ...], checked(parse_ablations, "ablation"), distinct_list("ablation")]
TaskIds = Annotated[tuple[str, ...], distinct_list("task id")]


@dataclass(config=MODEL_CONFIG, frozen=True)
class HBConfig:
    """One HiddenBench run: its protocols on one backend over a HiddenBench file's tasks."""

    backend: BackendSpec = "ledger"
    """``ledger`` (composition only: it decides nothing) or ``provider/model`` (``--backend``)."""
    hiddenbench: Optional[str] = None
    """The HiddenBench file (``--hiddenbench``), read in place; None: ``$HIDDENBENCH_PATH``, else the fixture."""
    protocols: Protocols = ("controlled",)
    """``controlled`` (scripted disclosure) and/or ``natural`` (a model's discussion; needs chat) (``--protocol``)."""
    seeds: Seeds = (0, 1, 2)
    """Distinct seeds in ``0..2^32-1`` (``--seeds``)."""
    ablations: Ablations = DEFAULT_ABLATIONS
    """The natural protocol's prompt ablations, or ``all`` (``--ablations``)."""
    policies: Policies = HB_POLICIES
    """Distinct policy specs (``--policies``); those the backend cannot run are skipped (why: in the header)."""
    budgets: Budgets = HB_BUDGETS
    """Distinct token budgets (``--budgets``)."""
    tasks: Optional[TaskIds] = None
    """Task ids to run (``--tasks``); None: every valid task."""
    limit: Optional[Annotated[int, Field(ge=1)]] = None
    """Run the first N tasks only (``--limit``)."""
    batch_tasks: Annotated[int, Field(ge=1)] = 4
    """Tasks per lockstep chunk, at least 1 (``--batch-tasks``): one chunk of transcripts is held in memory."""
    max_words: Annotated[int, Field(ge=1)] = MAX_WORDS
    """The word limit the natural protocol's round messages are asked for (``--max-words``)."""
    confirm_duplicates: bool = False
    """Ask the model to confirm near-duplicate claims in the grey zone (``--confirm-duplicates``)."""
    constrained_votes: bool = False
    """Send the vote's JSON schema (constrained decoding where the backend has it) (``--constrained-votes``)."""
    tokenizer: Optional[str] = None
    """The budgets' tokenizer (as for a grid run; ``--tokenizer``)."""
    backend_options: dict[str, Any] = Field(default_factory=dict)
    """Keyword options of the backend's class (``--backend-option``); secret-named values are masked."""
    resume: bool = True
    """Skip sessions already on file for the same configuration (``--fresh``: False)."""
