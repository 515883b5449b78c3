"""The llama.cpp engine under ``llamacpp/...`` and the GGUF tokenizer (in the task wing: the budgets' GGUF tokenizer
needs it too). The backend asks an engine for: tokenize as a prompt is tokenized, one token's bytes, the last
position's logits (reusing the longest common prefix's key/value cache), a greedy or sampled completion under an
optional GBNF grammar, the chat template with BOS/EOS texts, the training context, a larger context.

* ``cyllama`` (default; a prebuilt wheel, nothing to compile), driven exactly as llama-cpp-python drives llama.cpp
  (same context parameters, ``n_batch`` chunks, prefix reuse; :meth:`CyllamaEngine.complete` follows 0.3.36's
  ``create_completion`` step for step); letter log-probabilities equal llama-cpp-python's on every decision prompt
  measured (``benchmarks/check_engine_parity.py``).
* ``llama-cpp-python``: ``engine=llama-cpp-python`` (``--backend-option``), ``$CROSSPROFILE_LLAMA_ENGINE``, or
  when it is the only one installed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

#: engine name -> the module that provides it, in the order ``auto`` tries them
ENGINES = {"cyllama": "cyllama", "llama-cpp-python": "llama_cpp"}
ENV = "CROSSPROFILE_LLAMA_ENGINE"
INSTALL = {"cyllama": "make install-llm (or: pip install cyllama==0.2.18)",
           "llama-cpp-python": "pip install llama-cpp-python (a compile where pip's cache has no wheel)"}
#: llama-cpp-python's ``last_n_tokens_size``: the window of its (here neutral) repetition penalties
PENALTY_LAST_N = 64


def installed() -> list[str]:
    """The engines importable here, in the order ``auto`` tries them."""
    return [name for name, mod in ENGINES.items() if importlib.util.find_spec(mod) is not None]


def engine_name(asked: Optional[str] = None) -> str:
    """``asked`` (or ``$CROSSPROFILE_LLAMA_ENGINE``, else ``auto``) resolved to an installed engine; an
    unknown name is a :class:`ValueError`, a missing engine an :class:`ImportError` saying how to install it."""
    asked = (asked or os.environ.get(ENV) or "auto").strip()
    if asked != "auto" and asked not in ENGINES:
        raise ValueError(f"llama.cpp engine '{asked}': unknown (engine=auto, {', '.join(ENGINES)}; option engine "
                         f"or ${ENV})")
    have = installed()
    if asked == "auto":
        if not have:
            raise ImportError("no llama.cpp engine is installed for llamacpp/...: run 'make install-llm' (cyllama, "
                              "prebuilt) or pip install llama-cpp-python")
        return have[0]
    if asked not in have:
        raise ImportError(f"llama.cpp engine '{asked}' is not installed: {INSTALL[asked]}")
    return asked


def open_engine(path: str | Path, n_ctx: int, n_batch: int, n_threads: int, engine: Optional[str] = None):
    """The model at ``path`` in the engine :func:`engine_name` picks, with a context of ``n_ctx``."""
    cls = CyllamaEngine if engine_name(engine) == "cyllama" else LlamaCppPythonEngine
    return cls(str(path), n_ctx, n_batch, n_threads)


def open_vocab(path: str | Path, engine: Optional[str] = None):
    """The tokenizer and metadata of a GGUF file (no context). cyllama 0.2.18 aborts on a vocabulary-only load, so
    a file without weights goes to llama-cpp-python, else :class:`ImportError` (then ``GGUFTokenizer`` rebuilds it
    in pure Python)."""
    name = engine_name(engine)
    if name == "cyllama" and gguf_tensor_count(path) == 0:
        if "llama-cpp-python" not in installed():
            raise ImportError(f"{path}: a GGUF file without weights needs llama-cpp-python to be read by llama.cpp "
                              f"(cyllama loads whole models only)")
        name = "llama-cpp-python"
    return open_engine(path, 0, 512, 1, name)


def gguf_tensor_count(path: str | Path) -> int:
    """The number of tensors a GGUF file declares (its header: magic, version, tensor count)."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    if len(head) < 16 or head[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file (its first bytes are not 'GGUF')")
    return int.from_bytes(head[8:16], "little")


