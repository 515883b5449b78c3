import warnings
from pathlib import Path

import pytest
import yaml

from crossprofile_lib.templates import (TemplateError, TemplateWarning, load_template, load_templates,
                                        parse_template, scores, validate_template)

ROOT = Path(__file__).resolve().parents[1]
BROKEN = ROOT / "tests" / "broken_templates"
EXPECTED = yaml.safe_load((BROKEN / "expected.yaml").read_text())


def test_dev_templates_validate_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error", TemplateWarning)
        ts = load_templates(ROOT / "templates" / "dev")
    assert len(ts) == 10
    assert len({t.id for t in ts}) == 10


def test_broken_corpus_is_large_enough():
    assert len(EXPECTED) >= 20
    assert {e["rule"] for e in EXPECTED} >= {"schema", "rule 1", "rule 2", "rule 3", "rule 4", "rule 5"}


@pytest.mark.parametrize("case", EXPECTED, ids=[e["file"] for e in EXPECTED])
def test_broken_template_is_rejected_with_its_rule(case):
    path = BROKEN / case["file"]
    with pytest.raises(TemplateError) as ei:
        load_template(path)
    err = ei.value
    assert err.rule.startswith(case["rule"]), str(err)
    assert err.field == case["field"], str(err)
    assert str(path) in str(err) and case["field"] in str(err)


def test_scores_count_only_relevant_facts(hospital):
    # all facts: correct +3 -1 = +2, decoy +2 -2 = 0, alternative 0 (irrelevant ignored)
    assert scores(hospital, hospital.facts) == {"corvane": 0, "helix": 2, "medora": 0}
    assert scores(hospital, hospital.facts_by_role("decoy")) == {"corvane": 2, "helix": -1, "medora": 0}
    assert scores(hospital, hospital.facts_by_role("support")) == {"corvane": -2, "helix": 3, "medora": 0}


def test_option_count_is_a_parameter(hospital):
    with pytest.raises(TemplateError, match="expected 4 options"):
        validate_template(hospital, "x.yaml", n_options=4)


def test_fact_length_warning(hospital):
    class Short:
        name = "short"

        def count(self, text):
            return 5
    with pytest.warns(TemplateWarning, match="outside 15-30"):
        msgs = validate_template(hospital, "x.yaml", tokenizer=Short())
    assert len(msgs) == 12


def test_missing_file_error_names_file(tmp_path):
    with pytest.raises(TemplateError, match="cannot read"):
        parse_template(tmp_path / "nope.yaml")


def test_duplicate_template_ids_rejected(tmp_path):
    src = (ROOT / "templates/dev/dev-hospital-01.yaml").read_text()
    (tmp_path / "a.yaml").write_text(src)
    (tmp_path / "b.yaml").write_text(src)
    with pytest.raises(TemplateError, match="also used by"):
        load_templates(tmp_path)
