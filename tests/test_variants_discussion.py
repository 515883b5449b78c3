from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossprofile_lib.task.discussion import claim_list, label, make_task, scripted_discussion
from crossprofile_lib.task.variants import VARIANT_NAMES, VARIANTS, Variant, agent_names


def test_eight_variants_named_support_decoy_irrelevant():
    assert len(VARIANTS) == 8 and len(set(VARIANT_NAMES)) == 8
    v = Variant("PSP")
    assert (v.support_attr, v.decoy_attr, v.irrelevant_attr) == ("private", "shared", "private")
    assert v.cell == "classic" and Variant("SPS").cell == "mirror" and Variant("SSS").cell == "other"
    with pytest.raises(ValueError):
        Variant("PXP")


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), vi=st.integers(0, 7), n_agents=st.sampled_from([3, 4, 6, 8]))
def test_holders_shared_all_private_one_and_even(dev_templates, seed, vi, n_agents):
    t = dev_templates[seed % len(dev_templates)]
    v = VARIANTS[vi]
    task = make_task(t, v, seed, n_agents)
    agents = agent_names(n_agents)
    load = Counter()
    for f in t.facts:
        h = task.holders[f.id]
        if v.attr(f.role) == "shared":
            assert h == agents
        else:
            assert len(h) == 1
            load[h[0]] += 1
    n_private = sum(len(t.facts_by_role(r)) for r in ("support", "decoy", "irrelevant") if v.attr(r) == "private")
    if n_private:
        counts = [load[a] for a in agents]
        assert max(counts) - min(counts) <= 1
    # each private group is itself spread evenly
    for r in ("support", "decoy", "irrelevant"):
        if v.attr(r) == "private":
            c = Counter(task.holders[f.id][0] for f in t.facts_by_role(r))
            assert max(c.values()) <= -(-len(t.facts_by_role(r)) // n_agents)


def test_transcript_every_holder_states_each_fact_once(hospital):
    task = make_task(hospital, "PSP", 7)
    tr = scripted_discussion(task)
    stated = Counter((u.speaker, u.fact_id) for u in tr.utterances)
    assert all(n == 1 for n in stated.values())
    assert len(tr.utterances) == sum(len(h) for h in task.holders.values())
    # speakers take whole turns in the speaker order
    turns = [u.speaker for u in tr.utterances]
    assert [s for i, s in enumerate(turns) if i == 0 or turns[i - 1] != s] == list(
        s for s in tr.speaker_order if s in turns)


def test_shared_facts_appear_in_first_speakers_turn(hospital):
    task = make_task(hospital, "SSP", 1)
    tr = scripted_discussion(task)
    first = tr.speaker_order[0]
    first_turn = {u.fact_id for u in tr.utterances if u.speaker == first}
    shared = {f.id for f in hospital.facts if f.role in ("support", "decoy")}
    assert shared <= first_turn


def test_claim_list_entries(hospital):
    task = make_task(hospital, "SPS", 2)
    tr = scripted_discussion(task)
    cl = claim_list(tr)
    assert len(cl) == 12
    assert [c.first_mention for c in cl.claims] == sorted(c.first_mention for c in cl.claims)
    for c in cl.claims:
        assert c.speakers == tuple(sorted(task.holders[c.fact_id]))
        assert c.count == len(c.speakers)
        assert c.line() == f"{label(c.speakers)} {c.text}"
    assert label(["A3", "A1"]) == "[A1,A3]" and label(["A10", "A2"]) == "[A2,A10]"


def test_same_seed_same_transcript_other_seed_other_order(hospital):
    a = scripted_discussion(make_task(hospital, "PPP", 4))
    b = scripted_discussion(make_task(hospital, "PPP", 4))
    assert a == b
    orders = {scripted_discussion(make_task(hospital, "PPP", s)).speaker_order for s in range(10)}
    assert len(orders) > 1
