"""The preregistered-contrast language: parsing, errors, known answers, Holm."""

from unittest import mock

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.contrasts import (
    DEFAULT_PREREG_PATH,
    PreregError,
    evaluate_contrasts,
    holm,
    load_prereg,
    parse_prereg,
)


def _frame():
    # template a: R1 correct 1,1; B4 0,0 -- template b: R1 1,0; B4 0,0
    return pd.DataFrame(dict(template_id=list("aaaabbbb"), policy=["R1", "R1", "B4", "B4"] * 2,
                             budget_label="0.6", correct=[True, True, False, False, True, False, False, False]))


def _doc(**contrast):
    c = dict(id="X", terms=[{"weight": 1, "where": {"policy": "R1"}}, {"weight": -1, "where": {"policy": "B4"}}])
    c.update(contrast)
    return {"contrasts": [c]}


def test_known_answer_on_a_hand_made_frame():
    boot = TemplateBootstrap(("a", "b"), np.array([[0, 0], [1, 1], [0, 1]]))
    out = evaluate_contrasts(_frame(), parse_prereg(_doc()), boot)
    r = out.iloc[0]
    assert r.estimate == pytest.approx(75.0)          # (3/4 - 0) * 100
    # resampled contrasts: (a,a) 100, (b,b) 50, (a,b) 75 -> linear quantiles at 2.5% and 97.5%
    assert r.lo == pytest.approx(51.25) and r.hi == pytest.approx(98.75)
    assert r.p == pytest.approx(0.5)                  # 2 * (0 + 1) / (3 + 1)
    assert r.n_rows == 4 and r.estimable


def test_filters_merge_and_null_removes_a_default():
    df = pd.concat([_frame(), _frame().assign(budget_label="none", policy="ALL", correct=True)])
    boot = TemplateBootstrap(("a", "b"), np.array([[0, 1]]))
    doc = {"defaults": {"where": {"budget_label": "0.6"}},
           "contrasts": [{"id": "lvl", "scale": 1, "terms": [{"weight": 1, "where": {"policy": "R1"}}]},
                         {"id": "all", "scale": 1, "terms": [{"weight": 1, "where": {"policy": "ALL"}}]},
                         {"id": "all2", "scale": 1, "where": {"budget_label": None},
                          "terms": [{"weight": 1, "where": {"policy": ["ALL"]}}]}]}
    out = evaluate_contrasts(df, parse_prereg(doc), boot).set_index("id")
    assert out.loc["lvl", "estimate"] == pytest.approx(0.75)
    assert not out.loc["all", "estimable"] and "'ALL'" in out.loc["all", "reason"]
    assert np.isnan(out.loc["all", "estimate"])
    assert out.loc["all2", "estimate"] == pytest.approx(1.0)


def test_holm_equals_statsmodels():
    rng = np.random.default_rng(3)
    n = 40
    df = pd.DataFrame(dict(template_id=np.repeat([f"t{i}" for i in range(n)], 4),
                           policy=np.tile(["A", "B", "C", "D"], n),
                           correct=rng.random(4 * n) < np.tile([0.7, 0.55, 0.5, 0.45], n)))
    doc = {"families": {"f": {"correction": "holm"}},
           "contrasts": [{"id": f"{a}-{b}", "family": "f", "terms": [{"weight": 1, "where": {"policy": a}},
                                                                      {"weight": -1, "where": {"policy": b}}]}
                         for a, b in (("A", "B"), ("B", "C"), ("C", "D"), ("A", "D"))]}
    boot = TemplateBootstrap.draw(df.template_id.unique(), 4000, np.random.default_rng(0))
    out = evaluate_contrasts(df, parse_prereg(doc), boot)
    rej, padj, _, _ = multipletests(out.p.to_numpy(), alpha=0.05, method="holm")
    assert out.p_adjusted.to_numpy() == pytest.approx(padj)
    assert out.reject.tolist() == rej.tolist()
    assert len(set(np.round(out.p, 4))) > 2          # the p-values are not all at the floor
    r2, p2 = holm([0.01, 0.04, 0.03])
    assert p2 == pytest.approx(multipletests([0.01, 0.04, 0.03], method="holm")[1])


def test_default_file_holds_h1_h3_exactly_as_spec():
    pre = load_prereg()
    assert pre.source == str(DEFAULT_PREREG_PATH)
    c = {x.id: x for x in pre.contrasts}
    assert {"H1", "H2", "H3"} <= set(c)
    for h in ("H1", "H2", "H3"):
        assert c[h].family == "confirmatory" and c[h].outcome == "correct" and c[h].scale == 100
        assert all(t.where.get("budget_label") == "0.6" for t in c[h].terms)
    assert pre.families["confirmatory"].correction == "holm"
    sig = lambda x: sorted((t.weight, tuple(sorted((k, v) for k, v in t.where.items() if k != "budget_label")))  # noqa
                           for t in x.terms)
    assert sig(c["H1"]) == sorted([(1.0, (("decoy_attr", "shared"), ("policy", "R1"))),
                                   (-1.0, (("decoy_attr", "shared"), ("policy", "B4"))),
                                   (-1.0, (("decoy_attr", "private"), ("policy", "R1"))),
                                   (1.0, (("decoy_attr", "private"), ("policy", "B4")))])
    assert sig(c["H2"]) == sorted([(1.0, (("policy", "R1"),)), (-1.0, (("policy", "Random"),))])
    assert sig(c["H3"]) == sorted([(1.0, (("policy", "R1-rel"),)), (-1.0, (("policy", "R1"),))])
    assert c["H1"].paper == {"Qwen2.5-7B-Instruct": 64.6, "Llama-3.1-8B-Instruct": 62.6, "DeepSeek-V4.1-Flash": 62.6}
    assert c["H3"].paper == {"Qwen2.5-7B-Instruct": 8.5, "Llama-3.1-8B-Instruct": 15.6}  # as the paper states H3
    assert pre.settings["headroom_min_points"] == 15


