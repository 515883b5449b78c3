"""How an OpenAI-compatible server's failures are told apart (:mod:`.openai_compat`), and what it says about its model.

Retried (:func:`_retryable`; tenacity, exponential backoff with full jitter, up to ``max_retries``):
:class:`MalformedResponse` (a 200 that is no usable completion: never cached), timeouts, dropped connections, 408,
429 and 5xx, waiting at least ``Retry-After`` (:func:`retry_after`; longer than ``retry_after_max``, default
:data:`RETRY_AFTER_MAX` s, fails the call saying so: :func:`retry_pause`, which also announces any wait over
:data:`ANNOUNCE_WAIT_S` s); every attempt has a whole-request deadline (:func:`within_deadline`); other errors
fail at once, and a call that still fails comes back with ``error`` set. Stopping the run: :class:`ServerUnreachable`
(the circuit breaker, ``circuit_breaker`` attempts, 0 = off) and :class:`ServerRefused` (:data:`REFUSAL_STATUSES`; a
refused key, :data:`KEY_REFUSALS`, at the first answer). :func:`probe_models`: the served model from
``GET /v1/models`` (the cache identity); :func:`server_tokenizer`: the budgets' tokenizer, never another silently.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from email.utils import parsedate_to_datetime
from typing import Optional
from urllib.parse import urlsplit

from crossprofile_lib.backends.concurrency import NEUTRAL, OVERLOAD
from crossprofile_lib.safety.redact import redact_url
from crossprofile_lib.task.tokenizer import ServerTokenizer, default_tokenizer, probe_servers


class MalformedResponse(Exception):
    """The server answered 200 with a body that is not a usable completion."""


class ServerUnreachable(RuntimeError):
    """The circuit breaker: the first attempts all failed to connect (no server answered)."""


class ServerRefused(ServerUnreachable):
    """A wrong key or model: the server answered 401, 403 or 404 (model not found). A subclass of
    :class:`ServerUnreachable`, so every caller that stops on a dead server stops on it too."""


class ConstraintBroken(Exception):
    """A constrained answer (grammar mode, a JSON-schema call) that breaks its constraint: an error row, never an
    ordinary invalid answer, never retried (the same fields get the same answer)."""


class ConstraintNotHonoured(ServerRefused):
    """``constraint_failures`` answers broke their constraint: the server does not understand the fields sent."""


#: the statuses that stop a run early (see the module doc)
REFUSAL_STATUSES = {401: "unauthorized: a wrong or missing API key", 403: "forbidden: the key may not use this model",
                    404: "not found: a wrong model name, or no such endpoint on this server"}
#: the statuses that say the key is refused: the first such answer stops the run
KEY_REFUSALS = (401, 403)


def _connect_failure(e: BaseException) -> bool:
    """No server took the connection (refused, unreachable, connect timeout). A connection reset
    or dropped after it was accepted is not one: a server is there, and the retry is transient."""
    import openai
    if not isinstance(e, openai.APIConnectionError):
        return False
    cause = e.__cause__ or e.__context__
    if cause is None:
        return not isinstance(e, openai.APITimeoutError)
    # the HTTP library's ConnectError / ConnectTimeout, by name (the openai client may bundle its own httpx)
    return bool({c.__name__ for c in type(cause).__mro__} & {"ConnectError", "ConnectTimeout"}) or isinstance(
        cause, (ConnectionRefusedError, socket.gaierror))


def base_url_problem(url: str) -> Optional[str]:
    """Why ``url`` cannot be a server's base URL (None when it can): an ``http``/``https`` URL with a
    host and, if given, a numeric port (an invalid IPv6 literal such as ``http://[::1/v1`` is named)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
        host = parts.hostname
    except ValueError as e:
        return f"not a valid URL ({e})"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not host:
        return "has no host name"
    return None


#: The longest ``Retry-After`` honoured (seconds, the default of ``--backend-option retry_after_max``): a server
#: asking for a longer wait fails the call at once with :class:`RetryAfterTooLong`, saying so.
RETRY_AFTER_MAX = 120.0
#: A wait before a retry longer than this (seconds) is announced on the console: how long and why.
ANNOUNCE_WAIT_S = 5.0


class RetryAfterTooLong(Exception):
    """The server asked (``Retry-After``) for a longer wait than the cap (``retry_after_max``)."""


class DeadlineExceeded(TimeoutError):
    """No complete answer (connect, headers and body together) within the whole-request deadline (``--timeout``;
    ``--tokenize-timeout`` for the tokenize and ``/v1/models`` probes)."""


async def within_deadline(coro, seconds: float):
    """``await coro``, cancelled (its connection closed) when it has not finished ``seconds`` after the start: the
    client's own timeouts are per read, so a server that drips its headers or body a byte at a time would keep a
    call alive for as long as it likes."""
    try:
        return await asyncio.wait_for(coro, seconds)
    except TimeoutError as e:
        if isinstance(e, DeadlineExceeded):
            raise
        raise DeadlineExceeded(f"no complete answer within the {seconds:g} s deadline for the whole request (connect, "
                               f"headers and body; --timeout)") from None


def call_within(fn, seconds: float, what: str = "request"):
    """``fn()`` in a daemon thread, :class:`DeadlineExceeded` when it has not returned within ``seconds`` (the
    thread is abandoned; it cannot keep the process alive): the whole-request deadline of a synchronous client."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001  (handed to the caller)
            box["error"] = e
    t = threading.Thread(target=run, name=f"deadline-{what}", daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        raise DeadlineExceeded(f"{what}: no complete answer within the {seconds:g} s deadline for the whole request "
                               f"(--tokenize-timeout)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def retry_pause(backend, state, backoff) -> float:
    """The wait before the next attempt of a failed call (tenacity's ``wait``): the backoff, or the server's
    ``Retry-After`` when it asks for longer -- but never more than ``backend.retry_after_max``: a longer one raises
    :class:`RetryAfterTooLong` (the call fails at once, saying so). A wait over :data:`ANNOUNCE_WAIT_S` seconds is
    announced on the console (how long and why), at most once per wave of retries."""
    exc = state.outcome.exception() if state.outcome is not None else None
    ra = retry_after(exc) if exc is not None else None
    wait = backoff(state)
    cap = float(getattr(backend, "retry_after_max", RETRY_AFTER_MAX))
    status = getattr(exc, "status_code", None)
    if ra is not None:
        if ra > cap:
            raise RetryAfterTooLong(
                f"the server answered HTTP {status} asking to wait {ra:g} s before retrying (Retry-After), longer "
                f"than the cap of {cap:g} s (--backend-option retry_after_max=SECONDS); the call is not retried") \
                from None
        wait = max(wait, ra)
    if wait > ANNOUNCE_WAIT_S:
        shown = getattr(backend, "_wait_shown", 0)
        if state.attempt_number > shown:
            backend._wait_shown = state.attempt_number
            why = (f"the server asked for it (HTTP {status}, Retry-After {ra:g} s)" if ra is not None and ra >= wait
                   else f"backoff after {type(exc).__name__}" + (f" (HTTP {status})" if status else ""))
            print(f"{getattr(backend, 'name', 'backend')}: waiting {wait:.0f} s before retry {state.attempt_number} of "
                  f"{getattr(backend, 'max_retries', '?')}: {why}", file=sys.stderr, flush=True)
    return wait


def retry_after(e: BaseException) -> Optional[float]:
    """Seconds a 429/503 answer asks the client to wait (``Retry-After`` in seconds or as an HTTP
    date, or ``retry-after-ms``), else None."""
    headers = getattr(getattr(e, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        if (v := headers.get("retry-after")) is None:
            return None
        try:
            return max(0.0, float(v))
        except ValueError:
            return max(0.0, parsedate_to_datetime(v).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def _retryable(e: BaseException) -> bool:
    import openai
    if isinstance(e, (openai.APITimeoutError, openai.APIConnectionError, openai.APIResponseValidationError,
                      MalformedResponse, json.JSONDecodeError, asyncio.TimeoutError, UnicodeDecodeError)):
        return True
    return isinstance(e, openai.APIStatusError) and (e.status_code in (408, 429) or e.status_code >= 500)


def _outcome(e: BaseException) -> str:
    """How a failed attempt moves its URL's concurrency limit: overload (429, 503, timeouts,
    dropped connections) or neutral."""
    import openai
    overload = isinstance(e, (openai.APIConnectionError, asyncio.TimeoutError)) or (
        isinstance(e, openai.APIStatusError) and e.status_code in (429, 503))
    return OVERLOAD if overload else NEUTRAL


async def settle(tasks) -> None:
    """Wait for the worker ``tasks``; at the first that fails, cancel the others and raise its exception. Every
    task's outcome is retrieved, so several workers stopped by one tripped breaker (a wrong key with concurrency 2
    or more) print no "Task exception was never retrieved" after the clear error."""
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    errors = [t.exception() for t in tasks if t.done() and not t.cancelled()]  # retrieves each one
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first


def run_coroutine(coro):
    """Run ``coro`` to completion, also from inside a running event loop (Jupyter: in a thread of its own)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class RetryWaves:
    """The retry waves of a backend's calls: on its progress bar, or one line on stderr per new wave."""

    def _retrying(self, j: int, state) -> None:
        self._waves[j] = state.attempt_number
        exc = state.outcome.exception() if state.outcome is not None else None
        self._last_error = self._scrub(type(exc).__name__) if exc is not None else ""
        self._show_waves()

    def _retry_done(self, j: int) -> None:
        if self._waves.pop(j, None) is not None:
            self._show_waves()

    def _show_waves(self) -> None:
        wave = max(self._waves.values(), default=0)
        text = (f"retrying {len(self._waves)} call{'s' if len(self._waves) != 1 else ''} (wave {wave}/"
                f"{self.max_retries}; last: {self._last_error})" if self._waves else "")
        bar = getattr(self, "_bar", None)
        if bar is not None and not bar.disable:
            if getattr(self, "_bar_base", (None,))[0] is not bar:
                self._bar_base = (bar, bar.desc)
            bar.set_description_str(self._bar_base[1] + (f" | {text}" if text else ""), refresh=True)
        elif wave > self._wave_shown:
            print(f"{self.name}: {text} at {self.shown_urls}", file=sys.stderr, flush=True)
        self._wave_shown = max(self._wave_shown, wave)


