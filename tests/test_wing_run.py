"""The runner's rule where it lives (issue 55: the run wing's named survivor): a failed B3 summary call is a failed
row, never a decision: its ``error`` is set, so the run's header counts it and ``stats`` refuses it unless told;
the other policies' rows of the same task are untouched. A scripted language model (the real LLMBackend code) whose
summary call fails."""

from __future__ import annotations

from scripted_llm import Scripted

from crossprofile_lib.backends.base import ChatResult
from crossprofile_lib.run.runner import RunConfig, run_grid


def _answer(r):
    if r.purpose == "b3":
        return ChatResult("", error="HTTP 500: the summary failed")
    return "Reasoning.\nDecision: A"


def test_a_failed_summary_call_is_a_failed_row_not_a_decision():
    cfg = RunConfig(backend="scripted/s1", templates=["templates/dev"], seeds=[0], budgets=["0.6"],
                    policies=["B3", "R1"], variants=["PSP"])
    df = run_grid(cfg, backend=Scripted(_answer))
    b3, r1 = df[df.policy == "B3"], df[df.policy == "R1"]
    assert len(b3) == len(r1) == 10
    assert b3.error.str.contains("HTTP 500: the summary failed").all()
    assert (b3.memory_kind == "empty").all() and (b3.n_kept == 0).all()
    assert (r1.error == "").all() and r1.decision_letter.ne("").all()
