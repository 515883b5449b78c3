"""Claims of a natural discussion: extraction output parsing and near-duplicate merging, into the scripted
discussion's :class:`~crossprofile_lib.task.discussion.ClaimList` (``fact_id=None``), so every policy runs unchanged.

**Parsing** (:func:`parse_claims`): a JSON array of strings (or an object with ``claims``), else every bulleted or
numbered line; speaker tags and quotes stripped, claims under ``MIN_CLAIM_TOKENS`` tokens and repeats dropped, at
most ``MAX_CLAIMS_PER_MESSAGE``; ``- none`` means no claim. An unreadable answer is retried once; then the message's
sentences become its claims (flagged ``fallback``).

**Merging** (:func:`merge_claims`): a claim joins the earliest cluster whose first claim's content tokens
(:mod:`.disclosure` tokens minus :data:`STOPWORDS`) have a Jaccard similarity of at least ``MERGE_THRESHOLD``; with
``confirm`` a grey-zone pair ``[CONFIRM_LOW, MERGE_THRESHOLD)`` merges only if the model says "yes". A cluster shows
its first claim; its speakers are everyone who stated a member.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from crossprofile_lib.hiddenbench.disclosure import tokens
from crossprofile_lib.task.discussion import ClaimList, Utterance, claim_list_from_utterances

MERGE_THRESHOLD = 0.6
CONFIRM_LOW = 0.35
MIN_CLAIM_TOKENS = 3
MAX_CLAIMS_PER_MESSAGE = 12
STOPWORDS = frozenset("""a an the and or but of to in on at for from by with as is are was were be been being
it its this that these those has have had do does did not no so than then there their they them he she his her
i we you our your my me us which who whom what when where will would can could should may might also very
just all any some""".split())

_BULLET = re.compile(r"^\s*(?:[-*\u2022]+|\(?\d{1,2}[.)])\s*(?P<text>.*\S)\s*$")
_TAG = re.compile(r"^\s*(?:A\d{1,2}|Agent\s*\d{1,2})\s*:\s*", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _clean(s: str) -> str:
    s = _TAG.sub("", s.strip())
    s = s.strip().strip("\"'\u201c\u201d").strip()
    return " ".join(s.split())


def parse_claims(text: str) -> tuple[list[str], bool]:
    """``(claims, readable)`` from an extraction answer (see the module doc)."""
    raw: Optional[list] = None
    stripped = text.strip()
    for start in (i for i, ch in enumerate(stripped) if ch in "[{"):
        try:
            obj, _ = json.JSONDecoder().raw_decode(stripped[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            obj = obj.get("claims")
        if isinstance(obj, list) and all(isinstance(x, str) for x in obj):
            raw = obj
            break
    readable = raw is not None
    if raw is None:
        raw = []
        for line in text.splitlines():
            m = _BULLET.match(line)
            if m:
                readable = True
                raw.append(m.group("text"))
    out, seen = [], set()
    for r in raw:
        c = _clean(r)
        if c.casefold().rstrip(".") in ("none", "no claims", "n/a"):
            continue
        if len(tokens(c)) < MIN_CLAIM_TOKENS or c.casefold() in seen:
            continue
        seen.add(c.casefold())
        out.append(c)
    return out[:MAX_CLAIMS_PER_MESSAGE], readable


def sentence_claims(message: str) -> list[str]:
    """The fallback: a message's sentences as claims (same length and count limits)."""
    out = [_clean(s) for s in _SENTENCE.split(message.strip())]
    return [s for s in out if len(tokens(s)) >= MIN_CLAIM_TOKENS][:MAX_CLAIMS_PER_MESSAGE]


def key(text: str) -> frozenset[str]:
    """The content-token set a claim is compared by."""
    return frozenset(t for t in tokens(text) if t not in STOPWORDS)


def jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


@dataclass(frozen=True)
class RawClaim:
    """One extracted claim: who stated it, in which message, its text."""

    speaker: str
    message_index: int
    text: str


@dataclass(frozen=True)
class Merge:
    """The merged claims: ``cluster[i]`` is raw claim i's cluster (first-mention order)."""

    claim_list: ClaimList
    cluster: tuple[int, ...]           # shape (n_raw,)
    confirmed_pairs: tuple[tuple[int, int, bool], ...] = ()   # (raw i, cluster rep j, model said yes)

    @property
    def n_raw(self) -> int:
        return len(self.cluster)


def grey_pairs(raw: Sequence[RawClaim], threshold: float = MERGE_THRESHOLD,
               low: float = CONFIRM_LOW) -> list[tuple[int, int]]:
    """Pairs ``(i, rep)`` the rule alone would not merge but a model may confirm.

    Computed on the rule-only clustering: claim i against every earlier cluster's first
    claim with similarity in ``[low, threshold)``.
    """
    keys = [key(r.text) for r in raw]
    reps: list[int] = []
    out = []
    for i, k in enumerate(keys):
        if any(jaccard(k, keys[r]) >= threshold for r in reps):
            continue
        out.extend((i, r) for r in reps if low <= jaccard(k, keys[r]) < threshold)
        reps.append(i)
    return out


def merge_claims(raw: Sequence[RawClaim], speaker_order: Sequence[str], agents: Sequence[str] = (),
                 threshold: float = MERGE_THRESHOLD,
                 confirm: Optional[Callable[[int, int], bool]] = None,
                 low: float = CONFIRM_LOW) -> Merge:
    """Merge near-duplicate claims (see the module doc) into a :class:`ClaimList`.

    ``confirm(i, rep)`` answers whether raw claim ``i`` restates the claim ``rep`` (the model's
    answer, looked up from a batch the caller has already run); ``None`` uses the rule only.
    """
    keys = [key(r.text) for r in raw]
    reps: list[int] = []          # raw index of each cluster's first claim
    cluster: list[int] = []
    asked = []
    for i, k in enumerate(keys):
        sims = [jaccard(k, keys[r]) for r in reps]
        j = next((c for c, s in enumerate(sims) if s >= threshold), None)
        if j is None and confirm is not None:
            for c, s in enumerate(sims):
                if low <= s < threshold:
                    yes = bool(confirm(i, reps[c]))
                    asked.append((i, reps[c], yes))
                    if yes:
                        j = c
                        break
        if j is None:
            reps.append(i)
            j = len(reps) - 1
        cluster.append(j)
    utterances = [Utterance(i, r.speaker, raw[reps[cluster[i]]].text) for i, r in enumerate(raw)]
    cl = claim_list_from_utterances(utterances, speaker_order, agents)
    return Merge(cl, tuple(cluster), tuple(asked))
