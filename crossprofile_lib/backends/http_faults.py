"""How an OpenAI-compatible server's failures are told apart (:mod:`.openai_compat`).

Retried (:func:`_retryable`): :class:`MalformedResponse` (a 200 that is no usable completion), timeouts, dropped or
reset connections, 429 and 5xx (:func:`retry_after` reads ``Retry-After``). Stopping the run:
:class:`ServerUnreachable` (the circuit breaker: no server took a connection) and :class:`ServerRefused` (a wrong key
or model, :data:`REFUSAL_STATUSES`; a refused key, :data:`KEY_REFUSALS`, stops at the first answer). :func:`_outcome`
says how a failed attempt moves its URL's concurrency limit; :class:`RetryWaves` shows the waves of retries.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Optional, Sequence
from urllib.parse import urlsplit

from crossprofile_lib.backends.concurrency import NEUTRAL, OVERLOAD
from crossprofile_lib.safety.redact import redact_url


class MalformedResponse(Exception):
    """The server answered 200 with a body that is not a usable completion."""


class ServerUnreachable(RuntimeError):
    """The circuit breaker: the first attempts all failed to connect (no server answered)."""


class ServerRefused(ServerUnreachable):
    """A wrong key or model: the server answered 401, 403 or 404 (model not found). A subclass of
    :class:`ServerUnreachable`, so every caller that stops on a dead server stops on it too."""


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


#: The longest ``Retry-After`` honoured (seconds); a longer one waits this long.
RETRY_AFTER_MAX = 600.0


def retry_after(e: BaseException) -> Optional[float]:
    """Seconds a 429/503 answer asks the client to wait (``Retry-After`` in seconds or as an HTTP
    date, or ``retry-after-ms``), else None."""
    resp = getattr(e, "response", None)
    headers = getattr(resp, "headers", None)
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        v = headers.get("retry-after")
        if v is None:
            return None
        try:
            return max(0.0, float(v))
        except ValueError:
            return max(0.0, parsedate_to_datetime(v).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def _env(names: Sequence[str]) -> Optional[str]:
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return None


def _retryable(e: BaseException) -> bool:
    import openai
    if isinstance(e, (openai.APITimeoutError, openai.APIConnectionError, openai.APIResponseValidationError,
                      MalformedResponse, json.JSONDecodeError, asyncio.TimeoutError)):
        return True
    if isinstance(e, openai.APIStatusError):
        return e.status_code == 429 or e.status_code == 408 or e.status_code >= 500
    return False


def _outcome(e: BaseException) -> str:
    """How a failed attempt moves its URL's concurrency limit: overload (429, 503, timeouts,
    dropped connections) or neutral."""
    import openai
    if isinstance(e, (openai.APIConnectionError, asyncio.TimeoutError)):
        return OVERLOAD
    if isinstance(e, openai.APIStatusError) and e.status_code in (429, 503):
        return OVERLOAD
    return NEUTRAL


def run_coroutine(coro):
    """Run ``coro`` to completion, also from inside a running event loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict = {}

    def target():
        try:
            box["v"] = asyncio.run(coro)
        except BaseException as e:  # re-raised in the caller's thread
            box["e"] = e
    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box.get("v")


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
            shown = redact_url(self.base_urls)[k if k is not None else 0]
            self._tripped = ServerRefused(
                f"backend {self.name}: the server at {shown} answered HTTP {status} ({REFUSAL_STATUSES[status]}) "
                f"to {self._refusals} calls in a row for model '{self.model}' ({self._scrub(str(e))[:200]}); "
                f"stopped early (stop_on_refusal={self.stop_on_refusal}); no finished call is lost (they are in "
                f"the call cache {self.cache.path})")
            raise self._tripped from None
