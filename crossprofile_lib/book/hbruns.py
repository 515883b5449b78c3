"""HiddenBench run folders for the book (chapters 8 and 11): :class:`HBRun`, :func:`hiddenbench_run`, and adapters
that turn its decided rows into a :class:`~crossprofile_lib.book.runs.Run` for the paper comparison."""

from __future__ import annotations

import json
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from crossprofile_lib.book.runs import (
    REFERENCE,
    UNAVAILABLE,
    Run,
    _jsonable,
    _stored,
    _stored_config,
    _stored_policy_files,
    config_digest,
    model_who,
    own_folder,
    reference_who,
    resolve,
    slug,
)
from crossprofile_lib.hiddenbench.ablations import DEFAULT_ABLATIONS
from crossprofile_lib.hiddenbench.run import HEADER, HBConfig, read_tables, run_hiddenbench
from crossprofile_lib.policies.plugins import sources as plugin_sources
from crossprofile_lib.run.results import config_record
from crossprofile_lib.safety.outputs import locked_dir
from crossprofile_lib.stats.analysis_set import check_failed_calls


@dataclass
class HBRun:
    """A HiddenBench run folder: its header and, per protocol, its tables."""

    path: Path
    header: dict
    tables: dict

    @property
    def backend(self) -> str:
        return str(self.header.get("backend", "?"))

    @property
    def model(self) -> str:
        return str(self.header.get("model", "?"))

    @property
    def is_reference(self) -> bool:
        return self.backend == "ledger"

    @property
    def label(self) -> str:
        return (f"{REFERENCE} (ledger)" if self.is_reference else
                f"{self.backend} ({self.header.get('decision_mode', '?')} mode)")

    @property
    def who(self) -> str:
        base = reference_who(self.model) if self.is_reference else model_who(self.backend, self.model, self.header)
        return f"{base} Data: {self.header.get('data_source', '?')}."

    def decisions(self, protocol: str = "controlled") -> pd.DataFrame:
        return self.tables.get(protocol, {}).get("decisions", pd.DataFrame())


def hiddenbench_run(runs_root: str | Path, backend: str = "ledger", path: str = "", protocols=("controlled",),
                    seeds=(0, 1, 2), ablations=None, limit: Optional[int] = None,
                    policies: Optional[Sequence[str]] = None, budgets: Optional[Sequence[str]] = None,
                    skipped: Optional[dict] = None, backend_options: Optional[dict] = None) -> Optional[HBRun]:
    """Run (or resume) HiddenBench into ``runs/hiddenbench-<backend>`` (its own folder for another
    configuration); None when ``backend`` cannot run here (reason in ``skipped``). ``path`` = "": $HIDDENBENCH_PATH
    or the fixture, read in place, never copied."""
    skipped = {} if skipped is None else skipped
    backend = backend or "ledger"
    key = f"hiddenbench:{backend}"
    given = {"policies": tuple(policies or ()), "budgets": tuple(budgets or ()), "backend_options": dict(backend_options or {})}
    cfg = HBConfig(backend=backend, hiddenbench=path or None, protocols=tuple(protocols), seeds=tuple(seeds),
                   ablations=tuple(ablations or DEFAULT_ABLATIONS), limit=limit, **{k: v for k, v in given.items() if v})
    want = _jsonable(config_record(cfg))  # as the header records it (backend options redacted)
    out = own_folder(resolve(Path(runs_root) / f"hiddenbench-{slug(backend)}"), want, HEADER)
    mine = plugin_sources(cfg.policies)  # policies of your own: a stored run counts only with the same file hashes
    if mine and _stored_policy_files(out, HEADER) not in (None, mine):
        out = out.with_name(f"{out.name}-{config_digest({'config': want, 'policy_files': mine})}")
    hdr = out / HEADER
    try:
        if _stored_config(out, HEADER) != want or (_stored(out, HEADER) or {}).get("errors") or \
                (mine and _stored_policy_files(out, HEADER) != mine):  # failed sessions are run again
            out.mkdir(parents=True, exist_ok=True)
            with locked_dir(out):
                run_hiddenbench(cfg, out)
    except UNAVAILABLE as e:
        skipped[key] = f"{type(e).__name__}: {e}"
        if not hdr.exists():
            return None
    header = json.loads(hdr.read_text())
    if header.get("errors"):  # failed model calls are not results: no table shows them
        skipped[key] = (f"{header['errors']} rows of {out} are failed model calls ({header.get('failed_sessions', 0)} "
                        f"sessions; column 'error'); rerun when the server answers (finished calls come from the cache)")
        return None
    tables = {}
    for p in protocols:
        with suppress(FileNotFoundError):
            tables[p] = read_tables(out, p)
    return HBRun(out, header, tables)


#: The pseudo-policy under which :func:`hb_natural_as_run` files each session's group vote.
GROUP_VOTE = "group vote"


def hb_as_run(hb: Optional[HBRun], protocol: str = "controlled") -> Optional[Run]:
    """A protocol's decided rows as a :class:`Run` (unit: the task), or None when nothing was decided."""
    if hb is None:
        return None
    d, _ = check_failed_calls(hb.decisions(protocol), False, f"{hb.path}: the HiddenBench {protocol} decisions")
    if d.empty or "decided" not in d or not d["decided"].any():
        return None
    d = d[d["decided"].astype(bool)].copy()
    d["correct"] = d["correct"].astype(bool)
    return Run(hb.path, d, dict(hb.header, config={}))


def hb_natural_as_run(hb: Optional[HBRun]) -> Optional[Run]:
    """The natural discussion as one :class:`Run`: memory-policy rows plus a ``"group vote"`` row per session
    (majority right, ``budget_label`` ``none``, with ``disclosure_rate``); None without a natural run."""
    if hb is None or "natural" not in hb.tables:
        return None
    decided = hb_as_run(hb, "natural")
    s, _ = check_failed_calls(hb.tables["natural"].get("sessions", pd.DataFrame()), False,
                              f"{hb.path}: the HiddenBench natural sessions")
    parts = [decided.df] if decided is not None else []
    if not s.empty:
        parts.append(pd.DataFrame({"task_id": s["task_id"], "seed": s["seed"], "ablation": s["ablation"],
                                   "policy": GROUP_VOTE, "budget_label": "none",
                                   "correct": s["group_correct"].astype(bool),
                                   "disclosure_rate": s["disclosure_rate"].astype(float)}))
    if not parts:
        return None
    return Run(hb.path, pd.concat(parts, ignore_index=True), dict(hb.header, config={}))