class Refusals:
    """Counts the calls a server refused (401, 403, 404); see :data:`KEY_REFUSALS` and ``stop_on_refusal``."""

    def _refused(self, e: BaseException, k: int) -> None:
        """Count 401/403/404 answers; after ``stop_on_refusal`` in a row, stop the run (:class:`ServerRefused`)."""
        import openai
        status = e.status_code if isinstance(e, openai.APIStatusError) else None
        if status not in REFUSAL_STATUSES or self.stop_on_refusal <= 0:
            return
        self._refusals += 1
        # a refused key (401/403) is refused for every call: the first one stops the run, before any
        # result is written as an answer; a 404 may be one endpoint's, so it takes stop_on_refusal in a row
        if (status in KEY_REFUSALS or self._refusals >= self.stop_on_refusal) and self._tripped is None:
            shown = redact_url(self.base_urls)[k or 0]
            self._tripped = ServerRefused(
                f"backend {self.name}: the server at {shown} answered HTTP {status} ({REFUSAL_STATUSES[status]}) "
                f"to {self._refusals} calls in a row for model '{self.model}' ({self._scrub(str(e))[:200]}); "
                f"stopped early (stop_on_refusal={self.stop_on_refusal}); no finished call is lost (they are in "
                f"the call cache {self.cache.path})")
            raise self._tripped from None


