"""Issue 51, kinds 4 and 6: an edited results table is never analysed as the run's, and a malformed ``RUNS=`` folder
is refused clearly. ``stats``, ``composition`` and ``book`` verify a table against its ``run.json``
(``crossprofile_lib/run/verify.py``: rows, template hashes, the answer key recomputed from the templates, value
ranges) and refuse a mismatch naming the first bad row and the rule (exit 2); ``--trust-edited`` analyses it anyway,
marked UNVERIFIED in every output. Each edit below is one a person makes by hand; each command runs in its own process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
GUARD = 600  # a hang guard only


def _cli(args, tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSPROFILE_") and k not in ("RUNS", "BACKEND")}
    env.update(CROSSPROFILE_CACHE=str(tmp_path / "cache"), **extra)
    return subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=GUARD)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("v4tables") / "run"
    r = _cli(["run", "--out", out, "--templates", "templates/dev", "--seeds", "0,1", "--budgets", "0.6",
              "--policies", "R1,B4,ALL,EMPTY", "--variants", "PSP,SPS,PPP"], out.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def _first(df, mask) -> int:
    return int(mask.to_numpy().nonzero()[0][0])


def _flip(df):
    df.loc[3, "correct"] = not df.loc[3, "correct"]
    return df, 3


def _contradict(df):  # correct set True on a wrong answer: decision and answer key disagree
    i = _first(df, ~df["correct"] & (df["decision"] != ""))
    df.loc[i, "correct"] = True
    return df, i


def _decoy(df):
    i = _first(df, ~df["chose_decoy"] & (df["decision"] != ""))
    df.loc[i, "chose_decoy"] = True
    return df, i


def _kept(df):
    df.loc[5, "kept_support"] = 99
    return df, 5


def _template(df):
    df.loc[7, "template_id"] = "dev-no-such-template-01"
    return df, 7


def _decision(df):
    df.loc[8, "decision"] = "someone-else"
    return df, 8


def _duplicate(df):
    return pd.concat([df, df.iloc[[11]]], ignore_index=True), len(df)


def _delete(df):
    return df.drop(index=[2]).reset_index(drop=True), None


def _negative_tokens(df):
    df.loc[4, "memory_tokens"] = -3
    return df, 4


#: name -> (edit, rule named)
EDITS = {"flipped-correct": (_flip, "answer key"), "correct-contradicts-decision": (_contradict, "answer key"),
         "decoy-contradicts-decision": (_decoy, "answer key"), "kept-support-99": (_kept, "value ranges"),
         "no-such-template": (_template, "run grid"), "decision-not-an-option": (_decision, "decision"),
         "duplicated-row": (_duplicate, "duplicate row"), "deleted-row": (_delete, "row count"),
         "negative-tokens": (_negative_tokens, "value ranges")}


def _edited(run_dir, tmp_path, edit) -> tuple[Path, object]:
    d = tmp_path / "edited"
    shutil.copytree(run_dir, d)
    df, row = edit(pd.read_parquet(d / "results.parquet"))
    df.to_parquet(d / "results.parquet", index=False)
    return d, row


@pytest.mark.parametrize("case", sorted(EDITS))
def test_stats_and_composition_refuse_an_edited_table_naming_row_and_rule(case, run_dir, tmp_path):
    """Before: both exited 0 on every one of these tables."""
    edit, rule = EDITS[case]
    d, row = _edited(run_dir, tmp_path, edit)
    for cmd in (["stats", d, "--resamples", 100, "--fit-resamples", 0, "--no-regressions"], ["composition", d]):
        r = _cli(cmd, tmp_path)
        assert r.returncode == 2, (cmd[0], r.returncode, r.stderr[-2000:])
        assert f"rule {rule}" in r.stderr and f"{d}/results.parquet" in r.stderr, r.stderr[-2000:]
        if row is not None:
            assert f"row {row} (" in r.stderr, r.stderr[-2000:]
        assert "Traceback" not in r.stderr and "--trust-edited" in r.stderr and r.stdout == ""


def test_trust_edited_analyses_it_marked_in_every_output(run_dir, tmp_path):
    d, _ = _edited(run_dir, tmp_path, _flip)
    args = ["stats", d, "--resamples", 100, "--fit-resamples", 0, "--no-regressions", "--trust-edited"]
    r = _cli(args, tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("!! UNVERIFIED: analysed with --trust-edited"), r.stderr[-2000:]
    assert "rule answer key" in r.stdout and "warning: UNVERIFIED" in r.stderr
    r = _cli([*args, "--json"], tmp_path)
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["verified"] is False and "rule answer key" in doc["unverified"]
    r = _cli(["composition", d, "--trust-edited"], tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("!! UNVERIFIED") and "kept support" in r.stdout


def test_the_unedited_table_passes_and_its_output_is_unmarked(run_dir, tmp_path):
    """The near miss: the run's own table (and a copy of the folder) is analysed as before, no mark."""
    d = tmp_path / "copy"
    shutil.copytree(run_dir, d)
    for cmd in (["stats", d, "--resamples", 100, "--fit-resamples", 0, "--no-regressions"], ["composition", d]):
        r = _cli(cmd, tmp_path)
        assert r.returncode == 0 and "UNVERIFIED" not in r.stdout + r.stderr, r.stderr[-2000:]