def test_a_user_adds_a_contrast_without_code(tmp_path):
    doc = yaml.safe_load(DEFAULT_PREREG_PATH.read_text())
    doc["contrasts"].append({"id": "mine", "title": "R1 accuracy at r=.8", "outcome": "correct", "test_value": 50,
                             "terms": [{"weight": 1, "where": {"policy": "R1", "budget_label": 0.8}}]})
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(doc))
    pre = load_prereg(f)
    mine = next(c for c in pre.contrasts if c.id == "mine")
    assert mine.null == 50 and mine.terms[0].where["budget_label"] == 0.8


@pytest.mark.parametrize("doc, field, rule", [
    ({"contrasts": []}, "contrasts", "required"),
    ({"contrast": [1]}, "contrast", "unknown key"),
    (_doc(id=""), "contrasts[0].id", "required"),
    (_doc(family="nope"), "contrasts[0].family", "declared"),
    (_doc(terms=[{"where": {"policy": "R1"}}]), "contrasts[0].terms[0].weight", "required"),
    (_doc(terms=[{"weight": "one"}]), "contrasts[0].terms[0].weight", "type"),
    (_doc(terms=[{"weight": 1, "where": {"policy": []}}]), "contrasts[0].terms[0].where.policy", "value"),
    (_doc(colour=1), "contrasts[0].colour", "unknown key"),
    ({"families": {"f": {"correction": "bonf"}}, "contrasts": [_doc()["contrasts"][0]]}, "families.f.correction",
     "value"),
    ({"contrasts": [_doc()["contrasts"][0], _doc()["contrasts"][0]]}, "contrasts[1].id", "unique"),
])
def test_bad_files_name_file_field_and_rule(doc, field, rule):
    with pytest.raises(PreregError) as e:
        parse_prereg(doc, "my.yaml")
    assert e.value.field == field and e.value.rule == rule
    assert str(e.value).startswith("my.yaml: field")


def test_unknown_column_and_bad_yaml_are_errors(tmp_path):
    boot = TemplateBootstrap(("a", "b"), np.array([[0, 1]]))
    with pytest.raises(PreregError, match=r"terms\[0\]\.where\.colour.*no column"):
        evaluate_contrasts(_frame(), parse_prereg(_doc(terms=[{"weight": 1, "where": {"colour": "red"}}]), "f.yaml"),
                           boot)
    with pytest.raises(PreregError, match="outcome"):
        evaluate_contrasts(_frame(), parse_prereg(_doc(outcome="nope")), boot)
    f = tmp_path / "bad.yaml"
    f.write_text("contrasts: [\n")
    with pytest.raises(PreregError, match="bad.yaml.*YAML"):
        load_prereg(f)
    with pytest.raises(PreregError, match="no such file"):
        load_prereg(tmp_path / "missing.yaml")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from([0.0, 0.01, 0.0125, 0.025, 0.05, 1 / 60, 0.5, 1.0]),
                          st.floats(0, 1, allow_nan=False)), min_size=0, max_size=12),
       st.sampled_from([0.05, 0.1, 0.01]))
def test_holm_equals_statsmodels_also_at_the_boundaries(pvals, alpha):
    """Our Holm (no garbage collection per call) gives statsmodels' rejections and adjusted p-values exactly,
    also for ties and p-values sitting on alpha / k (0.0125 = 0.05 / 4, 1/60 = 0.05 / 3)."""
    rej, padj = holm(pvals, alpha)
    if not pvals:
        assert rej.size == padj.size == 0
        return
    with mock.patch("gc.collect", lambda *a: 0):  # statsmodels collects garbage on every call: seconds in a test worker
        want_rej, want_padj, _, _ = multipletests(np.asarray(pvals, dtype=float), alpha=alpha, method="holm")
    assert rej.tolist() == want_rej.tolist()
    assert padj.tolist() == want_padj.tolist()


def test_holm_by_hand_and_its_near_misses():
    """p = (0.01, 0.04, 0.03), m = 3: sorted 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> running max
    0.03, 0.06, 0.06. Bonferroni (x3: 0.03, 0.12, 0.09) or no running max (0.04 for the largest) differ."""
    rej, padj = holm([0.01, 0.04, 0.03])
    assert padj.tolist() == pytest.approx([0.03, 0.06, 0.06]) and rej.tolist() == [True, False, False]
    rej, padj = holm([0.6, 0.9])                       # 1.2 is clipped to 1
    assert padj.tolist() == [1.0, 1.0] and not rej.any()
