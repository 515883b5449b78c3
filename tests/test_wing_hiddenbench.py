"""HiddenBench's rules where they live (issue 55: the hiddenbench wing's mutation survivors): the duplicate
confirmation reads the model's LAST yes/no, only grey-zone pairs are put to the model, a "no" keeps two claims apart;
chapter 8's natural and controlled tables (initial and final votes in their columns, the budget's rows, failed calls
refused) and the group vote's strict majority; hand-checked cases whose outcome differs under each near miss."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pandas as pd
import pytest

from crossprofile_lib.backends.base import ChatResult
from crossprofile_lib.hiddenbench.claims import CONFIRM_LOW, MERGE_THRESHOLD, RawClaim, grey_pairs, jaccard, key, merge_claims
from crossprofile_lib.hiddenbench.natural import _merge

OVEN = "The oven temperature sensor reads twenty degrees low"
SAME = "The oven temperature sensor reads low by twenty degrees since Monday"    # Jaccard 7/9 with OVEN: merged
GREY = "The oven sensor reads low since the repair last Monday"                  # Jaccard 4/11 with OVEN: ask
OTHER = "The flour was delivered damp on Tuesday morning"                        # nothing in common: new claim


@pytest.fixture(scope="module")
def tasks():
    from crossprofile_lib.hiddenbench.importer import FIXTURE_PATH, load_hiddenbench
    return load_hiddenbench(FIXTURE_PATH).tasks


class _Session:
    """What ``_merge`` reads of a session: its extracted claims, speaking order and agents; ``log`` records calls."""

    def __init__(self, claims):
        self.extraction = [dict(speaker=f"A{k + 1}", message_index=k, claims=[c]) for k, c in enumerate(claims)]
        self.speaking_order = [f"A{k + 1}" for k in range(len(claims))]
        self.agents = list(self.speaking_order)
        self.logged, self.log_agents = [], []

    def log(self, req, res, agent):
        self.logged.append((req.purpose, res.text))
        self.log_agents.append(agent)


class _Answers:
    name = "answers"

    def __init__(self, text):
        self.text, self.requests = text, []

    def chat(self, requests):
        self.requests += list(requests)
        return [ChatResult(self.text) for _ in requests]


def test_the_fixture_claims_sit_where_the_rules_put_them():
    assert jaccard(key(OVEN), key(SAME)) == pytest.approx(7 / 9) and 7 / 9 >= MERGE_THRESHOLD
    assert jaccard(key(OVEN), key(GREY)) == pytest.approx(4 / 11) and CONFIRM_LOW <= 4 / 11 < MERGE_THRESHOLD
    assert jaccard(key(OVEN), key(OTHER)) < CONFIRM_LOW


@pytest.mark.parametrize("answer, merged", [
    ("yes", True),
    ("no", False),
    ("No, wait. Decision: yes", True),           # the last yes/no is the answer
    ("Yes they look alike, but Decision: no", False),
    ("YES.", True),
    ("eyes closed: nope", False),                # neither word stands alone: not a yes
    ("", False),
])
def test_duplicate_confirmation_reads_the_last_yes_or_no(answer, merged):
    s = _Session([OVEN, GREY])
    backend = _Answers(answer)
    [(raw, m)] = _merge(backend, [s], confirm=True)
    assert [r.text for r in raw] == [OVEN, GREY]
    assert len(backend.requests) == 1 and backend.requests[0].purpose == "hb-confirm-duplicate"
    assert backend.requests[0].choices == ("yes", "no")
    assert (m.cluster == (0, 0)) is merged and len(m.claim_list) == (1 if merged else 2)
    assert m.confirmed_pairs == ((1, 0, merged),)


def test_only_grey_pairs_are_asked_and_without_confirm_none_is():
    s = _Session([OVEN, SAME, OTHER, GREY])
    backend = _Answers("yes")
    [(_, m)] = _merge(backend, [s], confirm=True)
    # SAME merges by the rule alone; OTHER is a claim of its own; only GREY (with OVEN's cluster) is asked
    assert len(backend.requests) == 1 and m.cluster == (0, 0, 1, 0)
    assert s.logged == [("hb-confirm-duplicate", "yes")]
    rule_only = _Answers("yes")
    [(_, m2)] = _merge(rule_only, [_Session([OVEN, SAME, OTHER, GREY])], confirm=False)
    assert rule_only.requests == [] and m2.cluster == (0, 0, 1, 2) and m2.confirmed_pairs == ()


def test_grey_pairs_and_merge_by_hand():
    raw = [RawClaim("A1", 0, OVEN), RawClaim("A2", 1, OTHER), RawClaim("A3", 2, GREY), RawClaim("A4", 3, SAME)]
    assert grey_pairs(raw) == [(2, 0)]
    m = merge_claims(raw, ["A1", "A2", "A3", "A4"], confirm=lambda i, rep: False)
    assert m.cluster == (0, 1, 2, 0) and m.confirmed_pairs == ((2, 0, False),) and m.n_raw == 4
    y = merge_claims(raw, ["A1", "A2", "A3", "A4"], confirm=lambda i, rep: True)
    assert y.cluster == (0, 1, 0, 0) and len(y.claim_list) == 2


def _natural():
    sessions = pd.DataFrame(dict(ablation=["baseline", "baseline", "evidence-first"], group_correct=[1, 0, 1],
                                 disclosure_rate=[0.5, 0.25, 1.0]))
    votes = pd.DataFrame(dict(
        ablation=["baseline"] * 8 + ["evidence-first"] * 4,
        phase=["initial"] * 4 + ["final"] * 4 + ["initial", "initial", "final", "final"],
        correct=[1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1],
        invalid=[0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0]))
    decisions = pd.DataFrame(dict(
        ablation=["baseline"] * 5 + ["evidence-first"],
        budget_label=["0.6", "0.6", "0.3", "none", "0.6", "0.6"],
        policy=["R1", "R1", "R1", "EMPTY", "B4", "R1"],
        correct=[True, False, True, True, False, True]))
    return sessions, votes, decisions


def test_natural_summary_by_hand():
    from crossprofile_lib.hiddenbench.measures import natural_summary
    t = natural_summary(*_natural(), budget="0.6")
    assert list(t.index) == ["baseline", "evidence-first"]
    b = t.loc["baseline"]
    # initial votes 1 of 4 right, final 3 of 4 (the columns are not swapped); group 1 of 2; disclosure mean
    assert (b.initial_vote, b.final_vote, b.group_vote, b.disclosure) == (25.0, 75.0, 50.0, 37.5)
    assert b.sessions == 2 and b.invalid_votes == 2
    # the policies at the budget asked (0.3 left out) and those without a budget ("none")
    assert (b.R1, b.EMPTY, b.B4) == (50.0, 100.0, 0.0)
    e = t.loc["evidence-first"]
    assert (e.initial_vote, e.final_vote, e.invalid_votes, e.R1) == (0.0, 100.0, 2, 100.0)
    assert natural_summary(*_natural(), budget="0.3").loc["baseline"].R1 == 100.0


def test_failed_calls_are_refused_unless_dropped():
    from crossprofile_lib.hiddenbench.measures import controlled_summary
    from crossprofile_lib.stats.analysis_set import FailedCallsError
    d = pd.DataFrame(dict(policy=["R1", "R1", "R1", "B3"], budget_label=["0.6"] * 4, decided=[True, True, False, True],
                          correct=[True, False, False, True], invalid=[0, 1, 0, 0], kept_hidden=[4, 2, 3, 1],
                          kept_shared=[1, 1, 2, 0], hidden_retention=[1.0, 0.5, 0.75, 0.25],
                          profile_complete=[1, 0, 0, 0], error=[None, None, None, "HTTP 500"]))
    with pytest.raises(FailedCallsError, match="1 of 4 rows are failed model calls"):
        controlled_summary(d, "0.6")
    t = controlled_summary(d, "0.6", allow_errors=True)
    assert list(t.index) == ["R1"]                                   # B3's only row was a failed call
    r = t.loc["R1"]
    # accuracy over the decided rows only (1 of 2), every row's composition (3 rows)
    assert (r.accuracy, r.invalid, r.decisions) == (50.0, 1, 2)
    assert (r.kept_hidden, r.kept_shared, r.hidden_retention) == (3.0, pytest.approx(4 / 3), 0.75)
    assert r.profile_complete == pytest.approx(100 / 3)


def test_strict_majority_counts_the_whole_group():
    from crossprofile_lib.hiddenbench.measures import group_vote
    two_of_four = group_vote([("A1", "O1"), ("A2", "O1"), ("A3", None), ("A4", None)])
    assert two_of_four.option == "O1" and not two_of_four.strict_majority and two_of_four.n_valid == 2
    assert group_vote([("A1", "O1"), ("A2", "O1")], n_agents=4).strict_majority is False
    assert group_vote([("A1", "O1"), ("A2", "O1"), ("A3", "O1")], n_agents=5).strict_majority is True
    assert group_vote([("A1", "O2"), ("A2", "O1"), ("A3", "O1")]).option == "O1"


def test_no_valid_vote_is_no_answer_and_no_tie():
    from crossprofile_lib.hiddenbench.measures import group_vote
    g = group_vote([("A1", None), ("A2", None)])
    assert (g.option, g.tie, g.strict_majority, g.n_valid) == (None, False, False, 0)


def test_an_undecided_row_has_the_same_columns_as_a_decided_one():
    from crossprofile_lib.hiddenbench.common import decision_columns
    task = SimpleNamespace(correct_index=0)
    none = decision_columns(task, None, None, error="")
    bad = decision_columns(task, None, SimpleNamespace(option=None, letter=None, invalid=True, raw="x" * 3000, meta={}))
    failed = decision_columns(task, None, SimpleNamespace(option=None, letter=None, invalid=True, raw="", meta={}),
                              error="HTTP 500")
    assert set(none) == set(bad) == set(failed) == {"decided", "decision", "decision_letter", "decision_answer", "correct",
                                                    "invalid", "decision_raw", "error"}
    assert none["decided"] is False and none["correct"] is None and none["invalid"] is False
    assert bad["decided"] is True and bad["correct"] is False and bad["invalid"] is True and len(bad["decision_raw"]) == 2000
    # a failed call is not a decision: no correct, not invalid, its error kept
    assert failed["correct"] is None and failed["invalid"] is False and failed["error"] == "HTTP 500"


def test_composition_by_fact_ids_for_claim_memories_else_by_restated_facts():
    from crossprofile_lib.hiddenbench.common import Composition, composition
    task = SimpleNamespace(n_agents=4, hidden=["The oven is broken"], shared=["The flour is fresh", "Eggs are cheap"])
    kept = [SimpleNamespace(fact_id=i) for i in ("H1", "S1", "S2", "S2", None)]
    for kind in ("claims", "transcript", "empty"):
        assert composition(task, SimpleNamespace(kind=kind, kept=kept, text=""), True) == Composition(1, 2, 4)
    text = SimpleNamespace(kind="text", kept=kept, text="The flour is fresh\n\nsomething else")
    assert composition(task, text, True) == Composition(0, 1, 4)           # a summary: by the restated rule
    claims = SimpleNamespace(kind="claims", kept=kept, text="The oven is broken")
    assert composition(task, claims, False) == Composition(1, 0, 4)
    assert Composition(1, 2, 4).hidden_retention == 0.25


def test_failed_rows_of_a_session_record():
    from crossprofile_lib.hiddenbench.common import record_errors
    assert record_errors({"errors": "3", "rows": {"R1": [{"decided": True}]}}) == 3
    rec = {"rows": {"R1": [{"decided": True, "decision_letter": "", "invalid": False},      # an older failed row
                           {"decided": True, "decision_letter": "A", "invalid": False},
                           {"decided": True, "decision_letter": "", "invalid": True}],
                    "B4": [{"decided": False}]},
           "artefacts": {"calls": [{"error": "timeout"}, {"error": ""}, {"error": None}, {"error": "HTTP 500"}]}}
    assert record_errors(rec) == 1 + 2
    assert record_errors({}) == 0 and record_errors({"rows": {}, "artefacts": None}) == 0


def test_the_vote_prompt_holds_the_agents_own_facts_and_the_letters(tasks):
    from crossprofile_lib.hiddenbench.ablations import get_ablation
    from crossprofile_lib.hiddenbench.natural import Session
    s = Session(tasks[0], 0, get_ablation("baseline"))
    a = s.agents[0]
    req = s.vote_request(a, "initial")
    body = req.messages[-1]["content"]
    assert s.facts_text(a) in body and s.facts[a][0] in body
    others = set(s.facts[s.agents[1]]) - set(s.facts[a])
    assert others and not any(f in body for f in others)            # never another agent's hidden fact
    assert " or ".join([", ".join(s.letters[:-1]), s.letters[-1]]) in body
    assert req.purpose == "hb-vote-initial" and req.json_schema is None
    final = s.vote_request(a, "final").messages[-1]["content"]
    assert "(no messages)" in final and s.facts_text(a) in final


def _record(**kw):
    rec = dict(id=7, name="Picnic", description="Pick a caterer.", shared_information=["Amber is near."],
               hidden_information=["Amber lost its licence.", "Birch has no vegetarian food."],
               possible_answers=["Amber", "Birch", "Cedar"], correct_answer="Cedar", rationale=None)
    rec.update(kw)
    return {k: v for k, v in rec.items() if v != "DROP"}


@pytest.mark.parametrize("change, field, message", [
    (dict(name=3), "name", "must be a string"),
    (dict(name="DROP"), None, None),                                  # the name is optional
    (dict(description="  "), "description", "must be a non-empty string"),
    (dict(description="DROP"), "description", "missing"),
    (dict(description=5), "description", "must be a non-empty string"),
    (dict(hidden_information=["one only"]), "hidden_information", "needs at least 2 entries, found 1"),
    (dict(possible_answers=["A", " a "]), "possible_answers", "answers must be distinct"),
    (dict(correct_answer=" cedar "), None, None),                      # white space and case: the same answer
    (dict(correct_answer="Dune"), "correct_answer", "'Dune' is not one of possible_answers"),
    (dict(rationale=3), "rationale", "must be a string or null"),
    (dict(shared_information=["ok", {"deep": [[[]]]}]), "shared_information[1]", "must be a non-empty string"),
])
def test_a_bad_record_names_its_field_and_rule(change, field, message):
    from crossprofile_lib.hiddenbench.importer import HiddenBenchError, parse_record
    rec = _record(**change)
    if field is None:
        t = parse_record(rec, 0, "f.json")
        assert t.correct_answer == "Cedar" and t.id == "7"
        return
    with pytest.raises(HiddenBenchError) as e:
        parse_record(rec, 0, "f.json")
    assert e.value.field == field and message in e.value.detail and str(e.value).startswith("f.json: task 7: field")


def test_a_hostile_record_is_refused_by_the_json_checks_naming_the_task():
    from crossprofile_lib.hiddenbench.importer import HiddenBenchError, parse_record
    with pytest.raises(HiddenBenchError) as e:
        parse_record(_record(extra={"note": ["fine", "bell\x07"]}), 3, "f.json")
    assert e.value.task == "7" and e.value.field == "extra.note[1]" and "control characters" in e.value.detail


def test_unknown_task_ids_are_named_with_the_ids_there(tasks):
    from crossprofile_lib.hiddenbench.importer import HiddenBenchData, select_tasks
    data = SimpleNamespace(tasks=tasks, path="hb.json")
    with pytest.raises(ValueError) as e:
        select_tasks(data, ["nope"])
    msg = str(e.value)
    ids = ", ".join(t.id for t in tasks[:20])
    assert "unknown task id(s) nope: hb.json" in msg and msg.endswith(f"ids there: {ids}{', ...' if len(tasks) > 20 else ''})")
    assert [t.id for t in select_tasks(data, [tasks[1].id, tasks[0].id])] == [tasks[0].id, tasks[1].id]
    assert len(select_tasks(data, None, limit=2)) == 2 and HiddenBenchData is not None


def _hb_run(tasks, tmp_path, protocols, fail_first_message=False):
    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.run import HBConfig, run_hiddenbench
    fake = ScriptedBackend(tasks)
    if fail_first_message:
        real, seen = fake.chat, []

        def chat(requests):
            out = real(requests)
            for k, r in enumerate(requests):
                if r.purpose.startswith("hb-message") and not seen:
                    seen.append(k)
                    out[k] = ChatResult("", error="HTTP 500: boom")
            return out
        fake.chat = chat
    cfg = HBConfig(backend="scripted/fake-v1", protocols=list(protocols), seeds=[0], ablations=["baseline"],
                   policies=["R1", "B4", "ALL", "EMPTY"], tasks=[tasks[0].id, tasks[1].id])
    return run_hiddenbench(cfg, tmp_path, backend=fake)


def test_run_counts_its_sessions_and_writes_full_artefacts(tasks, tmp_path):
    from crossprofile_lib.hiddenbench.run import iter_artefacts, read_tables
    h = _hb_run(tasks, tmp_path, ("controlled", "natural"))
    assert h["protocols"]["controlled"]["sessions_run"] == 2 and h["protocols"]["natural"]["sessions_run"] == 2
    c = next(iter_artefacts(tmp_path, "controlled"))["artefacts"]
    assert all(u["fact_id"] for u in c["transcript"])                     # a scripted line states a fact
    assert all(isinstance(m["kept"], list) for m in c["memories"]) and any(m["kept"] for m in c["memories"])
    assert all(m["error"] == "" for m in c["memories"])
    assert read_tables(tmp_path, "controlled")["decisions"]["correct"].dtype == "boolean"
    n = next(iter_artefacts(tmp_path, "natural"))
    a = n["artefacts"]
    assert all(v["letter"] in a["options"] for v in a["votes"] if not v["invalid"])
    assert all(isinstance(m["tokens"], int) and "invalid" in m for m in a["memories"])
    assert all(isinstance(x["completion_tokens"], int) for x in a["calls"])
    assert all(all(isinstance(t, str) for t in e["raw"]) for e in a["extraction"])
    assert {"invalid", "memory_tokens", "correct"} <= set(n["rows"]["decisions"][0])


def test_a_failed_call_fails_every_row_of_its_natural_session(tasks, tmp_path):
    from crossprofile_lib.hiddenbench.run import iter_artefacts
    h = _hb_run(tasks, tmp_path, ("natural",), fail_first_message=True)
    recs = list(iter_artefacts(tmp_path, "natural"))
    bad = [r for r in recs if r["errors"]]
    assert len(bad) == 1 and h["protocols"]["natural"]["failed_sessions"] == 1
    s = bad[0]["rows"]["sessions"][0]
    assert s["error"].startswith("1 of ") and s["error"].endswith("calls of the session failed: HTTP 500: boom")
    assert s["group_correct"] is None and all(v["correct"] is None for v in bad[0]["rows"]["votes"])
    assert all(d["error"] for d in bad[0]["rows"]["decisions"])
    # no headroom from a decisions table with failed calls: the header says why
    nat = h["protocols"]["natural"]
    assert nat["headroom"] is None and nat["headroom_note"] == "not computed: the decisions table holds failed model calls"


def test_the_configuration_hash_names_the_tokenizer_and_the_protocols_settings():
    from crossprofile_lib.hiddenbench.run import HBConfig, _config_sha
    cfg = HBConfig(backend="scripted/fake-v1", protocols=["natural"], seeds=[0], policies=["R1"])
    data = SimpleNamespace(data_source="fixture", is_fixture=True, sha256="ab" * 32)

    def be(tok):
        return SimpleNamespace(name="scripted", model="m", tokenizer=SimpleNamespace(name=tok), decision_mode="generate")
    a = _config_sha(cfg, "natural", be("offline"), data, {})
    assert a == _config_sha(cfg, "natural", be("offline"), data, {})
    assert a != _config_sha(cfg, "natural", be("qwen2.5"), data, {})
    assert a != _config_sha(cfg, "controlled", be("offline"), data, {})


def test_policy_plan_skips_what_hiddenbench_cannot_give_and_says_why():
    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.common import PolicyPlan
    fake = ScriptedBackend([])
    nat = PolicyPlan.for_backend(["R1", "R1-rel-oracle", "BAL", "ALL"], fake, "natural")
    assert [s.name for s in nat.specs] == ["R1", "ALL"]
    assert nat.skipped["R1-rel-oracle"] == "natural claims have no roles, so there is no oracle relevance"
    assert "stance" in nat.skipped["BAL"]
    ctl = PolicyPlan.for_backend(["R1", "R1-rel-oracle"], fake, "controlled")
    assert [s.name for s in ctl.specs] == ["R1", "R1-rel-oracle"] and ctl.skipped == {}


def test_the_task_view_holds_hidden_facts_about_the_correct_option_and_no_decoy(tasks):
    from crossprofile_lib.hiddenbench.common import task_view
    t = tasks[0]
    v = task_view(t, 0)
    facts = v.template.facts
    hidden = [f for f in facts if f.role == "hidden"]
    shared = [f for f in facts if f.role == "shared"]
    assert [f.text for f in hidden] == list(t.hidden) and [f.text for f in shared] == list(t.shared)
    assert all(f.about == v.template.correct_option and f.polarity == 1 for f in hidden)
    assert all(f.about == "" and f.polarity == 0 for f in shared)
    assert v.template.decoy_option == "" and len(facts) == len(t.hidden) + len(t.shared)


class _Extracting:
    name = "extracting"

    def __init__(self, answers):
        self.answers, self.requests = answers, []

    def chat(self, requests):
        self.requests += list(requests)
        return [ChatResult("", error=a[1]) if isinstance(a, tuple) else ChatResult(a) for a in self.answers]


def test_the_model_extractor_groups_utterances_by_the_models_claims_and_falls_back_to_sentences():
    from crossprofile_lib.hiddenbench.claims import model_extractor
    from crossprofile_lib.task.discussion import Utterance
    utt = [Utterance(0, "A1", "The oven is broken. It was old anyway."),
           Utterance(1, "A2", "Honestly the heating element inside the oven is broken."),
           Utterance(2, "A3", "The flour was delivered damp on Tuesday.")]
    # the model reads one claim in the first two: they are one; the third call failed: its sentences are its claims
    be = _Extracting(['["The oven is broken"]', '{"claims": ["The oven is broken"]}', ("x", "HTTP 500")])
    assert model_extractor(be)(utt) == [[0, 1], [2]]
    assert [r.purpose for r in be.requests] == ["messy-extract"] * 3
    # unreadable answers: each utterance's sentences (the second shares too few words with the first to merge)
    assert model_extractor(_Extracting(["no list here", "nothing", "none"]))(utt) == [[0], [1], [2]]
    assert model_extractor(_Extracting([]))([]) == []


class _Replies:
    name = "replies"

    def __init__(self, by_purpose):
        self.by_purpose, self.requests = by_purpose, []

    def chat(self, requests):
        self.requests += list(requests)
        return [ChatResult(self.by_purpose[r.purpose]) for r in requests]


def test_an_unreadable_extraction_is_retried_then_falls_back_to_sentences_keeping_every_answer(tasks):
    from crossprofile_lib.hiddenbench.ablations import get_ablation
    from crossprofile_lib.hiddenbench.natural import Message, Session, _extract
    s = Session(tasks[0], 0, get_ablation("baseline"))
    s.messages += [Message(0, 1, s.speaking_order[0], "The oven is broken. The flour is damp today.", "raw")]
    _extract(_Replies({"hb-extract": "I cannot tell", "hb-extract-retry": '["The oven is broken badly"]'}), [s])
    rec = s.extraction[0]
    assert rec["raw"] == ["I cannot tell", '["The oven is broken badly"]'] and rec["retried"] is True
    assert rec["readable"] is True and rec["fallback"] is False and rec["claims"] == ["The oven is broken badly"]
    t = Session(tasks[0], 0, get_ablation("baseline"))
    t.messages += [Message(0, 1, t.speaking_order[0], "The oven is broken. The flour is damp today.", "raw")]
    _extract(_Replies({"hb-extract": "no", "hb-extract-retry": "still no"}), [t])
    r = t.extraction[0]
    assert r["raw"] == ["no", "still no"] and r["fallback"] is True and r["readable"] is False
    assert r["claims"] == ["The oven is broken.", "The flour is damp today."]


def test_a_full_disk_while_appending_sessions_is_named(tasks, tmp_path, monkeypatch):
    import errno
    import pathlib

    from crossprofile_lib.safety.outputs import WriteError
    real = pathlib.Path.open

    def full(self, mode="r", *a, **k):
        if self.suffix == ".jsonl" and mode == "a":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, mode, *a, **k)
    monkeypatch.setattr(pathlib.Path, "open", full)
    with pytest.raises(WriteError) as e:
        _hb_run(tasks, tmp_path, ("controlled",))
    assert str(e.value).startswith(f"cannot append to {tmp_path / 'artefacts' / 'controlled.jsonl'}: ")
    assert e.value.errno == errno.ENOSPC


@pytest.fixture
def both_runs(tasks, tmp_path):
    # per test, not per module: mutmut credits a function to the tests that ran it, and a shared run would be
    # credited to the first test only
    _hb_run(tasks, tmp_path, ("controlled", "natural"))
    return tmp_path


def test_controlled_records_keep_the_scripted_order_claims_and_raw_decisions(both_runs):
    from crossprofile_lib.hiddenbench.run import iter_artefacts
    rec = next(r for r in iter_artefacts(both_runs, "controlled") if r["task_id"] == "1")
    a = rec["artefacts"]
    # task 1, seed 0: the speaker order and each line's fact, written out by hand from the fixture's run
    assert a["speaker_order"] == ["A3", "A1", "A2"]
    assert all(set(c) == {"text", "speakers", "fact_id", "first_mention"} for c in a["claims"])
    assert a["claims"][1]["speakers"] == ["A1", "A2", "A3"] and a["claims"][1]["fact_id"] == "S2"
    r1 = next(m for m in a["memories"] if m["policy"] == "R1" and m["budget"] == "0.6")
    assert (r1["decision"], r1["raw"]) == ("C", "Decision: C")
    rows = rec["rows"]["decisions"]
    assert {r["protocol"] for r in rows} == {"controlled"}
    assert all(r["base_policy"] == r["policy"] for r in rows if r["policy"] in ("R1", "B4", "ALL", "EMPTY"))
    first = next(r for r in rows if r["policy"] == "R1" and r["budget_label"] == "0.6")
    assert (first["decision_letter"], first["decision_answer"], first["correct"]) == ("C", "Cedar Kitchen", True)


def test_the_scripted_speaker_order_depends_on_the_task(tasks):
    from crossprofile_lib.hiddenbench.common import scripted_discussion
    orders = {tuple(scripted_discussion(t, 0).speaker_order) for t in tasks}
    assert len(orders) > 1    # seeded per task: not one order for every task of a seed
    assert tuple(scripted_discussion(tasks[0], 0).speaker_order) == ("A3", "A1", "A2")


def test_a_decision_without_a_letter_has_an_empty_letter():
    from crossprofile_lib.hiddenbench.common import decision_columns
    task = SimpleNamespace(correct_index=0)
    bad = decision_columns(task, None, SimpleNamespace(option=None, letter=None, invalid=True, raw="junk", meta={}))
    assert bad["decision_letter"] == "" and bad["decision"] == "" and bad["decision_answer"] == ""


def test_natural_records_keep_every_field_of_the_session(both_runs, tasks):
    from crossprofile_lib.hiddenbench.run import iter_artefacts
    rec = next(r for r in iter_artefacts(both_runs, "natural") if r["task_id"] == "1")
    a = rec["artefacts"]
    t = tasks[0]
    # each agent holds the shared facts and its own hidden one, in a seeded order (task 1, seed 0, by hand)
    assert set(a["facts"]) == {"A1", "A2", "A3"}
    assert a["facts"]["A1"] == [t.hidden[0], t.shared[1], t.shared[2], t.shared[0]]
    assert all(sorted(a["facts"][f"A{k + 1}"]) == sorted([*t.shared, t.hidden[k]]) for k in range(3))
    assert all(set(v) == {"agent", "phase", "letter", "rationale", "invalid", "retried", "raw"} for v in a["votes"])
    assert a["votes"][0]["agent"] == "A2" and a["votes"][0]["rationale"] == "Based on what I know."
    assert all(set(m) == {"index", "round", "speaker", "text", "raw"} for m in a["messages"])
    assert [m["round"] for m in a["messages"]] == [1, 1, 1, 2, 2, 2]
    assert [c["speaker"] for c in a["raw_claims"]] == ["A2", "A1", "A3", "A2", "A1", "A3"]
    assert a["raw_claims"][0]["text"] == t.hidden[1] and a["raw_claims"][0]["message_index"] == 0
    assert a["claims"][0]["text"] == t.hidden[1] and a["claims"][0]["restates"] == ["H2"]
    assert all(isinstance(c["text"], str) for c in a["claims"])
    assert a["disclosure"] == dict(disclosed=[True, True, True], by_holder=[True, True, True], first_message=[1, 0, 2])
    rows = rec["rows"]
    assert {r["protocol"] for name in ("sessions", "votes", "decisions") for r in rows[name]} == {"natural"}
    s = rows["sessions"][0]
    assert (s["extraction_retries"], s["extraction_fallbacks"], s["n_claims_raw"], s["n_claims"]) == (0, 0, 6, 3)


def test_the_extraction_retries_are_counted_in_the_session_row(tasks):
    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.ablations import get_ablation
    from crossprofile_lib.hiddenbench.common import PolicyPlan
    from crossprofile_lib.hiddenbench.natural import run_natural_chunk
    fake = ScriptedBackend(tasks, junk_extract={"A1"})
    plan = PolicyPlan.for_backend(["ALL"], fake, "natural")
    [rec] = run_natural_chunk([(tasks[0], 0, get_ablation("baseline"))], plan, ["0.6"], fake, {})
    s = rec["rows"]["sessions"][0]
    assert s["extraction_retries"] == 2 and s["extraction_fallbacks"] == 2   # A1 spoke twice, junk both times


def test_an_unknown_ablation_is_named_with_the_known_ones():
    from crossprofile_lib.hiddenbench.ablations import get_ablation
    with pytest.raises(ValueError) as e:
        get_ablation("nope")
    assert str(e.value) == "unknown ablation 'nope' (known: baseline, evidence-first, unique-first, no-vote-reminder)"


def test_a_path_that_cannot_be_resolved_is_not_the_fixture(monkeypatch, tmp_path):
    import pathlib

    from crossprofile_lib.hiddenbench.importer import resolve_path

    def broken(self, *a, **k):
        raise OSError("too many links")
    monkeypatch.setattr(pathlib.Path, "resolve", broken)
    assert resolve_path(tmp_path / "hb.json") == (tmp_path / "hb.json", False)


def test_the_natural_summary_drops_failed_decisions_when_allowed():
    from crossprofile_lib.hiddenbench.measures import natural_summary
    from crossprofile_lib.stats.analysis_set import FailedCallsError
    sessions = pd.DataFrame(dict(ablation=["baseline"], group_correct=[True], disclosure_rate=[1.0], error=[""]))
    votes = pd.DataFrame(dict(ablation=["baseline"] * 2, phase=["initial", "final"], correct=[False, True],
                              invalid=[0, 0], error=["", ""]))
    decisions = pd.DataFrame(dict(ablation=["baseline"] * 3, budget_label=["0.6"] * 3, policy=["R1"] * 3,
                                  correct=[True, False, None], error=["", "", "HTTP 500"]))
    with pytest.raises(FailedCallsError):
        natural_summary(sessions, votes, decisions, "0.6")
    t = natural_summary(sessions, votes, decisions, "0.6", allow_errors=True)
    assert t.loc["baseline", "R1"] == 50.0 and t.loc["baseline", "final_vote"] == 100.0


def test_the_natural_paper_table_has_low_and_high_columns():
    from crossprofile_lib.hiddenbench.measures import paper_table
    t = paper_table("natural")
    assert list(t.columns) == ["paper low", "paper high"]
    assert tuple(t.loc["group vote"]) == (23.6, 31.8)


def test_a_record_without_a_table_adds_no_rows_to_it(tasks, tmp_path):
    import json

    from crossprofile_lib.hiddenbench.run import _collect
    _hb_run(tasks, tmp_path, ("natural",))
    f = tmp_path / "artefacts" / "natural.jsonl"
    recs = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
    del recs[0]["rows"]["votes"]
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    frames, _ = _collect(tmp_path, "natural", recs[0]["config_sha"])
    assert set(frames["votes"].task_id) == {recs[1]["task_id"]} and len(frames["sessions"]) == 2


def test_the_configuration_hash_changes_with_duplicate_confirmation():
    from crossprofile_lib.hiddenbench.run import HBConfig, _config_sha
    data = SimpleNamespace(data_source="fixture", is_fixture=True, sha256="ab" * 32)
    be = SimpleNamespace(name="scripted", model="m", tokenizer=SimpleNamespace(name="t"), decision_mode="generate")
    on = HBConfig(backend="scripted/fake-v1", protocols=["natural"], seeds=[0], policies=["R1"], confirm_duplicates=True)
    off = HBConfig(backend="scripted/fake-v1", protocols=["natural"], seeds=[0], policies=["R1"], confirm_duplicates=False)
    assert _config_sha(on, "natural", be, data, {}) != _config_sha(off, "natural", be, data, {})


def test_a_retry_keeps_the_requests_schema_and_the_system_role(tasks):
    from crossprofile_lib.hiddenbench.ablations import get_ablation
    from crossprofile_lib.hiddenbench.natural import Session, _retry_request
    s = Session(tasks[0], 0, get_ablation("baseline"), constrained_votes=True)
    req = s.vote_request("A1", "initial")
    assert req.messages[0]["role"] == "system" and req.json_schema is not None
    r = _retry_request(req, "junk", "vote_retry", letters="A, B, C")
    assert r.json_schema == req.json_schema and r.purpose == req.purpose + "-retry"
    assert r.messages[-2] == {"role": "assistant", "content": "junk"}


def test_grey_claims_of_a_natural_session_are_put_to_the_sessions_model(tasks):
    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.ablations import get_ablation
    from crossprofile_lib.hiddenbench.common import PolicyPlan
    from crossprofile_lib.hiddenbench.natural import run_natural_chunk

    class GreyExtracts(ScriptedBackend):
        """The first message's claim is OVEN, every later one GREY (Jaccard 4/11: a grey pair); confirms say yes."""

        def chat(self, requests):
            out = super().chat(requests)
            n = sum(1 for r in self.requests if r.purpose == "hb-extract") - sum(r.purpose == "hb-extract" for r in requests)
            for k, r in enumerate(requests):
                if r.purpose == "hb-extract":
                    out[k] = ChatResult(f'["{OVEN if n == 0 else GREY}"]')
                    n += 1
            return out

    fake = GreyExtracts(tasks)
    plan = PolicyPlan.for_backend(["ALL"], fake, "natural")
    [rec] = run_natural_chunk([(tasks[0], 0, get_ablation("baseline"))], plan, ["0.6"], fake, {},
                              confirm_duplicates=True)
    asked = [r for r in fake.requests if r.purpose == "hb-confirm-duplicate"]
    # the rule-only clustering has one grey pair (the first GREY against OVEN); the later GREYs match the first
    # exactly there, so only that pair is asked. Its yes merges it into OVEN; the second GREY is then grey against
    # OVEN but was not asked: no merge, it opens a cluster, and the rest join it by the rule
    assert len(asked) == 1 and OVEN in asked[0].messages[0]["content"] and GREY in asked[0].messages[0]["content"]
    s = rec["rows"]["sessions"][0]
    assert (s["n_claims_raw"], s["n_claims"], s["merges_confirmed"]) == (6, 2, 1)
    assert rec["artefacts"]["merge"] == dict(cluster=[0, 0, 1, 1, 1, 1], confirmed=[[1, 0, True], [2, 0, False]])


