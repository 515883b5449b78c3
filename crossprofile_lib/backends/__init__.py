"""Decision backends, named ``provider/model``; SDKs are imported only when used.

* ``ledger`` -- the reference decider (:class:`crossprofile_lib.decider.ReferenceDecider`);
  options ``social_proof``, ``irrelevant_weight``, ``inverse_temperature``.
"""

from __future__ import annotations

from typing import Callable

_PROVIDERS: dict[str, Callable] = {}


def register(provider: str):
    def deco(fn):
        _PROVIDERS[provider] = fn
        return fn
    return deco


@register("ledger")
def _ledger(model: str = "", tokenizer=None, **opts):
    from ..decider import ReferenceDecider
    from ..tokenizer import get_tokenizer
    return ReferenceDecider(tokenizer=get_tokenizer(tokenizer), **opts)


def get_backend(spec: str, tokenizer=None, **opts):
    """Build a backend from ``provider/model`` (``ledger`` needs no model)."""
    provider, _, model = spec.partition("/")
    if provider not in _PROVIDERS:
        _load_optional(provider)
    if provider not in _PROVIDERS:
        raise ValueError(f"unknown backend '{spec}' (known providers: {', '.join(sorted(_PROVIDERS))})")
    return _PROVIDERS[provider](model, tokenizer=tokenizer, **opts)


def _load_optional(provider: str) -> None:
    """Import the module that registers ``provider`` (kept lazy so SDKs load only when used)."""
    import importlib
    try:
        importlib.import_module(f"{__name__}.{provider}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{provider}":
            raise
