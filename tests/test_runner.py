import json

import pandas as pd
import pytest

from crossprofile_lib.cli import main
from crossprofile_lib.run.results import REQUIRED_COLUMNS, ResultsError, read_results
from crossprofile_lib.run.runner import RunConfig, run_grid, run_to_dir


@pytest.fixture(scope="module")
def grid(dev_templates):
    return run_grid(RunConfig(templates=["templates/dev"]), templates=dev_templates)


def test_columns_and_one_row_per_decision(grid):
    assert set(REQUIRED_COLUMNS) <= set(grid.columns)
    key = ["template_id", "variant", "seed", "policy", "budget_label"]
    assert not grid.duplicated(key).any()
    assert (grid.backend == "ledger").all() and grid.model.str.startswith("reference-decider").all()
    assert (grid.tokenizer == "offline-bpe-approx-v1").all()


def test_r1_composition_in_psp_at_r06_matches_the_paper(grid):
    d = grid[(grid.variant == "PSP") & (grid.policy == "R1") & (grid.budget_label == "0.6")]
    m = d[["kept_support", "kept_decoy", "kept_irrelevant"]].mean()
    assert abs(m.kept_support - 5) <= 0.05 and abs(m.kept_decoy) <= 0.05 and abs(m.kept_irrelevant - 4) <= 0.05


def test_all_memory_net_lead_two_and_always_correct(grid):
    a = grid[grid.policy == "ALL"]
    assert (a.net_lead == 2).all() and a.correct.all()
    e = grid[grid.policy == "EMPTY"]
    assert 0.2 < e.correct.mean() < 0.47 and (e.n_kept == 0).all()


def test_budgets_respected_and_identical_across_variants(grid):
    b = grid[grid.selection == "budget"]
    assert (b.memory_tokens <= b.budget_tokens).all()
    per = b.groupby(["template_id", "budget_label"]).budget_tokens.nunique()
    assert (per == 1).all()


def test_private_and_shared_only_reference_memories(grid):
    p = grid[(grid.policy == "private-only") & (grid.variant == "PSP")]
    assert (p.kept_decoy == 0).all() and (p.kept_support == 5).all()
    s = grid[(grid.policy == "shared-only") & (grid.variant == "PSP")]
    assert (s.kept_decoy == 3).all() and (s.kept_support == 0).all() and (~s.correct).all()


def test_classic_and_mirror_cells_reverse_r1_and_b4(grid):
    g = grid[grid.budget_label == "0.6"]
    acc = g.groupby(["policy", "cell"]).correct.mean()
    assert acc["R1", "classic"] > 0.9 and acc["B4", "classic"] < 0.5
    assert acc["B4", "mirror"] > 0.9 and acc["R1", "mirror"] < 0.5


def test_same_seed_identical_table_other_seed_differs(dev_templates, tmp_path):
    cfg = RunConfig(templates=["templates/dev"], seeds=[0], budgets=["0.6"], policies=["R1", "Random", "M1"])
    a, _ = run_to_dir(cfg, tmp_path / "a")
    b, _ = run_to_dir(cfg, tmp_path / "b")
    pd.testing.assert_frame_equal(read_results(tmp_path / "a"), read_results(tmp_path / "b"))
    assert (tmp_path / "a/results.parquet").read_bytes() == (tmp_path / "b/results.parquet").read_bytes()
    c = run_grid(RunConfig(templates=["templates/dev"], seeds=[1], budgets=["0.6"], policies=["R1", "Random", "M1"]),
                 templates=dev_templates)
    assert (a.option_order != c.option_order).any() and (a.memory_sha != c.memory_sha).any()


def test_run_header(tmp_path):
    cfg = RunConfig(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0], budgets=["0.6"], policies=["R1"])
    run_to_dir(cfg, tmp_path)
    h = json.loads((tmp_path / "run.json").read_text())
    assert h["backend"] == "ledger" and h["package_version"] and "git_commit" in h
    assert h["config"]["policies"] == ["R1"] and h["rows"] == 8


def test_cli_run_and_composition(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--out", str(out), "--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0,1",
                 "--budgets", "0.6", "--policies", "R1,B4,ALL"]) == 0
    assert main(["composition", str(out)]) == 0
    text = capsys.readouterr().out
    assert "R1" in text and "PSP" in text
    df = read_results(out)
    assert len(df) == 8 * 2 * 3


def test_cli_validate_exit_codes(capsys):
    assert main(["validate", "templates/dev"]) == 0
    bad = next(p for p in __import__("glob").glob("tests/broken_templates/*-hint-best.yaml"))
    assert main(["validate", bad]) == 1
    err = capsys.readouterr().err
    assert bad in err and "facts[1].text" in err and "rule 5" in err


def test_ledger_parameters_via_cli(tmp_path):
    out = tmp_path / "sp"
    assert main(["run", "--out", str(out), "--templates", "templates/dev", "--seeds", "0", "--budgets", "0.6",
                 "--policies", "ALL,ALL:unlabeled", "--backend-option", "social_proof=0.5"]) == 0
    df = read_results(out)
    assert df.model.iloc[0] == "reference-decider(sp=0.5,irr=0,beta=inf)"
    classic = df[df.variant.str.startswith("PS")]
    acc = classic.groupby("policy").correct.mean()
    assert acc["ALL:unlabeled"] > acc["ALL"]  # removing labels helps when the ledger weighs labels


def test_broken_results_file_named(tmp_path):
    (tmp_path / "results.parquet").write_text("not parquet")
    with pytest.raises(ResultsError, match="results.parquet"):
        read_results(tmp_path)
    df = pd.DataFrame({"template_id": ["x"]})
    df.to_parquet(tmp_path / "results.parquet")
    with pytest.raises(ResultsError, match="missing column"):
        read_results(tmp_path)
