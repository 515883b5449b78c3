"""The call cache: SQLite, entries never expire (STYLE convention 3).

Location: the folder ``CROSSPROFILE_CACHE`` (default ``./.crossprofile_cache`` in the working
directory, never inside the installed package); the file is ``calls.sqlite``. ``":memory:"``
gives a throw-away cache (benchmarks).

Key = SHA-256 of the provider, the model, the base URL(s), the rendered messages, the
settings that change the output (max tokens, temperature, stop strings, constrained choices,
JSON schema, decision mode and provider extras such as the chat template). The API key,
retries, timeouts and concurrency are never part of the key or of any stored field.

Each entry stores the raw text, the parsed answer (set after parsing), the retry count,
prompt/completion tokens, latency, the prompt file and a hash of the rendered messages.
Every entry is committed as soon as its call finishes (WAL journal), so an interrupted run
(Ctrl-C, ``kill -9``, a dead server) loses no finished call. Failed calls are not stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterable, Optional

from .base import ChatRequest, ChatResult

DEFAULT_FOLDER = ".crossprofile_cache"
SCHEMA_VERSION = 1

_COLUMNS = ("key", "created", "provider", "model", "base_url", "decision_mode", "purpose", "prompt_file",
            "prompt_sha", "text", "parsed", "retries", "prompt_tokens", "completion_tokens", "latency_s",
            "choice_logprobs", "meta")


def cache_folder(folder: Optional[str | os.PathLike] = None) -> Path:
    """The cache folder: ``folder``, else ``$CROSSPROFILE_CACHE``, else ``./.crossprofile_cache``."""
    f = Path(folder or os.environ.get("CROSSPROFILE_CACHE") or Path.cwd() / DEFAULT_FOLDER).expanduser()
    pkg = Path(__file__).resolve().parents[1]
    if f.resolve() == pkg or pkg in f.resolve().parents:
        raise ValueError(f"cache folder {f} is inside the installed package {pkg} "
                         f"(rule: set CROSSPROFILE_CACHE to a folder outside the package)")
    return f


def messages_sha(messages: Iterable[dict]) -> str:
    """SHA-256 (16 hex digits) of the messages' contents joined by blank lines; for a one-message
    prompt this equals :attr:`crossprofile_lib.prompts.Prompt.sha`."""
    text = "\n\n".join(str(m.get("content", "")) for m in messages)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def call_key(identity: dict, request: ChatRequest, decision_mode: str) -> str:
    """The cache key of ``request`` sent to the backend ``identity`` (provider, model, base URL,
    and output-changing extras). Nothing secret may be in ``identity``."""
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


class CallCache:
    """A persistent ``key -> ChatResult`` map (see module doc). Thread-safe."""

    def __init__(self, folder: Optional[str | os.PathLike] = None):
        if str(folder) == ":memory:":
            self.path = ":memory:"
        else:
            f = cache_folder(folder)
            f.mkdir(parents=True, exist_ok=True)
            self.path = str(f / "calls.sqlite")
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=60)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, created REAL, provider TEXT, model TEXT, "
            "base_url TEXT, decision_mode TEXT, purpose TEXT, prompt_file TEXT, prompt_sha TEXT, text TEXT, "
            "parsed TEXT, retries INTEGER, prompt_tokens INTEGER, completion_tokens INTEGER, latency_s REAL, "
            "choice_logprobs TEXT, meta TEXT)")

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def get_many(self, keys: Iterable[str]) -> dict[str, ChatResult]:
        keys = list(dict.fromkeys(keys))
        out: dict[str, ChatResult] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                q = ("SELECT key, text, retries, prompt_tokens, completion_tokens, latency_s, choice_logprobs, "
                     f"meta, parsed FROM calls WHERE key IN ({','.join('?' * len(chunk))})")
                for k, text, retries, pt, ct, lat, lp, meta, parsed in self._db.execute(q, chunk):
                    m = json.loads(meta) if meta else {}
                    if parsed is not None:
                        m["parsed"] = parsed
                    out[k] = ChatResult(text=text, cached=True, retries=retries or 0, prompt_tokens=pt or 0,
                                        completion_tokens=ct or 0, latency_s=lat or 0.0,
                                        choice_logprobs=json.loads(lp) if lp else None, meta=m)
        return out

    def put(self, key: str, request: ChatRequest, result: ChatResult, identity: dict, decision_mode: str) -> None:
        """Store a finished call (failed calls, ``result.error`` set, are not stored)."""
        if result.error is not None:
            return
        base_url = identity.get("base_url")
        row = (key, time.time(), identity.get("provider", ""), identity.get("model", ""),
               json.dumps(base_url) if not isinstance(base_url, str) else base_url, decision_mode,
               request.purpose, request.prompt_file, messages_sha(request.messages), result.text, None,
               int(result.retries), int(result.prompt_tokens), int(result.completion_tokens),
               float(result.latency_s),
               json.dumps(result.choice_logprobs) if result.choice_logprobs is not None else None,
               json.dumps(result.meta, default=str) if result.meta else None)
        with self._lock:
            self._db.execute(f"INSERT OR REPLACE INTO calls ({','.join(_COLUMNS)}) VALUES "
                             f"({','.join('?' * len(_COLUMNS))})", row)

    def set_parsed(self, key: str, parsed: Optional[str]) -> None:
        """Record the parsed answer (e.g. the decision letter) of a stored call."""
        with self._lock:
            self._db.execute("UPDATE calls SET parsed = ? WHERE key = ?", (parsed, key))

    def close(self) -> None:
        with self._lock:
            self._db.close()
