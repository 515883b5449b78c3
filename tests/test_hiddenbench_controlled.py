import json

import numpy as np
import pandas as pd
import pytest
from hiddenbench_fake import ScriptedBackend

from crossprofile_lib.cli import main
from crossprofile_lib.hiddenbench.common import scripted_discussion, t_all, task_view
from crossprofile_lib.hiddenbench.importer import FIXTURE_PATH, load_hiddenbench
from crossprofile_lib.hiddenbench.measures import controlled_summary, headroom
from crossprofile_lib.hiddenbench.run import HBConfig, iter_artefacts, read_tables, run_hiddenbench
from crossprofile_lib.prompts import decision_prompt
from crossprofile_lib.task.decision import option_order
from crossprofile_lib.task.tokenizer import default_tokenizer


@pytest.fixture(scope="module")
def tasks():
    return load_hiddenbench(FIXTURE_PATH).tasks


def test_scripted_discussion_shared_repeated_hidden_once(tasks):
    for t in tasks:
        tr = scripted_discussion(t, 0)
        assert sorted(tr.speaker_order) == [f"A{i + 1}" for i in range(t.n_agents)]
        ids = [u.fact_id for u in tr.utterances]
        assert len(ids) == t.n_agents * (len(t.shared) + 1)
        assert all(ids.count(f"S{j + 1}") == t.n_agents for j in range(len(t.shared)))
        assert all(ids.count(f"H{i + 1}") == 1 for i in range(t.n_agents))
        for u in tr.utterances:  # H{i} is stated by A{i}, verbatim
            if u.fact_id.startswith("H"):
                assert u.speaker == f"A{u.fact_id[1:]}" and u.text == t.hidden[int(u.fact_id[1:]) - 1]
    a, b = scripted_discussion(tasks[1], 0), scripted_discussion(tasks[1], 1)
    assert a == scripted_discussion(tasks[1], 0) and a != b


def test_task_view_feeds_the_decision_prompt(tasks):
    t = tasks[1]
    v = task_view(t, seed=1)
    assert v.task_id == "hb-2/s1" and v.template.option_ids == ("O1", "O2", "O3", "O4")
    assert v.template.option(v.template.correct_option).name == t.correct_answer
    order = option_order(v)
    assert order == ("O2", "O3", "O4", "O1")  # rotated by the seed, as for templates
    from crossprofile_lib.policies import Memory
    p = decision_prompt(v, Memory("EMPTY", "empty", (), (), "", 0), order)
    assert t.description in p.text and "A. The curator" in p.text and "D. The guard" in p.text
    assert t_all(t, default_tokenizer()) > 0


@pytest.fixture(scope="module")
def ledger_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("hb_ledger")
    header = run_hiddenbench(HBConfig(), out)
    return out, header, read_tables(out, "controlled")["decisions"]


def test_ledger_reports_composition_and_makes_no_decision(ledger_run):
    out, header, d = ledger_run
    assert len(d) == 6 * 3 * 9 and (~d.decided).all() and d.correct.isna().all()
    assert (d.data_source == "fixture").all() and (d.backend == "ledger").all()
    assert set(header["protocols"]["controlled"]["skipped_policies"]) == {"R1-rel", "B3"}
    assert header["protocols"]["controlled"]["headroom"] is None and header["data_is_fixture"]
    by = d.groupby("policy")
    assert (by.get_group("private-only").kept_hidden == by.get_group("private-only").n_hidden).all()
    assert (by.get_group("private-only").kept_shared == 0).all()
    assert (by.get_group("shared-only").kept_hidden == 0).all()
    assert (by.get_group("ALL").profile_complete).all() and (by.get_group("EMPTY").n_kept == 0).all()
    # the first speaker states every shared fact and one hidden fact: B4 spends the budget on them
    assert (~by.get_group("B4").profile_complete).all()
    assert by.get_group("B4").kept_hidden.mean() < by.get_group("R1").kept_hidden.mean()
    # R1 keeps the once-stated hidden facts first: the whole profile fits at r = 0.6
    assert by.get_group("R1").profile_complete.all()
    b = d[d.selection == "budget"]
    assert (b.memory_tokens <= b.budget_tokens).all()
    s = controlled_summary(d)
    assert np.isnan(s.loc["R1", "accuracy"]) and s.loc["R1", "profile_complete"] == 100.0


def test_artefacts_and_determinism(ledger_run, tmp_path):
    out, _, d = ledger_run
    recs = list(iter_artefacts(out, "controlled"))
    assert len(recs) == 18 and {r["ablation"] for r in recs} == {"scripted"}
    a = recs[0]["artefacts"]
    assert a["transcript"] and a["claims"] and {m["policy"] for m in a["memories"]} >= {"R1", "REF"}
    run_hiddenbench(HBConfig(), tmp_path)
    d2 = read_tables(tmp_path, "controlled")["decisions"]
    pd.testing.assert_frame_equal(d, d2)


def test_model_backend_decides_and_headroom(tasks, tmp_path):
    fake = ScriptedBackend(tasks)
    h = run_hiddenbench(HBConfig(backend="scripted/fake-v1", seeds=[0, 1]), tmp_path, backend=fake)
    d = read_tables(tmp_path, "controlled")["decisions"]
    assert d.decided.all() and set(d.policy) >= {"R1-rel", "B3"} and (d.model == "fake-v1").all()
    acc = d.groupby("policy").correct.mean()
    assert acc["ALL"] == 1 and acc["private-only"] == 1 and acc["EMPTY"] == 0 and acc["shared-only"] == 0
    hr = h["protocols"]["controlled"]["headroom"]
    assert hr["estimate"] == 100 and hr["passed"] and hr["n_units"] == 6 and hr["status"] == "confirmatory"
    assert headroom(d, np.random.default_rng(1)).lo == 100


def test_cli_run_controlled(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["hiddenbench", "run", "--out", str(out), "--seeds", "0", "--policies", "R1,B4,ALL,BAL",
                 "--tasks", "1,2"]) == 0
    cap = capsys.readouterr()
    assert "using the project's FIXTURE" in cap.err and "skipped BAL" in cap.out
    h = json.loads((out / "hiddenbench_run.json").read_text())
    assert h["n_tasks"] == 2 and h["protocols"]["controlled"]["rows"] == {"decisions": 6}
    assert main(["hiddenbench", "run", "--out", str(out), "--policies", "NOPE"]) == 2
    assert main(["hiddenbench", "run", "--out", str(out), "--protocol", "natural"]) == 2
    assert "needs a model backend" in capsys.readouterr().err


def test_a_changed_configuration_reruns_and_artefacts_follow_the_header(tmp_path):
    run_hiddenbench(HBConfig(seeds=[0], policies=["R1"], tasks=["1"]), tmp_path)
    h = run_hiddenbench(HBConfig(seeds=[0], policies=["ALL"], tasks=["1"]), tmp_path)
    assert h["protocols"]["controlled"]["sessions_run"] == 1           # not resumed: another configuration
    assert [m["policy"] for r in iter_artefacts(tmp_path, "controlled") for m in r["artefacts"]["memories"]] == ["ALL"]
    assert len(list(iter_artefacts(tmp_path, "controlled", None))) == 2
    assert set(read_tables(tmp_path, "controlled")["decisions"].policy) == {"ALL"}