def json_schema_gbnf(schema: dict, engine: Optional[str] = None) -> str:
    """A JSON schema as a GBNF grammar by the llama.cpp converter ``engine`` ships: llama-cpp-python's (older: at most
    one space between tokens) or cyllama's with its blank rule replaced by the older one's (otherwise the answers
    differed: benchmarks/results/engine_parity.json). The embedded backend records the engine in its call-cache
    identity; ``engine=None`` (HTTP ``grammar_style=gbnf``): llama-cpp-python's where installed, else cyllama's."""
    name = engine or ("llama-cpp-python" if importlib.util.find_spec("llama_cpp") else "cyllama")
    if name == "cyllama":
        try:
            from cyllama.utils.json_schema_to_grammar import json_schema_to_grammar
        except ImportError:
            raise ImportError("a JSON-schema grammar needs a llama.cpp engine: run 'make install-llm'") from None
        return re.sub(r"(?m)^space ::= .*$", 'space ::= " "?', json_schema_to_grammar(schema))
    from llama_cpp.llama_grammar import json_schema_to_gbnf
    return json_schema_to_gbnf(json.dumps(schema))


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet (the text of a BPE token) -> the byte it stands for."""
    bs = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]  # printable: themselves
    rest = [b for b in range(256) if b not in bs]  # the others: 256, 257, ... in byte order
    return {chr(c): b for b, c in zip(bs + rest, bs + [256 + n for n in range(len(rest))])}


class LlamaCppPythonEngine:
    """llama-cpp-python's ``Llama`` (the suite's engine until issue 36)."""

    name = "llama-cpp-python"

    def __init__(self, path: str, n_ctx: int, n_batch: int, n_threads: int):
        from llama_cpp import Llama  # imported only when used
        self.path, self.n_batch, self.n_threads = path, n_batch, n_threads
        self.version = importlib.metadata.version("llama-cpp-python")
        if n_ctx == 0:
            self.llama = Llama(model_path=path, vocab_only=True, verbose=False)
        else:
            self.resize(n_ctx)

    def resize(self, n_ctx: int) -> None:
        from llama_cpp import Llama
        self.n_ctx = int(n_ctx)
        self.llama = Llama(model_path=self.path, n_ctx=self.n_ctx, n_batch=min(self.n_batch, self.n_ctx),
                           n_threads=self.n_threads, n_threads_batch=self.n_threads, logits_all=False, seed=0, verbose=False)

    def n_ctx_train(self) -> int:
        return self.llama._model.n_ctx_train()

    def n_vocab(self) -> int:
        return self.llama.n_vocab()

    def tokenize(self, text: str, special: bool = True, add_special: bool = True) -> list[int]:
        return self.llama.tokenize(text.encode("utf-8"), add_bos=add_special, special=special)

    def piece(self, token: int) -> bytes:
        return self.llama.detokenize([token])

    def chat_template(self) -> tuple[Optional[str], str, str]:
        """(the GGUF's ``tokenizer.chat_template``, the BOS token's text, the EOS token's text)"""
        def text(i):
            return self.llama._model.token_get_text(i) if i != -1 else ""
        return (self.llama.metadata.get("tokenizer.chat_template"), text(self.llama.token_bos()),
                text(self.llama.token_eos()))

    def last_logits(self, toks: Sequence[int]) -> np.ndarray:
        ll = self.llama
        prev = ll.input_ids[: ll.n_tokens]
        m = min(len(prev), len(toks))
        diff = np.flatnonzero(prev[:m] != np.asarray(toks[:m], dtype=prev.dtype))
        keep = min(int(diff[0]) if diff.size else m, len(toks) - 1)  # evaluate >= 1 token: fresh logits
        ll.n_tokens = keep
        ll.eval(list(toks[keep:]))
        return np.ctypeslib.as_array(ll._ctx.get_logits(), shape=(ll.n_vocab(),)).astype(np.float64)

    def complete(self, prompt: str, max_tokens: int, stop: Sequence[str], grammar: Optional[str],
                 temperature: float, sampling: dict) -> tuple[str, int, int]:
        from llama_cpp import LlamaGrammar
        g = LlamaGrammar.from_string(grammar, verbose=False) if grammar else None
        out = self.llama.create_completion(prompt, max_tokens=max_tokens, temperature=temperature, stop=list(stop),
                                           grammar=g, seed=0, **sampling)
        u = out.get("usage", {})
        return out["choices"][0]["text"], u.get("prompt_tokens", 0), u.get("completion_tokens", 0)


class CyllamaEngine:
    """cyllama's Cython classes, driven as llama-cpp-python drives llama.cpp (see the module doc)."""

    name = "cyllama"

    def __init__(self, path: str, n_ctx: int, n_batch: int, n_threads: int):
        from cyllama.llama import llama_cpp as cy  # imported only when used
        cy.disable_logging()
        self.cy, self.path, self.n_batch, self.n_threads = cy, path, n_batch, n_threads
        self.version = importlib.metadata.version("cyllama")
        mp = cy.LlamaModelParams()
        mp.n_gpu_layers = 0  # never vocab_only (it aborts: see open_vocab); the weights are memory-mapped

        class Model(cy.LlamaModel):
            """cyllama 0.2.18's LlamaContext.get_logits_ith asks the model for ``n_vocab``, which only its
            LlamaVocab has (an AttributeError without this)."""
            @property
            def n_vocab(self):
                return self.get_vocab().n_vocab
        self.model = Model(path, mp)
        self.vocab = self.model.get_vocab()
        self._pieces: dict[int, bytes] = {}
        self.ctx = None
        if n_ctx:
            self.resize(n_ctx)

    def resize(self, n_ctx: int) -> None:
        """A fresh context of ``n_ctx`` over the same weights (llama-cpp-python's context parameters)."""
        cp = self.cy.LlamaContextParams()
        self.n_ctx = int(n_ctx)
        nb = min(self.n_batch, self.n_ctx)
        cp.n_ctx, cp.n_batch, cp.n_ubatch = self.n_ctx, nb, min(nb, 512)
        cp.n_threads = cp.n_threads_batch = self.n_threads
        cp.flash_attn_type = 0  # LLAMA_FLASH_ATTN_TYPE_DISABLED, as llama-cpp-python's flash_attn=False
        self.ctx = self.cy.LlamaContext(self.model, cp)
        self.cached: list[int] = []  # the tokens in the key/value cache (llama-cpp-python's input_ids[:n_tokens])
        self.live = False            # whether the context's logits are those of the last cached token

    def n_ctx_train(self) -> int:
        return int(self.model.n_ctx_train)

    def n_vocab(self) -> int:
        return int(self.vocab.n_vocab)

    def tokenize(self, text: str, special: bool = True, add_special: bool = True) -> list[int]:
        return [int(t) for t in self.vocab.tokenize(text, add_special=add_special, parse_special=special)]

    def piece(self, token: int) -> bytes:
        """The token's bytes (llama.cpp's ``llama_token_to_piece``, special tokens empty). cyllama returns
        text decoded with replacement characters; a piece that holds one is rebuilt from the token's
        vocabulary entry (byte-level BPE: GPT-2's byte alphabet; SentencePiece: ``<0xXX>``, ``▁``).
        (llama-cpp-python 0.3.36 reads every piece into 32 bytes and returns an empty one for a longer
        token: 47 of SmolLM2's, runs of blanks or dashes; here they keep their bytes.)"""
        b = self._pieces.get(token)
        if b is None:
            s = self.vocab.token_to_piece(token, 0, False)
            b = s.encode("utf-8")
            if "\ufffd" in s:
                b = self._raw_piece(token, b)
            self._pieces[token] = b
        return b

    def _raw_piece(self, token: int, fallback: bytes) -> bytes:
        text = self.vocab.get_text(token)
        if self.vocab.vocab_type == 2:  # LLAMA_VOCAB_TYPE_BPE
            dec = getattr(self, "_bytes", None) or _byte_decoder()
            self._bytes = dec
            return bytes(dec[c] for c in text) if all(c in dec for c in text) else text.encode("utf-8")
        if self.vocab.vocab_type == 1:  # LLAMA_VOCAB_TYPE_SPM
            m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", text)
            return bytes([int(m.group(1), 16)]) if m else text.replace("\u2581", " ").encode("utf-8")
        return fallback

    def chat_template(self) -> tuple[Optional[str], str, str]:
        def text(i):
            return self.vocab.get_text(i) if i != -1 else ""
        src = self.model.meta_val_str("tokenizer.chat_template")
        return (src or None, text(self.vocab.token_bos()), text(self.vocab.token_eos()))

    # -- evaluation, as llama-cpp-python's Llama.eval: n_batch chunks, the last position's logits --
    def _truncate(self, keep: int) -> None:
        self.ctx.memory_seq_rm(-1, keep, -1)
        del self.cached[keep:]
        self.live = False

    def _eval(self, toks: Sequence[int]) -> None:
        self._truncate(len(self.cached))
        for i in range(0, len(toks), self.ctx.n_batch):
            chunk = [int(t) for t in toks[i: i + self.ctx.n_batch]]
            self.ctx.decode(self.cy.llama_batch_get_one(chunk, len(self.cached)))
            self.cached.extend(chunk)
        self.live = bool(toks) or self.live

    def _prefix(self, toks: Sequence[int]) -> int:
        """The length of the common prefix of the cached tokens and ``toks``."""
        return next((n for n, (a, b) in enumerate(zip(self.cached, toks)) if a != b), min(len(self.cached), len(toks)))

    def last_logits(self, toks: Sequence[int]) -> np.ndarray:
        keep = min(self._prefix(toks), len(toks) - 1)  # evaluate >= 1 token: fresh logits
        self._truncate(keep)
        self._eval(toks[keep:])
        return np.asarray(self.ctx.get_logits_ith(-1), dtype=np.float32)[: self.n_vocab()].astype(np.float64)

    def _sampler(self, grammar: Optional[str], temperature: float, s: dict):
        cy = self.cy
        sp = cy.LlamaSampler(cy.LlamaSamplerChainParams())
        sp.add_penalties(PENALTY_LAST_N, s.get("repeat_penalty", 1.0), s.get("frequency_penalty", 0.0),
                         s.get("presence_penalty", 0.0))
        if grammar:
            sp.add_grammar(self.vocab, grammar, "root")
        if temperature < 0:
            sp.add_dist(0)
        elif temperature == 0:
            sp.add_greedy()
        else:
            sp.add_top_k(s.get("top_k", 40))
            sp.add_typical(s.get("typical_p", 1.0), 1)
            sp.add_top_p(s.get("top_p", 0.95), 1)
            sp.add_min_p(s.get("min_p", 0.05), 1)
            sp.add_temp(temperature)
            sp.add_dist(0)
        return sp

    def complete(self, prompt: str, max_tokens: int, stop: Sequence[str], grammar: Optional[str],
                 temperature: float, sampling: dict) -> tuple[str, int, int]:
        """llama-cpp-python 0.3.36's ``create_completion(prompt, ..., seed=0)``, non-streaming, step for step."""
        toks = self.tokenize(prompt)
        if len(toks) >= self.n_ctx:
            raise ValueError(f"Requested tokens ({len(toks)}) exceed context window of {self.n_ctx}")
        room = self.n_ctx - len(toks)
        max_tokens = room if max_tokens is None or max_tokens <= 0 else min(max_tokens, room)
        stops = [s.encode("utf-8") for s in stop]
        sp = self._sampler(grammar, temperature, sampling)
        # the prompt, reusing the cached prefix (llama-cpp-python's Llama.generate)
        n = self._prefix(toks)
        if not (n == len(toks) == len(self.cached) and self.live):
            keep = n - 1 if n == len(toks) else n
            self._truncate(max(keep, 0))
            self._eval(toks[len(self.cached):])
        out: list[int] = []
        text, fix = b"", 0
        while True:
            t = int(sp.sample(self.ctx, -1))
            if self.vocab.is_eog(t):
                text = b"".join(self.piece(i) for i in out)
                break
            out.append(t)
            all_text = b"".join(self.piece(i) for i in out)
            for k, char in enumerate(all_text[-3:]):  # an unfinished multi-byte character: no stop check yet
                k = 3 - k
                for num, pattern in ((2, 192), (3, 224), (4, 240)):
                    if num > k and pattern & char == pattern:
                        fix = num - k
            if fix > 0:
                fix -= 1
                self._eval([t])
                continue
            hit = [s for s in stops if s in all_text]
            if hit:
                text = all_text[: all_text.index(hit[0])]
                break
            if len(out) >= max_tokens:
                text = all_text
                break
            self._eval([t])
        return text.decode("utf-8", errors="ignore"), len(toks), len(out)
