"""Seeded random streams: every random choice takes an explicit generator derived from the run seed and stable
string keys (SHA-256, never Python's salted ``hash``), so a seed gives identical tasks, transcripts, memories and
prompts in any grid order.
"""

from __future__ import annotations

import hashlib

import numpy as np


def stream(seed: int, *keys: object) -> np.random.Generator:
    """A generator for ``seed`` and a purpose described by ``keys`` (e.g. template id, variant)."""
    words = [int(seed) & 0xFFFFFFFF]
    for k in keys:  # four 32-bit words of the key's SHA-256
        d = hashlib.sha256(str(k).encode("utf-8")).digest()
        words.extend(int.from_bytes(d[i:i + 4], "little") for i in range(0, 16, 4))
    return np.random.default_rng(np.random.SeedSequence(words))