# --- what the server says about its model ------------------------------------------------------------------

#: ``owned_by`` of ``GET /v1/models`` -> the server's kind (what the constraint fields and score mode follow)
SERVER_OWNERS = {"vllm": "vllm", "llamacpp": "llama.cpp"}


def _basename(x) -> Optional[str]:
    """The last path part of a model id or path (``/models/Qwen2.5-7B`` -> ``Qwen2.5-7B``)."""
    return str(x).rstrip("/").rsplit("/", 1)[-1] if x else None


def probe_models(self, memo: dict) -> Optional[dict]:
    """The served model of ``self`` (an :class:`~.openai_compat.OpenAICompatBackend`), as every base URL's
    ``GET /v1/models`` reports it; ``memo`` keeps the answers per (base URL, key hash) in this process."""
    import openai
    seen, unreachable = {}, []
    for u, shown in zip(self.base_urls, redact_url(self.base_urls)):
        key = (u, hashlib.sha256(self._api_key.encode()).hexdigest())
        data = memo.get(key)  # once per server and key in a process, like the tokenize probe
        client = openai.OpenAI(base_url=u, api_key=self._api_key, max_retries=0, timeout=self.tokenize_timeout)
        try:
            if data is None:
                data = memo[key] = call_within(lambda: list(client.models.list().data), self.tokenize_timeout,
                                               "GET /v1/models")
        except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
            raise ServerRefused(f"backend {self.name}: the server at {shown} answered HTTP {e.status_code} "
                                f"({REFUSAL_STATUSES[e.status_code]}) for model '{self.model}'; check "
                                f"CROSSPROFILE_API_KEY / {self.service}_API_KEY. Stopped before any call") from None
        except (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError, DeadlineExceeded):
            unreachable.append(shown)
            continue
        except (openai.APIError, ValueError, TypeError):
            continue  # no usable /v1/models (a server without it): nothing to add to the identity
        finally:
            client.close()
        ids = [str(getattr(m, "id", "")) for m in data]
        aliases = [(getattr(m, "model_extra", None) or {}).get("aliases") for m in data]
        names = [{i, _basename(i), *(map(str, a) if isinstance(a, list) else ())}  # llama.cpp: a model's other names
                 for i, a in zip(ids, aliases)]
        match = [m for m, n in zip(data, names) if self.model in n]
        if not match and data and not getattr(self, "accept_served_model", False):
            one = len(data) == 1
            raise ServerRefused(
                f"backend {self.name}: the server at {shown} does not serve model '{self.model}' (it serves: "
                f"{', '.join(ids[:10])}). Stopped before any call: rows and the book's paper columns are keyed by "
                f"the backend's name, so a run under another model's name would pass its answers off as that "
                f"model's. Name the served model (--backend {self.provider}/{_basename(ids[0]) if one else '<id>'}), "
                f"start the server under this name (vLLM: --served-model-name {self.model}; llama.cpp: --alias "
                f"{self.model})" + (", or pass --backend-option accept_served_model=true to run this name on the one "
                                    "model it serves" if one else ""))
        if not match and not data:
            continue
        m = (match or data)[0]
        owner = str(getattr(m, "owned_by", "") or "")
        self._server_kind = SERVER_OWNERS.get(owner, self._server_kind)
        extra = getattr(m, "model_extra", None) or {}
        served = {"id": _basename(getattr(m, "id", None))}
        if extra.get("root"):
            served["root"] = _basename(extra["root"])
        seen[shown] = served
    if len({json.dumps(v, sort_keys=True) for v in seen.values()}) > 1:
        raise ValueError(f"backend {self.name}: the base URLs serve different models "
                         f"({'; '.join(f'{k}: {v}' for k, v in seen.items())}); one run needs one model")
    if seen:
        served = next(iter(seen.values()))
        self.cache.set_served_model(self.provider, self.model, served)
        return served
    if unreachable:
        stored = self.cache.served_model(self.provider, self.model)
        if stored:
            print(f"notice: {self.name}: no server answered GET /v1/models ({', '.join(unreachable)}); the "
                  f"served model recorded in the call cache keys the calls: {stored}", file=sys.stderr)
        return stored
    return None


