import json

import pandas as pd
import pytest
from hiddenbench_fake import ScriptedBackend

from crossprofile_lib.hiddenbench.ablations import ABLATIONS, get_ablation, parse_ablations, prompt_files
from crossprofile_lib.hiddenbench.importer import FIXTURE_PATH, load_hiddenbench
from crossprofile_lib.hiddenbench.measures import group_vote, natural_summary, paper_table
from crossprofile_lib.hiddenbench.natural import Session, clean_message, parse_vote
from crossprofile_lib.hiddenbench.run import HBConfig, iter_artefacts, read_tables, run_hiddenbench
from crossprofile_lib.prompts import fields_of

POLICIES = ("R1", "B4", "M1", "Random", "R1-rel", "B3", "EMPTY", "ALL", "REF", "private-only", "shared-only")


@pytest.fixture(scope="module")
def tasks():
    return load_hiddenbench(FIXTURE_PATH).tasks


@pytest.mark.parametrize("text, letter", [
    ('{"vote": "B", "rationale": "r"}', "B"),
    ('```json\n{"Vote": "(c)", "rationale": "r"}\n```', "C"),
    ('I pick {"vote": "Option A."}', "A"),
    ('{"vote": "the yeast", "rationale": "r"}', "C"),
    ('{"vote": "E"}', None),                      # not an option letter
    ('{"vote": 2}', None),
    ('vote: B', None),                            # not JSON
    ('{"rationale": "x"} then {"vote": "A"}', "A"),
    ("", None),
])
def test_parse_vote(text, letter):
    assert parse_vote(text, ("A", "B", "C"), ("The oven", "The flour", "The yeast"))[0] == letter


def test_group_vote_tie_rule():
    g = group_vote([("A2", "O1"), ("A1", "O2"), ("A3", "O2")])
    assert g.option == "O2" and not g.tie and g.strict_majority
    t = group_vote([("A3", "O2"), ("A1", "O1"), ("A2", "O1"), ("A4", "O2")])
    assert t.option == "O2" and t.tie and not t.strict_majority   # the earliest speaker's choice wins
    v = group_vote([("A1", None), ("A2", "O3"), ("A3", None)])
    assert v.option == "O3" and v.n_valid == 1 and not v.strict_majority
    assert group_vote([("A1", None), ("A2", None)]).option is None


def test_clean_message():
    assert clean_message("A2:  I know\n that the oven   is old.", 60) == "I know that the oven is old."
    assert clean_message(" ".join(["w"] * 300), 10).split() == ["w"] * 20
    assert clean_message("**Message:** hi there", 60) == "hi there"


def test_ablations_by_name_and_prompt_files():
    assert set(ABLATIONS) == {"baseline", "evidence-first", "unique-first", "no-vote-reminder"}
    assert [a.name for a in parse_ablations("all")] == list(ABLATIONS)
    with pytest.raises(ValueError, match="unknown ablation"):
        get_ablation("nope")
    for a in ABLATIONS.values():  # the vote reminder is a placeholder exactly where the ablation shows it
        assert ("initial_vote" in fields_of(a.message_prompt)) == a.shows_initial_vote
    assert all(f.startswith("natural/") and "_v1" in f for f in prompt_files())


def test_session_seeded_facts_and_order(tasks):
    t = tasks[1]
    a = Session(t, 0, get_ablation("baseline"))
    b = Session(t, 0, get_ablation("unique-first"))
    c = Session(t, 1, get_ablation("baseline"))
    assert a.speaking_order == b.speaking_order and a.facts == b.facts   # common random numbers
    assert (a.speaking_order, a.facts) != (c.speaking_order, c.facts)
    for k, ag in enumerate(a.agents):
        assert sorted(a.facts[ag]) == sorted([*t.shared, t.hidden[k]])
    assert a.facts_text("A1").startswith("1. ")


@pytest.fixture(scope="module")
def natural_run(tasks, tmp_path_factory):
    out = tmp_path_factory.mktemp("hb_natural")
    fake = ScriptedBackend(tasks, junk=("A3",), junk_once=("A2",), junk_extract=("A4",))
    cfg = HBConfig(backend="scripted/fake-v1", protocols=["natural"], seeds=[0, 1], policies=POLICIES,
                   batch_tasks=4)
    header = run_hiddenbench(cfg, out, backend=fake)
    return out, header, read_tables(out, "natural"), fake


