"""The fit cache: a rerun reads the stored fits and prints the same bytes; any change of rows,
options or code is a new key; a broken entry is recomputed; nothing is pickled."""

import json

import numpy as np
import pandas as pd
import pytest

from crossprofile_lib.cli import main
from crossprofile_lib.stats import cache as C
from crossprofile_lib.stats.analysis import analyse


def test_table_hash_sees_every_value_and_column_order():
    df = pd.DataFrame(dict(a=[1, 2], b=["x", "y"]))
    h = C.table_hash(df)
    assert h == C.table_hash(df.copy()) and h == C.table_hash(df.set_index(pd.Index([5, 6])))
    assert h != C.table_hash(df.assign(b=["x", "z"])) and h != C.table_hash(df[["b", "a"]])


def test_round_trip_keeps_frames_and_nan(tmp_path):
    c = C.FitCache(tmp_path)
    value = dict(t=pd.DataFrame(dict(term=["a", "b"], p=[0.5, np.nan], ok=[True, False])), x=np.float64(1 / 3),
                 n=np.int64(4), none=None, nested={"k": [1, 2.5]})
    calls = []
    first = c.get("fit", dict(rows="abc"), lambda: calls.append(1) or value)
    again = c.get("fit", dict(rows="abc"), lambda: calls.append(1) or value)
    assert calls == [1] and c.hits == 1 and c.misses == 1
    pd.testing.assert_frame_equal(again["t"], value["t"])
    assert again["x"] == 1 / 3 and again["n"] == 4 and again["none"] is None and again["nested"] == {"k": [1, 2.5]}
    assert first is value
    c.get("fit", dict(rows="abd"), lambda: calls.append(2) or value)          # other rows: other key
    assert calls == [1, 2]
    for p in tmp_path.glob("fit-*.json"):          # a truncated entry is recomputed, not an error
        p.write_text("{")
    c.get("fit", dict(rows="abc"), lambda: calls.append(3) or value)
    assert calls[-1] == 3
    key = c.key("fit", dict(rows="abc"))[:32]
    assert json.loads((tmp_path / f"fit-{key}.json").read_text())["x"] == 1 / 3     # rewritten, plain JSON


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cache") / "run"
    assert main(["run", "--out", str(out), "--templates", "templates/formal/bus-route", "templates/formal/it-vendor",
                 "--seeds", "0", "--budgets", "0.6", "--policies", "R1,B4,Random,ALL,EMPTY",
                 "--backend-option", "inverse_temperature=2", "--backend-option", "social_proof=0.5"]) == 0
    return out


def _stats(capsys, *args):
    capsys.readouterr()
    rc = main(["stats", *map(str, args)])
    return rc, capsys.readouterr()


def test_rerun_reads_the_cache_and_prints_the_same(run_dir, capsys, monkeypatch):
    args = [run_dir, "--resamples", 300, "--fit-resamples", 30]
    rc, first = _stats(capsys, *args)
    assert rc == 0 and len(list((run_dir / C.CACHE_DIRNAME).glob("*.json"))) == 2
    import crossprofile_lib.stats.analysis as A

    def boom(*a, **k):
        raise AssertionError("refitted although cached")
    monkeypatch.setattr(A, "regressions_fit", boom)
    monkeypatch.setattr(A, "fit_social_proof", boom)
    monkeypatch.setenv("CROSSPROFILE_TRACEBACK", "1")  # the command line's last-resort handler lets it through
    rc, second = _stats(capsys, *args)
    assert rc == 0 and second.out == first.out
    with pytest.raises(AssertionError, match="refitted"):     # other options are another key
        _stats(capsys, run_dir, "--resamples", 300, "--fit-resamples", 31)
    with pytest.raises(AssertionError, match="refitted"):     # --no-cache always fits
        _stats(capsys, *args, "--no-cache")


def test_library_call_without_cache_computes(run_dir):
    df = pd.read_parquet(run_dir / "results.parquet")
    (m,) = analyse(df, n_resamples=100, fit_resamples=0)
    assert m["net_lead"]["verdict"]["fit"].tolist()[:5] == ["fixed", "lr", "ml", "mixed", "gee"]


def test_unwritable_run_folder_still_reports(run_dir, tmp_path, capsys):
    import shutil
    d = tmp_path / "ro"
    shutil.copytree(run_dir, d, ignore=shutil.ignore_patterns(C.CACHE_DIRNAME))
    (d / C.CACHE_DIRNAME).write_text("a file where the cache folder should be")
    rc, cap = _stats(capsys, d, "--resamples", 100, "--fit-resamples", 0)
    assert rc == 0 and "fits not cached" in cap.err and "Verdict" in cap.out
