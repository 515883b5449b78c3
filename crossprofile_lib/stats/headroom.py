"""The headroom check (SPEC section 8): ALL - EMPTY accuracy in points with a bootstrap interval; results are
confirmatory only when its lower bound exceeds ``min_points``. :func:`headroom` resamples templates,
:func:`task_headroom` HiddenBench tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np
import pandas as pd

from crossprofile_lib.design import HEADROOM_MIN_POINTS
from crossprofile_lib.stats.bootstrap import TemplateBootstrap, resample_indices


def exceeds(lo: Optional[float], min_points: float) -> bool:
    """The rule: the lower bound strictly exceeds ``min_points``, compared rounded to 9 decimals (floating-point
    noise must not turn a bound of exactly 15 points into a pass)."""
    return lo is not None and round(float(lo), 9) > min_points


@dataclass(frozen=True)
class Headroom(Mapping):
    """ALL - EMPTY accuracy (points) with its interval and the verdict; ``estimate`` None when not run."""

    estimate: Optional[float]   # ALL minus EMPTY accuracy, points
    lo: Optional[float]         # lower bound of the percentile interval
    hi: Optional[float]
    min_points: float           # the lower bound must exceed this
    n_units: int = 0            # templates (or tasks) resampled
    reason: str = ""            # why the results are exploratory ('' when the check passed)

    @classmethod
    def of(cls, estimate: float, lo: float, hi: float, min_points: float, n_units: int) -> "Headroom":
        ok = exceeds(lo, min_points)
        return cls(float(estimate), float(lo), float(hi), float(min_points), int(n_units),
                   "" if ok else f"ALL - EMPTY lower bound {lo:.1f} <= {min_points:g} points")

    @property
    def passed(self) -> bool:
        return exceeds(self.lo, self.min_points)

    @property
    def status(self) -> str:
        return "confirmatory" if self.passed else "exploratory"

    # chapter 8's names for the HiddenBench check
    difference = property(lambda self: self.estimate)
    low = property(lambda self: self.lo)
    high = property(lambda self: self.hi)
    passes = property(lambda self: self.passed)
    n_tasks = property(lambda self: self.n_units)

    def as_dict(self) -> dict:
        """The fields plus ``passed`` and ``status``: what ``run.json`` and ``hiddenbench_run.json`` record."""
        return dict(asdict(self), passed=self.passed, status=self.status)

    def __getitem__(self, key: str):
        return self.as_dict()[key]

    def __iter__(self):
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())


def headroom(df: pd.DataFrame, boot: TemplateBootstrap, min_points: float = HEADROOM_MIN_POINTS) -> Headroom:
    """ALL - EMPTY accuracy over all variants and budgets of one model's rows, templates resampled by ``boot``."""
    d = df[df["policy"].isin(["ALL", "EMPTY"])]
    if set(d["policy"]) != {"ALL", "EMPTY"}:
        return Headroom(None, None, None, float(min_points), 0, "the run has no ALL and EMPTY rows to check headroom")
    cell = (d["policy"] == "EMPTY").to_numpy().astype(np.int64)           # 0: ALL, 1: EMPTY
    S, N = boot.sums(boot.codes(d["template_id"].astype(str).tolist()), cell, d["correct"].astype(float).to_numpy(), 2)
    point, draws = boot.means(S * 100.0, N)                               # accuracy in percent, (2,) and (B, 2)
    s = boot.summarize(np.array([point[0] - point[1]]), (draws[:, 0] - draws[:, 1])[:, None])
    return Headroom.of(s["estimate"][0], s["lo"][0], s["hi"][0], min_points, d["template_id"].nunique())


def task_headroom(decisions: pd.DataFrame, rng: np.random.Generator, n_resamples: int = 10_000,
                  level: float = 0.95, min_points: float = HEADROOM_MIN_POINTS) -> Optional[Headroom]:
    """ALL - EMPTY accuracy of a HiddenBench decisions table (per task averaged over seeds and ablations), tasks
    resampled from ``rng``; None when nothing was decided (ledger runs)."""
    d = decisions[decisions.decided & decisions.policy.isin(["ALL", "EMPTY"])]
    if d.empty or set(d.policy) != {"ALL", "EMPTY"}:
        return None
    per = d.assign(c=d.correct.astype(float)).pivot_table(index="task_id", columns="policy", values="c",
                                                          aggfunc="mean").dropna()
    diff = 100.0 * (per["ALL"] - per["EMPTY"]).to_numpy()          # shape (n_tasks,)
    boot = TemplateBootstrap(tuple(map(str, per.index)), resample_indices(len(diff), n_resamples, rng), level)
    point, draws = boot.means(diff[:, None], np.ones((len(diff), 1)))
    s = boot.summarize(point, draws)
    return Headroom.of(point[0], s["lo"][0], s["hi"][0], min_points, len(diff))
