"""What an OpenAI-compatible server says about its model (:mod:`.openai_compat`): :func:`probe_models` (the served
model's identity from ``GET /v1/models``, for the cache key; a refused key or unknown model stops before any call) and
:func:`server_tokenizer` (the budgets' tokenizer from the tokenize endpoint, counts kept in the call cache).
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Optional

from crossprofile_lib.backends.http_faults import REFUSAL_STATUSES, ServerRefused, ServerUnreachable
from crossprofile_lib.safety.redact import redact_url
from crossprofile_lib.task.tokenizer import ServerTokenizer, default_tokenizer, probe_servers


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
                data = list(client.models.list().data)
                memo[key] = data
        except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
            raise ServerRefused(f"backend {self.name}: the server at {shown} answered HTTP {e.status_code} "
                                f"({REFUSAL_STATUSES[e.status_code]}) for model '{self.model}'; check "
                                f"CROSSPROFILE_API_KEY / {self.service}_API_KEY. Stopped before any call") from None
        except (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError):
            unreachable.append(shown)
            continue
        except (openai.APIError, ValueError, TypeError):
            continue  # no usable /v1/models (a server without it): nothing to add to the identity
        finally:
            client.close()
        ids = [str(getattr(m, "id", "")) for m in data]
        match = [m for m, i in zip(data, ids) if i == self.model or _basename(i) == self.model]
        if not match and len(data) > 1:
            raise ServerRefused(f"backend {self.name}: the server at {shown} does not serve model '{self.model}' "
                                f"(HTTP 404 model not found; it serves: {', '.join(ids[:10])}). Stopped before "
                                f"any call")
        if not match and not data:
            continue
        m = (match or data)[0]
        extra = getattr(m, "model_extra", None) or {}
        served = {"id": _basename(getattr(m, "id", None))}
        if extra.get("root"):
            served["root"] = _basename(extra["root"])
        seen[shown] = served
    distinct = {json.dumps(v, sort_keys=True) for v in seen.values()}
    if len(distinct) > 1:
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
