"""BAL's model stance call and the "labels are not evidence" decision prompt, on a scripted backend."""

import json

import pytest
from scripted_llm import Scripted

from crossprofile_lib import prompts as P
from crossprofile_lib.backends.llm import parse_stances
from crossprofile_lib.run.runner import RunConfig, run_grid
from crossprofile_lib.task.decision import option_order
from crossprofile_lib.task.discussion import claim_list, make_task, scripted_discussion
from crossprofile_lib.task.evidence import Stance, oracle_stances


def _oracle_answer(task_of_prompt):
    """A stance answer that restates the roles (what a perfect stance model would say)."""
    def answer(req):
        if req.purpose == "stance":
            task, cl = task_of_prompt(req)
            order = option_order(task)
            st = oracle_stances(cl, task)
            items = [{"n": i + 1, "option": P.LETTERS[order.index(s.option)],
                      "direction": "for" if s.polarity > 0 else "against", "criterion": s.relevant}
                     for i, s in enumerate(st)]
            return json.dumps({"stances": items})
        return "Because.\nDecision: A"
    return answer


def test_parse_stances_keeps_good_entries_and_drops_bad_ones():
    order = ("x", "y", "z")
    text = 'Sure! {"stances": [{"n": 1, "option": "B", "direction": "against", "criterion": true},' \
           ' {"n": 2, "option": "Q", "direction": "for", "criterion": true},' \
           ' {"n": 3, "option": "A", "direction": "for", "criterion": false},' \
           ' {"n": 1, "option": "C", "direction": "for", "criterion": true}]}'
    assert parse_stances(text, 3, order) == (Stance("y", -1, True), None, Stance("x", 1, False))
    assert parse_stances("no json here", 3, order) is None
    assert parse_stances('{"other": 1}', 3, order) is None


def test_bal_with_a_perfect_stance_model_keeps_what_bal_oracle_keeps(dev_templates):
    tasks = {}

    def task_of(req):
        return tasks[req.messages[0]["content"]]

    cfg = RunConfig(seeds=[0], budgets=["0.6"], policies=["BAL", "BAL-oracle"], variants=["PSP", "SPS"])
    for t in dev_templates[:3]:
        for v in cfg.variants:
            task = make_task(t, v, 0)
            cl = claim_list(scripted_discussion(task))
            from crossprofile_lib.backends.llm import stance_request
            req = stance_request(task, cl.claims, option_order(task), False)
            tasks[req.messages[0]["content"]] = (task, cl)
    be = Scripted(_oracle_answer(task_of))
    df = run_grid(cfg, backend=be, templates=dev_templates[:3])
    bal = df[df.policy == "BAL"].reset_index(drop=True)
    orc = df[df.policy == "BAL-oracle"].reset_index(drop=True)
    assert (bal.memory_sha == orc.memory_sha).all()
    assert (bal.stance_source == "model").all() and (bal.stance_agreement == 1.0).all()
    assert sum(r.purpose == "stance" for r in be.sent) == 6  # one stance call per claim list
    # the prompt never shows roles, labels or counts
    for r in be.sent:
        if r.purpose == "stance":
            text = r.messages[0]["content"]
            assert "[A1" not in text and "decoy" not in text.lower() and "support" not in text.lower()


def test_bal_with_a_failing_stance_call_still_builds_a_memory(dev_templates):
    be = Scripted(lambda r: "garbage" if r.purpose == "stance" else "Decision: B")
    df = run_grid(RunConfig(seeds=[0], budgets=["0.6"], policies=["BAL"], variants=["PSP"]), backend=be,
                  templates=dev_templates[:2])
    assert (df.n_kept > 0).all() and (df.stance_agreement == 0).all()
    assert be.stats["stance_invalid"] == 2


def test_labels_not_evidence_prompt_is_selectable(dev_templates):
    be = Scripted(lambda r: "Decision: A", decision_prompt="labels-not-evidence")
    df = run_grid(RunConfig(seeds=[0], budgets=["0.6"], policies=["ALL"], variants=["PSP"]), backend=be,
                  templates=dev_templates[:1])
    assert (df.prompt_file == "decision_labels_not_evidence_v1.txt").all()
    text = be.sent[0].messages[0]["content"]
    assert "not evidence of its strength" in text and "[A1,A2,A3,A4]" in text
    with pytest.raises(ValueError, match="decision_prompt"):
        Scripted(lambda r: "", decision_prompt="louder")


def test_repairs_run_on_the_embedded_model(tmp_path):
    """BAL (model stances), count-free provenance and the labels-not-evidence prompt through llama.cpp."""
    from crossprofile_lib.task.llama_engine import installed
    if not installed():
        pytest.skip("no llama.cpp engine is installed (run 'make install-llm')")
    from crossprofile_lib.backends import get_backend
    b = get_backend("llamacpp/smollm2-135m", cache=tmp_path / "cache", decision_prompt="labels-not-evidence")
    cfg = RunConfig(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0], budgets=["0.6"],
                    policies=["BAL", "ALL:first-speaker", "ALL:claim-id"], variants=["PSP"])
    df = run_grid(cfg, backend=b)
    assert len(df) == 3 and not df.invalid.any() and (df.error == "").all()
    assert (df.prompt_file == "decision_labels_not_evidence_v1.txt").all()
    bal = df[df.policy == "BAL"].iloc[0]
    assert bal.stance_source == "model" and 0 <= bal.stance_agreement <= 1 and bal.n_kept > 0
    calls = b.stats["calls"]
    run_grid(cfg, backend=b)  # cached: a rerun makes no model call
    assert b.stats["calls"] == calls


test_repairs_run_on_the_embedded_model = pytest.mark.llm(pytest.mark.slow(test_repairs_run_on_the_embedded_model))
