"""Repairs the paper proposes (issue 8), as properties of the instrument with the reference decider."""

import pytest

from crossprofile_lib.run.runner import RunConfig, run_grid
from crossprofile_lib.task.budgets import Budget, budget_tokens
from crossprofile_lib.task.tokenizer import default_tokenizer


@pytest.fixture(scope="module")
def formal(root):
    from crossprofile_lib.task.templates import load_templates
    return load_templates(root / "templates" / "formal")


def test_count_free_provenance_recovers_what_removing_labels_recovers(formal):
    pol = ["ALL", "ALL:unlabeled", "ALL:first-speaker", "ALL:claim-id", "BAL", "BAL:first-speaker"]
    df = run_grid(RunConfig(budgets=["0.6"], policies=pol, variants=["PSP", "PSS"],
                            backend_options={"social_proof": 0.5}), templates=formal)
    acc = df.groupby("policy").correct.mean()
    gain_unlabeled = acc["ALL:unlabeled"] - acc["ALL"]
    assert gain_unlabeled > 0.5  # social proof sinks the labelled ALL memory in the classic cell
    for fmt in ("ALL:first-speaker", "ALL:claim-id"):
        assert acc[fmt] - acc["ALL"] >= 0.8 * gain_unlabeled
    assert acc["BAL:first-speaker"] - acc["BAL"] >= 0.8 * gain_unlabeled
    # and the source stays traceable: every line carries a bracketed source
    fs = df[df.policy == "ALL:first-speaker"].memory_tokens.to_numpy()
    un = df[df.policy == "ALL:unlabeled"].memory_tokens.to_numpy()
    assert (fs > un).all()
    assert df[df.policy == "ALL:first-speaker"].memory_sha.nunique() > 1


@pytest.mark.parametrize("n_agents", [3, 4, 6, 8])
def test_other_group_sizes_run_and_budgets_grow_with_label_length(formal, n_agents):
    df = run_grid(RunConfig(seeds=[0], budgets=["0.6"], policies=["R1", "B4", "ALL"], n_agents=n_agents),
                  templates=formal[:10])
    assert (df.n_agents == n_agents).all()
    assert (df[df.policy == "ALL"].correct).all()
    shared = df[(df.policy == "ALL") & (df.variant == "SSS")]
    assert shared.memory_tokens.iloc[0] == shared.t_all.iloc[0]
    t = formal[0]
    tok = default_tokenizer()
    if n_agents > 3:
        assert budget_tokens(t, Budget(0.6), tok, n_agents) > budget_tokens(t, Budget(0.6), tok, n_agents - 1)
