"""Hint words (SPEC section 2, rule 5): text that gives a template's answer away.

Matching runs on a *folded* copy of the text, so an inflection or a disguised spelling reads as the plain word:
1. Unicode NFKC; 2. format characters removed, accents dropped; 3. every non-ASCII letter that Unicode's confusables
table (``confusable_homoglyphs``, TR39) lists as a look-alike of an ASCII letter becomes that letter; 4. words split at
non-letters and camel-case humps and reduced to Snowball (Porter 2) stems. Words that share a stem with a hint word
but give nothing away are listed in :data:`INNOCENT`.
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
_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=1)
def _confusables() -> dict[int, str]:
    """Non-ASCII character (code point) -> the ASCII letters it looks like (Unicode TR39 confusables)."""
    letters = {ch: next((g["c"] for g in glyphs if g["c"].isascii() and g["c"].isalpha()), None)
               for ch, glyphs in confusables.confusables_data.items() if len(ch) == 1 and not ch.isascii()}
    return {ord(ch): letter for ch, letter in letters.items() if letter}


def fold(text: str) -> str:
    """The text as a reader sees it: NFKC, no format characters or accents, look-alikes as ASCII."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in unicodedata.normalize("NFD", text)
                   if unicodedata.category(ch) not in ("Cf", "Mn", "Me"))
    return unicodedata.normalize("NFKC", text.translate(_confusables()))


def _words(folded: str) -> list[str]:
    return [w.lower() for chunk in re.findall(r"[A-Za-z]+", folded) for w in _CAMEL.findall(chunk)]


@lru_cache(maxsize=1 << 16)  # every template's words, stemmed once per process (the stemmer is pure Python)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(IRREGULAR.get(word, word))


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


@lru_cache(maxsize=1 << 14)
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
                return Hint(written, table[key], disguised=written not in " ".join(_words(text)))
    return None


def describe(h: Hint) -> str:
    """One phrase for an error message."""
    s = f"hint word '{h.word}'"
    if h.word != h.lemma:
        s += f" (a form of '{h.lemma}')"
    if h.disguised:
        s += " spelled with look-alike or invisible characters"
    return s + " gives the answer away"


# Comparisons over the option set ("the lowest bid received") and text addressed to the decision model ("choose
# option B") give the answer away as a hint word does (SPEC section 2, rule 5). Matched on the folded, lower-cased text.

#: Words ending in -est that are not superlatives.
NOT_SUPERLATIVE = frozenset("""arrest attest behest bequest chest contest crest digest detest earnest everest
 forest guest harvest honest infest inquest interest invest manifest midwest modest molest nest northwest pest
 priest protest quest request rest southwest suggest tempest test unrest vest west zest conquest divest""".split())
_NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
#: Nouns for the members of a decision's option set (a fact about "the only bidder to ..." ranks it).
SET_NOUNS = ("options", "candidates", "bidders", "bids", "offers", "tenders", "tenderers", "quotes", "quotations",
             "proposals", "applicants", "finalists", "contenders", "shortlisted", "rivals", "competitors",
             "alternatives", "entries", "submissions")
_SET_NOUN = "(?:" + "|".join(n.rstrip("s") + "s?" if n.endswith("s") else n for n in SET_NOUNS) + ")"
_WORD_RE = re.compile(r"[a-z]+")


def _set_marker(n_options: int) -> re.Pattern:
    """What after a superlative says it ranks the option set (``of the three``, ``received``, ...)."""
    n = f"(?:{_NUMBER_WORDS.get(n_options, str(n_options))}|{n_options})"
    return re.compile(
        rf"\bof (?:the |all |these |those )?{n}\b|\bof (?:them )?all\b|\bof (?:both|either|any|every)\b|\bamong\b"
        rf"|\b(?:received|submitted|tendered|shortlisted)\b|\bon the shortlist\b|\bin the (?:tender|running|field)\b"
        rf"|\bof (?:any|every|all|the) (?:other )?(?:\w+ )?{_SET_NOUN}\b" + _EVALUATION)


_OTHERS = (rf"(?:the others?|the rest|its (?:rivals?|competitors?)"
           rf"|(?:any |all |the )?(?:other|rival|competing) (?:\w+ )?{_SET_NOUN})")
