"""``crossprofile cache check|vacuum|export``: :func:`check_cache` decodes every row of a file opened read-only,
:func:`vacuum_cache` compacts a healthy one, :func:`export_cache` writes every readable entry as a JSON line (base URLs
redacted), also from a damaged file.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from crossprofile_lib.backends.cache_file import (
    _COLUMNS,
    FILE_NAME,
    CacheError,
    _connect,
    _decode,
    _env_err,
    _err,
    environment_problem,
    open_problem,
)
from crossprofile_lib.safety.outputs import atomic_write
from crossprofile_lib.safety.redact import redact_url


def _redacted_field(stored):
    """A stored ``base_url`` field (a URL, or a JSON list of URLs) redacted again."""
    if not isinstance(stored, str):
        return stored
    if stored.startswith("["):
        try:
            urls = json.loads(stored)
            return json.dumps(redact_url([str(u) for u in urls])) if isinstance(urls, list) else redact_url(stored)
        except ValueError:
            pass
    return redact_url(stored)


def resolve_cache_file(path: str | os.PathLike) -> Path:
    """``PATH`` as given to ``crossprofile cache``: a cache file, or a folder holding ``calls.sqlite``."""
    p = Path(path).expanduser()
    if p.is_dir() and (p / FILE_NAME).exists():
        return p / FILE_NAME
    return p


def check_cache(path: str | os.PathLike) -> dict:
    """Full check of a cache file: ``{"file", "ok", "problem", "entries", "bad_rows"}``; every row is
    decoded (``bad_rows`` lists the keys that do not). Opens the file read-only."""
    f = resolve_cache_file(path)
    problem = open_problem(f, timeout=5.0, writable=False, full=True)
    rep = {"file": str(f), "ok": problem is None, "problem": problem, "entries": None, "bad_rows": []}
    if problem:
        return rep
    db = _connect(f, 5.0, readonly=True)
    try:
        n = 0
        for row in db.execute("SELECT key, text, retries, prompt_tokens, completion_tokens, latency_s, "
                              "choice_logprobs, meta, parsed FROM calls"):
            n += 1
            try:
                _decode(f, row)
            except CacheError:
                rep["bad_rows"].append(str(row[0]))
        rep["entries"] = n
    finally:
        db.close()
    if rep["bad_rows"]:
        rep["ok"] = False
        rep["problem"] = f"{len(rep['bad_rows'])} entr{'y' if len(rep['bad_rows']) == 1 else 'ies'} do not decode"
    return rep


def vacuum_cache(path: str | os.PathLike) -> tuple[int, int]:
    """Checkpoint the WAL and ``VACUUM`` a healthy cache file; returns its size before and after."""
    f = resolve_cache_file(path)
    problem = open_problem(f, timeout=5.0)
    if problem:
        raise _err(f, problem)
    before = f.stat().st_size + (Path(f"{f}-wal").stat().st_size if Path(f"{f}-wal").exists() else 0)
    try:
        db = _connect(f, 60.0)
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.execute("VACUUM")
        finally:
            db.close()
    except sqlite3.Error as e:  # VACUUM needs free space of about the file's size
        raise _env_err(f, "vacuum", e, environment_problem(e) or "SQLite stopped") from None
    return before, f.stat().st_size


def export_cache(path: str | os.PathLike, out: str | os.PathLike) -> tuple[int, int]:
    """Write every readable entry of a cache file as one JSON line (all columns) to ``out``, also
    from a damaged file where SQLite can still read rows; returns (written, unreadable)."""
    f = resolve_cache_file(path)
    if not f.is_file() or f.stat().st_size == 0:
        raise _err(f, open_problem(f, writable=False) or "not a readable file")
    written = bad = 0
    try:
        db = _connect(f, 5.0, readonly=True)
        keys = [r[0] for r in db.execute("SELECT key FROM calls")]
    except sqlite3.Error as e:
        raise _err(f, f"no entries can be read ({type(e).__name__}: {e})") from None
    with atomic_write(out) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for k in keys:
            try:
                row = db.execute(f"SELECT {','.join(_COLUMNS)} FROM calls WHERE key = ?", (k,)).fetchone()
            except sqlite3.Error:
                bad += 1
                continue
            entry = dict(zip(_COLUMNS, row))
            entry["base_url"] = _redacted_field(entry.get("base_url"))  # entries of older versions too
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
            written += 1
    db.close()
    return written, bad
