import math

import numpy as np

from crossprofile_lib.backends.ledger import ReferenceDecider
from crossprofile_lib.policies import select_memory
from crossprofile_lib.task.decision import DecisionRequest, option_order
from crossprofile_lib.task.discussion import claim_list, make_task, scripted_discussion
from crossprofile_lib.task.tokenizer import default_tokenizer


def _req(task, spec, budget=None, seed=0):
    tr = scripted_discussion(task)
    cl = claim_list(tr)
    m = select_memory(spec, cl, budget, default_tokenizer(), np.random.default_rng(seed), transcript=tr)
    return DecisionRequest(task, m, option_order(task), f"{task.task_id}/{spec}")


def test_option_order_rotates_with_seed(hospital):
    orders = [option_order(make_task(hospital, "PPP", s)) for s in range(3)]
    assert len(set(orders)) == 3 and all(sorted(o) == sorted(hospital.option_ids) for o in orders)
    assert [o[0] for o in orders] == list(hospital.option_ids)


def test_default_scores_are_polarity_sums_of_kept_relevant_facts(hospital):
    task = make_task(hospital, "PSP", 0)
    r = _req(task, "ALL")
    d = ReferenceDecider()
    s = dict(zip(r.option_order, d.option_scores(task, r.memory, r.option_order)))
    assert s == {"helix": 2.0, "corvane": 0.0, "medora": 0.0}
    assert d.decide([r])[0].option == "helix"


def test_social_proof_weight_multiplies_by_label_count(hospital):
    task = make_task(hospital, "PSP", 0)  # decoy shared (4 labels), support private (1 label)
    r = _req(task, "ALL")
    s = dict(zip(r.option_order, ReferenceDecider(social_proof=1.0).option_scores(task, r.memory, r.option_order)))
    # helix: +3 support (1 label each) - 1 decoy (4 labels -> x4) = -1; corvane: +2 decoy x4 - 2 = 6
    assert s["helix"] == -1.0 and s["corvane"] == 6.0 and s["medora"] == 0.0
    ru = _req(task, "ALL:unlabeled")
    su = dict(zip(ru.option_order, ReferenceDecider(social_proof=1.0).option_scores(task, ru.memory, ru.option_order)))
    assert su["helix"] == 2.0 and su["corvane"] == 0.0


def test_irrelevant_weight(hospital):
    task = make_task(hospital, "PPP", 0)
    r = _req(task, "ALL")
    s = dict(zip(r.option_order, ReferenceDecider(irrelevant_weight=0.5).option_scores(task, r.memory, r.option_order)))
    # irrelevant: medora +1 -1, corvane +1, helix -1
    assert s == {"helix": 1.5, "corvane": 0.5, "medora": 0.0}


def test_empty_memory_ties_break_uniformly_and_reproducibly(dev_templates):
    d = ReferenceDecider()
    picks = []
    for t in dev_templates:
        for s in range(30):
            picks.append(d.decide([_req(make_task(t, "PPP", s), "EMPTY")])[0].option == t.correct_option)
    assert 0.25 < np.mean(picks) < 0.42
    t = dev_templates[0]
    r = _req(make_task(t, "PPP", 5), "EMPTY")
    assert d.decide([r])[0] == d.decide([r])[0]


def test_finite_temperature_samples_from_softmax(hospital):
    d = ReferenceDecider(inverse_temperature=1.0)
    wins = np.mean([d.decide([_req(make_task(hospital, "PPP", s), "ALL")])[0].option == "helix" for s in range(300)])
    p = math.exp(2) / (math.exp(2) + 2)
    assert abs(wins - p) < 0.1
    assert "beta=1" in d.model and ReferenceDecider().model.endswith("beta=inf)")