def server_tokenizer(self, required: bool):
    """(tokenizer, source) for budgets: the server's own (see the module doc); never another silently."""
    if self.provider == "deepseek" and self.base_urls == [self.default_base_url] and not required:
        off = default_tokenizer()
        print(f"notice: {self.name}: budgets use the offline approximation {off.name} (the hosted DeepSeek "
              f"API has no tokenize endpoint); pass --tokenizer PATH/tokenizer.json for the model's own",
              file=sys.stderr)
        return off, "offline approximation (the hosted DeepSeek API has no tokenize endpoint)"
    tok, why, state = probe_servers(self.base_urls, self.model, self._api_key, self.tokenize_timeout,
                                    store=None)
    why = self._scrub(why)
    if state == "refused":
        raise ServerRefused(f"backend {self.name}: the server at {self.shown_urls} refused the key for model "
                            f"'{self.model}' ({why}); check CROSSPROFILE_API_KEY / {self.service}_API_KEY")
    # counts are kept per served model (a new model under the same name has its own), found again
    # from the cache's record of it when no server answers
    served = self.served_model()
    tag = "@" + json.dumps(served, sort_keys=True, separators=(",", ":")) if served else ""
    kinds = [f"server:{k}:{self.model}{tag}" for k in ("llama-cpp-python", "vllm", "llama.cpp")]
    stored = [n for n in self.cache.stored_tokenizers(f":{self.model}{tag}") if n in kinds]
    store = self.cache.token_store(stored[0]) if stored else None
    if tok is not None:
        tok.store = self.cache.token_store(tok.name + tag)
        tok.store.offset = tok.offset
        print(f"notice: {self.name}: budgets use the served model's tokenizer ({why}); counts are kept in "
              f"the call cache {self.cache.path}", file=sys.stderr)
        return tok, why
    if state == "unreachable" and store is not None and len(store):
        kind = stored[0].split(":")[1]
        tok = ServerTokenizer(self.base_urls, self.model, kind, self._api_key, self.tokenize_timeout, store=store)
        tok.offset = store.offset or 0
        print(f"notice: {self.name}: the tokenize endpoint cannot be reached ({why}); budgets use the "
              f"{len(store)} token counts {tok.name} gave earlier runs (kept in the call cache {self.cache.path})",
              file=sys.stderr)
        return tok, f"{tok.name} counts stored in the call cache (endpoint unreachable: {why})"
    advice = ("pass --tokenizer qwen2.5, llama-3.1, PATH/tokenizer.json or gguf:PATH (the model's own "
              "tokenizer without a server; recommended for HTTP runs)")
    if required:
        raise ValueError(f"backend {self.name}: --tokenizer server, but {why} (at {self.shown_urls}); {advice}")
    if self.tokenizer_fallback != "offline":
        what = ("the servers cannot be reached" if state == "unreachable" else "no server has a tokenize endpoint")
        err = ServerUnreachable if state == "unreachable" else ValueError
        raise err(f"backend {self.name}: budgets are priced with the served model's tokenizer, but {what} "
                  f"({why}) and the call cache {self.cache.path} holds no counts for '{self.model}'; "
                  f"budgets are never changed silently: rerun when the server is up, {advice}, or pass "
                  f"--tokenizer-fallback offline to accept the offline approximation")
    off = default_tokenizer()
    print(f"notice: {self.name}: budgets use the offline approximation {off.name}, not the model's own "
          f"tokenizer ({why}; --tokenizer-fallback offline)", file=sys.stderr)
    return off, f"offline approximation (--tokenizer-fallback offline: {why})"
