"""``openai/<model>`` (any OpenAI-compatible server: vLLM, llama.cpp's, DeepSeek) and the ``deepseek/<model>`` preset.

The options' rules for users are in ``book/reference-cli.md``. Base URL and key: the ``base_url`` / ``api_key``
options, else ``CROSSPROFILE_BASE_URL`` / ``CROSSPROFILE_API_KEY``, else ``<SERVICE>_BASE_URL`` / ``<SERVICE>_API_KEY``;
several comma-separated URLs spread one run over servers of one model. The key is held by the client only (in no cache
key, entry, row, header or log; errors are scrubbed of it); base URLs are shown and stored only redacted. Concurrency:
``auto`` (:mod:`.concurrency`) or a fixed total. Retries, refusals, the circuit breaker, the served model and the
budgets' tokenizer: :mod:`.http_faults`. Decision modes: ``generate`` (chat completions); ``grammar`` (a llama.cpp
grammar, ``grammar_style=gbnf``, or vLLM structured outputs, ``vllm``); ``score`` (text completions of the prompt
rendered by ``chat_template``, prefilled with ``Decision:``, reading the letters' ``logprobs``). Sampling is pinned
(``sampling="paper"``: :meth:`OpenAICompatBackend.sampling_fields`); ``sampling="server"`` sends temperature only and
finds entries earlier versions keyed by base URL (copied under the new key).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import threading
import time
import warnings
from typing import Callable, Optional, Sequence

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from crossprofile_lib.backends.base import ChatRequest, ChatResult
from crossprofile_lib.backends.cache import is_blank
from crossprofile_lib.backends.concurrency import Pool
from crossprofile_lib.backends.http_faults import (  # noqa: F401  (re-exported: the failures' names)
    RETRY_AFTER_MAX,
    MalformedResponse,
    Refusals,
    RetryWaves,
    ServerRefused,
    ServerUnreachable,
    _connect_failure,
    _outcome,
    _retryable,
    base_url_problem,
    probe_models,
    retry_after,
    run_coroutine,
    server_tokenizer,
)
from crossprofile_lib.backends.llm import (
    GRAMMAR_REASON_CHARS,
    TOP_LOGPROBS,
    ChatTemplate,
    LLMBackend,
    best_choice,
    choice_logprobs,
    decision_gbnf,
    decision_regex,
    given_tokenizer,
    one_of,
    score_text,
)
from crossprofile_lib.safety.inputs import option_number
from crossprofile_lib.safety.redact import redact_text, redact_url, url_secrets
from crossprofile_lib.task.llama_engine import json_schema_gbnf

#: the paper's greedy settings sent with every request (``sampling="paper"``), as OpenAI fields
PAPER_SAMPLING = {"top_p": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
#: ... and as llama.cpp (``repeat_penalty``) and vLLM (``repetition_penalty``) extra fields
PAPER_PENALTIES = {"repeat_penalty": 1.0, "repetition_penalty": 1.0}
SAMPLINGS = ("paper", "server")
TOKENIZER_FALLBACKS = ("error", "offline")


#: ``GET /v1/models`` answers seen in this process, per (base URL, key hash)
_MODELS_SEEN: dict = {}


def _env(names: Sequence[str]) -> Optional[str]:
    """The first of the environment variables ``names`` that is set and not empty."""
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


class OpenAICompatBackend(RetryWaves, Refusals, LLMBackend):
    """See module doc."""

    provider = "openai"
    service = "OPENAI"
    default_base_url: Optional[str] = None
    preset_extra_body: dict = {}

    def __init__(self, model: str, decision_mode: str = "generate", tokenizer=None, cache=None,
                 base_url: str | Sequence[str] | None = None, api_key: Optional[str] = None,
                 concurrency: "int | str" = "auto", max_retries: int = 6, timeout: float = 120.0,
                 retry_wait: float = 1.0, retry_wait_max: float = 60.0, chat_template: Optional[str] = None,
                 grammar_style: str = "gbnf", extra_body: Optional[dict] = None, progress: bool = False,
                 max_tokens: int = 512, reason_chars: int = GRAMMAR_REASON_CHARS, decision_prompt: str = "default",
                 circuit_breaker: int = 8, sampling: str = "paper", tokenizer_fallback: str = "error",
                 tokenize_timeout: float = 60.0, max_concurrency: int = 128, stop_on_refusal: int = 3):
        if not model:
            raise ValueError(f"backend '{self.provider}/': name the served model, e.g. {self.provider}/my-model")
        owner = f"backend {self.provider}/{model}"  # strict option values, checked before anything is sent
        self.timeout = option_number(owner, "timeout", timeout, low=0, above=True, high=86_400)
        if isinstance(concurrency, str):  # "auto": the AIMD rule (backends/concurrency.py); else a strict integer
            if concurrency.strip().lower() != "auto":
                raise ValueError(f"{owner}: option concurrency={concurrency!r}: must be 'auto' or an integer")
            self.concurrency = "auto"
        else:
            self.concurrency = option_number(owner, "concurrency", concurrency, low=1, high=1024, integer=True)
        self.max_concurrency = option_number(owner, "max_concurrency", max_concurrency, low=1, high=1024, integer=True)
        self.stop_on_refusal = option_number(owner, "stop_on_refusal", stop_on_refusal, low=0, high=1_000_000,
                                             integer=True)
        self.tokenize_timeout = option_number(owner, "tokenize_timeout", tokenize_timeout, low=0, above=True,
                                              high=86_400)
        self.max_retries = option_number(owner, "max_retries", max_retries, low=0, high=100, integer=True)
        self.retry_wait = option_number(owner, "retry_wait", retry_wait, low=0, high=3600)
        self.retry_wait_max = option_number(owner, "retry_wait_max", retry_wait_max, low=0, high=3600)
        self.circuit_breaker = option_number(owner, "circuit_breaker", circuit_breaker, low=0, high=1_000_000,
                                             integer=True)
        probe = tokenizer in (None, "", "auto", "server")
        tok = None if probe else given_tokenizer(tokenizer)
        super().__init__(model, decision_mode, tok, cache, progress, max_tokens, reason_chars,
                         decision_prompt)
        urls = base_url or _env(["CROSSPROFILE_BASE_URL", f"{self.service}_BASE_URL"]) or self.default_base_url
        if not urls:
            raise ValueError(f"backend {self.name}: no base URL (set CROSSPROFILE_BASE_URL or "
                             f"{self.service}_BASE_URL, or --base-url)")
        self.base_urls = [u.strip().rstrip("/") for u in (urls.split(",") if isinstance(urls, str) else urls)
                          if u.strip()]
        if not self.base_urls:
            raise ValueError(f"backend {self.name}: --base-url names no URL (give http://HOST:PORT/v1, comma-separated "
                             f"for several servers)")
        for u in self.base_urls:
            if why := base_url_problem(u):
                raise ValueError(f"backend {self.name}: base URL {redact_url(u)}: {why}")
        self._api_key = api_key or _env(["CROSSPROFILE_API_KEY", f"{self.service}_API_KEY"]) or "EMPTY"
        self._secrets = [k for k in (self._api_key,) if k != "EMPTY"] + url_secrets(self.base_urls)
        self.shown_urls = ", ".join(redact_url(self.base_urls))
        self.sampling = one_of(owner, "sampling", sampling, SAMPLINGS)
        self.tokenizer_fallback = one_of(owner, "tokenizer_fallback", tokenizer_fallback, TOKENIZER_FALLBACKS)
        self._served, self._served_lock, self._pool = None, threading.Lock(), None
        self.grammar_style = grammar_style
        if grammar_style not in ("gbnf", "vllm"):
            raise ValueError(f"backend {self.name}: grammar_style '{grammar_style}' is not gbnf or vllm")
        self.extra_body = {**self.preset_extra_body, **(extra_body or {})}
        self.template = ChatTemplate.from_spec(chat_template) if chat_template else None
        if decision_mode == "score" and self.template is None:
            raise ValueError(f"backend {self.name}: decision_mode 'score' renders the prompt itself; pass "
                             f"chat_template=chatml, gguf:PATH, hf:FOLDER or a .jinja file")
        if probe:  # last: every other option is checked before the network is touched
            self.tokenizer, self.tokenizer_source = server_tokenizer(self, tokenizer == "server")
        else:
            self.tokenizer_source = f"given: {self.tokenizer.name}"

    def __repr__(self) -> str:  # never shows the key
        return f"<{type(self).__name__} {self.name} {self.shown_urls} mode={self.decision_mode}>"

    def _options_identity(self) -> dict:
        return {"chat_template": self.template.sha if self.template else None,
                "grammar_style": self.grammar_style if self.decision_mode != "generate" else None,
                "reason_chars": self.reason_chars if self.decision_mode == "grammar" else None,
                "extra_body": self.extra_body or None}

    def identity(self) -> dict:
        """The cache identity: provider, model, served model, sampling, options; never a base URL."""
        return {"provider": self.provider, "model": self.model, "served": self.served_model(),
                "sampling": self.sampling_fields() if self.sampling == "paper" else "server",
                **self._options_identity()}

    def stored_identity(self) -> dict:
        urls = redact_url(self.base_urls)
        return {**self.identity(), "base_url": urls[0] if len(urls) == 1 else sorted(urls)}

    def legacy_identities(self) -> list:
        """The identities earlier versions keyed on (the base URL list; see the module doc): the
        current URLs and every one stored for this model. Only under ``sampling="server"``, whose
        requests are theirs."""
        if self.sampling != "server":
            return []
        urls = redact_url(self.base_urls)
        cands = [urls[0] if len(urls) == 1 else sorted(urls)] + self.cache.base_urls(self.provider, self.model)
        idents = [{"provider": self.provider, "model": self.model, "base_url": u, **self._options_identity()} for u in cands]
        return [d for i, d in enumerate(idents) if d not in idents[:i]]

    def legacy_notice(self, n_missing: int) -> Optional[str]:
        if self.sampling == "server" or not n_missing or not self.cache.base_urls(self.provider, self.model):
            return None
        return (f"notice: {self.name}: the call cache {self.cache.path} holds calls made by earlier versions (keyed "
                f"by base URL, sampling left to the server); they are not reused with sampling pinned "
                f"(--sampling paper); pass --sampling server to reuse them")

    def sampling_fields(self) -> dict:
        """Every request field besides the messages and limits (``sampling="paper"``: the paper's)."""
        if self.sampling != "paper":
            return {"temperature": 0.0, **self.extra_body}
        pen = {} if self.provider == "deepseek" else PAPER_PENALTIES
        return {"temperature": 0.0, **PAPER_SAMPLING, **pen, **self.extra_body}

    def record(self) -> dict:
        """What ``run.json`` records of this backend's requests: sampling, served model, concurrency,
        where the budgets' token counts came from."""
        out = {"sampling": {"mode": self.sampling, "fields": self.sampling_fields()},
               "served_model": self._served if isinstance(self._served, dict) else None}
        out["concurrency"] = self._pool.record(redact_url(self.base_urls)) if self._pool is not None else {
            "mode": "auto" if self.concurrency == "auto" else "fixed", "concurrency": self.concurrency}
        src = getattr(self.tokenizer, "sources", None)
        if src is not None:
            out["tokenizer_counts"] = dict(src)
        return out

    def served_model(self) -> Optional[dict]:
        """The served model as ``GET /v1/models`` reports it (once; see the module doc)."""
        with self._served_lock:
            if self._served is None:
                self._served = probe_models(self, _MODELS_SEEN) or False
            return self._served or None

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
                return {"grammar": json_schema_gbnf(r.json_schema)}
            return {"structured_outputs": {"json": r.json_schema}, "guided_json": r.json_schema}
        if self.decision_mode == "grammar" and r.choices:
            if self.grammar_style == "gbnf":
                return {"grammar": decision_gbnf(r.choices, self.reason_chars)}
            rx = decision_regex(r.choices, self.reason_chars)
            return {"structured_outputs": {"regex": rx}, "guided_regex": rx}
        return {}

    def _body_fields(self) -> dict:
        """The request fields sent besides model, messages, limits and temperature (:meth:`sampling_fields`)."""
        return {k: v for k, v in self.sampling_fields().items() if k != "temperature"}

    async def _send(self, client, r: ChatRequest) -> ChatResult:
        t0 = time.perf_counter()
        if self.decision_mode == "score" and r.choices and r.json_schema is None:
            resp = await client.completions.create(model=self.model, prompt=self.template.render(r.messages),
                                                   max_tokens=1, temperature=0.0, logprobs=TOP_LOGPROBS,
                                                   extra_body=self._body_fields() or None)
            try:
                top = resp.choices[0].logprobs.top_logprobs[0]
            except (AttributeError, IndexError, TypeError) as e:
                try:  # llama.cpp's own llama-server: logprobs.content[0].top_logprobs = [{token, logprob}, ...]
                    top = {d["token"]: d["logprob"] for d in resp.choices[0].logprobs.content[0]["top_logprobs"]}
                except (AttributeError, IndexError, TypeError, KeyError):
                    raise MalformedResponse(f"completion without top_logprobs ({type(e).__name__})") from None
            if not top:  # no token at all: a transient server fault, never an answer to cache
                raise MalformedResponse("completion with empty top_logprobs")
            lps = choice_logprobs(dict(top), r.choices)
            text = score_text(r, best_choice(lps, list(r.choices)))
        else:
            kw = {"stop": list(r.stop)} if r.stop else {}
            resp = await client.chat.completions.create(
                model=self.model, messages=[dict(m) for m in r.messages], max_tokens=r.max_tokens,
                temperature=r.temperature, extra_body={**self._body_fields(), **self._constraint(r)} or None, **kw)
            try:
                text = resp.choices[0].message.content
            except (AttributeError, IndexError, TypeError) as e:
                raise MalformedResponse(f"chat completion without choices ({type(e).__name__})") from None
            if is_blank(text):  # a transient server fault, never an answer to cache
                raise MalformedResponse("chat completion with empty content")
            lps = None
        u = getattr(resp, "usage", None)
        return ChatResult(text=text, prompt_tokens=getattr(u, "prompt_tokens", 0) or 0,
                          completion_tokens=getattr(u, "completion_tokens", 0) or 0,
                          latency_s=self._latency(resp, time.perf_counter() - t0), choice_logprobs=lps)

    def _latency(self, resp, elapsed: float) -> float:
        """The call's latency as rows and the concurrency rule see it: the client's wall time ``elapsed``. (The
        concurrency tests replace it with a fake server's modelled time, so no test depends on this machine's speed.)"""
        return elapsed

    async def _call(self, clients, j: int, r: ChatRequest) -> ChatResult:
        attempts, k = 0, None
        backoff = wait_random_exponential(multiplier=self.retry_wait, max=self.retry_wait_max)

        def wait(state) -> float:  # backoff, or the server's Retry-After when it asks for longer
            ra = retry_after(state.outcome.exception()) if state.outcome is not None else None
            return max(backoff(state), min(ra, RETRY_AFTER_MAX)) if ra is not None else backoff(state)
        try:
            async for attempt in AsyncRetrying(
                    stop=stop_after_attempt(self.max_retries + 1), reraise=True, wait=wait,
                    retry=retry_if_exception(_retryable), before_sleep=lambda st: self._retrying(j, st)):
                with attempt:
                    if self._tripped is not None:
                        raise self._tripped
                    attempts += 1
                    k = await self._pool.acquire(j + attempts - 1, avoid=k)
                    try:
                        res = await self._attempt(clients[k], k, r)
                    except BaseException as e:
                        await self._pool.release(k, _outcome(e))
                        raise
                    await self._pool.release(k, "ok", res.latency_s / (1 + res.completion_tokens))
            self._refusals = 0
            return dataclasses.replace(res, retries=attempts - 1, meta={"base_url_index": k})
        except ServerUnreachable:
            raise
        except Exception as e:  # recorded, never raised: the run goes on
            self._refused(e, k)
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

    async def _run(self, requests: Sequence[ChatRequest], on_done) -> None:
        import openai
        clients = [openai.AsyncOpenAI(base_url=u, api_key=self._api_key, max_retries=0, timeout=self.timeout)
                   for u in self.base_urls]
        it = iter(enumerate(requests))
        self._tripped, self._waves, self._wave_shown, self._last_error = None, {}, 0, ""
        self._connect_failures, self._reached = [0] * len(clients), [False] * len(clients)
        self._refusals = 0
        if self._pool is None:  # one per backend: a later batch starts from the limits found so far
            self._pool = Pool(len(clients), self.concurrency, self.max_concurrency)
        self._pool.new_loop()

        async def worker():
            for j, r in it:
                on_done(j, await self._call(clients, j, r))
        tasks = [asyncio.create_task(worker()) for _ in range(min(self._pool.workers, len(requests)))]
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


#: DeepSeek model ids retired by DeepSeek (id -> last day served), as checked on 2026-12-01 against
#: api-docs.deepseek.com (book/reference-backends.md, "DeepSeek model names"): naming one warns before any call.
DEEPSEEK_RETIRED = {"deepseek-chat": "2026-07-24", "deepseek-reasoner": "2026-07-24"}


class RetiredModelWarning(UserWarning):
    """A model id its provider has retired (the server will most likely refuse it)."""


class DeepSeekBackend(OpenAICompatBackend):
    """``deepseek/<model>``: temperature 0 (every request), thinking off, ``generate`` mode. Default
    model ``deepseek-flash`` (DeepSeek-V4.1-Flash); the paper's Pro is ``deepseek-v4-pro``."""

    provider = "deepseek"
    service = "DEEPSEEK"
    default_base_url = "https://api.deepseek.com"
    preset_extra_body = {"thinking": {"type": "disabled"}}
    supported_modes = ("generate",)

    def __init__(self, model: str, *args, **kwargs):
        if model in DEEPSEEK_RETIRED:
            warnings.warn(f"backend deepseek/{model}: DeepSeek retired the model id '{model}' after "
                          f"{DEEPSEEK_RETIRED[model]} (checked 2026-12-01); use deepseek/deepseek-flash "
                          "(V4.1-Flash) or deepseek/deepseek-v4-pro", RetiredModelWarning, stacklevel=2)
        super().__init__(model, *args, **kwargs)
