"""``deepseek/<model>``: the DeepSeek preset of the OpenAI-compatible backend (:mod:`.openai_compat`)."""

from __future__ import annotations

import warnings

from crossprofile_lib.backends.openai_compat import OpenAICompatBackend

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
