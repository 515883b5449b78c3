"""Claim extraction from a messy discussion at four levels (:data:`LEVELS`), each a :class:`ClaimList`: ``oracle``
(merge by ground-truth fact id, the fact's own text), ``exact`` (equal after collapsing white space and case),
``fuzzy`` (join the earliest claim whose first text scores >= :data:`FUZZY_THRESHOLD` by rapidfuzz's
``token_sort_ratio``) and ``model`` (the caller's extractor; :data:`MODEL_UNAVAILABLE` on the reference decider).
A claim shows its first utterance's text, its speakers are all who said a member, its ``fact_id`` the first
utterance's. :func:`merge_quality` over pairs of fact utterances: precision (a fact merged with a fact-less line
is false), recall, **split rate** (multi-speaker facts in several claims), **rare-looking rate** (those with a
single-speaker claim).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Callable, Iterable, Optional, Sequence

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from crossprofile_lib.task.discussion import Claim, ClaimList, Utterance, agent_key, claim_list_from_utterances, speaker_claims
from crossprofile_lib.task.messy import MessyTranscript

LEVELS = ("oracle", "exact", "fuzzy", "model")
#: fuzzy merge threshold on ``fuzz.token_sort_ratio`` (0-100); see the module doc
FUZZY_THRESHOLD = 80.0
MODEL_UNAVAILABLE = ("extraction level 'model' needs a model backend (the natural protocol's model-based claim "
                     "extractor); the reference decider makes no model calls: use oracle, exact or fuzzy")

#: a model extractor: ``(utterances) -> groups``, each group the utterance positions merged into one claim
Extractor = Callable[[Sequence[Utterance]], Sequence[Sequence[int]]]


@dataclass(frozen=True)
class Extraction:
    """The claim list and, per claim, the utterance positions it merged (``members``)."""

    claims: ClaimList
    members: tuple[tuple[int, ...], ...]
    level: str


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def _claims_from_groups(mt: MessyTranscript, groups: Sequence[Sequence[int]], agents: Sequence[str]) -> ClaimList:
    """One claim per group (each sorted, the groups by their first position)."""
    utt = mt.utterances
    claims = []
    for g in groups:
        first = utt[g[0]]
        sp = tuple(sorted({utt[i].speaker for i in g}, key=agent_key))
        claims.append(Claim(text=first.text, speakers=sp, first_mention=first.position, fact_id=mt.truth[g[0]],
                            first_speaker=first.speaker))
    where = {i: c for c, g in enumerate(groups) for i in g}
    said = speaker_claims(((u.speaker, where.get(u.position)) for u in utt), mt.speaker_order)
    return ClaimList(tuple(claims), tuple(mt.speaker_order), tuple(agents), said)


def _positions(keys: Iterable[Optional[str]]) -> dict[str, list[int]]:
    """``{key: the positions holding it}`` in first-seen order (``None`` left out): the utterances stating each
    fact of a ``truth`` list, or sharing a normalised text."""
    out: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        if k is not None:
            out.setdefault(k, []).append(i)
    return out


def _groups_fuzzy(utt: Sequence[Utterance], threshold: float) -> list[list[int]]:
    heads: list[str] = []
    groups: list[list[int]] = []
    for u in utt:
        key = default_process(u.text)
        for j, h in enumerate(heads):
            if fuzz.token_sort_ratio(key, h, processor=None) >= threshold:
                groups[j].append(u.position)
                break
        else:
            heads.append(key)
            groups.append([u.position])
    return groups


def oracle_claims(mt: MessyTranscript, template, agents: Sequence[str]) -> ClaimList:
    """The oracle level: the scripted claim list (see the module doc)."""
    facts = [(u, fid) for u, fid in zip(mt.utterances, mt.truth) if fid is not None]
    utt = [Utterance(i, u.speaker, template.fact(fid).text, fid) for i, (u, fid) in enumerate(facts)]
    return claim_list_from_utterances(utt, mt.speaker_order, agents)


def extract(mt: MessyTranscript, level: str, template, agents: Sequence[str], threshold: float = FUZZY_THRESHOLD,
            extractor: Optional[Extractor] = None) -> Extraction:
    """Claims of ``mt`` at ``level`` (:data:`LEVELS`); ``extractor`` is required for ``model``."""
    utt = mt.utterances
    if level == "oracle":
        cl, by_fact = oracle_claims(mt, template, agents), _positions(mt.truth)
        return Extraction(cl, tuple(tuple(by_fact[c.fact_id]) for c in cl.claims), level)
    if level == "exact":
        groups = list(_positions(_norm(u.text) for u in utt).values())
    elif level == "fuzzy":
        groups = _groups_fuzzy(utt, threshold)
    elif level == "model":
        if extractor is None:
            raise ValueError(MODEL_UNAVAILABLE)
        groups = [list(g) for g in extractor(utt)]
    else:
        raise ValueError(f"extraction level '{level}' is not one of {', '.join(LEVELS)}")
    groups = sorted((sorted(g) for g in groups if g), key=lambda g: g[0])
    return Extraction(_claims_from_groups(mt, groups, agents), tuple(tuple(g) for g in groups), level)


@dataclass(frozen=True)
class MergeQuality:
    precision: float      # merged fact-utterance pairs that state the same fact / merged pairs (nan: none)
    recall: float         # same-fact pairs merged / same-fact pairs (nan: none)
    split_rate: float     # facts said by >= 2 speakers whose statements fall in > 1 claim (nan: no such fact)
    rare_rate: float      # ... with a claim showing a single speaker
    n_claims: int
    n_fact_claims: int    # claims whose first utterance states a fact


def merge_quality(mt: MessyTranscript, ex: Extraction) -> MergeQuality:
    """Merge precision / recall, split and rare-looking rates of ``ex`` against ``mt``'s truth."""
    truth = mt.truth
    speaker = {u.position: u.speaker for u in mt.utterances}
    tp = pred = 0
    for g in ex.members:
        for a, b in combinations(g, 2):
            if truth[a] is None and truth[b] is None:
                continue
            pred += 1
            tp += truth[a] is not None and truth[a] == truth[b]
    claim_of = {i: c for c, g in enumerate(ex.members) for i in g}
    by_fact = _positions(truth)
    same = sum(len(v) * (len(v) - 1) // 2 for v in by_fact.values())
    hit = sum(1 for v in by_fact.values() for a, b in combinations(v, 2) if claim_of.get(a) == claim_of.get(b))
    shared = [v for v in by_fact.values() if len({speaker[i] for i in v}) >= 2]
    split = rare = 0
    for v in shared:
        cs = {claim_of[i] for i in v if i in claim_of}
        split += len(cs) > 1
        rare += any(ex.claims.claims[c].count == 1 for c in cs)
    nan = float("nan")
    return MergeQuality(tp / pred if pred else nan, hit / same if same else nan,
                        split / len(shared) if shared else nan, rare / len(shared) if shared else nan,
                        len(ex.claims), sum(c.fact_id is not None for c in ex.claims.claims))
