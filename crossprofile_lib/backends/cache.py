"""The call cache: SQLite, entries never expire (STYLE convention 3).

Location: the folder ``CROSSPROFILE_CACHE`` (default ``./.crossprofile_cache`` in the working
directory, never inside the installed package); the file is ``calls.sqlite``. ``":memory:"``
gives a throw-away cache (benchmarks).

Key = SHA-256 of the backend's identity (provider, model and, for HTTP backends, the served
model as the server reports it and the sampling settings sent -- never where the server is),
the rendered messages, the settings that change the output (max tokens, temperature, stop
strings, constrained choices, JSON schema, decision mode and provider extras such as the chat
template). The API key, base URLs, retries, timeouts and concurrency are never part of the key
or of any stored field but ``base_url`` (redacted, for the record). Entries made when the key
still named the base URL (before the served-model identity) are found by
:meth:`LLMBackend.chat`'s legacy look-up and copied under the new key (:meth:`CallCache.copy`).

Two side tables (made on opening; older files gain them): ``token_counts`` keeps every count a
server's tokenize endpoint gave (:class:`TokenCountStore`: a rerun prices its budgets without the
endpoint) and ``served_models`` the served-model identity last reported for a provider and model
(so a cache carried to a machine without the server keys its calls alike).

Each entry stores the raw text, the parsed answer (set after parsing), the retry count,
prompt/completion tokens, latency, the prompt file and a hash of the rendered messages.
Every entry is committed as soon as its call finishes (WAL journal), so an interrupted run
(Ctrl-C, ``kill -9``, a dead server) loses no finished call. Failed calls are not stored, nor are
blank answers (empty, whitespace-only or invisible text without option log-probabilities: a server
fault, never an answer; :func:`blank_answer`); a blank entry stored by an older version is not a
cache hit.

A full disk or a read-only folder is named as such (:func:`environment_problem`), never as a
damaged cache: moving a healthy cache aside would re-buy every call.

**Integrity.** A cache file is opened only after a check (:func:`open_problem`): it must be a
regular, writable file, a SQLite database no shorter than its header says, pass
``PRAGMA quick_check`` and hold the ``calls`` table with its columns; a row whose fields do not
decode is named when it is read. Any failure raises :class:`CacheError` naming the file, the
rule and how to recover -- never a silent fresh cache, which on a paid API would re-buy every
call. A new cache file is built under a temporary name and linked into place, so a cache file
is never empty. Maintenance: :func:`check_cache`, :func:`vacuum_cache`, :func:`export_cache`
(``crossprofile cache check|vacuum|export``). Base URLs are redacted
(:func:`crossprofile_lib.safety.redact.redact_url`) in keys and stored fields.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterable, Optional

from crossprofile_lib.backends.base import ChatRequest, ChatResult
from crossprofile_lib.paths import cache_dir
from crossprofile_lib.safety.outputs import atomic_write
from crossprofile_lib.safety.redact import redact_url

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


def environment_problem(e: BaseException) -> Optional[str]:
    """What ``e`` says about the cache's surroundings (full disk, read-only folder), else None."""
    msg = str(e).lower()
    for needle, what in _ENVIRONMENT:
        if needle in msg:
            return what
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
        return f"{e.strerror} ({errno.errorcode.get(e.errno, e.errno)})"
    return None


class CacheStorageError(CacheError):
    """The cache file is sound but its storage is not (a full disk, a read-only folder): a run-time
    failure (exit 1), never reported as damage."""


def _env_err(path, what: str, e: BaseException, problem: str) -> CacheError:
    return CacheStorageError(f"call cache {path}: {what} failed: {problem} ({type(e).__name__}: {e}); the file itself is "
                      f"not damaged and every call stored so far is kept: fix this and rerun the same command")


#: Cache files this process holds open: ``(pid, resolved path) -> open CallCache objects``. POSIX
#: record locks belong to a process, and closing ANY descriptor of a file drops all of them. Reading
#: the header with plain file I/O while a connection of this process holds the file would let another
#: process take itself for the file's last user on closing and delete its ``-wal``/``-shm`` under this
#: process's open connection (SQLite then reports "disk I/O error", or calls go missing). So a file
#: already open in this process is not read again by hand: it was checked when it was first opened.
_OPEN: dict[tuple[int, str], int] = {}
_OPEN_LOCK = threading.Lock()


def _held_here(path) -> bool:
    """Whether this process (not a parent it was forked from) holds ``path`` open in a CallCache."""
    return _OPEN.get((os.getpid(), str(Path(path).resolve())), 0) > 0


