"""Issue 25, weak spots in the natural protocol (SPEC section 9; crossprofile_lib/hiddenbench/natural.py).

* Round 1 runs in the speaking order and **each speaker sees exactly the earlier round-1 messages**
  (speaker k sees the k - 1 before it, in order, nothing else); **round 2** shows each speaker the
  **latest** message of every other member (its round-2 message when it already spoke in round 2, else its
  round-1 message), never its own; the final vote sees the whole discussion. A scripted fake model
  records every prompt it receives and answers each message request with a unique text.
* **The group vote**: plurality of the valid final votes; a tie goes to the choice of the earliest
  *speaker* (speaking order, not agent number) among the tied options; ``strict_majority`` means more than
  half of *all* agents; invalid votes are left out.
"""

from __future__ import annotations

import re

import pytest
from hiddenbench_fake import ScriptedBackend

from crossprofile_lib.backends.base import ChatResult
from crossprofile_lib.hiddenbench.ablations import get_ablation
from crossprofile_lib.hiddenbench.importer import FIXTURE_PATH, load_hiddenbench
from crossprofile_lib.hiddenbench.measures import group_vote
from crossprofile_lib.hiddenbench.natural import Session, _round, _votes
from crossprofile_lib.hiddenbench.run import HBConfig, iter_artefacts, read_tables, run_hiddenbench

_AGENT = re.compile(r"You are (A\d+)")
_ROUND = re.compile(r"This is round (\d) of 2")


@pytest.fixture(scope="module")
def tasks():
    return load_hiddenbench(FIXTURE_PATH).tasks


class Recorder:
    """A fake chat model: every request is recorded; a message request is answered ``MSG <agent> r<round>``,
    a vote with a valid JSON vote for A."""

    name = "recorder"

    def __init__(self):
        self.requests = []

    def chat(self, requests):
        out = []
        for r in requests:
            self.requests.append(r)
            agent = _AGENT.search(r.messages[0]["content"]).group(1)
            if r.purpose.startswith("hb-message"):
                rnd = _ROUND.search(r.messages[1]["content"]).group(1)
                out.append(ChatResult(f"MSG {agent} r{rnd}"))
            else:
                out.append(ChatResult('{"vote": "A", "rationale": "r"}'))
        return out


def _discussion(req) -> list[str]:
    body = req.messages[1]["content"]
    block = re.split(r"This is round \d of 2 of the team discussion\. [^:\n]+:\n", body, maxsplit=1)[1]
    block = block.split("\n\nWrite your message", 1)[0]
    return [] if block == "(no messages yet)" else block.splitlines()


def _sessions(tasks):
    # a 4-agent and a 3-agent task in lockstep, two seeds (different speaking orders)
    four = next(t for t in tasks if t.n_agents == 4)
    three = next(t for t in tasks if t.n_agents == 3)
    return [Session(four, 0, get_ablation("baseline")), Session(three, 1, get_ablation("no-vote-reminder")),
            Session(four, 2, get_ablation("evidence-first"))]


def test_round_one_speaker_k_sees_exactly_the_earlier_round_one_messages(tasks):
    fake = Recorder()
    sessions = _sessions(tasks)
    assert len({s.speaking_order for s in sessions}) > 1
    _votes(fake, sessions, "initial")
    _round(fake, sessions, 1)
    r1 = [r for r in fake.requests if r.purpose == "hb-message-r1"]
    assert len(r1) == sum(s.task.n_agents for s in sessions)
    for s in sessions:
        mine = [r for r in r1 if s.task.description in r.messages[1]["content"]
                and r.prompt_file == s.ablation.message_prompt]
        speakers = [_AGENT.search(r.messages[0]["content"]).group(1) for r in mine]
        assert speakers == list(s.speaking_order)                      # round 1 in the speaking order
        for k, r in enumerate(mine):
            assert _discussion(r) == [f"{a}: MSG {a} r1" for a in s.speaking_order[:k]], (s.key, k)
    # the messages are recorded in order, round 1, one per agent
    for s in sessions:
        assert [(m.round, m.speaker, m.text) for m in s.messages] == [(1, a, f"MSG {a} r1") for a in s.speaking_order]