# -- a natural session's whole record, written out by hand (task 1, seed 1) -------------------------------------
# seed 1 puts the options in the order O2, O3, O1 (A Birch Foods, B Cedar Kitchen, C Amber Catering): the correct
# letter is B, not the letter of the correct option's index; the speaking order is A1, A3, A2. A1 answers every vote
# with junk (retried, still invalid), A3 only the first time (its retry is read), A2's round-2 message is empty.

AMBER_H = "Amber Catering had its food safety licence suspended last week after a failed inspection."
BIRCH_H = "Birch Foods cannot supply vegetarian dishes, and a third of the staff are vegetarian."
CEDAR_H = "The head chef of Cedar Kitchen ran the picnic kitchen for the company's previous caterer for five years."
JUNK = "I think we should go with the first one!"


def _marked_backend(tasks, fail=None, answers=None, mode="generate"):
    """The scripted backend with call bookkeeping a session records: extraction answers come from the cache, message
    calls took 2 retries, each answer's completion tokens are its words; ``fail``: A3's call of that purpose fails;
    ``answers``: {(purpose, agent): reply} overrides; ``mode``: its decision mode."""
    import dataclasses

    from hiddenbench_fake import ScriptedBackend

    class Marked(ScriptedBackend):
        decision_mode = mode

        def chat(self, requests):
            out = []
            for r, o in zip(requests, super().chat(requests)):
                who = r.messages[0]["content"]
                agent = "".join(re.findall(r"You are (A\d+)", who)[:1])    # "" for a call without a system prompt
                if r.purpose == "hb-message-r2" and agent == "A2":
                    o = ChatResult("")
                if (r.purpose, agent) in (answers or {}):
                    o = ChatResult(answers[(r.purpose, agent)])
                if r.purpose in (fail or ()) and agent == "A3":     # a failed call's partial text is not read
                    o = ChatResult('Sure. {"vote": "A"} I know that', error="HTTP 503: busy")
                out.append(dataclasses.replace(o, cached=r.purpose == "hb-extract",
                                               retries=2 if r.purpose.startswith("hb-message") else 0,
                                               completion_tokens=len(o.text.split())))
            return out
    return Marked(tasks, junk={"A1"}, junk_once={"A3"})


