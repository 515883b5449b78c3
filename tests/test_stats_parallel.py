"""``crossprofile stats`` fits the net-lead regressions in a worker process beside the tables
(issue 26): every number is the one the in-process path gives, a cached fit starts no worker,
and the command prints the same report either way."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from crossprofile_lib.run.runner import RunConfig, run_to_dir
from crossprofile_lib.stats.analysis import analyse, to_jsonable
from crossprofile_lib.stats.cache import FitCache


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The reference decider on the 10 development templates (enough for every regression), r = .6."""
    d = tmp_path_factory.mktemp("run")
    run_to_dir(RunConfig(templates=["templates/dev"], seeds=[0], budgets=["0.6"]), d)
    return d


@pytest.fixture(scope="module")
def grid(run_dir):
    from crossprofile_lib.run.results import read_results
    return read_results(run_dir)


def _numbers(res) -> str:
    return json.dumps(to_jsonable(res), sort_keys=True)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the worker is forked on Linux only")
def test_worker_fit_gives_every_digit_of_the_in_process_fit(grid):
    kw = dict(n_resamples=300, fit_resamples=0, analysis_set="all")
    one = analyse(grid, workers=1, **kw)
    two = analyse(grid, workers=2, **kw)
    fixed = one[0]["net_lead"]["fixed"]
    assert not fixed.get("error") and len(fixed["terms"]) > 2  # the regressions were fitted, not refused
    assert _numbers(one) == _numbers(two)


class _NoPool:
    def submit(self, *a, **k):
        raise AssertionError("a cached fit must not start a worker")


def test_a_cached_fit_starts_no_worker(grid, tmp_path):
    from crossprofile_lib.stats.analysis import _analyse
    from crossprofile_lib.stats.analysis_set import prepare
    from crossprofile_lib.stats.contrasts import load_prereg
    df, rows = prepare(grid, False, "all")
    cache = FitCache(tmp_path)
    first = analyse(df, n_resamples=200, fit_resamples=0, rows=rows, cache=cache)
    assert cache.misses == 1 and any(tmp_path.glob("regressions-*.json"))
    again = _analyse(df, load_prereg(), 200, 0, None, True, 0, rows, cache, "", _NoPool())
    assert cache.hits == 1
    assert _numbers(first) == _numbers(again)


def test_contains_sees_only_stored_entries(tmp_path):
    c = FitCache(tmp_path)
    assert not c.contains("regressions", {"rows": "x"})
    c.get("regressions", {"rows": "x"}, lambda: {"a": 1})
    assert c.contains("regressions", {"rows": "x"}) and not c.contains("regressions", {"rows": "y"})
    assert not FitCache(None).contains("regressions", {"rows": "x"})


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2,
                    reason="needs taskset and two cores")
def test_the_command_prints_the_same_report_on_one_core_and_on_two(run_dir):
    cmd = [sys.executable, "-m", "crossprofile_lib.cli", "stats", str(run_dir), "--analysis-set", "all",
           "--resamples", "300", "--fit-resamples", "0", "--no-cache"]
    one = subprocess.run(["taskset", "-c", "0"] + cmd, capture_output=True, text=True, check=True)
    two = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert "[primary] GLM logit" in one.stdout
    assert one.stdout == two.stdout
