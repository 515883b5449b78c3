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
import re
import threading
import time
import warnings
from typing import Callable, Optional, Sequence

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from crossprofile_lib.backends.base import ChatRequest, ChatResult
from crossprofile_lib.backends.cache import call_key, is_blank
from crossprofile_lib.backends.concurrency import Pool
from crossprofile_lib.backends.http_faults import (  # noqa: F401  (re-exported: the failures' names)
    RETRY_AFTER_MAX,
    ConstraintBroken,
    ConstraintNotHonoured,
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
    retry_pause,
    run_coroutine,
    server_tokenizer,
    settle,
    within_deadline,
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
from crossprofile_lib.design import LETTERS
from crossprofile_lib.safety.inputs import option_bool, option_number
from crossprofile_lib.safety.redact import redact_text, redact_url, url_secrets
from crossprofile_lib.task.llama_engine import json_schema_gbnf
from crossprofile_lib.task.tokenizer import ServerTokenizer

#: the paper's greedy settings sent with every request (``sampling="paper"``), as OpenAI fields
PAPER_SAMPLING = {"top_p": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
#: ... and as llama.cpp (``repeat_penalty``) and vLLM (``repetition_penalty``) extra fields
PAPER_PENALTIES = {"repeat_penalty": 1.0, "repetition_penalty": 1.0}
SAMPLINGS = ("paper", "server")
GRAMMAR_STYLES = ("auto", "gbnf", "vllm", "both")
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
                 grammar_style: str = "auto", extra_body: Optional[dict] = None, progress: bool = False,
                 max_tokens: int = 512, reason_chars: int = GRAMMAR_REASON_CHARS, decision_prompt: str = "default",
                 circuit_breaker: int = 8, sampling: str = "paper", tokenizer_fallback: str = "error",
                 tokenize_timeout: float = 60.0, max_concurrency: int = 128, stop_on_refusal: int = 3,
                 accept_served_model: bool = False, constraint_failures: int = 3, named_logprobs: bool = True,
                 retry_after_max: float = RETRY_AFTER_MAX):
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
        self.retry_after_max = option_number(owner, "retry_after_max", retry_after_max, low=0, high=86_400)
        self.circuit_breaker = option_number(owner, "circuit_breaker", circuit_breaker, low=0, high=1_000_000,
                                             integer=True)
        self.constraint_failures = option_number(owner, "constraint_failures", constraint_failures, low=1,
                                                 high=1_000_000, integer=True)
        self.accept_served_model = option_bool(owner, "accept_served_model", accept_served_model)
        self.named_logprobs = option_bool(owner, "named_logprobs", named_logprobs)
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
        self._server_kind, self._letter_ids, self._broken = None, None, 0
        self.grammar_style = one_of(f"backend {self.name}", "grammar_style", grammar_style, GRAMMAR_STYLES)
        self.extra_body = {**self.preset_extra_body, **(extra_body or {})}
        self.template = ChatTemplate.from_spec(chat_template) if chat_template else None
        if probe:  # last: every other option is checked before the network is touched
            self.tokenizer, self.tokenizer_source = server_tokenizer(self, tokenizer == "server")
        else:
            self.tokenizer_source = f"given: {self.tokenizer.name}"
        if decision_mode == "score" and self.template is None and self.server_kind() != "vllm":
            seen = (f"the server at {self.shown_urls} is {self.server_kind()}" if self.server_kind()
                    else f"no server at {self.shown_urls} said it is vLLM (GET /v1/models)")
            raise ValueError(f"backend {self.name}: decision_mode 'score' prefills the reply with 'Decision:': a vLLM "
                             f"server renders that with the model's own chat template, but {seen}; pass "
                             f"chat_template=chatml, gguf:PATH, hf:FOLDER or a .jinja file (--chat-template)")

    def __repr__(self) -> str:  # never shows the key
        return f"<{type(self).__name__} {self.name} {self.shown_urls} mode={self.decision_mode}>"

    def _options_identity(self) -> dict:
        out = {"chat_template": self.template.sha if self.template else None,
               "grammar_style": self.style() if self.decision_mode != "generate" else None,
               "reason_chars": self.reason_chars if self.decision_mode == "grammar" else None,
               "extra_body": self.extra_body or None}
        if self.decision_mode == "score" and self._named_route():
            out["letter_logprobs"] = "named"  # every letter's own log-probability, not the top 20 (other answers)
        return out

    # -- what the server is, and what it therefore understands --
    def server_kind(self) -> Optional[str]:
        """``vllm``, ``llama.cpp``, or None (unknown), from the ``owned_by`` of ``GET /v1/models`` (:data:`OWNERS`)."""
        self.served_model()
        return self._server_kind

    def style(self) -> str:
        """The constraint fields sent (grammar mode; JSON-schema calls in grammar and score modes): ``gbnf``
        (llama.cpp's ``grammar``), ``vllm`` (``structured_outputs``) or ``both`` where the server's kind is unknown;
        ``grammar_style=auto`` (the default) picks by :meth:`server_kind`."""
        if self.grammar_style != "auto":
            return self.grammar_style
        return {"vllm": "vllm", "llama.cpp": "gbnf"}.get(self.server_kind(), "both")

    def _named_route(self) -> bool:
        """Score mode asks a vLLM server for every letter's log-probability (``logprob_token_ids``)."""
        return self.named_logprobs and self.server_kind() == "vllm"

    def identity(self) -> dict:
        """The cache identity: provider, model, served model, sampling, options; never a base URL."""
        return {"provider": self.provider, "model": self.model, "served": self.served_model(),
                "sampling": self.sampling_fields() if self.sampling == "paper" else "server",
                **self._options_identity()}

    def stored_identity(self) -> dict:
        urls = redact_url(self.base_urls)
        return {**self.identity(), "base_url": urls[0] if len(urls) == 1 else sorted(urls)}

    def _server_era_identities(self) -> list:
        """The identities earlier versions keyed on (the base URL list, sampling left to the server): the current
        URLs and every one stored for this model."""
        urls = redact_url(self.base_urls)
        cands = [urls[0] if len(urls) == 1 else sorted(urls)] + self.cache.base_urls(self.provider, self.model)
        idents = [{"provider": self.provider, "model": self.model, "base_url": u, **self._options_identity()} for u in cands]
        return [d for i, d in enumerate(idents) if d not in idents[:i]]

    def legacy_identities(self) -> list:
        """Looked up on a miss, only under ``sampling="server"``, whose requests are those earlier versions sent."""
        return self._server_era_identities() if self.sampling == "server" else []

    def legacy_notice(self, n_missing: int, requests=()) -> Optional[str]:
        """Said once when calls this run makes are in the cache under an earlier version's key (found there, not
        guessed from the base URLs stored: a cache this version made holds those too)."""
        if self.sampling == "server" or not requests:
            return None
        keys = [call_key(ident, r, self.decision_mode) for ident in self._server_era_identities()
                for r in list(requests)[:500]]
        found = len(self.cache.get_many(keys)) if keys else 0
        if not found:
            return None
        return (f"notice: {self.name}: the call cache {self.cache.path} holds {found} of this run's calls made by "
                f"earlier versions (keyed by base URL, sampling left to the server); they are not reused with "
                f"sampling pinned (--sampling paper); pass --sampling server to reuse them")

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
        """The served model as ``GET /v1/models`` reports it (once; see the module doc); also sets the server's kind."""
        with self._served_lock:
            if self._served is None:
                self._served = probe_models(self, _MODELS_SEEN) or False
            return self._served or None

    def _scrub(self, text: str) -> str:
        """``text`` without the key, secret URL parts or unredacted URLs."""
        return redact_text(text, self._secrets)

    # -- one call --
    def _constraint(self, r: ChatRequest) -> dict:
        """extra_body entries that constrain the output (grammar mode; JSON-schema calls in grammar and score modes),
        in the server's own fields (:meth:`style`)."""
        if self.decision_mode not in ("grammar", "score"):
            return {}
        style, out = self.style(), {}
        if r.json_schema is not None:
            if style in ("gbnf", "both"):
                out["grammar"] = json_schema_gbnf(r.json_schema)
            if style in ("vllm", "both"):
                out.update(structured_outputs={"json": r.json_schema}, guided_json=r.json_schema)
        elif self.decision_mode == "grammar" and r.choices:
            if style in ("gbnf", "both"):
                out["grammar"] = decision_gbnf(r.choices, self.reason_chars)
            if style in ("vllm", "both"):
                rx = decision_regex(r.choices, self.reason_chars)
                out.update(structured_outputs={"regex": rx}, guided_regex=rx)
        return out

    def _body_fields(self) -> dict:
        """The request fields sent besides model, messages, limits and temperature (:meth:`sampling_fields`)."""
        return {k: v for k, v in self.sampling_fields().items() if k != "temperature"}

    def _scored(self, r: ChatRequest) -> bool:
        return self.decision_mode == "score" and bool(r.choices) and r.json_schema is None

    def _letter_token_ids(self) -> dict:
        """``{token id: letter}`` of every option letter, bare and after a space (``A``, `` A``), each a single token of
        the served model (vLLM's ``/tokenize``); looked up once."""
        if self._letter_ids is None:
            tok = ServerTokenizer(self.base_urls[0], self.model, "vllm", self._api_key, self.tokenize_timeout)
            ids = {}
            try:
                for letter in LETTERS:
                    for text in (letter, " " + letter):
                        got = tok._post({"model": self.model, "prompt": text, "add_special_tokens": False})
                        toks = got.get("tokens") if isinstance(got, dict) else None
                        if isinstance(toks, list) and len(toks) == 1 and isinstance(toks[0], int):
                            ids[toks[0]] = letter
            except (OSError, ValueError) as e:
                raise ServerUnreachable(f"backend {self.name}: score mode asks vLLM's /tokenize for the option letters' "
                                        f"token ids, but it failed ({self._scrub(f'{type(e).__name__}: {e}')[:200]}); "
                                        f"pass --backend-option named_logprobs=false to read the top "
                                        f"{TOP_LOGPROBS} log-probabilities instead") from None
            finally:
                tok.close()
            self._letter_ids = ids
        return self._letter_ids

    def _adds_bos_again(self, prompt: str) -> bool:
        """Whether llama.cpp's server would put a second BOS before ``prompt`` (it adds the BOS its GGUF asks for to
        a text prompt): asked of its ``/tokenize`` once per backend, with and without the special tokens it adds.
        Only then is the template's leading BOS text left out."""
        if getattr(self, "_bos_again", None) is None:
            bos = self.template.bos_token if self.template else ""
            again = False
            if bos and prompt.startswith(bos):
                tok = ServerTokenizer(self.base_urls[0], self.model, "llama.cpp", self._api_key, self.tokenize_timeout)
                try:
                    plain = tok._post({"content": prompt, "add_special": False, "parse_special": True}).get("tokens")
                    added = tok._post({"content": prompt, "add_special": True, "parse_special": True}).get("tokens")
                    again = (isinstance(plain, list) and isinstance(added, list) and len(added) == len(plain) + 1
                             and len(plain) > 0 and added[1:] == plain and added[0] == plain[0])
                except (OSError, ValueError, AttributeError):
                    again = False  # no usable /tokenize: the prompt is sent as rendered
                finally:
                    tok.close()
            self._bos_again = again
        return self._bos_again

    def request_fields(self, r: ChatRequest) -> tuple[str, dict]:
        """``(endpoint, fields)`` of one call, ``chat`` or ``completions``, as sent (also by :meth:`prompt_token_ids`).

        Score mode: with ``chat_template`` the suite renders the prompt and prefill and sends text completions (to a
        vLLM server with ``add_special_tokens=false``; to llama.cpp without the template's leading BOS text where its
        ``/tokenize`` shows it would add one again: :meth:`_adds_bos_again`); without one, a vLLM server continues the
        prefilled reply with the model's own
        template (``continue_final_message``). A vLLM server returns every letter's log-probability
        (``logprob_token_ids``); other servers their top :data:`TOP_LOGPROBS`."""
        extra = self._body_fields()
        if self._scored(r):
            if self._named_route():
                extra["logprob_token_ids"] = sorted(i for i, c in self._letter_token_ids().items() if c in r.choices)
            if self.template is not None:
                prompt = self.template.render(r.messages)
                if self.server_kind() == "vllm":
                    extra["add_special_tokens"] = False
                elif self.server_kind() == "llama.cpp" and self._adds_bos_again(prompt):
                    prompt = prompt[len(self.template.bos_token):]
                return "completions", dict(model=self.model, prompt=prompt, max_tokens=1, temperature=0.0,
                                           logprobs=TOP_LOGPROBS, extra_body=extra or None)
            extra.update(continue_final_message=True, add_generation_prompt=False)
            return "chat", dict(model=self.model, messages=[dict(m) for m in r.messages], max_tokens=1,
                                temperature=0.0, logprobs=True, top_logprobs=TOP_LOGPROBS, extra_body=extra)
        kw = {"stop": list(r.stop)} if r.stop else {}
        return "chat", dict(model=self.model, messages=[dict(m) for m in r.messages], max_tokens=r.max_tokens,
                            temperature=r.temperature, extra_body={**extra, **self._constraint(r)} or None, **kw)

    def prompt_token_ids(self, r: ChatRequest) -> list[int]:
        """The prompt token ids a vLLM server builds from call ``r`` exactly as a run sends it (one token generated,
        ``return_token_ids``): what the model reads, checked against the in-process backend and for a doubled BOS."""
        import openai
        endpoint, fields = self.request_fields(r)
        fields = {**fields, "max_tokens": 1, "extra_body": {**(fields.get("extra_body") or {}), "return_token_ids": True}}
        client = openai.OpenAI(base_url=self.base_urls[0], api_key=self._api_key, max_retries=0, timeout=self.timeout)
        try:
            api = client.chat.completions if endpoint == "chat" else client.completions
            resp = api.create(**fields)
        finally:
            client.close()
        ids = (resp.model_extra or {}).get("prompt_token_ids") if endpoint == "chat" else \
            (resp.choices[0].model_extra or {}).get("prompt_token_ids")
        if not isinstance(ids, list):
            raise ValueError(f"backend {self.name}: the server returned no prompt_token_ids (a vLLM server does)")
        return ids

    def _honoured(self, r: ChatRequest, text: str, finish: Optional[str]) -> bool:
        """Whether a constrained answer keeps to its constraint. An answer cut off by ``max_tokens`` (``finish_reason``
        length) is not counted against the server where the constraint could not fit (a JSON answer that starts as
        JSON; a decision whose ``max_tokens`` is below ``reason_chars``); free text cut off is."""
        if not self._constraint(r):
            return True
        if finish == "length":
            if r.json_schema is not None:
                return text.lstrip().startswith("{")
            if r.max_tokens < self.reason_chars + 16:
                return True
        if r.json_schema is not None:
            import jsonschema
            try:
                jsonschema.validate(json.loads(text), r.json_schema)
            except (ValueError, jsonschema.ValidationError):
                return False
            return True
        return re.fullmatch(decision_regex(r.choices, self.reason_chars), text.rstrip()) is not None

    async def _send(self, client, r: ChatRequest) -> ChatResult:
        t0 = time.perf_counter()
        endpoint, fields = self.request_fields(r)
        lps, finish = None, None
        if endpoint == "completions":
            resp = await client.completions.create(**fields)
            try:
                top = resp.choices[0].logprobs.top_logprobs[0]
            except (AttributeError, IndexError, TypeError) as e:
                try:  # llama.cpp's own llama-server: logprobs.content[0].top_logprobs = [{token, logprob}, ...]
                    top = {d["token"]: d["logprob"] for d in resp.choices[0].logprobs.content[0]["top_logprobs"]}
                except (AttributeError, IndexError, TypeError, KeyError):
                    raise MalformedResponse(f"completion without top_logprobs ({type(e).__name__})") from None
        else:
            resp = await client.chat.completions.create(**fields)
            try:
                text = resp.choices[0].message.content
                finish = resp.choices[0].finish_reason
            except (AttributeError, IndexError, TypeError) as e:
                raise MalformedResponse(f"chat completion without choices ({type(e).__name__})") from None
            if self._scored(r):
                try:
                    top = {d.token: d.logprob for d in resp.choices[0].logprobs.content[0].top_logprobs}
                except (AttributeError, IndexError, TypeError) as e:
                    raise MalformedResponse(f"chat completion without top_logprobs ({type(e).__name__})") from None
            elif is_blank(text):  # a transient server fault, never an answer to cache
                raise MalformedResponse("chat completion with empty content")
        if self._scored(r):
            if not top:  # no token at all: a transient server fault, never an answer to cache
                raise MalformedResponse("completion with empty top_logprobs")
            lps = choice_logprobs(dict(top), r.choices)
            text = score_text(r, best_choice(lps, list(r.choices)))
        elif not self._honoured(r, text, finish):
            raise ConstraintBroken(f"the answer breaks the {r.purpose} call's constraint (grammar_style="
                                   f"{self.style()}): {text[:120]!r}")
        u = getattr(resp, "usage", None)
        return ChatResult(text=text, prompt_tokens=getattr(u, "prompt_tokens", 0) or 0,
                          completion_tokens=getattr(u, "completion_tokens", 0) or 0,
                          latency_s=self._latency(resp, time.perf_counter() - t0), choice_logprobs=lps)

    def _latency(self, resp, elapsed: float) -> float:
        """The call's latency as rows and the concurrency rule see it: the client's wall time ``elapsed``. (The
        concurrency tests replace it with a fake server's modelled time, so no test depends on this machine's speed.)"""
        return elapsed

    def _constraint_broken(self, e: BaseException) -> None:
        """Count answers that broke their constraint; after ``constraint_failures`` stop the run
        (:class:`ConstraintNotHonoured`): the server does not understand the constraint fields sent."""
        if not isinstance(e, ConstraintBroken):
            return
        self._broken += 1
        if self._broken >= self.constraint_failures and self._tripped is None:
            kind = self.server_kind() or "of unknown kind (GET /v1/models names no vLLM or llama.cpp)"
            self._tripped = ConstraintNotHonoured(
                f"backend {self.name}: the server at {self.shown_urls} did not honour the output constraint: "
                f"{self._broken} answers broke it ({self._scrub(str(e))[:200]}); none was recorded as an answer. "
                f"The server is {kind} and was sent grammar_style={self.style()} (grammar_style="
                f"{self.grammar_style}); vLLM understands grammar_style=vllm (structured_outputs), llama.cpp "
                f"grammar_style=gbnf: pass --backend-option grammar_style=... (constraint_failures="
                f"{self.constraint_failures}); no finished call is lost (they are in the call cache {self.cache.path})")
            raise self._tripped from None

    async def _call(self, clients, j: int, r: ChatRequest) -> ChatResult:
        attempts, k = 0, None
        backoff = wait_random_exponential(multiplier=self.retry_wait, max=self.retry_wait_max)

        def wait(state) -> float:  # backoff, or the server's Retry-After when it asks for longer (up to the cap)
            return retry_pause(self, state, backoff)
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
            self._constraint_broken(e)
            return ChatResult(text="", error=self._scrub(f"{type(e).__name__}: {e}")[:500], retries=attempts - 1)
        finally:
            self._retry_done(j)

    async def _attempt(self, client, k: int, r: ChatRequest) -> ChatResult:
        """One HTTP attempt; feeds the circuit breaker (see module doc)."""
        try:
            res = await within_deadline(self._send(client, r), self.timeout)  # connect, headers and body together
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
            elif not isinstance(e, (asyncio.TimeoutError, MalformedResponse, json.JSONDecodeError, ConstraintBroken)):
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
        if self._named_route() and any(self._scored(r) for r in requests):
            await asyncio.to_thread(self._letter_token_ids)
        if self._pool is None:  # one per backend: a later batch starts from the limits found so far
            self._pool = Pool(len(clients), self.concurrency, self.max_concurrency)
        self._pool.new_loop()

        async def worker():
            for j, r in it:
                on_done(j, await self._call(clients, j, r))
        tasks = [asyncio.create_task(worker()) for _ in range(min(self._pool.workers, len(requests)))]
        try:
            await settle(tasks)  # the breaker tripped (or a bug): the others stopped, every failure retrieved
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