def _natural_record(tasks, fail=None, answers=None, mode="generate"):
    from crossprofile_lib.hiddenbench.ablations import get_ablation
    from crossprofile_lib.hiddenbench.common import PolicyPlan
    from crossprofile_lib.hiddenbench.natural import run_natural_chunk
    fake = _marked_backend(tasks, fail, answers, mode)
    plan = PolicyPlan.for_backend(["R1", "EMPTY"], fake, "natural")
    [rec] = run_natural_chunk([(tasks[0], 1, get_ablation("baseline"))], plan, ["0.6"], fake, {"run": "x"})
    return rec


_COMMON = dict(run="x", protocol="natural", task_id="1", task_name="FIXTURE picnic caterer", n_agents=3, n_options=3,
               seed=1, ablation="baseline")


def _vote_rows(error=""):
    rows = []
    # (agent, position, phase, letter, answer, correct, invalid, retried)
    for a, pos, phase, letter, answer, ok, invalid, retried in [
            ("A1", 0, "initial", "", "", False, True, True), ("A3", 1, "initial", "A", "Birch Foods", False, False, True),
            ("A2", 2, "initial", "A", "Birch Foods", False, False, False),
            ("A1", 0, "final", "", "", False, True, True), ("A3", 1, "final", "B", "Cedar Kitchen", True, False, True),
            ("A2", 2, "final", "B", "Cedar Kitchen", True, False, False)]:
        rows.append(dict(_COMMON, agent=a, speaking_position=pos, phase=phase, vote_letter=letter, vote=answer,
                         correct=None if error else ok, invalid=invalid, retried=retried, error=error))
    return rows