_AGAINST_THE_OTHERS = re.compile(
    rf"\bthan (?:any|all|every|either|both|each|{_OTHERS}|the (?:two|three|four|five) others?)\b"
    rf"|\bunlike (?:the|its|both|either|all|any) (?:others?|rivals?|competitors?|(?:other|two|three) \w+)"
    rf"|\bthe other (?:two|three|four|five)\b|\b(?:neither|either|both|none) of the others\b"
    rf"|\bahead of (?:all|every|both|{_OTHERS})\b"
    rf"|\bout(?:ranked|scored|bid|performed|priced|did) (?:all|every|both|each|{_OTHERS})\b"
    rf"|\bthe only (?:one|{_SET_NOUN})\b")
#: Rankings: like superlatives, a hint only when what follows says they rank the option set
#: ("ranked first in the council's scoring"; not "came last in a magazine's reader poll").
_RANKING = (r"\b(?:ranked|ranks|rated|came|placed|finished|scored|comes|stands)"
            r" (?:first|second|third|last|top|bottom|highest|lowest)\b|\b(?:first|second|third|last|top) place\b"
            r"|\b(?:top|highest|lowest|first|best)[- ]ranked\b|\bnumber one\b|\brunner[- ]up\b")
_EVALUATION = (r"|\bin the (?:\w+'s )?(?:scoring|evaluation|assessment|comparison|tender|procurement|selection|"
               r"shortlist|ranking|ratings?|scores?)\b")

_SUPERLATIVE = re.compile(r"\b(?:(most|least|fewest)\b|([a-z]{2,}est)\b)|(?P<rank>" + _RANKING + ")")


#: Text that speaks to the decision model or tells it what to answer.
_ADDRESS = re.compile(
    r"\byou(?:r|rs|rself)?\b|\b(?:language|ai|decision) model\b|\bllm\b|\bassistant\b|\bdecision\s*:"
    r"|\b(?:ignore|disregard) (?:the|all|any|every|previous|prior|above|earlier|other|these)\b"
    r"|\binstructions?\b|\bsystem prompt\b|\bthe (?:right |correct )?answer\b"
    r"|\b(?:answer|choose|pick|select|vote|respond|reply|output|go)(?: with| for)?(?: option| letter)? [a-d]\b(?!['\w])"
    r"|\boption [a-d] (?:is|wins)\b")


@dataclass(frozen=True)
class Comparison:
    phrase: str   # the words that compare (folded, lower case)
    kind: str     # "superlative/ranking over the option set", "comparison with the other options" or "address"


def find_comparison(text: str, n_options: int = 3) -> Optional[Comparison]:
    """A superlative or ranking over the option set, or a comparison with the other options,
    named or not; None for comparisons with anything else ("lower than last year's price",
    "the busiest junction in town")."""
    low = fold(text).lower()
    if m := _AGAINST_THE_OTHERS.search(low):
        return Comparison(m.group(0), "comparison with the other options")
    marker = _set_marker(n_options)
    for s in _SUPERLATIVE.finditer(low):
        if s.group(2) in NOT_SUPERLATIVE:  # an -est word that is no superlative
            continue
        kind = "ranking over the option set" if s.group("rank") else "superlative over the option set"
        window = low[s.end():]
        words = list(_WORD_RE.finditer(window))
        end = words[min(len(words), 8) - 1].end() if words else 0
        clause = re.split(r"[,;:.!?()]", window[:end], maxsplit=1)[0]
        if mk := marker.search(clause):
            return Comparison(low[s.start():s.end() + mk.end()], kind)
    return None


def find_address(text: str) -> Optional[Comparison]:
    """Words that address the decision model or tell it what to answer ("you", "choose option B",
    "ignore the other facts", "Decision: A"), or None."""
    m = _ADDRESS.search(fold(text).lower())
    return Comparison(m.group(0), "address") if m else None


def describe_comparison(c: Comparison) -> str:
    if c.kind == "address":
        return f"'{c.phrase}' addresses the decision model or tells it what to answer"
    return (f"'{c.phrase}' is a {c.kind}: a fact must not rank or compare the options, named or not "
            f"(it gives the answer away)")
