"""Disclosure (SPEC section 9): a fact is *restated in full* when the longest common subsequence of the word tokens
(case-folded runs of letters or digits) covers at least ``DISCLOSURE_THRESHOLD`` (80%) of its tokens. The
**disclosure rate** is the share of hidden facts restated in full in at least one message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from rapidfuzz.distance import LCSseq

DISCLOSURE_THRESHOLD = 0.8
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Normalised word tokens (see the module doc)."""
    return _TOKEN.findall(text.casefold())


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences (rapidfuzz's ``LCSseq``)."""
    return LCSseq.similarity(a, b)


def coverage(fact: str, text: str) -> float:
    """Share of the fact's tokens covered, in order, by ``text`` (0 for an empty fact)."""
    f = tokens(fact)
    return lcs_length(f, tokens(text)) / len(f) if f else 0.0


def restates(fact: str, text: str, threshold: float = DISCLOSURE_THRESHOLD) -> bool:
    """Whether ``text`` restates ``fact`` in full (coverage >= threshold)."""
    return coverage(fact, text) >= threshold


@dataclass(frozen=True)
class Disclosure:
    """Per hidden fact: restated in some message, by its holder, first message (-1: none)."""

    disclosed: tuple[bool, ...]
    by_holder: tuple[bool, ...]
    first_message: tuple[int, ...]

    @property
    def n_disclosed(self) -> int:
        return sum(self.disclosed)

    @property
    def rate(self) -> float:
        return self.n_disclosed / len(self.disclosed) if self.disclosed else float("nan")

    @property
    def holder_rate(self) -> float:
        return sum(self.by_holder) / len(self.by_holder) if self.by_holder else float("nan")


def disclosure(hidden: Sequence[str], holders: Sequence[str], messages: Sequence[tuple[str, str]],
               threshold: float = DISCLOSURE_THRESHOLD) -> Disclosure:
    """``hidden[i]`` is held by ``holders[i]``; ``messages`` are ``(speaker, text)`` in order."""
    msg_tokens = [(s, tokens(t)) for s, t in messages]
    disc, own, first = [], [], []
    for fact, holder in zip(hidden, holders):
        f = tokens(fact)
        hits = [k for k, (_, mt) in enumerate(msg_tokens)
                if f and lcs_length(f, mt) / len(f) >= threshold]
        disc.append(bool(hits))
        own.append(any(msg_tokens[k][0] == holder for k in hits))
        first.append(hits[0] if hits else -1)
    return Disclosure(tuple(disc), tuple(own), tuple(first))


def facts_restated(facts: Sequence[str], lines: Sequence[str],
                   threshold: float = DISCLOSURE_THRESHOLD) -> list[bool]:
    """For each fact: is it restated in full by at least one of ``lines``?"""
    line_tokens = [tokens(ln) for ln in lines]
    return [bool(f) and any(lcs_length(f, lt) / len(f) >= threshold for lt in line_tokens) for f in map(tokens, facts)]