def _decision_rows(error=""):
    memory = dict(t_all=160, label_format="full", n_hidden=3, option_order="O2,O3,O1", decided=True, invalid=False,
                  memory_truncated=False, error=error)
    r1 = dict(_COMMON, policy="R1", base_policy="R1", selection="budget", budget_label="0.6", budget_ratio=0.6,
              budget_tokens=96, memory_kind="claims", memory_tokens=71, n_kept=3, kept_hidden=3, kept_shared=0,
              hidden_retention=1.0, profile_complete=True, memory_sha="f879f932a7fd4d90", decision="O3",
              decision_letter="B", decision_answer="Cedar Kitchen", correct=None if error else True,
              decision_raw="Decision: B", **memory)
    empty = dict(_COMMON, policy="EMPTY", base_policy="EMPTY", selection="unbudgeted", budget_label="none",
                 budget_tokens=-1, memory_kind="empty", memory_tokens=0, n_kept=0, kept_hidden=0, kept_shared=0,
                 hidden_retention=0.0, profile_complete=False, memory_sha="e3b0c44298fc1c14", decision="O2",
                 decision_letter="A", decision_answer="Birch Foods", correct=None if error else False,
                 decision_raw="Decision: A", **memory)
    return r1, empty


def _same_rows(got, want):
    assert [set(g) for g in got] == [set(w) for w in want]
    for g, w in zip(got, want):
        for k, v in w.items():
            if isinstance(v, float) and v != v:
                assert g[k] != g[k], k
            else:
                assert g[k] == v and type(g[k]) is type(v), (k, g[k], v)


def test_a_natural_sessions_rows_count_its_votes_messages_claims_and_calls(tasks):
    rec = _natural_record(tasks)
    assert {k: rec[k] for k in ("protocol", "task_id", "seed", "ablation", "errors")} == dict(
        protocol="natural", task_id="1", seed=1, ablation="baseline", errors=0)
    _same_rows(rec["rows"]["votes"], _vote_rows())
    [s] = rec["rows"]["sessions"]
    # final votes: A1 invalid, A3 and A2 B (Cedar Kitchen, O3): 2 of 3 valid, a strict majority of the 3 agents
    _same_rows([s], [dict(
        _COMMON, group_vote="Cedar Kitchen", group_correct=True, group_invalid=False, group_tie=False,
        group_strict_majority=True, n_valid_final_votes=2, initial_accuracy=0.0, final_accuracy=2 / 3,
        initial_invalid=1, final_invalid=1, vote_retries=4, n_hidden=3, hidden_disclosed=3, disclosure_rate=1.0,
        holder_disclosure_rate=1.0, n_messages=6, empty_messages=1, n_claims_raw=5, n_claims=3,
        extraction_retries=0, extraction_fallbacks=0, merges_confirmed=0, chat_calls=21, chat_cached=5,
        chat_errors=0, error="")])
    r1, empty = _decision_rows()
    r1_nan = dict(empty, budget_ratio=float("nan"))
    _same_rows(rec["rows"]["decisions"], [r1, r1_nan])


def test_a_failed_call_makes_a_natural_sessions_results_missing_not_wrong(tasks):
    rec = _natural_record(tasks, fail=("hb-vote-final",))
    err = "1 of 21 calls of the session failed: HTTP 503: busy"
    # 6 vote rows, the session row and 2 decision rows carry the error
    assert rec["errors"] == 9
    _same_rows(rec["rows"]["votes"], _vote_rows(err))
    [s] = rec["rows"]["sessions"]
    assert s["error"] == err and s["chat_errors"] == 1 and s["chat_calls"] == 21
    assert s["group_correct"] is None and s["group_vote"] == "Cedar Kitchen" and s["group_invalid"] is False
    assert s["initial_accuracy"] != s["initial_accuracy"] and s["final_accuracy"] != s["final_accuracy"]
    r1, empty = _decision_rows(err)
    _same_rows(rec["rows"]["decisions"], [r1, dict(empty, budget_ratio=float("nan"))])
    assert [m["error"] for m in rec["artefacts"]["memories"]] == [err, err]
    assert [(c["purpose"], c["agent"], c["error"]) for c in rec["artefacts"]["calls"] if c["error"]] == [
        ("hb-vote-final", "A3", "HTTP 503: busy")]


def test_a_natural_sessions_artefacts_hold_every_vote_message_claim_and_call(tasks):
    a = _natural_record(tasks)["artefacts"]
    assert a["speaking_order"] == ["A1", "A3", "A2"] and a["correct_letter"] == "B"
    assert a["options"] == {"A": "Birch Foods", "B": "Cedar Kitchen", "C": "Amber Catering"}
    sure = 'Sure. {"vote": "%s", "rationale": "Based on what I know."}'
    why = "Based on what I know."
    assert a["votes"] == [
        dict(agent="A1", phase="initial", letter=None, rationale="", invalid=True, retried=True, raw=[JUNK, JUNK]),
        dict(agent="A3", phase="initial", letter="A", rationale=why, invalid=False, retried=True,
             raw=[JUNK, sure % "A"]),
        dict(agent="A2", phase="initial", letter="A", rationale=why, invalid=False, retried=False, raw=[sure % "A"]),
        dict(agent="A1", phase="final", letter=None, rationale="", invalid=True, retried=True, raw=[JUNK, JUNK]),
        dict(agent="A3", phase="final", letter="B", rationale=why, invalid=False, retried=True,
             raw=[JUNK, sure % "B"]),
        dict(agent="A2", phase="final", letter="B", rationale=why, invalid=False, retried=False, raw=[sure % "B"])]
    said = {"A1": AMBER_H, "A3": CEDAR_H, "A2": BIRCH_H}
    want = [dict(index=k, round=1 + k // 3, speaker=sp, text=f"I know that {said[sp]} I favour A.",
                 raw=f"A9: I know that {said[sp]} I favour A.") for k, sp in enumerate(["A1", "A3", "A2", "A1", "A3"])]
    assert a["messages"] == [*want, dict(index=5, round=2, speaker="A2", text="", raw="")]
    # the empty message has no extraction; each other gives its hidden fact
    assert a["extraction"] == [dict(message_index=k, speaker=sp, raw=[f"- {said[sp]}"], claims=[said[sp]],
                                    readable=True, retried=False, fallback=False)
                               for k, sp in enumerate(["A1", "A3", "A2", "A1", "A3"])]
    assert a["raw_claims"] == [dict(speaker=sp, message_index=k, text=said[sp])
                               for k, sp in enumerate(["A1", "A3", "A2", "A1", "A3"])]
    assert a["merge"] == dict(cluster=[0, 1, 2, 0, 1], confirmed=[])
    assert a["claims"] == [dict(text=AMBER_H, speakers=["A1"], first_mention=0, restates=["H1"]),
                           dict(text=CEDAR_H, speakers=["A3"], first_mention=1, restates=["H3"]),
                           dict(text=BIRCH_H, speakers=["A2"], first_mention=2, restates=["H2"])]
    # H1 first in message 0, H2 (Birch, A2's) in message 2, H3 in message 1
    assert a["disclosure"] == dict(disclosed=[True] * 3, by_holder=[True] * 3, first_message=[0, 2, 1])
    assert a["group"] == dict(option="O3", tie=False, strict_majority=True)
    assert a["memories"] == [
        dict(policy="R1", budget="0.6", text=f"[A1] {AMBER_H}\n[A3] {CEDAR_H}\n[A2] {BIRCH_H}", tokens=71,
             decision="B", invalid=False, raw="Decision: B", error=""),
        dict(policy="EMPTY", budget="none", text="", tokens=0, decision="A", invalid=False, raw="Decision: A",
             error="")]
    nat, msg, ext = "natural/", "message_baseline_v1.txt", "extract_claims_v1.txt"
    v, m, x = (0, 9), (2, 21), (0, 15)

    def call(purpose, agent, prompt, retries_tokens, cached=False):
        return dict(purpose=purpose, agent=agent, prompt_file=nat + prompt, cached=cached, error=None,
                    retries=retries_tokens[0], completion_tokens=retries_tokens[1])
    want_calls = [
        *(call("hb-vote-initial", g, "vote_initial_v1.txt", v) for g in ("A1", "A3", "A2")),
        *(call("hb-vote-initial-retry", g, "vote_retry_v1.txt", v) for g in ("A1", "A3")),
        call("hb-message-r1", "A1", msg, m), call("hb-message-r1", "A3", msg, (2, 25)),
        call("hb-message-r1", "A2", msg, m),
        call("hb-message-r2", "A1", msg, m), call("hb-message-r2", "A3", msg, (2, 25)),
        call("hb-message-r2", "A2", msg, (2, 0)),
        *(call("hb-vote-final", g, "vote_final_v1.txt", v) for g in ("A1", "A3", "A2")),
        *(call("hb-vote-final-retry", g, "vote_retry_v1.txt", v) for g in ("A1", "A3")),
        call("hb-extract", "A1", ext, x, True), call("hb-extract", "A3", ext, (0, 19), True),
        call("hb-extract", "A2", ext, x, True),
        call("hb-extract", "A1", ext, x, True), call("hb-extract", "A3", ext, (0, 19), True)]
    assert [{k: c[k] for k in c if k != "rendered_sha"} for c in a["calls"]] == want_calls
    # each call's rendered prompt by its hash (16 hex digits): the three agents' initial votes see different facts
    shas = [c["rendered_sha"] for c in a["calls"]]
    assert all(re.fullmatch("[0-9a-f]{16}", h) for h in shas) and len(set(shas[:3])) == 3


