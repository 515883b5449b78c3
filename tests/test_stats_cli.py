"""``crossprofile stats DIR``: text and JSON output, seeding, errors."""

import json

import pytest
from stats_cli import run_stats

from crossprofile_lib.cli import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("stats") / "run"
    assert main(["run", "--out", str(out), "--templates", "templates/dev", "--seeds", "0,1", "--budgets", "0.6",
                 "--policies", "R1,B4,Random,R1-rel,ALL,ALL:unlabeled,EMPTY",
                 "--backend-option", "inverse_temperature=3", "--backend-option", "social_proof=0.4"]) == 0
    return out


def test_text_report(run_dir, capsys):
    rc, out, _ = run_stats(capsys, run_dir, "--resamples", 300, "--fit-resamples", 30)
    assert rc == 0
    for s in ("== ledger / reference-decider(sp=0.4,irr=0,beta=3)", "not a language model", "headroom",
              "H1", "H2", "H3", "p adjusted", "paper", "Accuracy (%) per policy",
              "Label effects", "net evidence lead", "BinomialBayesMixedGLM", "GEE", "social_proof"):
        assert s in out, s


def test_json_same_seed_same_numbers_other_seed_differs(run_dir, capsys):
    args = [run_dir, "--json", "--resamples", 300, "--fit-resamples", 20, "--no-regressions"]
    rc, a, _ = run_stats(capsys, *args, "--seed", 1)
    _, b, _ = run_stats(capsys, *args, "--seed", 1)
    _, c, _ = run_stats(capsys, *args, "--seed", 2)
    assert rc == 0 and a == b
    ma, mc = json.loads(a)["models"][0], json.loads(c)["models"][0]
    # the same estimates, other resamples: with 10 templates one interval can land on the same
    # percentiles by chance, so the three hypotheses' intervals are compared together
    ha = {x["id"]: x for x in ma["contrasts"] if x["id"] in ("H1", "H2", "H3")}
    hc = {x["id"]: x for x in mc["contrasts"] if x["id"] in ("H1", "H2", "H3")}
    assert len(ha) == 3 and all(ha[h]["estimate"] == hc[h]["estimate"] for h in ha)
    assert [(ha[h]["lo"], ha[h]["hi"]) for h in sorted(ha)] != [(hc[h]["lo"], hc[h]["hi"]) for h in sorted(hc)]
    assert ma["backend"] == "ledger" and ma["model"].startswith("reference-decider")
    sp = {r["parameter"]: r for r in ma["social_proof"]["table"]}
    assert sp["social_proof"]["lo"] <= 0.4 <= sp["social_proof"]["hi"]
    assert ma["social_proof"]["rebuild"]["used"] == ma["n_decisions"]


def test_errors_name_the_file(run_dir, tmp_path, capsys):
    bad = tmp_path / "p.yaml"
    bad.write_text("contrasts:\n  - id: X\n    terms: [{weight: 1, where: {colour: red}}]\n")
    rc, _, err = run_stats(capsys, run_dir, "--prereg", bad, "--resamples", 50, "--fit-resamples", 0)
    assert rc == 2 and str(bad) in err and "terms[0].where.colour" in err
    rc, _, err = run_stats(capsys, tmp_path / "nothing")
    assert rc == 2 and str(tmp_path / "nothing") in err and "no results file" in err


def test_without_header_the_fit_uses_the_recorded_features_or_is_skipped(run_dir, tmp_path, capsys):
    import pandas as pd
    d = tmp_path / "copy"
    d.mkdir()
    df = pd.read_parquet(run_dir / "results.parquet")
    df.to_parquet(d / "results.parquet")
    # without its run.json a table cannot be verified (issue 51): refused, analysed only with --trust-edited
    rc, out, err = run_stats(capsys, d, "--resamples", 100, "--no-regressions")
    assert rc == 2 and "rule run header: there is no run.json" in err and out == ""
    rc, out, _ = run_stats(capsys, d, "--resamples", 100, "--no-regressions", "--trust-edited")
    assert rc == 0 and "skipped: no run header" not in out and "not rebuilt" in out  # option_features column
    assert out.startswith("!! UNVERIFIED")
    # a table written before the column existed needs the header to rebuild the memories
    df.drop(columns=["option_features"]).to_parquet(d / "results.parquet")
    rc, out, _ = run_stats(capsys, d, "--resamples", 100, "--no-regressions", "--no-cache", "--trust-edited")
    assert rc == 0 and "skipped: no run header" in out
