"""The scripted discussion and its claim list (SPEC section 4): a seeded speaker order; each speaker states every
fact it holds, one verbatim line each, in a seeded order. One claim per distinct fact (text, sorted agents, count,
first mention), shown as ``[A1,A3] <fact text>``. HiddenBench's natural discussion shares the claim list type;
``fact_id`` is read only by the reference decider and the measures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Iterable, Optional, Sequence

import numpy as np

from crossprofile_lib.rng import stream
from crossprofile_lib.task.templates import Fact, Template
from crossprofile_lib.task.variants import Variant, agent_names, assign_holders


def agent_key(a: str) -> tuple[int, str]:
    """Natural order of agent names: A2 before A10."""
    digits = "".join(c for c in a if c.isdigit())
    return (int(digits) if digits else 0, a)


def label(agents: Sequence[str]) -> str:
    """``[A1,A3]`` for the given agents (sorted naturally)."""
    return _label(tuple(agents))


@lru_cache(maxsize=4096)
def _label(agents: tuple[str, ...]) -> str:
    return "[" + ",".join(sorted(agents, key=agent_key)) + "]"


@dataclass(frozen=True)
class Utterance:
    position: int          # 0-based index in the transcript
    speaker: str
    text: str
    fact_id: Optional[str] = None


@dataclass(frozen=True)
class Claim:
    """One distinct fact of a discussion."""

    text: str
    speakers: tuple[str, ...]    # sorted naturally
    first_mention: int           # position of the first utterance stating it
    fact_id: Optional[str] = None
    first_speaker: Optional[str] = None

    @property
    def count(self) -> int:
        return len(self.speakers)

    def line(self, speakers: Optional[Sequence[str]] = None) -> str:
        """The memory line ``[A1,A3] text`` (``speakers`` overrides the label, e.g. shuffled)."""
        return self._line if speakers is None else f"{label(speakers)} {self.text}"

    @cached_property
    def _line(self) -> str:
        return f"{label(self.speakers)} {self.text}"


@dataclass(frozen=True)
class Transcript:
    speaker_order: tuple[str, ...]
    utterances: tuple[Utterance, ...]

    def render(self) -> str:
        """The full transcript, one ``A3: text`` line per utterance (the REF memory)."""
        return "\n".join(f"{u.speaker}: {u.text}" for u in self.utterances)


@dataclass(frozen=True)
class ClaimList:
    claims: tuple[Claim, ...]          # in first-mention order
    speaker_order: tuple[str, ...]
    agents: tuple[str, ...] = field(default=())
    #: for each speaker, the indices of the claims it stated, in the order it stated them
    by_speaker: tuple[tuple[str, tuple[int, ...]], ...] = field(default=())

    def __len__(self) -> int:
        return len(self.claims)

    def __iter__(self):
        return iter(self.claims)


def claim_list_from_utterances(utterances: Sequence[Utterance], speaker_order: Sequence[str],
                               agents: Sequence[str] = ()) -> ClaimList:
    """Merge utterances with identical text (or fact id) into claims, in first-mention order."""
    def key(x) -> str:
        return x.fact_id if x.fact_id is not None else " ".join(x.text.split()).lower()

    by_key: dict[str, list] = {}
    for u in utterances:
        by_key.setdefault(key(u), [u.text, set(), u.position, u.fact_id, u.speaker])[1].add(u.speaker)
    claims = sorted((Claim(text=t, speakers=tuple(sorted(s, key=agent_key)), first_mention=p, fact_id=fid,
                           first_speaker=fs)
                     for t, s, p, fid, fs in by_key.values()), key=lambda c: c.first_mention)
    index = {key(c): i for i, c in enumerate(claims)}
    said = speaker_claims(((u.speaker, index[key(u)]) for u in utterances), speaker_order)
    return ClaimList(tuple(claims), tuple(speaker_order), tuple(agents), said)


def speaker_claims(said: Iterable[tuple[str, Optional[int]]], speaker_order: Sequence[str]):
    """:attr:`ClaimList.by_speaker` from ``(speaker, claim index or None)`` pairs in transcript order."""
    out: dict[str, list[int]] = {}
    for s, i in said:
        if i is not None and i not in out.setdefault(s, []):
            out[s].append(i)
    return tuple((s, tuple(out.get(s, ()))) for s in speaker_order)


@dataclass(frozen=True)
class Task:
    """One template in one attribution variant for one seed: who holds what."""

    template: Template
    variant: Variant
    seed: int
    n_agents: int
    holders: dict  # fact id -> tuple of agents

    @property
    def task_id(self) -> str:
        return f"{self.template.id}/{self.variant.name}/s{self.seed}"


def make_task(template: Template, variant: Variant | str, seed: int, n_agents: int = 4) -> Task:
    variant = Variant(variant) if isinstance(variant, str) else variant
    rng = stream(seed, template.id, "holders", variant.name, n_agents)
    return Task(template, variant, seed, n_agents, assign_holders(template, variant, n_agents, rng))


def turns(task: Task, rng: Optional[np.random.Generator] = None) -> list[tuple[str, list[Fact]]]:
    """The scripted protocol's draws (the messy one reuses them): the speakers in a seeded order, each with the
    facts it holds in a seeded order."""
    if rng is None:
        rng = stream(task.seed, task.template.id, "discussion", task.variant.name, task.n_agents)
    agents = agent_names(task.n_agents)
    out = []
    for speaker in tuple(agents[i] for i in rng.permutation(len(agents))):
        held = [f for f in task.template.facts if speaker in task.holders[f.id]]
        out.append((speaker, [held[j] for j in rng.permutation(len(held))]))
    return out


def scripted_discussion(task: Task, rng: Optional[np.random.Generator] = None) -> Transcript:
    """Each speaker, in a seeded order, states each fact it holds, in a seeded order (:func:`turns`)."""
    said = turns(task, rng)
    lines = [(speaker, f) for speaker, held in said for f in held]
    return Transcript(tuple(s for s, _ in said), tuple(Utterance(i, s, f.text, f.id) for i, (s, f) in enumerate(lines)))


def claim_list(transcript: Transcript, agents: Sequence[str] = ()) -> ClaimList:
    return claim_list_from_utterances(transcript.utterances, transcript.speaker_order, agents)
