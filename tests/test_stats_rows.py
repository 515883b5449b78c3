"""Which rows ``crossprofile stats`` uses: failed calls are refused (or dropped with a notice),
confirmatory statistics use the formal templates only, and too few templates is never
confirmatory."""

import json
import shutil

import pandas as pd
import pytest
from stats_cli import run_stats

from crossprofile_lib.cli import main
from crossprofile_lib.stats.analysis import analyse
from crossprofile_lib.stats.analysis_set import (
    MIN_TEMPLATES_CONFIRMATORY,
    FailedCallsError,
    check_failed_calls,
    formal_template_ids,
    select_analysis_set,
)

FAST = ["--resamples", "200", "--fit-resamples", "0", "--no-regressions"]


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory):
    """Two formal domains (10 templates) plus the 10 development templates, one seed."""
    out = tmp_path_factory.mktemp("rows") / "run"
    assert main(["run", "--out", str(out), "--templates", "templates/dev", "templates/formal/bus-route",
                 "templates/formal/it-vendor", "--seeds", "0", "--budgets", "0.6",
                 "--policies", "R1,B4,Random,R1-rel,ALL,EMPTY"]) == 0
    return out


def test_formal_ids_come_from_the_formal_folder():
    ids = formal_template_ids()
    assert len(ids) == 60 and not any(i.startswith("dev-") for i in ids)
    assert "bus-route-01" in ids


def test_development_templates_never_enter_the_formal_set(mixed_run, capsys):
    df = pd.read_parquet(mixed_run / "results.parquet")
    assert df.template_id.str.startswith("dev-").any()
    rows, rec = select_analysis_set(df)
    assert rec["name"] == "formal" and rec["n_templates"] == 10 and rec["development_templates"] == 10
    assert not rows.template_id.str.startswith("dev-").any() and rec["rows_dropped"] == len(df) - len(rows)
    rc, out, _ = run_stats(capsys, mixed_run, "--json", *FAST)
    m = json.loads(out)["models"][0]
    assert rc == 0 and m["n_templates"] == 10 and m["analysis_set"]["name"] == "formal"
    assert m["n_decisions"] == len(rows) and m["status"] == "confirmatory"
    rc, out, _ = run_stats(capsys, mixed_run, *FAST)
    assert "analysis set: formal (10 templates" in out and "development templates dropped" in out
    rc, out, _ = run_stats(capsys, mixed_run, "--json", "--analysis-set", "all", *FAST)
    m = json.loads(out)["models"][0]
    assert m["n_templates"] == 20 and m["status"] == "exploratory"
    assert "analysis set: all" in m["status_label"]


def test_too_few_templates_is_never_confirmatory(mixed_run):
    df = pd.read_parquet(mixed_run / "results.parquet")
    few = df[df.template_id.isin(sorted(formal_template_ids() & set(df.template_id))[:4])]
    (m,) = analyse(few, n_resamples=200, regressions=False, fit_resamples=0)
    assert m["headroom"]["passed"] and m["status"] == "exploratory"
    assert f"too few templates (4 < {MIN_TEMPLATES_CONFIRMATORY})" in m["status_label"]
    dev_only = df[df.template_id.str.startswith("dev-")]
    (m,) = analyse(dev_only, n_resamples=200, regressions=False, fit_resamples=0)
    assert m["status"] == "exploratory" and "development templates only" in m["status_label"]


def test_failed_calls_are_refused_or_dropped_with_a_count(mixed_run, tmp_path, capsys):
    d = tmp_path / "failed"
    shutil.copytree(mixed_run, d)
    df = pd.read_parquet(d / "results.parquet")
    df["error"] = df["error"].astype(object)
    df.loc[df.index[:37], "error"] = "APIConnectionError: connection refused"
    df.to_parquet(d / "results.parquet")
    rc, out, err = run_stats(capsys, d, *FAST)
    assert rc == 1 and "37 of" in err and "failed model calls" in err and "--allow-errors" in err
    assert str(d) in err and out == ""
    rc, out, err = run_stats(capsys, d, "--allow-errors", *FAST)
    assert rc == 0 and "37 dropped" in err and "37 dropped" in out
    with pytest.raises(FailedCallsError, match="37 of"):
        analyse(df, n_resamples=50, regressions=False, fit_resamples=0)
    kept, notice = check_failed_calls(df, allow_errors=True)
    assert len(kept) == len(df) - 37 and "37 dropped" in notice
    # all calls failed: nothing left is an error, not 0 % accuracy
    df["error"] = "timeout"
    df.to_parquet(d / "results.parquet")
    rc, out, err = run_stats(capsys, d, "--allow-errors", *FAST)
    assert rc == 1 and "no decisions left" in err
