"""Tokenizers that price memories (SPEC section 5).

Every tokenizer has a ``name`` (written into each result row) and ``count(text) -> int``.

* :class:`OfflineTokenizer` (``offline-bpe-approx-v1``), the default: deterministic, needs no
  file, and prices brackets, commas, letters-with-digits and digits the way a byte-level BPE
  does (``[A1,A2,A3,A4] `` -> 14, ``[A2] `` -> 5, a newline -> 1, one token per digit).
* :class:`GGUFTokenizer`: the tokenizer inside a GGUF model file (via ``llama-cpp-python``).
* :class:`HFTokenizer`: a Hugging Face ``tokenizer.json`` in a local folder (via ``tokenizers``).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Protocol

# One pre-token per match, as a byte-level BPE pre-tokenizer splits text:
#   an optional leading space + a run of letters  -> a word (priced by length below)
#   a single digit                                 -> one token
#   a run of spaces/newlines                       -> one token
#   any other character (bracket, comma, ...)      -> one token
_PRETOKEN = re.compile(r" ?[A-Za-z]+|\d| ?[^\sA-Za-z\d]|\s+")


class Tokenizer(Protocol):
    name: str

    def count(self, text: str) -> int: ...


class OfflineTokenizer:
    """File-free approximation of a byte-level BPE (SmolLM2 / Qwen style).

    A word of up to 8 letters is one token, longer words cost one token per further 6
    letters (rare long words split in a BPE). Digits cost one token each; punctuation one
    token each (a leading space merges into it); whitespace runs one token.
    """

    name = "offline-bpe-approx-v1"

    @staticmethod
    @lru_cache(maxsize=65536)
    def _count(text: str) -> int:
        n = 0
        for m in _PRETOKEN.finditer(text):
            s = m.group(0)
            w = s.lstrip(" ")
            if w.isalpha():
                n += 1 + max(0, math.ceil((len(w) - 8) / 6))
            else:
                n += 1
        return n

    def count(self, text: str) -> int:
        return self._count(text)


class GGUFTokenizer:
    """The tokenizer of a GGUF model file, loaded with ``llama-cpp-python`` (vocab only)."""

    def __init__(self, path: str | Path, llama=None):
        self.path = Path(path)
        self.name = f"gguf:{self.path.name}"
        if llama is None:
            from llama_cpp import Llama  # imported only when used
            llama = Llama(model_path=str(self.path), vocab_only=True, verbose=False)
        self._llama = llama

    def count(self, text: str) -> int:
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))


class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` in a local folder (never downloaded)."""

    def __init__(self, folder: str | Path):
        folder = Path(folder)
        f = folder / "tokenizer.json" if folder.is_dir() else folder
        if not f.exists():
            raise FileNotFoundError(f"no tokenizer.json at {f}")
        from tokenizers import Tokenizer as _T  # imported only when used
        self._tok = _T.from_file(str(f))
        self.name = f"hf:{f.parent.name}"

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)


_DEFAULT = OfflineTokenizer()


def default_tokenizer() -> OfflineTokenizer:
    return _DEFAULT


def get_tokenizer(spec: str | None) -> Tokenizer:
    """``None``/``offline`` -> default; ``gguf:PATH``; ``hf:FOLDER``."""
    if spec in (None, "", "offline", OfflineTokenizer.name):
        return _DEFAULT
    kind, _, arg = spec.partition(":")
    if kind == "gguf":
        return GGUFTokenizer(arg)
    if kind == "hf":
        return HFTokenizer(arg)
    raise ValueError(f"unknown tokenizer '{spec}' (use offline, gguf:PATH or hf:FOLDER)")
