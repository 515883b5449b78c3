import copy
import json

import pytest

from crossprofile_lib.cli import main
from crossprofile_lib.hiddenbench.disclosure import restates
from crossprofile_lib.hiddenbench.importer import (
    ENV_VAR,
    FIXTURE_PATH,
    HiddenBenchError,
    load_hiddenbench,
    select_tasks,
)


@pytest.fixture()
def records():
    return json.loads(FIXTURE_PATH.read_text())


def _write(tmp_path, recs, name="hb.json"):
    p = tmp_path / name
    p.write_text(json.dumps(recs))
    return p


def test_fixture_is_a_fixture_in_the_public_format(records, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    d = load_hiddenbench()
    assert d.is_fixture and d.data_source == "fixture" and not d.errors and d.notes
    assert len(d.tasks) >= 6 and FIXTURE_PATH.name.startswith("hiddenbench_fixture")
    assert all(t.name.startswith("FIXTURE") for t in d.tasks)
    assert d.histogram() == {"agents": {3: 3, 4: 3}, "options": {3: 3, 4: 3}}
    for r in records:  # exactly the public keys, nothing of ours
        assert set(r) <= {"id", "name", "description", "shared_information", "hidden_information",
                          "possible_answers", "correct_answer", "rationale"}
    for t in d.tasks:
        assert t.correct_answer in t.answers and len(set(t.hidden)) == t.n_agents
        # no shared fact restates a hidden one: only the hidden facts carry the answer
        assert not any(restates(h, s) for h in t.hidden for s in t.shared)


def test_path_argument_and_env_var(tmp_path, records, monkeypatch):
    p = _write(tmp_path, records[:2], "benchmark_copy.json")
    monkeypatch.setenv(ENV_VAR, str(p))
    d = load_hiddenbench()
    assert not d.is_fixture and len(d.tasks) == 2
    assert d.data_source.startswith("benchmark_copy.json@") and len(d.data_source.split("@")[1]) == 12
    assert load_hiddenbench(FIXTURE_PATH).is_fixture  # the fixture named explicitly is still the fixture


def test_ids_may_be_strings_and_answers_match_after_normalisation(tmp_path, records):
    r = copy.deepcopy(records[0])
    r["id"] = "task-a"
    r["correct_answer"] = "  cedar   KITCHEN "
    d = load_hiddenbench(_write(tmp_path, [r]))
    assert d.tasks[0].id == "task-a" and d.tasks[0].correct_answer == "Cedar Kitchen"


@pytest.mark.parametrize("mutate, field, tid", [
    (lambda r: r.pop("description"), "description", "2"),
    (lambda r: r.update(hidden_information="one fact"), "hidden_information", "2"),
    (lambda r: r.update(hidden_information=["only one"]), "hidden_information", "2"),
    (lambda r: r.update(shared_information=["fine", ""]), "shared_information[1]", "2"),
    (lambda r: r.update(possible_answers=["X", "x "]), "possible_answers", "2"),
    (lambda r: r.update(correct_answer="The janitor"), "correct_answer", "2"),
    (lambda r: r.update(correct_answer=3), "correct_answer", "2"),
    (lambda r: r.update(rationale=["a"]), "rationale", "2"),
    (lambda r: r.update(id=True), "id", "#1"),
    (lambda r: r.pop("id"), "id", "#1"),
])
def test_malformed_record_named_and_others_still_load(tmp_path, records, mutate, field, tid):
    recs = copy.deepcopy(records)
    mutate(recs[1])
    d = load_hiddenbench(_write(tmp_path, recs))
    assert len(d.tasks) == len(records) - 1 and len(d.errors) == 1
    e = d.errors[0]
    assert e.task == tid and e.field == field and f"task {tid}" in str(e) and f"'{field}'" in str(e)
    with pytest.raises(HiddenBenchError, match=field.replace("[", r"\[").replace("]", r"\]")):
        load_hiddenbench(_write(tmp_path, recs), strict=True)


def test_duplicate_ids_and_non_objects(tmp_path, records):
    recs = copy.deepcopy(records) + [copy.deepcopy(records[0]), "not a task"]
    d = load_hiddenbench(_write(tmp_path, recs))
    assert len(d.tasks) == len(records)
    assert [(e.task, e.field) for e in d.errors] == [("1", "id"), ("#7", "<record>")]
    assert "duplicate id" in str(d.errors[0])


@pytest.mark.parametrize("text, msg", [("{not json", "not valid JSON"), ('{"a": 1}', "JSON array")])
def test_broken_file_raises_naming_the_file(tmp_path, text, msg):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(HiddenBenchError, match=msg) as ei:
        load_hiddenbench(p)
    assert str(p) in str(ei.value)
    with pytest.raises(HiddenBenchError, match="cannot read"):
        load_hiddenbench(tmp_path / "missing.json")


def test_select_tasks(records):
    d = load_hiddenbench(FIXTURE_PATH)
    assert [t.id for t in select_tasks(d, ["4", "2"])] == ["2", "4"]
    assert len(select_tasks(d, limit=2)) == 2
    with pytest.raises(ValueError, match="unknown task id"):
        select_tasks(d, ["99"])


def test_cli_validate(tmp_path, records, capsys):
    assert main(["hiddenbench", "validate", str(FIXTURE_PATH)]) == 0
    out = capsys.readouterr().out
    assert "6 valid task(s)" in out and "agents:  3: 3, 4: 3" in out and "options: 3: 3, 4: 3" in out
    recs = copy.deepcopy(records)
    recs[2]["possible_answers"] = "Dana"
    assert main(["hiddenbench", "validate", str(_write(tmp_path, recs))]) == 1
    cap = capsys.readouterr()
    assert "task 3: field 'possible_answers'" in cap.err and "5 valid task(s), 1 malformed" in cap.out
    assert main(["hiddenbench", "validate", str(tmp_path / "nope.json")]) == 1
