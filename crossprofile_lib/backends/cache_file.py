"""The call-cache file: its schema, integrity check (:func:`open_problem`), errors (:class:`CacheError` naming file,
rule and recovery; :class:`CacheStorageError` for a full disk or read-only folder, never reported as damage) and this
process's hold on it; used by :mod:`.cache`.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import stat
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Optional

from crossprofile_lib.backends.base import ChatResult

FILE_NAME = "calls.sqlite"
SCHEMA_VERSION = 1
APPLICATION_ID = 0x43505246  # "CPRF", set on cache files made since the integrity check

_COLUMNS = ("key", "created", "provider", "model", "base_url", "decision_mode", "purpose", "prompt_file",
            "prompt_sha", "text", "parsed", "retries", "prompt_tokens", "completion_tokens", "latency_s",
            "choice_logprobs", "meta")
_CREATE = ("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, created REAL, provider TEXT, model TEXT, "
           "base_url TEXT, decision_mode TEXT, purpose TEXT, prompt_file TEXT, prompt_sha TEXT, text TEXT, "
           "parsed TEXT, retries INTEGER, prompt_tokens INTEGER, completion_tokens INTEGER, latency_s REAL, "
           "choice_logprobs TEXT, meta TEXT)")
_SIDE_TABLES = ("CREATE TABLE IF NOT EXISTS token_counts (tokenizer TEXT, text_sha TEXT, count INTEGER, "
                "created REAL, PRIMARY KEY (tokenizer, text_sha))",
                "CREATE TABLE IF NOT EXISTS served_models (provider TEXT, model TEXT, served TEXT, created REAL, "
                "PRIMARY KEY (provider, model))")
#: the ``text_sha`` under which a server tokenizer's offset (special tokens added to every text) is kept
OFFSET_ROW = "offset"
_RECOVER = ("recover: move the file aside (mv {f} {f}.broken) and rerun -- a new cache is made and only the "
            "calls it lacks are sent again; 'crossprofile cache check {f}' explains the damage and "
            "'crossprofile cache export {f} calls.jsonl' saves the readable entries")


class CacheError(ValueError):
    """A call-cache file that cannot be used as it is (the message names file, rule and recovery;
    a ``ValueError``, so the command line reports it with exit 2)."""


def _err(path, what: str) -> CacheError:
    return CacheError(f"call cache {path}: {what}; " + _RECOVER.format(f=path))


#: SQLite failures that say nothing about the file's health (a full disk, a read-only folder):
#: named as such, with no advice to move the cache aside (on a paid API that would re-buy every call).
_ENVIRONMENT = (("database or disk is full", "the disk holding it is full: free some space and rerun"),
                ("disk quota", "the disk quota is exhausted: free some space and rerun"),
                ("attempt to write a readonly database",
                 "it or its folder is read-only: make both writable (SQLite also writes FILE-wal and FILE-shm next "
                 "to it) or point --cache at a writable copy"),
                ("readonly database", "it or its folder is read-only: make both writable or point --cache at a "
                 "writable copy"),
                ("unable to open database file",
                 "it cannot be opened for writing (its folder may be read-only or full: SQLite writes FILE-wal and "
                 "FILE-shm next to it)"),
                ("disk i/o error", "the disk reported an I/O error (full, read-only or failing?)"))


def environment_problem(e: BaseException, path=None) -> Optional[str]:
    """What ``e`` says about the cache's surroundings (full disk, read-only folder, read-only file system), else
    None."""
    msg = str(e).lower()
    if path is not None and ("readonly" in msg or "read-only" in msg or getattr(e, "errno", None) == errno.EROFS) \
            and read_only_fs(path):
        return ("it lies on a read-only file system (no permission change can help): copy it to a writable place "
                "and point --cache at the copy")
    for needle, what in _ENVIRONMENT:
        if needle in msg:
            return what
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
        return f"{e.strerror} ({errno.errorcode.get(e.errno, e.errno)})"
    return None


class CacheStorageError(CacheError):
    """The cache file is sound but its storage is not (a full disk, a read-only folder): a run-time
    failure (exit 1), never reported as damage."""


def _env_err(path, what: str, e: BaseException, fallback: str = "") -> CacheError:
    return CacheStorageError(f"call cache {path}: {what} failed: {environment_problem(e, path) or fallback} ({type(e).__name__}: "
                             f"{e}); the file itself is not damaged and every call stored so far is kept: fix this and "
                             f"rerun the same command")


#: Cache files this process holds open: ``(pid, resolved path) -> open CallCache objects``. Closing ANY descriptor
#: of a file drops the process's POSIX record locks on it, so reading the header by hand while a connection holds
#: the file could let another process delete its ``-wal``/``-shm`` under that connection ("disk I/O error", lost
#: calls): a file already open in this process is not read again (it was checked when first opened).
_OPEN: Counter = Counter()
_OPEN_LOCK = threading.Lock()


def _hold(path, step: int) -> None:
    key = (os.getpid(), str(Path(path).resolve()))
    with _OPEN_LOCK:
        _OPEN[key] += step
        if _OPEN[key] <= 0:
            del _OPEN[key]


def _header_problem(path: Path, size: int) -> Optional[str]:
    """A problem visible in the file's first 100 bytes (SQLite header), else None. Never called
    while this process holds the file open (:data:`_OPEN`)."""
    with open(path, "rb") as fh:
        head = fh.read(100)
        # the size after the header was read: a connection dropped by the cyclic garbage collector in between (this
        # thread, so a whole checkpoint) may have grown the file and its header's page count since the caller's stat
        size = max(size, os.fstat(fh.fileno()).st_size)
    if not head.startswith(b"SQLite format 3\x00"):
        return "not a SQLite database (its first bytes are not the SQLite header)"
    if len(head) < 100:
        return f"truncated ({size} bytes, shorter than a SQLite header)"
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if page and pages and size < page * pages:
        return f"truncated ({size} bytes; its header says {pages} pages of {page} bytes = {page * pages})"
    return None


def _schema_problem(db: sqlite3.Connection) -> Optional[str]:
    cols = [r[1] for r in db.execute("PRAGMA table_info(calls)")]
    if not cols:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return f"no 'calls' table (tables: {', '.join(tables) or 'none'}); not a call cache, or its table was dropped"
    if missing := [c for c in _COLUMNS if c not in cols]:
        return f"wrong schema: table 'calls' lacks column(s) {', '.join(missing)}"
    return None


def read_only_fs(path) -> bool:
    """Whether ``path`` (or its folder) lies on a file system mounted read-only (``chmod`` cannot help there)."""
    for p in (Path(path), Path(path).parent):
        try:
            return bool(os.statvfs(p).f_flag & os.ST_RDONLY)
        except (OSError, AttributeError):
            continue
    return False


def folder_writable(path) -> bool:
    """Whether new files can be made beside ``path`` (SQLite's ``-wal`` and ``-shm``)."""
    return not read_only_fs(path) and os.access(Path(path).parent, os.W_OK)


def _connect(path, timeout: float, readonly: bool = False) -> sqlite3.Connection:
    # read-only where nothing can be written beside it (an archive, a read-only mount): immutable, so SQLite
    # neither needs nor makes the -wal and -shm files
    mode = "ro&immutable=1" if readonly and not folder_writable(path) else "ro" if readonly else "rw"
    uri = f"file:{Path(path).resolve()}?mode={mode}"
    return sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None, timeout=timeout)


