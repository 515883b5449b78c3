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
