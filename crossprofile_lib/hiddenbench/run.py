"""Run HiddenBench (controlled and/or natural) into a folder, streaming artefacts per chunk.

Layout of ``DIR`` (every table carries ``data_source``, ``backend`` and ``model``):

* ``hiddenbench_run.json`` -- resolved configuration, data source, backend, model,
  tokenizer, prompt files with their SHA-256, skipped policies and why, counts, headroom,
  package version and git commit;
* ``hiddenbench_controlled.parquet`` -- one row per (task, seed, policy, budget);
* ``hiddenbench_natural_decisions.parquet`` -- one row per (task, seed, ablation, policy, budget);
* ``hiddenbench_natural_votes.parquet`` -- one row per (task, seed, ablation, agent, phase);
* ``hiddenbench_natural_sessions.parquet`` -- one row per (task, seed, ablation): group vote,
  disclosure, invalid and fallback counts;
* ``artefacts/{controlled,natural}.jsonl`` -- one JSON line per session with everything it
  produced (facts as each agent saw them, votes with raw replies, messages, extracted and
  merged claims, every memory's text, decisions, the call log) and its table rows.

**Streaming and resuming.** Tasks run in chunks of ``batch_tasks`` (all seeds and ablations
of a chunk in lockstep); each finished session is appended to its ``.jsonl`` at once, so no
more than one chunk of transcripts is held in memory. A line records the hash of the
configuration that produced it; a rerun with the same configuration skips the sessions
already on file (and the backend's call cache answers any repeated call), so an interrupted
run resumes where it stopped. The tables are rebuilt at the end by streaming the ``.jsonl``
(rows only), keeping the last record of each session.

**Failed calls.** A model call that still failed after its retries makes an error row, exactly
as in ``crossprofile run``: column ``error`` set (a natural session with a failed call is failed
in every row: votes, session and decisions), ``correct`` missing. Such a session is never resumed
as finished: the rerun runs it again (its finished calls come from the cache) and its new record
replaces the old one. ``hiddenbench_run.json`` counts them (``errors``, ``failed_sessions``, and
per protocol per table) and the command exits 1; every table refuses them (:mod:`measures`).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import pandas as pd

from crossprofile_lib.backends import backend_for
from crossprofile_lib.hiddenbench.ablations import parse_ablations, prompt_files
from crossprofile_lib.hiddenbench.common import PolicyPlan, record_errors
from crossprofile_lib.hiddenbench.config import PROTOCOLS, HBConfig  # noqa: F401  (re-exported)
from crossprofile_lib.hiddenbench.controlled import run_controlled_chunk
from crossprofile_lib.hiddenbench.importer import HiddenBenchData, load_hiddenbench, select_tasks
from crossprofile_lib.hiddenbench.measures import headroom
from crossprofile_lib.hiddenbench.natural import run_natural_chunk
from crossprofile_lib.prompts import prompt_dir
from crossprofile_lib.run.results import run_header, stamp
from crossprofile_lib.safety.outputs import atomic_write, locked_dir, write_error, write_text_atomic
from crossprofile_lib.safety.redact import redact_options
from crossprofile_lib.stats.analysis_set import failed_mask

TABLES = {"controlled": {"decisions": "hiddenbench_controlled.parquet"},
          "natural": {"decisions": "hiddenbench_natural_decisions.parquet",
                      "votes": "hiddenbench_natural_votes.parquet",
                      "sessions": "hiddenbench_natural_sessions.parquet"}}
HEADER = "hiddenbench_run.json"


def _file_sha(name: str) -> str:
    return hashlib.sha256((prompt_dir() / name).read_bytes()).hexdigest()


def _config_sha(cfg: HBConfig, protocol: str, backend, data: HiddenBenchData, prompts: dict) -> str:
    d = dict(protocol=protocol, backend=backend.name, model=backend.model, tokenizer=backend.tokenizer.name,
             decision_mode=backend.decision_mode,
             backend_options=redact_options(cfg.backend_options),
             data=data.data_source if not data.is_fixture else f"fixture@{data.sha256[:12]}",
             policies=list(cfg.policies), budgets=list(cfg.budgets))
    if protocol == "natural":
        d.update(max_words=cfg.max_words, confirm=cfg.confirm_duplicates, prompts=prompts)
        if cfg.constrained_votes:  # only when on, so earlier runs' hashes stay valid
            d["constrained_votes"] = True
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _session_key(rec: dict) -> str:
    return f"{rec['task_id']}/s{rec['seed']}/{rec['ablation']}"


def iter_artefacts(out_dir: Path | str, protocol: str, config_sha: Optional[str] = "current") -> Iterator[dict]:
    """Stream the session records of ``DIR/artefacts/<protocol>.jsonl`` (a torn last line is skipped).

    ``config_sha``: ``"current"`` (default) keeps the records of the configuration in
    ``DIR/hiddenbench_run.json`` (all records when there is no header yet); ``None`` keeps all;
    a hash keeps that configuration's records.
    """
    f = Path(out_dir) / "artefacts" / f"{protocol}.jsonl"
    if not f.exists():
        return
    if config_sha == "current":
        try:
            config_sha = json.loads((Path(out_dir) / HEADER).read_text())["protocols"][protocol]["config_sha"]
        except (OSError, ValueError, KeyError):
            config_sha = None
    with f.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if config_sha is None or rec.get("config_sha") == config_sha:
                yield rec


def _chunks(seq: list, n: int):
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


def _last_records(out: Path, protocol: str, sha: str) -> list[dict]:
    """The last record of each session (rows and error count only)."""
    last: dict[str, dict] = {}
    for rec in iter_artefacts(out, protocol, sha):
        last[_session_key(rec)] = dict(rows=rec["rows"], errors=record_errors(rec))
    return [last[k] for k in sorted(last)]


def _collect(out: Path, protocol: str, sha: str) -> dict[str, pd.DataFrame]:
    last: dict[str, dict] = {}
    for rec in iter_artefacts(out, protocol, sha):
        last[_session_key(rec)] = rec["rows"]   # rows only; artefacts are dropped as we go
    frames = {}
    for name, fname in TABLES[protocol].items():
        rows = [r for k in sorted(last) for r in last[k].get(name, [])]
        df = pd.DataFrame(rows)
        if "error" in df:  # records written before the error column: none is set there
            df["error"] = df["error"].fillna("").astype(str)
        elif len(df):
            df["error"] = ""
        if protocol == "controlled" and "correct" in df:
            df["correct"] = df["correct"].astype("boolean")
        frames[name] = df
        with atomic_write(out / fname) as tmp:
            df.to_parquet(tmp, index=False)
    return frames


def run_hiddenbench(cfg: HBConfig, out_dir: Path | str, backend=None, progress: bool = False) -> dict:
    """Run the configured protocols into ``out_dir``; return the header (also written). The folder
    is locked for the whole run (:func:`crossprofile_lib.safety.outputs.locked_dir`)."""
    with locked_dir(out_dir):
        return _run_locked(cfg, out_dir, backend, progress)


def _run_locked(cfg: HBConfig, out_dir: Path | str, backend=None, progress: bool = False) -> dict:
    t0 = time.perf_counter()
    data = load_hiddenbench(cfg.hiddenbench)
    tasks = select_tasks(data, list(cfg.tasks) if cfg.tasks else None, cfg.limit)
    if not tasks:
        first = "; ".join(str(e) for e in data.errors[:3]) + ("; ..." if len(data.errors) > 3 else "")
        raise ValueError(f"{data.path}: no valid task to run ({len(data.errors)} malformed record(s): {first})")
    backend = backend or backend_for(cfg)
    out = Path(out_dir)
    (out / "artefacts").mkdir(parents=True, exist_ok=True)
    prompts = {p: _file_sha(p) for p in prompt_files()}
    base = dict(data_source=data.data_source, backend=backend.name, model=backend.model,
                decision_mode=backend.decision_mode, tokenizer=backend.tokenizer.name)
    header = run_header(cfg, backend)
    header.update(data_source=data.data_source, data_path=str(data.path), data_sha256=data.sha256,
                  data_is_fixture=data.is_fixture, data_notes=list(data.notes),
                  malformed_records=[str(e) for e in data.errors], n_tasks=len(tasks),
                  n_tasks_in_file=len(data.tasks), prompts=prompts, protocols={})
    ablations = parse_ablations(list(cfg.ablations))
    for protocol in cfg.protocols:
        plan = PolicyPlan.for_backend(cfg.policies, backend, protocol)
        sha = _config_sha(cfg, protocol, backend, data, prompts)
        # a session with a failed call is never resumed as finished: it runs again (its calls come from the cache)
        done = ({_session_key(r) for r in iter_artefacts(out, protocol, sha) if not record_errors(r)}
                if cfg.resume else set())
        n_new = n_skip = 0
        path = out / "artefacts" / f"{protocol}.jsonl"
        if not cfg.resume and path.exists():
            path.unlink()
        for chunk in _chunks(tasks, cfg.batch_tasks):
            if protocol == "controlled":
                units = [(t, s) for t in chunk for s in cfg.seeds if f"{t.id}/s{s}/scripted" not in done]
                n_skip += len(chunk) * len(cfg.seeds) - len(units)
                records = run_controlled_chunk(units, plan, cfg.budgets, backend, base) if units else []
            else:
                units = [(t, s, a) for t in chunk for s in cfg.seeds for a in ablations
                         if f"{t.id}/s{s}/{a.name}" not in done]
                n_skip += len(chunk) * len(cfg.seeds) * len(ablations) - len(units)
                records = (run_natural_chunk(units, plan, cfg.budgets, backend, base, cfg.max_words,
                                             cfg.confirm_duplicates, cfg.constrained_votes) if units else [])
            try:
                with path.open("a", encoding="utf-8") as fh:
                    for rec in records:
                        rec["config_sha"] = sha
                        fh.write(json.dumps(rec, default=str) + "\n")
                        n_new += 1
            except OSError as e:  # a full disk: named; the sessions already on file are kept (a torn line is skipped)
                raise write_error(path, e, "cannot append to") from None
            if progress:
                print(f"[hiddenbench {protocol}] {chunk[-1].id}: {n_new} new, {n_skip} resumed", flush=True)
        frames = _collect(out, protocol, sha)
        info = dict(config_sha=sha, sessions_run=n_new, sessions_resumed=n_skip,
                    policies=[s.name for s in plan.specs], skipped_policies=plan.skipped,
                    rows={k: len(v) for k, v in frames.items()},
                    errors={k: int(failed_mask(v).sum()) for k, v in frames.items()},
                    failed_sessions=sum(1 for r in _last_records(out, protocol, sha) if record_errors(r)))
        d = frames["decisions"]
        failed = bool(len(d)) and bool(failed_mask(d).any())
        h = headroom(d, np.random.default_rng(0)) if len(d) and "decided" in d and not failed else None
        info["headroom"] = h.as_dict() if h else None
        if failed:
            info["headroom_note"] = "not computed: the decisions table holds failed model calls"
        if protocol == "natural" and len(frames["votes"]):
            v, s = frames["votes"], frames["sessions"]
            info.update(invalid_votes=int(v.invalid.sum()), vote_retries=int(v.retried.sum()),
                        extraction_fallbacks=int(s.extraction_fallbacks.sum()),
                        chat_errors=int(s.chat_errors.sum()))
        header["protocols"][protocol] = info
    header.update(errors=sum(sum(i["errors"].values()) for i in header["protocols"].values()),
                  failed_sessions=sum(i["failed_sessions"] for i in header["protocols"].values()))
    header.update(backend.record() if hasattr(backend, "record") else {})  # after the calls: the limits reached
    stamp(header, t0)
    write_text_atomic(out / HEADER, json.dumps(header, indent=2, sort_keys=True, default=str) + "\n")
    return header


def read_tables(out_dir: Path | str, protocol: str) -> dict[str, pd.DataFrame]:
    """The protocol's tables from a run folder (names as in :data:`TABLES`)."""
    out = Path(out_dir)
    frames = {}
    for name, fname in TABLES[protocol].items():
        f = out / fname
        if not f.exists():
            raise FileNotFoundError(f"{f}: no {protocol} table (run 'crossprofile hiddenbench run "
                                    f"--protocol {protocol} --out {out}' first)")
        frames[name] = pd.read_parquet(f)
    return frames