def test_a_session_without_a_valid_final_vote_has_no_group_answer_and_counts_each_phase(tasks):
    # A2's first vote is B (Cedar Kitchen, right); every final vote and its retry is junk; the ledger decides nothing
    junk = {(p, a): JUNK for p in ("hb-vote-final", "hb-vote-final-retry") for a in ("A2", "A3")}
    rec = _natural_record(tasks, answers={("hb-vote-initial", "A2"): '{"vote": "B"}', **junk}, mode="ledger")
    [s] = rec["rows"]["sessions"]
    assert (s["group_vote"], s["group_correct"], s["group_invalid"], s["group_tie"], s["group_strict_majority"],
            s["n_valid_final_votes"]) == ("", False, True, False, False, 0)
    assert (s["initial_accuracy"], s["final_accuracy"]) == (1 / 3, 0.0)
    assert (s["initial_invalid"], s["final_invalid"], s["vote_retries"]) == (1, 3, 5)
    assert [(v["phase"], v["agent"], v["vote_letter"], v["vote"], v["correct"], v["invalid"])
            for v in rec["rows"]["votes"]] == [
        ("initial", "A1", "", "", False, True), ("initial", "A3", "A", "Birch Foods", False, False),
        ("initial", "A2", "B", "Cedar Kitchen", True, False),
        ("final", "A1", "", "", False, True), ("final", "A3", "", "", False, True), ("final", "A2", "", "", False, True)]
    assert rec["artefacts"]["group"] == dict(option=None, tie=False, strict_majority=False)
    # under the ledger no decision is made: the memories keep None, the rows are undecided
    assert [(m["policy"], m["decision"], m["invalid"], m["raw"], m["error"]) for m in rec["artefacts"]["memories"]] == [
        ("R1", None, None, None, ""), ("EMPTY", None, None, None, "")]
    assert [(r["decided"], r["decision"], r["correct"], r["invalid"], r["decision_raw"])
            for r in rec["rows"]["decisions"]] == [(False, "", None, False, "")] * 2
    assert rec["errors"] == 0


def test_a_runs_header_counts_sessions_rows_and_resumes_by_chunk(tasks, tmp_path, capsys):
    import hashlib
    import json

    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.importer import FIXTURE_PATH
    from crossprofile_lib.hiddenbench.run import HBConfig, iter_artefacts, run_hiddenbench
    from crossprofile_lib.prompts import prompt_dir
    cfg = HBConfig(backend="scripted/fake-v1", protocols=["controlled", "natural"], seeds=[0, 1], ablations=["baseline"],
                   policies=["R1", "EMPTY"], tasks=[tasks[0].id, tasks[1].id], batch_tasks=1)
    h = run_hiddenbench(cfg, tmp_path, backend=ScriptedBackend(tasks, junk={"A1"}), progress=True)
    # one progress line per chunk of one task: sessions so far (2 seeds a task)
    assert capsys.readouterr().out.splitlines() == [
        "[hiddenbench controlled] 1: 2 new, 0 resumed", "[hiddenbench controlled] 2: 4 new, 0 resumed",
        "[hiddenbench natural] 1: 2 new, 0 resumed", "[hiddenbench natural] 2: 4 new, 0 resumed"]
    assert json.loads((tmp_path / "hiddenbench_run.json").read_text()) == json.loads(json.dumps(h, default=str))
    assert (h["data_source"], h["data_is_fixture"], h["data_path"], h["n_tasks"], h["n_tasks_in_file"]) == (
        "fixture", True, str(FIXTURE_PATH), 2, 6)
    assert h["data_sha256"] == hashlib.sha256(FIXTURE_PATH.read_bytes()).hexdigest()
    assert h["malformed_records"] == [] and h["data_notes"][0].startswith("no --hiddenbench PATH and no $HIDDENBENCH_PATH")
    assert (h["errors"], h["failed_sessions"], h["model"], h["decision_mode"]) == (0, 0, "fake-v1", "generate")
    assert len(h["prompts"]) == 11 and all(
        v == hashlib.sha256((prompt_dir() / k).read_bytes()).hexdigest() for k, v in h["prompts"].items())
    c, n = h["protocols"]["controlled"], h["protocols"]["natural"]
    ctl = dict(errors={"decisions": 0}, failed_sessions=0, headroom=None, policies=["R1", "EMPTY"],
               rows={"decisions": 8}, sessions_resumed=0, sessions_run=4, skipped_policies={})
    assert {k: v for k, v in c.items() if k != "config_sha"} == ctl
    # natural: 2 seeds x (3 + 4 agents) x 2 phases = 28 votes; A1 junk in each of 4 sessions, both phases: 8 invalid
    nat = dict(ctl, errors={"decisions": 0, "sessions": 0, "votes": 0}, rows={"decisions": 8, "sessions": 4, "votes": 28},
               invalid_votes=8, vote_retries=8, extraction_fallbacks=0, chat_errors=0)
    assert {k: v for k, v in n.items() if k != "config_sha"} == nat
    assert c["config_sha"] != n["config_sha"] and re.fullmatch("[0-9a-f]{16}", c["config_sha"])
    assert {r["config_sha"] for r in iter_artefacts(tmp_path, "natural", None)} == {n["config_sha"]}
    # the same configuration again: every session on file is resumed, none run
    h2 = run_hiddenbench(cfg, tmp_path, backend=ScriptedBackend(tasks, junk={"A1"}, fail_on_call=True), progress=True)
    assert capsys.readouterr().out.splitlines() == [
        "[hiddenbench controlled] 1: 0 new, 2 resumed", "[hiddenbench controlled] 2: 0 new, 4 resumed",
        "[hiddenbench natural] 1: 0 new, 2 resumed", "[hiddenbench natural] 2: 0 new, 4 resumed"]
    assert h2["protocols"]["natural"] == dict(nat, config_sha=n["config_sha"], sessions_run=0, sessions_resumed=4)
    # without resume the sessions file starts over: 4 records, not 8
    h3 = run_hiddenbench(dataclasses_replace(cfg, resume=False, protocols=["controlled"]), tmp_path,
                         backend=ScriptedBackend(tasks))
    assert h3["protocols"]["controlled"]["sessions_run"] == 4 and list(h3["protocols"]) == ["controlled"]
    assert len((tmp_path / "artefacts" / "controlled.jsonl").read_text().splitlines()) == 4


def dataclasses_replace(obj, **kw):
    import dataclasses
    return dataclasses.replace(obj, **kw)


def test_a_file_without_a_valid_task_names_its_first_malformed_records(tmp_path):
    import json

    from crossprofile_lib.hiddenbench.run import HBConfig, run_hiddenbench
    f = tmp_path / "hb.json"
    f.write_text(json.dumps([_record(id=k, description="DROP") for k in range(1, 5)]))
    cfg = HBConfig(backend="scripted/fake-v1", protocols=["controlled"], seeds=[0], policies=["R1"], hiddenbench=str(f))
    with pytest.raises(ValueError) as e:
        run_hiddenbench(cfg, tmp_path / "out")
    assert str(e.value) == (f"{f}: no valid task to run (4 malformed record(s): {f}: task 1: field 'description': missing; "
                            f"{f}: task 2: field 'description': missing; {f}: task 3: field 'description': missing; ...)")


def test_a_runs_rows_name_the_data_and_backend_and_its_header_the_headroom_and_redacted_record(tasks, tmp_path, capsys):
    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.run import HBConfig, read_tables, run_hiddenbench

    class Recording(ScriptedBackend):
        def record(self):
            return {"sampling": {"api_key": "sk-abcdefghijklmnopqrstuvwx", "temperature": 0.0}, "engine": "fake 1"}
    # no task ids: the first ``limit`` tasks of the file; ALL restates every hidden fact (right), EMPTY none (wrong)
    cfg = HBConfig(backend="scripted/fake-v1", protocols=["controlled"], seeds=[0], policies=["ALL", "EMPTY"], limit=3)
    h = run_hiddenbench(cfg, tmp_path, backend=Recording(tasks))
    assert capsys.readouterr().out == ""                                 # no progress unless asked
    assert h["n_tasks"] == 3 and h["sampling"] == {"api_key": "***", "temperature": 0.0} and h["engine"] == "fake 1"
    assert h["protocols"]["controlled"]["headroom"] == dict(estimate=100.0, lo=100.0, hi=100.0, min_points=15.0,
                                                            n_units=3, reason="", passed=True, status="confirmatory")
    assert "headroom_note" not in h["protocols"]["controlled"]
    d = read_tables(tmp_path, "controlled")["decisions"]
    assert list(d.task_id) == ["1", "1", "2", "2", "3", "3"] and list(d.policy) == ["ALL", "EMPTY"] * 3
    assert list(d.correct) == [True, False] * 3
    for col, value in dict(data_source="fixture", backend="scripted/fake-v1", model="fake-v1", decision_mode="generate",
                           tokenizer="offline-bpe-approx-v1").items():
        assert list(d[col]) == [value] * 6, col


def test_a_natural_run_passes_its_word_limit_and_constrained_votes_to_the_sessions(tasks, tmp_path):
    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.natural import message_max_tokens
    from crossprofile_lib.hiddenbench.run import HBConfig, run_hiddenbench
    fake = ScriptedBackend(tasks)
    cfg = HBConfig(backend="scripted/fake-v1", protocols=["natural"], seeds=[0], ablations=["baseline"],
                   policies=["EMPTY"], tasks=[tasks[0].id], max_words=12, constrained_votes=True)
    run_hiddenbench(cfg, tmp_path, backend=fake)
    votes = [r for r in fake.requests if r.purpose.startswith("hb-vote")]
    messages = [r for r in fake.requests if r.purpose.startswith("hb-message")]
    assert len(votes) == 6 and all(r.json_schema is not None for r in votes)
    # the cap: 3/2 tokens a word plus 16, 34 for 12 words (106 for the default 60)
    assert len(messages) == 6 and {r.max_tokens for r in messages} == {34} and message_max_tokens(60) == 106
    assert all("in at most 12 words" in r.messages[-1]["content"] for r in messages)


_ANSWERS_11 = [f"Option {k}" for k in range(11)]


@pytest.mark.parametrize("rec, message", [
    ([1], "hb.json: task #4: field '<record>': must be a JSON object, found list"),
    ("DROP-id", "hb.json: task #4: field 'id': missing"),
    (dict(id=True), "hb.json: task #4: field 'id': must be an integer or a non-empty string, found True"),
    (dict(id="  "), "hb.json: task #4: field 'id': must be an integer or a non-empty string, found '  '"),
    (dict(id=2.5), "hb.json: task #4: field 'id': must be an integer or a non-empty string, found 2.5"),
    (dict(id=" 9 ", name=3), "hb.json: task 9: field 'name': must be a string"),
    (dict(description="DROP"), "hb.json: task 7: field 'description': missing"),
    (dict(description="  "), "hb.json: task 7: field 'description': must be a non-empty string"),
    (dict(shared_information="DROP"), "hb.json: task 7: field 'shared_information': missing"),
    (dict(shared_information="Amber is near."),
     "hb.json: task 7: field 'shared_information': must be a list of strings, found str"),
    (dict(hidden_information=["Amber lost its licence.", " "]),
     "hb.json: task 7: field 'hidden_information[1]': must be a non-empty string"),
    (dict(hidden_information=["Amber lost its licence."]),
     "hb.json: task 7: field 'hidden_information': needs at least 2 entries, found 1"),
    (dict(possible_answers=["Amber"]), "hb.json: task 7: field 'possible_answers': needs 2 to 10 entries, found 1"),
    (dict(possible_answers=_ANSWERS_11), "hb.json: task 7: field 'possible_answers': needs 2 to 10 entries, found 11"),
    (dict(possible_answers=["Amber", "AMBER ", "Cedar"]), "hb.json: task 7: field 'possible_answers': answers must be distinct"),
    (dict(correct_answer="DROP"), "hb.json: task 7: field 'correct_answer': missing"),
    (dict(correct_answer=3), "hb.json: task 7: field 'correct_answer': must be a string, found int"),
    (dict(correct_answer="Dune"),
     "hb.json: task 7: field 'correct_answer': 'Dune' is not one of possible_answers ['Amber', 'Birch', 'Cedar']"),
    (dict(rationale=["why"]), "hb.json: task 7: field 'rationale': must be a string or null"),
])
def test_each_malformed_field_is_refused_with_the_whole_message(rec, message):
    from crossprofile_lib.hiddenbench.importer import HiddenBenchError, parse_record
    if rec == "DROP-id":
        rec = _record(id="DROP")
    elif isinstance(rec, dict):
        rec = _record(**rec)
    with pytest.raises(HiddenBenchError) as e:
        parse_record(rec, 4, "hb.json")
    assert str(e.value) == message


