"""Issue 25 (found by the mutation trial): rules whose fixtures could not tell them from a near miss.

* the net evidence lead (SPEC section 8: correct option's net score minus the decoy's over the kept
  relevant facts, -3 .. +5): the ALL memory gives +2 under the right rule *and* under "add the decoy's
  score", so the groups are checked one by one (support only +5, decoy only -3);
* evidence retention is kept support / 5;
* a claim's first mention is the position of its *first* utterance (shared facts are first stated in the
  first speaker's turn);
* a contrast's negative weights: R1 - B4 where B4's mean is not 0 (with B4 at 0, R1 + B4 = R1 - B4).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.contrasts import evaluate_contrasts, parse_prereg
from crossprofile_lib.task.discussion import claim_list, make_task, scripted_discussion
from crossprofile_lib.task.evidence import composition
from crossprofile_lib.task.memory import Memory


def _memory_of(task, cl, roles):
    kept = tuple(c for c in cl.claims if task.template.fact(c.fact_id).role in roles)
    return Memory("test", "claims", kept, tuple(c.count for c in kept), "", 0)


@pytest.mark.parametrize("roles, support, decoy, irrelevant, lead", [
    ({"support"}, 5, 0, 0, 5),               # 3 x (+1 correct) and 2 x (-1 decoy): +3 - (-2) = +5
    ({"decoy"}, 0, 3, 0, -3),                # 2 x (+1 decoy) and 1 x (-1 correct): -1 - 2 = -3
    ({"irrelevant"}, 0, 0, 4, 0),            # irrelevant facts never count
    ({"support", "decoy"}, 5, 3, 0, 2),
    ({"support", "decoy", "irrelevant"}, 5, 3, 4, 2),
])
def test_net_lead_and_retention_group_by_group(hospital, roles, support, decoy, irrelevant, lead):
    task = make_task(hospital, "PSP", 0)
    cl = claim_list(scripted_discussion(task))
    c = composition(task, _memory_of(task, cl, roles))
    assert (c.kept_support, c.kept_decoy, c.kept_irrelevant, c.net_lead) == (support, decoy, irrelevant, lead)
    assert c.retention == support / 5


def test_first_mention_is_the_first_utterance_and_shared_facts_open_with_the_first_speaker(dev_templates):
    for t in dev_templates[:3]:
        for v in ("SSS", "PSP", "SPS"):
            task = make_task(t, v, 1)
            tr = scripted_discussion(task)
            cl = claim_list(tr)
            first = {}
            for u in tr.utterances:
                first.setdefault(u.fact_id, u.position)
            assert [c.first_mention for c in cl.claims] == sorted(first.values())
            assert all(c.first_mention == first[c.fact_id] for c in cl.claims)
            opener = sum(1 for u in tr.utterances if u.speaker == tr.speaker_order[0])
            for c in cl.claims:
                if c.count == 4:       # a shared fact is first stated in the first speaker's turn
                    assert c.first_mention < opener and c.first_speaker == tr.speaker_order[0]


def test_a_contrast_subtracts_a_term_with_a_nonzero_mean():
    # template a: R1 1, 1, 1, 0 ; B4 1, 0, 0, 0 -- template b: R1 1, 1 ; B4 1, 1 (unequal sizes)
    df = pd.DataFrame(dict(template_id=list("aaaaaaaabbbb"), budget_label="0.6",
                           policy=["R1"] * 4 + ["B4"] * 4 + ["R1", "R1", "B4", "B4"],
                           decoy_attr="shared",
                           correct=[1, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 1]))
    df["correct"] = df["correct"].astype(bool)
    doc = {"contrasts": [{"id": "d", "terms": [{"weight": 1, "where": {"policy": "R1"}},
                                               {"weight": -1, "where": {"policy": "B4"}}]}]}
    boot = TemplateBootstrap(("a", "b"), np.array([[0, 0], [1, 1], [0, 1]]))
    r = evaluate_contrasts(df, parse_prereg(doc), boot).iloc[0]
    # R1 5/6, B4 3/6 -> +33.3 points; resamples (a,a) 3/4 - 1/4 = 50, (b,b) 1 - 1 = 0, (a,b) 33.3
    assert r.estimate == pytest.approx(100 * (5 / 6 - 3 / 6))
    assert (r.lo, r.hi) == pytest.approx(tuple(np.quantile([50.0, 0.0, 100 / 3], [0.025, 0.975])))
