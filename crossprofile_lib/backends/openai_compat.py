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

Budgets use ``--tokenizer`` (``gguf:PATH`` / ``hf:FOLDER`` for the served model's own tokenizer);
without one, the offline approximation.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import threading
import time
from typing import Callable, Optional, Sequence

from .base import ChatRequest, ChatResult
from .llm import (GRAMMAR_REASON_CHARS, TOP_LOGPROBS, ChatTemplate, LLMBackend, best_choice, choice_logprobs, decision_gbnf,
                  decision_regex, score_text)


class MalformedResponse(Exception):
    """The server answered 200 with a body that is not a usable completion."""


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
                 reason_chars: int = GRAMMAR_REASON_CHARS, decision_prompt: str = "default"):
        from ..tokenizer import get_tokenizer
        if not model:
            raise ValueError(f"backend '{self.provider}/': name the served model, e.g. {self.provider}/my-model")
        tok = get_tokenizer(tokenizer) if tokenizer is None or isinstance(tokenizer, str) else tokenizer
        super().__init__(model, decision_mode, tok, cache, progress, max_tokens, reason_chars,
                         decision_prompt)
        urls = base_url or _env(["CROSSPROFILE_BASE_URL", f"{self.service}_BASE_URL"]) or self.default_base_url
        if not urls:
            raise ValueError(f"backend {self.name}: no base URL (set CROSSPROFILE_BASE_URL or "
                             f"{self.service}_BASE_URL, or --base-url)")
        self.base_urls = [u.strip().rstrip("/") for u in (urls.split(",") if isinstance(urls, str) else urls)
                          if u.strip()]
        self._api_key = api_key or _env(["CROSSPROFILE_API_KEY", f"{self.service}_API_KEY"]) or "EMPTY"
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

    def __repr__(self) -> str:  # never shows the key
        return f"<{type(self).__name__} {self.name} {self.base_urls} mode={self.decision_mode}>"

    def identity(self) -> dict:
        return {"provider": self.provider, "model": self.model,
                "base_url": self.base_urls[0] if len(self.base_urls) == 1 else sorted(self.base_urls),
                "chat_template": self.template.sha if self.template else None,
                "grammar_style": self.grammar_style if self.decision_mode != "generate" else None,
                "reason_chars": self.reason_chars if self.decision_mode == "grammar" else None,
                "extra_body": self.extra_body or None}

    def _scrub(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key and self._api_key != "EMPTY" else text

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
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential
        attempts = 0
        try:
            async for attempt in AsyncRetrying(
                    stop=stop_after_attempt(self.max_retries + 1), reraise=True,
                    wait=wait_random_exponential(multiplier=self.retry_wait, max=self.retry_wait_max),
                    retry=retry_if_exception(_retryable)):
                with attempt:
                    attempts += 1
                    k = (j + attempts - 1) % len(clients)
                    res = await self._send(clients[k], r)
            return dataclasses.replace(res, retries=attempts - 1, meta={"base_url_index": k})
        except Exception as e:  # recorded, never raised: the run goes on
            return ChatResult(text="", error=self._scrub(f"{type(e).__name__}: {e}")[:500], retries=attempts - 1)

    async def _run(self, requests: Sequence[ChatRequest], on_done) -> None:
        import openai
        clients = [openai.AsyncOpenAI(base_url=u, api_key=self._api_key, max_retries=0, timeout=self.timeout)
                   for u in self.base_urls]
        it = iter(enumerate(requests))

        async def worker():
            for j, r in it:
                on_done(j, await self._call(clients, j, r))
        try:
            await asyncio.gather(*(worker() for _ in range(min(self.concurrency, len(requests)))))
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
