"""Issue 37, held-out bad inputs: a corpus of bad command lines, bad files and bad Make variables for
every command (run, validate, composition, hiddenbench validate/run, stats, cache, tokenizers,
fit-paper, book with RUNS= and POLICY_FILES=), none of them in tests/test_cli_errors.py.

Each case runs through the real ``crossprofile`` console script in its own process and must exit 2 (a
bad option or file, refused before any work) or 1 (a run-time refusal), print no traceback, and name
the option, file or field and the rule (the fragments listed with it). Nothing runs against a network:
the HTTP cases name a closed port or are refused before any connection.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from selected_cases import selected_cids

from crossprofile_lib.cli import main

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("crossprofile")
ONE = "templates/dev/dev-hospital-01.yaml"
RUN = ["run", "--out", "{out}", "--templates", ONE, "--seeds", "0", "--budgets", "0.6", "--policies", "R1"]
HTTP = RUN + ["--backend", "openai/m", "--base-url", "http://127.0.0.1:9/v1", "--tokenizer", "offline"]
HB = ["hiddenbench", "run", "--out", "{out}", "--seeds", "0", "--limit", "1"]
HBV = ["hiddenbench", "validate"]
LOOP = "from crossprofile_lib.policies import Policy\nwhile True:\n    pass\n"
TASK = {"id": 1, "name": "t", "description": "Pick one.", "shared_information": ["s1"],
        "hidden_information": ["h1", "h2", "h3"], "possible_answers": ["A1", "B1", "C1"], "correct_answer": "B1"}


def _hb(**change) -> str:
    rec = dict(TASK)
    for k, v in change.items():
        if v is None:
            rec.pop(k)
        else:
            rec[k] = v
    return json.dumps([rec])


#: the case's folder {tmp}: file name -> content (str or bytes)
FILES = {
    "bad.yaml": "id: [unclosed\n",
    "notemplate.yaml": "id: x\nversion: 1\n",
    "binary.yaml": b"\x00\xff\xfe\x00garbage",
    "loop.py": LOOP,
    "crash.py": "raise RuntimeError('boom at import')\n",
    "garbage.sqlite": "this is not a database",
    "empty.sqlite": "",
    "bad-tokenizer.json": "{not json",
    "hb-notarray.json": json.dumps({"id": 1}),
    "hb-truncated.json": _hb()[:40],
    "hb-dupkey.json": _hb()[:-2] + ', "correct_answer": "C1"}]',
    "hb-wrongcorrect.json": _hb(correct_answer="D1"),
    "hb-one-hidden.json": _hb(hidden_information=["only one"]),
    "hb-nan.json": _hb()[:-2] + ', "score": NaN}]',
    "hb-latin1.json": json.dumps([dict(TASK, description="caf\u00e9")], ensure_ascii=False).encode("latin-1"),
    "hb-zero-width.json": _hb(description="Pick\u200b one."),
    "hb-deep.json": "[" * 100 + "]" * 100,
    "hb-id-bool.json": _hb(id=True),
    "hb-answers-11.json": _hb(possible_answers=[f"O{i}" for i in range(11)], correct_answer="O1"),
    "hb-answers-same.json": _hb(possible_answers=["A1", "a1 ", "C1"], correct_answer="C1"),
    "hb-no-description.json": _hb(description=None),
    "hb-hidden-blank.json": _hb(hidden_information=["h1", "   ", "h3"]),
    "hb-duplicate-id.json": json.dumps([TASK, TASK]),
    "hb-empty.json": "",
    "prereg-unknown.yaml": "contrasts:\n  - {name: x, expr: 'NOPE - R1', family: a}\n",
    "file": "keep me",
}


# (case id, argv with {out} (never written), {tmp}, {run} (a finished tiny run), {cache} (a sound cache
#  file); extra environment; fragments the message must hold)
CASES = [
    # --- run: options --------------------------------------------------------------------------
    ("run-agents-65", RUN + ["--agents", "65"], {}, ["argument --agents", "above the maximum 64"]),
    ("run-options-11", RUN + ["--options", "11"], {}, ["argument --options", "above the maximum 10"]),
    ("run-protocol-unknown", RUN + ["--protocol", "chatty"], {}, ["argument --protocol", "invalid choice"]),
    ("run-opinion-rate-above-1", RUN + ["--protocol", "messy", "--opinion-rate", "1.5"], {},
     ["argument --opinion-rate", "not in [0, 1]"]),
    ("run-extraction-without-messy", RUN + ["--extraction", "fuzzy"], {}, ["--extraction", "needs --protocol messy"]),
    ("run-rate-zero", RUN + ["--dry-run", "--rate", "0"], {}, ["argument --rate", "above 0"]),
    ("run-preset-unknown", RUN + ["--preset", "huge"], {}, ["argument --preset", "invalid choice"]),
    ("run-unknown-flag", RUN + ["--sedes", "0"], {}, ["unrecognized arguments", "--sedes"]),
    ("run-no-out", ["run", "--templates", ONE], {}, ["--out", "required"]),
    ("run-budget-fraction-text", RUN[:-4] + ["--budgets", "1/2"], {}, ["argument --budgets", "neither a ratio"]),
    ("run-seeds-blank", RUN[:5] + ["--seeds", " "], {}, ["argument --seeds", "empty list"]),
    ("run-backend-option-no-key", RUN + ["--backend-option", "=1"], {}, ["argument --backend-option", "KEY=VALUE"]),
    ("run-variants-lowercase", RUN + ["--variants", "psp"], {}, ["argument --variants", "psp"]),
    # --- run: templates ---------------------------------------------------------------------------
    ("run-template-bad-yaml", ["run", "--out", "{out}", "--templates", "{tmp}/bad.yaml"], {},
     ["{tmp}/bad.yaml", "YAML"]),
    ("run-template-missing-fields", ["run", "--out", "{out}", "--templates", "{tmp}/notemplate.yaml"], {},
     ["{tmp}/notemplate.yaml", "field"]),
    ("run-template-binary", ["run", "--out", "{out}", "--templates", "{tmp}/binary.yaml"], {},
     ["{tmp}/binary.yaml", "UTF-8"]),
    # --- run: HTTP backends, refused before any connection ----------------------------------------
    ("http-no-model", RUN + ["--backend", "openai/", "--base-url", "http://127.0.0.1:9/v1"], {},
     ["argument --backend", "'provider/model'"]),
    ("http-base-url-ftp", RUN + ["--backend", "openai/m", "--base-url", "ftp://127.0.0.1/v1"], {},
     ["base URL", "http:// or https://"]),
    ("http-base-url-port-text", RUN + ["--backend", "openai/m", "--base-url", "http://127.0.0.1:port/v1"], {},
     ["base URL", "port"]),
    ("http-request-field-model", HTTP + ["--request-field", "model=x"], {}, ["argument --request-field", "set by the suite"]),
    ("http-request-field-no-value", HTTP + ["--request-field", "top_k"], {}, ["argument --request-field", "KEY=VALUE"]),
    ("http-max-tokens-zero", HTTP + ["--max-tokens", "0"], {}, ["argument --max-tokens", "below the minimum 1"]),
    ("http-timeout-over-a-day", HTTP + ["--timeout", "100000"], {}, ["argument --timeout", "more than a day"]),
    ("http-tokenize-timeout-zero", HTTP + ["--tokenize-timeout", "0"], {}, ["argument --tokenize-timeout", "above 0"]),
    ("http-concurrency-text", HTTP + ["--backend-option", "concurrency=lots"], {},
     ["concurrency", "'auto' or an integer"]),
    ("http-stop-on-refusal-negative", HTTP + ["--backend-option", "stop_on_refusal=-1"], {}, ["stop_on_refusal", "at least 0"]),
    ("http-max-concurrency-zero", HTTP + ["--backend-option", "max_concurrency=0"], {}, ["max_concurrency", "at least 1"]),
    ("http-sampling-unknown", HTTP + ["--sampling", "greedy"], {}, ["argument --sampling", "invalid choice"]),
    ("http-score-without-template", HTTP + ["--decision-mode", "score"], {}, ["decision_mode 'score'", "chat_template"]),
    ("http-chat-template-missing", HTTP + ["--decision-mode", "score", "--chat-template", "{tmp}/nope.jinja"], {},
     ["chat_template", "{tmp}/nope.jinja"]),
    ("http-cache-not-sqlite", HTTP + ["--cache", "{tmp}/garbage.sqlite"], {}, ["{tmp}/garbage.sqlite", "not a SQLite"]),
    ("http-cache-empty-file", HTTP + ["--cache", "{tmp}/empty.sqlite"], {}, ["{tmp}/empty.sqlite", "0 bytes"]),
    ("http-tokenizer-missing-gguf", HTTP[:-2] + ["--tokenizer", "gguf:{tmp}/none.gguf"], {}, ["{tmp}/none.gguf"]),
    ("http-tokenizer-bad-json", HTTP[:-2] + ["--tokenizer", "{tmp}/bad-tokenizer.json"], {}, ["{tmp}/bad-tokenizer.json"]),
    ("http-circuit-breaker-negative", HTTP + ["--backend-option", "circuit_breaker=-1"], {}, ["circuit_breaker", "at least 0"]),
    # --- policy files -----------------------------------------------------------------------------
    ("policy-file-loops", RUN + ["--policy-file", "{tmp}/loop.py", "--policy-timeout", "1"], {},
     ["{tmp}/loop.py: time:", "time limit of 1 s"]),
    ("policy-file-crashes", RUN + ["--policy-file", "{tmp}/crash.py"], {}, ["{tmp}/crash.py: import:", "boom at import"]),
    ("policy-timeout-text", RUN + ["--policy-file", "{tmp}/loop.py", "--policy-timeout", "soon"], {},
     ["argument --policy-timeout", "not a number of seconds"]),
    ("policy-timeout-negative", RUN + ["--policy-timeout=-1"], {}, ["argument --policy-timeout", "[0, 86400]"]),
    ("policy-timeout-env-bad", RUN + ["--policy-file", "{tmp}/loop.py"], {"CROSSPROFILE_POLICY_TIMEOUT": "x"},
     ["CROSSPROFILE_POLICY_TIMEOUT=x", "number of seconds"]),
    # --- validate, composition ----------------------------------------------------------------------
    ("validate-bad-yaml", ["validate", "{tmp}/bad.yaml"], {}, ["{tmp}/bad.yaml", "YAML"]),
    ("validate-missing", ["validate", "{tmp}/missing.yaml"], {}, ["argument paths", "{tmp}/missing.yaml"]),
    ("validate-dev-zero", ["validate", "/dev/zero"], {}, ["/dev/zero", "end in '.yaml'"]),
    ("composition-missing", ["composition", "{tmp}/no-run"], {}, ["{tmp}/no-run", "no results file"]),
    ("composition-garbage-table", ["composition", "{tmp}/garbage-run"], {}, ["{tmp}/garbage-run", "results.parquet"]),
    ("composition-budget-2", ["composition", "{run}", "--budget", "2"], {}, ["argument --budget", "2"]),
    # --- hiddenbench validate ---------------------------------------------------------------------
    ("hbv-not-array", HBV + ["{tmp}/hb-notarray.json"], {}, ["{tmp}/hb-notarray.json", "JSON array"]),
    ("hbv-truncated", HBV + ["{tmp}/hb-truncated.json"], {}, ["{tmp}/hb-truncated.json", "json"]),
    ("hbv-duplicate-key", HBV + ["{tmp}/hb-dupkey.json"], {}, ["{tmp}/hb-dupkey.json", "correct_answer", "duplicate"]),
    ("hbv-wrong-correct", HBV + ["{tmp}/hb-wrongcorrect.json"], {}, ["field 'correct_answer'", "not one of possible_answers"]),
    ("hbv-one-hidden", HBV + ["{tmp}/hb-one-hidden.json"], {}, ["field 'hidden_information'", "at least 2"]),
    ("hbv-nan", HBV + ["{tmp}/hb-nan.json"], {}, ["{tmp}/hb-nan.json", "NaN"]),
    ("hbv-latin1", HBV + ["{tmp}/hb-latin1.json"], {}, ["{tmp}/hb-latin1.json", "UTF-8"]),
    ("hbv-zero-width", HBV + ["{tmp}/hb-zero-width.json"], {}, ["description", "control"]),
    ("hbv-too-deep", HBV + ["{tmp}/hb-deep.json"], {}, ["{tmp}/hb-deep.json", "nested"]),
    ("hbv-id-bool", HBV + ["{tmp}/hb-id-bool.json"], {}, ["field 'id'", "integer or a non-empty string"]),
    ("hbv-11-answers", HBV + ["{tmp}/hb-answers-11.json"], {}, ["field 'possible_answers'", "2 to 10"]),
    ("hbv-answers-same", HBV + ["{tmp}/hb-answers-same.json"], {}, ["field 'possible_answers'", "distinct"]),
    ("hbv-no-description", HBV + ["{tmp}/hb-no-description.json"], {}, ["field 'description'", "missing"]),
    ("hbv-hidden-blank", HBV + ["{tmp}/hb-hidden-blank.json"], {}, ["hidden_information[1]", "non-empty string"]),
    ("hbv-duplicate-id", HBV + ["{tmp}/hb-duplicate-id.json"], {}, ["field 'id'", "duplicate id"]),
    ("hbv-empty-file", HBV + ["{tmp}/hb-empty.json"], {}, ["{tmp}/hb-empty.json", "empty"]),
    ("hbv-folder", HBV + ["{tmp}"], {}, ["{tmp}", "must be a regular file"]),
    # --- hiddenbench run ----------------------------------------------------------------------------
    ("hb-not-array", HB + ["--hiddenbench", "{tmp}/hb-notarray.json"], {}, ["{tmp}/hb-notarray.json", "JSON array"]),
    ("hb-all-malformed", HB + ["--hiddenbench", "{tmp}/hb-wrongcorrect.json"], {},
     ["{tmp}/hb-wrongcorrect.json", "no valid task", "correct_answer"]),
    ("hb-env-path-truncated", HB, {"HIDDENBENCH_PATH": "{tmp}/hb-truncated.json"}, ["{tmp}/hb-truncated.json", "json"]),
    ("hb-env-path-missing", HB, {"HIDDENBENCH_PATH": "{tmp}/none.json"}, ["HIDDENBENCH_PATH", "{tmp}/none.json"]),
    ("hb-unknown-task", HB[:-2] + ["--tasks", "nosuch"], {}, ["--tasks", "nosuch"]),
    ("hb-max-words-zero", HB + ["--max-words", "0"], {}, ["argument --max-words", "below the minimum 1"]),
    ("hb-both-on-ledger", HB + ["--protocol", "both"], {}, ["argument --protocol", "needs a model backend"]),
    ("hb-limit-text", HB[:-2] + ["--limit", "one"], {}, ["argument --limit", "not an integer"]),
    # --- stats -------------------------------------------------------------------------------------
    ("stats-missing", ["stats", "{tmp}/no-run"], {}, ["{tmp}/no-run"]),
    ("stats-garbage-table", ["stats", "{tmp}/garbage-run"], {}, ["{tmp}/garbage-run", "results.parquet"]),
    ("stats-prereg-bad-yaml", ["stats", "{run}", "--prereg", "{tmp}/bad.yaml"], {}, ["{tmp}/bad.yaml"]),
    ("stats-prereg-unknown-policy", ["stats", "{run}", "--prereg", "{tmp}/prereg-unknown.yaml"], {},
     ["{tmp}/prereg-unknown.yaml", "contrasts[0]", "unknown key"]),
    ("stats-prereg-extra-missing", ["stats", "{run}", "--prereg-extra", "{tmp}/none.yaml"], {},
     ["--prereg-extra", "{tmp}/none.yaml"]),
    ("stats-analysis-set-unknown", ["stats", "{run}", "--analysis-set", "some"], {},
     ["argument --analysis-set", "invalid choice"]),
    ("stats-templates-missing", ["stats", "{run}", "--templates", "{tmp}/none"], {}, ["--templates", "{tmp}/none"]),
    ("stats-run-json-garbage", ["stats", "{tmp}/bad-header-run"], {}, ["{tmp}/bad-header-run/run.json", "not valid JSON"]),
    # --- cache ---------------------------------------------------------------------------------------
    ("cache-check-garbage", ["cache", "check", "{tmp}/garbage.sqlite"], {}, ["{tmp}/garbage.sqlite", "not a SQLite"]),
    ("cache-vacuum-garbage", ["cache", "vacuum", "{tmp}/garbage.sqlite"], {}, ["{tmp}/garbage.sqlite", "not a SQLite"]),
    ("cache-export-garbage", ["cache", "export", "{tmp}/garbage.sqlite", "{tmp}/out.jsonl"], {},
     ["{tmp}/garbage.sqlite"]),
    ("cache-check-empty", ["cache", "check", "{tmp}/empty.sqlite"], {}, ["{tmp}/empty.sqlite", "0 bytes"]),
    ("cache-vacuum-missing", ["cache", "vacuum", "{tmp}/none.sqlite"], {}, ["{tmp}/none.sqlite", "no such file"]),
    ("cache-export-into-folder", ["cache", "export", "{cache}", "{tmp}"], {}, ["argument out", "folder"]),
    ("cache-unknown-subcommand", ["cache", "repair", "{cache}"], {}, ["invalid choice: 'repair'"]),
    # --- tokenizers, fit-paper ------------------------------------------------------------------------
    ("tokenizers-check-unknown", ["tokenizers", "check", "nosuch"], {}, ["nosuch", "unknown"]),
    ("tokenizers-fetch-unknown", ["tokenizers", "fetch", "nosuch"], {}, ["nosuch", "unknown"]),
    ("tokenizers-fetch-from-not-archive", ["tokenizers", "fetch", "qwen2.5", "--from", "{tmp}/file", "--force"],
     {"CROSSPROFILE_TOKENIZERS": "{tmp}/tok"}, ["--from", "{tmp}/file"]),
    ("tokenizers-fetch-from-missing", ["tokenizers", "fetch", "qwen2.5", "--from", "{tmp}/none.tar.gz", "--force"],
     {"CROSSPROFILE_TOKENIZERS": "{tmp}/tok"}, ["--from", "{tmp}/none.tar.gz"]),
    ("fit-paper-resamples-text", ["fit-paper", "--resamples", "many"], {}, ["argument --resamples", "not an integer"]),
    # --- book: Make variables, checked before anything runs ---------------------------------------------
    ("book-runs-missing", ["book", "--quick", "--no-html", "--out", "{out}"], {"RUNS": "{tmp}/no-run"},
     ["RUNS=", "{tmp}/no-run"]),
    ("book-runs-garbage", ["book", "--quick", "--no-html", "--out", "{out}"], {"RUNS": "{tmp}/garbage-run"},
     ["RUNS=", "{tmp}/garbage-run"]),
    ("book-policy-file-loops", ["book", "--quick", "--no-html", "--out", "{out}"],
     {"POLICY_FILES": "{tmp}/loop.py", "CROSSPROFILE_POLICY_TIMEOUT": "1"}, ["POLICY_FILES=", "time:", "time limit"]),
    ("book-policy-file-crashes", ["book", "--quick", "--no-html", "--out", "{out}"], {"POLICY_FILES": "{tmp}/crash.py"},
     ["POLICY_FILES=", "import:", "boom at import"]),
    ("book-seeds-text", ["book", "--quick", "--no-html", "--out", "{out}"], {"SEEDS": "x"}, ["SEEDS=x", "not an integer"]),
    ("book-budgets-2", ["book", "--quick", "--no-html", "--out", "{out}"], {"BUDGETS": "2"}, ["BUDGETS=2", "(0, 1]"]),
    ("book-jobs-zero", ["book", "--quick", "--no-html", "--out", "{out}"], {"JOBS": "0"}, ["JOBS=0", "minimum 1"]),
]


def _prepare(case_dir: Path, tiny_run: Path) -> None:
    for name, body in FILES.items():
        f = case_dir / name
        f.write_bytes(body) if isinstance(body, bytes) else f.write_text(body)
    (case_dir / "garbage-run").mkdir()
    (case_dir / "garbage-run" / "results.parquet").write_text("not parquet")
    shutil.copy(tiny_run / "run.json", case_dir / "garbage-run" / "run.json")
    bad = case_dir / "bad-header-run"
    bad.mkdir()
    shutil.copy(tiny_run / "results.parquet", bad / "results.parquet")
    (bad / "run.json").write_text("{not json")


def _fill(arg: str, case_dir: Path, tiny_run: Path, cache: Path) -> str:
    return arg.format(out=case_dir / "out", tmp=case_dir, run=tiny_run, cache=cache)


def make_tiny(root):
    """A finished one-template run and a call cache holding a foreign table, in ``root``: (run folder, cache)."""
    out = root / "run"
    assert main(["run", "--out", str(out), "--templates", ONE, "--seeds", "0", "--budgets", "0.6",
                 "--policies", "R1,ALL"]) == 0
    cache = root / "calls.sqlite"
    db = sqlite3.connect(cache)
    db.execute("CREATE TABLE t (x)")
    db.close()
    return out, cache


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny(tmp_path_factory.mktemp("rel"))


def _cli(args, env_extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CROSSPROFILE_", "HIDDENBENCH", "OPENAI_"))}
    env.update(env_extra)
    base = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "crossprofile_lib.cli"]
    return subprocess.run(base + list(args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory, tiny):
    run, cache = tiny
    jobs = {}
    wanted = selected_cids(request)
    for cid, argv, env, _ in CASES:
        if cid not in wanted:
            continue
        d = tmp_path_factory.mktemp(cid)
        _prepare(d, run)
        jobs[cid] = (d, [_fill(a, d, run, cache) for a in argv], {k: _fill(v, d, run, cache) for k, v in env.items()})
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {cid: pool.submit(_cli, a, e) for cid, (_, a, e) in jobs.items()}
        return {cid: (jobs[cid][0], f.result()) for cid, f in futures.items()}


def test_the_corpus_is_large_and_distinct():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 60
    assert {a[0] for _, a, _, _ in CASES} >= {"run", "validate", "composition", "hiddenbench", "stats", "cache",
                                              "tokenizers", "fit-paper", "book"}


#: the cases test_wing_cli.py also runs in process, through ``main`` (the cli wing's mutation selection deselects
#: test_bad_input_is_named_with_its_rule and keeps the others: a process per case took minutes per mutant); not
#: ``book`` (another wing's command) nor a policy file (its time limit is read once per process, and a looping
#: policy leaves a thread behind)
IN_PROCESS = [c for c in CASES if c[1][0] != "book" and "--policy-file" not in c[1]]
ONLY_A_PROCESS = [c for c in CASES if c not in IN_PROCESS]


@pytest.mark.parametrize("cid, fragments", [(c[0], c[3]) for c in IN_PROCESS], ids=[c[0] for c in IN_PROCESS])
def test_bad_input_is_named_with_its_rule(outcomes, tiny, cid, fragments):
    _check_named(outcomes, tiny, cid, fragments)


@pytest.mark.parametrize("cid, fragments", [(c[0], c[3]) for c in ONLY_A_PROCESS], ids=[c[0] for c in ONLY_A_PROCESS])
def test_bad_book_or_policy_file_input_is_named_with_its_rule(outcomes, tiny, cid, fragments):
    _check_named(outcomes, tiny, cid, fragments)


def _check_named(outcomes, tiny, cid, fragments):
    case_dir, p = outcomes[cid]
    text = p.stderr + p.stdout
    assert p.returncode in (1, 2), (p.returncode, text[-2000:])
    assert "Traceback" not in text and "internal error" not in text, text[-3000:]
    for f in fragments:
        f = _fill(f, case_dir, *tiny)
        assert f in text, (f, text[-2000:])
    assert not (case_dir / "out").exists(), "a refused command wrote its output folder"
    assert (case_dir / "file").read_text() == "keep me"

