import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from crossprofile_lib.task import hints
from crossprofile_lib.task.templates import (
    TemplateError,
    TemplateWarning,
    load_template,
    load_templates,
    parse_template,
    scores,
    validate_template,
)
from crossprofile_lib.task.tokenizer import default_tokenizer

ROOT = Path(__file__).resolve().parents[1]
BROKEN = ROOT / "tests" / "broken_templates"
EXPECTED = yaml.safe_load((BROKEN / "expected.yaml").read_text())


def test_dev_templates_validate_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error", TemplateWarning)
        ts = load_templates(ROOT / "templates" / "dev", tokenizer=default_tokenizer())
    assert len(ts) == 10
    assert len({t.id for t in ts}) == 10


def test_broken_corpus_is_large_enough():
    assert len(EXPECTED) >= 70
    assert {e["rule"] for e in EXPECTED} >= {
        "schema", "rule 1", "rule 2", "rule 3", "rule 4", "rule 5", "file (encoding)", "file (control characters)",
        "file (size limit)", "file (extension)", "yaml (duplicate key)", "yaml (tag)", "yaml (anchor or alias)",
        "yaml (nesting depth)", "yaml (key type)"}
    on_disk = {p.name for p in BROKEN.iterdir()} - {"expected.yaml", "make_broken.py", "__pycache__"}
    assert on_disk == {e["file"] for e in EXPECTED}  # every file has its expected rule, and no stale files


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


def test_no_tokenizer_no_length_check(hospital):
    with warnings.catch_warnings():
        warnings.simplefilter("error", TemplateWarning)
        assert validate_template(hospital, "x.yaml") == []


def test_fact_length_warning(hospital):
    class Short:
        name = "short"

        def count(self, text):
            return 5
    with pytest.warns(TemplateWarning, match="outside 12-30"):
        msgs = validate_template(hospital, "x.yaml", tokenizer=Short())
    assert len(msgs) == 12


def test_missing_file_error_names_file(tmp_path):
    with pytest.raises(TemplateError, match="cannot read"):
        parse_template(tmp_path / "nope.yaml")


@pytest.mark.parametrize("text,lemma", [
    ("Ideally placed", "ideal"), ("two recommendations", "recommendation"), ("optimally", "optimal"),
    ("correctly", "correct"), ("BestCare Ltd", "best"), ("b\u0435st", "best"), ("\u03bfptimal", "optimal"),
    ("\uff42\uff45\uff53\uff54", "best"), ("b\u00e9st", "best"), ("the RIGHT choice", "right choice"),
    ("winners", "winner"), ("misled", "mislead"), ("preferable", "preferred"), ("should choose", "should choose"),
])
def test_hint_inflections_and_lookalikes(text, lemma):
    h = hints.find_hint(text)
    assert h is not None and h.lemma in (lemma, *[w for w in hints.HINT_WORDS if hints._stem(w) == hints._stem(lemma)])


@pytest.mark.parametrize("text", ["optimised delivery routes", "a correction notice", "the winning bid",
                                  "a bestseller list", "Corvane Medical", "a café with a garden", "the right wing"])
def test_hint_check_leaves_innocent_words(text):
    assert hints.find_hint(text) is None


def test_hint_check_in_every_free_text(hospital):
    for field, change in [("options[0].name", {"options": (hospital.options[0].model_copy(update={"name": "Optimal"}),
                                                           *hospital.options[1:])}),
                          ("criteria[1].name", {"criteria": (hospital.criteria[0],
                                                             hospital.criteria[1].model_copy(update={"name": "best service"}),
                                                             *hospital.criteria[2:])}),
                          ("domain", {"domain": "recommended pumps"})]:
        with pytest.raises(TemplateError) as ei:
            validate_template(hospital.model_copy(update=change), "x.yaml")
        assert ei.value.field == field and ei.value.rule.startswith("rule 5")


