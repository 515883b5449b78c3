"""Hint words (SPEC section 2, rule 5): text that gives a template's answer away.

A template's title, description, criterion names, option names and fact texts must not say
which option to pick. Matching is done on a *folded* copy of the text, so that an inflection
or a disguised spelling is caught as the plain word:

1. Unicode NFKC (compatibility forms: full-width letters, ligatures, mathematical letters);
2. format characters (zero-width spaces and joiners, soft hyphens) removed, accents dropped;
3. confusables fold: every remaining non-ASCII letter that Unicode's confusables table
   (``confusable_homoglyphs``, data of Unicode TR39) lists as a look-alike of an ASCII letter
   becomes that letter, so a Cyrillic "bеst" or a Greek "ορtimal" reads "best" / "optimal";
4. words are split at non-letters and camel-case humps ("BestCare" -> "Best", "Care") and
   reduced to their Snowball (Porter 2) stems, so "recommendation", "recommending" and
   "recommended" all match "recommend", "optimally" matches "optimal", "ideally" "ideal".

A few words share a stem with a hint word but give nothing away (``optimise`` stems like
``optimal``, ``correction`` like ``correct``); they are listed in :data:`INNOCENT`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import snowballstemmer
from confusable_homoglyphs import confusables

#: Hint lemmas: single words, or phrases (matched as consecutive words). Built from SPEC
#: rule 5 (best, recommended, should choose, correct, decoy, misleading, winner) and issue 14.
HINT_WORDS = (
    "best", "recommend", "recommendation", "should", "should choose", "correct", "decoy",
    "mislead", "misleading", "misled", "winner", "winning option", "optimal", "optimum",
    "ideal", "preferred", "preferable", "superior", "right choice", "right option",
    "obvious choice", "top choice", "clear choice", "smart choice", "wisest",
    "pick this", "choose this",
)

#: Words whose stem collides with a hint stem but which name no preference.
INNOCENT = frozenset({
    "optimise", "optimised", "optimises", "optimising", "optimisation", "optimize", "optimized",
    "optimizes", "optimizing", "optimization", "optimist", "optimistic", "optimism",
    "correction", "corrections", "corrective", "correspond",
    "idealism", "idealist", "idealistic", "ideals",
})

#: Irregular forms the stemmer does not map onto their lemma.
IRREGULAR = {"misled": "mislead", "bestow": "bestow"}

_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[a-z]+")


@lru_cache(maxsize=1)
def _stemmer():
    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=1)
def _confusables() -> dict[str, str]:
    """Non-ASCII character -> the ASCII letters it looks like (Unicode TR39 confusables)."""
    out = {}
    for ch, glyphs in confusables.confusables_data.items():
        if ch.isascii():
            continue
        for g in glyphs:
            c = g["c"]
            if c.isascii() and c.isalpha():
                out[ch] = c
                break
    return out


def fold(text: str) -> str:
    """The text as a reader sees it: NFKC, no format characters or accents, look-alikes as ASCII."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in unicodedata.normalize("NFD", text)
                   if unicodedata.category(ch) not in ("Cf", "Mn", "Me"))
    table = _confusables()
    text = "".join(table.get(ch, ch) for ch in text)
    return unicodedata.normalize("NFKC", text)


def _words(folded: str) -> list[str]:
    out = []
    for chunk in re.findall(r"[A-Za-z]+", folded):
        out.extend(w.lower() for w in _CAMEL.findall(chunk))
    return out


def _stem(word: str) -> str:
    word = IRREGULAR.get(word, word)
    return _stemmer().stemWord(word)


@lru_cache(maxsize=1)
def _hint_stems() -> dict[tuple[str, ...], str]:
    out: dict[tuple[str, ...], str] = {}
    for h in HINT_WORDS:
        out.setdefault(tuple(_stem(w) for w in h.split()), h)
    return out


@dataclass(frozen=True)
class Hint:
    word: str       # the words as written in the text (after folding)
    lemma: str      # the hint word it matches
    disguised: bool  # the raw text differs from its fold (homoglyphs, format characters)


def find_hint(text: str) -> Optional[Hint]:
    """The first hint word in ``text`` (any inflection or look-alike spelling), or None."""
    folded = fold(text)
    words = _words(folded)
    stems = [None if w in INNOCENT else _stem(w) for w in words]
    table = _hint_stems()
    longest = max(len(k) for k in table)
    for i in range(len(words)):
        for n in range(longest, 0, -1):
            key = tuple(stems[i:i + n])
            if len(key) == n and key in table:
                written = " ".join(words[i:i + n])
                raw_words = _words(text)
                return Hint(written, table[key], disguised=written not in " ".join(raw_words))
    return None


def describe(h: Hint) -> str:
    """One phrase for an error message."""
    s = f"hint word '{h.word}'"
    if h.word != h.lemma:
        s += f" (a form of '{h.lemma}')"
    if h.disguised:
        s += " spelled with look-alike or invisible characters"
    return s + " gives the answer away"