def _hold(path, step: int) -> None:
    key = (os.getpid(), str(Path(path).resolve()))
    with _OPEN_LOCK:
        n = _OPEN.get(key, 0) + step
        if n > 0:
            _OPEN[key] = n
        else:
            _OPEN.pop(key, None)


def _header_problem(path: Path, size: int) -> Optional[str]:
    """A problem visible in the file's first 100 bytes (SQLite header), else None. Never called
    while this process holds the file open (:data:`_OPEN`)."""
    with open(path, "rb") as fh:
        head = fh.read(100)
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
    missing = [c for c in _COLUMNS if c not in cols]
    if missing:
        return f"wrong schema: table 'calls' lacks column(s) {', '.join(missing)}"
    return None


def _connect(path, timeout: float, readonly: bool = False) -> sqlite3.Connection:
    uri = f"file:{Path(path).resolve()}?mode={'ro' if readonly else 'rw'}"
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
    if writable and (not os.access(path, os.W_OK) or not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)):
        return (f"read-only (mode {stat.filemode(st.st_mode)}): finished calls could not be stored; make it "
                f"writable (chmod u+w) or point --cache at a copy")
    try:
        p = None if _held_here(path) else _header_problem(path, st.st_size)
        if p:
            return p
        db = _connect(path, timeout, readonly=not writable)
    except (OSError, sqlite3.Error) as e:
        if environment_problem(e):
            raise _env_err(path, "opening", e, environment_problem(e)) from None
        return f"cannot be opened ({type(e).__name__}: {e})"
    try:
        rows = [r[0] for r in db.execute("PRAGMA integrity_check" if full else "PRAGMA quick_check")]
        if rows != ["ok"]:
            return f"damaged (SQLite {'integrity' if full else 'quick'}_check: {'; '.join(map(str, rows[:3]))})"
        p = _schema_problem(db)
        if p:
            return p
        if writable:  # a writer holding the database past the timeout
            db.execute("BEGIN IMMEDIATE")
            db.execute("ROLLBACK")
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            return (f"locked by another process for more than {timeout:g} s (another run may be writing it: "
                    f"wait for it, or give this run its own --cache)")
        if environment_problem(e):
            raise _env_err(path, "opening", e, environment_problem(e)) from None
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


def cache_folder(folder: Optional[str | os.PathLike] = None) -> Path:
    """The cache folder: ``folder``, else :func:`crossprofile_lib.paths.cache_dir` (``$CROSSPROFILE_CACHE``,
    an existing ``./.crossprofile_cache``, else the user cache folder)."""
    f = Path(folder).expanduser() if folder else cache_dir()
    pkg = Path(__file__).resolve().parents[1]
    if f.resolve() == pkg or pkg in f.resolve().parents:
        raise ValueError(f"cache folder {f} is inside the installed package {pkg} "
                         f"(rule: set CROSSPROFILE_CACHE to a folder outside the package)")
    return f


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


def is_blank(text) -> bool:
    """Whether ``text`` shows nothing: empty, or only whitespace and invisible format characters
    (zero-width spaces and joiners, a byte-order mark, bidi marks: Unicode category ``Cf``)."""
    import unicodedata
    return not any(not ch.isspace() and unicodedata.category(ch) != "Cf" for ch in str(text or ""))


def blank_answer(result: ChatResult) -> bool:
    """An answer with no content: blank text (:func:`is_blank`) and no log-probabilities (None or an empty
    map: no option letter among them). From a server it is a transient fault (retried, never cached, an
    error row if it persists); a stored one (cached by an older version) is not used."""
    return is_blank(result.text) and not result.choice_logprobs