def test_a_record_without_a_path_is_named_hiddenbench_and_the_json_checks_name_a_usable_id():
    from crossprofile_lib.hiddenbench.importer import HiddenBenchError, parse_record
    with pytest.raises(HiddenBenchError) as e:
        parse_record("text", 0)
    assert str(e.value) == "<hiddenbench>: task #0: field '<record>': must be a JSON object, found str"
    # an id of at most 80 characters, not blank, not a bool, names the task; else the record's place
    for rid, shown in ((" 12 ", "12"), (True, "#3"), ("x" * 81, "#3"), ("y" * 80, "y" * 80), ("  ", "#3")):
        with pytest.raises(HiddenBenchError) as e:
            parse_record(_record(id=rid, extra="bell\x07"), 3, "hb.json")
        assert (e.value.path, e.value.task, e.value.field) == ("hb.json", shown, "extra")
        assert str(e.value).startswith(f"hb.json: task {shown}: field 'extra': ")


def test_a_good_record_is_read_with_its_white_space_collapsed():
    from crossprofile_lib.hiddenbench.importer import HiddenBenchTask, parse_record
    t = parse_record(_record(id=" 8 ", name="  Picnic\t day ", description="Pick  a\ncaterer.", shared_information=[],
                             possible_answers=["Amber  Catering", "Birch", "Cedar"], correct_answer="amber catering",
                             rationale="Amber is near."), 0, "hb.json")
    assert t == HiddenBenchTask("8", "Picnic day", "Pick a caterer.", (),
                                ("Amber lost its licence.", "Birch has no vegetarian food."),
                                ("Amber Catering", "Birch", "Cedar"), "Amber Catering", "Amber is near.")
    assert parse_record(_record(name="DROP"), 0).name == ""
    ten = [f"Option {k}" for k in range(10)]                              # MAX_OPTIONS answers are allowed
    assert parse_record(_record(possible_answers=ten, correct_answer="option 9"), 0).correct_answer == "Option 9"


# -- the controlled protocol's record, written out by hand (task 1, seed 1: options O2, O3, O1, speakers A1, A2, A3) --
AMBER_S1 = "Amber Catering served the company's last two picnics without complaints."
AMBER_S2 = "Amber Catering offers a ten percent discount for bookings made this month."
CEDAR_S3 = "Cedar Kitchen is a new business that opened this year."


def test_a_controlled_session_records_its_script_claims_memories_and_rows(tasks):
    import hashlib

    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.common import PolicyPlan, run_controlled_chunk
    fake = ScriptedBackend(tasks)
    plan = PolicyPlan.for_backend(["R1", "B4", "EMPTY"], fake, "controlled")
    [rec] = run_controlled_chunk([(tasks[0], 1)], plan, ["0.3"], fake, {"run": "x"})
    assert {k: rec[k] for k in ("protocol", "task_id", "seed", "ablation", "errors")} == dict(
        protocol="controlled", task_id="1", seed=1, ablation="scripted", errors=0)
    a = rec["artefacts"]
    assert a["speaker_order"] == ["A1", "A2", "A3"]
    # each speaker states the three shared facts and its hidden one, in a seeded order
    assert [(u["speaker"], u["fact_id"]) for u in a["transcript"]] == [
        ("A1", "S2"), ("A1", "H1"), ("A1", "S3"), ("A1", "S1"), ("A2", "S2"), ("A2", "S3"), ("A2", "S1"), ("A2", "H2"),
        ("A3", "S2"), ("A3", "H3"), ("A3", "S1"), ("A3", "S3")]
    assert a["transcript"][1] == dict(speaker="A1", text=AMBER_H, fact_id="H1")
    everyone = ["A1", "A2", "A3"]
    assert a["claims"] == [dict(text=AMBER_S2, speakers=everyone, fact_id="S2", first_mention=0),
                           dict(text=AMBER_H, speakers=["A1"], fact_id="H1", first_mention=1),
                           dict(text=CEDAR_S3, speakers=everyone, fact_id="S3", first_mention=2),
                           dict(text=AMBER_S1, speakers=everyone, fact_id="S1", first_mention=3),
                           dict(text=BIRCH_H, speakers=["A2"], fact_id="H2", first_mention=7),
                           dict(text=CEDAR_H, speakers=["A3"], fact_id="H3", first_mention=9)]
    r1_text = f"[A1] {AMBER_H}\n[A2] {BIRCH_H}"
    b4_text = f"[A1,A2,A3] {AMBER_S2}\n[A1] {AMBER_H}"
    # 48 tokens (0.3 of 160): R1 keeps two hidden facts, B4 the first-mentioned shared one and H1; A (Birch) is wrong
    assert a["memories"] == [
        dict(policy="R1", budget="0.3", text=r1_text, tokens=45, kept=["H1", "H2"], decision="A", raw="Decision: A",
             error=""),
        dict(policy="B4", budget="0.3", text=b4_text, tokens=46, kept=["S2", "H1"], decision="A", raw="Decision: A",
             error=""),
        dict(policy="EMPTY", budget="none", text="", tokens=0, kept=[], decision="A", raw="Decision: A", error="")]
    common = dict(run="x", protocol="controlled", task_id="1", task_name="FIXTURE picnic caterer", n_agents=3,
                  n_options=3, n_shared=3, seed=1, ablation="scripted", label_format="full", t_all=160,
                  memory_truncated=False, n_hidden=3, option_order="O2,O3,O1", decided=True, decision="O2",
                  decision_letter="A", decision_answer="Birch Foods", correct=False, invalid=False,
                  decision_raw="Decision: A", error="")
    budget = dict(selection="budget", budget_label="0.3", budget_ratio=0.3, budget_tokens=48, memory_kind="claims")
    want = [dict(common, policy="R1", base_policy="R1", **budget, memory_tokens=45, n_kept=2, kept_hidden=2,
                 kept_shared=0, hidden_retention=2 / 3, profile_complete=False,
                 memory_sha=hashlib.sha256(r1_text.encode()).hexdigest()[:16]),
            dict(common, policy="B4", base_policy="B4", **budget, memory_tokens=46, n_kept=2, kept_hidden=1,
                 kept_shared=1, hidden_retention=1 / 3, profile_complete=False,
                 memory_sha=hashlib.sha256(b4_text.encode()).hexdigest()[:16]),
            dict(common, policy="EMPTY", base_policy="EMPTY", selection="unbudgeted", budget_label="none",
                 budget_ratio=float("nan"), budget_tokens=-1, memory_kind="empty", memory_tokens=0, n_kept=0,
                 kept_hidden=0, kept_shared=0, hidden_retention=0.0, profile_complete=False,
                 memory_sha="e3b0c44298fc1c14")]
    _same_rows(rec["rows"]["decisions"], want)


def test_a_failed_summary_is_a_controlled_rows_error_and_the_ledger_decides_nothing(tasks):
    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.common import PolicyPlan, run_controlled_chunk

    class DownSummaries(ScriptedBackend):
        decision_mode = "ledger"

        def chat(self, requests):
            out = super().chat(requests)
            return [ChatResult("", error="HTTP 500: down") if r.purpose == "b3" else o for r, o in zip(requests, out)]
    fake = DownSummaries(tasks)
    plan = PolicyPlan.for_backend(["B3", "EMPTY"], fake, "controlled")
    recs = list(run_controlled_chunk([(tasks[0], 1), (tasks[1], 0)], plan, ["0.3"], fake, {}))
    assert [(r["task_id"], r["seed"], r["errors"]) for r in recs] == [("1", 1, 1), ("2", 0, 1)]
    for rec, n_agents in zip(recs, (3, 4)):
        assert rec["artefacts"]["memories"] == [
            dict(policy="B3", budget="0.3", text="", tokens=0, kept=[], decision=None, raw=None, error="HTTP 500: down"),
            dict(policy="EMPTY", budget="none", text="", tokens=0, kept=[], decision=None, raw=None, error="")]
        assert [(r["policy"], r["n_agents"], r["decided"], r["correct"], r["invalid"], r["error"])
                for r in rec["rows"]["decisions"]] == [("B3", n_agents, False, None, False, "HTTP 500: down"),
                                                       ("EMPTY", n_agents, False, None, False, "")]


def test_controlled_memories_count_kept_facts_by_fact_id_and_a_cut_summary_is_truncated():
    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.common import PolicyPlan, run_controlled_chunk
    from crossprofile_lib.hiddenbench.importer import parse_record
    # the shared fact restates hidden fact H2 word for word: by the text it would count as H2 kept, by id it is S1
    t = parse_record(_record(shared_information=["Birch has no vegetarian food and no vegan food this season."]), 0)

    class LongSummaries(ScriptedBackend):
        def chat(self, requests):
            out = super().chat(requests)
            return [ChatResult("word " * 300) if r.purpose == "b3" else o for r, o in zip(requests, out)]
    fake = LongSummaries([t])
    plan = PolicyPlan.for_backend(["B4-k1", "ALL", "B3"], fake, "controlled")
    [rec] = run_controlled_chunk([(t, 0)], plan, ["0.3"], fake, {})
    rows = {r["policy"]: r for r in rec["rows"]["decisions"]}
    b4 = rows["B4-k1"]
    assert (b4["n_kept"], b4["kept_hidden"], b4["kept_shared"], b4["hidden_retention"]) == (1, 0, 1, 0.0)
    assert rec["artefacts"]["memories"][0]["kept"] == ["S1"]
    al = rows["ALL"]
    assert (al["n_kept"], al["kept_hidden"], al["kept_shared"], al["profile_complete"], al["correct"]) == (3, 2, 1, True, True)
    # a summary longer than its budget is cut to it: truncated
    b3 = rows["B3"]
    assert (b3["memory_kind"], b3["memory_truncated"], b3["error"]) == ("summary", True, "")
    assert b3["memory_tokens"] <= b3["budget_tokens"] and b4["memory_truncated"] is False


def test_controlled_random_and_relevance_policies_keep_their_seeded_and_relevant_claims(tasks):
    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.common import PolicyPlan, run_controlled_chunk
    fake = ScriptedBackend(tasks)
    plan = PolicyPlan.for_backend(["Random", "R1-rel-oracle", "R1-rel"], fake, "controlled")
    assert plan.skipped == {}
    [rec] = run_controlled_chunk([(tasks[0], 1)], plan, ["0.3"], fake, {})
    # Random: the permutation seeded by (seed 1, "hb-policy", the task's key) fills 48 tokens with S2 and H1; the
    # oracle (every HiddenBench fact relevant) and the model (the fake calls every claim relevant) leave R1's choice
    assert [(m["policy"], m["kept"], m["error"]) for m in rec["artefacts"]["memories"]] == [
        ("Random", ["S2", "H1"], ""), ("R1-rel-oracle", ["H1", "H2"], ""), ("R1-rel", ["H1", "H2"], "")]


def test_decision_columns_by_hand_a_decisions_own_error_fails_the_row(tasks):
    from crossprofile_lib.hiddenbench.common import decision_columns, task_view
    t = tasks[0]                                              # correct: Cedar Kitchen, O3
    req = SimpleNamespace(task=task_view(t, 0))

    def dec(option, letter, invalid=False, raw="Decision: X", meta=None):
        return SimpleNamespace(option=option, letter=letter, invalid=invalid, raw=raw, meta=meta)
    assert decision_columns(t, req, dec("O3", "C")) == dict(
        decided=True, decision="O3", decision_letter="C", decision_answer="Cedar Kitchen", correct=True, invalid=False,
        decision_raw="Decision: X", error="")
    assert decision_columns(t, req, dec("O1", "A", meta={})) == dict(
        decided=True, decision="O1", decision_letter="A", decision_answer="Amber Catering", correct=False,
        invalid=False, decision_raw="Decision: X", error="")
    # an invalid answer naming the right option is not correct
    assert decision_columns(t, req, dec("O3", "C", invalid=True))["correct"] is False
    # the decision's own failed call: its error joins the row's, correct is missing, invalid False
    failed = decision_columns(t, req, dec("O3", "C", invalid=True, raw=None, meta={"error": "timeout"}), "HTTP 500")
    assert failed == dict(decided=True, decision="O3", decision_letter="C", decision_answer="Cedar Kitchen",
                          correct=None, invalid=False, decision_raw="", error="HTTP 500; timeout")
    assert decision_columns(t, req, dec("O2", "B", meta={"error": "timeout"}))["error"] == "timeout"


