"""How many requests an OpenAI-compatible run keeps in flight, per base URL.

**The rule** (``concurrency="auto"``, the default): each base URL has its own limit, found while the run goes by
additive increase / multiplicative decrease, with latency as the backpressure signal (a server's queue shows as
latency before it shows as errors):

* start at :data:`START`; while no queueing was seen the limit doubles after each window of ``limit`` answers (slow
  start), afterwards it grows by one per window;
* **overload** (a 429, a 503, a timeout, a dropped connection) halves it (at least 1), at most once per window;
* **queueing**: the smoothed latency per answer token (seconds / (completion tokens + 1), an exponential average) above
  :data:`RISE` times the URL's baseline (the least smoothed value seen) stops the growth and ends the slow start;
  above :data:`CUT` times it lowers the limit by a tenth, at most once per window;
* the limit stays within ``1 .. ceiling`` (``max_concurrency``, default :data:`CEILING`).

A server working on ``k`` requests at once settles between ``k`` and about ``CUT * k``, near its throughput, with no
queue growing into timeouts. Each call goes to the URL with the most free room (``j mod n`` on a tie); a retry goes to
another URL than the one that failed. A fixed integer ``concurrency`` keeps at most that many in flight over all URLs,
call ``j`` to URL ``j mod n``. Measured: ``benchmarks/bench_concurrency.py`` (``benchmarks/results/concurrency.json``).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Optional

START = 4
CEILING = 128
RISE = 1.5
CUT = 2.0
SMOOTHING = 0.2   # weight of a new latency sample in the smoothed latency (about a 5-sample window at the start)

OK, OVERLOAD, NEUTRAL = "ok", "overload", "neutral"


@dataclass
class URLLimit:
    """One base URL's limit and what moved it (see the module doc)."""

    limit: float = START
    ceiling: int = CEILING
    inflight: int = 0
    slow_start: bool = True
    smoothed: Optional[float] = None
    baseline: Optional[float] = None
    window_done: int = 0          # answers since the last change
    last_cut: int = -1            # answers counter value at the last decrease
    answers: int = 0
    overloads: int = 0
    queueing: int = 0
    peak: float = START

    @property
    def room(self) -> int:
        return int(self.limit) - self.inflight

    def _set(self, value: float) -> None:
        self.limit = float(min(self.ceiling, max(1.0, value)))
        self.peak = max(self.peak, self.limit)
        self.window_done = 0

    def _cut(self, value: float) -> None:  # at most once per window
        if self.answers - self.last_cut >= max(1, int(self.limit)) or self.last_cut < 0:
            self.last_cut = self.answers
            self._set(value)

    def observe(self, outcome: str, latency: float) -> None:
        self.answers += 1
        if outcome == OVERLOAD:
            self.overloads += 1
            self.slow_start = False
            self._cut(math.floor(self.limit / 2))
            return
        if outcome != OK:
            return
        self.smoothed = latency if self.smoothed is None else (1 - SMOOTHING) * self.smoothed + SMOOTHING * latency
        self.baseline = self.smoothed if self.baseline is None else min(self.baseline, self.smoothed)
        self.window_done += 1
        if self.smoothed > RISE * self.baseline:
            self.queueing += 1
            self.slow_start = False
            if self.smoothed > CUT * self.baseline:
                self._cut(min(self.limit - 1, self.limit * 0.9))
            return
        if self.window_done >= int(self.limit) and self.limit < self.ceiling:
            self._set(self.limit * 2 if self.slow_start else self.limit + 1)


class Pool:
    """Slots for requests in flight: per-URL adaptive limits (``adaptive``) or one fixed total."""

    def __init__(self, n_urls: int, concurrency: "int | str" = "auto", ceiling: int = CEILING, start: int = START):
        self.adaptive = concurrency == "auto"
        self.n = int(n_urls)
        self.total = None if self.adaptive else int(concurrency)
        self.ceiling = int(ceiling)
        self.urls = [URLLimit(limit=float(min(start, ceiling)), ceiling=self.ceiling, peak=float(min(start, ceiling)))
                     for _ in range(self.n)]
        self._cond: Optional[asyncio.Condition] = None
        self._inflight = 0

    def new_loop(self) -> None:
        """Forget the slots of an earlier event loop (a batch that stopped); keep the limits found."""
        self._cond, self._inflight = None, 0
        for u in self.urls:
            u.inflight = 0

    @property
    def workers(self) -> int:
        """How many requests may wait for a slot at once."""
        return self.ceiling * self.n if self.adaptive else self.total

    def _pick(self, preferred: int, avoid: Optional[int]) -> Optional[int]:
        if not self.adaptive:
            return preferred if self._inflight < self.total else None
        order = [(preferred + i) % self.n for i in range(self.n)]
        if avoid is not None and self.n > 1:  # a retry waits for another URL rather than repeat a failed one
            order = [k for k in order if k != avoid]
        best = max(order, key=lambda k: self.urls[k].room)  # the first of equals
        return best if self.urls[best].room > 0 else None

    async def acquire(self, preferred: int, avoid: Optional[int] = None) -> int:
        """A URL index with a free slot (waits for one); ``avoid``: the URL that just failed."""
        if self._cond is None:
            self._cond = asyncio.Condition()
        async with self._cond:
            while (k := self._pick(preferred % self.n, avoid)) is None:
                await self._cond.wait()
            self.urls[k].inflight += 1
            self._inflight += 1
            return k

    async def release(self, k: int, outcome: str, latency: float = 0.0) -> None:
        """Free URL ``k``'s slot; ``latency``: seconds per answer token of an ``ok`` answer."""
        async with self._cond:
            u = self.urls[k]
            u.inflight -= 1
            self._inflight -= 1
            if self.adaptive:
                u.observe(outcome, latency)
            self._cond.notify_all()

    def record(self, shown_urls) -> dict:
        """What ``run.json`` says about concurrency: the rule and, per URL, where its limit went."""
        if not self.adaptive:
            return {"mode": "fixed", "concurrency": self.total}
        return {"mode": "auto", "rule": "AIMD per base URL on latency, 429/503 and timeouts", "start": START,
                "ceiling": self.ceiling, "rise": RISE, "cut": CUT,
                "per_url": [{"base_url": s, "final": int(u.limit), "peak": int(u.peak), "answers": u.answers,
                             "overloads": u.overloads, "queueing": u.queueing} for s, u in zip(shown_urls, self.urls)]}
