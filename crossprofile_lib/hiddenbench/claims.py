"""Claims of a natural discussion, parsed and merged into a :class:`~crossprofile_lib.task.discussion.ClaimList`
(``fact_id=None``), so every policy runs unchanged. **Parsing**: a JSON array of strings (or an object with
``claims``), else every bulleted or numbered line; tags and quotes stripped, claims under ``MIN_CLAIM_TOKENS`` tokens
and repeats dropped, at most ``MAX_CLAIMS_PER_MESSAGE``. **Merging**: a claim joins the earliest cluster whose first
claim's content tokens have a Jaccard similarity of at least ``MERGE_THRESHOLD``; with ``confirm`` a grey-zone pair
``[CONFIRM_LOW, MERGE_THRESHOLD)`` merges only if the model says "yes". :func:`model_extractor` is the messy
protocol's ``model`` extraction level: the same prompt (speaker and utterance only, never a fact id), no retry.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from crossprofile_lib.backends.base import ChatRequest
from crossprofile_lib.hiddenbench.ablations import PROMPT_FILES
from crossprofile_lib.hiddenbench.disclosure import tokens
from crossprofile_lib.prompts import render
from crossprofile_lib.task.discussion import ClaimList, Utterance, claim_list_from_utterances

EXTRACT_MAX_TOKENS = 200
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
    return " ".join(_TAG.sub("", s.strip()).strip("\"'\u201c\u201d").split())


def json_values(text: str, starts: str = "[{"):
    """Every JSON value in ``text`` that begins at one of the characters ``starts``, in order."""
    for i, ch in enumerate(text):
        if ch in starts:
            try:
                yield json.JSONDecoder().raw_decode(text[i:])[0]
            except json.JSONDecodeError:
                continue


def parse_claims(text: str) -> tuple[list[str], bool]:
    """``(claims, readable)`` from an extraction answer."""
    candidates = (x.get("claims") if isinstance(x, dict) else x for x in json_values(text.strip()))
    raw = next((c for c in candidates if isinstance(c, list) and all(isinstance(s, str) for s in c)), None)
    readable = raw is not None
    if raw is None:
        raw = [m.group("text") for m in map(_BULLET.match, text.splitlines()) if m]
        readable = bool(raw)
    out: dict[str, str] = {}   # the first spelling of each claim, by its case-folded text
    for c in map(_clean, raw):
        if c.casefold().rstrip(".") not in ("none", "no claims", "n/a") and len(tokens(c)) >= MIN_CLAIM_TOKENS:
            out.setdefault(c.casefold(), c)
    return list(out.values())[:MAX_CLAIMS_PER_MESSAGE], readable


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


def _cluster(raw: Sequence[RawClaim], threshold: float, confirm: Optional[Callable[[int, int], bool]],
             low: float) -> tuple[list[int], list[int], list[tuple[int, int, bool]]]:
    """``(reps, cluster, asked)``: each cluster's first raw claim, each raw claim's cluster, the grey-zone pairs
    put to ``confirm`` with its answers (a claim joins the earliest cluster it matches)."""
    keys = [key(r.text) for r in raw]
    reps: list[int] = []
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
    return reps, cluster, asked


def grey_pairs(raw: Sequence[RawClaim], threshold: float = MERGE_THRESHOLD,
               low: float = CONFIRM_LOW) -> list[tuple[int, int]]:
    """Pairs ``(i, rep)`` of the rule-only clustering with similarity in ``[low, threshold)``: for a model to confirm."""
    return [(i, rep) for i, rep, _ in _cluster(raw, threshold, lambda i, rep: False, low)[2]]


def merge_claims(raw: Sequence[RawClaim], speaker_order: Sequence[str], agents: Sequence[str] = (),
                 threshold: float = MERGE_THRESHOLD,
                 confirm: Optional[Callable[[int, int], bool]] = None,
                 low: float = CONFIRM_LOW) -> Merge:
    """Merge near-duplicate claims into a :class:`ClaimList`; ``confirm(i, rep)``: whether raw claim ``i`` restates
    claim ``rep`` (the model's answer; None: the rule only)."""
    reps, cluster, asked = _cluster(raw, threshold, confirm, low)
    utterances = [Utterance(i, r.speaker, raw[reps[cluster[i]]].text) for i, r in enumerate(raw)]
    cl = claim_list_from_utterances(utterances, speaker_order, agents)
    return Merge(cl, tuple(cluster), tuple(asked))


def extract_max_tokens(message: str) -> int:
    """Generation cap of a claim extraction: about twice the message's words, at most ``EXTRACT_MAX_TOKENS``."""
    return min(EXTRACT_MAX_TOKENS, 2 * len(message.split()) + 24)


def extract_request(speaker: str, text: str, purpose: str) -> ChatRequest:
    p = render(PROMPT_FILES["extract"], speaker=speaker, message=text)
    return ChatRequest((p.message(),), max_tokens=extract_max_tokens(text), purpose=purpose,
                       prompt_file=PROMPT_FILES["extract"])


def model_extractor(backend):
    """``(utterances) -> groups of utterance positions`` by ``backend``'s chat calls."""
    def extractor(utterances: Sequence[Utterance]) -> list[list[int]]:
        utt = list(utterances)
        results = backend.chat([extract_request(u.speaker, u.text, "messy-extract") for u in utt]) if utt else []
        raw = []
        for u, res in zip(utt, results):
            claims, ok = parse_claims("" if res.error else res.text)
            if not ok:
                claims = sentence_claims(u.text)
            raw += [RawClaim(u.speaker, u.position, c) for c in claims]
        groups: dict[int, dict[int, None]] = {}   # cluster -> its utterance positions (an ordered set)
        for r, c in zip(raw, _cluster(raw, MERGE_THRESHOLD, None, CONFIRM_LOW)[1]):
            groups.setdefault(c, {})[r.message_index] = None
        # an utterance whose claims fell in several clusters belongs to the first; one with none is its own claim
        seen: set[int] = set()
        out = []
        for c in sorted(groups):
            g = [i for i in groups[c] if i not in seen]
            seen.update(g)
            if g:
                out.append(g)
        out += [[u.position] for u in utt if u.position not in seen]
        return out
    return extractor