def messages_sha(messages: Iterable[dict]) -> str:
    """SHA-256 (16 hex digits) of the messages' contents joined by blank lines; for a one-message
    prompt this equals :attr:`crossprofile_lib.prompts.Prompt.sha`."""
    text = "\n\n".join(str(m.get("content", "")) for m in messages)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def call_key(identity: dict, request: ChatRequest, decision_mode: str) -> str:
    """The cache key of ``request`` sent to the backend ``identity`` (provider, model, base URL,
    and output-changing extras). Nothing secret may be in ``identity``."""
    if identity.get("base_url") is not None:
        identity = {**identity, "base_url": redact_url(identity["base_url"])}
    payload = {
        "v": SCHEMA_VERSION,
        "identity": identity,
        "messages": [dict(m) for m in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "choices": list(request.choices) if request.choices is not None else None,
        "json_schema": request.json_schema,
        "stop": list(request.stop) if request.stop is not None else None,
        "decision_mode": decision_mode,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


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


class CallCache:
    """A persistent ``key -> ChatResult`` map (see module doc). Thread-safe. ``timeout``: seconds
    to wait for another process's write lock."""

    def __init__(self, folder: Optional[str | os.PathLike] = None, timeout: float = 60.0):
        self._lock = threading.Lock()
        if str(folder) == ":memory:":
            self.path = ":memory:"
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute(_CREATE)
            for t in _SIDE_TABLES:
                self._db.execute(t)
            return
        f = cache_folder(folder)
        if f.is_file() and f.name.endswith((".sqlite", ".db")):  # the file itself was named
            f, name = f.parent, f.name
        else:
            name = FILE_NAME
        try:
            f.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CacheError(f"call cache folder {f}: cannot be made ({e}); choose another --cache") from None
        path = f / name
        self.path = str(path)
        if not path.exists() and not path.is_symlink():
            try:
                _create(path)
            except (OSError, sqlite3.Error) as e:
                raise CacheError(f"call cache {path}: cannot be created ({type(e).__name__}: {e}"
                                 + (f": {environment_problem(e)}" if environment_problem(e) else "")
                                 + "); choose another --cache") from None
        problem = open_problem(path, timeout)
        if problem and problem.startswith("read-only"):  # sound, but cannot take new calls: not damage
            raise CacheStorageError(f"call cache {path}: {problem}")
        if problem:
            raise _err(path, problem)
        try:
            self._db = _connect(path, timeout)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as e:
            raise _env_err(path, "opening", e, environment_problem(e) or "SQLite refused it") from None
        _hold(path, +1)
        self._held = True
        try:
            for t in _SIDE_TABLES:
                self._db.execute(t)
        except sqlite3.Error as e:
            if environment_problem(e):  # a full disk or read-only folder is not damage
                raise _env_err(path, "adding the token-count tables", e, environment_problem(e)) from None
            raise _err(path, f"adding the token-count tables failed ({type(e).__name__}: {e})") from None

    def _run(self, what: str, fn):
        """Run ``fn()`` under the lock; SQLite failures become :class:`CacheError` naming the file."""
        with self._lock:
            try:
                return fn()
            except sqlite3.Error as e:
                env = environment_problem(e)
                if env:
                    raise _env_err(self.path, what, e, env) from None
                raise _err(self.path, f"{what} failed ({type(e).__name__}: {e})") from None

    def __len__(self) -> int:
        return self._run("counting entries", lambda: self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def get_many(self, keys: Iterable[str]) -> dict[str, ChatResult]:
        keys = list(dict.fromkeys(keys))
        out: dict[str, ChatResult] = {}

        def read():
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                q = ("SELECT key, text, retries, prompt_tokens, completion_tokens, latency_s, choice_logprobs, "
                     f"meta, parsed FROM calls WHERE key IN ({','.join('?' * len(chunk))})")
                for row in self._db.execute(q, chunk):
                    res = _decode(self.path, row)
                    if not blank_answer(res):  # a blank answer is never a cache hit (see blank_answer)
                        out[row[0]] = res
        self._run("reading entries", read)
        return out

    def put(self, key: str, request: ChatRequest, result: ChatResult, identity: dict, decision_mode: str) -> None:
        """Store a finished call (failed calls, ``result.error`` set, and blank answers are not stored)."""
        if result.error is not None or blank_answer(result):
            return
        base_url = redact_url(identity.get("base_url"))
        row = (key, time.time(), identity.get("provider", ""), identity.get("model", ""),
               json.dumps(base_url) if not isinstance(base_url, str) else base_url, decision_mode,
               request.purpose, request.prompt_file, messages_sha(request.messages), result.text, None,
               int(result.retries), int(result.prompt_tokens), int(result.completion_tokens),
               float(result.latency_s),
               json.dumps(result.choice_logprobs) if result.choice_logprobs is not None else None,
               json.dumps(result.meta, default=str) if result.meta else None)
        self._run("storing a call", lambda: self._db.execute(
            f"INSERT OR REPLACE INTO calls ({','.join(_COLUMNS)}) VALUES ({','.join('?' * len(_COLUMNS))})", row))

    def set_parsed(self, key: str, parsed: Optional[str]) -> None:
        """Record the parsed answer (e.g. the decision letter) of a stored call."""
        self._run("recording a parsed answer",
                  lambda: self._db.execute("UPDATE calls SET parsed = ? WHERE key = ?", (parsed, key)))

    def copy(self, old_key: str, new_key: str) -> None:
        """Store the entry of ``old_key`` also under ``new_key`` (the legacy look-up's migration)."""
        cols = ",".join(c for c in _COLUMNS if c != "key")
        self._run("copying an entry", lambda: self._db.execute(
            f"INSERT OR IGNORE INTO calls (key,{cols}) SELECT ?,{cols} FROM calls WHERE key = ?", (new_key, old_key)))

    def base_urls(self, provider: str, model: str) -> list:
        """Every (redacted) ``base_url`` value stored for ``provider``/``model``: a string, or the sorted
        list of several URLs, as the legacy key named them."""
        rows = self._run("listing base URLs", lambda: self._db.execute(
            "SELECT DISTINCT base_url FROM calls WHERE provider = ? AND model = ?", (provider, model)).fetchall())
        out = []
        for (v,) in rows:
            if isinstance(v, str) and v.startswith("["):
                try:
                    v = json.loads(v)
                except ValueError:
                    continue
            if v:
                out.append(v)
        return out

    def served_model(self, provider: str, model: str) -> Optional[dict]:
        """The served-model identity last recorded for ``provider``/``model`` (None when none)."""
        row = self._run("reading the served model", lambda: self._db.execute(
            "SELECT served FROM served_models WHERE provider = ? AND model = ?", (provider, model)).fetchone())
        try:
            return json.loads(row[0]) if row else None
        except ValueError:
            return None

    def set_served_model(self, provider: str, model: str, served: dict) -> None:
        self._run("recording the served model", lambda: self._db.execute(
            "INSERT OR REPLACE INTO served_models VALUES (?, ?, ?, ?)",
            (provider, model, json.dumps(served, sort_keys=True), time.time())))

    def token_store(self, tokenizer: str) -> "TokenCountStore":
        return TokenCountStore(self, tokenizer)

    def stored_tokenizers(self, suffix: str) -> list[str]:
        """Tokenizer names with stored counts ending in ``suffix``, most recently used first."""
        rows = self._run("listing stored token counts", lambda: self._db.execute(
            "SELECT tokenizer, MAX(created) AS t FROM token_counts WHERE tokenizer LIKE ? GROUP BY tokenizer "
            "ORDER BY t DESC", ("%" + suffix,)).fetchall())
        return [r[0] for r in rows if r[0].endswith(suffix)]

    def calls_timeline(self, provider: str, model: str) -> list[float]:
        """``created`` times of the stored calls of ``provider``/``model``, ascending (for measured rates)."""
        rows = self._run("reading call times", lambda: self._db.execute(
            "SELECT created FROM calls WHERE provider = ? AND model = ? ORDER BY created", (provider, model)).fetchall())
        return [float(r[0]) for r in rows if r[0] is not None]

    def close(self) -> None:
        with self._lock:
            self._db.close()
            self._release()

    def __del__(self):  # a cache dropped without close(): its connection closes with it
        self._release()

    def _release(self) -> None:
        """This object no longer holds its file open in this process (:data:`_OPEN`); once only."""
        if getattr(self, "_held", False):
            self._held = False
            _hold(self.path, -1)


def _text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class TokenCountStore:
    """The token counts one tokenizer (``name``) gave, kept in the cache file: ``get(text)``,
    ``put(text, n)``; ``offset`` (special tokens its endpoint adds to every text) is kept beside."""

    def __init__(self, cache: CallCache, name: str):
        self.cache, self.name = cache, name

    def __len__(self) -> int:
        return self.cache._run("counting token counts", lambda: self.cache._db.execute(
            "SELECT COUNT(*) FROM token_counts WHERE tokenizer = ? AND text_sha != ?",
            (self.name, OFFSET_ROW)).fetchone()[0])

    def _get(self, sha: str) -> Optional[int]:
        row = self.cache._run("reading a token count", lambda: self.cache._db.execute(
            "SELECT count FROM token_counts WHERE tokenizer = ? AND text_sha = ?", (self.name, sha)).fetchone())
        return int(row[0]) if row else None

    def _put(self, sha: str, n: int) -> None:
        self.cache._run("storing a token count", lambda: self.cache._db.execute(
            "INSERT OR REPLACE INTO token_counts VALUES (?, ?, ?, ?)", (self.name, sha, int(n), time.time())))

    def get(self, text: str) -> Optional[int]:
        return self._get(_text_sha(text))

    def put(self, text: str, n: int) -> None:
        self._put(_text_sha(text), n)

    @property
    def offset(self) -> Optional[int]:
        return self._get(OFFSET_ROW)

    @offset.setter
    def offset(self, n: int) -> None:
        self._put(OFFSET_ROW, n)


# --- maintenance: crossprofile cache check|vacuum|export ----------------------------------------

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
