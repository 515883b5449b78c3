"""Run HiddenBench (controlled and/or natural) into ``DIR``, streaming artefacts per chunk. Every table carries
``data_source``, ``backend`` and ``model``: ``hiddenbench_run.json`` (configuration, data source, prompt files with
their SHA-256, skipped policies, counts, headroom, version); ``hiddenbench_controlled.parquet`` (per task, seed,
policy, budget); ``hiddenbench_natural_decisions.parquet`` (also per ablation), ``_votes.parquet`` (per agent and
phase), ``_sessions.parquet`` (group vote, disclosure, counts); ``artefacts/{controlled,natural}.jsonl`` (one line per
session: everything it produced and its rows).

**Resuming.** Tasks run in chunks of ``batch_tasks``; each finished session is appended at once with the hash of its
configuration, and a rerun with the same configuration skips the sessions on file. The tables are rebuilt from the
``.jsonl`` (the last record of each session). **Failed calls** make error rows as in ``crossprofile run`` (a natural
session with one is failed in every row); such a session is run again on resume, counted in the header, and the
command exits 1.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import pandas as pd

from crossprofile_lib.backends import backend_for
from crossprofile_lib.hiddenbench.ablations import parse_ablations, prompt_files
from crossprofile_lib.hiddenbench.common import PolicyPlan, json_sha, record_errors, run_controlled_chunk
from crossprofile_lib.hiddenbench.config import PROTOCOLS, HBConfig  # noqa: F401  (re-exported)
from crossprofile_lib.hiddenbench.importer import HiddenBenchData, load_hiddenbench, select_tasks
from crossprofile_lib.hiddenbench.measures import headroom
from crossprofile_lib.hiddenbench.natural import run_natural_chunk
from crossprofile_lib.paths import file_sha256
from crossprofile_lib.prompts import prompt_dir
from crossprofile_lib.run.results import run_header, stamp
from crossprofile_lib.safety.outputs import atomic_write, clean_leftovers, locked_dir, write_error, write_text_atomic
from crossprofile_lib.safety.redact import mask_known, redact_options, redact_value
from crossprofile_lib.stats.analysis_set import failed_mask

TABLES = {"controlled": {"decisions": "hiddenbench_controlled.parquet"},
          "natural": {"decisions": "hiddenbench_natural_decisions.parquet",
                      "votes": "hiddenbench_natural_votes.parquet",
                      "sessions": "hiddenbench_natural_sessions.parquet"}}
HEADER = "hiddenbench_run.json"


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
    return json_sha(d)


def _session_key(rec: dict) -> str:
    return f"{rec['task_id']}/s{rec['seed']}/{rec['ablation']}"


def iter_artefacts(out_dir: Path | str, protocol: str, config_sha: Optional[str] = "current") -> Iterator[dict]:
    """Stream the session records of ``DIR/artefacts/<protocol>.jsonl`` (a torn line is skipped) of ``config_sha``
    (``"current"``: the header's configuration, all without a header; None: all)."""
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


def _collect(out: Path, protocol: str, sha: str) -> tuple[dict[str, pd.DataFrame], int]:
    """The tables from the last record of each session (written), and how many of those sessions failed."""
    last: dict[str, tuple] = {}
    for rec in iter_artefacts(out, protocol, sha):
        last[_session_key(rec)] = (rec["rows"], record_errors(rec))   # artefacts are dropped as we go
    frames = {}
    for name, fname in TABLES[protocol].items():
        rows = [r for k in sorted(last) for r in last[k][0].get(name, [])]
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
    return frames, sum(1 for _, errors in last.values() if errors)


def run_hiddenbench(cfg: HBConfig, out_dir: Path | str, backend=None, progress: bool = False) -> dict:
    """Run the configured protocols into ``out_dir`` (locked meanwhile); return the header (also written)."""
    with locked_dir(out_dir):
        clean_leftovers(out_dir, [HEADER, *(f for t in TABLES.values() for f in t.values())])  # a killed write's
        t0 = time.perf_counter()
        data = load_hiddenbench(cfg.hiddenbench)
        tasks = select_tasks(data, list(cfg.tasks) if cfg.tasks else None, cfg.limit)
        if not tasks:
            first = "; ".join(str(e) for e in data.errors[:3]) + ("; ..." if len(data.errors) > 3 else "")
            raise ValueError(f"{data.path}: no valid task to run ({len(data.errors)} malformed record(s): {first})")
        backend = backend or backend_for(cfg)
        out = Path(out_dir)
        (out / "artefacts").mkdir(parents=True, exist_ok=True)
        prompts = {p: file_sha256(prompt_dir() / p) for p in prompt_files()}
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
            for chunk in (tasks[i:i + cfg.batch_tasks] for i in range(0, len(tasks), cfg.batch_tasks)):
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
                            fh.write(mask_known(json.dumps(rec, default=str)) + "\n")  # an echoed key: masked
                            n_new += 1
                except OSError as e:  # a full disk: named; the sessions already on file are kept (a torn line is skipped)
                    raise write_error(path, e, "cannot append to") from None
                if progress:
                    print(f"[hiddenbench {protocol}] {chunk[-1].id}: {n_new} new, {n_skip} resumed", flush=True)
            frames, failed_sessions = _collect(out, protocol, sha)
            info = dict(config_sha=sha, sessions_run=n_new, sessions_resumed=n_skip,
                        policies=[s.name for s in plan.specs], skipped_policies=plan.skipped,
                        rows={k: len(v) for k, v in frames.items()},
                        errors={k: int(failed_mask(v).sum()) for k, v in frames.items()}, failed_sessions=failed_sessions)
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
        # after the calls: the limits reached; request fields and headers redacted (one rule: safety.redact)
        header.update(redact_value("", backend.record()) if hasattr(backend, "record") else {})
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
        if not f.is_file():  # a FIFO or a device would block the parquet reader
            raise ValueError(f"{f}: not a regular file (rule: a table is a parquet file)")
        try:
            frames[name] = pd.read_parquet(f)
        except Exception as e:  # noqa: BLE001  (pyarrow raises several types for broken files)
            raise ValueError(f"{f}: cannot read as parquet ({type(e).__name__}: {e})") from None
    return frames
