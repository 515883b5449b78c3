"""The book's experiments on every core: each reference-decider run is one task, run on every core first; the
language-model runs are ONE task (shared call cache and threads), run after them in a worker with every core to itself
(llama.cpp's threads wait for each other at every layer). A worker rebuilds :class:`BookRuns` from the same parameters,
so every run is made by the sequential path's code; reasons a run is missing come back into ``skipped``."""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from typing import Callable

#: keys into ``BookRuns.skipped`` of the reference decider's steps (every other step is a model's)
REFERENCE_KEYS = ("ledger", "hiddenbench:ledger")


def cores() -> int:
    """The cores this process may use (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


#: The variables that size BLAS's thread pools (OpenBLAS, OpenMP, MKL), read when a process loads them.
BLAS_THREADS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def blas_share(jobs: int):
    """Processes started inside (the notebooks' kernels) size BLAS to their share of the cores, ``cores // jobs``
    (a variable already set is kept). Two kernels each with a BLAS thread per core waited on each other: chapter 7
    took 9 s alone and 38-45 s beside chapter 13, 8 s with one thread each."""
    share = {k: str(max(1, cores() // jobs)) for k in BLAS_THREADS_ENV if not os.environ.get(k)} if jobs > 1 else {}
    os.environ.update(share)
    try:
        yield
    finally:
        for k in share:
            os.environ.pop(k, None)


def tasks(steps: list[tuple[str, Callable, str]]) -> list[list[str]]:
    """Group step names into tasks: each reference step alone, then the model steps together (last)."""
    model = [name for name, _, key in steps if key not in REFERENCE_KEYS]
    ref = [[name] for name, _, key in steps if key in REFERENCE_KEYS]
    return ref + ([model] if model else [])


def _make(runs_class, params, names: list[str]) -> list[tuple[str, object, float, dict]]:
    """In a worker: make the named steps of ``runs_class(params)`` (a ``BookRuns``), one after another."""
    br = runs_class(params)
    by_name = {name: make for name, make, _ in br.steps()}
    out = []
    for name in names:
        t0 = time.perf_counter()
        run = by_name[name]()
        out.append((name, run, time.perf_counter() - t0, dict(br.skipped)))
    return out


def run_steps(br, workers: int | None = None, log=print) -> dict:
    """Make every step of ``br`` on ``workers`` processes (default: the cores); ``{name: run or None}`` in order."""
    steps = br.steps()
    keys = {name: key for name, _, key in steps}
    workers = cores() if workers is None else max(1, int(workers))
    groups = tasks(steps)
    done: dict = {}

    def report(name, run, seconds, skipped):
        done[name] = run
        br.skipped.update(skipped)
        why = br.skipped.get(keys[name], "")
        log(f"{name}: {seconds:.1f} s" + (f" (skipped: {why})" if run is None else ""))

    if workers == 1 or len(groups) == 1:
        for name, make, _ in steps:
            t0 = time.perf_counter()
            run = make()
            report(name, run, time.perf_counter() - t0, {})
    else:
        ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        ref = [g for g in groups if keys[g[0]] in REFERENCE_KEYS]
        for batch, size in ((ref, min(workers, len(ref))), ([g for g in groups if g not in ref], 1)):
            if not batch:
                continue
            with ProcessPoolExecutor(max_workers=size, mp_context=ctx) as ex:
                pending = {ex.submit(_make, type(br), br.params, g) for g in batch}
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in finished:
                        for name, run, seconds, skipped in f.result():
                            report(name, run, seconds, skipped)
    return {name: done[name] for name, _, _ in steps}
