"""A GGUF file's byte-level BPE as a Hugging Face ``tokenizers`` object, without llama.cpp: :func:`read_vocab`
(pure-Python ``gguf``) and :func:`build_tokenizer` with llama.cpp's pre-tokenizer regexes (:data:`PRE_TOKENIZERS`;
another name is refused), so counts equal ``llama_tokenize(text, add_special=false, parse_special=false)``;
checked on llama.cpp's own vectors (:func:`reference_vectors`, :func:`mismatches`). Control tokens never match
in text; user-defined tokens do, as in llama.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf

_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"

#: ``tokenizer.ggml.pre`` -> the regexes llama.cpp splits with, applied one after the other
#: (``llm_tokenizer_bpe``; llama.cpp's "adapted" forms of the tokenizer.json patterns).
PRE_TOKENIZERS: dict[str, tuple[str, ...]] = {
    "qwen2": (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",),
    "llama-bpe": (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                  r"|\s+(?!\S)|\s+",),
    "smollm": (r"\p{N}", _GPT2),
    "gpt-2": (_GPT2,),
}
#: llama.cpp's other names for the same pre-tokenizers.
PRE_ALIASES = {"llama3": "llama-bpe", "llama-v3": "llama-bpe", "starcoder": "smollm", "refact": "smollm"}
#: Pre-tokenizers after which a whole pre-token that is one vocab entry is taken as is.
IGNORE_MERGES = frozenset({"llama-bpe"})

TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED = 3, 4


class VocabError(ValueError):
    """A GGUF file whose tokenizer cannot be rebuilt here (the message names the file and why)."""


@dataclass(frozen=True)
class GGUFVocab:
    """The tokenizer metadata of one GGUF file."""

    path: Path
    model: str                    # tokenizer.ggml.model ("gpt2" for byte-level BPE)
    pre: str                      # tokenizer.ggml.pre
    tokens: tuple[str, ...]
    types: tuple[int, ...]
    merges: tuple[str, ...]


def read_vocab(path: str | Path) -> GGUFVocab:
    """Read the tokenizer metadata of ``path`` with the ``gguf`` package (a 150,000-token vocab takes
    about 20 s of pure Python; :mod:`.vocabs` converts once and keeps the result)."""
    path = Path(path)
    try:
        r = gguf.GGUFReader(str(path))
    except (OSError, ValueError, KeyError) as e:
        raise VocabError(f"{path}: not a readable GGUF file ({type(e).__name__}: {e})") from None

    def field(key, default=None):
        f = r.fields.get(key)
        if f is None:
            if default is not None:
                return default
            raise VocabError(f"{path}: no '{key}' in the GGUF metadata (not a tokenizer-carrying file)")
        return f.contents()

    return GGUFVocab(path, str(field("tokenizer.ggml.model")), str(field("tokenizer.ggml.pre", "default")),
                     tuple(field("tokenizer.ggml.tokens")), tuple(int(x) for x in field("tokenizer.ggml.token_type")),
                     tuple(field("tokenizer.ggml.merges")))


def build_tokenizer(v: GGUFVocab):
    """A ``tokenizers.Tokenizer`` that tokenizes like llama.cpp does with ``v`` (no special tokens)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    if v.model != "gpt2":
        raise VocabError(f"{v.path}: tokenizer model '{v.model}' is not a byte-level BPE ('gpt2'); "
                         f"load it with llama-cpp-python (gguf:PATH with llama-cpp-python installed)")
    pre = PRE_ALIASES.get(v.pre, v.pre)
    if pre not in PRE_TOKENIZERS:
        raise VocabError(f"{v.path}: pre-tokenizer '{v.pre}' is not one this suite rebuilds without llama.cpp "
                         f"(known: {', '.join(PRE_TOKENIZERS)}); install llama-cpp-python, or use the model's "
                         f"tokenizer.json (hf:FOLDER)")
    vocab = {t: i for i, t in enumerate(v.tokens)}
    merges = [tuple(m.split(" ", 1)) for m in v.merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=pre in IGNORE_MERGES))
    splits = [pre_tokenizers.Split(Regex(rx), behavior="isolated") for rx in PRE_TOKENIZERS[pre]]
    tok.pre_tokenizer = pre_tokenizers.Sequence([*splits, pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                   use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    user = [AddedToken(t, normalized=False, special=False) for t, ty in zip(v.tokens, v.types)
            if ty == TOKEN_TYPE_USER_DEFINED]
    if user:
        tok.add_tokens(user)
    return tok


def reference_vectors(gguf_path: str | Path) -> list[tuple[str, list[int]]]:
    """llama.cpp's test vectors beside a vocab file: ``(text, token ids)`` pairs, read as its
    ``test-tokenizer-0`` reads them (inputs separated by ``\\n__ggml_vocab_test__\\n``, one line
    of ids per input)."""
    p = Path(gguf_path)
    inputs = Path(f"{p}.inp").read_bytes().decode("utf-8").split("\n__ggml_vocab_test__\n")
    outs = Path(f"{p}.out").read_bytes().decode("utf-8").split("\n")
    for parts in (inputs, outs):  # a trailing separator ends the last entry
        if parts[-1] == "":
            parts.pop()
    if len(inputs) != len(outs):
        raise VocabError(f"{p}: {len(inputs)} test inputs but {len(outs)} lines of token ids")
    return [(s, [int(x) for x in o.split()]) for s, o in zip(inputs, outs)]


def mismatches(tok, vectors) -> list[tuple[str, list[int], list[int]]]:
    """``(text, expected, got)`` for every vector the tokenizer does not reproduce exactly."""
    got = [(text, want, tok.encode(text, add_special_tokens=False).ids) for text, want in vectors]
    return [g for g in got if g[1] != g[2]]
