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


# Comparisons with the option set (SPEC section 2, rule 5) give the answer away as a hint word does. The rule is about
# meaning, not a phrase list: a sentence compares an option with the option set when it holds a *comparison* (a
# superlative or ranking, a comparative "than" / "as ... as", a verb of comparison such as undercut, beat, outpace or
# top, a position such as below, ahead of or the only) and, in the same sentence, a *reference to the option set or
# to the other options* ("every other bid", "anyone else", "the rest", "its rivals", "the alternatives", "the
# field", "on the list", "on offer", "under consideration", "of the three"). Either may come first ("of the suppliers
# bidding, X answered fastest"). A comparison with anything else passes ("lower than last year's price", "the
# busiest junction in town", "undercut its own 2019 price"); so does a set word with no comparison ("serviced every
# other month", "one of the bids"). Matched on the folded, lower-cased text.

#: Words ending in -est that are not superlatives.
NOT_SUPERLATIVE = frozenset("""arrest attest behest bequest chest contest crest digest detest earnest everest
 forest guest harvest honest infest inquest interest invest manifest midwest modest molest nest northwest pest
 priest protest quest request rest southwest suggest tempest test unrest vest west zest conquest divest""".split())
_NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
#: Nouns for the members of a decision's option set (a fact about "the only bidder to ..." ranks it), with the
#: sellers the domains choose between ("every other supplier"); not the things chosen ("the only route to ...").
SET_NOUNS = ("options", "candidates", "bidders", "bids", "offers", "tenders", "tenderers", "quotes", "quotations",
             "proposals", "applicants", "finalists", "contenders", "shortlisted", "rivals", "competitors",
             "alternatives", "entries", "submissions", "suppliers", "vendors", "providers", "contractors", "firms",
             "companies", "operators", "agencies", "makers", "manufacturers")
_SET_NOUN = "(?:" + "|".join(n[:-3] + "(?:y|ies)" if n.endswith("ies") else n.rstrip("s") + "s?"
                             if n.endswith("s") else n for n in SET_NOUNS) + ")"
_WORD_RE = re.compile(r"[a-z]+")
#: Nouns after "every other" that make it alternation, not the other options ("serviced every other month").
_TIME_NOUNS = r"(?:day|night|week|weekend|month|year|season|term|quarter|shift|visit|time|line|row|page|step)s?"
#: Participles that make a set word the option set ("the bids received", "every quote submitted").
_CONSIDERED = (r"(?:received|submitted|tendered|quoted|offered|proposed|considered|compared|shortlisted|reviewed"
               r"|evaluated|bidding|competing|tendering)")


def _set_reference(n_options: int) -> re.Pattern:
    """A reference to the option set or to the other options, anywhere in a sentence."""
    n = f"(?:{_NUMBER_WORDS.get(n_options, str(n_options))}|{n_options})"
    quant = r"(?:every|each|all|any|no|the|both|either|neither)"
    return re.compile(
        rf"\b{quant} (?:of the )?others?\b(?! {_TIME_NOUNS}\b)(?: (?:\w+ ){{0,2}}?{_SET_NOUN}\b)?"
        rf"|\b(?:the|its|their) (?:other|remaining) (?!{_TIME_NOUNS}\b)(?:{n}|two|three|four|five|ones?|\w+s)\b"
        rf"|\b(?:anyone|anybody|anything|anywhere|everyone|everybody|everything|everywhere|whoever|whatever|whichever"
        rf"|nobody|nothing|nowhere|no one|someone|somebody|something) else\b"
        rf"|\b(?:the|its|their|all|any|every|each) (?:\w+ )?(?:rival|competitor|competing|alternative)s?\b"
        rf"|\bthe (?:rest|competition|field|pack|bunch|lot)\b(?!'s)"
        rf"|\b(?:on|of|from|topped|tops|top|heads?|headed|led|leads?) the (?:short)?list\b(?! (?:price|prices)\b)"
        rf"|\b(?:on offer|on the table|under consideration|in contention|in the running|being considered)\b"
        rf"|\b(?:of|among|between|from) (?:the |all |these |those |all the )?{n}\b"
        rf"(?=\s*(?:$|[,)]|(?:\w+ )?{_SET_NOUN}\b|(?:on|in|for|at|by|with|to|and|but)\b))|\bof (?:them )?all\b"
        rf"|\bof (?:both|either|any|every|all|each)\b|\bamong (?:the |its |all |all the )?(?:\w+ )?{_SET_NOUN}\b"
        rf"|\b(?:the|every|each|all|any) (?:\w+ )?{_SET_NOUN} {_CONSIDERED}\b"
        rf"|\b(?:of|from) (?:the|all the|all|any|every) (?:other )?(?:\w+ )?{_SET_NOUN}\b"
        rf"|\b{_SET_NOUN} (?:bidding|competing|tendering|in the (?:tender|running))\b"
        rf"|\bthe only (?:one|{_SET_NOUN})\b")


#: A reference that counts only after a superlative in its clause ("the lowest bid received", "ranked first in the
#: committee's scoring"): on its own such a word names no option set ("received a grant").
_EVALUATION = (r"\bin the (?:\w+'s )?(?:scoring|evaluation|assessment|comparison|tender|procurement|selection|"
               r"shortlist|ranking|ratings?|scores?)\b|\b(?:received|submitted|tendered|shortlisted)\b"
               r"|\bin the (?:tender|running|field)\b")
