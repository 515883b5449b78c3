"""The benchmark's content: 60 formal templates (12 domains x 5) plus 10 development ones."""

import warnings
from collections import Counter

import pytest

from crossprofile_lib.run.runner import RunConfig, run_grid
from crossprofile_lib.task.roleblind import role_blindness
from crossprofile_lib.task.templates import TemplateWarning, load_templates
from crossprofile_lib.task.tokenizer import default_tokenizer


@pytest.fixture(scope="module")
def formal(root):
    with warnings.catch_warnings():
        warnings.simplefilter("error", TemplateWarning)  # no fact outside 12-30 tokens
        return load_templates(root / "templates" / "formal", tokenizer=default_tokenizer())


def test_all_templates_validate_12_domains_x_5(formal, root):
    assert len(formal) == 60
    per_domain = Counter(t.domain for t in formal)
    assert len(per_domain) == 12 and set(per_domain.values()) == {5}
    assert len(load_templates(root / "templates")) == 70


def test_no_fact_text_repeats_across_templates(formal, dev_templates):
    texts = [f.text.lower() for t in list(formal) + list(dev_templates) for f in t.facts]
    assert len(texts) == len(set(texts))


def test_option_order_does_not_reveal_the_answer(formal):
    pos = Counter(t.option_ids.index(t.correct_option) for t in formal)
    assert all(14 <= pos[i] <= 26 for i in range(3)), pos


def test_fact_ids_do_not_group_roles(formal):
    # in no template are the five support facts the first five ids
    for t in formal:
        first5 = {f.role for f in sorted(t.facts, key=lambda f: f.id)[:5]}
        assert first5 != {"support"}, t.id


def test_role_blindness(formal):
    rb = role_blindness(formal)
    assert rb.n_facts == 720
    assert rb.accuracy <= rb.base_rate + 0.10, rb


def test_r1_composition_psp_r06_on_formal_set(formal):
    df = run_grid(RunConfig(seeds=[0, 1, 2], budgets=["0.6"], policies=["R1"], variants=["PSP"]), templates=formal)
    m = df[["kept_support", "kept_decoy", "kept_irrelevant"]].mean()
    assert abs(m.kept_support - 5) <= 0.05 and m.kept_decoy <= 0.05 and abs(m.kept_irrelevant - 4) <= 0.05, m


def test_template_tone_hand_checked(formal):
    """hospital-equipment-01 praises the decoy's head office (+1 about Veltrix) and runs down the correct option's
    chief executive (-1 about Solanis): -2, leaning toward the decoy; hospital-equipment-05 (after issue 52 item 8)
    praises the correct option's sponsorship (+1 about Ferrand) and runs down the decoy's founder (-1 about Vectra):
    +2. Facts about the third option count 0; flipping every irrelevant polarity flips the sign."""
    from crossprofile_lib.task.evidence import template_tone
    h1, h5 = (next(t for t in formal if t.id == i) for i in ("hospital-equipment-01", "hospital-equipment-05"))
    assert (template_tone(h1), template_tone(h5)) == (-2, 2)
    flipped = h5.model_copy(update={"facts": tuple(f.model_copy(update={"polarity": -f.polarity})
                                                   if not f.relevant else f for f in h5.facts)})
    assert template_tone(flipped) == -2


def test_irrelevant_tone_is_balanced_overall_and_in_every_domain(formal):
    """Issue 52 item 8 (SPEC section 2): as many templates lean toward the decoy as toward the correct option (the
    suite had 41 against 19), and in every domain both ways at least twice."""
    from crossprofile_lib.task.evidence import template_tone, tone_balance
    bal = tone_balance(formal)
    assert bal == {"decoy": 30, "correct": 30, "neither": 0}, bal
    for d in {t.domain for t in formal}:
        tones = [template_tone(t) for t in formal if t.domain == d]
        assert sum(x > 0 for x in tones) >= 2 and sum(x < 0 for x in tones) >= 2, (d, tones)
