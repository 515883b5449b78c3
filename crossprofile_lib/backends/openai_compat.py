"""``openai/<model>`` (any OpenAI-compatible server) and the ``deepseek/<model>`` preset.

One client for DeepSeek, a vLLM server and llama.cpp's server (``python -m llama_cpp.server``).

* Base URL and key: the ``base_url`` / ``api_key`` options, else ``CROSSPROFILE_BASE_URL`` /
  ``CROSSPROFILE_API_KEY``, else ``<SERVICE>_BASE_URL`` / ``<SERVICE>_API_KEY`` (``OPENAI_...``,
  ``DEEPSEEK_...``). Several base URLs (comma-separated) spread one run over several servers
  that serve the same model: call i goes to URL ``i mod n`` and each retry moves to the next
  URL. The key is held by the client only: it is in no cache key, cache entry, row, header or
  log (errors are scrubbed of it).
* Bounded concurrency (``concurrency``, default 8) on one asyncio loop; retries with
  exponential backoff and full jitter (tenacity ``wait_random_exponential``) on 429, 5xx,
  timeouts, dropped connections and malformed responses, up to ``max_retries`` (6); other
  errors (400, 401, 404) fail at once. A call that still fails is returned with ``error`` set;
  the runner records it, finishes the rest and exits non-zero.
* Decision modes: ``generate`` (chat completions); ``grammar`` (chat completions with the
  server's constraint: ``grammar_style=gbnf`` sends a llama.cpp grammar, ``vllm`` sends vLLM
  structured outputs); ``score`` (the text completions endpoint with the prompt rendered by
  ``chat_template`` -- ``chatml``, ``gguf:PATH``, ``hf:FOLDER`` or a ``.jinja`` file -- prefilled
  with ``Decision:``, reading ``logprobs`` of the option letters).
* ``deepseek/<model>``: base URL ``https://api.deepseek.com``, temperature 0, thinking off
  (``{"thinking": {"type": "disabled"}}``), ``generate`` mode only.

* Budgets (``tokenizer``): by default (``auto``) the served model's own tokenizer through the
  server's tokenize endpoint (vLLM ``/tokenize``, llama.cpp ``/tokenize``, llama-cpp-python
  ``/extras/tokenize``; probed once per base URL, :func:`crossprofile_lib.task.tokenizer.probe_server`),
  else the offline approximation with a notice; ``server`` insists on the endpoint; a path to a
  ``tokenizer.json`` (or ``hf:FOLDER``, ``gguf:PATH``) uses that file; ``offline`` never probes.
  The hosted DeepSeek API has no endpoint: pass its ``tokenizer.json``. The ``tokenizer`` column
  and ``run.json`` name the one used.
* A dead server: each retry wave shows in the progress bar (or, without one, as one line on
  stderr per wave): ``retrying 37 calls (wave 2/6)``. A circuit breaker (``circuit_breaker``,
  default 8; 0 turns it off) stops the run with :class:`ServerUnreachable`, naming the base
  URL(s), when that many attempts failed to connect before any reached a server; finished calls
  are already in the cache.
* Base URLs are shown and keyed only through :func:`crossprofile_lib.safety.redact.redact_url`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import threading
import time
from typing import Callable, Optional, Sequence

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from crossprofile_lib.backends.base import ChatRequest, ChatResult
from crossprofile_lib.backends.llm import (
    GRAMMAR_REASON_CHARS,
    TOP_LOGPROBS,
    ChatTemplate,
    LLMBackend,
    best_choice,
    choice_logprobs,
    decision_gbnf,
    decision_regex,
    score_text,
)
from crossprofile_lib.safety.redact import redact_text, redact_url, url_secrets
from crossprofile_lib.task.tokenizer import default_tokenizer, get_tokenizer, probe_server


class MalformedResponse(Exception):
    """The server answered 200 with a body that is not a usable completion."""


class ServerUnreachable(RuntimeError):
    """The circuit breaker: the first attempts all failed to connect (no server answered)."""


def _connect_failure(e: BaseException) -> bool:
    import openai
    return isinstance(e, openai.APIConnectionError) and not isinstance(e, openai.APITimeoutError)


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


class OpenAICompatBackend(LLMBackend):
    """See module doc."""

    provider = "openai"
    service = "OPENAI"
    default_base_url: Optional[str] = None
    preset_extra_body: dict = {}

    def __init__(self, model: str, decision_mode: str = "generate", tokenizer=None, cache=None,
                 base_url: str | Sequence[str] | None = None, api_key: Optional[str] = None,
                 concurrency: int = 8, max_retries: int = 6, timeout: float = 120.0, retry_wait: float = 1.0,
                 retry_wait_max: float = 60.0, chat_template: Optional[str] = None, grammar_style: str = "gbnf",
                 extra_body: Optional[dict] = None, progress: bool = False, max_tokens: int = 512,
                 reason_chars: int = GRAMMAR_REASON_CHARS, decision_prompt: str = "default",
                 circuit_breaker: int = 8):
        if not model:
            raise ValueError(f"backend '{self.provider}/': name the served model, e.g. {self.provider}/my-model")
        probe = tokenizer in (None, "", "auto", "server")
        tok = None if probe else get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
        super().__init__(model, decision_mode, tok, cache, progress, max_tokens, reason_chars,
                         decision_prompt)
        urls = base_url or _env(["CROSSPROFILE_BASE_URL", f"{self.service}_BASE_URL"]) or self.default_base_url
        if not urls:
            raise ValueError(f"backend {self.name}: no base URL (set CROSSPROFILE_BASE_URL or "
                             f"{self.service}_BASE_URL, or --base-url)")
        self.base_urls = [u.strip().rstrip("/") for u in (urls.split(",") if isinstance(urls, str) else urls)
                          if u.strip()]
        self._api_key = api_key or _env(["CROSSPROFILE_API_KEY", f"{self.service}_API_KEY"]) or "EMPTY"
        self._secrets = [k for k in (self._api_key,) if k != "EMPTY"] + url_secrets(self.base_urls)
        self.shown_urls = ", ".join(redact_url(self.base_urls))
        self.circuit_breaker = int(circuit_breaker)
        self.concurrency, self.max_retries = max(1, int(concurrency)), int(max_retries)
        self.timeout, self.retry_wait, self.retry_wait_max = float(timeout), float(retry_wait), float(retry_wait_max)
        self.grammar_style = grammar_style
        if grammar_style not in ("gbnf", "vllm"):
            raise ValueError(f"backend {self.name}: grammar_style '{grammar_style}' is not gbnf or vllm")
        self.extra_body = {**self.preset_extra_body, **(extra_body or {})}
        self.template = ChatTemplate.from_spec(chat_template) if chat_template else None
        if decision_mode == "score" and self.template is None:
            raise ValueError(f"backend {self.name}: decision_mode 'score' renders the prompt itself; pass "
                             f"chat_template=chatml, gguf:PATH, hf:FOLDER or a .jinja file")
        if probe:  # last: every other option is checked before the network is touched
            self.tokenizer, self.tokenizer_source = self._server_tokenizer(tokenizer == "server")
        else:
            self.tokenizer_source = f"given: {self.tokenizer.name}"

    def __repr__(self) -> str:  # never shows the key
        return f"<{type(self).__name__} {self.name} {self.shown_urls} mode={self.decision_mode}>"

    def _server_tokenizer(self, required: bool):
        """(tokenizer, source) for budgets: the server's own where it has a tokenize endpoint."""
        if self.provider == "deepseek" and self.base_urls == [self.default_base_url] and not required:
            tok, why = None, "the hosted DeepSeek API has no tokenize endpoint"
        else:
            tok, why = probe_server(self.base_urls[0], self.model, self._api_key, min(self.timeout, 10.0))
        why = self._scrub(why)
        if tok is not None:
            print(f"notice: {self.name}: budgets use the served model's tokenizer ({why})", file=sys.stderr)
            return tok, why
        if required:
            raise ValueError(f"backend {self.name}: --tokenizer server, but {why} (at {self.shown_urls}); pass "
                             f"--tokenizer PATH/tokenizer.json (or gguf:PATH) instead")
        off = default_tokenizer()
        print(f"notice: {self.name}: budgets use the offline approximation {off.name}, not the model's own "
              f"tokenizer ({why}); pass --tokenizer PATH/tokenizer.json or gguf:PATH for exact budgets",
              file=sys.stderr)
        return off, f"offline approximation ({why})"

    def identity(self) -> dict:
        urls = redact_url(self.base_urls)
        return {"provider": self.provider, "model": self.model,
                "base_url": urls[0] if len(urls) == 1 else sorted(urls),
                "chat_template": self.template.sha if self.template else None,
                "grammar_style": self.grammar_style if self.decision_mode != "generate" else None,
                "reason_chars": self.reason_chars if self.decision_mode == "grammar" else None,
                "extra_body": self.extra_body or None}

    def _scrub(self, text: str) -> str:
        """``text`` without the key, secret URL parts or unredacted URLs."""
        return redact_text(text, self._secrets)

    # -- one call --
    def _constraint(self, r: ChatRequest) -> dict:
        """extra_body entries that constrain the output (grammar / score modes)."""
        if self.decision_mode not in ("grammar", "score"):
            return {}
        if r.json_schema is not None:
            if self.grammar_style == "gbnf":
                from llama_cpp.llama_grammar import json_schema_to_gbnf
                return {"grammar": json_schema_to_gbnf(json.dumps(r.json_schema))}
            return {"structured_outputs": {"json": r.json_schema}, "guided_json": r.json_schema}
        if self.decision_mode == "grammar" and r.choices:
            if self.grammar_style == "gbnf":
                return {"grammar": decision_gbnf(r.choices, self.reason_chars)}
            rx = decision_regex(r.choices, self.reason_chars)
            return {"structured_outputs": {"regex": rx}, "guided_regex": rx}
        return {}

    async def _send(self, client, r: ChatRequest) -> ChatResult:
        t0 = time.perf_counter()
        if self.decision_mode == "score" and r.choices and r.json_schema is None:
            resp = await client.completions.create(model=self.model, prompt=self.template.render(r.messages),
                                                   max_tokens=1, temperature=0.0, logprobs=TOP_LOGPROBS,
                                                   extra_body=self.extra_body or None)
            try:
                top = resp.choices[0].logprobs.top_logprobs[0]
            except (AttributeError, IndexError, TypeError) as e:
                raise MalformedResponse(f"completion without top_logprobs ({type(e).__name__})") from None
            lps = choice_logprobs(dict(top), r.choices)
            text = score_text(r, best_choice(lps, list(r.choices)))
        else:
            kw = {"stop": list(r.stop)} if r.stop else {}
            resp = await client.chat.completions.create(
                model=self.model, messages=[dict(m) for m in r.messages], max_tokens=r.max_tokens,
                temperature=r.temperature, extra_body={**self.extra_body, **self._constraint(r)} or None, **kw)
            try:
                text = resp.choices[0].message.content
            except (AttributeError, IndexError, TypeError) as e:
                raise MalformedResponse(f"chat completion without choices ({type(e).__name__})") from None
            if text is None:
                raise MalformedResponse("chat completion with empty content")
            lps = None
        u = getattr(resp, "usage", None)
        return ChatResult(text=text, prompt_tokens=getattr(u, "prompt_tokens", 0) or 0,
                          completion_tokens=getattr(u, "completion_tokens", 0) or 0,
                          latency_s=time.perf_counter() - t0, choice_logprobs=lps)

    async def _call(self, clients, j: int, r: ChatRequest) -> ChatResult:
        attempts = 0
        try:
            async for attempt in AsyncRetrying(
                    stop=stop_after_attempt(self.max_retries + 1), reraise=True,
                    wait=wait_random_exponential(multiplier=self.retry_wait, max=self.retry_wait_max),
                    retry=retry_if_exception(_retryable), before_sleep=lambda st: self._retrying(j, st)):
                with attempt:
                    if self._tripped is not None:
                        raise self._tripped
                    attempts += 1
                    k = (j + attempts - 1) % len(clients)
                    res = await self._attempt(clients[k], k, r)
            return dataclasses.replace(res, retries=attempts - 1, meta={"base_url_index": k})
        except ServerUnreachable:
            raise
        except Exception as e:  # recorded, never raised: the run goes on
            return ChatResult(text="", error=self._scrub(f"{type(e).__name__}: {e}")[:500], retries=attempts - 1)
        finally:
            self._retry_done(j)

    async def _attempt(self, client, k: int, r: ChatRequest) -> ChatResult:
        """One HTTP attempt; feeds the circuit breaker (see module doc)."""
        try:
            res = await self._send(client, r)
        except Exception as e:
            if _connect_failure(e):
                self._connect_failures[k] += 1
                n = sum(self._connect_failures)
                if (self.circuit_breaker > 0 and not any(self._reached) and n >= self.circuit_breaker
                        and all(self._connect_failures) and self._tripped is None):
                    self._tripped = ServerUnreachable(
                        f"backend {self.name}: no server answered at {self.shown_urls}: the first {n} attempts all "
                        f"failed to connect ({self._scrub(f'{type(e).__name__}: {e}')[:200]}); is the server "
                        f"running and the base URL right? Stopped early (circuit_breaker={self.circuit_breaker}); "
                        f"no finished call is lost (they are in the call cache {self.cache.path})")
                    raise self._tripped from None
            elif not isinstance(e, (asyncio.TimeoutError, MalformedResponse, json.JSONDecodeError)):
                self._reached[k] = True  # an HTTP answer, even an error status, means the server is up
            raise
        self._reached[k] = True
        return res

    # -- retry waves (progress bar, or stderr without one) --
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

    async def _run(self, requests: Sequence[ChatRequest], on_done) -> None:
        import openai
        clients = [openai.AsyncOpenAI(base_url=u, api_key=self._api_key, max_retries=0, timeout=self.timeout)
                   for u in self.base_urls]
        it = iter(enumerate(requests))
        self._tripped, self._waves, self._wave_shown, self._last_error = None, {}, 0, ""
        self._connect_failures, self._reached = [0] * len(clients), [False] * len(clients)

        async def worker():
            for j, r in it:
                on_done(j, await self._call(clients, j, r))
        tasks = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(requests)))]
        try:
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in pending:  # the breaker tripped (or a bug): stop the others at once
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for t in done:
                if t.exception() is not None:
                    raise t.exception()
        finally:
            for c in clients:
                await c.close()

    def _complete(self, requests: Sequence[ChatRequest], on_done: Callable[[int, ChatResult], None]) -> None:
        run_coroutine(self._run(requests, on_done))


class DeepSeekBackend(OpenAICompatBackend):
    """``deepseek/<model>``: temperature 0 (every request), thinking off, ``generate`` mode."""

    provider = "deepseek"
    service = "DEEPSEEK"
    default_base_url = "https://api.deepseek.com"
    preset_extra_body = {"thinking": {"type": "disabled"}}
    supported_modes = ("generate",)
