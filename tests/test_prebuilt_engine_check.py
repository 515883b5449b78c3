"""benchmarks/check_prebuilt_engine.py (issue 26.1): the rule that decides whether a prebuilt engine
gives "the same decision-letter log-probabilities to 4 decimals", and which wheels count as loading
on the CPU. Hand-checked cases that separate the rule from its near misses."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import check_prebuilt_engine as cpe  # noqa: E402


def _probe(lps, tokens, secs=1.0):
    return {"ok": True, "engine_version": "x", "prompts": [
        {"tokens": tokens, "letter_logprobs": lps, "eval_s": secs, "letter_logprobs_reference_tokens": lps}]}


REF = _probe({"A": -1.23454, "B": -2.5}, [1, 2, 3, 4])


def test_equal_to_4_decimals_means_every_letter_rounds_the_same():
    same = cpe.summary(_probe({"A": -1.23451, "B": -2.50004}, [1, 2, 3, 4]), REF)
    assert same["vs_reference_own_tokens"]["equal_to_4_decimals"] is True
    assert same["same_tokens_as_reference"] == [True] and same["same_top_letter_ABCD"] == [True]


def test_a_constant_offset_of_one_ten_thousandth_is_not_equal():
    # the near miss measured for xllamacpp without flash attention: the same ranking, log Z 1e-4 off
    off = cpe.summary(_probe({"A": -1.23444, "B": -2.4999}, [1, 2, 3, 4]), REF)
    d = off["vs_reference_own_tokens"]
    assert d["equal_to_4_decimals"] is False and d["letters_differing_at_4_decimals"] == 2
    assert abs(d["max_abs_diff"] - 0.0001) < 1e-6 and off["same_top_letter_ABCD"] == [True]


def test_other_tokens_and_speed_are_reported():
    s = cpe.summary(_probe({"A": -1.23454, "B": -2.5}, [1, 1, 2, 3, 4], secs=0.5), REF)
    assert s["same_tokens_as_reference"] == [False]
    assert s["prompt_eval_tokens_per_s"] == 10.0 and s["speed_ratio_to_reference"] == 2.5


def test_a_wheel_whose_only_failures_are_gpu_runtimes_counts_as_loading_on_the_cpu():
    ok, cuda = {"load_error": None}, {"load_error": "OSError: libcuda.so.1: cannot open shared object file"}
    glibc = {"load_error": "OSError: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found"}
    vulkan = {"load_error": "OSError: libvulkan.so.1: cannot open shared object file: No such file"}
    assert cpe.cpu_loads({"cpu.so": ok, "cuda.so": cuda, "vk.so": vulkan})
    assert not cpe.cpu_loads({"cpu.so": glibc, "cuda.so": cuda})
    assert not cpe.cpu_loads({"cuda.so": cuda})  # a GPU build alone is no CPU engine
    assert not cpe.cpu_loads({})


import json  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402
import prebuilt_engine_probe as probe  # noqa: E402


def test_a_letters_log_probability_is_its_best_token_against_the_whole_vocabulary():
    logits = np.log(np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32))
    lps = probe._letters(logits, {"A": [0, 3], "B": [1], "C": []})
    # the best of A's two tokens (4 of 10), not their sum (5 of 10), over all four tokens (not only the letters')
    assert math.isclose(lps["A"], math.log(0.4), abs_tol=1e-6) and math.isclose(lps["B"], math.log(0.2), abs_tol=1e-6)
    assert "C" not in lps  # a letter with no token has no log-probability


def test_scores_keeps_the_fastest_pass_flags_a_pass_that_differs_and_scores_the_reference_ids():
    seen, passes = [], iter([([0.0, 1.0], 2.0), ([0.0, 1.0], 1.5), ([0.0, 1.1], 1.0), ([1.0, 0.0], 9.0),
                                        ([2.0, 0.0], 3.0)])

    def evaluate(ids):
        seen.append(list(ids))
        logits, secs = next(passes)
        return np.array(logits), secs
    job = {"prompts": ["p", "q"], "letters": {"A": [0], "B": [1]}, "reps": 2, "reference_tokens": [[7, 8], [5]]}
    rows = probe._scores(job, lambda text: [7, 8] if text == "p" else [9], evaluate)
    assert [r["eval_s"] for r in rows] == [1.5, 1.0]  # the fastest timed pass, not the first
    assert [r["repeatable"] for r in rows] == [True, False]  # q's two passes gave different logits
    assert seen == [[7, 8], [7, 8], [9], [9], [5]]  # the reference's ids scored only where they differ
    assert rows[0]["letter_logprobs_reference_tokens"] == rows[0]["letter_logprobs"]
    assert rows[1]["letter_logprobs_reference_tokens"]["A"] > rows[1]["letter_logprobs"]["A"]


def test_earlier_runs_are_kept_newest_first_each_with_its_own_record(tmp_path):
    assert cpe.earlier_runs(tmp_path / "none.json") == []
    p = tmp_path / "r.json"
    older = {"record": {"commit": "a" * 40, "command": "python x --old"}, "candidates": [{"requirement": "x==1"}]}
    p.write_text(json.dumps({"record": {"commit": "b" * 40, "command": "python x --new"},
                             "candidates": [{"requirement": "y==2"}], "earlier_runs": [older]}))
    runs = cpe.earlier_runs(p)
    assert [r["record"]["commit"] for r in runs] == ["b" * 40, "a" * 40]  # flat: no run nested in another
    assert all("earlier_runs" not in r for r in runs) and runs[0]["candidates"] == [{"requirement": "y==2"}]


def test_paired_speed_reverses_the_order_each_round_and_divides_within_a_round(monkeypatch, tmp_path):
    calls, speed = [], {"ref": iter([10.0, 20.0, 40.0]), "cand": iter([10.0, 10.0, 80.0])}

    def fake_probe(python, engine, job, tmp):
        calls.append(engine)
        return {"ok": True, "prompts": [{"tokens": [1] * 10, "letter_logprobs": {}, "eval_s": 10 / next(speed[engine])}]}
    monkeypatch.setattr(cpe, "probe", fake_probe)
    out = cpe.paired_speed({"reference": ("py", "ref"), "x": ("py", "cand")}, {}, tmp_path, rounds=3)
    assert calls == ["ref", "cand", "cand", "ref", "ref", "cand"]  # a drifting load weighs on both ends
    assert out["reference_tokens_per_s"] == [10.0, 20.0, 40.0]
    # the ratio within each round (1, 0.5, 2), not of the pooled sums (100/70) nor of round 1 alone
    assert out["candidates"]["x"]["ratio_by_round"] == [1.0, 0.5, 2.0] and out["candidates"]["x"]["median_ratio"] == 1.0
