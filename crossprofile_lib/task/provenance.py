"""Provenance formats: the label before each memory line and how many speakers it *reveals* (social proof):
``full`` ``[A1,A3] text``; ``unlabeled`` ``text``; ``shuffled`` label sets permuted among kept lines (seeded);
``first-speaker`` ``[A3] text``; ``claim-id`` ``[C07] text`` (contributors kept outside the memory).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from crossprofile_lib.task.discussion import Claim, label

# (claims, rng) -> list of (prefix shown, number of speakers the prefix reveals)
Format = Callable[[Sequence[Claim], np.random.Generator], list[tuple[str, int]]]


def _full(claims, rng):
    return [(label(c.speakers), c.count) for c in claims]


def _unlabeled(claims, rng):
    return [("", 1) for _ in claims]


def _shuffled(claims, rng):
    perm = rng.permutation(len(claims))
    return [(label(claims[j].speakers), claims[j].count) for j in perm]


def _first_speaker(claims, rng):
    return [(f"[{c.first_speaker or c.speakers[0]}]", 1) for c in claims]


def _claim_id(claims, rng):
    return [(f"[C{c.first_mention + 1:02d}]", 1) for c in claims]


FORMATS: dict[str, Format] = {
    "full": _full,
    "unlabeled": _unlabeled,
    "shuffled": _shuffled,
    "first-speaker": _first_speaker,
    "claim-id": _claim_id,
}


def render_lines(claims: Sequence[Claim], fmt: str, rng: np.random.Generator) -> list[tuple[str, int]]:
    """``[(line text, speakers revealed)]`` for ``claims`` in the given format."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown provenance format '{fmt}' (known: {', '.join(FORMATS)})")
    return [(f"{prefix} {c.text}" if prefix else c.text, n) for c, (prefix, n) in zip(claims, FORMATS[fmt](claims, rng))]