def test_round_two_shows_the_latest_message_of_every_other_member(tasks):
    fake = Recorder()
    sessions = _sessions(tasks)
    _votes(fake, sessions, "initial")
    _round(fake, sessions, 1)
    _round(fake, sessions, 2)
    r2 = [r for r in fake.requests if r.purpose == "hb-message-r2"]
    for s in sessions:
        mine = [r for r in r2 if s.task.description in r.messages[1]["content"]
                and r.prompt_file == s.ablation.message_prompt]
        assert [_AGENT.search(r.messages[0]["content"]).group(1) for r in mine] == list(s.speaking_order)
        for k, (me, r) in enumerate(zip(s.speaking_order, mine)):
            spoke_r2 = set(s.speaking_order[:k])
            want = [f"{a}: MSG {a} r{2 if a in spoke_r2 else 1}" for a in s.speaking_order if a != me]
            assert _discussion(r) == want, (s.key, me)
            assert "The latest message of each other member" in r.messages[1]["content"]
        assert [(m.round, m.speaker) for m in s.messages] == (
            [(1, a) for a in s.speaking_order] + [(2, a) for a in s.speaking_order])
    _votes(fake, sessions, "final")
    final = iter(r for r in fake.requests if r.purpose == "hb-vote-final")   # one batch, session by session
    for s in sessions:
        want = "\n".join(f"{a} (round {rnd}): MSG {a} r{rnd}" for rnd in (1, 2) for a in s.speaking_order)
        for a in s.speaking_order:
            r = next(final)
            assert _AGENT.search(r.messages[0]["content"]).group(1) == a and want in r.messages[1]["content"]
    initial = [r for r in fake.requests if r.purpose == "hb-vote-initial"]
    assert not any("MSG " in r.messages[1]["content"] for r in initial)   # the initial vote is private


# --- the group vote -------------------------------------------------------------------------------

@pytest.mark.parametrize("votes, n, option, tie, strict", [
    # plurality beats the first speaker's choice
    ([("A2", "O1"), ("A1", "O2"), ("A3", "O2")], 3, "O2", False, True),
    # a 2-2 tie: the earliest speaker (A3 speaks first) among the tied options
    ([("A3", "O2"), ("A1", "O1"), ("A2", "O1"), ("A4", "O2")], 4, "O2", True, False),
    # the earliest speaker's own option is not tied: the earliest speaker *of a tied option* decides
    ([("A1", "O3"), ("A2", "O1"), ("A3", "O2"), ("A4", "O1"), ("A5", "O2")], 5, "O1", True, False),
    ([("A1", "O3"), ("A2", "O2"), ("A3", "O1"), ("A4", "O2"), ("A5", "O1")], 5, "O2", True, False),  # not by name
    # a three-way tie
    ([("A2", "O3"), ("A1", "O1"), ("A3", "O2")], 3, "O3", True, False),
    # an invalid first vote is left out: A2 is the earliest valid speaker
    ([("A1", None), ("A2", "O2"), ("A3", "O1")], 3, "O2", True, False),
    # strict majority is over all agents: 2 valid votes of 4 agents are not more than half
    ([("A1", "O1"), ("A2", "O1"), ("A3", None), ("A4", None)], 4, "O1", False, False),
    ([("A1", "O1"), ("A2", "O1"), ("A3", "O1"), ("A4", None)], 4, "O1", False, True),
])
def test_group_vote_rule(votes, n, option, tie, strict):
    g = group_vote(votes, n)
    assert (g.option, g.tie, g.strict_majority, g.n_valid) == (option, tie, strict, sum(o is not None for _, o in votes))


class TieVotes(ScriptedBackend):
    """Final votes split 2-2 in 4-agent tasks: A1 and A3 vote the first listed option, A2 and A4 the second."""

    def _vote(self, req):
        if req.purpose != "hb-vote-final":
            return super()._vote(req)
        agent = _AGENT.search(req.messages[0]["content"]).group(1)
        letter = "A" if agent in ("A1", "A3") else "B"
        return f'{{"vote": "{letter}", "rationale": "split"}}'


def test_a_tied_group_vote_goes_to_the_earliest_speaker_in_the_run(tasks, tmp_path):
    fake = TieVotes(tasks)
    cfg = HBConfig(backend="scripted/fake-v1", protocols=["natural"], seeds=[0, 1, 2], ablations=["baseline"],
                   policies=["ALL"])
    run_hiddenbench(cfg, tmp_path, backend=fake)
    s = read_tables(tmp_path, "natural")["sessions"].set_index(["task_id", "seed"])
    checked = 0
    for rec in iter_artefacts(tmp_path, "natural"):
        a = rec["artefacts"]
        if len(a["speaking_order"]) != 4:
            continue
        first = a["speaking_order"][0]
        want = a["options"]["A" if first in ("A1", "A3") else "B"]
        row = s.loc[(rec["task_id"], rec["seed"])]
        assert row.group_tie and not row.group_strict_majority and row.group_vote == want
        checked += 1
    orders = {tuple(r["artefacts"]["speaking_order"]) for r in iter_artefacts(tmp_path, "natural")}
    assert checked >= 3
    # the fixture has speaking orders starting with both camps, so agent-number order would differ somewhere
    firsts = {o[0] for o in orders if len(o) == 4}
    assert firsts & {"A1", "A3"} and firsts & {"A2", "A4"}
