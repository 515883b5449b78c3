"""Seeded random streams: every random choice takes an explicit generator derived from the run seed and stable
string keys (SHA-256, never Python's salted ``hash``), so a seed gives identical tasks, transcripts, memories and
prompts in any grid order.
"""

from __future__ import annotations

import hashlib

import numpy as np


def _key_words(key: str) -> list[int]:
    d = hashlib.sha256(key.encode("utf-8")).digest()
    return [int.from_bytes(d[i:i + 4], "little") for i in range(0, 16, 4)]


def stream(seed: int, *keys: object) -> np.random.Generator:
    """A generator for ``seed`` and a purpose described by ``keys`` (e.g. template id, variant)."""
    words = [int(seed) & 0xFFFFFFFF]
    for k in keys:
        words.extend(_key_words(str(k)))
    return np.random.default_rng(np.random.SeedSequence(words))
