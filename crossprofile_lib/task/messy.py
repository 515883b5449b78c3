"""The messy controlled discussion: the scripted protocol's speakers and fact order (the same seeded draws), said
differently. A fact's first speaker uses a wording (its text or a paraphrase) drawn uniformly, each later speaker
one not yet used (then one the previous speaker did not use). After each fact utterance, with probability
``opinion_rate`` (:data:`DEFAULT_OPINION_RATE`), an opinion/agreement/hedge line (:data:`FILLERS`) with no fact
and no option. One generator (``stream(seed, template id, 'messy', variant, agents)``); filler draws are made
whatever the rate, so two rates give the same wordings. The ground truth (:attr:`MessyTranscript.truth`) is kept
apart: the utterances carry no fact id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from crossprofile_lib.rng import stream
from crossprofile_lib.task.discussion import Task, Transcript, Utterance, turns

#: share of fact utterances followed by one fact-less line (the protocol's default)
DEFAULT_OPINION_RATE = 0.25

#: opinion, agreement and hedge lines: no fact, no option, no hint word (rule 5 holds on each)
FILLERS: tuple[tuple[str, str], ...] = (
    ("agreement", "I agree with that."),
    ("agreement", "Yes, that matches what I read as well."),
    ("agreement", "Same here, my notes say that too."),
    ("agreement", "That fits with what I was told."),
    ("opinion", "That seems important to me."),
    ("opinion", "I think that point matters a lot."),
    ("opinion", "Honestly, that worries me a little."),
    ("opinion", "I find that quite reassuring."),
    ("hedge", "I am not completely sure about that one."),
    ("hedge", "We may want to double-check that."),
    ("hedge", "I might be misremembering the details."),
    ("hedge", "That is how I understood it, at least."),
)


def wordings(fact) -> tuple[str, ...]:
    """A fact's wordings: its text, then its paraphrases (index 0 is the text)."""
    return (fact.text, *getattr(fact, "paraphrases", ()))


@dataclass(frozen=True)
class MessyTranscript:
    """A messy discussion: what can be seen and, separately, the ground truth.

    ``transcript``: the utterances (``fact_id`` always ``None``), ``truth``: per utterance the fact id
    it states (``None`` for a fact-less line), ``wording``: per utterance the wording index (0 = the
    fact text, ``k`` = paraphrase ``k - 1``; ``-1`` for a fact-less line)."""

    transcript: Transcript
    truth: tuple[Optional[str], ...]
    wording: tuple[int, ...]
    opinion_rate: float

    @property
    def speaker_order(self) -> tuple[str, ...]:
        return self.transcript.speaker_order

    @property
    def utterances(self) -> tuple[Utterance, ...]:
        return self.transcript.utterances


def check_opinion_rate(rate: float) -> float:
    r = float(rate)
    if not 0.0 <= r <= 1.0 or r != r:
        raise ValueError(f"opinion rate {rate!r} is not in [0, 1] (the share of fact lines followed by a "
                         f"fact-less line)")
    return r


def messy_discussion(task: Task, opinion_rate: float = DEFAULT_OPINION_RATE,
                     rng: Optional[np.random.Generator] = None) -> MessyTranscript:
    """The messy discussion of ``task`` (see the module doc). A template whose facts have no
    paraphrase is refused (:class:`ValueError` naming the template and the fact)."""
    rate = check_opinion_rate(opinion_rate)
    t = task.template
    for f in t.facts:
        if len(wordings(f)) < 3:
            raise ValueError(f"template {t.id}: fact {f.id} has {len(wordings(f)) - 1} paraphrase(s); the messy "
                             f"protocol needs at least 2 per fact (template field facts[].paraphrases)")
    said = turns(task)  # the scripted protocol's own draws: same speakers, same fact order
    if rng is None:
        rng = stream(task.seed, t.id, "messy", task.variant.name, task.n_agents)
    used: dict[str, list[int]] = {}
    utt: list[Utterance] = []
    truth: list[Optional[str]] = []
    wording: list[int] = []
    for speaker, held in said:
        for f in held:
            ws = wordings(f)
            before = used.setdefault(f.id, [])
            fresh = [k for k in range(len(ws)) if k not in before]
            if not fresh:
                fresh = [k for k in range(len(ws)) if k != before[-1]]
            k = fresh[int(rng.integers(len(fresh)))]
            before.append(k)
            utt.append(Utterance(len(utt), speaker, ws[k], None))
            truth.append(f.id)
            wording.append(k)
            u, which = rng.random(), int(rng.integers(len(FILLERS)))  # drawn at every rate: common numbers
            if u < rate:
                utt.append(Utterance(len(utt), speaker, FILLERS[which][1], None))
                truth.append(None)
                wording.append(-1)
    return MessyTranscript(Transcript(tuple(s for s, _ in said), tuple(utt)), tuple(truth), tuple(wording), rate)