def test_tables_and_counts(natural_run, tasks):
    out, header, t, fake = natural_run
    n_sessions = 6 * 2 * 4
    assert len(t["sessions"]) == n_sessions
    assert len(t["votes"]) == 2 * 2 * 4 * sum(x.n_agents for x in tasks)
    assert set(t["decisions"].policy) == set(POLICIES) and (t["decisions"].data_source == "fixture").all()
    v = t["votes"]
    # A2's first reply is junk and its retry valid; A3 is junk twice: invalid, counted wrong
    assert v[v.agent == "A2"].retried.all() and not v[v.agent == "A2"].invalid.any()
    assert v[v.agent == "A3"].invalid.all() and not v[v.agent == "A3"].correct.any()
    assert not v[v.agent == "A1"].retried.any()
    info = header["protocols"]["natural"]
    assert info["invalid_votes"] == int(v.invalid.sum()) == 2 * 2 * 4 * 6
    # A4's extraction is junk twice: its messages fall back to their sentences
    s = t["sessions"]
    four = s[s.n_agents == 4]
    assert (four.extraction_fallbacks == 2).all() and (s[s.n_agents == 3].extraction_fallbacks == 0).all()
    assert info["extraction_fallbacks"] == int(s.extraction_fallbacks.sum())


def test_measures_of_the_scripted_agents(natural_run):
    out, header, t, fake = natural_run
    v, s, d = t["votes"], t["sessions"], t["decisions"]
    # every agent restates its hidden fact: full disclosure; before the talk nobody knows the answer
    assert (s.disclosure_rate == 1).all() and (s.holder_disclosure_rate == 1).all()
    ok = v[~v.invalid]
    assert (ok[ok.phase == "initial"].vote_letter == "A").all()  # one hidden fact is not enough
    assert ok[ok.phase == "final"].correct.all()
    assert s.group_correct.all()
    acc = d.groupby("policy").correct.mean()
    assert acc["ALL"] == 1 and acc["REF"] == 1 and acc["EMPTY"] == 0 and acc["shared-only"] == 0
    assert (d[d.policy == "ALL"].kept_hidden == d[d.policy == "ALL"].n_hidden).all()
    summ = natural_summary(s, v, d)
    assert list(summ.index) == list(ABLATIONS) and summ.loc["baseline", "group_vote"] == 100.0
    assert {"initial_vote", "final_vote", "disclosure", "REF", "ALL", "EMPTY"} <= set(summ.columns)
    assert "paper low" in paper_table("natural").columns


def test_artefacts_hold_everything_for_the_book(natural_run):
    out, header, t, fake = natural_run
    recs = list(iter_artefacts(out, "natural"))
    assert len(recs) == 48
    a = recs[0]["artefacts"]
    for k in ("facts", "votes", "messages", "extraction", "raw_claims", "claims", "memories", "calls",
              "disclosure", "speaking_order", "options"):
        assert a[k] is not None
    assert len(a["messages"]) == 2 * len(a["speaking_order"])
    assert {m["round"] for m in a["messages"]} == {1, 2}
    assert all(m["raw"].startswith("A9: ") and not m["text"].startswith("A9") for m in a["messages"])
    assert any(c["restates"] for c in a["claims"])
    mem = {m["policy"]: m for m in a["memories"]}
    assert mem["REF"]["text"].startswith(a["speaking_order"][0] + ": ")
    h = json.loads((out / "hiddenbench_run.json").read_text())
    assert set(h["prompts"]) == set(prompt_files()) and all(len(x) == 64 for x in h["prompts"].values())


