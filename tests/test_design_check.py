"""Design check (issue 21 item 2): the classic cell holds in every formal template under each pricing the
suite is calibrated for, and the check names the template, the tokenizer and the line when it does not."""

import pytest

from crossprofile_lib.backends.ledger import ReferenceDecider
from crossprofile_lib.run.runner import RunConfig, run_grid
from crossprofile_lib.task.design_check import RULE, check_classic_cell, classic_fit
from crossprofile_lib.task.templates import TemplateError, load_templates


@pytest.fixture(scope="module")
def formal(root):
    return load_templates(root / "templates" / "formal")


def test_r1_keeps_5_0_4_in_every_formal_template_under_each_pricing(formal, paper_tokenizers):
    """R1 in PSP at r = .6, seeds 0-2, run through the pipeline: exactly 5 / 0 / 4 in each of the 60 templates."""
    for tok in paper_tokenizers:
        df = run_grid(RunConfig(seeds=[0, 1, 2], budgets=["0.6"], policies=["R1"], variants=["PSP"]),
                      backend=ReferenceDecider(tokenizer=tok), templates=formal)
        assert set(df.tokenizer) == {tok.name}
        per = df.groupby("template_id")[["kept_support", "kept_decoy", "kept_irrelevant"]].agg(["min", "max"])
        bad = per[(per.kept_support["min"] != 5) | (per.kept_decoy["max"] != 0) | (per.kept_irrelevant["min"] != 4)]
        assert bad.empty and len(per) == 60, (tok.name, bad)


def test_analytic_check_agrees_with_the_pipeline(formal, paper_tokenizers):
    for tok in paper_tokenizers:
        for t in formal:
            assert classic_fit(t, tok).holds, (t.id, tok.name)
        check_classic_cell(formal[0], paper_tokenizers)


def _lengthen(t, fid, extra):
    facts = tuple(f.model_copy(update={"text": f.text + extra}) if f.id == fid else f for f in t.facts)
    return t.model_copy(update={"facts": facts})


def test_a_long_private_line_fails_naming_template_tokenizer_and_line(formal, paper_tokenizers):
    t = formal[0]
    fid = next(f.id for f in t.facts if f.role == "support")
    long = _lengthen(t, fid, " It was noted in the annual review, the quarterly report, two local newspapers, a radio"
                             " programme, the regional council's minutes and the board's yearly letter to members.")
    with pytest.raises(TemplateError) as ei:
        check_classic_cell(long, paper_tokenizers, "x.yaml")
    msg = str(ei.value)
    assert ei.value.rule == RULE and t.id in msg and paper_tokenizers[0].name in msg and "nine private lines" in msg
    assert ei.value.field.startswith("facts[") and ei.value.field.endswith("].text")


def test_a_short_decoy_that_fits_fails(formal, paper_tokenizers):
    # short private facts leave room after the nine private lines; a decoy cut to a few words then fits in it
    offline = paper_tokenizers[-1]
    t = next(x for x in formal if x.id == "ambulance-dispatch-01")
    d = next(f for f in t.facts if f.role == "decoy")

    def cut(f):
        if f.id == d.id:
            return f.model_copy(update={"text": f"{t.option(f.about).name} bought 22 vans."})
        if f.role != "decoy":
            return f.model_copy(update={"text": " ".join(f.text.split()[:6]) + "."})
        return f
    short = t.model_copy(update={"facts": tuple(cut(f) for f in t.facts)})
    fit = classic_fit(short, offline)
    assert fit.private_cost <= fit.budget and fit.cheapest_decoy.cost <= fit.left   # the case the check must catch
    with pytest.raises(TemplateError, match="decoy line .* fits"):
        check_classic_cell(short, [offline], "x.yaml")


def test_validate_without_a_path_checks_every_bundled_template(capsys):
    """``crossprofile validate`` alone: the 70 bundled templates (formal and dev), rules 1-5 and the design check."""
    from crossprofile_lib.cli import main
    assert main(["validate"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == "70 templates valid, 0 invalid (12 domains)"
    assert "design check (classic cell" in err and "FAIL" not in err