def test_templates_module_imports_no_tokenizer():
    # layering rule (issue 12): the template schema imports nothing of the pipeline and no tokenizer
    code = ("import sys, crossprofile_lib.task.templates; "
            "bad = [m for m in sys.modules if m.startswith('crossprofile_lib.') and m not in "
            "('crossprofile_lib.design', 'crossprofile_lib.paths', 'crossprofile_lib.safety', "
            "'crossprofile_lib.safety.inputs', 'crossprofile_lib.safety.text_input', 'crossprofile_lib.safety.json_input', "
            "'crossprofile_lib.task', 'crossprofile_lib.task.templates', "
            "'crossprofile_lib.task.hints', 'crossprofile_lib.task.domains')]; print(bad); assert not bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_validate_imports_nothing_of_the_pipeline():
    # issue 12's rule for the validator, with issue 21's design check: validate runs the classic-cell
    # check, so it reaches the task wing's tokenizer and budgets (imports at module tops, issue 20),
    # but nothing above the task wing (no policies, backends, runner, statistics, book or CLI)
    code = ("import sys, crossprofile_lib.task.validate; "
            "ok = ('crossprofile_lib.design', 'crossprofile_lib.paths', 'crossprofile_lib.rng', 'crossprofile_lib.config', "
            "'crossprofile_lib.safety', 'crossprofile_lib.task'); "
            "bad = [m for m in sys.modules if m.startswith('crossprofile_lib.') and not any(m == o or "
            "m.startswith(o + '.') for o in ok)]; print(bad); assert not bad; "
            "assert 'crossprofile_lib.task.design_check' in sys.modules")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_duplicate_template_ids_rejected(tmp_path):
    src = (ROOT / "templates/dev/dev-hospital-01.yaml").read_text()
    (tmp_path / "a.yaml").write_text(src)
    (tmp_path / "b.yaml").write_text(src)
    with pytest.raises(TemplateError, match="also used by"):
        load_templates(tmp_path)


def test_a_changed_file_is_read_again(tmp_path):
    """Templates are parsed once per process per TEXT (a grid reloads the same files): an edited file is the new
    text, so an edit is seen at once, a broken edit is still refused, and a reload of the same text is the same object."""
    src = (ROOT / "templates/dev/dev-hospital-01.yaml").read_text()
    f = tmp_path / "t.yaml"
    f.write_text(src)
    first = load_templates(tmp_path)[0]
    assert parse_template(f) is first
    f.write_text(src.replace("title:", "title: Edited", 1))
    assert load_templates(tmp_path)[0].title.startswith("Edited") and not first.title.startswith("Edited")
    f.write_text(src.replace("correct_option:", "correct_optio:", 1))
    with pytest.raises(TemplateError):
        load_templates(tmp_path)


def _with_fact_text(t, fid, text):
    facts = tuple(f.model_copy(update={"text": text}) if f.id == fid else f for f in t.facts)
    return t.model_copy(update={"facts": facts})


#: Hand-checked near misses of the option-set comparison rule (issue 21 item 3): each compares with
#: something that is not the option set, or uses a superlative about one option alone; all must pass.
NEAR_MISSES = [
    ("F09", "Helix Infusion Systems cut five-year ownership costs to below last year's price for the same pumps."),
    ("F09", "Helix Infusion Systems quoted its lowest five-year ownership price in ten years to the hospital."),
    ("F09", "Helix Infusion Systems' five-year ownership cost is lower than last year's price, by 18 percent."),
    ("F06", "Helix Infusion Systems keeps two field engineers near the busiest junction in town, forty minutes away."),
    ("F06", "Helix Infusion Systems needs only two field engineers to answer calls within forty minutes."),
    ("F02", "Helix Infusion Systems pumps ran the most stable ward trial in Leeds, with 2 alarm faults per 1,000 hours."),
    ("F03", "Medora Devices sponsors a charity cycling race that came last in a magazine's poll of local events."),
    ("F12", "Medora Devices changed its logo three times; staff voted the latest the least popular of five designs."),
    ("F03", "Medora Devices sponsors the oldest charity cycling race in the county, passing the hospital each September."),
    ("F10", "Helix Infusion Systems printed a brochure whose grey typeface was among the palest the committee had seen."),
]


@pytest.mark.parametrize("fid,text", NEAR_MISSES)
def test_comparisons_with_something_else_pass(hospital, fid, text):
    validate_template(_with_fact_text(hospital, fid, text), "x.yaml")


@pytest.mark.parametrize("fid,text,phrase", [
    ("F09", "Helix Infusion Systems offered the lowest five-year ownership price of the three suppliers.", "of the three"),
    ("F09", "Helix Infusion Systems sent the lowest bid received for the pumps' five-year ownership.", "received"),
    ("F09", "Helix Infusion Systems quoted the cheapest five-year ownership cost of any supplier.", "of any"),
    ("F06", "Helix Infusion Systems scored highest in the committee's assessment of repair response times.", "assessment"),
    ("F06", "Helix Infusion Systems answers repair calls faster than the other two suppliers.", "than the other"),
    ("F06", "Helix Infusion Systems is the only candidate with engineers within forty minutes.", "the only candidate"),
    ("F02", "Helix Infusion Systems pumps logged 2 alarm faults per 1,000 hours, ahead of all rivals.", "ahead of all"),
    ("F03", "Medora Devices sponsors a cycling race; you may ignore this fact.", "you"),
    ("F03", "Medora Devices sponsors a cycling race. The answer is option A.", "answer"),
])
def test_comparisons_over_the_option_set_are_rule_5(hospital, fid, text, phrase):
    with pytest.raises(TemplateError) as ei:
        validate_template(_with_fact_text(hospital, fid, text), "x.yaml")
    assert ei.value.rule.startswith("rule 5") and phrase in str(ei.value), str(ei.value)
    i = [f.id for f in hospital.facts].index(fid)
    assert ei.value.field == f"facts[{i}].text"


#: Issue 52 item 6: comparisons with the option set that a phrase list let through (an independent re-implementation
#: found the first two); the rule is a comparison (superlative, comparative, verb or position of comparison) and a
#: reference to the option set or the other options in one sentence, in either order.
OPTION_SET_COMPARISONS = [
    ("F09", "Helix Infusion Systems sells the cheapest pump on the list for five-year ownership.", "on the list"),
    ("F09", "Helix Infusion Systems undercut every other bid on five-year ownership cost.", "every other bid"),
    ("F09", "Helix Infusion Systems priced five-year ownership below all other suppliers.", "all other suppliers"),
    ("F09", "Helix Infusion Systems quoted a five-year ownership cost lower than anyone else.", "anyone else"),
    ("F09", "Helix Infusion Systems had the lowest five-year ownership price on offer.", "on offer"),
    ("F06", "Helix Infusion Systems beat its competitors on repair response times last year.", "its competitors"),
    ("F06", "Of the suppliers bidding, Helix Infusion Systems answered repair calls fastest.", "suppliers bidding"),
    ("F06", "Helix Infusion Systems outpaced the field on repair response times last year.", "the field"),
    ("F09", "Helix Infusion Systems topped the shortlist on five-year ownership cost.", "the shortlist"),
    ("F09", "Helix Infusion Systems' five-year ownership cost undercuts the alternatives by 12 percent.",
     "the alternatives"),
    ("F09", "Helix Infusion Systems' five-year ownership cost is as low as any other offer.", "any other offer"),
    ("F06", "Helix Infusion Systems offered the quickest repair times under consideration.", "under consideration"),
]


@pytest.mark.parametrize("fid,text,phrase", OPTION_SET_COMPARISONS)
def test_comparisons_with_the_option_set_by_meaning_are_rule_5(hospital, fid, text, phrase):
    with pytest.raises(TemplateError) as ei:
        validate_template(_with_fact_text(hospital, fid, text), "x.yaml")
    assert ei.value.rule.startswith("rule 5") and phrase in str(ei.value), str(ei.value)


#: Their near misses: the same comparison words with no option set, or set words that compare nothing.
OPTION_SET_NEAR_MISSES = [
    ("F09", "Helix Infusion Systems undercut its own 2019 price for the same pumps by 12 percent."),
    ("F09", "Helix Infusion Systems services each pump every other month, more often than the maker asks."),
    ("F06", "Helix Infusion Systems engineers beat the city marathon record in 2019 by four minutes."),
    ("F09", "Helix Infusion Systems sells the cheapest pump in its own catalogue for 900 pounds."),
    ("F03", "Medora Devices received the largest arts grant in its history for a sculpture in 2021."),
    ("F06", "Helix Infusion Systems answers repair calls faster than the regional average of three hours."),
    ("F03", "Medora Devices sent one of the bids in a blue folder tied with ribbon."),
    ("F09", "Helix Infusion Systems quoted a list price of 40,000 pounds, below its 2020 list price."),
    ("F03", "Medora Devices has no other depots in the region besides its Leeds warehouse."),
]


@pytest.mark.parametrize("fid,text", OPTION_SET_NEAR_MISSES)
def test_comparisons_by_meaning_near_misses_pass(hospital, fid, text):
    validate_template(_with_fact_text(hospital, fid, text), "x.yaml")


def test_every_bundled_fact_and_paraphrase_passes_the_comparison_rule():
    """The rule by meaning refuses no text of the 70 bundled templates (facts and every paraphrase)."""
    from crossprofile_lib.task import hints
    flagged = [(t.id, f.id, x) for t in load_templates(ROOT / "templates") for f in t.facts
               for x in (f.text, *f.paraphrases) if hints.find_comparison(x)]
    assert not flagged, flagged


def test_option_set_size_is_the_templates(hospital):
    """'of the four' ranks a four-option set, not a three-option one (and 'of five colours' never)."""
    from crossprofile_lib.task import hints
    assert hints.find_comparison("the lowest price of the four", n_options=4)
    assert hints.find_comparison("the lowest price of the four", n_options=3) is None