def test_prompts_follow_the_protocol(natural_run, tasks):
    _, _, _, fake = natural_run
    msgs = [r for r in fake.requests if r.purpose.startswith("hb-message")]
    base = [r for r in msgs if r.prompt_file.endswith("message_baseline_v1.txt")]
    novote = [r for r in msgs if r.prompt_file.endswith("message_no_vote_reminder_v1.txt")]
    assert base and novote
    assert all("Your private initial vote" in r.messages[1]["content"] for r in base)
    assert not any("Your private initial vote" in r.messages[1]["content"] for r in novote)
    first = [r for r in base if r.purpose == "hb-message-r1" and "(no messages yet)" in r.messages[1]["content"]]
    assert first  # the first speaker of round 1 sees no message
    r2 = [r for r in base if r.purpose == "hb-message-r2"]
    for r in r2:  # round 2: one latest message per other member, never one's own
        me = r.messages[0]["content"].split("You are ")[1].split(",")[0]
        disc = r.messages[1]["content"].split("other member:\n", 1)[1].split("\n\nWrite", 1)[0]
        speakers = [ln.split(":")[0] for ln in disc.splitlines()]
        assert me not in speakers and len(speakers) == len(set(speakers))
    votes = [r for r in fake.requests if r.purpose == "hb-vote-initial"]
    assert all(r.json_schema is None for r in votes)  # free generation unless constrained_votes
    assert not any("round" in r.messages[1]["content"] for r in votes)  # initial votes are private


def test_resume_skips_sessions_on_file(natural_run, tasks, tmp_path):
    out, header, t, _ = natural_run
    dead = ScriptedBackend(tasks, junk=("A3",), junk_once=("A2",), junk_extract=("A4",), fail_on_call=True)
    cfg = HBConfig(backend="scripted/fake-v1", protocols=["natural"], seeds=[0, 1], policies=POLICIES)
    h2 = run_hiddenbench(cfg, out, backend=dead)
    assert h2["protocols"]["natural"]["sessions_run"] == 0 and h2["protocols"]["natural"]["sessions_resumed"] == 48
    t2 = read_tables(out, "natural")
    for k in t:
        pd.testing.assert_frame_equal(t[k], t2[k])


def test_confirm_duplicates_asks_the_model(tasks, tmp_path):
    fake = ScriptedBackend(tasks)
    run_hiddenbench(HBConfig(backend="scripted/fake-v1", protocols=["natural"], seeds=[0], ablations=["baseline"],
                             policies=["ALL"], tasks=["5"], confirm_duplicates=True, constrained_votes=True),
                    tmp_path, backend=fake)
    s = read_tables(tmp_path, "natural")["sessions"]
    assert len(s) == 1 and s.n_claims.iloc[0] <= s.n_claims_raw.iloc[0]
    votes = [r for r in fake.requests if r.purpose.startswith("hb-vote")]
    assert votes and all(r.json_schema["properties"]["vote"]["enum"] == ["A", "B", "C"] for r in votes)


def test_streams_65_tasks_x_3_seeds_x_4_ablations(tasks, tmp_path):
    """Scale: 780 sessions; artefacts are appended chunk by chunk (never all in memory)."""
    recs = json.loads(FIXTURE_PATH.read_text())
    big = []
    for i in range(65):
        r = dict(recs[i % len(recs)], id=1000 + i)
        r["description"] = f"(case {i}) " + r["description"]
        big.append(r)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big))
    data = load_hiddenbench(path)
    fake = ScriptedBackend(data.tasks)
    sizes = []
    import crossprofile_lib.hiddenbench.run as run_mod
    orig = run_mod.run_natural_chunk

    def spy(units, *a, **k):
        sizes.append(len(units))
        art = tmp_path / "out" / "artefacts" / "natural.jsonl"
        written = sum(1 for _ in art.open()) if art.exists() else 0
        assert written == sum(sizes[:-1])  # every earlier chunk is on disk before the next starts
        return orig(units, *a, **k)

    run_mod.run_natural_chunk = spy
    try:
        h = run_hiddenbench(HBConfig(backend="scripted/fake-v1", hiddenbench=str(path), protocols=["natural"],
                                     policies=["R1", "ALL", "EMPTY"], batch_tasks=5), tmp_path / "out", backend=fake)
    finally:
        run_mod.run_natural_chunk = orig
    assert h["protocols"]["natural"]["rows"]["sessions"] == 780 and max(sizes) == 5 * 3 * 4
    assert h["data_source"].startswith("big.json@")