def test_a_backend_answering_the_wrong_number_of_requests_is_named(tasks):
    from crossprofile_lib.hiddenbench.ablations import get_ablation
    from crossprofile_lib.hiddenbench.natural import Session, _chat

    class Short:
        name = "short"

        def chat(self, requests):
            return [ChatResult("x")] * (len(requests) - 1)
    s = Session(tasks[0], 0, get_ablation("baseline"))
    items = [(s, s.vote_request(a, "initial"), a) for a in s.agents]
    with pytest.raises(RuntimeError) as e:
        _chat(Short(), items)
    assert str(e.value) == "backend short returned 2 results for 3 requests"
    assert _chat(Short(), []) == [] and s.calls == []


_TASK1 = ("Task: A company of 60 staff must book one caterer for its summer picnic. The food must be safe, must include "
          "vegetarian dishes, and must be served on the picnic day.\n\nOptions:\nA. Birch Foods\nB. Cedar Kitchen\n"
          "C. Amber Catering\n\nYour information (other members may hold different information):\n")
_ASK20 = ("Write your message to the team in at most 20 words. Share what you know and say which option you favour. "
          "Write the message only.")


def _talking_session(tasks, ablation="baseline"):
    from crossprofile_lib.hiddenbench.ablations import get_ablation
    from crossprofile_lib.hiddenbench.natural import Message, Session, Vote
    s = Session(tasks[0], 1, get_ablation(ablation), max_words=20)
    s.votes[("A3", "initial")] = Vote("A3", "initial", "B", "r")
    s.votes[("A1", "initial")] = Vote("A1", "initial", None, "")
    s.messages += [Message(0, 1, "A1", "Amber failed.", "raw"), Message(1, 1, "A3", "Cedar chef.", "raw"),
                   Message(2, 2, "A1", "Still Amber.", "raw")]
    return s


def test_a_message_request_shows_the_round_scope_the_agents_facts_and_its_initial_vote(tasks):
    s = _talking_session(tasks)
    r = s.message_request("A2", 2)
    assert (r.purpose, r.prompt_file, r.max_tokens, r.stop, r.json_schema) == (
        "hb-message-r2", "natural/message_baseline_v1.txt", 46, ("\n\n",), None)
    assert r.messages[0] == {"role": "system", "content": (
        "You are A2, one of 3 members of a team that must choose one answer together. Each member holds some "
        "information that the others may not have. Be brief and stick to the information you were given.")}
    # round 2: each OTHER member's latest message, in speaking order (A1, A3, A2); A2's vote could not be read
    assert r.messages[1]["content"] == _TASK1 + (
        f"1. {CEDAR_S3}\n2. {AMBER_S2}\n3. {AMBER_S1}\n4. {BIRCH_H}\n\n"
        "Your private initial vote: none (your vote could not be read)\n\n"
        "This is round 2 of 2 of the team discussion. The latest message of each other member:\n"
        "A1: Still Amber.\nA3: Cedar chef.\n\n" + _ASK20)
    # round 1: every message so far; A3's own vote with its answer
    assert s.message_request("A3", 1).messages[1]["content"] == _TASK1 + (
        f"1. {CEDAR_H}\n2. {AMBER_S1}\n3. {CEDAR_S3}\n4. {AMBER_S2}\n\n"
        "Your private initial vote: B (Cedar Kitchen)\n\n"
        "This is round 1 of 2 of the team discussion. Messages so far in this round:\n"
        "A1: Amber failed.\nA3: Cedar chef.\nA1: Still Amber.\n\n" + _ASK20)
    assert "A1: Still Amber." in s.message_request("A3", 2).messages[1]["content"]
    assert "A3: Cedar chef." not in s.message_request("A3", 2).messages[1]["content"]
    assert s.transcript_text() == "A1 (round 1): Amber failed.\nA3 (round 1): Cedar chef.\nA1 (round 2): Still Amber."


def test_without_the_vote_reminder_and_before_any_message(tasks):
    from crossprofile_lib.hiddenbench.ablations import get_ablation
    from crossprofile_lib.hiddenbench.natural import Session
    s = _talking_session(tasks, "no-vote-reminder")
    r = s.message_request("A3", 1)
    assert r.prompt_file == "natural/message_no_vote_reminder_v1.txt" and "initial vote" not in r.messages[1]["content"]
    fresh = Session(tasks[0], 1, get_ablation("baseline"))
    body = fresh.message_request("A1", 1).messages[1]["content"]
    assert "Messages so far in this round:\n(no messages yet)\n" in body and "in at most 60 words" in body
    assert fresh.transcript_text() == "(no messages)"


def test_the_vote_schema_names_the_letters_and_bounds_the_rationale():
    from crossprofile_lib.hiddenbench.natural import vote_schema
    assert vote_schema(("A", "B", "C")) == {
        "type": "object",
        "properties": {"vote": {"type": "string", "enum": ["A", "B", "C"]},
                       "rationale": {"type": "string", "maxLength": 80}},
        "required": ["vote", "rationale"], "additionalProperties": False}


def test_a_constrained_final_vote_request_by_hand(tasks):
    from crossprofile_lib.hiddenbench.ablations import get_ablation
    from crossprofile_lib.hiddenbench.natural import Session, vote_schema
    s = Session(tasks[0], 1, get_ablation("baseline"), constrained_votes=True)
    r = s.vote_request("A2", "final")
    assert (r.purpose, r.prompt_file, r.max_tokens, r.stop) == ("hb-vote-final", "natural/vote_final_v1.txt", 100, None)
    assert r.json_schema == vote_schema(["A", "B", "C"]) and r.json_schema["properties"]["vote"]["enum"] == ["A", "B", "C"]
    assert r.messages[0]["content"].startswith("You are A2, one of 3 members")
    assert r.messages[1]["content"] == (
        _TASK1.replace(" (other members may hold different information)", "")
        + f"1. {CEDAR_S3}\n2. {AMBER_S2}\n3. {AMBER_S1}\n4. {BIRCH_H}\n\nThe team's discussion:\n(no messages)\n\n"
        'The discussion is over. Cast your final vote. Reply with JSON only, in the form {"vote": "<letter>", '
        '"rationale": "<one sentence>"}, where the letter is one of A, B or C.')
    # unconstrained by default
    assert Session(tasks[0], 1, get_ablation("baseline")).vote_request("A2", "final").json_schema is None


def test_a_logged_call_keeps_its_error_and_an_unnamed_agent_is_empty(tasks):
    from crossprofile_lib.hiddenbench.ablations import get_ablation
    from crossprofile_lib.hiddenbench.natural import Session
    s = Session(tasks[0], 1, get_ablation("baseline"))
    req = s.vote_request("A1", "initial")
    s.log(req, ChatResult("", error="HTTP 429: slow down", retries=3, cached=True, completion_tokens=5))
    [c] = s.calls
    assert {k: v for k, v in c.items() if k != "rendered_sha"} == dict(
        purpose="hb-vote-initial", agent="", prompt_file="natural/vote_initial_v1.txt", cached=True,
        error="HTTP 429: slow down", retries=3, completion_tokens=5)


def test_the_configuration_hash_is_stable_and_follows_the_fixtures_content_not_a_secret():
    import dataclasses

    from crossprofile_lib.hiddenbench.run import HBConfig, _config_sha
    be = SimpleNamespace(name="scripted", model="m", tokenizer=SimpleNamespace(name="t"), decision_mode="generate")
    fx = SimpleNamespace(data_source="fixture", is_fixture=True, sha256="ab" * 32)
    fx2 = SimpleNamespace(data_source="fixture", is_fixture=True, sha256="cd" * 32)
    user = SimpleNamespace(data_source="/data/hb.json", is_fixture=False, sha256="ab" * 32)
    cfg = HBConfig(backend="scripted/fake-v1", protocols=["natural"], seeds=[0], policies=["R1"],
                   backend_options={"api_key": "sk-123456789012345678901234", "temperature": 0})
    prompts = {"natural/x.txt": "00"}
    # the literal hashes: sessions on file are resumed only under the same hash, so it must not drift between versions
    assert [_config_sha(cfg, p, be, d, prompts) for d in (fx, fx2, user) for p in ("controlled", "natural")] == [
        "8d70fc0e0f4d256b", "754453df107fb530", "8d146f7bc65028c7", "8c674009a356f902", "87d6855120b37c04",
        "1021eef6f8d67262"]
    on = dataclasses.replace(cfg, constrained_votes=True)
    assert _config_sha(on, "natural", be, fx, prompts) == "26d25610d80c9378"
    # constrained votes and prompts are natural settings; a key's value is redacted before hashing
    assert _config_sha(on, "controlled", be, fx, prompts) == "8d70fc0e0f4d256b"
    other_key = dataclasses.replace(cfg, backend_options={"api_key": "sk-999999999999999999999999", "temperature": 0})
    assert _config_sha(other_key, "controlled", be, fx, {}) == "8d70fc0e0f4d256b"


