"""The book's experiments on every core (crossprofile_lib/book/schedule.py): the concurrent path
makes exactly the tables the one-after-another path makes, keeps the model's runs together in one
worker, and brings back the reasons a run is missing."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from crossprofile_lib import book
from crossprofile_lib.book.experiments import BookRuns
from crossprofile_lib.book.schedule import REFERENCE_KEYS, tasks


def _tables(root: Path) -> dict[str, pd.DataFrame]:
    return {str(f.relative_to(root)): pd.read_parquet(f) for f in sorted(root.rglob("*.parquet"))}


@pytest.mark.slow
def test_concurrent_runs_make_the_same_tables_as_sequential_ones(tmp_path):
    params = dict(book.QUICK, hb_seeds=[0])
    seq = BookRuns(dict(params, runs_root=str(tmp_path / "seq"))).prepare(log=lambda s: None, workers=1)
    par = BookRuns(dict(params, runs_root=str(tmp_path / "par"))).prepare(log=lambda s: None, workers=2)
    assert list(seq) == list(par)  # same steps, reported in the same (build) order
    a, b = _tables(tmp_path / "seq"), _tables(tmp_path / "par")
    assert a.keys() == b.keys() and len(a) >= 6
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], check_exact=True, obj=name)
    for name, run in par.items():  # the runs handed back from the workers are the tables on disk
        if hasattr(run, "df"):
            pd.testing.assert_frame_equal(run.df.reset_index(drop=True), seq[name].df.reset_index(drop=True),
                                          check_exact=True, obj=name)


def test_model_steps_form_one_task_run_after_the_reference_runs():
    br = BookRuns(dict(book.QUICK, backend="llamacpp/smollm2-135m"))
    steps = br.steps()
    groups = tasks(steps)
    model = [name for name, _, key in steps if key not in REFERENCE_KEYS]
    assert len(model) == 3 and groups[-1] == model  # sample, labels prompt, HiddenBench: one worker, in order, last
    assert all(len(g) == 1 for g in groups[:-1])
    assert sorted(n for g in groups for n in g) == sorted(n for n, _, _ in steps)
    assert tasks(BookRuns(dict(book.QUICK)).steps())[0] == ["ledger"]  # no model: every step on its own


@pytest.mark.slow
def test_a_missing_model_comes_back_as_a_reason_from_the_worker(tmp_path):
    gguf = tmp_path / "none.gguf"
    br = BookRuns(dict(book.QUICK, runs_root=str(tmp_path / "runs"), backend=f"llamacpp/{gguf}",
                       social_proof_sweep=[0.5], group_sizes=[4]))
    out = br.prepare(log=lambda s: None, workers=2)
    from crossprofile_lib.book.runs import slug
    assert out[slug(br.backend)] is None and out[f"hiddenbench-{slug(br.backend)}"] is None
    assert "none.gguf" in br.skipped[br.backend]


def test_the_longest_chapters_named_first_exist():
    """build.LONGEST (executed first) names chapters that exist: a renamed chapter would quietly lose its place."""
    from crossprofile_lib.book.build import LONGEST, notebooks
    root = Path(__file__).resolve().parents[1]
    assert set(LONGEST) <= {m.stem for m in notebooks(root)}


def test_notebook_kernels_get_their_share_of_the_cores_for_blas(monkeypatch):
    """With two notebooks at once each kernel's BLAS gets cores // 2 threads (measured: two kernels with a BLAS
    thread per core made chapter 7 five times slower); a value the user set is kept; afterwards nothing is left set."""
    import subprocess
    import sys

    from crossprofile_lib.book.schedule import BLAS_THREADS_ENV, blas_share, cores
    for k in BLAS_THREADS_ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "7")
    probe = ("import numpy, threadpoolctl; print(sorted({i['num_threads'] for i in threadpoolctl.threadpool_info() "
             "if i['user_api'] == 'blas'}))")
    with blas_share(2):
        share = max(1, cores() // 2)
        assert os.environ["OPENBLAS_NUM_THREADS"] == os.environ["OMP_NUM_THREADS"] == str(share)
        assert os.environ["MKL_NUM_THREADS"] == "7"
        seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert seen.strip() == f"[{share}]"
    assert "OPENBLAS_NUM_THREADS" not in os.environ and "OMP_NUM_THREADS" not in os.environ
    assert os.environ["MKL_NUM_THREADS"] == "7"
    with blas_share(1):  # one notebook at a time: BLAS as the machine sizes it
        assert "OPENBLAS_NUM_THREADS" not in os.environ
