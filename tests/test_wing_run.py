"""The runner's rule where it lives (issue 55: the run wing's named survivor): a failed B3 summary call is a failed
row, never a decision: its ``error`` is set, so the run's header counts it and ``stats`` refuses it unless told;
the other policies' rows of the same task are untouched. A scripted language model (the real LLMBackend code) whose
summary call fails.

Below it, the run wing's rules the seed-55 mutmut sample found unpinned, each tested in-process (the wing's listed tests
never call plan.describe, measured_rate, the model run's report or rebuild.py: the command line's tests and the stats
wing's tests do, so mutmut's per-function selection found no test of the wing reaching them):
what a policy asks of a backend, the dry run's lines and measured rate, the rows' policy columns, the headroom
check, the header's cache, the results file's refusals and masking, the noisy filter's streams, verify's refusals,
and the choice data of a run (recorded or rebuilt)."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from policy_registry import policy_registry_kept
from scripted_llm import Scripted

from crossprofile_lib.backends.base import MODEL_RELEVANCE, MODEL_STANCES, ChatResult, Relevance
from crossprofile_lib.backends.ledger import ReferenceDecider
from crossprofile_lib.paths import file_sha256, templates_dir
from crossprofile_lib.policies import parse_policy, plugins
from crossprofile_lib.rng import stream
from crossprofile_lib.run import rebuild as rb
from crossprofile_lib.run import relevance_filter as rf
from crossprofile_lib.run.config import protocol_free
from crossprofile_lib.run.pipeline import Protocol, TaskInputs, asks, build_task, policy_rng
from crossprofile_lib.run.plan import CountingBackend, _hms, call_plan, describe, measured_rate
from crossprofile_lib.run.results import (
    ResultsError,
    git_commit,
    mask_frame,
    read_results,
    run_header,
    write_results,
)
from crossprofile_lib.run.runner import RunConfig, _report_model_run, headroom_check, run_grid, run_to_dir
from crossprofile_lib.run.verify import UNVERIFIED, EditedTable, check_or_trust, trusted_from_env, verify_table
from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.headroom import headroom
from crossprofile_lib.task.tokenizer import default_tokenizer
from crossprofile_lib.task.variants import agent_names

ROOT = Path(__file__).resolve().parents[1]


def _answer(r):
    if r.purpose == "b3":
        return ChatResult("", error="HTTP 500: the summary failed")
    return "Reasoning.\nDecision: A"


def test_a_failed_summary_call_is_a_failed_row_not_a_decision():
    cfg = RunConfig(backend="scripted/s1", templates=["templates/dev"], seeds=[0], budgets=["0.6"],
                    policies=["B3", "R1"], variants=["PSP"])
    df = run_grid(cfg, backend=Scripted(_answer))
    b3, r1 = df[df.policy == "B3"], df[df.policy == "R1"]
    assert len(b3) == len(r1) == 10
    assert b3.error.str.contains("HTTP 500: the summary failed").all()
    assert (b3.memory_kind == "empty").all() and (b3.n_kept == 0).all()
    assert (r1.error == "").all() and r1.decision_letter.ne("").all()


# ---------------------------------------------------------------------------------------------------------------------
# The rules the seed-55 mutation sample of the run wing found unpinned (issue 55), each tested in-process.

SMALL = dict(templates=["templates/dev"], seeds=[0], budgets=["0.6"], variants=["PSP"])


@pytest.fixture(scope="module")
def ledger_rows():
    """A reference-decider grid: 10 dev templates x R1, R1:unlabeled, ALL, EMPTY (40 rows), and its config."""
    cfg = RunConfig(policies=["R1", "R1:unlabeled", "ALL", "EMPTY"], **SMALL)
    return run_grid(cfg), cfg


# --- pipeline: what a policy asks of the backend, its random numbers, the unit's inputs -----------------------------

def test_a_model_sourced_filter_or_stance_policy_asks_the_backend_and_an_oracle_sourced_one_does_not():
    caps = frozenset({MODEL_RELEVANCE, MODEL_STANCES})
    assert asks(parse_policy("R1-rel"), MODEL_RELEVANCE, caps)
    assert not asks(parse_policy("R1-rel-oracle"), MODEL_RELEVANCE, caps)
    assert not asks(parse_policy("R1-rel"), MODEL_RELEVANCE, frozenset())      # the backend has no filter
    assert not asks(parse_policy("R1"), MODEL_RELEVANCE, caps)                 # R1 needs no filter


def test_only_policies_that_use_random_numbers_get_a_generator_unless_always():
    rng = policy_rng(7)
    assert rng(parse_policy("R1"), "t/PSP/0/R1/0.6") is None
    g = rng(parse_policy("Random"), "k")
    assert isinstance(g, np.random.Generator)
    assert g.random() == stream(7, "policy", "k").random()
    assert isinstance(policy_rng(7, always=True)(parse_policy("R1"), "k"), np.random.Generator)


class _InputsBackend:
    relevance_kind = "model"

    def __init__(self):
        self.asked = []

    def relevance(self, task, claims):
        self.asked.append("relevance")
        return Relevance.of({0})

    def stances(self, task, claims):
        self.asked.append("stances")
        return ("support", "oppose")


def test_a_unit_without_claims_has_an_empty_model_relevance_and_the_backend_is_not_asked():
    b = _InputsBackend()
    rel, kind = TaskInputs(SimpleNamespace(task=None, claims=()), b).relevance("model")
    assert rel == frozenset() and isinstance(rel, Relevance) and kind == "model" and b.asked == []


def test_oracle_stances_come_from_the_roles_and_model_stances_from_the_backend_once():
    b = _InputsBackend()
    x = TaskInputs(SimpleNamespace(task="T", claims=("c1", "c2")), b)
    x._cache["st-oracle"] = ("support", "support")          # the roles' answer, fixed here
    assert x.stances("oracle") == (("support", "support"), "oracle") and b.asked == []
    assert x.stances("model") == (("support", "oppose"), "model")
    assert x.stances("model") == (("support", "oppose"), "model") and b.asked == ["stances"]
    assert x.stance_agreement() == 0.5                      # one of two claims agrees


# --- plan: the dry run's lines and the measured rate ------------------------------------------------------------------

PLAN = {"decision_mode": "generate", "templates": 2, "variants": 2, "seeds": 3, "decisions": 96,
        "per_policy": {"R1": 48, "B3": 40}, "tokenizer": "offline",
        "calls": {"b3": 24, "decision": 88, "relevance": 12, "total": 124}}


def test_the_dry_run_lists_decision_calls_per_policy_then_the_filter_and_summary_calls_by_name():
    lines = describe(PLAN, "openai/m", "the grid")
    assert lines[0] == "dry run: openai/m (generate mode); the grid; 12 task units, 96 decisions"
    assert lines[1:5] == ["  policy            decision calls",
                          "  R1                        48",
                          "  B3                        40",
                          "  relevance filter          12"]
    assert lines[5] == "  B3 summaries              24"                  # no stance calls: no BAL line
    assert lines[6].startswith("total: 124 model calls (+ at most 88 format-reminder retries in generate mode)")
    assert "budgets priced with offline" in lines[6]
    assert lines[7].startswith("estimate: no measured rate")
    assert describe(PLAN, "ledger", "g", model_calls=False)[1] == \
        "total: 96 decisions; the reference decider makes no model calls"
    assert describe(PLAN, "openai/m", "g", rate=(2.0, "given"))[-1] == \
        "estimate: 124 calls at 2.00 calls/s = 62 s (rate: given)"


class _Timeline:
    path = "/c/calls.sqlite"

    def __init__(self, times):
        self.times = times

    def calls_timeline(self, provider, model):
        return self.times if (provider, model) == ("p", "m") else []


def test_the_measured_rate_is_the_latest_burst_of_that_provider_and_model():
    times = [0.0] + [1000.0 + 2 * i for i in range(25)]   # an old call, then 25 calls 2 s apart
    rate, src = measured_rate(_Timeline(times), "p", "m")
    assert rate == 0.5
    assert src == "measured on 25 calls of p/m stored in /c/calls.sqlite, ending 1970-01-01 00:17 UTC"
    assert measured_rate(_Timeline(times), "p", "other") is None
    assert measured_rate(_Timeline(times[:20]), "p", "m") is None            # 19 calls in the burst: too few


def test_the_counting_backend_answers_every_decision_well_formed_in_score_and_generate_mode():
    cfg = RunConfig(policies=["R1", "ALL"], **SMALL)
    for mode in ("score", "generate"):
        df = run_grid(cfg, backend=CountingBackend(mode))
        assert len(df) == 20 and not df["invalid"].any() and (df["decision_letter"] == "A").all(), mode


# --- runner: the rows' columns, the model run's report, the headroom check, the header ------------------------------

def test_each_row_records_the_policy_base_and_its_label_format(ledger_rows):
    df, _ = ledger_rows
    got = df[["policy", "base_policy", "label_format"]].drop_duplicates().values.tolist()
    assert got == [["R1", "R1", "full"], ["R1:unlabeled", "R1", "unlabeled"], ["ALL", "ALL", "full"],
                   ["EMPTY", "EMPTY", "full"]]


def _headroom_rows():
    """12 templates, template t with 3 + t rows of ALL and of EMPTY: ALL right on all but t % 2, EMPTY on 5t mod n."""
    rows = []
    for t in range(12):
        n = 3 + t
        for pol, k in (("ALL", n - t % 2), ("EMPTY", (t * 5) % n)):
            rows += [dict(template_id=f"t{t:02d}", policy=pol, correct=j < k) for j in range(n)]
    return pd.DataFrame(rows)


def test_the_headroom_check_is_all_minus_empty_over_ten_thousand_template_resamples():
    df = _headroom_rows()
    h = headroom_check(df)
    # by hand: 102 rows each; ALL right on 102 - 6 = 96, EMPTY on 0+1+3+4+1+7+8+6+1+11+6+3 = 59 -> 37/102 points
    assert h.estimate == pytest.approx(100 * 37 / 102) and h.n_units == 12 and h.status == "confirmatory"
    spec = headroom(df, TemplateBootstrap.draw(sorted(df.template_id.unique()), 10_000, stream(0, "headroom")))
    assert (h.lo, h.hi) == (spec.lo, spec.hi)


def test_a_run_without_all_and_empty_rows_has_no_headroom_check_and_is_exploratory():
    h = headroom_check(pd.DataFrame({"template_id": ["t1", "t2"], "policy": ["R1", "R1"], "correct": [True, False]}))
    assert h.estimate is None and h.status == "exploratory" and "no ALL and EMPTY rows" in h.reason


def test_a_model_run_reports_its_calls_and_cache_hits_and_records_the_headroom(ledger_rows, capsys):
    df, _ = ledger_rows
    backend = SimpleNamespace(name="openai/m", decision_mode="generate", stats={"calls": 7, "cached": 3})
    header = {"errors": 2}
    _report_model_run(df, backend, header)
    out = capsys.readouterr().out
    assert "openai/m [generate]: 7 model calls, 3 cache hits, 0 invalid answers, 2 errors" in out
    assert header["calls"] == {"cached": 3, "calls": 7}
    assert header["headroom"]["estimate"] == 100.0 and header["headroom"]["passed"] is True
    assert header["status"] == "confirmatory" and "headroom check: ALL - EMPTY = +100.0 points" in out


def test_a_model_run_records_its_call_cache_in_the_header(tmp_path):
    cache = tmp_path / "cache"
    backend = Scripted(lambda r: "Decision: A", cache=str(cache))
    _, header = run_to_dir(RunConfig(backend="scripted/s1", policies=["ALL", "EMPTY"], **SMALL), tmp_path / "run",
                           backend=backend)
    assert header["cache"] == backend.cache.path and str(cache) in str(header["cache"])
    assert json.loads((tmp_path / "run" / "run.json").read_text())["cache"] == header["cache"]


# --- results: the written table, a broken file, masking --------------------------------------------------------------

def test_a_table_missing_columns_is_refused_naming_the_results_file_it_would_be(tmp_path):
    with pytest.raises(ResultsError) as e:
        write_results(pd.DataFrame({"template_id": ["t"]}), tmp_path, {})
    assert str(e.value).startswith(f"{tmp_path / 'results.parquet'}: missing column(s)")
    assert "REQUIRED_COLUMNS" in str(e.value) and not (tmp_path / "results.parquet").exists()


def test_a_file_that_is_not_parquet_is_refused_naming_the_file_and_the_readers_error(tmp_path):
    f = tmp_path / "results.parquet"
    f.write_text("not a parquet file")
    with pytest.raises(ResultsError) as e:
        read_results(tmp_path)
    msg = str(e.value)
    assert msg.startswith(f"{f}: cannot read as parquet (") and "ArrowInvalid" in msg and "NoneType" not in msg


def test_masking_a_secret_leaves_the_columns_non_text_values_as_they_were(monkeypatch):
    monkeypatch.setenv("CROSSPROFILE_TEST_API_KEY", "sk-wingrun-0123456789")
    df = pd.DataFrame({"error": ["HTTP 401 for sk-wingrun-0123456789", None, 3], "n": [1, 2, 3]})
    out = mask_frame(df)
    assert "sk-wingrun-0123456789" not in out["error"].iloc[0] and "HTTP 401 for" in out["error"].iloc[0]
    assert out["error"].iloc[1] is None and out["error"].iloc[2] == 3
    assert df["error"].iloc[0] == "HTTP 401 for sk-wingrun-0123456789"        # the caller's frame is not changed


# --- relevance filter: the seeded noisy filter's realised quality ----------------------------------------------------

def test_each_noisy_filter_draws_from_its_own_precision_recall_and_draw_stream(dev_templates):
    tok, ts = default_tokenizer(), dev_templates[:2]
    for p, r in ((0.8, 0.6), (0.8, 0.9)):
        df = rf.tiering_compositions(ts, tok, p, r, seeds=(0,), draws=4)
        for u in rf.task_units(ts, ("PSP",), (0,), 4, tok):
            truth = rf.oracle_relevance(u.claims, u.task)
            for d in range(4):
                rel = rf.noisy_filter(truth, len(u.claims), p, r, stream(0, "noisy-filter", u.task.task_id, p, r, d))
                row = df[(df.template_id == u.task.template.id) & (df.draw == d)].iloc[0]
                tp = len(rel & truth)
                assert row.realised_recall == tp / len(truth)
                if rel:
                    assert row.realised_precision == tp / len(rel)
                else:
                    assert np.isnan(row.realised_precision)


def test_with_no_relevant_claims_the_filters_realised_precision_and_recall_are_undefined(dev_templates, monkeypatch):
    monkeypatch.setattr(rf, "oracle_relevance", lambda claims, task: frozenset())
    df = rf.tiering_compositions(dev_templates[:1], default_tokenizer(), 0.8, 0.9, seeds=(0,), draws=2)
    assert len(df) == 2 and df["realised_recall"].isna().all() and df["realised_precision"].isna().all()


# --- verify: an edited table is refused naming the file, the row and the rule -----------------------------------------

@pytest.fixture(scope="module")
def written_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("wingrun") / "run"
    df, header = run_to_dir(RunConfig(policies=["R1", "ALL", "EMPTY"], **SMALL), out)
    return pd.read_parquet(out / "results.parquet"), json.loads((out / "run.json").read_text()), out


def _refusal(df, header, where="r/results.parquet"):
    with pytest.raises(EditedTable) as e:
        verify_table(df, header, where)
    return e.value


def test_the_written_run_verifies_and_a_refusal_names_the_file(written_run):
    df, header, _ = written_run
    verify_table(df, header, "r/results.parquet")
    e = _refusal(df, dict(header, rows=len(df) + 1))
    assert e.where == "r/results.parquet" and str(e).startswith("r/results.parquet: rule row count")


def test_a_header_whose_config_is_missing_or_not_an_object_is_refused_naming_config(written_run):
    df, header, _ = written_run
    e = _refusal(df, {k: v for k, v in header.items() if k != "config"})
    assert "rule run header" in e.problem and "config is missing" in e.problem and "not an object" in e.problem
    e = _refusal(df, dict(header, config=["R1"]))
    assert "config is list" in e.problem and "not an object" in e.problem


def test_a_row_whose_policy_is_not_in_the_runs_config_is_refused(written_run):
    df, header, _ = written_run
    d = df.copy()
    d.loc[4, "policy"] = "B4"
    e = _refusal(d, header)
    assert e.problem.startswith("row 4 (") and "rule run grid: policy 'B4' is not in the run" in e.problem
    assert "config's policy list" in e.problem


def test_kept_counts_outside_the_templates_facts_or_above_n_kept_are_refused_naming_the_rule(written_run):
    df, header, _ = written_run
    d = df.copy()
    d.loc[2, "kept_support"] = 99
    e = _refusal(d, header)
    assert e.problem.startswith("row 2 (") and "rule value ranges: kept_support = 99, outside 0.." in e.problem
    assert "the template's support facts" in e.problem
    d = df.copy()
    i = int((d["n_kept"] > 0).to_numpy().nonzero()[0][0])
    d.loc[i, "n_kept"] = 0
    e = _refusal(d, header)
    assert e.problem.startswith(f"row {i} (")
    assert e.problem.endswith("rule value ranges: n_kept is below kept_support + kept_decoy + kept_irrelevant")


# --- rebuild: decisions as choice data, from the recorded features or rebuilt memories --------------------------------

def test_rebuilt_choice_data_uses_each_valid_decision_and_counts_the_rows_left_out(ledger_rows):
    df, cfg = ledger_rows
    d = df.copy()
    d.loc[0, "invalid"] = True
    d.loc[1, "memory_sha"] = "0" * 16
    data, info = rb.rebuild_choice_data(d, asdict(cfg), "templates/dev")
    assert info["policies_rebuilt"] == ["R1", "R1:unlabeled", "ALL", "EMPTY"]
    assert (info["decisions"], info["used"], info["invalid"], info["memory_mismatch"], info["not_rebuilt"]) == \
        (40, 38, 1, 1, 0)
    assert d.loc[:1, "policy"].tolist() == ["R1", "R1:unlabeled"]
    assert info["left_out_by_policy"] == {"R1:unlabeled": 1}              # invalid rows are not counted by policy
    assert data.X.shape == (38, 3, 4) and list(data.count) == [1.0] * 38
    assert list(data.template) == d["template_id"].tolist()[2:]
    # rows of a policy the rebuild cannot make are left out as not rebuilt
    data, info = rb.rebuild_choice_data(d, dict(asdict(cfg), policies=["R1", "ALL", "EMPTY"]))
    assert info["policies_rebuilt"] == ["R1", "ALL", "EMPTY"] and info["not_rebuilt"] == 10
    assert info["left_out_by_policy"] == {"R1:unlabeled": 10} and info["used"] == 29


def test_a_generated_policys_rows_are_never_rebuilt():
    df = run_grid(RunConfig(backend="scripted/s1", policies=["B3", "ALL"], **SMALL),
                  backend=Scripted(lambda r: "Summary." if r.purpose == "b3" else "Decision: A"))
    data, info = rb.rebuild_choice_data(df.drop(columns=["option_features"]),
                                        RunConfig(policies=["B3", "ALL"], **SMALL))
    assert info["policies_rebuilt"] == ["ALL"] and info["used"] == 10 and info["not_rebuilt"] == 10
    assert info["left_out_by_policy"] == {"B3": 10} and len(data) == 10


def test_no_decisions_make_empty_choice_data():
    data, info = rb.choice_data([], pd.DataFrame({c: [] for c in [*rb.KEY, "memory_sha", "decision", "invalid"]}))
    assert len(data) == 0 and data.X.shape == (0, 3, 4) and data.choice.shape == (0,) and info["used"] == 0


def test_recorded_features_give_the_choice_data_and_leave_out_invalid_and_generated_rows(ledger_rows):
    df, _ = ledger_rows
    d = df.copy()
    d.loc[0, "invalid"] = True
    d.loc[1, "selection"] = "generated"
    data, info = rb.recorded_choice_data(d)
    assert info["source"] == "option_features recorded at run time"
    assert (info["used"], info["invalid"], info["not_rebuilt"]) == (38, 1, 1)
    assert info["left_out_by_policy"] == {d.loc[1, "policy"]: 1}
    assert data.X.shape == (38, 3, 4) and data.count.tolist() == [1.0] * 38
    first = [float(v) for v in d.loc[2, "option_features"].replace(";", ",").split(",")]
    assert data.X[0].ravel().tolist() == first


def test_the_rebuilder_reads_recorded_features_else_rebuilds_from_the_templates_it_is_given(ledger_rows):
    df, cfg = ledger_rows
    config = dict(asdict(cfg), templates=["templates/no-such-folder"])
    got = rb.choice_data_rebuilder(df, config)("ledger", df["model"].iloc[0])
    assert got[1]["source"] == "option_features recorded at run time" and got[1]["used"] == 40
    old = df.drop(columns=["option_features"])
    data, info = rb.choice_data_rebuilder(old, config, templates=["templates/dev"])("ledger", df["model"].iloc[0])
    assert info["used"] == 40 and "source" not in info
    reason = rb.choice_data_rebuilder(old, config)("ledger", df["model"].iloc[0])
    assert reason.startswith("cannot rebuild the memories: cannot rebuild memories: templates")
    assert rb.choice_data_rebuilder(old, None)("ledger", df["model"].iloc[0]) == \
        "no run header (run.json) to rebuild the memories from"


def test_the_rebuild_key_counts_the_template_files_content_not_their_path(root):
    a = rb.rebuild_inputs_key({"templates": ["templates/dev"], "seeds": [0]})
    b = rb.rebuild_inputs_key({"templates": [str(root / "templates" / "dev")], "seeds": [0]})
    assert a == b
    assert json.loads(a)["config"] == {"seeds": [0]} and len(json.loads(a)["files"]) == 64
    assert a != rb.rebuild_inputs_key({"templates": ["templates/formal"], "seeds": [0]})


# ---------------------------------------------------------------------------------------------------------------------
# The rules a fresh (seed-56) mutmut sample of the run wing found unpinned.

def test_a_config_without_a_protocol_is_recorded_as_a_scripted_runs_without_the_protocol_fields():
    assert protocol_free({"seeds": [0], "extraction": "oracle", "opinion_rate": 0.25}) == {"seeds": [0]}
    assert protocol_free({"protocol": "scripted", "seeds": [0], "extraction": "oracle"}) == {"seeds": [0]}
    messy = {"protocol": "messy", "seeds": [0], "extraction": "fuzzy"}
    assert protocol_free(messy) == messy


def test_a_task_has_the_grids_agent_count_and_a_messy_unit_keeps_its_task(hospital):
    u = build_task(hospital, "PSP", 0, 3, total=500)
    assert u.task.n_agents == 3
    assert {a for holders in u.task.holders.values() for a in holders} <= set(agent_names(3))
    m = build_task(hospital, "PSP", 1, 4, total=500, protocol=Protocol("messy", "oracle", 0.25, None))
    assert m.task.template.id == "dev-hospital-01" and m.task.seed == 1 and m.protocol.name == "messy"
    assert m.merge is not None


def test_ninety_seconds_or_more_are_given_in_minutes_and_hours():
    assert (_hms(89.4), _hms(90), _hms(150), _hms(3600), _hms(5430)) == ("89 s", "2 min", "2 min", "1 h 00 min",
                                                                          "1 h 30 min")


def test_the_plan_prices_budgets_with_the_tokenizer_it_is_given(named_vocabs):
    cfg = RunConfig(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0], budgets=["0.6"], variants=["PSP"],
                    policies=["R1"])
    assert call_plan(cfg, tokenizer="qwen2.5")["tokenizer"] == "vocab:qwen2.5"
    assert call_plan(cfg)["tokenizer"] == "offline-bpe-approx-v1"


def test_a_run_of_only_generated_policies_rebuilds_nothing_whatever_its_extraction(ledger_rows):
    df, _ = ledger_rows
    b3 = df[df.policy == "R1"].assign(policy="B3", selection="generated").drop(columns=["option_features"])
    config = asdict(RunConfig(policies=["B3"], protocol="messy", extraction="model", **SMALL))
    data, info = rb.rebuild_choice_data(b3, config)
    assert len(data) == 0 and info["policies_rebuilt"] == [] and info["not_rebuilt"] == 10


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_the_recorded_git_commit_is_the_head_and_says_dirty_when_a_tracked_file_changed(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-q", "-m", "one")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert len(head) == 40 and git_commit(tmp_path) == head
    (tmp_path / "a.txt").write_text("two\n")
    assert git_commit(tmp_path) == head + "-dirty"
    assert git_commit(tmp_path / "a.txt") is None                    # not a folder: no commit, no error


def test_a_results_path_that_is_not_a_regular_file_is_refused_naming_the_rule(tmp_path):
    (tmp_path / "results.parquet").mkdir()
    with pytest.raises(ResultsError) as e:
        read_results(tmp_path)
    assert str(e.value) == f"{tmp_path / 'results.parquet'}: not a regular file (rule: a results table is a " \
                           "parquet file)"


def test_the_header_records_the_policy_files_behind_the_runs_policies():
    with policy_registry_kept():
        plugins.load(str(ROOT / "examples" / "policies" / "keep_longest.py"))
        header = run_header(RunConfig(policies=["Longest", "ALL"], **SMALL), ReferenceDecider())
        assert len(header["policy_files"]) == 1
        assert header["policy_files"][0]["sha256"] == file_sha256(ROOT / "examples" / "policies" / "keep_longest.py")
        assert "policy_files" not in run_header(RunConfig(policies=["ALL"], **SMALL), ReferenceDecider())


def test_rows_record_whether_the_decision_came_from_the_cache_and_its_transport_retries():
    backend = Scripted(lambda r: ChatResult("Reasoning.\nDecision: A", retries=2))
    cfg = RunConfig(backend="scripted/s1", policies=["ALL"], **SMALL)
    first = run_grid(cfg, backend=backend)
    assert not first["cached"].any() and (first["call_retries"] == 2).all()
    again = run_grid(cfg, backend=backend)
    assert again["cached"].all()


def test_a_backend_of_your_own_without_a_call_cache_records_none(tmp_path):
    backend = ReferenceDecider()
    backend.decision_mode, backend.cache = "mine", None         # not the reference decider's ledger mode
    _, header = run_to_dir(RunConfig(policies=["ALL", "EMPTY"], **SMALL), tmp_path / "run", backend=backend)
    assert "cache" in header and header["cache"] is None and header["rows"] == 20 and "headroom" in header


def test_a_refusal_names_the_row_by_its_grid_key_and_the_answer_key_rule(written_run):
    df, header, _ = written_run
    d = df.copy()
    d.loc[3, "correct"] = not d.loc[3, "correct"]
    e = _refusal(d, header)
    r = d.loc[3]
    assert e.problem.startswith(f"row 3 (template_id {r.template_id}, variant PSP, seed 0, policy {r.policy}, "
                                f"budget_label {r.budget_label}): rule answer key: correct is {bool(r.correct)}")


def test_more_kept_claims_than_the_discussion_has_are_refused(written_run):
    df, header, _ = written_run
    d = df.copy()
    d.loc[5, "n_kept"] = d.loc[5, "n_claims"] + 1
    assert d.loc[5, "n_kept"] >= d.loc[5, ["kept_support", "kept_decoy", "kept_irrelevant"]].sum()
    e = _refusal(d, header)
    assert e.problem.startswith("row 5 (") and e.problem.endswith("rule value ranges: n_kept is above n_claims")


@pytest.fixture(scope="module")
def moved_run(tmp_path_factory):
    """A run of a template file found nowhere the run recorded (its folder moved) nor among the bundled ones."""
    base = tmp_path_factory.mktemp("moved")
    (base / "made").mkdir()
    src = ROOT / "templates" / "dev" / "dev-hospital-01.yaml"
    (base / "made" / "hospital.yaml").write_text(src.read_text() + "\n# a copy with a changed hash\n")
    df, header = run_to_dir(RunConfig(templates=[str(base / "made")], seeds=[0], budgets=["0.6"], variants=["PSP"],
                                      policies=["R1", "ALL"]), base / "run")
    (base / "made").rename(base / "moved")
    return df, json.loads((base / "run" / "run.json").read_text()), base


def test_the_answer_key_is_found_through_the_templates_given_past_a_path_that_is_not_there(moved_run):
    df, header, base = moved_run
    with pytest.raises(EditedTable) as e:
        verify_table(df, header, "r/results.parquet")
    assert "rule template hashes" in e.value.problem and "--templates" in e.value.problem
    verify_table(df, header, "r/results.parquet", templates=[str(base / "no-such-folder"), str(base / "moved")])
    assert check_or_trust(df, header, "r/results.parquet", False, templates=[str(base / "moved")]) is None
    note = check_or_trust(df, header, "r/results.parquet", True)
    assert note.startswith(UNVERIFIED) and "rule template hashes" in note


# ---------------------------------------------------------------------------------------------------------------------
# The rules a fresh (seed-57) mutmut sample of the run wing found unpinned.

def test_a_messy_unit_keeps_the_grids_token_total(hospital):
    m = build_task(hospital, "PSP", 1, 4, total=500, protocol=Protocol("messy", "oracle", 0.25, None))
    assert m.t_all == 500
    assert build_task(hospital, "PSP", 1, 4, total=321).t_all == 321


def test_the_counting_backend_answers_a_decision_without_choices_with_letter_a():
    for mode in ("score", "generate"):
        r = SimpleNamespace(purpose="decision", choices=None, messages=[])
        assert CountingBackend(mode)._reply(r).text == "Decision: A"
    r = SimpleNamespace(purpose="decision", choices=["C", "D"], messages=[])
    assert CountingBackend("generate")._reply(r).text == "Decision: C"


def test_rebuilt_choice_data_records_the_chosen_options_position(ledger_rows):
    df, cfg = ledger_rows
    data, info = rb.rebuild_choice_data(df, asdict(cfg), "templates/dev")
    assert info["used"] == 40 and data.choice.shape == (40,) and data.choice.dtype.kind == "i"
    rec, _ = rb.recorded_choice_data(df)
    assert data.choice.tolist() == rec.choice.tolist()
    assert set(data.choice.tolist()) <= {0, 1, 2}


def test_a_config_without_seeds_rebuilds_no_seed(ledger_rows):
    df, cfg = ledger_rows
    config = {k: v for k, v in asdict(cfg).items() if k != "seeds"}
    data, info = rb.rebuild_choice_data(df.drop(columns=["option_features"]), config, "templates/dev")
    assert len(data) == 0 and info["used"] == 0 and info["not_rebuilt"] == 40


def test_a_filter_over_only_relevant_claims_lets_nothing_else_in():
    truth = frozenset({0, 1, 2})
    assert rf.noisy_filter(truth, 3, 0.5, 1.0, np.random.default_rng(0)) == truth
    assert rf.noisy_filter(truth, 3, 0.5, 0.0, np.random.default_rng(0)) == frozenset()


def test_the_header_is_stamped_with_the_utc_time(monkeypatch):
    from crossprofile_lib.run import results as rs
    fixed = time.struct_time((2020, 1, 2, 3, 4, 5, 3, 2, 0))
    monkeypatch.setattr(rs.time, "gmtime", lambda *a: fixed)
    h = rs.stamp({"a": 1}, time.perf_counter())
    assert h["created"] == "2020-01-02T03:04:05Z" and h["a"] == 1 and 0 <= h["seconds"] < 60


def test_model_stance_policies_record_their_agreement_and_ratio_budgets_their_ratio():
    def ans(r):
        return json.dumps({"stances": []}) if r.purpose == "stance" else "Decision: A"
    cfg = RunConfig(backend="scripted/s1", policies=["BAL", "BAL-oracle", "R1"], templates=["templates/dev"],
                    seeds=[0], budgets=["0.6", "128t"], variants=["PSP"])
    df = run_grid(cfg, backend=Scripted(ans))
    bal = df[df.policy == "BAL"]
    assert len(bal) == 20 and (bal.stance_agreement == 0.0).all()       # no stances given: none agrees
    assert df[df.policy != "BAL"].stance_agreement.isna().all()
    assert (df[df.budget_label == "0.6"].budget_ratio == 0.6).all()
    fixed = df[df.budget_label == "128t"]
    assert len(fixed) == 30 and fixed.budget_ratio.isna().all() and (fixed.budget_tokens == 128).all()
    assert (df.error == "").all()


def test_the_headroom_check_resamples_every_template_of_all_and_empty_rows():
    df = pd.DataFrame({"template_id": ["t1", "t1", "t2", "t2", "t1", "t1"],
                       "policy": ["ALL", "ALL", "ALL", "ALL", "EMPTY", "EMPTY"],
                       "correct": [True, True, True, False, False, False]})
    h = headroom_check(df, n_resamples=200)
    # by hand: ALL right on 3 of 4, EMPTY on 0 of 2 -> 75 points over 2 templates
    assert h.estimate == pytest.approx(75.0) and h.n_units == 2


def test_the_trust_edited_variable_is_read_as_a_yes_in_any_case(monkeypatch):
    for v, want in (("1", True), ("true", True), ("TRUE", True), (" Yes ", True), ("no", False), ("", False),
                    ("0", False)):
        monkeypatch.setenv("CROSSPROFILE_TRUST_EDITED", v)
        assert trusted_from_env() is want, v
    monkeypatch.delenv("CROSSPROFILE_TRUST_EDITED")
    assert trusted_from_env() is False


def test_a_refusal_names_results_parquet_when_no_file_is_given(written_run):
    df, header, _ = written_run
    with pytest.raises(EditedTable) as e:
        verify_table(df, dict(header, rows=len(df) + 1))
    assert e.value.where == "results.parquet" and str(e.value).startswith("results.parquet: rule row count")


def test_a_duplicated_row_is_refused_naming_both_rows(written_run):
    df, header, _ = written_run
    d = pd.concat([df, df.iloc[[3]]], ignore_index=True)
    e = _refusal(d, dict(header, rows=len(d)))
    r = df.loc[3]
    assert e.problem == (f"row {len(df)} (template_id {r.template_id}, variant PSP, seed 0, policy {r.policy}, "
                         f"budget_label {r.budget_label}): rule duplicate row: the same decision as row 3")


@pytest.fixture(scope="module")
def own_templates_run(tmp_path_factory):
    """A run of two template files of its own: a changed copy of dev-hospital-01 and one with an id of its own."""
    base = tmp_path_factory.mktemp("own")
    (base / "made").mkdir()
    src = (ROOT / "templates" / "dev" / "dev-hospital-01.yaml").read_text()
    (base / "made" / "hospital.yaml").write_text(src + "\n# a copy with a changed hash\n")
    (base / "made" / "own.yaml").write_text(src.replace("id: dev-hospital-01", "id: wing-run-own-01", 1))
    df, header = run_to_dir(RunConfig(templates=[str(base / "made")], seeds=[0], budgets=["0.6"], variants=["PSP"],
                                      policies=["R1", "ALL"]), base / "run")
    return pd.read_parquet(base / "run" / "results.parquet"), json.loads((base / "run" / "run.json").read_text()), base


def test_the_answer_key_is_found_where_the_run_recorded_its_templates(own_templates_run):
    df, header, _ = own_templates_run
    assert sorted(df.template_id.unique()) == ["dev-hospital-01", "wing-run-own-01"]
    verify_table(df, header, "r/results.parquet")


def test_a_template_whose_file_is_gone_is_refused_naming_the_files_of_that_id_that_are_here(own_templates_run):
    df, header, base = own_templates_run
    gone = dict(header, config=dict(header["config"], templates=[str(base / "gone")]))
    e = _refusal(df, gone)
    bundled = templates_dir() / "dev" / "dev-hospital-01.yaml"             # the bundled file of that id
    assert "rule template hashes: no template file with the SHA-256 run.json records for dev-hospital-01" in e.problem
    assert f"is here; found {bundled} (sha256 {file_sha256(bundled)[:12]}...) (pass the run's templates" in e.problem
    own = df[df.template_id == "wing-run-own-01"].reset_index(drop=True)
    e = _refusal(own, gone)
    assert e.problem.startswith("row 0 (template_id wing-run-own-01, ")
    assert "records for wing-run-own-01 (" in e.problem and "found" not in e.problem
    assert e.problem.endswith("is here (pass the run's templates with --templates), so its answer key cannot be "
                              "recomputed")


def test_a_changed_tracked_file_whose_name_is_not_utf8_still_gives_the_dirty_commit(tmp_path):
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "core.quotePath", "false")         # git status then prints the raw bytes of the name
    name = bytes(tmp_path) + b"/caf\xe9.txt"                   # latin-1, not UTF-8
    with open(name, "w") as f:
        f.write("one\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "one")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert git_commit(tmp_path) == head
    with open(name, "w") as f:
        f.write("two\n")
    assert git_commit(tmp_path) == head + "-dirty"


# --- runner: a row's columns, whole (build_requests' task and memory columns, run_grid's decision columns) -----------

def test_a_messy_exact_extraction_row_records_the_task_the_protocol_the_merge_and_the_memory_whole():
    cfg = RunConfig(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[3], budgets=["0.6"], variants=["PPS"],
                    policies=["R1"], protocol="messy", extraction="exact", opinion_rate=0.5)
    df = run_grid(cfg)
    assert len(df) == 1
    row = df.iloc[0].to_dict()
    assert np.isnan(row.pop("stance_agreement")) and np.isnan(row.pop("relevance_precision"))
    assert np.isnan(row.pop("relevance_recall"))
    assert row == {
        "template_id": "dev-hospital-01", "template_version": 1, "domain": "hospital equipment procurement",
        "variant": "PPS", "support_attr": "private", "decoy_attr": "private", "irrelevant_attr": "shared",
        "cell": "other", "pooled_cell": "other", "seed": 3, "n_agents": 4, "t_all": 396,
        "option_order": "corvane,helix,medora", "protocol": "messy", "extraction": "exact", "opinion_rate": 0.5,
        "n_claims": 28, "merge_precision": 1.0, "merge_recall": 1 / 6, "split_rate": 1.0, "rare_rate": 1.0,
        "policy": "R1", "base_policy": "R1", "selection": "budget", "label_format": "full", "relevance_filter": "",
        "stance_source": "", "budget_label": "0.6", "budget_ratio": 0.6, "budget_tokens": 237, "memory_tokens": 232,
        "memory_truncated": False, "n_kept": 11, "kept_support": 3, "kept_decoy": 1, "kept_irrelevant": 4,
        "retention": 0.6, "net_lead": 2, "irrelevant_tone": -2, "memory_sha": "29fa9391de0a0164",
        "memory_kind": "claims", "option_features": "-1,0,1,0;1,0,-1,0;0,0,0,0", "relevance_invalid": False,
        "error": "", "decision": "helix", "decision_letter": "B", "correct": True, "chose_decoy": False,
        "invalid": False, "backend": "ledger", "model": "reference-decider(sp=0,irr=0,beta=inf)",
        "decision_mode": "ledger", "tokenizer": "offline-bpe-approx-v1", "cached": False, "call_retries": 0,
        "format_retry": False, "prompt_file": "", "prompt_sha": "", "letter_logprobs": "", "letters_missing": ""}


def test_a_scripted_run_records_no_protocol_merge_and_its_rows_name_the_scripted_protocol():
    cfg = RunConfig(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0], budgets=["0.6"], variants=["PSP"],
                    policies=["R1"])
    row = run_grid(cfg).iloc[0]
    assert (row.protocol, row.extraction, row.opinion_rate) == ("scripted", "oracle", 0.0)
    assert "merge_precision" not in row.index and "split_rate" not in row.index


_ONE = dict(backend="scripted/s1", templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0], budgets=["0.6"],
            policies=["R1", "ALL"], variants=["PSP"])
_DECISION_COLS = ["policy", "decision", "decision_letter", "correct", "chose_decoy", "invalid", "backend", "model",
                  "decision_mode", "tokenizer", "error", "cached", "call_retries", "format_retry", "prompt_file",
                  "letter_logprobs", "letters_missing"]


def test_an_unparseable_reply_is_an_invalid_row_with_no_decision_letter_and_a_format_retry():
    df = run_grid(RunConfig(**_ONE), backend=Scripted(lambda r: "I cannot decide."))
    common = {"decision": "", "decision_letter": "", "correct": False, "chose_decoy": False, "invalid": True,
              "backend": "scripted/s1", "model": "s1", "decision_mode": "generate",
              "tokenizer": "offline-bpe-approx-v1", "error": "", "cached": False, "call_retries": 0,
              "format_retry": True, "prompt_file": "decision_v1.txt", "letter_logprobs": "", "letters_missing": ""}
    assert df[_DECISION_COLS].to_dict("records") == [dict(common, policy="R1"), dict(common, policy="ALL")]
    assert df.prompt_sha.str.fullmatch(r"[0-9a-f]{16}").all() and df.prompt_sha.nunique() == 2


def test_the_reply_letter_is_the_option_in_the_rows_order_and_scores_correct_or_decoy():
    got = {}
    for letter in "ABC":
        df = run_grid(RunConfig(**_ONE), backend=Scripted(lambda r, x=letter: f"Decision: {x}"))
        r = df[df.policy == "R1"].iloc[0]
        assert r.option_order == "corvane,helix,medora"
        got[letter] = (r.decision, r.decision_letter, bool(r.correct), bool(r.chose_decoy), bool(r.invalid),
                       bool(r.format_retry))
    assert got == {"A": ("corvane", "A", False, True, False, False),      # corvane: the template's decoy
                   "B": ("helix", "B", True, False, False, False),        # helix: its correct option
                   "C": ("medora", "C", False, False, False, False)}


def test_model_extraction_without_an_extractor_is_unavailable_on_the_ledger_and_asks_a_model_backend_for_one():
    from crossprofile_lib.run.runner import protocol_of
    cfg = RunConfig(protocol="messy", extraction="model")
    for backend in (None, SimpleNamespace(name="ledger", decision_mode="ledger")):
        with pytest.raises(ValueError) as e:
            protocol_of(cfg, backend)
        assert str(e.value) == ("extraction level 'model' needs a model backend (the natural protocol's model-based "
                                "claim extractor); the reference decider makes no model calls: use oracle, exact or "
                                "fuzzy")
    with pytest.raises(ValueError) as e:
        protocol_of(cfg, SimpleNamespace(name="openai/m1", decision_mode="generate"))
    assert str(e.value) == ("extraction level 'model' on backend 'openai/m1' needs the natural protocol's extractor "
                            "passed to the runner (run_grid(..., extractor=...))")
    with pytest.raises(ValueError) as e:
        protocol_of(RunConfig(extraction="fuzzy"))
    assert str(e.value) == "--extraction fuzzy needs --protocol messy (the scripted discussion's claims are its facts)"
    p = protocol_of(RunConfig(protocol="messy", extraction="exact", opinion_rate=0.25))
    assert (p.name, p.extraction, p.opinion_rate, p.extractor) == ("messy", "exact", 0.25, None)
    ex = object()
    p = protocol_of(cfg, SimpleNamespace(name="openai/m1", decision_mode="generate"), ex)
    assert (p.name, p.extraction, p.extractor) == ("messy", "model", ex)
    p = protocol_of(RunConfig())
    assert (p.name, p.extraction) == ("scripted", "oracle")


def test_a_protocol_refuses_an_unknown_name_level_or_a_scripted_extraction_other_than_oracle_naming_it():
    with pytest.raises(ValueError) as e:
        Protocol("scripted", "exact")
    assert str(e.value) == ("extraction level 'exact' needs the messy protocol (--protocol messy): the scripted "
                            "discussion says every fact verbatim, its claims are the facts")
    with pytest.raises(ValueError) as e:
        Protocol("natural")
    assert str(e.value) == "protocol 'natural' is not one of scripted, messy"
    with pytest.raises(ValueError) as e:
        Protocol("messy", "guess")
    assert str(e.value).startswith("extraction level 'guess' is not one of oracle, exact, fuzzy")
    assert Protocol("messy", "exact", 0.5).extraction == "exact" and Protocol("scripted", "oracle").name == "scripted"


def test_recorded_features_give_the_same_choice_data_as_the_rebuild_and_none_used_is_empty_data(ledger_rows):
    df, cfg = ledger_rows
    rec, info = rb.recorded_choice_data(df)
    reb, _ = rb.rebuild_choice_data(df.drop(columns=["option_features"]), cfg, templates=["templates/dev"])
    assert info["used"] == 40 and rec.X.shape == (40, 3, 4)
    for a, b in ((rec.X, reb.X), (rec.choice, reb.choice), (rec.template, reb.template), (rec.count, reb.count)):
        assert a.dtype == b.dtype and a.tolist() == b.tolist()
    assert rec.template.dtype == object                         # template ids as Python strings, as the rebuild's
    d = df.assign(invalid=True)
    data, info = rb.recorded_choice_data(d)
    assert (info["used"], info["invalid"], info["policies_rebuilt"]) == (0, 40, [])
    assert data.X.shape == (0, 3, 4) and data.choice.shape == (0,) and data.template.shape == (0,)


def test_a_row_outside_the_runs_variants_or_templates_is_refused_naming_the_list_it_is_not_in(written_run):
    df, header, _ = written_run
    d = df.copy()
    d.loc[5, "variant"] = "SSS"
    e = _refusal(d, header)
    assert e.problem == (f"row 5 (template_id {d.template_id[5]}, variant SSS, seed 0, policy {d.policy[5]}, "
                         f"budget_label {d.budget_label[5]}): rule run grid: variant 'SSS' is not in the run "
                         f"(run.json's config's variant list)")
    d = df.copy()
    d.loc[1, "template_id"] = "dev-nowhere-09"
    e = _refusal(d, header)
    assert e.problem.startswith("row 1 (template_id dev-nowhere-09, variant PSP, seed 0, ")
    assert e.problem.endswith("rule run grid: template_id 'dev-nowhere-09' is not in the run (run.json's "
                              "templates_sha256)")


def test_the_runs_budgets_are_matched_by_their_labels_so_0_60_allows_rows_labelled_0_6(written_run):
    df, header, _ = written_run
    assert set(df.budget_label) == {"0.6", "none"}
    verify_table(df, dict(header, config=dict(header["config"], budgets=["0.60"])), "r/results.parquet")
    e = _refusal(df, dict(header, config=dict(header["config"], budgets=["0.5"])))
    assert "rule run grid: budget_label '0.6' is not in the run (run.json's config's budget_label list)" in e.problem


def test_the_plan_counts_a_summary_per_budget_and_each_budgets_summary_its_own_decision_call():
    plan = call_plan(RunConfig(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0], variants=["PSP"],
                               budgets=["0.4", "0.8"], policies=["B3", "R1"]))
    assert plan["calls"] == {"b3": 2, "decision": 4, "total": 6}
    assert (plan["decisions"], plan["deduplicated_decisions"], plan["distinct_decision_prompts"]) == (4, 0, 4)
    assert plan["per_policy"] == {"B3": 2, "R1": 2}


# --- relevance_filter: R1-rel's kept composition under a noisy filter, per task and draw -----------------------------

def test_tiering_draws_twenty_filters_per_psp_task_of_seeds_0_to_2_at_budget_0_6_by_default(hospital):
    df = rf.tiering_compositions([hospital], default_tokenizer(), 0.7, 0.8)
    assert list(df.columns) == ["template_id", "variant", "seed", "draw", "precision", "recall", "kept_support",
                                "kept_decoy", "kept_irrelevant", "realised_precision", "realised_recall"]
    assert df.groupby(["variant", "seed"]).size().to_dict() == {("PSP", 0): 20, ("PSP", 1): 20, ("PSP", 2): 20}
    assert df.draw.tolist() == list(range(20)) * 3 and set(df.template_id) == {"dev-hospital-01"}
    assert df[["kept_support", "kept_decoy", "kept_irrelevant"]].sum().to_dict() == \
        {"kept_support": 259, "kept_decoy": 93, "kept_irrelevant": 185}
    assert df[["kept_support", "kept_decoy", "kept_irrelevant"]].head(3).to_dict("records") == [
        {"kept_support": 4, "kept_decoy": 2, "kept_irrelevant": 3}, {"kept_support": 5, "kept_decoy": 1,
                                                                      "kept_irrelevant": 3},
        {"kept_support": 5, "kept_decoy": 1, "kept_irrelevant": 3}]
    assert df.realised_precision.head(5).round(6).tolist() == [0.777778, 0.727273, 0.7, 0.8, 0.6]


def test_a_tiering_row_is_the_task_the_draw_and_the_filters_realised_precision_and_recall(hospital):
    df = rf.tiering_compositions([hospital], default_tokenizer(), 0.7, 0.8, variants=("PPS",), seeds=(4,),
                                 budget="0.4", draws=3, n_agents=3, seed=2)
    common = dict(template_id="dev-hospital-01", variant="PPS", seed=4, precision=0.7, recall=0.8)
    assert df.to_dict("records") == [
        dict(common, draw=0, kept_support=4, kept_decoy=2, kept_irrelevant=0, realised_precision=6 / 9,
             realised_recall=1.0),
        dict(common, draw=1, kept_support=3, kept_decoy=2, kept_irrelevant=0, realised_precision=7 / 9,
             realised_recall=7 / 8),
        dict(common, draw=2, kept_support=4, kept_decoy=2, kept_irrelevant=0, realised_precision=5 / 8,
             realised_recall=5 / 8)]


# --- verify: each rule's refusal, whole -------------------------------------------------------------------------------

def _where(df, template="dev-hospital-01", policy="R1"):
    return int(((df.template_id == template) & (df.policy == policy)).to_numpy().nonzero()[0][0])


def _key(df, i):
    r = df.loc[i]
    return (f"row {i} (template_id {r.template_id}, variant {r.variant}, seed {r.seed}, policy {r.policy}, "
            f"budget_label {r.budget_label})")


def test_a_missing_or_malformed_run_header_is_refused_with_the_rule_and_what_it_is(written_run):
    df, header, _ = written_run
    assert _refusal(df, None).problem == ("rule run header: there is no run.json beside it (the run's record: its "
                                          "rows, templates and grid)")
    assert _refusal(df, [1, 2]).problem == "rule run header: run.json is a list, not a JSON object"
    no_hashes = ("rule run header: run.json records no templates_sha256 (a run made before runs recorded their "
                 "templates), so the answer key cannot be checked")
    assert _refusal(df, {k: v for k, v in header.items() if k != "templates_sha256"}).problem == no_hashes
    assert _refusal(df, dict(header, templates_sha256={})).problem == no_hashes
    assert _refusal(df, dict(header, templates_sha256=["dev-hospital-01"])).problem == no_hashes
    assert _refusal(df, dict(header, rows=True)).problem == "rule run header: run.json's rows is True, not a row count"
    assert _refusal(df, dict(header, rows="30")).problem == "rule run header: run.json's rows is '30', not a row count"


def test_a_row_outside_the_runs_seeds_is_refused_and_a_budget_that_is_no_budget_is_matched_as_written(written_run):
    df, header, _ = written_run
    d = df.copy()
    d["seed"] = d["seed"].where(d.index != 7, 9)
    e = _refusal(d, header)
    # the value as the user wrote it: 9, not numpy's np.int64(9)
    assert e.problem == f"{_key(d, 7)}: rule run grid: seed 9 is not in the run (run.json's config's seed list)"
    d = df.copy()
    d.loc[d.budget_label == "0.6", "budget_label"] = "half"
    verify_table(d, dict(header, config=dict(header["config"], budgets=["half"])), "r/results.parquet")
    e = _refusal(d, header)
    assert "rule run grid: budget_label 'half' is not in the run (run.json's config's budget_label list)" in e.problem


def test_a_decision_that_is_not_an_option_is_refused_listing_the_options_and_an_empty_one_is_a_non_decision(
        written_run):
    df, header, _ = written_run
    i = _where(df)
    d = df.copy()
    d.loc[i, ["decision", "correct", "chose_decoy"]] = ["zeta", False, False]
    assert _refusal(d, header).problem == (f"{_key(d, i)}: rule decision: decision 'zeta' is not an option of "
                                           f"template dev-hospital-01 (corvane, helix, medora)")
    for empty in ("", None):
        d = df.copy()
        d["decision"] = d["decision"].astype(object)
        d.loc[i, ["decision", "correct", "chose_decoy", "invalid"]] = [empty, False, False, True]
        verify_table(d, header, "r/results.parquet")


def test_an_answer_key_refusal_says_the_decision_its_invalid_mark_and_the_value_the_template_makes(written_run):
    df, header, _ = written_run
    i = _where(df)
    d = df.copy()
    d.loc[i, ["decision", "correct", "chose_decoy", "invalid"]] = ["helix", False, False, False]
    assert _refusal(d, header).problem == (f"{_key(d, i)}: rule answer key: correct is False, but decision 'helix' "
                                           f"with the template's correct option 'helix' makes it True")
    d.loc[i, ["correct", "chose_decoy", "invalid"]] = [False, True, True]
    assert _refusal(d, header).problem == (f"{_key(d, i)}: rule answer key: chose_decoy is True, but decision "
                                           f"'helix' (invalid) with the template's decoy option 'corvane' makes it "
                                           f"False")


def test_a_missing_answer_key_value_counts_as_false(written_run):
    df, header, _ = written_run
    i = _where(df)
    d = df.copy()
    d["correct"] = d["correct"].astype("boolean")
    d.loc[i, ["decision", "invalid"]] = ["medora", False]
    d.loc[i, "correct"] = pd.NA
    d.loc[i, "chose_decoy"] = False
    verify_table(d, header, "r/results.parquet")
    d.loc[i, "decision"] = "helix"                  # NA is False, but helix is the correct option
    assert "rule answer key: correct is False, but decision 'helix'" in _refusal(d, header).problem


def test_kept_counts_are_bounded_by_the_templates_facts_of_that_role(written_run):
    df, header, _ = written_run
    i = _where(df, policy="ALL")
    assert tuple(df.loc[i, ["kept_support", "kept_decoy", "kept_irrelevant"]]) == (5, 3, 4)   # hospital: 5, 3, 4
    for col, n, role in (("kept_support", 6, "support"), ("kept_decoy", 4, "decoy"),
                         ("kept_irrelevant", 5, "irrelevant")):
        d = df.copy()
        d.loc[i, col] = n
        d.loc[i, "n_kept"] = 20
        d.loc[i, "n_claims"] = 20
        assert _refusal(d, header).problem == (f"{_key(d, i)}: rule value ranges: {col} = {n}, outside 0..{n - 1} "
                                               f"(the template's {role} facts)")


def test_n_kept_below_the_sum_of_the_three_kept_counts_is_refused(written_run):
    df, header, _ = written_run
    i = _where(df, policy="ALL")
    d = df.copy()
    d.loc[i, "n_kept"] = 11                                           # 5 + 3 + 4 = 12 kept
    assert _refusal(d, header).problem == (f"{_key(d, i)}: rule value ranges: n_kept is below kept_support + "
                                           f"kept_decoy + kept_irrelevant")


def test_a_net_lead_above_the_kept_support_and_decoy_or_negative_memory_tokens_are_refused(written_run):
    df, header, _ = written_run
    i = _where(df, policy="ALL")
    d = df.copy()
    d.loc[i, "net_lead"] = -9                                         # |-9| > 5 + 3
    assert _refusal(d, header).problem == (f"{_key(d, i)}: rule value ranges: |net_lead| is above kept_support + "
                                           f"kept_decoy")
    d = df.copy()
    d.loc[i, "memory_tokens"] = -1
    assert _refusal(d, header).problem == f"{_key(d, i)}: rule value ranges: memory_tokens is negative"


def test_a_duplicate_is_the_same_grid_key_whatever_else_differs_and_needs_all_five_key_columns(written_run):
    df, header, _ = written_run
    extra = df.iloc[[3]].assign(memory_tokens=df.memory_tokens.iloc[3] + 1, decision_letter="Z")
    d = pd.concat([df, extra], ignore_index=True)
    assert _refusal(d, dict(header, rows=len(d))).problem.endswith(
        "rule duplicate row: the same decision as row 3")
    verify_table(d.drop(columns=["budget_label"]), dict(header, rows=len(d)), "r/results.parquet")


def test_a_missing_template_file_lists_at_most_three_files_of_that_id_found(own_templates_run, tmp_path):
    df, header, base = own_templates_run
    src = (ROOT / "templates" / "dev" / "dev-hospital-01.yaml").read_text()
    for n in "abc":
        (tmp_path / f"{n}.yaml").write_text(src + f"\n# copy {n}\n")
    gone = dict(header, config=dict(header["config"], templates=[str(base / "gone")]))
    hosp = df[df.template_id == "dev-hospital-01"].reset_index(drop=True)
    with pytest.raises(EditedTable) as e:
        verify_table(hosp, dict(gone, rows=len(hosp)), "r/results.parquet", templates=[str(tmp_path)])
    want = header["templates_sha256"]["dev-hospital-01"]
    found = ", ".join(f"{tmp_path / n}.yaml (sha256 {file_sha256(tmp_path / f'{n}.yaml')[:12]}...)" for n in "abc")
    assert e.value.problem == (f"{_key(hosp, 0)}: rule template hashes: no template file with the SHA-256 run.json "
                               f"records for dev-hospital-01 ({want[:12]}...) is here; found {found} (pass the "
                               f"run's templates with --templates), so its answer key cannot be recomputed")


# --- pipeline: a unit's memories, one per policy and budget (unbudgeted policies once) -------------------------------

def test_memories_are_one_per_policy_and_budget_keyed_by_prefix_policy_and_budget_label(hospital):
    from crossprofile_lib.config import Budget
    from crossprofile_lib.run.pipeline import memories, specs_of
    u = build_task(hospital, "PSP", 0, tokenizer=default_tokenizer())
    assert u.t_all == 396
    asked = []

    def rng_for(spec, key):
        asked.append((spec.name, key))
        return policy_rng(0)(spec, key)
    items = list(memories(u, specs_of(["R1", "ALL", "R1-rel-oracle", "BAL-oracle", "Random"]),
                          [Budget("0.4"), Budget("128t")], ReferenceDecider(tokenizer=default_tokenizer()), "K",
                          rng_for))
    got = [(m.spec.name, m.budget.label if m.budget else None, m.budget_tokens, m.key, m.relevance is not None,
            m.relevance_kind, m.stance_kind, m.memory.n_kept) for m in items]
    assert got == [("R1", "0.4", 158, "K/R1/0.4", False, "", "", 6),            # 0.4 x 396 = 158.4
                   ("R1", "128t", 128, "K/R1/128t", False, "", "", 5),
                   ("ALL", None, None, "K/ALL/-", False, "", "", 12),
                   ("R1-rel-oracle", "0.4", 158, "K/R1-rel-oracle/0.4", True, "oracle", "", 6),
                   ("R1-rel-oracle", "128t", 128, "K/R1-rel-oracle/128t", True, "oracle", "", 5),
                   ("BAL-oracle", "0.4", 158, "K/BAL-oracle/0.4", False, "", "oracle", 5),
                   ("BAL-oracle", "128t", 128, "K/BAL-oracle/128t", False, "", "oracle", 5),
                   ("Random", "0.4", 158, "K/Random/0.4", False, "", "", 6),
                   ("Random", "128t", 128, "K/Random/128t", False, "", "", 5)]
    assert asked == [(n, k) for n, _, _, k, *_ in got]
    assert [m.memory.tokens for m in items] == [141, 117, 315, 152, 119, 136, 127, 156, 127]


def test_a_model_runs_report_counts_calls_invalid_answers_missing_letters_and_prints_the_headroom_verdict(
        ledger_rows, capsys):
    df, _ = ledger_rows
    d = df[df.policy.isin(["R1", "ALL", "EMPTY"])].reset_index(drop=True)
    d.loc[[0, 4], "invalid"] = True
    header = {"errors": 1}
    _report_model_run(d, SimpleNamespace(name="openai/m", decision_mode="score",
                                         stats={"calls": 5, "cached": 1, "letters_missing": 2}), header)
    assert capsys.readouterr().out.splitlines() == [
        "openai/m [score]: 5 model calls, 1 cache hits, 2 invalid answers, 1 errors",
        "score mode: 2 decisions had option letters outside the log-probabilities the server returned (top 20); "
        "they count as -inf (column letters_missing)",
        "headroom check: ALL - EMPTY = +100.0 points (95% CI +100.0 to +100.0); PASS -> results are confirmatory"]
    assert header["calls"] == {"cached": 1, "calls": 5, "letters_missing": 2} and header["status"] == "confirmatory"
    same = d.assign(correct=d.correct | (d.policy == "EMPTY"))          # EMPTY as right as ALL: no headroom
    header = {"errors": 0}
    _report_model_run(same, SimpleNamespace(name="openai/m", decision_mode="generate", stats={}), header)
    assert capsys.readouterr().out.splitlines() == [
        "openai/m [generate]: 0 model calls, 0 cache hits, 2 invalid answers, 0 errors",
        "headroom check: ALL - EMPTY = +0.0 points (95% CI +0.0 to +0.0); FAIL -> results are exploratory"]
    assert header["calls"] == {} and header["status"] == "exploratory" and header["headroom"]["passed"] is False
    header = {"errors": 0}
    _report_model_run(d[d.policy == "R1"], SimpleNamespace(name="m", decision_mode="generate", stats={}), header)
    assert capsys.readouterr().out.splitlines()[-1] == ("headroom check: not run (the run has no ALL and EMPTY rows "
                                                        "to check headroom); results are exploratory")
    assert header["headroom"]["estimate"] is None and header["status"] == "exploratory"


def test_the_run_header_counts_rows_failed_calls_and_invalid_answers_and_a_ledger_run_has_no_model_fields(tmp_path):
    cfg = dict(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0], budgets=["0.6"], variants=["PSP"],
               policies=["R1", "ALL", "EMPTY"])
    replies = iter([ChatResult("", error="HTTP 500: down"), "no idea", "Decision: B", "still no idea"])  # retry last
    df, header = run_to_dir(RunConfig(backend="scripted/s1", **cfg), tmp_path / "m",
                            backend=Scripted(lambda r: next(replies)))
    assert df[["policy", "error", "invalid", "decision"]].values.tolist() == [
        ["R1", "HTTP 500: down", False, ""], ["ALL", "", True, ""], ["EMPTY", "", False, "helix"]]
    assert (header["rows"], header["errors"], header["invalid"]) == (3, 1, 1)
    assert header["cache"] == ":memory:" and header["calls"]["calls"] == 4 and header["status"] == "exploratory"
    written = json.loads((tmp_path / "m" / "run.json").read_text())
    assert (written["rows"], written["errors"], written["invalid"]) == (3, 1, 1)
    _, header = run_to_dir(RunConfig(**cfg), tmp_path / "l")
    assert (header["rows"], header["errors"], header["invalid"]) == (3, 0, 0)
    assert not {"cache", "calls", "headroom", "status"} & set(header)
    assert header["templates_sha256"] == {"dev-hospital-01": file_sha256(ROOT / "templates" / "dev" /
                                                                         "dev-hospital-01.yaml")}


def test_the_plan_asks_one_filter_and_one_stance_call_per_unit_and_a_summary_per_unit_and_budget():
    two = ["templates/dev/dev-hospital-01.yaml", "templates/dev/dev-bridge-contractor-01.yaml"]
    cfg = dict(templates=two, seeds=[0, 1], variants=["PSP"], budgets=["0.4", "0.8"])      # 4 units, 2 budgets
    plan = call_plan(RunConfig(policies=["B3", "R1-rel", "BAL"], **cfg))
    assert plan["calls"] == {"b3": 8, "decision": 18, "relevance": 4, "stance": 4, "total": 34}
    assert (plan["decisions"], plan["deduplicated_decisions"], plan["distinct_decision_prompts"]) == (24, 6, 18)
    assert plan["per_policy"] == {"B3": 8, "R1-rel": 8, "BAL": 2}
    plan = call_plan(RunConfig(policies=["R1-rel-oracle", "BAL-oracle", "R1"], **cfg))   # oracle inputs: no calls
    assert plan["calls"] == {"decision": 16, "total": 16}
    assert (plan["templates"], plan["variants"], plan["seeds"]) == (2, 1, 2)


def test_the_dry_run_widens_to_the_longest_policy_and_in_score_mode_promises_no_retries():
    plan = {"decision_mode": "score", "templates": 10, "variants": 8, "seeds": 30, "decisions": 12_000,
            "per_policy": {"R1-rel-oracle:unlabeled": 6_000, "BAL": 1_500}, "tokenizer": "vocab:qwen2.5",
            "calls": {"decision": 7_500, "stance": 2_400, "total": 9_900}}
    assert describe(plan, "openai/m", "paper grid", rate=(1.5, "measured")) == [
        "dry run: openai/m (score mode); paper grid; 2,400 task units, 12,000 decisions",
        "  policy                   decision calls",
        "  R1-rel-oracle:unlabeled       6,000",
        "  BAL                           1,500",
        "  BAL stances                   2,400",
        "total: 9,900 model calls; a fresh cache (calls already cached are not sent); budgets priced with "
        "vocab:qwen2.5",
        "estimate: 9,900 calls at 1.50 calls/s = 1 h 50 min (rate: measured)"]
    assert describe(plan, "ledger", "g", model_calls=False) == [
        "dry run: ledger (score mode); g; 2,400 task units, 12,000 decisions",
        "total: 12,000 decisions; the reference decider makes no model calls"]


def test_a_burst_is_twenty_or_more_calls_at_most_120_s_apart_over_a_positive_span():
    every_120 = [120.0 * i for i in range(20)]                  # 20 calls, gaps of exactly 120 s: one burst
    rate, src = measured_rate(_Timeline(every_120), "p", "m")
    assert rate == 19 / 2280 and src.startswith("measured on 20 calls of p/m stored in /c/calls.sqlite, ending ")
    assert src.endswith("1970-01-01 00:38 UTC")                  # the last call: 2280 s
    assert measured_rate(_Timeline([120.5 * i for i in range(20)]), "p", "m") is None     # each gap ends a burst
    assert measured_rate(_Timeline([5.0] * 25), "p", "m") is None                         # no time span
    late = [0.0] * 5 + [500.0 + i for i in range(20)]           # the latest burst: the last 20 calls, 1 s apart
    assert measured_rate(_Timeline(late), "p", "m")[0] == 1.0


class _RecordingBackend(SimpleNamespace):
    def record(self):
        return {"request_fields": {"temperature": 0, "api_key": "sk-secret123456"}, "served_model": "m-2025"}


def test_the_run_header_names_the_backend_its_tokenizer_and_version_and_redacts_the_backends_record():
    from crossprofile_lib import __version__
    from crossprofile_lib.run.results import run_header
    h = run_header(RunConfig(policies=["R1"], **SMALL), ReferenceDecider())
    assert h["git_commit"] is None or isinstance(h["git_commit"], str)     # None where the code is not in a checkout
    assert {k: v for k, v in h.items() if k not in ("config", "git_commit")} == {
        "backend": "ledger", "model": "reference-decider(sp=0,irr=0,beta=inf)", "decision_mode": "ledger",
        "tokenizer": "offline-bpe-approx-v1", "tokenizer_source": "given (--tokenizer) or the offline default",
        "package_version": __version__}
    assert h["config"]["policies"] == ("R1",) and h["config"]["seeds"] == (0,) and "protocol" not in h["config"]
    b = _RecordingBackend(name="openai/m", model="m", decision_mode="generate", tokenizer=SimpleNamespace(name="tok"),
                          tokenizer_source="src")
    h = run_header(RunConfig(backend="openai/m", policies=["R1"], **SMALL), b)
    assert {k: v for k, v in h.items() if k not in ("config", "git_commit")} == {
        "backend": "openai/m", "model": "m", "decision_mode": "generate", "tokenizer": "tok",
        "tokenizer_source": "src", "package_version": __version__,
        "request_fields": {"temperature": 0, "api_key": "***"}, "served_model": "m-2025"}


def test_the_run_header_is_read_beside_the_results_file_and_must_be_a_json_object(tmp_path):
    from crossprofile_lib.run.results import read_header
    f = tmp_path / "run.json"
    for arg in (tmp_path, tmp_path / "results.parquet"):
        with pytest.raises(ResultsError) as e:
            read_header(arg)
        assert str(e.value) == f"{f}: no run header"
    f.write_text("[1]")
    with pytest.raises(ResultsError) as e:
        read_header(tmp_path / "results.parquet")
    assert str(e.value) == f"{f}: must be a JSON object (the run header), found a list"
    f.write_text("{bad")
    with pytest.raises(ResultsError) as e:
        read_header(tmp_path)
    assert str(e.value) == (f"{f}: field '<file>': json (syntax): not valid JSON: Expecting property name enclosed in "
                            f"double quotes (line 1, column 2)")
    f.write_text('{"rows": 3, "config": {}}')
    assert read_header(tmp_path / "results.parquet") == {"rows": 3, "config": {}}


class _Draws:
    """A generator stand-in: random(n) gives the next of the given draws, which must have length n."""

    def __init__(self, *draws):
        self.draws = list(draws)

    def random(self, n):
        d = self.draws.pop(0)
        assert len(d) == n
        return np.array(d)


def test_the_noisy_filter_keeps_relevant_claims_below_recall_and_lets_others_in_below_q():
    # truth {1, 3, 5} of 8: kept where the draw < 0.8; q = 3 * 0.8 * (1 - 0.5) / (0.5 * 5 others) = 0.48
    got = rf.noisy_filter(frozenset({5, 1, 3}), 8, 0.5, 0.8, _Draws([0.1, 0.85, 0.79], [0.47, 0.49, 0.9, 0.0, 0.5]))
    assert got == frozenset({1, 5, 0, 6})
    # q = 1 * 1.0 * 0.9 / (0.1 * 2) = 4.5, capped at 1: every other claim is let in
    assert rf.noisy_filter(frozenset({0}), 3, 0.1, 1.0, _Draws([0.999], [0.999, 0.5])) == frozenset({0, 1, 2})
    # precision 1: q = 0, nothing else is let in; no other claims: q is 0 and no draw is spent on them
    assert rf.noisy_filter(frozenset({2}), 4, 1.0, 0.0, _Draws([0.0], [0.0, 0.0, 0.0])) == frozenset()
    assert rf.noisy_filter(frozenset({0, 1}), 2, 0.5, 0.5, _Draws([0.2, 0.7], [])) == frozenset({0})
    for p, r in ((0.0, 0.5), (1.01, 0.5), (0.5, -0.1), (0.5, 1.01)):
        with pytest.raises(ValueError) as e:
            rf.noisy_filter(frozenset({0}), 3, p, r, _Draws())
        assert str(e.value) == "precision must be in (0, 1] and recall in [0, 1]"


def test_results_are_written_as_parquet_without_the_index_and_run_json_sorted_indented_and_ending_in_a_newline(
        ledger_rows, tmp_path):
    df, _ = ledger_rows
    part = df[df.policy == "ALL"]                                   # index 2, 6, 10, ...: not a range
    out = tmp_path / "a" / "b"
    path = write_results(part, out, {"z": 1, "a": [1, 2], "p": Path("x/y")})
    assert path == out / "results.parquet"
    back = pd.read_parquet(path)
    assert list(back.columns) == list(part.columns) and back.index.tolist() == list(range(10))
    pd.testing.assert_frame_equal(back, part.reset_index(drop=True), check_dtype=False)
    assert (out / "run.json").read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "p": "x/y",\n  "z": 1\n}\n'


def _filter_rows(reply):
    cfg = RunConfig(backend="scripted/s1", templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0],
                    budgets=["0.6"], policies=["R1-rel", "R1"], variants=["PSP"])
    df = run_grid(cfg, backend=Scripted(lambda r: reply if r.purpose == "relevance" else "Decision: A"))
    return df.set_index("policy")


def test_a_model_filters_failed_call_is_the_rows_error_and_its_answer_is_scored_against_the_roles():
    df = _filter_rows(ChatResult("", error="HTTP 503: filter down"))
    assert df.loc["R1-rel", "error"] == "HTTP 503: filter down" and df.loc["R1", "error"] == ""
    assert (df.loc["R1-rel", "relevance_filter"], df.loc["R1", "relevance_filter"]) == ("model", "")
    df = _filter_rows('{"relevant": [1, 2, 3]}')        # claims 1-3: two of the hospital's 5 + 3 relevant facts
    r = df.loc["R1-rel"]
    assert (r.error, bool(r.relevance_invalid), r.relevance_precision, r.relevance_recall) == ("", False, 2 / 3, 0.25)
    assert np.isnan(df.loc["R1", "relevance_precision"]) and np.isnan(df.loc["R1", "relevance_recall"])
    df = _filter_rows("no list here")
    assert bool(df.loc["R1-rel", "relevance_invalid"]) and not bool(df.loc["R1", "relevance_invalid"])


def test_a_fixed_budget_has_no_ratio_and_an_unbudgeted_policy_is_labelled_none_with_minus_one_tokens():
    df = run_grid(RunConfig(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0], budgets=["128t", "0.5"],
                            variants=["PSP"], policies=["R1", "ALL", "EMPTY"]))
    got = df[["policy", "budget_label", "budget_ratio", "budget_tokens", "memory_tokens", "n_kept",
              "memory_kind"]].fillna(-9.0).values.tolist()
    assert got == [["R1", "128t", -9.0, 128, 117, 5, "claims"],
                   ["R1", "0.5", 0.5, 198, 191, 8, "claims"],              # 0.5 x T_all 396
                   ["ALL", "none", -9.0, -1, 315, 12, "claims"],
                   ["EMPTY", "none", -9.0, -1, 0, 0, "empty"]]


def test_a_model_extraction_run_uses_the_extractor_it_is_given_once_per_unit_and_progress_is_the_callers():
    cfg = RunConfig(backend="scripted/s1", templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0],
                    budgets=["0.6"], policies=["ALL"], variants=["PSP"], protocol="messy", extraction="model")
    seen = []

    def one_claim_per_line(utterances):
        seen.append(len(utterances))
        return [[i] for i in range(len(utterances))]
    backend = Scripted(lambda r: "Decision: A")
    df = run_grid(cfg, backend=backend, extractor=one_claim_per_line, progress=True)
    assert seen == [25] and backend.progress is True
    r = df.iloc[0]
    assert (r.extraction, r.n_claims, r.n_kept, r.merge_recall, r.split_rate) == ("model", 25, 25, 0.0, 1.0)
    quiet = Scripted(lambda r: "Decision: A")
    run_grid(RunConfig(backend="scripted/s1", policies=["ALL"], **SMALL), backend=quiet)
    assert quiet.progress is False


def test_the_rebuild_takes_loaded_templates_the_runs_option_count_and_its_tokenizer(ledger_rows, dev_templates,
                                                                                      named_vocabs):
    df, cfg = ledger_rows
    old = df.drop(columns=["option_features"])
    data, info = rb.rebuild_choice_data(old, cfg, templates=dev_templates)          # loaded, not paths
    assert info["used"] == 40 and len(data) == 40
    with pytest.raises(ValueError) as e:
        rb.rebuild_choice_data(old, dict(asdict(cfg), n_options=2), "templates/dev")
    assert "expected 2 options, found 3" in str(e.value)
    qcfg = RunConfig(policies=["R1", "ALL"], tokenizer="qwen2.5", templates=["templates/dev"], seeds=[0],
                     budgets=["96t"], variants=["PSP"])                             # 96 of its tokens
    qdf = run_grid(qcfg).drop(columns=["option_features"])
    data, info = rb.rebuild_choice_data(qdf, asdict(qcfg), "templates/dev")
    assert (info["used"], info["memory_mismatch"]) == (20, 0)
    _, info = rb.rebuild_choice_data(qdf, dict(asdict(qcfg), tokenizer=None), "templates/dev")
    assert info["memory_mismatch"] > 0                      # the offline tokenizer's budgets keep other claims


def test_a_rebuilt_row_whose_decision_is_not_among_its_options_is_left_out_as_not_rebuilt(ledger_rows):
    df, cfg = ledger_rows
    d = df.drop(columns=["option_features"]).copy()
    d.loc[5, "decision"] = "zeta"
    data, info = rb.rebuild_choice_data(d, asdict(cfg), "templates/dev")
    assert (info["used"], info["not_rebuilt"], info["invalid"], info["memory_mismatch"]) == (39, 1, 0, 0)
    assert info["left_out_by_policy"] == {d.loc[5, "policy"]: 1} and len(data) == 39


def test_a_task_has_four_agents_by_default_and_its_total_is_given_or_priced_with_the_tokenizer(hospital):
    u = build_task(hospital, "PSP", 0, tokenizer=default_tokenizer())
    assert u.task.n_agents == 4 and u.t_all == 396 and u.merge is None and u.protocol.name == "scripted"
    assert sorted({x.speaker for x in u.transcript.utterances}) == ["A1", "A2", "A3", "A4"]
    assert build_task(hospital, "PSP", 0, 5, tokenizer=default_tokenizer()).t_all == 432    # five agents' labels
    assert build_task(hospital, "PSP", 0, total=77).t_all == 77                              # no tokenizer needed
    assert build_task(hospital, "PSP", 0, tokenizer=default_tokenizer(), total=77).t_all == 77
    with pytest.raises(ValueError) as e:
        build_task(hospital, "PSP", 0)
    assert str(e.value) == "template dev-hospital-01: build_task needs a tokenizer (or T_all) to price the budgets"


def test_the_plan_is_the_whole_record_of_the_grid_in_generate_mode_by_default():
    cfg = RunConfig(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0, 1], variants=["PSP", "PPS"],
                    budgets=["0.6"], policies=["R1", "ALL"])
    t0 = time.perf_counter()
    plan = call_plan(cfg)
    took = time.perf_counter() - t0
    counted = plan.pop("counted_in_s")
    assert 0 <= counted <= round(took, 2) + 0.01 and counted == round(counted, 2)
    assert plan == {"calls": {"decision": 8, "total": 8}, "decisions": 8, "templates": 1, "variants": 2, "seeds": 2,
                    "budgets": list(cfg.budgets), "policies": ["R1", "ALL"], "decision_mode": "generate",
                    "tokenizer": "offline-bpe-approx-v1", "deduplicated_decisions": 0,
                    "per_policy": {"R1": 4, "ALL": 4}, "distinct_decision_prompts": 8,
                    "not_counted": "format-reminder retries of unparsable generate answers (at most one per decision "
                                   "call) and transport retries of failed calls"}


def test_a_broken_template_file_beside_the_runs_file_is_passed_over(own_templates_run, tmp_path):
    df, header, base = own_templates_run
    (tmp_path / "a_broken.yaml").write_text("id: [not a template\n")
    (tmp_path / "b.yaml").write_text((base / "made" / "hospital.yaml").read_text())
    gone = dict(header, config=dict(header["config"], templates=[str(base / "gone")]))
    hosp = df[df.template_id == "dev-hospital-01"].reset_index(drop=True)
    verify_table(hosp, dict(gone, rows=len(hosp)), "r/results.parquet", templates=[str(tmp_path)])
    with pytest.raises(EditedTable):                                   # without that folder: only the bundled file
        verify_table(hosp, dict(gone, rows=len(hosp)), "r/results.parquet")


def test_the_rebuild_key_is_sorted_json_of_the_config_without_templates_and_the_given_files_digest():
    from crossprofile_lib.config import Budget
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"     # sha256 of nothing
    assert rb.rebuild_inputs_key({"z": 1, "budgets": [Budget("0.6")], "templates": ["nowhere/x"]}) == \
        '{"config": {"budgets": ["0.6"], "z": 1}, "files": "' + empty + '"}'
    assert rb.rebuild_inputs_key(None) == '{"config": {}, "files": "' + empty + '"}'
    one = "templates/dev/dev-hospital-01.yaml"
    key = rb.rebuild_inputs_key({"seeds": [0], "templates": ["nowhere/x"]}, templates=one)
    assert key == rb.rebuild_inputs_key({"seeds": [0]}, templates=[one]) == \
        rb.rebuild_inputs_key({"seeds": [0], "templates": [one]})
    assert json.loads(key)["files"] != empty


class _ListFilter(_InputsBackend):
    relevance_kind = "model-json"

    def relevance(self, task, claims):
        self.asked.append(("relevance", task, tuple(claims)))
        return [1, 0]                                           # a plain list, not a Relevance


def test_the_model_relevance_is_asked_once_with_the_units_task_and_claims_and_a_plain_answer_becomes_tiers():
    b = _ListFilter()
    x = TaskInputs(SimpleNamespace(task="T", claims=("c1", "c2", "c3")), b, oracle_rel=lambda claims, task: {2})
    rel, kind = x.relevance("model")
    assert rel == frozenset({0, 1}) and isinstance(rel, Relevance) and kind == "model-json"
    assert x.relevance("model") == (rel, "model-json")
    assert b.asked == [("relevance", "T", ("c1", "c2", "c3"))]
    rel, kind = x.relevance("oracle")
    assert rel == frozenset({2}) and isinstance(rel, Relevance) and kind == "oracle" and x.truth == frozenset({2})
    assert len(b.asked) == 1


class _Prefetching:
    capabilities = frozenset({"summarise", MODEL_RELEVANCE, MODEL_STANCES})

    def __init__(self):
        self.batches = []

    def prefetch(self, relevance, summaries, stances):
        self.batches.append((relevance, summaries, stances))


def test_the_prefetch_batch_holds_each_units_filter_and_stance_inputs_and_a_summary_prompt_per_unit_and_budget(
        hospital):
    from crossprofile_lib.config import Budget
    from crossprofile_lib.policies.b3 import summary_prompt
    from crossprofile_lib.run.pipeline import prefetch, specs_of
    units = [build_task(hospital, "PSP", s, tokenizer=default_tokenizer()) for s in (0, 1)]
    pairs = [(u.task, u.claims) for u in units]
    budgets = [Budget("0.4"), Budget("0.8")]
    for policies, want in ((["R1", "ALL"], None), (["R1-rel"], (pairs, [], [])), (["BAL"], ([], [], pairs)),
                           (["R1-rel-oracle", "BAL-oracle"], None)):
        b = _Prefetching()
        prefetch(units, specs_of(policies), budgets, b)
        assert b.batches == ([] if want is None else [want]), policies
    b = _Prefetching()
    prefetch(units, specs_of(["B3", "R1-rel", "BAL"]), budgets, b)
    (rel, summ, st), = b.batches
    assert rel == pairs and st == pairs
    assert summ == [summary_prompt(u.task, u.transcript, t) for u in units for t in (158, 316)]  # 0.4, 0.8 x 396, floored


def test_a_backend_without_a_capability_cannot_run_b3_and_without_roles_to_fall_back_on_model_sourced_inputs():
    from crossprofile_lib.run.pipeline import unsupported
    grid = ["B3", "R1", "R1-rel", "BAL", "R1-rel-oracle", "BAL-oracle"]
    b3 = "B3 is a generated summary and needs a language-model backend (this one writes none)"
    assert unsupported(grid, frozenset()) == {"B3": b3}
    assert unsupported(grid, frozenset(), model_inputs=True) == {
        "B3": b3, "R1-rel": "R1-rel needs a model relevance filter (the backend has none)",
        "BAL": "BAL needs a model stance call (the backend has none)"}
    assert unsupported(["R1-rel", "BAL"], frozenset({MODEL_RELEVANCE}), model_inputs=True) == {
        "BAL": "BAL needs a model stance call (the backend has none)"}
    assert unsupported(grid[1:], frozenset({MODEL_RELEVANCE, MODEL_STANCES}), model_inputs=True) == {}


def test_a_grid_the_backend_cannot_run_is_refused_before_any_work_naming_each_policy_and_why():
    why = "B3 is a generated summary and needs a language-model backend (this one writes none)"
    with pytest.raises(ValueError) as e:
        run_grid(RunConfig(policies=["R1", "B3", "B3:unlabeled"], **SMALL))
    assert str(e.value) == f"backend 'ledger' cannot run B3, B3:unlabeled: {why}; {why}"


def test_the_stamps_seconds_are_the_time_since_t0_to_the_millisecond(monkeypatch):
    from crossprofile_lib.run import results as rs
    monkeypatch.setattr(rs.time, "perf_counter", lambda: 1000.123456)
    h = rs.stamp({}, 990.0)
    assert h["seconds"] == 10.123 and set(h) == {"seconds", "created"}


def test_the_commit_is_none_outside_a_repository_or_before_its_first_commit_and_untracked_files_are_not_dirt(
        tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "x").write_text("x")
    (plain / ".git").write_text("gitdir: /nowhere/at/all\n")      # git refuses it: not a repository
    assert git_commit(plain) is None
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    assert git_commit(repo) is None                               # no HEAD yet
    (repo / "a.txt").write_text("a\n")
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-q", "-m", "a")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    (repo / "new.txt").write_text("untracked\n")
    assert git_commit(repo) == head and len(head) == 40
    (repo / "a.txt").write_text("b\n")
    assert git_commit(repo) == head + "-dirty"


def test_the_tiering_summary_is_the_mean_composition_and_filter_quality_per_precision_and_recall():
    df = pd.DataFrame({"precision": [0.9, 0.9, 0.5], "recall": [0.8, 0.8, 0.8], "draw": [0, 1, 0],
                       "kept_support": [4, 2, 1], "kept_decoy": [1, 2, 3], "kept_irrelevant": [0, 1, 5],
                       "realised_precision": [1.0, 0.5, np.nan], "realised_recall": [0.5, 0.25, 0.0]})
    s = rf.tiering_summary(df)
    assert s.fillna(-1.0).to_dict("records") == [
        {"precision": 0.5, "recall": 0.8, "kept_support": 1.0, "kept_decoy": 3.0, "kept_irrelevant": 5.0,
         "realised_precision": -1.0, "realised_recall": 0.0},
        {"precision": 0.9, "recall": 0.8, "kept_support": 3.0, "kept_decoy": 1.5, "kept_irrelevant": 0.5,
         "realised_precision": 0.75, "realised_recall": 0.375}]
    assert np.isnan(s.realised_precision[0])                  # no filter answer of that pair let anything in


def test_a_missing_results_file_is_refused_naming_the_run_to_make(written_run, tmp_path):
    from crossprofile_lib.run.results import read_results
    with pytest.raises(ResultsError) as e:
        read_results(tmp_path)
    assert str(e.value) == f"{tmp_path / 'results.parquet'}: no results file (run 'crossprofile run --out {tmp_path}' " \
                           f"first)"
    _, _, out = written_run
    assert len(read_results(out)) == len(read_results(out / "results.parquet")) == 30


def test_a_random_policys_numbers_are_drawn_from_the_seeds_stream_keyed_by_task_policy_and_budget(hospital):
    import hashlib

    from crossprofile_lib.policies import select_memory
    df = run_grid(RunConfig(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[3], budgets=["0.6"],
                            variants=["PSP"], policies=["Random"]))
    u = build_task(hospital, "PSP", 3, tokenizer=default_tokenizer())
    want = select_memory(parse_policy("Random"), u.claims, 237, default_tokenizer(),      # 0.6 x 396, floored
                         stream(3, "policy", f"{u.task.task_id}/Random/0.6"), transcript=u.transcript, task=u.task)
    assert df.memory_sha.iloc[0] == hashlib.sha256(want.text.encode()).hexdigest()[:16]
    other = select_memory(parse_policy("Random"), u.claims, 237, default_tokenizer(),
                          stream(3, "policy", "None/Random/0.6"), transcript=u.transcript, task=u.task)
    assert other.text != want.text                              # the key matters


def test_a_score_mode_row_carries_the_letters_log_probabilities_and_the_missing_letters():
    # the scripted provider scores A and B only: B wins, C has no log-probability (it counts as -inf)
    df = run_grid(RunConfig(**_ONE), backend=Scripted(
        lambda r: ChatResult("", choice_logprobs={"A": -2.0, "B": -0.5}), mode="score"))
    got = df[["policy", "decision", "decision_letter", "decision_mode", "letter_logprobs", "letters_missing",
              "invalid"]].to_dict("records")
    common = {"decision": "helix", "decision_letter": "B", "decision_mode": "score",
              "letter_logprobs": '{"A": -2.0, "B": -0.5}', "letters_missing": "C", "invalid": False}
    assert got == [dict(common, policy="R1"), dict(common, policy="ALL")]


def test_the_git_commit_lookup_gives_up_on_a_git_that_hangs_instead_of_waiting_forever(monkeypatch):
    from crossprofile_lib.run import results
    calls = []

    def fake_run(cmd, **kw):
        calls.append((cmd[1], kw.get("timeout")))
        if kw.get("timeout") is None:
            raise AssertionError(f"git {cmd[1]} called without a timeout: a hung git would hang the run")
        if cmd[1] == "rev-parse":
            return subprocess.CompletedProcess(cmd, 0, stdout="ab" * 20 + "\n", stderr="")
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])      # `git status` hangs: the limit ends it

    monkeypatch.setattr(results.subprocess, "run", fake_run)
    assert git_commit("/nowhere") is None
    assert calls == [("rev-parse", 10), ("status", 10)]


def test_a_run_header_that_is_a_folder_is_refused_as_a_run_header(tmp_path):
    from crossprofile_lib.run.results import read_header
    (tmp_path / "run.json").mkdir()
    with pytest.raises(ResultsError) as e:
        read_header(tmp_path)
    assert str(e.value) == (f"{tmp_path / 'run.json'}: field '<file>': file (not a regular file): a folder; a run header "
                            f"must be a regular file")
