"""The classroom explorer's plain-Python path: one call renders a task in Jupyter, ties are ties,
and the exercises' answers come from the template in hand."""

from __future__ import annotations

import re

from crossprofile_lib.book import explorer
from crossprofile_lib.design import CLASSIC, MIRROR


def test_explore_renders_itself_with_the_policy_in_focus(hospital):
    e = explorer.explore(hospital, "SPS", "B4", "0.6")
    page = e._repr_html_()
    assert "data-policy='B4'" in page and "data-variant='SPS'" in page
    assert re.search(r"<details class='cp-memory' data-policy='B4' open>", page)
    assert "(mirror cell)" in page and "not a language model" in page


def test_walkthrough_renders_itself_in_jupyter(hospital):
    w = explorer.walkthrough(hospital, CLASSIC, policies=("R1", "ALL"))
    assert w._repr_html_() == w.html() and "data-policy='R1'" in w.html()


def test_a_tied_top_score_is_a_tie_never_correct(hospital):
    e = explorer.explore(hospital, CLASSIC, "EMPTY", "0.6")
    v = e.verdicts()["EMPTY"]
    assert len(v.tied) == len(hospital.options) and set(v.scores.values()) == {0.0}
    word = v.word(hospital)
    assert word.startswith("tie between") and "correct" not in word
    assert "tie between" in e.html()


def test_a_clear_win_names_the_outcome(hospital):
    e = explorer.explore(hospital, CLASSIC, "ALL", "0.6")
    v = e.verdicts()["ALL"]
    assert len(v.tied) == 1 and v.word(hospital) == ("correct" if v.option == hospital.correct_option else
                                                    "decoy" if v.option == hospital.decoy_option else "third option")


def test_exercises_cover_both_cells_with_computed_answers(hospital):
    page = explorer.exercises(hospital, "0.6")
    assert f"classic cell, {CLASSIC}" in page and f"mirror cell, {MIRROR}" in page
    r1 = explorer.explore(hospital, MIRROR, "R1", "0.6").view.composition("R1")
    assert f"R1 keeps {r1.kept_support} support, {r1.kept_decoy} decoy" in page
    assert page.count("<details>") == 2


def test_outcome_is_one_word_and_says_tie(hospital):
    e = explorer.explore(hospital, CLASSIC, "EMPTY", "0.6", policies=("EMPTY", "ALL"))
    assert explorer.outcome(e.view, "EMPTY") == "tie"
    assert explorer.outcome(e.view, "ALL") in ("correct", "decoy", "third option")
