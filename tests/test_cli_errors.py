"""Bad command lines (issue 14, item 4): each one, run through the real ``crossprofile`` console
script (or ``python -m crossprofile_lib.cli``) in its own process, exits with status 2 and a
message naming the option and the rule, prints no traceback and writes no output folder."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
from selected_cases import selected_cids

from crossprofile_lib.cli import main
from crossprofile_lib.cli.args import backend_option, option_value

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("crossprofile")
ONE_TEMPLATE = "templates/dev/dev-hospital-01.yaml"


def _cli(args, use_module: bool = False, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run the command line in a fresh process from the repository root."""
    base = [sys.executable, "-m", "crossprofile_lib.cli"] if use_module or not SCRIPT.exists() else [str(SCRIPT)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSPROFILE_")}
    return subprocess.run(base + [str(a) for a in args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _refused(p: subprocess.CompletedProcess, *fragments: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    for f in fragments:
        assert f in p.stderr, (f, p.stderr)


RUN = ["run", "--out", "{out}", "--templates", ONE_TEMPLATE, "--seeds", "0", "--budgets", "0.6"]
HB_RUN = ["hiddenbench", "run", "--out", "{out}"]

# (case id, command line with {out} (must stay unwritten), {tmp} (the case's folder) and {run} (a
#  finished tiny run), option named, words of the rule)
CASES = [
    ("seeds-not-integer", RUN + ["--seeds", "x"], "argument --seeds", "'x' is not an integer"),
    ("seeds-fraction", RUN + ["--seeds", "1.5"], "argument --seeds", "'1.5' is not an integer"),
    ("seeds-2^32", RUN + ["--seeds", "0,4294967296"], "argument --seeds", "outside 0..4294967295"),
    ("seeds-negative", RUN + ["--seeds=-1"], "argument --seeds", "outside 0..4294967295"),
    ("seeds-duplicate", RUN + ["--seeds", "0,1,0"], "argument --seeds", "seed 0 given twice"),
    ("seeds-duplicate-spelling", RUN + ["--seeds", "1,01"], "argument --seeds", "same seed twice"),
    ("seeds-empty", RUN + ["--seeds", ","], "argument --seeds", "empty list"),
    ("budgets-duplicate", RUN + ["--budgets", "0.6,0.4,0.6"], "argument --budgets", "budget 0.6 given twice"),
    ("budgets-duplicate-spelling", RUN + ["--budgets", "0.6,0.60"], "argument --budgets", "same budget twice"),
    ("budgets-duplicate-fixed", RUN + ["--budgets", "128t,t128"], "argument --budgets", "same budget twice"),
    ("budgets-negative-tokens", RUN + ["--budgets=-5t"], "argument --budgets", "at least 1 token"),
    ("budgets-negative-tokens-in-list", RUN + ["--budgets", "0.6,-5t"], "argument --budgets", "at least 1 token"),
    ("budgets-zero-tokens", RUN + ["--budgets", "0t"], "argument --budgets", "at least 1 token"),
    ("budgets-ratio-above-1", RUN + ["--budgets", "1.5"], "argument --budgets", "not in (0, 1]"),
    ("budgets-ratio-zero", RUN + ["--budgets", "0"], "argument --budgets", "not in (0, 1]"),
    ("budgets-ratio-nan", RUN + ["--budgets", "nan"], "argument --budgets", "not in (0, 1]"),
    ("budgets-not-a-budget", RUN + ["--budgets", "half"], "argument --budgets", "neither a ratio"),
    ("backend-path", RUN + ["--backend", "../x"], "argument --backend", "unknown provider '..'"),
    ("backend-unknown", RUN + ["--backend", "nosuch/model"], "argument --backend", "known providers:"),
    ("policies-b3-on-ledger", RUN + ["--policies", "R1,B3"], "argument --policies", "cannot run B3"),
    ("policies-empty", RUN + ["--policies", ""], "argument --policies", "empty list"),
    ("policies-commas-only", RUN + ["--policies", ",,"], "argument --policies", "empty list"),
    ("policies-unknown", RUN + ["--policies", "R1,NOPE"], "argument --policies", "unknown policy 'NOPE'"),
    ("policies-k0", RUN + ["--policies", "R1-k0"], "argument --policies", "keeps at least 1 claim"),
    ("policies-duplicate", RUN + ["--policies", "R1,ALL,R1"], "argument --policies", "policy R1 given twice"),
    ("variants-unknown", RUN + ["--variants", "PSP,XYZ"], "argument --variants", "unknown variant(s) XYZ"),
    ("variants-empty", RUN + ["--variants", ""], "argument --variants", "empty list"),
    ("templates-missing", RUN + ["--templates", "templates/no-such-folder"], "argument --templates",
     "no-such-folder"),
    ("templates-empty-folder", RUN + ["--templates", "{tmp}/empty"], "argument --templates", "{tmp}/empty"),
    ("agents-one", RUN + ["--agents", "1"], "argument --agents", "below the minimum 2"),
    ("options-not-integer", RUN + ["--options", "three"], "argument --options", "not an integer"),
    ("backend-option-no-value", RUN + ["--backend-option", "social_proof"], "argument --backend-option",
     "is not KEY=VALUE"),
    ("backend-option-unknown-key", RUN + ["--policies", "R1", "--backend-option", "no_such_option=1"],
     "argument --backend-option no_such_option", "it takes: social_proof"),
    ("model-option-on-ledger", RUN + ["--concurrency", "4"], "argument --concurrency", "does not take"),
    ("tokenizer-unknown", RUN + ["--policies", "R1", "--tokenizer", "bogus"], "unknown tokenizer 'bogus'",
     "use qwen2.5 or llama-3.1"),
    ("options-beyond-the-templates", RUN + ["--policies", "R1", "--options", "4"], "field 'options'",
     "expected 4 options"),
    ("concurrency-zero", RUN + ["--concurrency", "0"], "argument --concurrency", "below the minimum 1"),
    ("timeout-negative", RUN + ["--timeout=-3"], "argument --timeout", "above 0"),
    ("max-retries-negative", RUN + ["--max-retries=-1"], "argument --max-retries", "below the minimum 0"),
    # --out is checked first: the default grid (all templates) would otherwise run before the write fails
    ("out-is-a-file", ["run", "--out", "{tmp}/file"], "argument --out", "is a file, not a folder"),
    ("out-under-a-file", ["run", "--out", "{tmp}/file/sub"], "argument --out", "is a file, not a folder"),
    ("out-probe-leaves-nothing", ["run", "--out", "{tmp}/existing", "--seeds", "x"], "argument --seeds", ""),
    ("python-m", ["-m"] + RUN + ["--seeds", "x"], "argument --seeds", "'x' is not an integer"),
    ("validate-empty-folder", ["validate", "{tmp}/empty"], "argument paths", "{tmp}/empty"),
    ("composition-empty-table", ["composition", "{tmp}/empty-run"], "argument dir", "no rows"),
    ("composition-budget-absent", ["composition", "{run}", "--budget", "0.5"], "argument --budget",
     "budgets there: 0.6"),
    ("stats-resamples-zero", ["stats", "{run}", "--resamples", "0"], "argument --resamples", "below the minimum 1"),
    ("stats-seed-2^32", ["stats", "{run}", "--seed", "4294967296"], "argument --seed", "outside 0..4294967295"),
    ("stats-fit-resamples-negative", ["stats", "{run}", "--fit-resamples=-1"], "argument --fit-resamples",
     "below the minimum 0"),
    ("hiddenbench-validate-empty-list", ["hiddenbench", "validate", "{tmp}/empty.json"], "argument path",
     "empty list"),
    ("hb-seeds", HB_RUN + ["--seeds", "1.5"], "argument --seeds", "not an integer"),
    ("hb-policies-empty", HB_RUN + ["--policies", ""], "argument --policies", "empty list"),
    ("hb-policies-unknown", HB_RUN + ["--policies", "NOPE"], "argument --policies", "unknown policy 'NOPE'"),
    ("hb-budgets-negative", HB_RUN + ["--budgets=-5t"], "argument --budgets", "at least 1 token"),
    ("hb-ablations-unknown", HB_RUN + ["--ablations", "nope"], "argument --ablations", "unknown ablation 'nope'"),
    ("hb-tasks-empty", HB_RUN + ["--tasks", ","], "argument --tasks", "empty list"),
    ("hb-limit-zero", HB_RUN + ["--limit", "0"], "argument --limit", "below the minimum 1"),
    ("hb-backend-path", HB_RUN + ["--backend", "../x"], "argument --backend", "unknown provider"),
    ("hb-backend-option-unknown-key", HB_RUN + ["--backend-option", "no_such_option=1"],
     "argument --backend-option no_such_option", "does not take this option"),
    ("hb-natural-on-ledger", HB_RUN + ["--protocol", "natural"], "argument --protocol",
     "needs a model backend with chat"),
    ("hb-data-missing", HB_RUN + ["--hiddenbench", "no-such.json"], "argument --hiddenbench", "does not exist"),
    # issue 23: strict values, options given twice, names the file system cannot hold, broken option files
    ("backend-ledger-with-a-model", RUN + ["--backend", "ledger/x"], "argument --backend", "takes no model name"),
    ("seeds-given-twice", RUN + ["--seeds", "1"], "argument --seeds", "given twice (--seeds 0 and --seeds 1)"),
    ("budgets-given-twice", RUN + ["--budgets", "0.4"], "argument --budgets", "given twice"),
    ("out-given-twice", RUN + ["--out", "{tmp}/other"], "argument --out", "given twice"),
    ("templates-given-twice", RUN + ["--templates", ONE_TEMPLATE], "argument --templates", "given twice"),
    ("seeds-arabic-indic-digit", ["run", "--out", "{out}", "--seeds", "\u0661"], "argument --seeds", "not an integer"),
    ("budgets-price-to-zero-tokens", ["run", "--out", "{out}", "--templates", ONE_TEMPLATE, "--seeds", "0",
                                      "--budgets", "1e-9"], "budget 1e-09", "prices to 0 tokens"),
    ("budgets-fixed-huge", RUN[:-2] + ["--budgets", "99999999999999999999t"], "argument --budgets", "at most"),
    ("ledger-inverse-temperature-negative", RUN + ["--backend-option", "inverse_temperature=-1"],
     "option inverse_temperature=-1", "at least 0"),
    ("ledger-social-proof-boolean", RUN + ["--backend-option", "social_proof=true"], "option social_proof=True",
     "not bool"),
    ("ledger-social-proof-nan", RUN + ["--backend-option", "social_proof=nan"], "option social_proof=nan", "finite"),
    ("ledger-irrelevant-weight-inf", RUN + ["--backend-option", "irrelevant_weight=inf"], "option irrelevant_weight",
     "finite"),
    ("http-timeout-option-negative", RUN + ["--backend", "openai/m", "--base-url", "http://127.0.0.1:9/v1",
                                            "--backend-option", "timeout=-5"], "option timeout=-5", "above 0"),
    ("http-base-url-invalid-ipv6", RUN + ["--backend", "openai/m", "--base-url", "http://[::1/v1"], "base URL",
     "not a valid URL"),
    ("http-broken-chat-template", RUN + ["--backend", "openai/m", "--base-url", "http://127.0.0.1:9/v1",
                                         "--decision-mode", "score", "--chat-template", "{tmp}/bad.jinja"],
     "chat_template", "not a valid Jinja template"),
    ("http-chat-template-folder", RUN + ["--backend", "openai/m", "--base-url", "http://127.0.0.1:9/v1",
                                         "--decision-mode", "score", "--chat-template", "{tmp}/empty"],
     "chat_template", "is a folder"),
    ("out-name-too-long", ["run", "--out", "{tmp}/" + "n" * 300], "argument --out", "255 bytes"),
    ("out-symlink-loop", ["run", "--out", "{tmp}/loop"], "argument --out", "symbolic-link loop"),
    ("stats-resamples-huge", ["stats", "{run}", "--resamples", "10000000000"], "argument --resamples",
     "above the maximum"),
    ("stats-prereg-a-folder", ["stats", "{run}", "--prereg", "{tmp}/empty"], "argument --prereg", "is a folder"),
    ("stats-prereg-dev-zero", ["stats", "{run}", "--prereg", "/dev/zero"], "argument --prereg",
     "not a regular file"),
    ("fit-paper-cache-a-file", ["fit-paper", "--cache", "{tmp}/file"], "argument --cache", "is a file"),
    ("cache-export-over-an-existing-file", ["cache", "export", "{tmp}/empty", "{tmp}/file"], "argument out", "--overwrite"),
    ("hb-batch-tasks-huge", HB_RUN + ["--batch-tasks", "100000"], "argument --batch-tasks", "above the maximum"),
]


def _prepare(case_dir: Path, tiny_run: Path) -> None:
    (case_dir / "empty").mkdir()
    (case_dir / "file").write_text("keep me")
    (case_dir / "existing").mkdir()
    (case_dir / "bad.jinja").write_text("{% for m in messages %}{{ m.content }")
    os.symlink(case_dir / "loop", case_dir / "loop")
    (case_dir / "empty.json").write_text(json.dumps([]))
    empty_run = case_dir / "empty-run"
    empty_run.mkdir()
    pd.read_parquet(tiny_run / "results.parquet").iloc[:0].to_parquet(empty_run / "results.parquet")
    shutil.copy(tiny_run / "run.json", empty_run / "run.json")


def _fill(arg: str, case_dir: Path, tiny_run: Path) -> str:
    return arg.format(out=case_dir / "out", tmp=case_dir, run=tiny_run)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "run"
    assert main(["run", "--out", str(out), "--templates", ONE_TEMPLATE, "--seeds", "0", "--budgets", "0.6",
                 "--policies", "R1,ALL"]) == 0
    return out


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory, tiny_run):
    """Every selected case in its own process, run concurrently (each one pays the interpreter's start-up)."""
    jobs = {}
    wanted = selected_cids(request)
    for cid, argv, _, _ in CASES:
        if cid not in wanted:
            continue
        case_dir = tmp_path_factory.mktemp(cid.replace("^", ""))
        _prepare(case_dir, tiny_run)
        use_module = argv[0] == "-m"
        jobs[cid] = (case_dir, [_fill(a, case_dir, tiny_run) for a in argv[use_module:]], use_module)
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {cid: pool.submit(_cli, args, use_module) for cid, (_, args, use_module) in jobs.items()}
        return {cid: (jobs[cid][0], f.result()) for cid, f in futures.items()}


#: the cases test_wing_cli.py also runs in process, through ``main`` (the cli wing's mutation selection deselects
#: test_bad_command_line and keeps those: a process per case took minutes per mutant); not ``python -m``
IN_PROCESS = [c for c in CASES if c[1][0] != "-m"]
ONLY_A_PROCESS = [c for c in CASES if c[1][0] == "-m"]


def _check_refused(outcomes, tiny_run, cid, option, rule):
    case_dir, p = outcomes[cid]
    _refused(p, option, _fill(rule, case_dir, tiny_run))
    assert not (case_dir / "out").exists(), "a refused command line wrote its output folder"
    assert (case_dir / "file").read_text() == "keep me"
    assert list((case_dir / "existing").iterdir()) == [], "the --out probe left a file behind"
    assert list((case_dir / "empty").iterdir()) == []


@pytest.mark.parametrize("cid, option, rule", [(c[0], c[2], c[3]) for c in IN_PROCESS], ids=[c[0] for c in IN_PROCESS])
def test_bad_command_line(outcomes, tiny_run, cid, option, rule):
    _check_refused(outcomes, tiny_run, cid, option, rule)


@pytest.mark.parametrize("cid, option, rule", [(c[0], c[2], c[3]) for c in ONLY_A_PROCESS],
                         ids=[c[0] for c in ONLY_A_PROCESS])
def test_python_m_refuses_a_bad_command_line(outcomes, tiny_run, cid, option, rule):
    _check_refused(outcomes, tiny_run, cid, option, rule)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_out_in_a_folder_even_root_cannot_write():
    _refused(_cli(["run", "--out", "/proc/crossprofile-out"]), "argument --out", "'/proc' is not writable")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_out_read_only_folder_or_parent_is_refused_first(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        _refused(_cli(["run", "--out", ro]), "argument --out", "is not writable")
        _refused(_cli(["run", "--out", ro / "new" / "deeper"]), "argument --out", "is not writable")
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(stat.S_IRWXU)


def test_probing_out_leaves_nothing_behind(tmp_path):
    """A writable --out passes the probe; a later bad option still leaves the folder untouched."""
    out = tmp_path / "exists"
    out.mkdir()
    _refused(_cli(["run", "--out", out, "--seeds", "x"]), "argument --seeds")
    assert list(out.iterdir()) == []


def test_in_process_main_returns_the_exit_status(tmp_path, capsys):
    assert main(["run", "--out", str(tmp_path / "o"), "--seeds", "x"]) == 2
    assert "argument --seeds" in capsys.readouterr().err
    assert main(["--help"]) == 0


@pytest.mark.parametrize("text, value", [("8", 8), ("-3", -3), ("-0.5", -0.5), ("1e-3", 1e-3), ("2.", 2.0),
                                         ("inf", float("inf")), ("true", True), ("False", False),
                                         ("chatml", "chatml"), ("gguf:/x/y.gguf", "gguf:/x/y.gguf")])
def test_backend_option_values_are_typed_one_way(text, value):
    v = option_value(text)
    assert v == value and type(v) is type(value)


def test_backend_option_keys_and_secrets():
    assert backend_option("social-proof=-0.5") == ("social_proof", -0.5)
    assert backend_option("concurrency=8") == ("concurrency", 8)
    assert backend_option("api_key=12345") == ("api_key", "12345")  # a secret stays the string given
    assert backend_option("api-key=1e5") == ("api_key", "1e5")


def test_a_command_builds_only_its_own_options():
    """Given the command line, the parser gives options only to the command it names (the others get their line
    in ``--help``): a refused ``run`` option is reported without importing pandas, the statistics or HiddenBench,
    and the command list of ``crossprofile --help`` is the full parser's, line for line."""
    from crossprofile_lib.cli import build_parser
    code = ("import sys; from crossprofile_lib.cli import main; rc = main(['run', '--seeds', 'x']); "
            "print(rc, sorted(m for m in ('pandas', 'crossprofile_lib.stats', 'crossprofile_lib.hiddenbench', "
            "'crossprofile_lib.backends') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.stdout.split("\n")[0] == "2 []", (p.stdout, p.stderr)
    assert "argument --seeds" in p.stderr
    full, lazy = build_parser().format_help(), build_parser(["--help"]).format_help()
    assert lazy == full and "fit-paper" in lazy and "tokenizers" in lazy
    # the named command is whole: its own --help lists the options the full parser gives it
    def options(parser, cmd):
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[cmd]
        return sorted(o for a in sub._actions for o in a.option_strings)
    for cmd in ("run", "stats", "hiddenbench", "fit-paper", "book"):
        assert options(build_parser([cmd, "-h"]), cmd) == options(build_parser(), cmd), cmd


def test_help_is_plain_text_not_sphinx_markup(capsys):
    from crossprofile_lib.cli.args import plain
    assert plain("see :func:`~crossprofile_lib.book.build.build` and :mod:`.args`") == "see build and args"
    assert plain(":func:`crossprofile_lib.book.build.build` (``BUDGETS=0.4``)") == \
        "crossprofile_lib.book.build.build (BUDGETS=0.4)"
    for argv in (["--help"], ["book", "--help"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "usage: crossprofile" in out and "``" not in out and ":func:" not in out and ":mod:" not in out
