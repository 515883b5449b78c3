"""The tidy results table (``DIR/results.parquet``, one row per decision, its schema checked on reading) and the run
header (``DIR/run.json``)."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from crossprofile_lib import __version__
from crossprofile_lib.paths import file_sha256
from crossprofile_lib.policies.plugins import sources as plugin_sources
from crossprofile_lib.run.config import protocol_free
from crossprofile_lib.safety.inputs import InputError, load_json
from crossprofile_lib.safety.outputs import atomic_write, write_text_atomic
from crossprofile_lib.safety.redact import known_secrets, mask_known, redact_options, redact_value
from crossprofile_lib.task.templates import parse_template, template_paths

#: Columns every results table has (later modules may add more; none may be renamed).
REQUIRED_COLUMNS = (
    "template_id", "domain", "variant", "support_attr", "decoy_attr", "irrelevant_attr", "seed",
    "policy", "budget_ratio", "budget_tokens", "memory_tokens", "n_kept", "kept_support",
    "kept_decoy", "kept_irrelevant", "net_lead", "decision", "correct", "chose_decoy", "invalid",
    "backend", "model", "tokenizer",
)
BOOL_COLUMNS = ("correct", "chose_decoy", "invalid")
INT_COLUMNS = ("seed", "n_kept", "kept_support", "kept_decoy", "kept_irrelevant", "net_lead",
               "memory_tokens")


class ResultsError(ValueError):
    """A results file is missing, unreadable or breaks the table's schema."""


def git_commit(cwd: Path | str | None = None) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        commit = out.stdout.strip() if out.returncode == 0 else None
        if commit:
            # bytes, not text: only its emptiness is read, and a path that is not UTF-8 (core.quotePath=false)
            # must not turn into a UnicodeDecodeError out of the run's header
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                                   capture_output=True, timeout=10).stdout.strip()
            return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def write_results(df: pd.DataFrame, out_dir: Path | str, header: dict) -> Path:
    """Write ``results.parquet`` and ``run.json``, each renamed into place (``atomic_write``: a reader never sees a
    torn file); callers that run a grid hold the folder's lock (:mod:`crossprofile_lib.safety.outputs`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    check_frame(df, out / "results.parquet")
    df = mask_frame(df)
    with atomic_write(out / "results.parquet") as tmp:
        df.reset_index(drop=True).to_parquet(tmp, index=False)
    write_text_atomic(out / "run.json", json.dumps(header, indent=2, sort_keys=True, default=str) + "\n")
    return out / "results.parquet"


def mask_frame(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every known secret masked in its text columns (``safety.redact.mask_known``; the one rule for
    every writer: an error message or a memory that quotes a key); unchanged, not copied, when none holds one."""
    secrets = known_secrets()
    if not secrets:
        return df
    out = df
    for c in df.columns:
        if df[c].dtype != object:
            continue
        text = df[c].astype(str)
        if any(text.str.contains(s, regex=False).any() for s in secrets):
            out = out.copy() if out is df else out
            out[c] = [mask_known(v) if isinstance(v, str) else v for v in df[c]]
    return out


def check_frame(df: pd.DataFrame, where: Path | str = "<results>") -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ResultsError(f"{where}: missing column(s) {missing} (rule: every results table has "
                           f"the columns of crossprofile_lib.run.results.REQUIRED_COLUMNS)")
    for cols, kind, ok in ((BOOL_COLUMNS, "boolean", pd.api.types.is_bool_dtype),
                           (INT_COLUMNS, "integer", pd.api.types.is_integer_dtype)):
        for c in (c for c in cols if not ok(df[c])):
            raise ResultsError(f"{where}: column '{c}' must be {kind}, found {df[c].dtype}")


def read_results(run_dir: Path | str) -> pd.DataFrame:
    """Read ``DIR/results.parquet`` (or a parquet path) and check its schema."""
    p = Path(run_dir)
    f = p / "results.parquet" if p.is_dir() else p
    if not f.exists():
        raise ResultsError(f"{f}: no results file (run 'crossprofile run --out {p}' first)")
    if not f.is_file():  # a FIFO or a device would block the parquet reader
        raise ResultsError(f"{f}: not a regular file (rule: a results table is a parquet file)")
    try:
        df = pd.read_parquet(f)
    except Exception as e:  # pyarrow raises several types for broken files
        raise ResultsError(f"{f}: cannot read as parquet ({type(e).__name__}: {e})") from None
    check_frame(df, f)
    return df


def run_folder(path: Path | str) -> Path:
    """The run folder of ``path``: the folder itself, or the folder of a ``results.parquet`` named directly."""
    p = Path(path)
    return p.parent if p.suffix == ".parquet" and not p.is_dir() else p


def read_header(run_dir: Path | str) -> dict:
    """``DIR/run.json`` (``run_dir`` may also name the run's parquet file) through the safe-input layer
    (a regular file, at most 16 MB, strict JSON); it must be a JSON object."""
    f = run_folder(run_dir) / "run.json"
    try:
        header = load_json(f, 16 << 20, what="run header")
    except InputError as e:
        raise ResultsError(f"{f}: no run header" if e.detail == "cannot read: no such file" else str(e)) from None
    if not isinstance(header, dict):
        raise ResultsError(f"{f}: must be a JSON object (the run header), found a {type(header).__name__}")
    return header


def config_record(cfg) -> dict:
    """A configuration dataclass (:class:`~crossprofile_lib.run.config.RunConfig`,
    :class:`~crossprofile_lib.hiddenbench.config.HBConfig`) as the header records it: its fields, backend
    options redacted."""
    d = protocol_free(asdict(cfg))
    if "backend_options" in d:
        d["backend_options"] = redact_options(d["backend_options"])
    return d


def run_header(cfg, backend) -> dict:
    """What ``run.json`` and ``hiddenbench_run.json`` share: the configuration with backend options redacted, backend,
    model, decision mode, tokenizer, package version, git commit, the policy files used (each writer adds its own)."""
    header = {
        "config": config_record(cfg),
        "backend": backend.name,
        "model": backend.model,
        "decision_mode": backend.decision_mode,
        "tokenizer": backend.tokenizer.name,
        "tokenizer_source": backend.tokenizer_source,
        "package_version": __version__,
        "git_commit": git_commit(Path(__file__).resolve().parent),
        # model backends: the request fields sent (sampling), the served model, the concurrency reached; redacted
        # (a key in a request field or a header: safety.redact, the one rule)
        **(redact_value("", backend.record()) if hasattr(backend, "record") else {}),
    }
    used = plugin_sources(getattr(cfg, "policies", ()) or ())
    if used:  # the policy files of your own behind this run: path and SHA-256 (crossprofile_lib.policies.plugins)
        header["policy_files"] = used
    return header


def template_hashes(paths) -> dict[str, str]:
    """Template id -> sha256 of its file's bytes, for every template file under ``paths`` (``run.json``'s
    ``templates_sha256``: the book refuses to import a run whose templates differ from the files here)."""
    return {str(parse_template(p).id): file_sha256(p) for p in template_paths(paths)}


def stamp(header: dict, t0: float) -> dict:
    """``header`` with ``seconds`` since ``t0`` (:func:`time.perf_counter`) and ``created`` (UTC) set."""
    header.update(seconds=round(time.perf_counter() - t0, 3),
                  created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return header
