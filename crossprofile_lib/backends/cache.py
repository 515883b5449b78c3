"""The call cache: SQLite, entries never expire (STYLE convention 3).

Location: :func:`cache_folder`, file ``calls.sqlite``; ``":memory:"`` gives a throw-away cache. Key (:func:`call_key`) =
SHA-256 of the backend's identity (provider, model and, for HTTP backends, the served model and the sampling sent --
never where the server is), the rendered messages and every setting that changes the output (max tokens, temperature,
stop strings, choices, JSON schema, decision mode, provider extras such as the chat template). API keys, base URLs,
retries, timeouts and concurrency are in no key and no stored field but ``base_url`` (redacted, for the record);
entries keyed by base URL (earlier versions) are found by :meth:`LLMBackend.chat`'s legacy look-up and copied under the
new key (:meth:`CallCache.copy`). Side tables: ``token_counts`` (:class:`TokenCountStore`, a server tokenizer's counts)
and ``served_models`` (the served model last reported, so a machine without the server keys alike).

Every finished call is committed at once (WAL), so an interrupted run loses none. Failed calls and blank answers
(:func:`blank_answer`) are never stored, and a stored blank is no hit. A file is opened only after
:func:`~.cache_file.open_problem`; a failure raises :class:`CacheError` naming file, rule and recovery (never a silent
fresh cache), a full disk or read-only folder :class:`CacheStorageError` (never named as damage: moving a healthy cache
aside would re-buy every call). ``crossprofile cache check|vacuum|export``: :func:`check_cache` (decodes every row,
read-only), :func:`vacuum_cache`, :func:`export_cache` (every readable row as JSON lines, base URLs redacted).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import threading
import time
import unicodedata
from contextlib import closing
from pathlib import Path
from typing import Iterable, Optional

from crossprofile_lib.backends.base import ChatRequest, ChatResult
from crossprofile_lib.backends.cache_file import (  # noqa: F401  (CacheStorageError: re-exported)
    _COLUMNS,
    _CREATE,
    _SIDE_TABLES,
    FILE_NAME,
    OFFSET_ROW,
    SCHEMA_VERSION,
    CacheError,
    CacheStorageError,
    _connect,
    _create,
    _decode,
    _env_err,
    _err,
    _hold,
    environment_problem,
    open_problem,
)
from crossprofile_lib.paths import cache_dir
from crossprofile_lib.safety.outputs import atomic_write
from crossprofile_lib.safety.redact import holds_secret, redact_url

#: the columns :func:`~.cache_file._decode` reads, in its order
_DECODED = "key, text, retries, prompt_tokens, completion_tokens, latency_s, choice_logprobs, meta, parsed"


def cache_folder(folder: Optional[str | os.PathLike] = None) -> Path:
    """The cache folder: ``folder``, else :func:`crossprofile_lib.paths.cache_dir` (``$CROSSPROFILE_CACHE``,
    an existing ``./.crossprofile_cache``, else the user cache folder)."""
    f = Path(folder).expanduser() if folder else cache_dir()
    pkg = Path(__file__).resolve().parents[1]
    if f.resolve() == pkg or pkg in f.resolve().parents:
        raise ValueError(f"cache folder {f} is inside the installed package {pkg} "
                         f"(rule: set CROSSPROFILE_CACHE to a folder outside the package)")
    return f


def is_blank(text) -> bool:
    """Whether ``text`` shows nothing: empty, or only whitespace and invisible format characters
    (zero-width spaces and joiners, a byte-order mark, bidi marks: Unicode category ``Cf``)."""
    return not any(not ch.isspace() and unicodedata.category(ch) != "Cf" for ch in str(text or ""))


def blank_answer(result: ChatResult) -> bool:
    """An answer with no content: blank text (:func:`is_blank`) and no log-probabilities -- a server fault (retried,
    never cached, never a hit). A score-mode answer whose top log-probabilities hold no option letter (``{}``) is the
    model's answer, not a blank one."""
    return is_blank(result.text) and result.choice_logprobs is None


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


def _stored_urls(stored):
    """A stored ``base_url`` field as what it names: a URL, or the list a JSON list holds (None when it does not
    decode)."""
    if isinstance(stored, str) and stored.startswith("["):
        try:
            return json.loads(stored)
        except ValueError:
            return None
    return stored