def test_a_table_without_its_run_json_is_not_analysed_as_verified(run_dir, tmp_path):
    d = tmp_path / "bare"
    d.mkdir()
    shutil.copy(run_dir / "results.parquet", d)
    r = _cli(["composition", d], tmp_path)
    assert r.returncode == 2 and "rule run header: there is no run.json" in r.stderr, r.stderr[-2000:]


def test_a_changed_template_file_means_the_answer_key_cannot_be_recomputed(run_dir, tmp_path):
    """The recorded SHA-256 of a template is found nowhere (the run's own file was edited since): refused."""
    d = tmp_path / "moved"
    shutil.copytree(run_dir, d)
    h = json.loads((d / "run.json").read_text())
    tid = sorted(h["templates_sha256"])[0]
    h["templates_sha256"][tid] = "0" * 64
    (d / "run.json").write_text(json.dumps(h))
    r = _cli(["composition", d], tmp_path)
    assert r.returncode == 2 and "rule template hashes" in r.stderr and tid in r.stderr, r.stderr[-2000:]


# --- kind 6: the book's RUNS= folders ---------------------------------------------------------------------------

def _malformed(run_dir, tmp_path, kind) -> Path:
    d = tmp_path / f"runs-{kind}"
    if kind.startswith("hb-"):
        d.mkdir()
        f = d / "hiddenbench_run.json"
        if kind == "hb-list":
            f.write_text("[1, 2, 3]")
        elif kind == "hb-fifo":
            os.mkfifo(f)
        elif kind == "hb-protocols-string":
            f.write_text(json.dumps({"protocols": "controlled"}))
        return d
    shutil.copytree(run_dir, d)
    h = json.loads((d / "run.json").read_text())
    if kind == "rows-null":
        h["rows"] = None
    elif kind == "config-string":
        h["config"] = "templates/dev"
    elif kind == "header-list":
        h = [h]
    elif kind == "policy-files-string":
        h["policy_files"] = "mine.py"
    if kind in ("parquet-fifo", "header-fifo"):
        f = d / ("results.parquet" if kind == "parquet-fifo" else "run.json")
        f.unlink()
        os.mkfifo(f)
    else:
        (d / "run.json").write_text(json.dumps(h))
    return d


MALFORMED = ("rows-null", "config-string", "header-list", "policy-files-string", "parquet-fifo", "header-fifo",
             "hb-list", "hb-fifo", "hb-protocols-string")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
@pytest.mark.parametrize("kind", MALFORMED)
def test_book_refuses_a_malformed_runs_folder_clearly(kind, run_dir, tmp_path):
    """Before: 'internal error (a bug ...)' for rows null, a JSON list and config a string; a hang on a FIFO."""
    d = _malformed(run_dir, tmp_path, kind)
    r = _cli(["book", "--quick", "--no-html", "--out", tmp_path / "book"], tmp_path, RUNS=str(d))
    assert r.returncode == 2 and "RUNS=" in r.stderr and str(d) in r.stderr, (kind, r.returncode, r.stderr[-2000:])
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr and "Nothing was run" in r.stderr
    assert not (tmp_path / "book").exists()


def test_book_refuses_an_edited_table_and_marks_it_when_trusted(run_dir, tmp_path, monkeypatch):
    d, row = _edited(run_dir, tmp_path, _kept)
    r = _cli(["book", "--quick", "--no-html", "--out", tmp_path / "book"], tmp_path, RUNS=str(d))
    assert r.returncode == 2 and f"row {row} (" in r.stderr and "rule value ranges" in r.stderr, r.stderr[-2000:]
    assert "--trust-edited" in r.stderr and not (tmp_path / "book").exists()
    from crossprofile_lib.book.models import import_run
    from crossprofile_lib.run.verify import TRUST_ENV
    monkeypatch.setenv(TRUST_ENV, "1")  # what `crossprofile book --trust-edited` hands its chapters' kernels
    run = import_run(d)
    assert "UNVERIFIED" in run.label and "rule value ranges" in run.who
    monkeypatch.delenv(TRUST_ENV)
    assert "UNVERIFIED" not in import_run(run_dir).label