def open_problem(path: str | os.PathLike, timeout: float = 60.0, writable: bool = True,
                 full: bool = False) -> Optional[str]:
    """Why the cache file ``path`` cannot be used (None when it can); ``full`` runs
    ``PRAGMA integrity_check`` instead of ``quick_check``."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        return "no such file"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory, not a cache file"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_size == 0:
        return ("0 bytes (emptied or truncated; a cache file is never empty, and using it would silently "
                "re-make every call)")
    if writable and read_only_fs(path):
        return ("read-only (on a read-only file system: no permission change can make it writable): finished "
                "calls could not be stored; copy it to a writable place and point --cache at the copy")
    if writable and (not os.access(path, os.W_OK) or not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)):
        return (f"read-only (mode {stat.filemode(st.st_mode)}): finished calls could not be stored; make it "
                f"writable (chmod u+w) or point --cache at a copy")
    try:
        # not read by hand while this process (not a parent it was forked from) holds it open (see _OPEN)
        if not _OPEN[(os.getpid(), str(path.resolve()))] and (p := _header_problem(path, st.st_size)):
            return p
        db = _connect(path, timeout, readonly=not writable)
    except (OSError, sqlite3.Error) as e:
        if environment_problem(e):
            raise _env_err(path, "opening", e) from None
        return f"cannot be opened ({type(e).__name__}: {e})"
    try:
        rows = [r[0] for r in db.execute("PRAGMA integrity_check" if full else "PRAGMA quick_check")]
        if rows != ["ok"]:
            return f"damaged (SQLite {'integrity' if full else 'quick'}_check: {'; '.join(map(str, rows[:3]))})"
        if p := _schema_problem(db):
            return p
        if writable:  # a writer holding the database past the timeout
            db.execute("BEGIN IMMEDIATE")
            db.execute("ROLLBACK")
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            return (f"locked by another process for more than {timeout:g} s (another run may be writing it: "
                    f"wait for it, or give this run its own --cache)")
        if environment_problem(e):
            raise _env_err(path, "opening", e) from None
        return f"damaged ({type(e).__name__}: {e})"
    except sqlite3.DatabaseError as e:
        return f"damaged ({type(e).__name__}: {e})"
    finally:
        db.close()
    return None


def _create(path: Path) -> None:
    """Make a new cache file at ``path`` atomically (built under a temporary name, then linked;
    a cache made meanwhile by another process wins)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)  # sqlite makes the file itself
    try:
        db = sqlite3.connect(tmp, isolation_level=None)
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute(_CREATE)
        db.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        Path(tmp).unlink(missing_ok=True)


def _decode(path, row) -> ChatResult:
    """A stored row as a cached :class:`ChatResult`; a row that does not decode raises :class:`CacheError`."""
    k, text, retries, pt, ct, lat, lp, meta, parsed = row
    try:
        m = json.loads(meta) if meta else {}
        lps = json.loads(lp) if lp else None
        if not isinstance(m, dict) or not (lps is None or isinstance(lps, dict)) or not isinstance(text, str):
            raise ValueError("meta/choice_logprobs must be JSON objects and text a string")
        res = ChatResult(text=text, cached=True, retries=int(retries or 0), prompt_tokens=int(pt or 0),
                         completion_tokens=int(ct or 0), latency_s=float(lat or 0.0), choice_logprobs=lps,
                         meta=m)
    except (ValueError, TypeError) as e:
        raise _err(path, f"entry {k[:16]}... does not decode ({type(e).__name__}: {e}); the file was "
                         f"edited or damaged") from None
    if parsed is not None:
        res.meta["parsed"] = parsed
    return res