class CallCache:
    """A persistent ``key -> ChatResult`` map (see module doc). Thread-safe. ``timeout``: seconds
    to wait for another process's write lock."""

    def __init__(self, folder: Optional[str | os.PathLike] = None, timeout: float = 60.0):
        self._lock = threading.Lock()
        self.readonly = ""  # why this cache only replays (read-only file or file system), else ""
        if str(folder) == ":memory:":
            self.path = ":memory:"
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            for t in (_CREATE, *_SIDE_TABLES):
                self._db.execute(t)
            return
        f = cache_folder(folder)
        # the file itself was named, or its folder
        f, name = (f.parent, f.name) if f.is_file() and f.name.endswith((".sqlite", ".db")) else (f, FILE_NAME)
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
        if problem and problem.startswith("read-only"):  # sound, but cannot take new calls: replayed, not damage
            self._open_readonly(path, timeout, problem)
            return
        if problem:
            raise _err(path, problem)
        try:
            self._db = _connect(path, timeout)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as e:
            raise _env_err(path, "opening", e, "SQLite refused it") from None
        _hold(path, +1)
        self._held = True
        self._run("adding the token-count tables", lambda: [self._db.execute(t) for t in _SIDE_TABLES])

    def _open_readonly(self, path: Path, timeout: float, why: str) -> None:
        """A read-only cache (an archive, a read-only mount): its calls are replayed; a call it lacks stops the run
        before it is sent (:meth:`will_store`), since its answer could not be kept."""
        if p := open_problem(path, timeout, writable=False):
            raise _err(path, p)
        try:
            self._db = _connect(path, timeout, readonly=True)
            have = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            for t in _SIDE_TABLES:  # absent from an old file: empty stand-ins that hold nothing
                name = t.split("EXISTS ", 1)[1].split(" ", 1)[0]
                if name not in have:
                    self._db.execute(t.replace("CREATE TABLE", "CREATE TEMP TABLE"))
        except sqlite3.Error as e:
            raise _env_err(path, "opening read-only", e, "SQLite refused it") from None
        self.readonly = why
        _hold(path, +1)
        self._held = True
        print(f"notice: call cache {path} is {why.split(':')[0]}: replaying the calls it holds; a call it does not "
              f"hold stops the run before it is sent", file=sys.stderr)

    def will_store(self, n: int, what: str = "calls") -> None:
        """Raise :class:`CacheStorageError` when ``n`` new calls are about to be made and this cache cannot keep
        them (read-only): the run stops before anything is sent or paid for."""
        if n and self.readonly:
            raise CacheStorageError(f"call cache {self.path}: {n} {what} it does not hold would have to be made, so "
                                    f"none is sent (a read-only cache replays only what it holds); it is "
                                    f"{self.readonly}")

    def _run(self, what: str, fn):
        """Run ``fn()`` under the lock; SQLite failures become :class:`CacheError` naming the file (a full disk or
        read-only folder: :class:`CacheStorageError`, not damage)."""
        with self._lock:
            try:
                return fn()
            except sqlite3.Error as e:
                if environment_problem(e):
                    raise _env_err(self.path, what, e) from None
                raise _err(self.path, f"{what} failed ({type(e).__name__}: {e})") from None

    def __len__(self) -> int:
        return self._run("counting entries", lambda: self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def get_many(self, keys: Iterable[str]) -> dict[str, ChatResult]:
        keys = list(dict.fromkeys(keys))
        out: dict[str, ChatResult] = {}

        def read():
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                q = f"SELECT {_DECODED} FROM calls WHERE key IN ({','.join('?' * len(chunk))})"
                for row in self._db.execute(q, chunk):
                    res = _decode(self.path, row)
                    if not blank_answer(res):  # a blank answer is never a cache hit (see blank_answer)
                        out[row[0]] = res
        self._run("reading entries", read)
        return out

    def put(self, key: str, request: ChatRequest, result: ChatResult, identity: dict, decision_mode: str) -> None:
        """Store a finished call (failed calls, ``result.error`` set, blank answers and answers holding a known
        secret, e.g. a server echoing the key, are not stored: :func:`~crossprofile_lib.safety.redact.holds_secret`)."""
        if result.error is not None or blank_answer(result) or holds_secret(result.text):
            return
        self.will_store(1, "call")
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
        if self.readonly:  # a read-only cache keeps what it holds
            return
        self._run("recording a parsed answer",
                  lambda: self._db.execute("UPDATE calls SET parsed = ? WHERE key = ?", (parsed, key)))

    def copy(self, old_key: str, new_key: str) -> None:
        """Store the entry of ``old_key`` also under ``new_key`` (the legacy look-up's migration)."""
        if self.readonly:  # a read-only cache keeps what it holds
            return
        cols = ",".join(c for c in _COLUMNS if c != "key")
        self._run("copying an entry", lambda: self._db.execute(
            f"INSERT OR IGNORE INTO calls (key,{cols}) SELECT ?,{cols} FROM calls WHERE key = ?", (new_key, old_key)))

    def base_urls(self, provider: str, model: str) -> list:
        """Every (redacted) ``base_url`` value stored for ``provider``/``model``: a string, or the sorted
        list of several URLs, as the legacy key named them."""
        rows = self._run("listing base URLs", lambda: self._db.execute(
            "SELECT DISTINCT base_url FROM calls WHERE provider = ? AND model = ?", (provider, model)).fetchall())
        return [u for u in (_stored_urls(v) for (v,) in rows) if u]

    def served_model(self, provider: str, model: str) -> Optional[dict]:
        """The served-model identity last recorded for ``provider``/``model`` (None when none)."""
        row = self._run("reading the served model", lambda: self._db.execute(
            "SELECT served FROM served_models WHERE provider = ? AND model = ?", (provider, model)).fetchone())
        try:
            return json.loads(row[0]) if row else None
        except ValueError:
            return None

    def set_served_model(self, provider: str, model: str, served: dict) -> None:
        if self.readonly:
            return
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

    def __del__(self):  # a cache dropped without close(): its connection closes before the file is let go
        db = getattr(self, "_db", None)
        if db is not None:
            try:
                db.close()
            except sqlite3.Error:
                pass
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
        if self.cache.readonly:  # counts the server gives now are kept in memory only
            return
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


# --- maintenance: crossprofile cache check|vacuum|export ------------------------------------------------

def _redacted_field(stored):
    """A stored ``base_url`` field (a URL, or a JSON list of URLs) redacted again."""
    if isinstance(urls := _stored_urls(stored), list):
        return json.dumps(redact_url([str(u) for u in urls]))
    return redact_url(stored) if isinstance(stored, str) else stored


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
    with closing(_connect(f, 5.0, readonly=True)) as db:
        n = 0
        for row in db.execute(f"SELECT {_DECODED} FROM calls"):
            n += 1
            try:
                _decode(f, row)
            except CacheError:
                rep["bad_rows"].append(str(row[0]))
        rep["entries"] = n
    if rep["bad_rows"]:
        rep["ok"] = False
        rep["problem"] = f"{len(rep['bad_rows'])} entr{'y' if len(rep['bad_rows']) == 1 else 'ies'} do not decode"
    return rep


def vacuum_cache(path: str | os.PathLike) -> tuple[int, int]:
    """Checkpoint the WAL and ``VACUUM`` a healthy cache file; returns its size before and after."""
    f = resolve_cache_file(path)
    if problem := open_problem(f, timeout=5.0):
        raise _err(f, problem)
    before = f.stat().st_size + (Path(f"{f}-wal").stat().st_size if Path(f"{f}-wal").exists() else 0)
    try:
        with closing(_connect(f, 60.0)) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.execute("VACUUM")
    except sqlite3.Error as e:  # VACUUM needs free space of about the file's size
        raise _env_err(f, "vacuum", e, "SQLite stopped") from None
    return before, f.stat().st_size


def export_cache(path: str | os.PathLike, out: str | os.PathLike) -> tuple[int, int]:
    """Write every readable entry of a cache file as one JSON line (all columns) to ``out``, also
    from a damaged file where SQLite can still read rows; returns (written, unreadable)."""
    f = resolve_cache_file(path)
    if not f.is_file() or f.stat().st_size == 0:
        raise _err(f, open_problem(f, writable=False) or "not a readable file")
    bad = 0
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
    db.close()
    return len(keys) - bad, bad