_EVALUATION_RE = re.compile(_EVALUATION)
#: Rankings: like superlatives, a hint only with a reference to the option set
#: ("ranked first in the council's scoring"; not "came last in a magazine's reader poll").
_RANKING = (r"\b(?:ranked|ranks|rated|came|placed|finished|scored|comes|stands)"
            r" (?:first|second|third|last|top|bottom|highest|lowest)\b|\b(?:first|second|third|last|top) place\b"
            r"|\b(?:top|highest|lowest|first|best)[- ]ranked\b|\bnumber one\b|\brunner[- ]up\b")
_SUPERLATIVE = re.compile(r"\b(?:(most|least|fewest|worst)\b|([a-z]{2,}est)\b)|(?P<rank>" + _RANKING + ")")
#: Comparatives, verbs of comparison and positions relative to others.
_COMPARATIVE = re.compile(
    r"(?<!\brather )(?<!\bother )\bthan\b|\bas (?:\w+ )?\w+ as\b|\bthe \w+er of\b"
    r"|\b(?:undercut|underbid|underprice|outbid|outprice|outrank|outscore|outperform|outdo|outdid|outdone|outlast"
    r"|outpace|outclass|outshine|outshone|outsell|outsold|outstrip|outmatch|outweigh|outnumber|outrun|outran|outspend"
    r"|beat|beaten|surpass|exceed|trump|eclipse|top|topp|lead|led|trail|lag|lagg|match|rival|better|worse|edg)"
    r"(?:s|es|d|ed|ing|ped|ping|ged|ging|ted|ting|led|ling)?\b"
    r"|\b(?:came|comes|come|coming) (?:close|near)\b|\b(?:ahead of|behind|below|above|under|beneath|in front of)\b"
    r"|\bthe only\b|\bunlike\b|\balone\b|\bsole\b|\bun(?:matched|rivall?ed|beaten|equall?ed|surpassed)\b"
    r"|\b(?:cheap|low|high|fast|quick|slow|short|long|small|large|big|few|great|strong|weak|new|old|close)er\b")


@dataclass(frozen=True)
class Comparison:
    phrase: str   # the words that compare (folded, lower case)
    kind: str     # "superlative/ranking over the option set", "comparison with the other options" or "address"


def _sentences(low: str) -> list[str]:
    """``low`` cut into sentences and clauses at ``; : ! ?`` and a full stop that ends a word (not ``2.5``)."""
    return [s for s in re.split(r"[;:!?]|\.(?!\d)", low) if s.strip()]


def find_comparison(text: str, n_options: int = 3) -> Optional[Comparison]:
    """A comparison with the option set or the other options, named or not (a superlative, ranking, comparative,
    verb or position of comparison with a reference to the option set in the same sentence); None for comparisons
    with anything else ("lower than last year's price", "the busiest junction in town") and for set words that
    compare nothing ("serviced every other month")."""
    low = fold(text).lower()
    ref = _set_reference(n_options)
    for sent in _sentences(low):
        sets = list(ref.finditer(sent))
        sup = [s for s in _SUPERLATIVE.finditer(sent) if s.group(2) not in NOT_SUPERLATIVE]
        cmp_ = list(_COMPARATIVE.finditer(sent))
        for ops, kind in ((sup, None), (cmp_, "comparison with the other options")):
            for op in ops:
                k = kind or ("ranking over the option set" if op.group("rank") else "superlative over the option set")
                if sets:
                    near = min(sets, key=lambda m: abs(m.start() - op.start()))
                    a, b = min(op.start(), near.start()), max(op.end(), near.end())
                    return Comparison(sent[a:b].strip(), k)
                if kind is None:  # a superlative with an evaluation word after it in its clause
                    clause = re.split(r"[,()]", sent[op.end():], maxsplit=1)[0]
                    words = list(_WORD_RE.finditer(clause))
                    clause = clause[:words[min(len(words), 8) - 1].end()] if words else ""
                    if mk := _EVALUATION_RE.search(clause):
                        return Comparison(sent[op.start():op.end() + mk.end()].strip(), k)
    return None


def find_address(text: str) -> Optional[Comparison]:
    """Words that address the decision model or tell it what to answer ("you", "choose option B",
    "ignore the other facts", "Decision: A"), or None."""
    m = _ADDRESS.search(fold(text).lower())
    return Comparison(m.group(0), "address") if m else None


#: Text that speaks to the decision model or tells it what to answer.
_ADDRESS = re.compile(
    r"\byou(?:r|rs|rself)?\b|\b(?:language|ai|decision) model\b|\bllm\b|\bassistant\b|\bdecision\s*:"
    r"|\b(?:ignore|disregard) (?:the|all|any|every|previous|prior|above|earlier|other|these)\b"
    r"|\binstructions?\b|\bsystem prompt\b|\bthe (?:right |correct )?answer\b"
    r"|\b(?:answer|choose|pick|select|vote|respond|reply|output|go)(?: with| for)?(?: option| letter)? [a-d]\b(?!['\w])"
    r"|\boption [a-d] (?:is|wins)\b")


def describe_comparison(c: Comparison) -> str:
    if c.kind == "address":
        return f"'{c.phrase}' addresses the decision model or tells it what to answer"
    return (f"'{c.phrase}' is a {c.kind}: a fact must not rank or compare the options, named or not "
            f"(it gives the answer away)")
