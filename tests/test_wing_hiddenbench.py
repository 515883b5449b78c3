"""HiddenBench's rules where they live (issue 55: the hiddenbench wing's mutation survivors): the duplicate
confirmation reads the model's LAST yes/no, only grey-zone pairs are put to the model, a "no" keeps two claims apart;
hand-checked cases whose outcome differs under each near miss."""

from __future__ import annotations

import pytest

from crossprofile_lib.backends.base import ChatResult
from crossprofile_lib.hiddenbench.claims import CONFIRM_LOW, MERGE_THRESHOLD, RawClaim, grey_pairs, jaccard, key, merge_claims
from crossprofile_lib.hiddenbench.natural import _merge

OVEN = "The oven temperature sensor reads twenty degrees low"
SAME = "The oven temperature sensor reads low by twenty degrees since Monday"    # Jaccard 7/9 with OVEN: merged
GREY = "The oven sensor reads low since the repair last Monday"                  # Jaccard 4/11 with OVEN: ask
OTHER = "The flour was delivered damp on Tuesday morning"                        # nothing in common: new claim


class _Session:
    """What ``_merge`` reads of a session: its extracted claims, speaking order and agents; ``log`` records calls."""

    def __init__(self, claims):
        self.extraction = [dict(speaker=f"A{k + 1}", message_index=k, claims=[c]) for k, c in enumerate(claims)]
        self.speaking_order = [f"A{k + 1}" for k in range(len(claims))]
        self.agents = list(self.speaking_order)
        self.logged = []

    def log(self, req, res, agent):
        self.logged.append((req.purpose, res.text))


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
