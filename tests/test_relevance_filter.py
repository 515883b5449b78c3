"""R1-rel's mechanism with a noisy relevance filter (issue 13.7)."""

from __future__ import annotations

import numpy as np
import pytest

from crossprofile_lib.run.relevance_filter import noisy_filter, tiering_compositions, tiering_summary
from crossprofile_lib.task.templates import load_templates
from crossprofile_lib.task.tokenizer import default_tokenizer

TRUTH = frozenset(range(8))  # 8 relevant claims (5 support + 3 decoy) of 12


def test_perfect_filter_is_the_truth_and_zero_recall_is_empty():
    rng = np.random.default_rng(0)
    assert noisy_filter(TRUTH, 12, 1.0, 1.0, rng) == TRUTH
    assert noisy_filter(TRUTH, 12, 1.0, 0.0, rng) == frozenset()


def test_rates_hold_on_average():
    rng = np.random.default_rng(1)
    tp = fp = sel = 0
    for _ in range(4000):
        f = noisy_filter(TRUTH, 12, 0.8, 0.9, rng)
        tp += len(f & TRUTH)
        fp += len(f - TRUTH)
        sel += len(f)
    assert tp / (8 * 4000) == pytest.approx(0.9, abs=0.01)
    assert tp / sel == pytest.approx(0.8, abs=0.01)


def test_same_seed_same_filter_and_bad_rates_refused():
    a = noisy_filter(TRUTH, 12, 0.9, 0.9, np.random.default_rng(5))
    b = noisy_filter(TRUTH, 12, 0.9, 0.9, np.random.default_rng(5))
    assert a == b
    with pytest.raises(ValueError, match="precision"):
        noisy_filter(TRUTH, 12, 0.0, 0.9, np.random.default_rng(0))


def test_strict_tiering_with_a_perfect_filter_keeps_every_relevant_fact_in_psp():
    ts = load_templates(["templates/formal"])[:6]
    s = tiering_summary(tiering_compositions(ts, default_tokenizer(), 1.0, 1.0, seeds=(0,), draws=1)).iloc[0]
    assert (s.kept_support, s.kept_decoy, s.kept_irrelevant) == (5.0, 3.0, 0.0)


def test_the_papers_filter_quality_keeps_almost_no_irrelevant_fact():
    """With the paper's 99.4% / 98.9% filter, strict tiering keeps far fewer than the paper's
    2.16 irrelevant facts (and more than its 1.89 decoys)."""
    ts = load_templates(["templates/formal"])[:12]
    s = tiering_summary(tiering_compositions(ts, default_tokenizer(), 0.994, 0.989, seeds=(0,), draws=10)).iloc[0]
    assert s.kept_irrelevant < 0.5 and s.kept_decoy > 2.5
