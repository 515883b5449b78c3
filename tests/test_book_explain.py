"""Why the reference decider and the paper differ, computed (issue 52 item 2; crossprofile_lib/book/explain.py): the
sentence's numbers and verdict come from the mechanism table, on hand-made tables whose verdicts differ."""

from __future__ import annotations

import pandas as pd

from crossprofile_lib.book.explain import S_SWEEP, Mechanism, why, why_table

H2 = "cp-mean/H2: R1 - Random"          # paper: -0.5 (Qwen) / -0.4 (Llama)
QWEN, LLAMA = "Qwen2.5-7B-Instruct", "Llama-3.1-8B-Instruct"


def _mech(sweep: list[float], fit: dict) -> Mechanism:
    return Mechanism(pd.DataFrame([sweep], index=[H2], columns=list(S_SWEEP)),
                     pd.DataFrame({m: [v] for m, v in fit.items()}, index=[H2]),
                     {QWEN: (0.08, -0.3, 1.0), LLAMA: (0.07, -0.2, 1.1)}, "qwen2.5")


def test_a_weight_alone_reaches_the_paper():
    text = why(_mech([-10.1, -9.2, -0.3, 3.3, 10.9, 8.5], {QWEN: -0.2, LLAMA: -0.6}), H2, -10.1)
    assert "at face value it gives -10.1" in text and "s = 0.25: -0.3" in text
    assert "A label weight alone reaches the paper's value (s = 0.25)" in text
    assert "Either gives the paper's value" in text


def test_only_noise_reaches_it_and_a_jump_is_named():
    text = why(_mech([10.0, 10.0, -100.0, -100.0, -100.0, -100.0], {QWEN: -0.6, LLAMA: -0.3}), H2)
    assert "No label weight alone reaches it" in text and "jumps by 110" in text
    assert "needs decision noise" in text and "Either" not in text


def test_even_the_fit_misses_and_a_value_near_the_paper_needs_nothing():
    far = why(_mech([-10.0] * 6, {QWEN: 9.0, LLAMA: -0.4}), H2)
    assert "Even fitted, the mechanism misses it by up to 9.5" in far
    near = why(_mech([-1.0] * 6, {QWEN: -1.0, LLAMA: -1.0}), H2)
    assert "within 3 of the paper" in near and "label weight" not in near


def test_no_mechanism_says_why_and_the_table_marks_every_number():
    assert "No mechanism computed" in why(Mechanism(pd.DataFrame(), pd.DataFrame(), {}, "offline", error="boom"), H2)
    t = why_table(_mech([-10.1, -9.2, -0.3, 3.3, 10.9, 8.5], {QWEN: -0.2, LLAMA: -0.6}), [H2])
    assert list(t.index) == ["H2: R1 - Random (mean of the 8 variants)"]          # a reader's name, not an id
    row = t.iloc[0]
    assert row["face value (s = 0)"] == "-10.1 \u2039ref. decider\u203a" and row["fitted to Qwen"].startswith("-0.2")