def _write_sessions(tmp_path, protocol, recs):
    import json
    (tmp_path / "artefacts").mkdir(exist_ok=True)
    (tmp_path / "artefacts" / f"{protocol}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs) + "{torn")


def test_collect_keeps_the_last_record_of_each_session_in_key_order_and_fills_missing_errors(tmp_path):
    from crossprofile_lib.hiddenbench.run import _collect, read_tables

    def rec(tid, seed, rows, sha="s1", errors=0):
        return dict(task_id=tid, seed=seed, ablation="scripted", config_sha=sha, errors=errors,
                    rows=dict(decisions=rows))
    _write_sessions(tmp_path, "controlled", [
        rec("2", 0, [dict(task_id="2", n=1, error=None, correct=True)]),
        rec("1", 0, [dict(task_id="1", n=2, error="HTTP 500", correct=None)], errors=1),
        rec("2", 0, [dict(task_id="2", n=3, error=None, correct=False)]),                 # the later record wins
        rec("3", 0, [dict(task_id="3", n=4, error="", correct=True)], sha="other")])     # another configuration
    frames, failed = _collect(tmp_path, "controlled", "s1")
    d = frames["decisions"]
    assert failed == 1 and list(d.task_id) == ["1", "2"] and list(d.n) == [2, 3]
    assert list(d.error) == ["HTTP 500", ""] and str(d.correct.dtype) == "boolean"
    assert d.correct.isna().tolist() == [True, False] and bool(d.correct[1]) is False
    back = read_tables(tmp_path, "controlled")["decisions"]
    import pyarrow.parquet as pq
    # the written table holds its columns only (no pandas index column for other readers to stumble on)
    assert pq.read_schema(tmp_path / "hiddenbench_controlled.parquet").names == ["task_id", "n", "error", "correct"]
    assert list(back.error) == ["HTTP 500", ""] and list(back.n) == [2, 3]


def test_collect_gives_rows_written_before_the_error_column_an_empty_error(tmp_path):
    from crossprofile_lib.hiddenbench.run import _collect
    _write_sessions(tmp_path, "natural", [dict(task_id="1", seed=0, ablation="baseline", config_sha="s", rows=dict(
        votes=[dict(agent="A1", correct=True)], sessions=[dict(group_correct=True)], decisions=[]))])
    frames, failed = _collect(tmp_path, "natural", "s")
    assert failed == 0 and list(frames["votes"].error) == [""] and list(frames["sessions"].error) == [""]
    assert len(frames["decisions"]) == 0 and "error" not in frames["decisions"]
    assert str(frames["votes"].correct.dtype) == "bool"                 # only the controlled table is cast


def test_a_hiddenbench_file_keeps_its_valid_tasks_and_names_each_bad_record(tmp_path, monkeypatch):
    import hashlib
    import json

    from crossprofile_lib.hiddenbench.importer import ENV_VAR, HiddenBenchError, load_hiddenbench
    monkeypatch.delenv(ENV_VAR, raising=False)
    f = tmp_path / "hb.json"
    recs = [_record(id=1), "not a task", _record(id=2, description="  Pick \n a caterer. "), _record(id=1),
            _record(id=3, name="bell\x07")]
    f.write_text(json.dumps(recs))
    d = load_hiddenbench(f)
    assert [t.id for t in d.tasks] == ["1", "2"] and d.tasks[1].description == "Pick a caterer."
    assert [str(e) for e in d.errors] == [
        f"{f}: task #1: field '<record>': must be a JSON object, found str",
        f"{f}: task 1: field 'id': duplicate id (also record #0)",
        f"{f}: task 3: field 'name': json (control characters): character U+0007 (unnamed, category Cc) in the value: "
        "control, invisible and unassigned characters are not allowed"]
    assert (d.path, d.is_fixture, d.n_records, d.notes) == (f, False, 5, ())
    assert d.sha256 == hashlib.sha256(f.read_bytes()).hexdigest() and d.data_source == f"hb.json@{d.sha256[:12]}"
    with pytest.raises(HiddenBenchError) as e:
        load_hiddenbench(f, strict=True)
    assert str(e.value) == f"{f}: task #1: field '<record>': must be a JSON object, found str"
    f.write_text(json.dumps({"tasks": []}))
    with pytest.raises(HiddenBenchError) as e:
        load_hiddenbench(f)
    assert str(e.value).startswith(f"{f}: task -: field '<file>': must be a JSON array of tasks, found ")
    # a broken file found through the environment variable says so
    f.write_text("[{")
    monkeypatch.setenv(ENV_VAR, str(f))
    with pytest.raises(HiddenBenchError) as e:
        load_hiddenbench()
    assert str(e.value).startswith(f"{f} (${ENV_VAR}): task -: field ") and e.value.task == "-"
    with pytest.raises(HiddenBenchError) as e:
        load_hiddenbench(f)
    assert str(e.value).startswith(f"{f}: task -: field ")


_REFUSED = ("{what}: 1 of {n} rows are failed model calls (column 'error' set); they are not decisions. Rerun the command "
            "that made the run (finished calls come from the cache) or pass --allow-errors to drop them")


@pytest.mark.parametrize("failed, what, n", [
    ("sessions", "the HiddenBench natural sessions table", 1),
    ("votes", "the HiddenBench natural votes table", 2),
    ("decisions", "the HiddenBench natural decisions table", 2),
])
def test_the_natural_summary_names_the_table_holding_a_failed_call(failed, what, n):
    from crossprofile_lib.hiddenbench.measures import natural_summary
    from crossprofile_lib.stats.analysis_set import FailedCallsError
    t = dict(sessions=pd.DataFrame(dict(ablation=["baseline"], group_correct=[True], disclosure_rate=[1.0], error=[""])),
             votes=pd.DataFrame(dict(ablation=["baseline"] * 2, phase=["initial", "final"], correct=[False, True],
                                     invalid=[0, 0], error=["", ""])),
             decisions=pd.DataFrame(dict(ablation=["baseline"] * 2, budget_label=["0.6"] * 2, policy=["R1"] * 2,
                                         correct=[True, False], error=["", ""])))
    t[failed].loc[len(t[failed]) - 1, "error"] = "HTTP 500"
    with pytest.raises(FailedCallsError) as e:
        natural_summary(t["sessions"], t["votes"], t["decisions"], "0.6")
    assert str(e.value) == _REFUSED.format(what=what, n=n)


def test_the_controlled_summary_names_its_table_and_headroom_its_own():
    from crossprofile_lib.hiddenbench.measures import controlled_summary, headroom
    from crossprofile_lib.stats.analysis_set import FailedCallsError
    d = pd.DataFrame(dict(policy=["ALL", "EMPTY"], budget_label=["none"] * 2, decided=[True, True], correct=[True, None],
                          invalid=[0, 0], kept_hidden=[3, 0], kept_shared=[3, 0], hidden_retention=[1.0, 0.0],
                          profile_complete=[1, 0], task_id=["1", "1"], error=["", "HTTP 500"]))
    with pytest.raises(FailedCallsError) as e:
        controlled_summary(d, "none")
    assert str(e.value) == _REFUSED.format(what="the HiddenBench controlled table", n=2)
    with pytest.raises(FailedCallsError) as e:
        headroom(d, None)
    assert str(e.value) == _REFUSED.format(what="the HiddenBench decisions table", n=2)


def test_a_retried_vote_may_name_the_answer_instead_of_the_letter(tasks):
    # A1's retry names Cedar Kitchen (letter B at seed 1) in other case and spacing; A3's first vote names Birch Foods
    rec = _natural_record(tasks, answers={("hb-vote-initial-retry", "A1"): '{"vote": "cedar  KITCHEN", "rationale": "ok"}',
                                          ("hb-vote-initial", "A3"): '{"vote": "Birch Foods"}'})
    v = {(x["agent"], x["phase"]): x for x in rec["artefacts"]["votes"]}
    assert (v[("A1", "initial")]["letter"], v[("A1", "initial")]["rationale"], v[("A1", "initial")]["retried"]) == (
        "B", "ok", True)
    assert (v[("A3", "initial")]["letter"], v[("A3", "initial")]["retried"]) == ("A", False)
    s = rec["rows"]["sessions"][0]
    assert (s["initial_invalid"], s["initial_accuracy"]) == (0, 1 / 3)


def test_a_failed_calls_partial_text_is_neither_a_vote_nor_a_message(tasks):
    # A3's first vote and round-1 message fail with some text in the result: read as empty (the vote is retried)
    rec = _natural_record(tasks, fail=("hb-vote-initial", "hb-message-r1"))
    a = rec["artefacts"]
    v = next(x for x in a["votes"] if (x["agent"], x["phase"]) == ("A3", "initial"))
    assert v["raw"] == ["", 'Sure. {"vote": "A", "rationale": "Based on what I know."}'] and v["retried"] is True
    assert a["messages"][1] == dict(index=1, round=1, speaker="A3", text="", raw="")
    assert [e["message_index"] for e in a["extraction"]] == [0, 2, 3, 4]          # empty messages are not extracted
    assert rec["rows"]["sessions"][0]["error"] == "2 of 20 calls of the session failed: HTTP 503: busy"
    assert rec["rows"]["sessions"][0]["empty_messages"] == 2


def test_the_duplicate_question_is_a_short_yes_no_request_naming_both_claims():
    s = _Session([OVEN, GREY])
    backend = _Answers("yes")
    _merge(backend, [s], confirm=True)
    [r] = backend.requests
    assert (r.purpose, r.prompt_file, r.max_tokens, r.choices) == (
        "hb-confirm-duplicate", "natural/confirm_duplicate_v1.txt", 4, ("yes", "no"))
    [m] = r.messages
    assert m["role"] == "user" and m["content"].index(OVEN) < m["content"].index(GREY)
    assert s.logged == [("hb-confirm-duplicate", "yes")] and s.log_agents == [""]      # no agent asks it


def test_the_task_view_by_hand_ids_holders_and_template(tasks):
    from crossprofile_lib.hiddenbench.common import HiddenBenchVariant, task_view
    t = tasks[0]
    v = task_view(t, 5)
    assert (v.task_id, v.seed, v.n_agents, v.source, v.variant) == ("hb-1/s5", 5, 3, t, HiddenBenchVariant())
    assert v.variant.support_attr == "private" and v.variant.decoy_attr == "shared"
    # each shared fact is held by every agent, each hidden fact by its one agent
    assert v.holders == {"S1": ("A1", "A2", "A3"), "S2": ("A1", "A2", "A3"), "S3": ("A1", "A2", "A3"),
                         "H1": ("A1",), "H2": ("A2",), "H3": ("A3",)}
    tpl = v.template
    assert (tpl.id, tpl.version, tpl.domain, tpl.title, tpl.description, tuple(tpl.criteria)) == (
        "hb-1", 1, "hiddenbench", "FIXTURE picnic caterer", t.description, ())
    assert [(o.id, o.name) for o in tpl.options] == [("O1", "Amber Catering"), ("O2", "Birch Foods"), ("O3", "Cedar Kitchen")]
    assert tpl.correct_option == "O3"
    assert [(f.id, f.role, f.about, f.polarity, f.criterion) for f in tpl.facts] == [
        ("S1", "shared", "", 0, None), ("S2", "shared", "", 0, None), ("S3", "shared", "", 0, None),
        ("H1", "hidden", "O3", 1, None), ("H2", "hidden", "O3", 1, None), ("H3", "hidden", "O3", 1, None)]
    assert [f.text for f in tpl.facts] == [AMBER_S1, AMBER_S2, CEDAR_S3, AMBER_H, BIRCH_H, CEDAR_H]


def test_natural_memories_summarise_the_sessions_own_transcript_and_a_chatless_backend_is_refused(tasks):
    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.ablations import get_ablation
    from crossprofile_lib.hiddenbench.common import PolicyPlan
    from crossprofile_lib.hiddenbench.natural import run_natural_chunk
    fake = ScriptedBackend(tasks)
    plan = PolicyPlan.for_backend(["B3", "Random"], fake, "natural")
    [rec] = run_natural_chunk([(tasks[0], 1, get_ablation("baseline"))], plan, ["0.3"], fake, {})
    # B3: the fake summary is the first words of the transcript it is shown (the messages in speaking order, by
    # speaker); Random: the seeded pick of the session's claims that fits 48 tokens
    assert [(m["policy"], m["text"], m["tokens"]) for m in rec["artefacts"]["memories"]] == [
        ("B3", "A1: I know that Amber Catering had its food safety licence suspended last week after a failed "
               "inspection. I favour A. A3: I know", 33),
        ("Random", f"[A1] {AMBER_H}\n[A3] {CEDAR_H}", 48)]
    assert all(r.json_schema is None for r in fake.requests)          # votes are unconstrained by default

    class NoChat(ScriptedBackend):
        capabilities = frozenset()
    with pytest.raises(ValueError) as e:
        list(run_natural_chunk([(tasks[0], 1, get_ablation("baseline"))], plan, ["0.3"], NoChat(tasks), {}))
    assert str(e.value) == ("the natural protocol needs a model backend with chat; 'scripted/fake-v1' has none "
                            "(use e.g. --backend llamacpp/smollm2-135m)")
    assert list(run_natural_chunk([], plan, ["0.3"], fake, {})) == []


@pytest.mark.parametrize("n, dots", [(20, False), (21, True), (22, True)])
def test_the_ids_named_in_an_unknown_id_refusal_stop_at_20_with_dots_only_when_more_are_there(tasks, n, dots):
    from dataclasses import replace

    from crossprofile_lib.hiddenbench.importer import select_tasks
    many = [replace(tasks[0], id=f"t{i:02d}") for i in range(n)]
    with pytest.raises(ValueError) as e:
        select_tasks(SimpleNamespace(tasks=many, path="hb.json"), ["nope"])
    first20 = ", ".join(f"t{i:02d}" for i in range(20))
    assert str(e.value).endswith(f"ids there: {first20}{', ...' if dots else ''})")


def test_every_fact_of_a_hiddenbench_view_is_relevant_to_the_oracle(tasks):
    from crossprofile_lib.hiddenbench.common import task_view
    from crossprofile_lib.task.discussion import Claim, ClaimList
    from crossprofile_lib.task.evidence import oracle_relevance
    view = task_view(tasks[0], 0)
    ids = [f.id for f in view.template.facts]
    assert ids[:2] == ["S1", "S2"] and "H1" in ids
    cl = ClaimList(tuple(Claim(f"claim {i}", ("A1",), k, fact_id=i) for k, i in enumerate(ids)) +
                   (Claim("an opinion", ("A2",), len(ids)),), ("A1", "A2"))
    assert oracle_relevance(cl, view) == frozenset(range(len(ids)))      # the opinion (no fact) is not relevant


def test_the_hiddenbench_run_header_is_written_indented_for_reading(tasks, tmp_path):
    import json

    from hiddenbench_fake import ScriptedBackend

    from crossprofile_lib.hiddenbench.run import HBConfig, run_hiddenbench
    cfg = HBConfig(backend="scripted/fake-v1", protocols=["controlled"], seeds=[0], ablations=["baseline"],
                   policies=["EMPTY"], tasks=[tasks[0].id], batch_tasks=1)
    h = run_hiddenbench(cfg, tmp_path, backend=ScriptedBackend(tasks))
    text = (tmp_path / "hiddenbench_run.json").read_text()
    assert text == json.dumps(h, indent=2, sort_keys=True, default=str) + "\n"
