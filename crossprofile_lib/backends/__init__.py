"""Decision backends, named ``provider/model``; SDKs are imported only when used.

:data:`PROVIDERS` is the one table from provider name to its class (imported lazily); :func:`get_backend` builds a
backend from its name and :func:`backend_for` the one a run configuration names. ``ledger`` is the reference decider
(options ``social_proof``, ``irrelevant_weight``, ``inverse_temperature``); ``llamacpp/<alias-or-path>``,
``openai/<model>``, ``deepseek/<model>`` and ``vllm/<model-path>`` are language models.
"""

from __future__ import annotations

import importlib

from crossprofile_lib.backends.base import Backend  # noqa: F401  (the interface)
from crossprofile_lib.safety.redact import register_secret, url_secrets
from crossprofile_lib.task.tokenizer import get_tokenizer

#: provider -> (``module:Class``, default model when the spec names none)
PROVIDERS: dict[str, tuple[str, str]] = {
    "ledger": ("ledger:ReferenceDecider", ""),
    "llamacpp": ("llamacpp:LlamaCppBackend", "smollm2-135m"),
    "openai": ("openai_compat:OpenAICompatBackend", ""),
    "deepseek": ("openai_compat:DeepSeekBackend", "deepseek-flash"),
    "vllm": ("vllm:VLLMBackend", ""),
}


def check_backend_spec(spec: str) -> str:
    """``spec`` stripped when it is ``ledger`` or ``provider/model`` with a provider of :data:`PROVIDERS`; else
    :class:`ValueError` naming the rule (no module is imported)."""
    provider, slash, _ = spec.strip().partition("/")
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider '{provider}' in '{spec}' (known providers: {', '.join(sorted(PROVIDERS))}; "
                         f"write ledger or provider/model)")
    if provider == "ledger" and slash:  # the model name would be ignored
        raise ValueError(f"'{spec}': the reference decider takes no model name (write ledger; its parameters are "
                         f"--backend-option social_proof=..., irrelevant_weight=..., inverse_temperature=...)")
    return spec.strip()


def provider_class(provider: str):
    """The backend class registered for ``provider`` (its module is imported now)."""
    if provider not in PROVIDERS:
        raise ValueError(f"unknown backend provider '{provider}' (known providers: {', '.join(sorted(PROVIDERS))})")
    module, _, cls = PROVIDERS[provider][0].partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def get_backend(spec: str, tokenizer=None, **opts):
    """Build a backend from ``provider/model`` (``ledger`` needs no model). The key and the secret parts of the
    base URLs it is given are registered first (:func:`crossprofile_lib.safety.redact.register_secret`): no
    message or file of this process shows them, whatever their shape."""
    urls = opts.get("base_url")
    urls = urls.split(",") if isinstance(urls, str) else list(urls or [])
    register_secret(opts.get("api_key"), *url_secrets([u.strip() for u in urls]))
    provider, _, model = spec.partition("/")
    if provider not in PROVIDERS:
        raise ValueError(f"unknown backend '{spec}' (known providers: {', '.join(sorted(PROVIDERS))})")
    cls = provider_class(provider)
    if provider == "ledger":
        return cls(tokenizer=get_tokenizer(tokenizer), **opts)
    return cls(model or PROVIDERS[provider][1], tokenizer=tokenizer, **opts)


def backend_for(cfg):
    """The backend a run configuration names (``backend``, ``tokenizer``, ``backend_options``)."""
    return get_backend(cfg.backend, tokenizer=cfg.tokenizer, **cfg.backend_options)
