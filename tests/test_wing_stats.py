"""Issue 55, the stats wing's mutation score: rules of crossprofile_lib/stats/ that a user sees (a label, a reference
policy, a refused or failed fit's report, a preregistration error naming the file and field, a table's columns) and
that the wing's other tests did not pin. Hand-made rows whose expected values are written out."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml

from crossprofile_lib.stats.bootstrap import TemplateBootstrap, percentile_interval
from crossprofile_lib.stats.composition import composition_table, composition_wide
from crossprofile_lib.stats.netlead import (
    fixed_effects_logit,
    lr_test,
    mixed_logit,
    regressions_fit,
    verdict_display,
    verdict_table,
)
from crossprofile_lib.stats.prereg import DEFAULT_PREREG_PATH, PreregError, load_prereg, parse_prereg
from crossprofile_lib.stats.separation import prepare_family
from crossprofile_lib.stats.tables import accuracy_table, label_effects, support_shared_minus_private

FIXED_METHOD = "GLM logit, template fixed effects, cluster-robust (template) covariance"
LR_METHOD = "likelihood-ratio test, GLM logit with template fixed effects"


def _synthetic(seed=0, T=20, n=60, pols=("R1", "B4", "Random", "M1"), policy_effect=0.0):
    """Rows whose outcome follows net lead (and, with ``policy_effect``, B4): every template informative."""
    rng = np.random.default_rng(seed)
    pols = list(pols)
    per = max(1, n // len(pols))
    tid = np.repeat([f"t{i:02d}" for i in range(T)], per * len(pols))
    pol = np.tile(np.repeat(pols, per), T)
    k = len(pol)
    lead = rng.integers(-3, 6, k)
    tone = rng.integers(-2, 3, k)
    eta = -0.5 + 0.9 * lead + policy_effect * (pol == "B4")
    return pd.DataFrame(dict(template_id=tid, policy=pol, net_lead=lead, irrelevant_tone=tone,
                             correct=rng.random(k) < 1 / (1 + np.exp(-eta))))


# --- the bootstrap's percentile interval ---------------------------------------------------------------------------

def test_the_percentile_interval_ignores_undefined_resamples_and_gives_nan_only_for_a_cell_no_resample_has():
    draws = np.array([[1.0, np.nan], [2.0, np.nan], [3.0, np.nan], [np.nan, np.nan], [5.0, np.nan]])
    lo, hi = percentile_interval(draws, level=0.5)
    # the defined resamples of column 0 are 1, 2, 3, 5: their 25th and 75th percentiles (linear) are 1.75 and 3.5
    assert lo[0] == pytest.approx(1.75) and hi[0] == pytest.approx(3.5)
    assert np.isnan(lo[1]) and np.isnan(hi[1])
    # without an undefined resample: the same percentiles of all of them
    lo, hi = percentile_interval(np.array([[1.0], [2.0], [3.0], [5.0]]), level=0.5)
    assert lo[0] == pytest.approx(1.75) and hi[0] == pytest.approx(3.5)


# --- the tables ----------------------------------------------------------------------------------------------------

def _boot(units=("a", "b")):
    return TemplateBootstrap(tuple(units), np.array([[0, 1], [0, 0], [1, 1]]))


def test_an_accuracy_table_has_exactly_its_grouping_outcome_count_and_interval_columns():
    df = pd.DataFrame(dict(template_id=["a", "a", "b"], policy="R1", budget_label="0.6", variant="PSP",
                           correct=[True, False, True]), index=[10, 11, 12])
    t = accuracy_table(df, _boot())
    assert list(t.columns) == ["policy", "budget_label", "variant", "outcome", "n", "estimate", "lo", "hi"]
    assert t.set_index("variant").loc["PSP", "estimate"] == pytest.approx(200 / 3)


def test_a_label_effect_is_the_control_minus_its_base_per_cell_and_names_the_cell():
    # R1 in classic: a 1, 1; b 0 -> 2/3. R1:unlabeled in classic: a 0, 1; b 0 -> 1/3. Control minus base: -33.3.
    df = pd.DataFrame(dict(template_id=list("aab") * 2, budget_label="0.6", cell="classic",
                           policy=["R1"] * 3 + ["R1:unlabeled"] * 3, correct=[1, 1, 0, 0, 1, 0]))
    t = label_effects(df.assign(correct=df.correct.astype(bool)), _boot())
    assert sorted(t["cell"]) == ["all", "classic"]
    row = t.set_index("cell").loc["classic"]
    assert row["policy"] == "R1:unlabeled" and row["versus"] == "R1" and row["label_format"] == "unlabeled"
    assert t["budget_label"].tolist() == ["0.6", "0.6"]
    assert row["estimate"] == pytest.approx(-100 / 3)


def test_support_shared_minus_private_is_labelled_and_hand_counted():
    # shared: a 1, 1; b 1 -> 100. private: a 0, 1; b 0 -> 1/3. Difference 66.7 points.
    df = pd.DataFrame(dict(template_id=list("aab") * 2, policy="ALL",
                           support_attr=["shared"] * 3 + ["private"] * 3,
                           correct=[True, True, True, False, True, False]))
    t = support_shared_minus_private(df, _boot())
    assert len(t) == 1
    assert t.loc[0, "contrast"] == "support shared - support private" and t.loc[0, "policy"] == "ALL"
    assert t.loc[0, "estimate"] == pytest.approx(200 / 3)


def test_the_composition_table_means_per_policy_and_variant_at_one_budget_with_unbudgeted_rows():
    df = pd.DataFrame(dict(
        policy=["R1", "R1", "R1", "ALL", "R1"], variant=["PSP", "PSP", "SPS", "PSP", "PSP"],
        budget_label=["0.6", "0.6", "0.6", "none", "0.4"],
        kept_support=[2, 4, 1, 5, 9], kept_decoy=[1, 0, 1, 5, 9], kept_irrelevant=[0, 2, 3, 4, 9],
        n_kept=[3, 6, 5, 14, 27]))
    t = composition_table(df, "0.6")
    assert list(t.index.names) == ["policy", "variant"]
    assert list(t.columns) == ["support", "decoy", "irrelevant", "n_kept"]
    assert t.loc[("R1", "PSP")].tolist() == [3.0, 0.5, 1.0, 4.5]       # the 0.4 row left out
    assert t.loc[("R1", "SPS")].tolist() == [1.0, 1.0, 3.0, 5.0]
    assert t.loc[("ALL", "PSP")].tolist() == [5.0, 5.0, 4.0, 14.0]     # label "none": always in
    every = composition_table(df, "all")
    assert every.loc[("R1", "PSP")].tolist() == pytest.approx([5.0, 10 / 3, 11 / 3, 12.0])   # 2, 4, 9; 1, 0, 9; 0, 2, 9
    wide = composition_wide(df, "0.6")
    assert wide.loc["R1", "PSP"] == "3.00/0.50/1.00" and wide.loc["R1", "SPS"] == "1.00/1.00/3.00"


# --- the net-lead family: reference and duplicates -----------------------------------------------------------------

def test_without_the_reference_policy_the_family_is_tested_against_its_first_policy_in_family_order():
    df = _synthetic(pols=("Random", "M1", "B4"), T=3, n=12)
    f = prepare_family(df, "copy", "R1")
    assert f["policies"] == ["B4", "Random", "M1"] and f["reference"] == "B4"
    assert prepare_family(df, "copy", "M1")["reference"] == "M1"


def test_the_duplicates_note_counts_each_policy_in_family_order():
    rows = []
    for pol, mem in (("R1", "a"), ("Random", "a"), ("B4", "a"), ("R1", "b"), ("B4", "c"), ("Random", "b")):
        rows.append(dict(template_id="t1", variant="PSP", seed=0, budget_label="0.6", memory_sha=mem, decision="A",
                         policy=pol, correct=True))
    rows.append(dict(rows[0], template_id="t2", correct=False))
    f = prepare_family(pd.DataFrame(rows), "copy")
    assert f["duplicates"]["dropped"] == 3
    assert f["note"].startswith("3 duplicate decisions dropped (B4: 1, Random: 2)")


# --- the regressions' reports --------------------------------------------------------------------------------------

def test_a_fit_refused_for_too_few_templates_names_its_method_the_count_and_the_minimum():
    df = _synthetic(T=3)
    fe = fixed_effects_logit(df)
    assert fe["method"] == FIXED_METHOD + " (not fitted)"
    assert fe["error"] == ("not fitted: 3 template(s); this fit needs at least 10 "
                           "(see crossprofile_lib/stats/netlead.py)")
    assert fe["warnings"] == [] and fe["policy_significant"] is None and fe["flat_templates"] == 0
    m = mixed_logit(df)
    assert m["method"] == "BinomialBayesMixedGLM.fit_vb (not fitted)" and "at least 5" in m["error"]
    assert m["warnings"] == [] and math.isnan(m["template_sd"])
    lr = lr_test(df)
    assert lr["method"] == LR_METHOD + " (not fitted)" and lr["lr"] is None and lr["warnings"] == []


def test_the_likelihood_ratio_test_of_one_policy_says_there_is_nothing_to_test():
    df = _synthetic(pols=("R1",), T=12, n=30)
    r = lr_test(df)
    assert r["error"] == "one policy level: nothing to test"
    assert r["formula"] == "y ~ net_lead + irrelevant_tone + C(template_id)"
    assert r["method"] == LR_METHOD and r["reference_policy"] == "R1"
    assert r["warnings"] == [] and r["lr"] is None and r["policy_significant"] is None


def test_the_likelihood_ratio_test_counts_the_templates_it_left_out_for_having_no_variation():
    df = _synthetic(T=12)
    df.loc[df.template_id == "t00", "correct"] = True
    df.loc[df.template_id == "t01", "correct"] = False
    r = lr_test(df)
    assert r["flat_templates"] == 2 and r["n_templates"] == 10 and r["lr"]["df"] == 3
    assert r["method"] == LR_METHOD and r["formula"].endswith("against y ~ net_lead + irrelevant_tone + C(template_id)")
    assert fixed_effects_logit(df)["flat_templates"] == 2


def test_a_fit_the_numerical_library_cannot_do_is_reported_failed_with_its_error(monkeypatch):
    from statsmodels.genmod.generalized_linear_model import GLM

    def singular(self, *a, **k):
        raise np.linalg.LinAlgError("Singular matrix")
    monkeypatch.setattr(GLM, "fit", singular)
    df = _synthetic(T=12)
    fe = fixed_effects_logit(df)
    assert fe["method"] == FIXED_METHOD + " (failed)" and fe["error"] == "fit failed: Singular matrix"
    assert fe["warnings"] == ["Singular matrix"] and fe["policy_significant"] is None and fe["terms"].empty
    lr = lr_test(df)
    assert lr["method"] == LR_METHOD + " (failed)" and lr["error"] == "fit failed: Singular matrix"
    assert lr["lr"] is None and lr["policy_significant"] is None and lr["flat_templates"] == 0


def test_the_secondary_familys_likelihood_ratio_test_uses_the_same_reference_policy_as_its_wald_test():
    df = _synthetic(pols=("R1", "B4", "Random", "M1", "BAL"), n=60, T=12)
    fits = regressions_fit(df)
    sec = fits["secondary"]
    assert fits["families"]["secondary"]["reference"] == "R1"
    assert sec["fixed"]["reference_policy"] == "R1" and sec["lr"]["reference_policy"] == "R1"
    assert "Treatment('R1')" in sec["lr"]["formula"] and sec["lr"]["lr"]["df"] == 4
    for key in ("fixed", "lr", "ml", "mixed", "gee"):       # every fit of the primary family against R1 too
        assert fits[key]["reference_policy"] == "R1", key
    # the caller's reference policy, where the rows hold it, is every fit's, the secondary family's included
    b4 = regressions_fit(df, "B4")
    assert b4["families"]["secondary"]["reference"] == "B4"
    assert b4["secondary"]["fixed"]["reference_policy"] == "B4" and b4["secondary"]["lr"]["reference_policy"] == "B4"
    assert b4["gee"]["reference_policy"] == "B4" and b4["fixed"]["reference_policy"] == "B4"


def test_the_wald_and_likelihood_ratio_tests_of_a_family_share_one_fit_of_its_full_model(monkeypatch):
    from statsmodels.genmod.generalized_linear_model import GLM
    fitted = []
    real = GLM.fit

    def spy(self, *a, **k):
        if "C(template_id)" in str(getattr(self, "formula", "")):    # the fixed-effects models (not GEE's start)
            fitted.append((self.formula, int(self.nobs)))
        return real(self, *a, **k)
    monkeypatch.setattr(GLM, "fit", spy)
    fits = regressions_fit(_synthetic(pols=("R1", "B4", "Random", "M1", "BAL"), n=60, T=12))
    assert fits["secondary"]["fixed"]["policy_significant"] is not None
    full = [f for f in fitted if "C(policy" in f[0]]
    # two families, each: one full model (Wald and likelihood ratio) and one model without policy (likelihood ratio)
    assert len(full) == 2 and len(set(full)) == 2 and len(fitted) == 4


def test_the_verdict_table_reports_each_fits_own_method():
    fits = dict(fixed=dict(method="fixed-effects fit", policy_significant=True, wald=dict(chi2=9.0, df=3, p=0.03)),
                lr=dict(method="likelihood-ratio fit", policy_significant=False, lr=dict(chi2=2.0, df=3, p=0.57)),
                families=dict(primary=dict(family="copy", note="")))
    v = verdict_table(fits).set_index("fit")
    assert v.loc["fixed", "method"] == "fixed-effects fit" and v.loc["lr", "method"] == "likelihood-ratio fit"
    assert v.loc["lr", "agrees_with_primary"] == False  # noqa: E712
    assert v.loc["fixed", "test"] == "joint Wald, cluster-robust" and v.loc["lr", "p"] == pytest.approx(0.57)


def test_the_verdict_display_labels_each_verdict_formats_p_and_reports_separated_levels_per_family():
    verdict = pd.DataFrame(dict(family=["copy"] * 3, fit=["fixed", "lr", "ml"], role=["primary", "robustness", "x"],
                                test=["w", "lr", "lr"], statistic=[12.3456, 1.0, np.nan], df=[3.0, 3.0, np.nan],
                                p=[0.0004, 0.0234, np.nan], policy_significant=[True, False, None]))
    sep = pd.DataFrame(dict(policy=["R1-rel"], n=[15], correct=[15], accuracy=[100.0], separation=["all correct"]))
    analysis = dict(verdict=verdict, families=dict(
        primary=dict(family="copy", separated=sep, note="R1-rel separated"),
        secondary=dict(family="every", separated=pd.DataFrame(), note="")))
    t, s, notes = verdict_display(analysis)
    assert t["verdict"].tolist() == ["policy matters", "not significant", "not tested"]
    assert t["p"].tolist() == ["< 0.001", "0.023", ""]
    assert t.loc[0, "chi2"] == 12.35
    assert list(t.columns) == ["family", "fit", "role", "test", "chi2", "df", "p", "verdict"]
    assert list(s.columns) == ["family", "policy", "n", "correct", "accuracy", "separation"]
    assert s["family"].tolist() == ["copy"] and s["separation"].tolist() == ["all correct"]
    assert notes == ["copy: R1-rel separated"]
    empty = verdict_display({})
    assert empty[0].empty and empty[1].empty and empty[2] == []


# --- the preregistration file --------------------------------------------------------------------------------------

def _contrast(**kw):
    return dict(dict(id="c1", terms=[{"weight": 1, "where": {"policy": "R1"}}]), **kw)


def test_a_file_that_is_not_a_mapping_is_refused_naming_the_file():
    with pytest.raises(PreregError) as e:
        parse_prereg(["a", "list"], "my.yaml")
    assert e.value.path == "my.yaml" and e.value.field == "<top>" and e.value.rule == "type"
    assert str(e.value).startswith("my.yaml: field '<top>'") and "mapping" in str(e.value)


def test_a_paper_value_of_the_wrong_type_is_refused_naming_the_field_and_what_it_may_be():
    with pytest.raises(PreregError) as e:
        parse_prereg({"contrasts": [_contrast(paper=5)]}, "my.yaml")
    assert e.value.field == "contrasts[0].paper" and e.value.rule == "type"
    assert "<figure id>/<item label>" in str(e.value) and "model -> paper value" in str(e.value)
    assert parse_prereg({"contrasts": [_contrast(paper={"m": 1.5})]}).contrasts[0].paper == {"m": 1.5}


def test_an_extra_file_adds_contrasts_that_may_name_families_of_either_file(tmp_path):
    extra = dict(families={"mine": {"correction": "none"}},
                 contrasts=[_contrast(id="x1", family="confirmatory"), _contrast(id="x2", family="mine")])
    f = tmp_path / "extra.yaml"
    f.write_text(yaml.safe_dump(extra))
    pre = load_prereg(extra=[f])
    ids = [c.id for c in pre.contrasts]
    assert ids[:3] == ["H1", "H2", "H3"] and ids[-2:] == ["x1", "x2"]
    x1 = next(c for c in pre.contrasts if c.id == "x1")
    assert x1.family == "confirmatory" and x1.terms[0].where == {"policy": "R1", "budget_label": "0.6"}  # defaults
    assert pre.families["mine"].correction == "none" and "confirmatory" in pre.families
    assert pre.source == f"{DEFAULT_PREREG_PATH} + {f}"
    # an extra file may not set the analysis settings: refused, naming the extra file, the field and the main file
    f3 = tmp_path / "settings.yaml"
    f3.write_text(yaml.safe_dump(dict(settings={"primary_budget": "0.4"}, contrasts=[_contrast(id="x3")])))
    with pytest.raises(PreregError) as e:
        load_prereg(extra=[f3])
    assert e.value.path == str(f3) and e.value.field == "settings" and e.value.rule == "extra file"
    assert str(DEFAULT_PREREG_PATH) in str(e.value) and "main preregistration file" in str(e.value)
    # an id already in the main file is refused, naming the extra file and the field
    f2 = tmp_path / "dup.yaml"
    f2.write_text(yaml.safe_dump(dict(contrasts=[_contrast(id="H1")])))
    with pytest.raises(PreregError) as e:
        load_prereg(extra=[f2])
    assert e.value.path == str(f2) and e.value.field == "contrasts[0].id" and e.value.rule == "unique"


# --- a model's statistics ------------------------------------------------------------------------------------------

def test_a_model_analysed_without_prepared_rows_has_no_analysis_set_and_is_exploratory(dev_templates):
    from crossprofile_lib.backends.ledger import ReferenceDecider
    from crossprofile_lib.run.runner import RunConfig, run_grid
    from crossprofile_lib.stats.analysis import analyse_model

    cfg = RunConfig(templates=["templates/dev"], seeds=(0,), budgets=("0.6",), policies=("R1", "ALL", "EMPTY"))
    df = run_grid(cfg, backend=ReferenceDecider(), templates=dev_templates[:3])
    m = analyse_model(df, load_prereg(), n_resamples=50, regressions=False, fit_resamples=0)
    assert m["analysis_set"] == {} and m["failed_calls"] == ""
    assert m["status"] == "exploratory" and "analysis set: None" in m["status_reasons"]
    assert m["status_label"] == "exploratory: too few templates (3 < 10); analysis set: None"
    assert m["social_proof"] == {"skipped": "not requested (--fit-resamples 0)"}
    from crossprofile_lib.stats.analysis import analyse
    (a,) = analyse(df, n_resamples=50, seed=7, regressions=False, fit_resamples=0)
    assert a["seed"] == 7 and a["resamples"] == 50


# --- the social-proof fit ------------------------------------------------------------------------------------------

def _choices(n=400, seed=0, s=0.5, w=0.3, beta=2.0, T=8):
    """Decisions drawn from the conditional logit with known (s, w, beta) over three options."""
    from crossprofile_lib.stats.socialproof import ChoiceData
    rng = np.random.default_rng(seed)
    X = rng.integers(-2, 3, size=(n, 3, 4)).astype(float)
    u = beta * (X[..., 0] + s * X[..., 1] + w * (X[..., 2] + s * X[..., 3]))
    p = np.exp(u - u.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    choice = np.array([rng.choice(3, p=row) for row in p])
    return ChoiceData(X, choice, np.array([f"t{i % T}" for i in range(n)]), np.ones(n))


def test_the_social_proof_fit_reports_that_its_optimiser_converged_and_recovers_a_finite_temperature():
    from crossprofile_lib.stats.socialproof import fit_social_proof
    data = _choices()
    boot = TemplateBootstrap.draw(sorted(set(data.template)), 20, np.random.default_rng(0))
    r = fit_social_proof(data, boot, 20)
    assert r["converged"] is True and r["deterministic"] is False and r["n_decisions"] == 400
    est = r["table"].set_index("parameter")["estimate"]
    assert 1.0 < est["inverse_temperature"] < 4.0 and r["resamples"] == 20


def test_a_resample_newton_does_not_settle_is_refitted_and_counted(monkeypatch):
    import crossprofile_lib.stats.socialproof as SP
    real = SP.batched_newton

    def first_unsettled(Xp, Wp, theta0, *a, **k):
        th, ok = real(Xp, Wp, theta0, *a, **k)
        want = th[0].copy()
        th[0], ok[0] = np.nan, False
        seen.append(want)
        return th, ok
    seen = []
    data = _choices()
    boot = TemplateBootstrap.draw(sorted(set(data.template)), 10, np.random.default_rng(1))
    monkeypatch.setattr(SP, "batched_newton", first_unsettled)
    r = SP.fit_social_proof(data, boot, 10)
    assert r["refit_resamples"] == 1 and r["resamples"] == 10
    t = r["table"].set_index("parameter")
    assert np.isfinite(t["lo"]).all() and np.isfinite(t["hi"]).all()     # the refit's numbers, not Newton's NaN


# --- the statistics' small rules -----------------------------------------------------------------------------------

def test_a_quoted_number_in_a_filter_matches_a_numeric_column():
    from crossprofile_lib.stats.contrasts import row_mask
    df = pd.DataFrame(dict(seed=[0, 1, 1, 2], budget=[0.4, 0.6, 0.6, 0.8], policy=["R1", "B4", "R1", "B4"]))
    m, why = row_mask(df, {"seed": "1"})
    assert m.tolist() == [False, True, True, False] and why == ""
    assert row_mask(df, {"budget": ["0.6", 0.8]})[0].tolist() == [False, True, True, True]
    assert row_mask(df, {"seed": 1, "policy": "R1"})[0].tolist() == [False, False, True, False]


def test_the_summary_estimates_are_floats_even_from_integer_counts():
    boot = _boot()
    s = boot.summarize(np.array([3, 4]), np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    assert s["estimate"].dtype == np.float64 and s["estimate"].tolist() == [3.0, 4.0]


def test_a_high_relevance_fallback_rate_is_a_warning_that_names_the_remedy():
    from crossprofile_lib.stats.analysis_set import fallback_lines
    lines = fallback_lines({"m": dict(calls=40, invalid=8, rate=0.2, high=True),
                            "n": dict(calls=40, invalid=1, rate=0.025, high=False)})
    assert lines[0].startswith("warning: m: relevance filter (R1-rel, BAL): 8 of 40 answers unusable (20.0%")
    assert "above 10%" in lines[0] and "H3" in lines[0] and "--decision-mode grammar" in lines[0]
    assert lines[1] == ("n: relevance filter (R1-rel, BAL): 1 of 40 answers unusable (2.5%; relevance_invalid), "
                        "R1-rel falls back to R1 there")


# --- issue 55, fresh sample 57: failed calls, the preregistration's errors, the tables' order, the caches -----------

def test_failed_calls_are_refused_by_default_with_the_remedy_and_dropped_with_allow_errors():
    from crossprofile_lib.stats.analysis_set import FailedCallsError, check_failed_calls, prepare
    df = pd.DataFrame(dict(template_id=["a", "a", "b"], policy="R1", correct=[True, False, True],
                           error=["", "timeout", None]))
    with pytest.raises(FailedCallsError) as e:
        prepare(df, analysis_set="all")          # the default: refused
    assert str(e.value) == ("the results table: 1 of 3 rows are failed model calls (column 'error' set); they are not "
                            "decisions. Rerun the command that made the run (finished calls come from the cache) "
                            "or pass --allow-errors to drop them")
    with pytest.raises(FailedCallsError):
        check_failed_calls(df, source="run.csv")
    kept, rec = prepare(df, allow_errors=True, analysis_set="all")
    assert kept.index.tolist() == [0, 2]
    assert rec["failed_calls"] == ("the results table: 1 of 3 rows are failed model calls (column 'error' set); "
                                   "they are not decisions: 1 dropped (--allow-errors)")


def test_a_prereg_file_that_is_not_a_mapping_gets_the_whole_message():
    with pytest.raises(PreregError) as e:
        parse_prereg("just text", "p.yaml")
    assert str(e.value) == "p.yaml: field '<top>': type: the file must be a mapping with a 'contrasts' list"


def test_a_prereg_unknown_key_lists_the_allowed_keys_and_a_missing_list_is_explained_by_its_docstring():
    with pytest.raises(PreregError) as e:
        parse_prereg({"contrast": [_contrast()]}, "p.yaml")
    assert e.value.field == "contrast" and e.value.rule == "unknown key"
    assert str(e.value) == ("p.yaml: field 'contrast': unknown key: allowed keys: contrasts, defaults, families, "
                            "settings, version")
    with pytest.raises(PreregError) as e:
        parse_prereg({"version": 1}, "p.yaml")
    assert e.value.field == "contrasts" and e.value.rule == "required"
    assert str(e.value) == "p.yaml: field 'contrasts': required: a non-empty list of contrasts"


def test_separated_levels_of_no_rows_is_an_empty_table_with_the_separation_column():
    from crossprofile_lib.stats.separation import separated_levels
    t = separated_levels(pd.DataFrame(columns=["policy", "correct"]))
    assert t.empty and list(t.columns) == ["policy", "n", "correct", "accuracy", "separation"]
    t = separated_levels(pd.DataFrame(columns=["cell", "correct"]), "cell")
    assert list(t.columns) == ["cell", "n", "correct", "accuracy", "separation"]


def test_the_accuracy_table_lists_variants_alphabetically_with_the_pooled_all_last():
    # variants given in the order SPS, all-like "PSP", "APS": the table's order is APS, PSP, SPS, then "all"
    df = pd.DataFrame(dict(template_id=list("ab") * 3, policy="R1", budget_label="0.6",
                           variant=["SPS", "SPS", "PSP", "PSP", "APS", "APS"],
                           correct=[True, False, True, True, False, False]))
    t = accuracy_table(df, _boot())
    assert t["variant"].tolist() == ["APS", "PSP", "SPS", "all"]
    assert t["estimate"].tolist() == pytest.approx([0.0, 100.0, 50.0, 50.0])


def test_label_effects_are_sorted_by_cell_with_all_last_and_leave_the_full_format_out():
    # cells "mirror" then "classic" in the rows; R1:full is the base's own format, not a label control
    rows = []
    for cell, base, ctrl in (("mirror", [1, 1, 0], [0, 0, 0]), ("classic", [1, 0, 0], [1, 1, 1])):
        for pol, ys in (("R1", base), ("R1:unlabeled", ctrl), ("R1:full", [0, 0, 0])):
            rows += [dict(template_id=t, budget_label="0.6", cell=cell, policy=pol, correct=bool(y))
                     for t, y in zip("aab", ys)]
    t = label_effects(pd.DataFrame(rows), _boot())
    assert t["policy"].tolist() == ["R1:unlabeled"] * 3
    assert t["cell"].tolist() == ["classic", "mirror", "all"]
    # classic: 3/3 - 1/3 = +66.7; mirror: 0 - 2/3 = -66.7; all: 3/6 - 3/6 = 0
    assert t["estimate"].tolist() == pytest.approx([200 / 3, -200 / 3, 0.0])


def test_support_shared_minus_private_takes_the_all_family_by_its_base_policy_column():
    # label controls of ALL ("ALL:unlabeled") carry base_policy "ALL"; a policy merely starting with "ALL" does not
    df = pd.DataFrame(dict(template_id=list("aab") * 4,
                           policy=["ALL:unlabeled"] * 6 + ["ALLX"] * 6, base_policy=["ALL"] * 6 + ["ALLX"] * 6,
                           support_attr=(["shared"] * 3 + ["private"] * 3) * 2,
                           correct=[True, True, True, False, True, False] * 2))
    t = support_shared_minus_private(df, _boot())
    assert t["policy"].tolist() == ["ALL:unlabeled"]
    assert t.loc[0, "estimate"] == pytest.approx(200 / 3)


def test_the_likelihood_ratio_test_of_one_policy_still_counts_its_flat_templates():
    df = _synthetic(pols=("R1",), T=12, n=30)
    df.loc[df.template_id == "t03", "correct"] = False
    r = lr_test(df)
    assert r["error"] == "one policy level: nothing to test" and r["flat_templates"] == 1


def test_the_likelihood_ratio_test_reports_the_full_fits_warnings_with_its_own(monkeypatch):
    import crossprofile_lib.stats.netlead as NL
    real = NL._full_fit

    def noisy(shared, d, formula):
        model, fit, caught, error = real(shared, d, formula)
        return model, fit, [*caught, "full fit: a warning"], error
    monkeypatch.setattr(NL, "_full_fit", noisy)
    r = lr_test(_synthetic(T=12))
    assert r["lr"] is not None and "full fit: a warning" in r["warnings"]


def test_without_a_copy_policy_the_regressions_keep_the_reference_asked_for(monkeypatch):
    import crossprofile_lib.stats.netlead as NL
    seen = []
    for name in ("fixed_effects_logit", "lr_test", "ml_logit", "mixed_logit", "gee_logit"):
        monkeypatch.setattr(NL, name, lambda r, ref, *a, _n=name: seen.append((_n, ref)) or dict(
            method=_n, reference_policy=ref, policy_significant=None, warnings=[], error="stub"))
    d = _synthetic(pols=("B3", "R1-rel", "B3-k7"), T=3, n=12)
    try:
        NL.regressions_fit(d, "B3")
    except Exception:       # the stubs only stand in for the fits; the references they were handed are the rule
        pass
    assert seen and {ref for _, ref in seen} == {"B3"}


def _two_rows_and_counted_reasons():
    """Two templates' rows and a choice-data source that counts its calls and answers each with a new skip reason."""
    calls = []

    def data():
        calls.append(1)
        return f"reason {len(calls)}"
    return pd.DataFrame(dict(template_id=["a", "b"], correct=[True, False])), calls, data


def test_the_social_proof_cache_tells_fits_of_different_choice_inputs_apart(tmp_path):
    from crossprofile_lib.stats.analysis import social_proof_cached
    from crossprofile_lib.stats.cache import FitCache
    rows, calls, data = _two_rows_and_counted_reasons()
    cache = FitCache(tmp_path)
    first = social_proof_cached(rows, _boot(), 10, data, cache, choice_key="inputs-1")
    again = social_proof_cached(rows, _boot(), 10, data, cache, choice_key="inputs-1")
    other = social_proof_cached(rows, _boot(), 10, data, cache, choice_key="inputs-2")
    assert first == again == dict(skipped="reason 1") and other == dict(skipped="reason 2") and len(calls) == 2
    assert sorted(p.name.split("-")[0] for p in tmp_path.glob("*.json")) == ["social_proof", "social_proof"]


def test_the_regressions_are_cached_under_their_own_name_and_read_back(dev_templates, tmp_path, monkeypatch):
    import crossprofile_lib.stats.analysis as A
    from crossprofile_lib.backends.ledger import ReferenceDecider
    from crossprofile_lib.run.runner import RunConfig, run_grid
    from crossprofile_lib.stats.cache import FitCache

    cfg = RunConfig(templates=["templates/dev"], seeds=(0,), budgets=("0.6",), policies=("R1", "ALL", "EMPTY"))
    df = run_grid(cfg, backend=ReferenceDecider(), templates=dev_templates[:3])
    fits = []
    monkeypatch.setattr(A, "regressions_fit", lambda d, ref: fits.append(ref) or dict(verdict=f"fitted {ref}"))
    monkeypatch.setattr(A, "net_lead_analysis", lambda d, boot, where, regressions, fit: fit(d, "R1"))
    cache = FitCache(tmp_path)
    m = A.analyse_model(df, load_prereg(), n_resamples=20, fit_resamples=0, cache=cache)
    again = A.analyse_model(df, load_prereg(), n_resamples=20, fit_resamples=0, cache=cache)
    assert m["net_lead"] == again["net_lead"] == {"verdict": "fitted R1"} and fits == ["R1"]
    assert [p.name.split("-")[0] for p in tmp_path.glob("*.json")] == ["regressions"]


def test_newton_from_a_far_start_halves_its_steps_within_the_bounds_and_reaches_the_lbfgs_optimum():
    # a start at the corner of the bounds overshoots: the step is halved (and clipped to the bounds) until the
    # log-likelihood no longer falls; the rows that settle agree with L-BFGS-B (the oracle)
    from crossprofile_lib.stats.socialproof import BOUNDS, batched_newton, fit, patterns
    data = _choices(n=120, seed=0, s=0.5, beta=0.5, w=0.3)
    boot = TemplateBootstrap.draw(sorted(set(data.template)), 5, np.random.default_rng(0))
    Xp, C = patterns(data, boot.units)
    Wp = boot.weights @ C
    th, ok = batched_newton(Xp, Wp, (19.9, 4.9, 49.0))
    lo, hi = np.array(BOUNDS).T
    assert ok.sum() >= 2 and (th >= lo).all() and (th <= hi).all()
    for b in np.flatnonzero(ok):
        assert th[b] == pytest.approx(fit(Xp, Wp[b])["theta"], abs=1e-3)


def test_a_gee_fit_with_an_infinite_standard_error_is_not_used_and_the_next_working_correlation_is(monkeypatch):
    from statsmodels.genmod.cov_struct import Exchangeable
    from statsmodels.genmod.generalized_estimating_equations import GEE

    from crossprofile_lib.stats.netlead import gee_logit

    class Infinite:      # finite estimates and p-values, but an infinite standard error: not a usable fit
        params, bse, pvalues = pd.Series([0.1, 0.2]), pd.Series([0.5, np.inf]), pd.Series([0.8, 1.0])

    real = GEE.from_formula

    def from_formula(formula, groups, data, family, cov_struct):
        if isinstance(cov_struct, Exchangeable):
            return type("M", (), {"fit": lambda self: Infinite()})()
        return real(formula, groups=groups, data=data, family=family, cov_struct=cov_struct)
    monkeypatch.setattr(GEE, "from_formula", staticmethod(from_formula))
    r = gee_logit(_synthetic(T=12))
    assert r["method"] == "GEE logit, template clusters, independence working correlation, robust covariance"
    assert r["wald"]["df"] == 3 and np.isfinite(r["terms"]["sd"]).all() and np.isfinite(r["terms"]["p"]).all()


def test_the_tables_order_variants_and_cells_by_name_even_from_a_categorical_column_in_another_order():
    # a results table read back from parquet may hold categorical columns whose category order is not alphabetical;
    # the grouping follows the categories, the tables still list the levels by name (then the pooled "all")
    df = pd.DataFrame(dict(template_id=list("ab") * 3, policy="R1", budget_label="0.6",
                           variant=pd.Categorical(["SPS", "SPS", "PSP", "PSP", "APS", "APS"],
                                                  categories=["SPS", "PSP", "APS"]),
                           correct=[True, False, True, True, False, False]))
    t = accuracy_table(df, _boot())
    assert t["variant"].tolist() == ["APS", "PSP", "SPS", "all"]
    assert t["estimate"].tolist() == pytest.approx([0.0, 100.0, 50.0, 50.0])
    from crossprofile_lib.stats.tables import cell_table
    d = pd.DataFrame(dict(template_id=list("ab") * 2, policy="R1", budget_label="0.6",
                          cell=pd.Categorical(["mirror"] * 2 + ["classic"] * 2, categories=["mirror", "classic"]),
                          correct=[True, False, True, True], chose_decoy=[False, True, False, False]))
    c = cell_table(d, _boot())
    assert c["cell"].tolist() == ["classic", "mirror", "classic", "mirror"]
    assert c["outcome"].tolist() == ["correct", "correct", "chose_decoy", "chose_decoy"]
    assert c["estimate"].tolist() == pytest.approx([100.0, 50.0, 0.0, 50.0])


# --- issue 55, fresh sample 58: GEE's reports, the net-lead subset, a two-policy formula -----------------------------

GEE_FORMULA = "y ~ net_lead + irrelevant_tone + C(policy, Treatment('R1'))"


def test_a_gee_fit_refused_for_too_few_templates_is_named_gee_logit_not_fitted():
    from crossprofile_lib.stats.netlead import gee_logit

    r = gee_logit(_synthetic(T=3))
    assert r["method"] == "GEE logit (not fitted)" and r["reference_policy"] == "R1"
    assert r["error"] == ("not fitted: 3 template(s); this fit needs at least 10 "
                          "(see crossprofile_lib/stats/netlead.py)")


def test_a_gee_fit_uses_r1_as_reference_by_default_and_names_its_exchangeable_working_correlation():
    from crossprofile_lib.stats.netlead import gee_logit

    df = _synthetic(T=12)
    r = gee_logit(df)
    assert r["reference_policy"] == "R1" and r["formula"] == GEE_FORMULA
    assert r["method"] == "GEE logit, template clusters, exchangeable working correlation, robust covariance"
    assert r["n"] == 720 and r["wald"]["df"] == 3   # 12 templates x 4 policies x 15 rows
    assert sorted(r["terms"]["term"]) == sorted(["Intercept", "net_lead", "irrelevant_tone", "policy[B4]",
                                                 "policy[M1]", "policy[Random]"])


def test_a_gee_fit_no_working_correlation_can_do_is_reported_failed_with_each_ones_error(monkeypatch):
    from statsmodels.genmod.generalized_estimating_equations import GEE

    from crossprofile_lib.stats.netlead import gee_logit

    def from_formula(formula, groups, data, family, cov_struct):
        raise ValueError(f"cannot fit {type(cov_struct).__name__}")
    monkeypatch.setattr(GEE, "from_formula", staticmethod(from_formula))
    r = gee_logit(_synthetic(T=12), "B4")
    assert set(r) == {"method", "formula", "reference_policy", "terms", "policy_significant", "wald", "warnings"}
    assert r["method"] == "GEE (failed)" and r["reference_policy"] == "B4"
    assert r["formula"] == "y ~ net_lead + irrelevant_tone + C(policy, Treatment('B4'))"
    assert r["warnings"] == ["exchangeable: cannot fit Exchangeable", "independence: cannot fit Independence"]
    assert r["terms"].empty and r["wald"] is None and r["policy_significant"] is None


def test_a_gee_working_correlation_that_failed_keeps_its_error_among_the_used_fits_warnings(monkeypatch):
    from statsmodels.genmod.cov_struct import Exchangeable
    from statsmodels.genmod.generalized_estimating_equations import GEE

    from crossprofile_lib.stats.netlead import gee_logit

    real = GEE.from_formula

    def from_formula(formula, groups, data, family, cov_struct):
        if isinstance(cov_struct, Exchangeable):
            raise np.linalg.LinAlgError("Singular matrix")
        return real(formula, groups=groups, data=data, family=family, cov_struct=cov_struct)
    monkeypatch.setattr(GEE, "from_formula", staticmethod(from_formula))
    r = gee_logit(_synthetic(T=12))
    assert r["method"] == "GEE logit, template clusters, independence working correlation, robust covariance"
    assert r["warnings"] == ["exchangeable: Singular matrix"] and r["n"] == 720


def test_the_net_lead_subset_names_the_settings_field_of_an_unknown_column():
    from crossprofile_lib.stats.netlead import subset

    df = _synthetic(T=2)
    assert len(subset(df, {"policy": ["R1", "B4"]})) == 60 and subset(df, None) is df
    with pytest.raises(PreregError) as e:
        subset(df, {"budget": "0.6"})
    assert str(e.value) == ("<settings>: field 'where.budget': column: "
                            "the results table has no column 'budget'")


def test_the_net_lead_analysis_reports_the_rows_filter_it_used():
    from crossprofile_lib.stats.netlead import net_lead_analysis

    df = _synthetic(T=2)
    boot = TemplateBootstrap(("t00", "t01"), np.array([[0, 1], [1, 1]]))
    a = net_lead_analysis(df, boot, where={"policy": "B4"}, regressions=False)
    assert a["where"] == {"policy": "B4"} and a["n"] == 30
    assert net_lead_analysis(df, boot, regressions=False)["where"] == {}


def test_two_policies_are_compared_in_the_formula_against_the_reference():
    from crossprofile_lib.stats.netlead import gee_logit

    df = _synthetic(T=12, pols=("R1", "B4"))
    g = gee_logit(df)
    assert g["formula"] == GEE_FORMULA and list(g["terms"]["term"]).count("policy[B4]") == 1
    fe = fixed_effects_logit(df)
    assert fe["formula"] == GEE_FORMULA + " + C(template_id)" and fe["wald"]["df"] == 1
    assert fe["warnings"] == []


# --- issue 55, fresh sample 58: task headroom's decided rows, NaN groups and non-rate outcomes, choice patterns -------

def _decisions(rows):
    return pd.DataFrame(rows, columns=["task_id", "policy", "decided", "correct"])


def test_task_headroom_counts_only_decided_all_and_empty_rows():
    from crossprofile_lib.stats.headroom import task_headroom

    rows = []
    for t in ("t1", "t2", "t3"):
        rows += [(t, "ALL", True, True), (t, "EMPTY", True, False),
                 (t, "ALL", False, False), (t, "EMPTY", False, True)]   # undecided: left out
    h = task_headroom(_decisions(rows), np.random.default_rng(0), 50)
    assert (h.estimate, h.lo, h.hi, h.n_units) == (100.0, 100.0, 100.0, 3)
    # a decided row of another policy does not make the check fail
    rows.append(("t1", "B4", True, True))
    assert task_headroom(_decisions(rows), np.random.default_rng(0), 50).estimate == 100.0
    # only undecided EMPTY rows: nothing to check
    only = [r for r in rows if r[1] != "EMPTY" or not r[2]]
    assert task_headroom(_decisions(only), np.random.default_rng(0), 50) is None


def test_a_group_with_a_missing_key_is_its_own_row_and_a_numeric_outcome_is_not_scaled_to_percent():
    from crossprofile_lib.stats.tables import means_table

    df = pd.DataFrame(dict(template_id=["a", "a", "b", "b"], budget_label=["0.6", "0.6", None, None],
                           correct=[True, False, True, True], tokens=[10, 20, 30, 50]))
    t = means_table(df, ["budget_label"], ["correct", "tokens"], _boot())
    got = {(o, "none" if pd.isna(b) else b): (n, e) for o, b, n, e in t[["outcome", "budget_label", "n", "estimate"]]
           .itertuples(index=False)}
    assert got == {("correct", "0.6"): (2, 50.0), ("correct", "none"): (2, 100.0),
                   ("tokens", "0.6"): (2, 15.0), ("tokens", "none"): (2, 40.0)}


def _pattern_choices(n=400):
    """Decisions over four fixed feature tables (3 options x 4 features): at most 4 x 3 = 12 choice patterns."""
    from crossprofile_lib.stats.socialproof import ChoiceData
    base = np.array([[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]],
                     [[0, 0, 0, 1], [1, 1, 0, 0], [0, 0, 0, 0]],
                     [[2, 0, 1, 0], [0, 2, 0, 1], [1, 1, 1, 1]],
                     [[0, 1, 1, 0], [1, 0, 0, 1], [0, 0, 2, 0]]], dtype=float)
    rng = np.random.default_rng(0)
    X = base[np.arange(n) % 4]
    u = 2.0 * (X[..., 0] + 0.5 * X[..., 1] + 0.3 * (X[..., 2] + 0.5 * X[..., 3]))
    p = np.exp(u - u.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    choice = np.array([rng.choice(3, p=row) for row in p])
    # the same decisions again with the options listed in another order: the same patterns
    X2, c2 = np.roll(X, 1, axis=1), (choice + 1) % 3
    tmpl = np.array([f"t{i % 8}" for i in range(n)])
    return ChoiceData(np.concatenate([X, X2]), np.concatenate([choice, c2]), np.concatenate([tmpl, tmpl]),
                      np.ones(2 * n)), len(set(zip(np.arange(n) % 4, choice)))


def test_the_social_proof_fit_counts_distinct_choice_patterns_whatever_the_options_order():
    from crossprofile_lib.stats.socialproof import fit_social_proof

    data, combos = _pattern_choices()
    assert combos == 12       # every (feature table, chosen option) pair occurs
    boot = TemplateBootstrap.draw(sorted(set(data.template)), 5, np.random.default_rng(0))
    r = fit_social_proof(data, boot, 5)
    assert r["n_patterns"] == 12 and r["n_decisions"] == 800 and r["resamples"] == 5


# --- issue 55, fresh sample 58: the verdict table and its display, whole ---------------------------------------------

def _rows(df):
    return [tuple("nan" if isinstance(x, float) and math.isnan(x) else x for x in r)
            for r in df.itertuples(index=False)]


def test_the_verdict_table_has_one_row_per_family_and_fit_with_each_tests_numbers_and_agreement():
    nan = math.nan
    fits = dict(
        fixed=dict(method="F", policy_significant=True, wald=dict(chi2=9.0, df=3, p=0.03)),
        lr=dict(method="L", policy_significant=True, lr=dict(chi2=8.0, df=3, p=0.04)),
        ml=dict(method="M", policy_significant=None, lr=None),
        mixed=dict(method="X", policy_significant=False,
                   terms=pd.DataFrame(dict(term=["a", "policy[B4]", "policy[M1]"], p_holm=[nan, 0.6, 0.2]))),
        gee=dict(method="G", policy_significant=True, wald=dict(chi2=7.5, df=2, p=0.02)),
        secondary=dict(fixed=dict(method="F2", policy_significant=False, wald=dict(chi2=1.0, df=4, p=0.9)),
                       lr=dict(method="L2", policy_significant=None, lr=None)),
        families=dict(primary=dict(family="copy", note="n1"), secondary=dict(family="all", note="n2")))
    v = verdict_table(fits)
    assert list(v.columns) == ["family", "fit", "role", "test", "method", "statistic", "df", "p",
                               "policy_significant", "agrees_with_primary", "note"]
    assert _rows(v) == [
        ("copy", "fixed", "primary", "joint Wald, cluster-robust", "F", 9.0, 3.0, 0.03, True, True, "n1"),
        ("copy", "lr", "robustness", "likelihood ratio", "L", 8.0, 3.0, 0.04, True, True, "n1"),
        ("copy", "ml", "paper's model", "likelihood ratio", "M", "nan", "nan", "nan", None, None, "n1"),
        ("copy", "mixed", "robustness", "any policy term, Holm", "X", "nan", 2.0, 0.2, False, False, "n1"),
        ("copy", "gee", "robustness", "joint Wald, robust", "G", 7.5, 2.0, 0.02, True, True, "n1"),
        ("all", "fixed", "secondary", "joint Wald, cluster-robust", "F2", 1.0, 4.0, 0.9, False, False, "n2"),
        ("all", "lr", "secondary", "likelihood ratio", "L2", "nan", "nan", "nan", None, None, "n2")]


def test_the_verdict_table_without_a_primary_verdict_or_families_leaves_agreement_and_labels_empty():
    fits = dict(fixed=dict(method="F", policy_significant=None, lr=None),
                gee=dict(method="G", policy_significant=False, wald=dict(chi2=0.5, df=1, p=0.48)))
    assert _rows(verdict_table(fits)) == [
        ("", "fixed", "primary", "joint Wald, cluster-robust", "F", "nan", "nan", "nan", None, None, ""),
        ("", "gee", "robustness", "joint Wald, robust", "G", 0.5, 1.0, 0.48, False, None, "")]
    assert verdict_table({}).empty


def test_the_verdict_display_formats_p_at_its_thresholds_and_gathers_each_familys_separated_levels_and_note():
    verdict = pd.DataFrame(dict(family=["copy", "copy", "all"], fit=["fixed", "lr", "fixed"],
                                role=["primary", "robustness", "secondary"], test=["w", "lr", "w"],
                                statistic=[3.14159, 0.004, 2.5], df=[1.0, 2.0, 3.0], p=[0.001, 0.05, 0.00099],
                                policy_significant=[True, None, False]))
    sep1 = pd.DataFrame(dict(policy=["R1-rel"], n=[15], correct=[15], accuracy=[100.0], separation=["all correct"],
                             extra=[1]))
    sep2 = pd.DataFrame(dict(policy=["M1"], n=[9], correct=[0], accuracy=[0.0], separation=["all wrong"]))
    analysis = dict(verdict=verdict, families=dict(primary=dict(family="copy", separated=sep1, note=""),
                                                   secondary=dict(family="all", separated=sep2, note="M1 apart")))
    t, s, notes = verdict_display(analysis)
    assert _rows(t) == [("copy", "fixed", "primary", "w", 3.14, 1.0, "0.001", "policy matters"),
                        ("copy", "lr", "robustness", "lr", 0.0, 2.0, "0.050", "not tested"),
                        ("all", "fixed", "secondary", "w", 2.5, 3.0, "< 0.001", "not significant")]
    assert _rows(s) == [("copy", "R1-rel", 15, 15, 100.0, "all correct"), ("all", "M1", 9, 0, 0.0, "all wrong")]
    assert notes == ["all: M1 apart"]
    assert [x.empty if hasattr(x, "empty") else x for x in verdict_display(dict(verdict=verdict.iloc[:0]))] == \
        [True, True, []]


# --- issue 55, fresh sample 58: a preregistration compiled whole, its refusals' messages, an extra file merged --------

def test_a_prereg_document_compiles_to_contrasts_with_inherited_defaults_merged_filters_and_families():
    from crossprofile_lib.stats.prereg import Contrast, Term
    doc = {"version": 1,
           "defaults": {"outcome": "chose_decoy", "scale": 10, "where": {"budget_label": "0.6", "variant": "PSP"}},
           "families": {"main": None, "side": {"correction": "none", "alpha": 0.1}},
           "settings": {"primary_budget": "0.4"},
           "contrasts": [
               {"id": "A", "title": "first", "family": "main", "where": {"variant": None, "cell": "x"},
                "terms": [{"weight": 1, "where": {"policy": "R1"}}, {"weight": -1, "where": {"cell": None}}]},
               {"id": "B", "outcome": "correct", "scale": 100, "test_value": 5, "note": "n",
                "paper": {"gpt": 1.5}, "terms": [{"weight": 0.5}]}]}
    p = parse_prereg(doc, "f.yaml")
    assert p.source == "f.yaml"
    assert p.contrasts == (
        Contrast("A", (Term(1.0, {"budget_label": "0.6", "cell": "x", "policy": "R1"}),
                       Term(-1.0, {"budget_label": "0.6"})), "first", "main", "chose_decoy", 10.0, 0.0, None, ""),
        Contrast("B", (Term(0.5, {"budget_label": "0.6", "variant": "PSP"}),), "", None, "correct", 100.0, 5.0,
                 {"gpt": 1.5}, "n"))
    assert set(p.families) == {"main", "side"}
    assert (p.families["main"].correction, p.families["main"].alpha) == ("holm", 0.05)
    assert (p.families["side"].correction, p.families["side"].alpha) == ("none", 0.1)
    assert p.settings["primary_budget"] == "0.4" and p.settings["headroom_min_points"] == 15.0
    assert p.settings["social_proof_where"] == {}


def test_prereg_refusals_name_the_file_the_contrast_field_and_what_is_wrong():
    def msg(doc):
        with pytest.raises(PreregError) as e:
            parse_prereg(doc, "p.yaml")
        return str(e.value)
    assert msg({"contrasts": [_contrast(), _contrast()]}) == \
        "p.yaml: field 'contrasts[1].id': unique: id 'c1' is used twice"
    assert msg({"contrasts": [_contrast(family="fam")]}) == \
        "p.yaml: field 'contrasts[0].family': declared: family 'fam' is not under 'families' (declared: none)"
    assert msg({"families": {"a": None, "b": None}, "contrasts": [_contrast(), _contrast(id="c2", family="fam")]}) == \
        "p.yaml: field 'contrasts[1].family': declared: family 'fam' is not under 'families' (declared: a, b)"
    m = msg({"contrasts": [_contrast(paper="no-such-figure/item")]})
    assert m.startswith("p.yaml: field 'contrasts[0].paper': paper reference: ")


def test_an_extra_file_merges_over_the_main_documents_defaults_and_families(tmp_path):
    from crossprofile_lib.stats.prereg import merge_extra
    main_doc = {"version": 1, "defaults": {"where": {"budget_label": "0.6"}}, "families": {"main": {"alpha": 0.1}},
                "contrasts": [_contrast(id="m1")]}
    base = parse_prereg(main_doc, "main.yaml")
    out = merge_extra(base, main_doc, {"families": {"main": {"alpha": 0.1}, "x": None},
                                       "contrasts": [_contrast(id="e1", family="main")]}, "extra.yaml")
    assert [c.id for c in out.contrasts] == ["m1", "e1"] and out.source == "main.yaml + extra.yaml"
    assert out.contrasts[1].terms[0].where == {"budget_label": "0.6", "policy": "R1"}   # the main file's defaults
    assert set(out.families) == {"main", "x"} and out.families["main"].alpha == 0.1 and out.settings == base.settings
    own = merge_extra(base, main_doc, {"defaults": {"outcome": "kept"}, "contrasts": [_contrast(id="e2")]}, "e.yaml")
    assert own.contrasts[1].terms[0].where == {"policy": "R1"} and own.contrasts[1].outcome == "kept"

    def msg(doc):
        with pytest.raises(PreregError) as e:
            merge_extra(base, main_doc, doc, "e.yaml")
        return str(e.value)
    assert msg(["x"]) == "e.yaml: field '<top>': type: the file must be a mapping with a 'contrasts' list"
    assert msg({"families": {"main": {"alpha": 0.2}}, "contrasts": [_contrast(id="e3")]}) == \
        "e.yaml: field 'families.main': unique: family 'main' is declared differently in main.yaml"
    assert msg({"contrasts": [_contrast(id="e4"), _contrast(id="m1")]}) == \
        "e.yaml: field 'contrasts[1].id': unique: id 'm1' is already used in main.yaml"
    assert msg({"settings": {}, "contrasts": [_contrast(id="e5")]}) == (
        "e.yaml: field 'settings': extra file: the analysis settings come from the main preregistration file "
        "(main.yaml); an extra file adds contrasts (and families)")
    assert msg({"version": 1, "bogus": 1, "contrasts": [_contrast(id="e6")]}).startswith(
        "e.yaml: field 'bogus': unknown key")


# --- issue 55, fresh sample 58: the fit cache's stored form and what it cannot store ----------------------------------

def test_a_cached_fit_is_stored_as_plain_json_with_frames_split_into_columns_and_rows(tmp_path):
    import json

    from crossprofile_lib.stats.cache import FitCache
    c = FitCache(tmp_path)
    value = {"t": pd.DataFrame(dict(a=[1, 2], b=["x", "y"])), "flag": np.bool_(True), "na": pd.NA, "tup": (1, 2.5),
             "arr": np.array([3, 4]), 7: "seven"}
    assert c.get("f", {"k": 1}, lambda: value) is value
    (entry,) = tmp_path.glob("f-*.json")
    assert len(entry.name) == len("f-") + 32 + len(".json")
    assert json.loads(entry.read_text()) == {"t": {"__frame__": {"columns": ["a", "b"], "data": [[1, "x"], [2, "y"]]}},
                                             "flag": True, "na": None, "tup": [1, 2.5], "arr": [3, 4], "7": "seven"}
    back = c.get("f", {"k": 1}, lambda: None)
    assert c.hits == 1 and c.misses == 1 and back["tup"] == [1, 2.5] and back["7"] == "seven"
    assert back["t"].to_dict(orient="list") == {"a": [1, 2], "b": ["x", "y"]}


def test_a_fit_the_cache_cannot_store_is_returned_and_the_reason_kept(tmp_path):
    from crossprofile_lib.stats.cache import FitCache
    c = FitCache(tmp_path)
    assert c.get("f", {"k": 1}, lambda: {"s": {1, 2}}) == {"s": {1, 2}}
    assert c.write_error == f"cannot write the stats cache {tmp_path}: cannot cache a value of type set"
    c2 = FitCache(tmp_path)
    assert c2.get("g", {"k": 1}, lambda: {"__frame__": 1}) == {"__frame__": 1}
    assert c2.write_error == f"cannot write the stats cache {tmp_path}: reserved key __frame__"
    assert list(tmp_path.iterdir()) == [] and c2.misses == 1 and c2.hits == 0
    off = FitCache(None)
    assert off.get("f", lambda: 1 / 0, lambda: "computed") == "computed" and off.misses == 1


# --- issue 55, fresh sample 58: the headroom check whole ---------------------------------------------------------------

def test_the_headroom_is_all_minus_empty_in_points_with_the_resampled_templates_interval_and_verdict():
    from crossprofile_lib.stats.headroom import headroom
    # a: ALL 1, EMPTY 0; b: ALL 1 and 0, EMPTY 1. Point: ALL 2/3, EMPTY 1/2 -> 16.67 points.
    # resamples (a, b), (a, a), (b, b): 16.67, 100 - 0 = 100, 50 - 100 = -50; 2.5th and 97.5th percentiles
    # (linear, of -50, 16.67, 100): -50 + 0.05 * 66.67 = -46.67 and 16.67 + 0.95 * 83.33 = 95.83
    df = pd.DataFrame(dict(template_id=["a", "a", "b", "b", "b", "b"], policy=["ALL", "EMPTY", "ALL", "ALL", "EMPTY",
                                                                             "B4"],
                           correct=[True, False, True, False, True, False]))
    h = headroom(df, _boot(), min_points=15)
    d = h.as_dict()
    assert set(d) == {"estimate", "lo", "hi", "min_points", "n_units", "reason", "passed", "status"}
    assert d["estimate"] == pytest.approx(50 / 3) and d["lo"] == pytest.approx(-140 / 3)
    assert d["hi"] == pytest.approx(575 / 6) and d["n_units"] == 2 and d["min_points"] == 15.0
    assert d["reason"] == "ALL - EMPTY lower bound -46.7 <= 15 points"
    assert d["passed"] is False and d["status"] == "exploratory" and h["status"] == "exploratory" and len(h) == 8
    none = headroom(df[df.policy != "EMPTY"], _boot(), min_points=12.5).as_dict()
    assert none == dict(estimate=None, lo=None, hi=None, min_points=12.5, n_units=0,
                        reason="the run has no ALL and EMPTY rows to check headroom", passed=False,
                        status="exploratory")


def test_a_headroom_bound_passes_only_strictly_above_the_threshold_after_rounding_away_float_noise():
    from crossprofile_lib.stats.headroom import Headroom
    on = Headroom.of(20.0, 15.0000000001, 30.0, 15, 4)
    assert on.passed is False and on.reason == "ALL - EMPTY lower bound 15.0 <= 15 points"
    above = Headroom.of(20.0, 15.001, 30.0, 15, 4)
    assert above.passed is True and above.reason == "" and above.status == "confirmatory"
    assert (above.difference, above.low, above.high, above.passes, above.n_tasks) == (20.0, 15.001, 30.0, True, 4)


# --- issue 55, fresh sample 58: a net-lead family prepared whole ------------------------------------------------------

DUP_RULE = ("same task (template, variant, seed), budget, memory text (memory_sha) and decision as a row of "
            "a policy earlier in the family order: one decision call counted twice")


def _family_rows():
    spec = [("R1", "m1", "a", True), ("B4", "m1", "a", True), ("Random", "m2", "b", False), ("M1", "m2", "b", False),
            ("M1", "m3", "a", True), ("ALL", "m1", "a", False), ("R1", "m5", "a", False), ("Random", "m6", "a", True),
            ("M1", "m7", "a", False), ("BAL", "m4", "c", True), ("EMPTY", "m8", "c", False)]
    return pd.DataFrame([dict(template_id="t1", variant="PSP", seed=0, budget_label="0.6", memory_sha=m, decision=dec,
                              policy=p, correct=c) for p, m, dec, c in spec])


def test_the_copy_family_drops_later_duplicates_keeps_their_origin_and_falls_back_to_its_first_policy():
    f = prepare_family(_family_rows(), "copy", "B4")
    assert f["family"] == "copy policies (R1, B4, Random, M1)"
    assert list(f["rows"].index) == [0, 2, 4, 6, 7, 8] and f["policies"] == ["R1", "Random", "M1"]
    assert f["reference"] == "R1" and f["separated"].empty
    assert f["duplicates"] == dict(rule=DUP_RULE, dropped=2, by_policy={"B4": 1, "M1": 1},
                                   kept_as={"B4": {"R1": 1}, "M1": {"Random": 1}}, note="")
    assert f["note"] == "2 duplicate decisions dropped (B4: 1, M1: 1)"


def test_every_budgeted_policy_family_reports_separated_levels_apart_with_their_counts():
    f = prepare_family(_family_rows(), "all", "Random")
    assert f["family"] == "every budgeted policy in the rows" and f["reference"] == "Random"
    assert f["duplicates"]["dropped"] == 3 and f["duplicates"]["kept_as"]["ALL"] == {"R1": 1}
    assert _rows(f["separated"]) == [("BAL", 1, 1, 100.0, "all correct"), ("EMPTY", 1, 0, 0.0, "all wrong")]
    assert list(f["rows"].index) == [0, 2, 4, 6, 7, 8] and f["policies"] == ["R1", "Random", "M1"]
    assert f["note"] == ("3 duplicate decisions dropped (B4: 1, M1: 1, ALL: 1); "
                         "BAL separated (all correct, 1 of 1): reported apart, not tested; "
                         "EMPTY separated (all wrong, 0 of 1): reported apart, not tested")


def test_a_table_without_the_memory_text_drops_no_duplicates_and_says_which_column_it_lacks():
    f = prepare_family(_family_rows().drop(columns=["memory_sha", "seed"]), "copy")
    assert f["duplicates"] == dict(rule=DUP_RULE, dropped=0, by_policy={}, kept_as={},
                                   note="no duplicates dropped: the table has no seed, memory_sha column")
    # with its duplicate kept, B4's one row is all correct: separated
    assert f["note"] == ("no duplicates dropped: the table has no seed, memory_sha column; "
                         "B4 separated (all correct, 1 of 1): reported apart, not tested")
    assert len(f["rows"]) == 7 and f["policies"] == ["R1", "Random", "M1"]


# --- issue 55, fresh sample 58: the analysis set, the run status, the relevance fallback, whole -----------------------

SET_RULE = "formal = template ids of the files under templates/formal/"


def test_the_formal_analysis_set_drops_development_templates_and_records_the_counts():
    from crossprofile_lib.stats.analysis_set import select_analysis_set
    df = pd.DataFrame(dict(template_id=["f1", "f1", "f2", "d1", "d1", "d2"], x=range(6)))
    rows, rec = select_analysis_set(df, "formal", {"f1", "f2"})
    assert list(rows.index) == [0, 1, 2]
    assert rec == dict(rule=SET_RULE, formal_templates=2, development_templates=2, rows_dropped=3, name="formal",
                       n_templates=2)
    rows, rec = select_analysis_set(df, "all", {"f1", "f2"})
    assert rows is df and rec == dict(rule=SET_RULE, formal_templates=2, development_templates=2, rows_dropped=0,
                                      name="all (formal and development templates)", n_templates=4)
    assert select_analysis_set(df, "formal", set())[1]["name"] == "development templates only"
    assert select_analysis_set(df.iloc[:3], "formal", {"f1", "f2"})[1] == dict(
        rule=SET_RULE, formal_templates=2, development_templates=0, rows_dropped=0, name="formal", n_templates=2)
    with pytest.raises(ValueError) as e:
        select_analysis_set(df, "dev", {"f1"})
    assert str(e.value) == "analysis set 'dev': must be one of formal, all"


def test_the_run_status_lists_every_reason_its_results_are_exploratory():
    from crossprofile_lib.stats.analysis_set import run_status
    assert run_status({"passed": True}, {"name": "formal"}, 10) == ("confirmatory", [])
    assert run_status({"passed": False, "reason": "ALL - EMPTY lower bound 3.0 <= 15 points"},
                      {"name": "all (formal and development templates)"}, 9) == (
        "exploratory", ["ALL - EMPTY lower bound 3.0 <= 15 points", "too few templates (9 < 10)",
                        "analysis set: all (formal and development templates)"])
    assert run_status({}, {}, 12) == ("exploratory", ["headroom check failed", "analysis set: None"])


def test_the_relevance_fallback_rate_counts_each_task_once_per_backend_and_skips_failed_calls():
    from crossprofile_lib.stats.analysis_set import fallback_lines, relevance_fallback
    base = dict(template_id="t", variant="PSP", relevance_filter="model", error="")
    rows = [dict(base, backend="b1", seed=0, relevance_invalid=True),
            dict(base, backend="b1", seed=0, relevance_invalid=False),     # same task: one call, invalid
            dict(base, backend="b1", seed=1, relevance_invalid=False),
            dict(base, backend="b1", seed=2, relevance_invalid=True, error="timeout"),   # failed: not counted
            dict(base, backend="b1", seed=3, relevance_invalid=True, relevance_filter="keyword"),
            dict(base, backend="a0", seed=0, relevance_invalid=False)]
    fb = relevance_fallback(pd.DataFrame(rows))
    assert fb == {"a0": {"calls": 1, "invalid": 0, "rate": 0.0, "high": False},
                  "b1": {"calls": 2, "invalid": 1, "rate": 0.5, "high": True}}
    assert list(fb) == ["a0", "b1"]
    assert fallback_lines(fb) == [
        "a0: relevance filter (R1-rel, BAL): 0 of 1 answers unusable (0.0%; relevance_invalid), R1-rel falls back "
        "to R1 there",
        "warning: b1: relevance filter (R1-rel, BAL): 1 of 2 answers unusable (50.0%; relevance_invalid), R1-rel "
        "falls back to R1 there; above 10% this biases H3 (R1-rel - R1) toward 0: use --decision-mode grammar or "
        "score (constrained JSON) or a stronger model"]
    no_backend = relevance_fallback(pd.DataFrame(rows).drop(columns=["backend"]))
    # without a backend column every row is one model's: a0's seed-0 task is b1's (one call, invalid)
    assert no_backend == {"model": {"calls": 2, "invalid": 1, "rate": 0.5, "high": True}}
    assert relevance_fallback(pd.DataFrame(rows).drop(columns=["seed"])) == {}


# --- issue 55, fresh sample 58: the interval formatter's digits and missing mark through a pivot ----------------------

def test_a_ci_pivot_writes_every_cell_with_the_digits_and_missing_mark_asked_for():
    from crossprofile_lib.stats.format import ci_column, ci_pivot
    t = pd.DataFrame(dict(policy=["B4", "R1", "B4"], budget=["0.6", "0.6", "0.4"], cell=["x", "y", "y"],
                          estimate=[1.234, np.nan, 3.0], lo=[1.0, np.nan, np.nan], hi=[1.5, np.nan, np.nan]),
                     index=[7, 8, 9])
    c = ci_column(t, 2, "-")
    assert c.to_dict() == {7: "1.23 [1.00, 1.50]", 8: "-", 9: "3.00"}
    assert ci_column(t).to_dict() == {7: "1.2 [1.0, 1.5]", 8: "n/a", 9: "3.0"}
    p = ci_pivot(t, ["policy", "budget"], "cell", digits=2, missing="-")
    assert list(p.index) == [("B4", "0.6"), ("R1", "0.6"), ("B4", "0.4")] and list(p.columns) == ["x", "y"]
    assert p.to_numpy().tolist() == [["1.23 [1.00, 1.50]", ""], ["", "-"], ["", "3.00"]]
    q = ci_pivot(t, "budget", "policy")
    assert list(q.index) == ["0.6", "0.4"] and list(q.columns) == ["B4", "R1"]
    assert q.to_numpy().tolist() == [["1.2 [1.0, 1.5]", "n/a"], ["3.0", ""]]


# --- issue 55, fresh sample 58: the cell and relevance tables whole ----------------------------------------------------

def _approx_rows(df):
    return [tuple(round(x, 6) if isinstance(x, float) else x for x in r) for r in _rows(df)]


def test_the_cell_table_gives_accuracy_and_decoy_rate_per_policy_and_cell_with_the_pooled_cells_after_each():
    from crossprofile_lib.stats.tables import cell_table
    df = pd.DataFrame(dict(template_id=["a", "b", "a", "a", "b"], policy=["R1", "R1", "R1", "R1", "B4"],
                           budget_label="0.6", cell=["classic", "classic", "mirror", "other", "classic"],
                           pooled_cell=["classic", "classic", "mirror", "", "classic"],
                           correct=[True, False, True, False, True], chose_decoy=[False, True, False, False, False]))
    t = cell_table(df, _boot(), pooled=True)
    assert list(t.columns) == ["policy", "budget_label", "cell", "outcome", "n", "estimate", "lo", "hi"]
    # R1 classic: a 1, b 0 -> 50; resamples (a, b) 50, (a, a) 100, (b, b) 0 -> [2.5, 97.5]; a cell of one template:
    # the resample without it is undefined, the others give its mean
    full, one, zero = (50.0, 2.5, 97.5), (100.0, 100.0, 100.0), (0.0, 0.0, 0.0)
    assert _approx_rows(t) == [
        ("R1", "0.6", "classic", "correct", 2, *full), ("R1", "0.6", "classic (pooled)", "correct", 2, *full),
        ("R1", "0.6", "mirror", "correct", 1, *one), ("R1", "0.6", "mirror (pooled)", "correct", 1, *one),
        ("B4", "0.6", "classic", "correct", 1, *one), ("B4", "0.6", "classic (pooled)", "correct", 1, *one),
        ("R1", "0.6", "classic", "chose_decoy", 2, *full), ("R1", "0.6", "classic (pooled)", "chose_decoy", 2, *full),
        ("R1", "0.6", "mirror", "chose_decoy", 1, *zero), ("R1", "0.6", "mirror (pooled)", "chose_decoy", 1, *zero),
        ("B4", "0.6", "classic", "chose_decoy", 1, *zero), ("B4", "0.6", "classic (pooled)", "chose_decoy", 1, *zero)]
    assert len(cell_table(df, _boot())) == 6


def test_the_relevance_table_is_each_filters_precision_and_recall_in_percent_once_per_task():
    from crossprofile_lib.stats.tables import relevance_table
    df = pd.DataFrame(dict(template_id=["a", "a", "b", "a", "b", "b"], variant="PSP", seed=[0, 0, 0, 0, 0, 1],
                           relevance_filter=["keyword", "keyword", "keyword", "model", "", "model"],
                           relevance_precision=[0.5, 0.9, 1.0, 0.25, 1.0, np.nan],
                           relevance_recall=[1.0, 0.1, 0.5, 0.75, 1.0, 0.5]))
    t = relevance_table(df, _boot())
    # keyword: a 50 / 100, b 100 / 50 (a's second row is the same task): 75 either way, resamples 75, a-only, b-only
    assert _approx_rows(t) == [("keyword", "precision", 2, 75.0, 51.25, 98.75), ("model", "precision", 1, 25.0, 25.0, 25.0),
                               ("keyword", "recall", 2, 75.0, 51.25, 98.75), ("model", "recall", 1, 75.0, 75.0, 75.0)]
    assert relevance_table(df.drop(columns=["relevance_filter"]), _boot()).empty
    assert relevance_table(df.iloc[[4, 5]], _boot()).empty


def test_support_shared_minus_private_gives_each_all_policy_its_difference_interval_and_p():
    rows = [("ALL", "a", "shared", True), ("ALL", "a", "shared", True), ("ALL", "b", "shared", True),
            ("ALL", "a", "private", False), ("ALL", "a", "private", True), ("ALL", "b", "private", False),
            ("ALL:unlabeled", "a", "shared", True), ("ALL:unlabeled", "b", "shared", False),
            ("ALL:unlabeled", "a", "private", False), ("ALL:unlabeled", "b", "private", False),
            ("ALL:shuffled", "a", "shared", True), ("R1", "a", "private", True)]
    df = pd.DataFrame(rows, columns=["policy", "template_id", "support_attr", "correct"])
    t = support_shared_minus_private(df, _boot())
    assert list(t.columns) == ["policy", "contrast", "n", "estimate", "lo", "hi", "p"]
    # ALL: 100 - 33.3 = 66.7; resamples (a, a) 100 - 50, (b, b) 100 - 0: [50.83, 98.33]; p = 2 (0 + 1) / 4
    # ALL:unlabeled: 50 - 0; resamples (a, a) 100, (b, b) 0: [2.5, 97.5]; one resample at 0: p = 2 (1 + 1) / 4
    assert _approx_rows(t) == [
        ("ALL", "support shared - support private", 3, round(200 / 3, 6), round(305 / 6, 6), round(295 / 3, 6), 0.5),
        ("ALL:unlabeled", "support shared - support private", 2, 50.0, 2.5, 97.5, 1.0)]
    assert support_shared_minus_private(df[df.policy == "R1"], _boot()).empty
    assert support_shared_minus_private(df[df.policy == "ALL:shuffled"], _boot()).empty


# --- issue 55, fresh sample 58: the social-proof likelihood, its gradient and Hessian against an independent oracle -----

def _ll_oracle(theta, Xp, weight):
    """The conditional logit's log-likelihood written out: option utility beta (own + s social + w (irrelevant +
    s irrelevant social)), the chosen option first."""
    from scipy.special import logsumexp
    s, w, beta = theta
    u = beta * (Xp[..., 0] + s * Xp[..., 1] + w * (Xp[..., 2] + s * Xp[..., 3]))
    return float(weight @ (u[:, 0] - logsumexp(u, axis=1)))


@pytest.mark.parametrize("K", [2, 3, 4])
def test_the_batched_likelihood_gradient_and_hessian_match_the_written_out_likelihood(K):
    from crossprofile_lib.stats.socialproof import _derivs, log_likelihood
    rng = np.random.default_rng(K)
    Xp = rng.integers(-2, 3, size=(25, K, 4)).astype(float)
    Wp = rng.integers(0, 5, size=(3, 25)).astype(float)
    th = np.array([[0.3, 0.7, 1.5], [0.9, 0.1, 0.4], [0.5, 0.5, 3.0]])
    ll, g, H = _derivs(th, Xp, Wp)
    assert _derivs(th, Xp, Wp, hess=False)[1:] == (None, None)
    h = 1e-5
    for b in range(3):
        want = _ll_oracle(th[b], Xp, Wp[b])
        assert ll[b] == pytest.approx(want, rel=1e-10)
        ll1, g1 = log_likelihood(th[b], Xp, Wp[b])
        assert ll1 == pytest.approx(want, rel=1e-10)
        fd = [(_ll_oracle(th[b] + h * e, Xp, Wp[b]) - _ll_oracle(th[b] - h * e, Xp, Wp[b])) / (2 * h) for e in np.eye(3)]
        assert g[b] == pytest.approx(fd, rel=1e-5, abs=1e-5) and g1 == pytest.approx(fd, rel=1e-5, abs=1e-5)
        fd2 = np.array([(_derivs(th[b:b + 1] + h * e, Xp, Wp[b:b + 1])[1][0]
                         - _derivs(th[b:b + 1] - h * e, Xp, Wp[b:b + 1])[1][0]) / (2 * h) for e in np.eye(3)])
        assert H[b] == pytest.approx(fd2, rel=1e-4, abs=1e-4)
        assert np.allclose(H[b], H[b].T)


def test_unique_rows_match_numpys_unique_rows_and_canonical_patterns_ignore_the_options_order():
    from crossprofile_lib.stats.socialproof import canonical, unique_rows
    rng = np.random.default_rng(3)
    a = rng.integers(-2, 3, size=(200, 4)).astype(float)
    u, inv = unique_rows(a)
    want_u, want_inv = np.unique(a, axis=0, return_inverse=True)
    assert np.array_equal(u, want_u) and np.array_equal(inv.ravel(), want_inv.ravel())
    assert np.array_equal(u[inv.ravel()], a)
    e_u, e_inv = unique_rows(a[:0])
    assert e_u.shape == (0, 4) and len(e_inv) == 0
    # canonical: the chosen option's features first, then the others sorted (lexicographically by feature)
    X = np.array([[[0, 1, 0, 0], [2, 0, 0, 1], [1, 1, 1, 1]]], dtype=float)
    assert canonical(X, np.array([1])).tolist() == [[2, 0, 0, 1, 0, 1, 0, 0, 1, 1, 1, 1]]
    assert canonical(X[:, [2, 0, 1]], np.array([2])).tolist() == [[2, 0, 0, 1, 0, 1, 0, 0, 1, 1, 1, 1]]
    assert canonical(X, np.array([0])).tolist() == [[0, 1, 0, 0, 1, 1, 1, 1, 2, 0, 0, 1]]
    Xs = rng.integers(-2, 3, size=(50, 4, 4)).astype(float)
    ch = rng.integers(0, 4, 50)
    perm = rng.permutation(4)
    inv_perm = np.argsort(perm)
    assert np.array_equal(canonical(Xs, ch), canonical(Xs[:, perm], inv_perm[ch]))
    neg = np.array([[[-2, 0, 0, 0], [1, -1, 0, 0], [1, -2, 0, 0]]], dtype=float)
    assert canonical(neg, np.array([0])).tolist() == [[-2, 0, 0, 0, 1, -2, 0, 0, 1, -1, 0, 0]]


def test_the_social_proof_fit_reports_its_likelihood_resample_count_and_a_deterministic_decider_without_intervals():
    from crossprofile_lib.stats.socialproof import ChoiceData, fit_social_proof
    data, _ = _pattern_choices()
    boot = TemplateBootstrap.draw(sorted(set(data.template)), 7, np.random.default_rng(1))
    r = fit_social_proof(data, boot, None)
    t = r["table"]
    assert list(t.columns) == ["parameter", "estimate", "lo", "hi", "p", "at_bound", "resamples_at_bound"]
    assert t["parameter"].tolist() == ["social_proof", "irrelevant_weight", "inverse_temperature"]
    assert r["resamples"] == 7 and r["refit_resamples"] == 0 and r["note"] == "" and r["deterministic"] is False
    est = t["estimate"].to_numpy()
    assert r["log_likelihood"] == pytest.approx(_ll_oracle(est, _chosen_first(data), np.ones(len(data))), rel=1e-9)
    assert np.isnan(t["p"].iloc[2]) and t["p"].iloc[:2].notna().all() and (t["lo"] <= t["hi"]).all()
    assert t["at_bound"].tolist() == [False, False, False] and t["resamples_at_bound"].tolist() == [0, 0, 0]
    assert fit_social_proof(data, boot, 3)["resamples"] == 3 and fit_social_proof(data, boot, 0)["resamples"] == 1

    # a decider that always takes the option with the highest own + 0.5 social score: beta runs to its bound
    rng = np.random.default_rng(2)
    X = rng.integers(-2, 3, size=(300, 3, 4)).astype(float)
    score = X[..., 0] + 0.5 * X[..., 1]
    srt = np.sort(score, axis=1)
    keep = srt[:, -1] > srt[:, -2]
    det = ChoiceData(X[keep], score[keep].argmax(axis=1), np.array([f"t{i % 4}" for i in range(int(keep.sum()))]),
                     np.ones(int(keep.sum())))
    d = fit_social_proof(det, TemplateBootstrap.draw(sorted(set(det.template)), 5, np.random.default_rng(0)), 5)
    assert d["deterministic"] is True and d["resamples"] == 0 and d["refit_resamples"] == 0
    assert d["table"]["lo"].isna().all() and d["table"]["p"].isna().all()
    assert d["table"]["estimate"].iloc[2] >= 10 and d["table"]["resamples_at_bound"].tolist() == [0, 0, 0]
    assert d["note"] == ("inverse temperature >= 10: the decisions are (almost) deterministic in the features; s and w "
                         "are only bounded by them, not point-identified, so no bootstrap intervals are given")
    empty = fit_social_proof(ChoiceData(X[:0], np.zeros(0, int), np.array([], dtype=str), np.ones(0)), boot, 5)
    assert set(empty) == {"table", "n_decisions", "resamples", "deterministic", "note"}
    assert empty["table"].empty and empty["n_decisions"] == 0 and empty["note"] == "no decisions to fit"


def _chosen_first(data):
    """Each decision's features with the chosen option moved first (the others' order does not matter)."""
    X, c = data.X, data.choice
    rows = np.arange(len(c))
    return np.stack([X[rows, c]] + [X[rows, (c + j) % X.shape[1]] for j in range(1, X.shape[1])], axis=1)


def test_an_ml_fit_refused_for_too_few_templates_names_its_quadrature_points_and_has_no_likelihood_ratio():
    from crossprofile_lib.stats.netlead import ml_logit
    r = ml_logit(_synthetic(T=4), "B4", n_points=7)
    assert r["method"] == "ML random intercept per template, adaptive Gauss-Hermite (7 points) (not fitted)"
    assert r["error"] == ("not fitted: 4 template(s); this fit needs at least 5 "
                          "(see crossprofile_lib/stats/netlead.py)")
    assert r["lr"] is None and r["reference_policy"] == "B4" and r["n"] == 240 and r["n_templates"] == 4
    assert r["formula"] == "y ~ net_lead + irrelevant_tone + C(policy, Treatment('B4'))"
    assert ml_logit(_synthetic(T=4))["method"].startswith("ML random intercept per template, adaptive Gauss-Hermite "
                                                           "(15 points)")


# --- issue 55, fresh sample 58: preregistered contrasts evaluated whole -------------------------------------------------

def test_contrasts_are_estimated_tested_and_corrected_per_family_with_unestimable_ones_left_out():
    from crossprofile_lib.stats.contrasts import evaluate_contrasts
    df = pd.DataFrame(dict(template_id=["a", "a", "b", "b"], policy=["R1", "B4", "R1", "B4"],
                           correct=[True, False, True, True]))
    r1, b4 = {"policy": "R1"}, {"policy": "B4"}
    pre = parse_prereg({"families": {"main": None, "side": {"correction": "none", "alpha": 0.6}}, "contrasts": [
        {"id": "c1", "title": "R1 - B4", "family": "main", "terms": [{"weight": 1, "where": r1},
                                                                   {"weight": -1, "where": b4}]},
        {"id": "c2", "family": "main", "scale": 1, "test_value": -1, "terms": [{"weight": 1, "where": b4}]},
        {"id": "c3", "family": "side", "paper": {"m": 2.0}, "terms": [{"weight": 1, "where": r1}]},
        {"id": "c4", "terms": [{"weight": 1, "where": {"policy": "M1"}}]}]}, "p.yaml")
    out = evaluate_contrasts(df, pre, _boot())
    assert list(out.columns) == ["id", "title", "family", "outcome", "n_rows", "estimable", "reason", "paper",
                                 "estimate", "lo", "hi", "p", "n_undefined", "p_adjusted", "reject", "correction",
                                 "alpha"]
    # c1: R1 100 - B4 50; resamples (a, b) 50, (a, a) 100 - 0, (b, b) 100 - 100: [2.5, 97.5]; one resample at 0:
    # p = 2 (1 + 1) / 4 = 1. c2: B4 0.5 (scale 1), resamples 0.5, 0, 1; none <= -1: p = 2 / 4. Holm over (1, 0.5):
    # 0.5 * 2 = 1, then 1. c3: R1 100 in every resample, p = 0.5, uncorrected at alpha 0.6: rejected.
    assert _approx_rows(out.drop(columns=["paper"])) == [
        ("c1", "R1 - B4", "main", "correct", 2, True, "", 50.0, 2.5, 97.5, 1.0, 0, 1.0, False, "holm", 0.05),
        ("c2", "", "main", "correct", 2, True, "", 0.5, 0.025, 0.975, 0.5, 0, 1.0, False, "holm", 0.05),
        ("c3", "", "side", "correct", 2, True, "", 100.0, 100.0, 100.0, 0.5, 0, 0.5, True, "none", 0.6),
        ("c4", "", "", "correct", 0, False, "term 0: no rows with policy in ['M1'] (present: B4, R1)",
         "nan", "nan", "nan", "nan", 3, "nan", False, "none", "nan")]
    assert out["paper"].tolist() == [None, None, {"m": 2.0}, None] and out["reject"].dtype == bool
    bad = parse_prereg({"contrasts": [{"id": "k", "outcome": "kept", "terms": [{"weight": 1}]}]}, "q.yaml")
    with pytest.raises(PreregError) as e:
        evaluate_contrasts(df, bad, _boot())
    assert str(e.value) == "q.yaml: field 'contrasts[0].outcome': column: the results table has no column 'kept'"


def test_a_filter_that_matches_nothing_says_which_column_emptied_it_and_what_values_were_left():
    from crossprofile_lib.stats.contrasts import row_mask
    df = pd.DataFrame(dict(ok=[True, False, True], seed=[0, 1, 2], policy=["R1", "B4", "M1"],
                           label=[f"v{i}" for i in range(3)]))
    assert row_mask(df, {"ok": True})[0].tolist() == [True, False, True]
    assert row_mask(df, {"ok": "True"})[0].tolist() == [False, False, False]    # a bool column takes bools only
    assert row_mask(df, {"policy": 1})[0].tolist() == [False, False, False]     # a text column compares as text
    assert row_mask(df, {"seed": "x"})[0].tolist() == [False, False, False]     # not a number: no match, no error
    m, why = row_mask(df, {"ok": True, "policy": ["B4", "X"]})
    assert m.tolist() == [False, False, False]
    assert why == "no rows with policy in ['B4', 'X'] (present: M1, R1)"
    assert row_mask(df.iloc[:0], {"policy": "R1"})[1] == "no rows"
    many = pd.DataFrame(dict(label=[f"v{i:02d}" for i in range(15)]))
    assert row_mask(many, {"label": "zz"})[1] == ("no rows with label in ['zz'] (present: "
                                                 + ", ".join(f"v{i:02d}" for i in range(12)) + ")")
    with pytest.raises(PreregError) as e:
        row_mask(df, {"budget": 1}, "f.yaml", "contrasts[2].where")
    assert str(e.value) == ("f.yaml: field 'contrasts[2].where.budget': column: "
                            "the results table has no column 'budget'")
    with pytest.raises(PreregError) as e:
        row_mask(df, {"budget": 1})
    assert str(e.value).startswith("<prereg>: field 'where.budget': column:")


def test_label_effects_pair_each_label_control_with_its_base_per_cell_and_over_all_cells():
    rows = [("R1", "a", "classic", True), ("R1", "b", "classic", False), ("R1", "a", "mirror", True),
            ("R1:unlabeled", "a", "classic", False), ("R1:unlabeled", "b", "classic", False),
            ("R1:unlabeled", "a", "mirror", True),
            ("R1:full", "a", "classic", True),            # the full format is the base itself: no effect
            ("B4:shuffled", "a", "classic", True)]        # no B4 rows to compare with
    df = pd.DataFrame(rows, columns=["policy", "template_id", "cell", "correct"]).assign(budget_label="0.6")
    t = label_effects(df, _boot())
    assert list(t.columns) == ["policy", "versus", "label_format", "budget_label", "cell", "n", "estimate", "lo", "hi",
                               "p"]
    # the control minus its base. classic: 0 - 50, resamples -50, 0 - 100, 0 - 0 -> [-97.5, -2.5]; mirror:
    # 100 - 100 (b has none); all: 33.3 - 66.7 with resamples (a, a) 50 - 100 and (b, b) 0 - 0 -> [-49.17, -1.67];
    # each has a resample at or above 0: p = 1
    assert _approx_rows(t) == [
        ("R1:unlabeled", "R1", "unlabeled", "0.6", "classic", 2, -50.0, -97.5, -2.5, 1.0),
        ("R1:unlabeled", "R1", "unlabeled", "0.6", "mirror", 1, 0.0, 0.0, 0.0, 1.0),
        ("R1:unlabeled", "R1", "unlabeled", "0.6", "all", 3, round(-100 / 3, 6), round(-295 / 6, 6), round(-5 / 3, 6),
         1.0)]
    assert label_effects(df[~df.policy.str.contains(":un")], _boot()).empty


def test_accuracy_by_net_lead_lists_every_lead_from_minus_3_to_5_with_empty_ones_counted_zero():
    from crossprofile_lib.stats.netlead import accuracy_by_net_lead, is_nondecreasing
    df = pd.DataFrame(dict(template_id=["a", "b", "a", "a", "b"], net_lead=[0, 0, 2, 7, 7],
                           correct=[True, False, True, False, True]))
    t = accuracy_by_net_lead(df, _boot())
    assert list(t.columns) == ["net_lead", "n", "estimate", "lo", "hi"]
    assert t["net_lead"].tolist() == [-3, -2, -1, 0, 1, 2, 3, 4, 5, 7]
    assert t["n"].tolist() == [0, 0, 0, 2, 0, 1, 0, 0, 0, 2]
    got = {k: (e, lo, hi) for k, e, lo, hi in _approx_rows(t[t.n > 0][["net_lead", "estimate", "lo", "hi"]])}
    assert got == {0: (50.0, 2.5, 97.5), 2: (100.0, 100.0, 100.0), 7: (50.0, 2.5, 97.5)}
    assert t[t.n == 0]["estimate"].isna().all()
    assert is_nondecreasing(t) is False                     # 50, 100, then 50
    assert is_nondecreasing(t[t.net_lead < 5]) is True      # empty leads skipped
    assert is_nondecreasing(pd.DataFrame(dict(net_lead=[1, 0], n=[1, 1], estimate=[50.0, 50.0 + 1e-10]))) is True


def test_the_composition_table_means_kept_facts_per_cell_then_over_all_cells_then_the_pooled_cells():
    from crossprofile_lib.stats.tables import composition_table as tables_composition
    df = pd.DataFrame(dict(template_id=["a", "b"], policy="R1", budget_label="0.6", cell=["classic", "mirror"],
                           pooled_cell=["classic", ""], kept_support=[2, 4], kept_decoy=[1, 0], kept_irrelevant=[0, 2],
                           retention=[0.4, 0.8]))
    t = tables_composition(df, _boot(), pooled=True)
    rows = _approx_rows(t[["outcome", "cell", "n", "estimate", "lo", "hi"]])
    # counts are plain means (not percent); all cells: (a, b) the mean, (a, a) a's, (b, b) b's
    assert rows == [
        ("kept_support", "classic", 1, 2.0, 2.0, 2.0), ("kept_support", "mirror", 1, 4.0, 4.0, 4.0),
        ("kept_support", "all", 2, 3.0, 2.05, 3.95),
        ("kept_decoy", "classic", 1, 1.0, 1.0, 1.0), ("kept_decoy", "mirror", 1, 0.0, 0.0, 0.0),
        ("kept_decoy", "all", 2, 0.5, 0.025, 0.975),
        ("kept_irrelevant", "classic", 1, 0.0, 0.0, 0.0), ("kept_irrelevant", "mirror", 1, 2.0, 2.0, 2.0),
        ("kept_irrelevant", "all", 2, 1.0, 0.05, 1.95),
        ("retention", "classic", 1, 0.4, 0.4, 0.4), ("retention", "mirror", 1, 0.8, 0.8, 0.8),
        ("retention", "all", 2, 0.6, 0.41, 0.79),
        ("kept_support", "classic (pooled)", 1, 2.0, 2.0, 2.0), ("kept_decoy", "classic (pooled)", 1, 1.0, 1.0, 1.0),
        ("kept_irrelevant", "classic (pooled)", 1, 0.0, 0.0, 0.0), ("retention", "classic (pooled)", 1, 0.4, 0.4, 0.4)]
    assert len(tables_composition(df, _boot())) == 12
    assert len(tables_composition(df.drop(columns=["pooled_cell"]), _boot(), pooled=True)) == 12


def test_the_tables_list_policies_and_budgets_in_the_designs_order_then_unknown_ones_by_name():
    pols = ["zeta", "ALL", "R1", "alpha", "B4", "EMPTY"]
    buds = ["none", "128t", "0.4", "9.9"]
    df = pd.DataFrame([dict(template_id="a", policy=p, budget_label=b, variant="PSP", correct=True)
                       for p in pols for b in buds])
    t = accuracy_table(df, _boot())
    t = t[t.variant == "PSP"]
    want_pols = ["R1", "B4", "ALL", "EMPTY", "alpha", "zeta"]
    want_buds = ["0.4", "128t", "none", "9.9"]
    assert list(zip(t.policy, t.budget_label)) == [(p, b) for p in want_pols for b in want_buds]


def test_the_bootstrap_p_value_follows_its_formula_per_column_with_undefined_resamples_left_out():
    from crossprofile_lib.stats.bootstrap import bootstrap_pvalue
    draws = np.array([[1.0, -1.0, np.nan, 0.0], [2.0, 0.5, np.nan, 0.0], [-0.5, 3.0, np.nan, 0.0],
                      [np.nan, 4.0, np.nan, 0.0]])
    # column 0: defined 1, 2, -0.5 -> below 0: 1, above: 2 -> 2 (1 + 1) / 4 = 1.0
    # column 1: four defined, below 1, above 3 -> 2 * 2 / 5 = 0.8; column 2: none defined -> NaN
    # column 3: all at the null (both sides count them) -> min(1, 2 * 5 / 5) = 1
    p = bootstrap_pvalue(draws)
    assert p[:2].tolist() == pytest.approx([1.0, 0.8]) and np.isnan(p[2]) and p[3] == 1.0
    # against a null per column: column 0 at 1.5 -> below 2 (1, -0.5), above 1 -> 2 * 2 / 4 = 1;
    # column 1 at 3.5 -> below 3, above 1 -> 0.8; column 3 at -1 -> above 4, below 0 -> 2 / 5
    q = bootstrap_pvalue(draws, np.array([1.5, 3.5, 0.0, -1.0]))
    assert q[0] == 1.0 and q[1] == pytest.approx(0.8) and np.isnan(q[2]) and q[3] == pytest.approx(0.4)
    rng = np.random.default_rng(5)
    d = rng.normal(0.3, 1.0, size=(99, 3))
    for j in range(3):
        below, above = (d[:, j] <= 0).sum(), (d[:, j] >= 0).sum()
        assert bootstrap_pvalue(d)[j] == pytest.approx(min(1.0, 2 * (min(below, above) + 1) / 100))


def test_the_cached_social_proof_fit_says_why_it_was_skipped_and_rebuilds_choice_data_only_on_a_miss(tmp_path):
    from crossprofile_lib.stats.analysis import social_proof_cached
    from crossprofile_lib.stats.cache import FitCache
    rows = pd.DataFrame(dict(template_id=["a", "b"], correct=[True, False]))
    boot = _boot()
    assert social_proof_cached(rows, boot, 5, None) == {"skipped": "no rebuilt choice data handed in"}
    assert social_proof_cached(rows, boot, 5, "no templates") == {"skipped": "no templates"}
    assert social_proof_cached(rows, boot, 5, lambda: "") == {"skipped": "no rebuilt choice data handed in"}
    data, _ = _pattern_choices(40)
    data = type(data)(data.X, data.choice, np.where(np.arange(len(data)) % 2, "a", "b"), data.count)
    calls = []

    def build():
        calls.append(1)
        return data, {"templates": 2}
    cache = FitCache(tmp_path)
    first = social_proof_cached(rows, boot, 3, build, cache, "inputs-1")
    assert first["rebuild"] == {"templates": 2} and first["resamples"] == 3 and calls == [1]
    again = social_proof_cached(rows, boot, 3, build, cache, "inputs-1")
    assert calls == [1] and cache.hits == 1 and again["rebuild"] == {"templates": 2}
    social_proof_cached(rows, boot, 2, build, cache, "inputs-1")      # other resamples: another entry
    social_proof_cached(rows, boot, 3, build, cache, "inputs-2")      # other inputs: another entry
    assert calls == [1, 1, 1] and len(list(tmp_path.glob("social_proof-*.json"))) == 3


def test_analyse_runs_each_backend_and_model_in_order_with_its_own_choice_data_and_the_prepared_rows(monkeypatch):
    import crossprofile_lib.stats.analysis as A
    from crossprofile_lib.stats.analysis_set import FailedCallsError
    seen = []

    def fake(d, prereg, seed, n_resamples, cd, regressions, fit_resamples, rows, cache, choice_key):
        seen.append(dict(models=sorted(set(zip(d.backend, d.model))), n=len(d), seed=seed, B=n_resamples,
                         cd=cd() if callable(cd) else cd, regressions=regressions, fit=fit_resamples, rows=rows,
                         key=choice_key, prereg=prereg))
        return dict(model=d.model.iloc[0])
    monkeypatch.setattr(A, "analyse_model", fake)
    df = pd.DataFrame(dict(backend=["z", "a", "a", "a"], model=["m", "y", "x", "x"], template_id=["f1", "f1", "d1", "f1"],
                           error=["", "", "", "boom"]))
    pre = parse_prereg({"contrasts": [_contrast()]}, "p.yaml")
    with pytest.raises(FailedCallsError):
        A.analyse(df, pre)
    out = A.analyse(df, pre, n_resamples=9, seed=4, choice_data={("a", "y"): "reason y"}, regressions=False,
                    fit_resamples=6, allow_errors=True, analysis_set="all", choice_key="k")
    assert out == [dict(model="x", seed=4), dict(model="y", seed=4), dict(model="m", seed=4)]
    assert [s["models"] for s in seen] == [[("a", "x")], [("a", "y")], [("z", "m")]]
    assert [s["n"] for s in seen] == [1, 1, 1] and [s["cd"] for s in seen] == [None, "reason y", None]
    assert all(s["seed"] == 4 and s["B"] == 9 and s["regressions"] is False and s["fit"] == 6 and s["key"] == "k"
               and s["prereg"] is pre for s in seen)
    rec = seen[0]["rows"]
    assert rec["failed_calls"] == ("the results table: 1 of 4 rows are failed model calls (column 'error' set); "
                                   "they are not decisions: 1 dropped (--allow-errors)")
    assert rec["analysis_set"]["name"] == "development templates only"
    seen.clear()
    A.analyse(df[df.error == ""], pre, choice_data=lambda b, m: f"{b}/{m}", rows={"given": 1})
    assert [s["cd"] for s in seen] == ["a/x", "a/y", "z/m"] and [s["n"] for s in seen] == [1, 1, 1]
    assert seen[0]["rows"] == {"given": 1} and seen[0]["seed"] == 0


def test_a_social_proof_parameter_pushed_to_its_bound_is_flagged_and_the_fit_reports_n_and_its_likelihood():
    from crossprofile_lib.stats.socialproof import BOUNDS, fit
    rng = np.random.default_rng(0)
    Xp = np.zeros((20, 3, 4))
    Xp[:, :, 0] = rng.integers(-1, 2, size=(20, 3))
    Xp[:, 0, 0] = Xp[:, 1:, 0].max(axis=1) + 1          # the chosen option has the best own evidence ...
    Xp[:, :, 1] = rng.integers(0, 3, size=(20, 3))
    Xp[:, 0, 1] = Xp[:, :, 1].min(axis=1) - 1           # ... and the least social support: s runs to its lower bound
    r = fit(Xp, np.full(20, 2.0))
    assert r["theta"][0] == pytest.approx(BOUNDS[0][0]) and r["at_bound"] == [True, False, False]
    assert r["n"] == 40.0 and r["converged"] is True
    assert r["log_likelihood"] == pytest.approx(_ll_oracle(r["theta"], Xp, np.full(20, 2.0)), abs=1e-9)
    data, _ = _pattern_choices(60)
    Xc, w = _chosen_first(data), np.ones(len(data))
    free = fit(Xc, w)
    assert free["at_bound"] == [False, False, False] and free["n"] == 120.0     # each decision twice
    assert free["log_likelihood"] == pytest.approx(_ll_oracle(free["theta"], Xc, w), rel=1e-12)
    one = fit(Xc, w, starts=((0.0, 0.0, 1.0),))
    assert one["theta"] == pytest.approx(free["theta"], abs=1e-3)


def test_the_mixed_fit_reports_its_terms_with_z_p_and_holm_adjusted_policy_p_values():
    from scipy.stats import norm
    from statsmodels.stats.multitest import multipletests
    df = _synthetic(T=6, n=24)              # 6 templates x 4 policies x 6 rows
    r = mixed_logit(df, "B4")
    assert r["method"] == "BinomialBayesMixedGLM.fit_vb (random intercept per template)"
    assert r["formula"] == "y ~ net_lead + irrelevant_tone + C(policy, Treatment('B4'))"
    assert (r["reference_policy"], r["n"], r["n_templates"], r["warnings"]) == ("B4", 144, 6, [])
    assert 0 < r["template_sd"] < 5
    t = r["terms"]
    assert list(t.columns) == ["term", "coef", "sd", "z", "p", "p_holm"]
    assert t["term"].tolist() == ["Intercept", "policy[M1]", "policy[R1]", "policy[Random]", "net_lead",
                                  "irrelevant_tone"]
    assert np.allclose(t["z"], t["coef"] / t["sd"]) and np.allclose(t["p"], 2 * norm.sf(np.abs(t["z"])))
    pol = t["term"].str.startswith("policy[")
    assert t.loc[~pol, "p_holm"].isna().all()
    assert np.allclose(t.loc[pol, "p_holm"], multipletests(t.loc[pol, "p"], method="holm")[1])
    assert r["policy_significant"] is bool((t.loc[pol, "p_holm"] < 0.05).any())
    one = mixed_logit(df.assign(policy="R1"))
    assert one["policy_significant"] is None and one["terms"]["p_holm"].isna().all()
    assert one["formula"] == "y ~ net_lead + irrelevant_tone"
    strong = _synthetic(T=6, n=60, policy_effect=-3.0)
    s = mixed_logit(strong)
    assert s["policy_significant"] is True
    assert s["terms"].set_index("term").loc["policy[B4]", "p_holm"] < 0.05


def test_the_likelihood_ratio_test_is_twice_the_fixed_effects_log_likelihood_gain_of_the_policy_terms():
    from scipy.stats import chi2
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM
    df = _synthetic(T=10, n=32, policy_effect=-1.0)       # 10 templates x 4 policies x 8 rows, none flat
    r = lr_test(df, "M1")
    d = df.assign(y=df["correct"].astype(float))
    full = "y ~ net_lead + irrelevant_tone + C(policy, Treatment('M1')) + C(template_id)"
    reduced = "y ~ net_lead + irrelevant_tone + C(template_id)"
    gain = GLM.from_formula(full, data=d, family=Binomial()).fit().llf - \
        GLM.from_formula(reduced, data=d, family=Binomial()).fit().llf
    assert r["method"] == LR_METHOD and r["formula"] == f"{full} against {reduced}"
    assert (r["reference_policy"], r["n"], r["n_templates"], r["flat_templates"]) == ("M1", 320, 10, 0)
    assert r["lr"]["df"] == 3 and r["lr"]["chi2"] == pytest.approx(2 * gain, rel=1e-9)
    assert r["lr"]["p"] == pytest.approx(chi2.sf(2 * gain, 3), rel=1e-9)
    assert r["policy_significant"] is bool(r["lr"]["p"] < 0.05) and r["terms"].empty and r["warnings"] == []


def test_the_fixed_effects_fit_reports_statsmodels_cluster_robust_terms_and_the_joint_wald_test_of_policy():
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM
    df = _synthetic(T=10, n=32, policy_effect=-1.0)
    r = fixed_effects_logit(df, "M1")
    d = df.assign(y=df["correct"].astype(float))
    formula = "y ~ net_lead + irrelevant_tone + C(policy, Treatment('M1')) + C(template_id)"
    want = GLM.from_formula(formula, data=d, family=Binomial()).fit(
        cov_type="cluster", cov_kwds={"groups": pd.factorize(d["template_id"], sort=True)[0]})
    assert r["method"] == FIXED_METHOD and r["formula"] == formula and r["reference_policy"] == "M1"
    assert (r["n"], r["n_templates"], r["flat_templates"], r["warnings"]) == (320, 10, 0, [])
    t = r["terms"].set_index("term")
    assert list(t.index) == ["Intercept", "policy[B4]", "policy[R1]", "policy[Random]", "net_lead", "irrelevant_tone"]
    names = {"policy[B4]": "C(policy, Treatment('M1'))[T.B4]", "net_lead": "net_lead", "Intercept": "Intercept"}
    for term, raw in names.items():
        assert t.loc[term, "coef"] == pytest.approx(want.params[raw], rel=1e-6)
        assert t.loc[term, "sd"] == pytest.approx(want.bse[raw], rel=1e-6)
        assert t.loc[term, "p"] == pytest.approx(want.pvalues[raw], rel=1e-6)
    pol = [i for i, n in enumerate(want.params.index) if n.startswith("C(policy")]
    R = np.eye(len(want.params))[pol]
    w = want.wald_test(R, scalar=True)
    assert r["wald"]["df"] == 3 and r["wald"]["chi2"] == pytest.approx(float(np.squeeze(w.statistic)), rel=1e-6)
    assert r["wald"]["p"] == pytest.approx(float(np.squeeze(w.pvalue)), rel=1e-6)
    assert r["policy_significant"] is bool(r["wald"]["p"] < 0.05)


def test_the_gee_fit_reports_statsmodels_exchangeable_gee_terms_and_the_joint_wald_test_of_policy():
    from statsmodels.genmod.cov_struct import Exchangeable
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_estimating_equations import GEE

    from crossprofile_lib.stats.netlead import gee_logit
    df = _synthetic(T=10, n=32, policy_effect=-1.0)
    r = gee_logit(df, "Random")
    d = df.assign(y=df["correct"].astype(float))
    formula = "y ~ net_lead + irrelevant_tone + C(policy, Treatment('Random'))"
    want = GEE.from_formula(formula, groups="template_id", data=d, family=Binomial(), cov_struct=Exchangeable()).fit()
    assert r["formula"] == formula and r["n"] == 320 and r["reference_policy"] == "Random"
    t = r["terms"].set_index("term")
    assert list(t.index) == ["Intercept", "policy[B4]", "policy[M1]", "policy[R1]", "net_lead", "irrelevant_tone"]
    raw = "C(policy, Treatment('Random'))[T.B4]"
    assert t.loc["policy[B4]", "coef"] == pytest.approx(want.params[raw], rel=1e-6)
    assert t.loc["policy[B4]", "sd"] == pytest.approx(want.bse[raw], rel=1e-6)
    assert t.loc["net_lead", "z"] == pytest.approx(want.tvalues["net_lead"], rel=1e-6)
    pol = [i for i, n in enumerate(want.params.index) if n.startswith("C(policy")]
    w = want.wald_test(np.eye(len(want.params))[pol], scalar=True)
    assert r["wald"]["df"] == 3 and r["wald"]["chi2"] == pytest.approx(float(np.squeeze(w.statistic)), rel=1e-6)
    assert r["policy_significant"] is bool(r["wald"]["p"] < 0.05)


def test_the_regressions_share_the_primary_fits_when_nothing_beyond_the_copy_family_is_left_to_test(monkeypatch):
    import crossprofile_lib.stats.netlead as NL
    calls = []

    def stub(name, sig):
        def f(rows, ref, *a):
            calls.append((name, ref, sorted(set(rows["policy"]))))
            return dict(method=name, policy_significant=sig, reference_policy=ref, wald=dict(chi2=1.0, df=1, p=0.5))
        return f
    for name, sig in (("fixed_effects_logit", True), ("lr_test", False), ("ml_logit", None), ("mixed_logit", True),
                      ("gee_logit", True)):
        monkeypatch.setattr(NL, name, stub(name, sig))
    df = _synthetic(T=2, n=8)
    bal = df.iloc[:3].assign(policy="BAL", correct=True)
    fits = regressions_fit(pd.concat([df, bal], ignore_index=True), "Random")
    copy = ["B4", "M1", "R1", "Random"]
    assert calls == [(n, "Random", copy) for n in ("fixed_effects_logit", "lr_test", "ml_logit", "mixed_logit",
                                                    "gee_logit")]
    assert fits["secondary"]["fixed"] is fits["fixed"] and fits["secondary"]["lr"] is fits["lr"]
    fam = fits["families"]
    assert set(fam["primary"]) == {"family", "policies", "reference", "n", "separated", "duplicates", "note"}
    assert fam["primary"]["policies"] == ["R1", "B4", "Random", "M1"] and fam["primary"]["reference"] == "Random"
    assert fam["primary"]["n"] == 16 and fam["secondary"]["n"] == 16
    assert fam["secondary"]["note"] == (
        "no duplicates dropped: the table has no variant, seed, budget_label, memory_sha, decision column; "
        "BAL separated (all correct, 3 of 3): reported apart, not tested; the rows left to test are the primary family's")
    assert fits["policy_significant"] is True
    assert fits["verdict"]["fit"].tolist() == ["fixed", "lr", "ml", "mixed", "gee", "fixed", "lr"]
    assert fits["verdict"]["agrees_with_primary"].tolist() == [True, False, None, True, True, True, False]


def test_newton_from_a_near_start_settles_every_resample_at_its_own_lbfgs_optimum_and_no_iteration_moves_nothing():
    from crossprofile_lib.stats.socialproof import batched_newton, fit, patterns
    data = _choices(n=120, seed=1)
    boot = TemplateBootstrap.draw(sorted(set(data.template)), 4, np.random.default_rng(2))
    Xp, C = patterns(data, boot.units)
    Wp = boot.weights @ C
    start = fit(Xp, C.sum(axis=0))["theta"]
    th, ok = batched_newton(Xp, Wp, start)
    assert ok.tolist() == [True, True, True, True]
    for b in range(4):
        assert th[b] == pytest.approx(fit(Xp, Wp[b])["theta"], abs=1e-4)
    assert len({tuple(np.round(t, 6)) for t in th}) == 4          # each resample its own optimum
    th0, ok0 = batched_newton(Xp, Wp, start, max_iter=0)
    assert np.array_equal(th0, np.tile(start, (4, 1))) and not ok0.any()
    th1, ok1 = batched_newton(Xp, Wp, (0.0, 0.0, 1.0), max_iter=1)
    assert not ok1.any() and not np.array_equal(th1, np.tile((0.0, 0.0, 1.0), (4, 1)))


def test_task_headroom_averages_each_tasks_rows_first_and_skips_tasks_missing_all_or_empty():
    from crossprofile_lib.stats.headroom import task_headroom
    rows = [("t1", "ALL", True, True), ("t1", "ALL", True, False), ("t1", "EMPTY", True, False),   # 50 - 0
            ("t2", "ALL", True, True), ("t2", "EMPTY", True, True),                                # 100 - 100
            ("t3", "ALL", True, True), ("t3", "EMPTY", True, False), ("t3", "EMPTY", True, False),  # 100 - 0
            ("t4", "ALL", True, True)]                                                              # no EMPTY
    h = task_headroom(_decisions(rows), np.random.default_rng(0), 400, level=0.5, min_points=10)
    assert h.estimate == pytest.approx(50.0) and h.n_units == 3 and h.min_points == 10.0
    # resampled task means lie between 0 and 100; the 50% interval is inside the range of the three differences
    assert 0.0 <= h.lo <= h.estimate <= h.hi <= 100.0 and h.hi - h.lo < 100.0
    assert h.passed is _bound_exceeds(h.lo, 10)
    assert task_headroom(_decisions([r for r in rows if r[1] == "ALL"]), np.random.default_rng(0), 10) is None
    assert task_headroom(_decisions(rows).iloc[:0], np.random.default_rng(0), 10) is None


def _bound_exceeds(lo, min_points):
    return round(float(lo), 9) > min_points


def test_the_descriptive_composition_table_defaults_to_the_primary_budget_and_sorts_policies_and_variants_by_name():
    df = pd.DataFrame(dict(policy=["R1", "B4", "R1", "R1"], variant=["SPS", "PSP", "PSP", "PSP"],
                           budget_label=["0.6", "0.6", "0.6", "0.4"], kept_support=[1, 2, 3, 8],
                           kept_decoy=[0, 1, 2, 8], kept_irrelevant=[1, 1, 1, 8], n_kept=[2, 4, 6, 24]))
    t = composition_table(df)
    assert list(t.index) == [("B4", "PSP"), ("R1", "PSP"), ("R1", "SPS")]
    assert t.to_numpy().tolist() == [[2.0, 1.0, 1.0, 4.0], [3.0, 2.0, 1.0, 6.0], [1.0, 0.0, 1.0, 2.0]]
    w = composition_wide(df)
    assert list(w.index) == ["B4", "R1"] and list(w.columns) == ["PSP", "SPS"]
    assert w.loc["B4", "PSP"] == "2.00/1.00/1.00" and w.loc["R1", "SPS"] == "1.00/0.00/1.00" and pd.isna(w.loc["B4", "SPS"])


def test_to_jsonable_turns_frames_into_records_non_finite_numbers_into_none_and_numpy_values_into_python():
    from pathlib import Path

    from crossprofile_lib.stats.analysis import to_jsonable
    x = {1: pd.DataFrame(dict(a=[1, 2], b=[np.nan, 0.5])), "t": (np.int64(3), np.bool_(False), np.float32(1.5)),
         "arr": np.array([[1.0, np.inf]]), "p": Path("d/f.json"), "s": "keep", "none": None, "neg": -np.inf}
    assert to_jsonable(x) == {"1": [{"a": 1, "b": None}, {"a": 2, "b": 0.5}], "t": [3, False, 1.5],
                              "arr": [[1.0, None]], "p": "d/f.json", "s": "keep", "none": None, "neg": None}
    out = to_jsonable({"n": np.int64(3), "f": np.float64(2.0), "b": np.bool_(True)})
    assert [type(v) for v in out.values()] == [int, float, bool]


# --- issue 55, fresh sample 59: a filter's values as the user wrote them, alpha's range, a file's digest -------------

def test_an_empty_filter_names_its_values_as_written_a_bool_column_keeps_ints_a_number_column_keeps_bools():
    from crossprofile_lib.stats.contrasts import row_mask
    df = pd.DataFrame(dict(correct=[False, False], n=[2, 3], policy=["R1", "B4"]))
    assert row_mask(df, {"correct": 1})[1] == "no rows with correct in [1] (present: False)"
    assert row_mask(df, {"n": True})[1] == "no rows with n in [True] (present: 2, 3)"
    assert row_mask(df, {"n": "7"})[1] == "no rows with n in [7.0] (present: 2, 3)"
    assert row_mask(df, {"policy": 5})[1] == "no rows with policy in ['5'] (present: B4, R1)"
    mask, why = row_mask(df, {"policy": "R1", "n": [2.0]})
    assert mask.tolist() == [True, False] and why == ""


@pytest.mark.parametrize("alpha", [0, 1, 1.5, -0.1])
def test_an_alpha_outside_the_open_unit_interval_is_refused_under_the_range_rule(alpha):
    with pytest.raises(PreregError) as e:
        parse_prereg({"families": {"main": {"alpha": alpha}}, "contrasts": [_contrast()]}, "p.yaml")
    assert e.value.field == "families.main.alpha" and e.value.rule == "range"
    assert str(e.value) == "p.yaml: field 'families.main.alpha': range: must lie in (0, 1)"


def test_a_single_files_digest_covers_its_name_and_its_content(tmp_path):
    from crossprofile_lib.stats.cache import files_digest
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one, same, other = tmp_path / "a" / "x.txt", tmp_path / "b" / "x.txt", tmp_path / "a" / "y.txt"
    for f in (one, same, other):
        f.write_text("same bytes")
    assert files_digest([one]) == files_digest([same])          # the folder it lies in is not part of it
    assert files_digest([one]) != files_digest([other])         # its name is
    same.write_text("other bytes")
    assert files_digest([one]) != files_digest([same])


def test_the_social_proof_cache_tells_fits_on_different_resample_draws_of_the_same_templates_apart(tmp_path):
    # the same templates, resample count and level, other draws: a fit on one draw is no answer for the other
    from crossprofile_lib.stats.analysis import social_proof_cached
    from crossprofile_lib.stats.cache import FitCache
    rows, calls, data = _two_rows_and_counted_reasons()
    cache = FitCache(tmp_path)
    first = social_proof_cached(rows, _boot(), 10, data, cache, choice_key="k")
    other = social_proof_cached(rows, TemplateBootstrap(("a", "b"), np.array([[1, 1], [0, 1], [0, 0]])), 10, data,
                                cache, choice_key="k")
    again = social_proof_cached(rows, _boot(), 10, data, cache, choice_key="k")
    assert first == again == dict(skipped="reason 1") and other == dict(skipped="reason 2") and len(calls) == 2


def test_the_bootstrap_sums_leave_out_a_missing_value_given_as_none_and_rows_of_a_negative_cell():
    boot = _boot()
    unit, cell = np.array([0, 0, 1, 1, 1]), np.array([0, 1, 0, 0, -1])
    S, N = boot.sums(unit, cell, [1.0, None, 0.5, 2, 7.0], 2)
    assert S.tolist() == [[1.0, 0.0], [2.5, 0.0]] and N.tolist() == [[1.0, 0.0], [2.0, 0.0]]
    assert S.dtype == float and N.dtype == float


def test_the_regressions_report_each_familys_policies_reference_count_duplicates_and_note(monkeypatch):
    # the fits stubbed: what the family set apart (the duplicates dropped, where they came from) is the rule
    import crossprofile_lib.stats.netlead as NL
    for name in ("fixed_effects_logit", "lr_test", "ml_logit", "mixed_logit", "gee_logit"):
        monkeypatch.setattr(NL, name, lambda r, ref, *a, _n=name: dict(
            method=_n, reference_policy=ref, policy_significant=None, warnings=[], error="stub"))
    rows = [dict(template_id="t1", variant="PSP", seed=0, budget_label="0.6", memory_sha=mem, decision="A",
                 policy=pol, correct=c)
            for pol, mem, c in (("R1", "a", True), ("B4", "a", True), ("R1", "b", False), ("B4", "c", False),
                                ("Random", "d", True), ("Random", "e", False))]
    fam = NL.regressions_fit(pd.DataFrame(rows), "R1")["families"]
    assert set(fam) == {"primary"}
    p = fam["primary"]
    assert (p["family"], p["policies"], p["reference"], p["n"]) == (
        "copy policies (R1, B4, Random, M1)", ["R1", "Random"], "R1", 4)
    assert p["duplicates"] == dict(rule=DUP_RULE, dropped=1, by_policy={"B4": 1}, kept_as={"B4": {"R1": 1}}, note="")
    assert _rows(p["separated"]) == [("B4", 1, 0, 0.0, "all wrong")]
    assert p["note"] == ("1 duplicate decisions dropped (B4: 1); "
                         "B4 separated (all wrong, 0 of 1): reported apart, not tested")


def test_a_refused_fit_without_the_reference_policy_names_the_alphabetically_first_policy_in_its_formula():
    df = _synthetic(pols=("Random", "M1", "B4"), T=3, n=12)
    fe = fixed_effects_logit(df, "R1")
    assert fe["reference_policy"] == "B4"
    assert fe["formula"] == "y ~ net_lead + irrelevant_tone + C(policy, Treatment('B4'))"
    assert fe["error"].startswith("not fitted: 3 template(s); this fit needs at least ")
    one = fixed_effects_logit(_synthetic(pols=("M1",), T=3, n=12), "R1")
    assert one["reference_policy"] == "M1" and one["formula"] == "y ~ net_lead + irrelevant_tone"


def test_the_duplicates_note_lists_policies_in_family_order_not_by_their_counts():
    rows = [dict(template_id="t1", variant="PSP", seed=0, budget_label="0.6", memory_sha=mem, decision="A",
                 policy=pol, correct=c)
            for pol, mem, c in (("R1", "a", True), ("R1", "b", False), ("B4", "a", True), ("B4", "b", False),
                                ("Random", "a", True), ("M1", "c", True), ("M1", "d", False))]
    f = prepare_family(pd.DataFrame(rows), "copy")
    assert f["duplicates"]["by_policy"] == {"B4": 2, "Random": 1}
    assert f["note"] == "3 duplicate decisions dropped (B4: 2, Random: 1)"
    assert f["policies"] == ["R1", "M1"] and f["reference"] == "R1"


def test_the_default_reference_is_r1_exactly_a_policy_spelt_otherwise_is_not_it():
    rows = [dict(template_id="t1", policy=p, correct=c)
            for p in ("r1", "XXR1XX", "B4") for c in (True, False)]
    f = prepare_family(pd.DataFrame(rows), "all")
    assert f["policies"] == ["B4", "XXR1XX", "r1"] and f["reference"] == "B4"
    assert prepare_family(pd.DataFrame(rows), "all", "r1")["reference"] == "r1"


def test_a_fitted_ml_logit_names_its_template_random_intercept_in_the_formula():
    from crossprofile_lib.stats.netlead import ml_logit
    r = ml_logit(_synthetic(T=5, n=4, pols=("R1",)), "R1", n_points=1)
    assert r.get("error") is None and r["n_templates"] == 5 and r["n"] == 20
    assert r["formula"] == "y ~ net_lead + irrelevant_tone + (1 | template)"


def test_of_many_identical_decisions_the_first_row_of_the_earliest_policy_in_table_order_is_kept():
    # 20 rows of one task and memory text: R1 at rows 1, 4, ..., 19 and B4 elsewhere; family order puts R1 first and,
    # within R1, table order decides (a sort that is not stable would keep another R1 row)
    rows = [dict(template_id="t1", variant="PSP", seed=0, budget_label="0.6", memory_sha="a", decision="A",
                 policy="R1" if i % 3 == 1 else "B4", correct=bool(i % 2)) for i in range(20)]
    kept, info = drop_duplicates_of(pd.DataFrame(rows))
    assert list(kept.index) == [1] and kept["correct"].tolist() == [True]
    assert info["dropped"] == 19 and info["kept_as"] == {"R1": {"R1": 6}, "B4": {"R1": 13}}


def test_an_empty_table_with_every_key_column_drops_nothing_and_has_no_note():
    cols = ["template_id", "variant", "seed", "budget_label", "memory_sha", "decision", "policy", "correct"]
    kept, info = drop_duplicates_of(pd.DataFrame(columns=cols))
    assert kept.empty and info == dict(rule=DUP_RULE, dropped=0, by_policy={}, kept_as={}, note="")


def drop_duplicates_of(df):
    from crossprofile_lib.stats.separation import drop_duplicates
    return drop_duplicates(df)


def test_a_family_declared_empty_in_one_file_and_null_in_the_other_is_declared_alike():
    from crossprofile_lib.stats.prereg import merge_extra
    for main_spec, extra_spec in ((None, {}), ({}, None)):
        main_doc = {"families": {"main": main_spec}, "contrasts": [_contrast(id="m1")]}
        out = merge_extra(parse_prereg(main_doc, "main.yaml"), main_doc,
                          {"families": {"main": extra_spec}, "contrasts": [_contrast(id="e1", family="main")]},
                          "e.yaml")
        assert [(c.id, c.family) for c in out.contrasts] == [("m1", None), ("e1", "main")]
        assert (out.families["main"].correction, out.families["main"].alpha) == ("holm", 0.05)


def test_a_social_proof_weight_pushed_to_its_upper_bound_is_flagged_too():
    from crossprofile_lib.stats.socialproof import BOUNDS, fit
    rng = np.random.default_rng(0)
    Xp = np.zeros((20, 3, 4))
    Xp[:, :, 0] = rng.integers(-1, 2, size=(20, 3))
    Xp[:, 0, 0] = Xp[:, 1:, 0].min(axis=1) - 1          # the chosen option has the worst own evidence ...
    Xp[:, :, 1] = rng.integers(0, 3, size=(20, 3))
    Xp[:, 0, 1] = Xp[:, :, 1].max(axis=1) + 1           # ... and the most social support: s runs to its upper bound
    r = fit(Xp, np.full(20, 2.0))
    assert r["theta"][0] == pytest.approx(BOUNDS[0][1]) == 20.0 and r["at_bound"] == [True, False, False]
    assert r["n"] == 40.0 and r["log_likelihood"] == pytest.approx(0.0, abs=1e-6)


def test_group_draws_pools_a_column_into_all_and_with_no_outcome_gives_an_empty_table_of_its_columns():
    from crossprofile_lib.stats.tables import group_draws
    df = pd.DataFrame(dict(template_id=["a", "a", "b", "b"], policy=["R1", "B4", "R1", "B4"],
                           correct=[True, False, True, True]))
    keys, point, draws = group_draws(df, ["policy"], ["correct"], _boot(), pool=["policy"])
    assert keys.to_dict("list") == dict(policy=["B4", "R1", "all"], outcome=["correct"] * 3, n=[2, 2, 4])
    assert point.tolist() == [50.0, 100.0, 75.0]
    # the resamples (a, b), (a, a), (b, b)
    assert draws.tolist() == [[50.0, 100.0, 75.0], [0.0, 100.0, 50.0], [100.0, 100.0, 100.0]]
    keys, point, draws = group_draws(df, ["policy"], [], _boot())
    assert list(keys.columns) == ["policy", "outcome", "n"] and keys.empty
    assert point.shape == (0,) and draws.shape == (3, 0)


def test_a_null_in_a_filter_list_on_a_number_column_matches_nothing_and_is_named_as_written():
    from crossprofile_lib.stats.contrasts import row_mask
    df = pd.DataFrame(dict(n=[2, 3]))
    mask, why = row_mask(df, {"n": [2, None]})
    assert mask.tolist() == [True, False] and why == ""
    assert row_mask(df, {"n": [None]})[1] == "no rows with n in [None] (present: 2, 3)"


def test_a_folders_digest_covers_each_files_path_under_it_and_its_content(tmp_path):
    from crossprofile_lib.stats.cache import files_digest
    one, two = tmp_path / "one", tmp_path / "two"
    (one / "sub1").mkdir(parents=True)
    (two / "sub2").mkdir(parents=True)
    (one / "sub1" / "x.txt").write_text("A")
    (two / "sub2" / "x.txt").write_text("A")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert files_digest([one]) != files_digest([two])          # the same name and bytes under another sub-folder
    assert files_digest([one]) != files_digest([empty])
    before = files_digest([one])
    (one / "sub1" / "x.txt").write_text("B")
    assert files_digest([one]) != before
    (two / "sub2" / "x.txt").write_text("B")
    (two / "sub2").rename(two / "sub1")
    assert files_digest([one]) == files_digest([two])          # the folder's own name is not part of it


# --- issue 55, fresh sample 60: a refusal's message, the prereg's nesting limit, the tables' order, empty reports ---

def test_resample_indices_refuses_a_seed_in_place_of_a_generator_and_says_what_to_pass():
    from crossprofile_lib.stats.bootstrap import resample_indices
    with pytest.raises(TypeError) as e:
        resample_indices(5, 10, 0)
    assert str(e.value) == "rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed))"
    with pytest.raises(ValueError) as e:
        resample_indices(0, 10, np.random.default_rng(0))
    assert str(e.value) == "need at least one unit and one resample (got 0, 10)"
    with pytest.raises(ValueError) as e:
        resample_indices(3, 0, np.random.default_rng(0))
    assert str(e.value) == "need at least one unit and one resample (got 3, 0)"
    idx = resample_indices(3, 4, np.random.default_rng(0))
    assert idx.shape == (4, 3) and idx.min() >= 0 and idx.max() <= 2
    assert resample_indices(1, 1, np.random.default_rng(0)).tolist() == [[0]]      # one unit, one resample: enough
    assert resample_indices(1, 3, np.random.default_rng(0)).tolist() == [[0], [0], [0]]


def _nested(k):
    v = 1.5
    for i in range(k):
        v = {f"k{i}": v}
    return v


def test_a_prereg_file_may_nest_twelve_levels_deep_and_the_thirteenth_is_refused_naming_the_field(tmp_path):
    # root -> contrasts -> contrast -> paper: 3 levels, then 9 mappings in the paper's values make 12
    ok = tmp_path / "ok.yaml"
    ok.write_text(yaml.safe_dump({"contrasts": [{"id": "H", "terms": [{"weight": 1}], "paper": _nested(9)}]}))
    assert load_prereg(ok).contrasts[0].paper == _nested(9)
    deep = tmp_path / "deep.yaml"
    deep.write_text(yaml.safe_dump({"contrasts": [{"id": "H", "terms": [{"weight": 1}], "paper": _nested(10)}]}))
    with pytest.raises(PreregError) as e:
        load_prereg(deep)
    assert str(e.value) == (f"{deep}: field 'contrasts[0].paper.k9.k8.k7.k6.k5.k4.k3.k2.k1': yaml (nesting depth): "
                            "nested more than 12 levels deep (line 13, column 23)")


def test_a_pooled_variant_and_cell_sort_after_their_levels_whatever_their_spelling():
    from crossprofile_lib.stats.tables import means_table
    # 'PSP' < 'all' < 'classic' as strings: the pooled level 'all' still comes last
    df = pd.DataFrame(dict(template_id=["a", "b", "a", "b"], variant=["classic", "classic", "PSP", "PSP"],
                           cell=["mirror", "mirror", "Base", "Base"], correct=[True, True, False, True]))
    t = means_table(df, ["variant"], ["correct"], _boot(), pool=["variant"])
    assert t[["variant", "n", "estimate"]].values.tolist() == [["PSP", 2, 50.0], ["classic", 2, 100.0],
                                                               ["all", 4, 75.0]]
    t = means_table(df, ["cell"], ["correct"], _boot(), pool=["cell"])
    assert t[["cell", "n", "estimate"]].values.tolist() == [["Base", 2, 50.0], ["mirror", 2, 100.0],
                                                            ["all", 4, 75.0]]


def test_a_fixed_effects_fits_terms_table_has_only_its_five_columns_numbered_from_zero():
    fe = fixed_effects_logit(_synthetic(T=12, seed=3))
    t = fe["terms"]
    assert list(t.columns) == ["term", "coef", "sd", "z", "p"]
    assert t.index.tolist() == list(range(len(t)))
    assert t["term"].tolist() == ["Intercept", "policy[B4]", "policy[M1]", "policy[Random]", "net_lead",
                                  "irrelevant_tone"]


def test_a_verdict_with_no_separated_level_shows_an_empty_separated_table():
    verdict = pd.DataFrame(dict(family=["copy"], fit=["fixed"], role=["primary"], test=["w"], statistic=[2.0],
                                df=[3.0], p=[0.2], policy_significant=[False]))
    analysis = dict(verdict=verdict, families=dict(primary=dict(family="copy", separated=pd.DataFrame(), note=""),
                                                   secondary=dict(family="all", note="few rows")))
    t, s, notes = verdict_display(analysis)
    assert _rows(t) == [("copy", "fixed", "primary", "w", 2.0, 3.0, "0.200", "not significant")]
    assert s.empty and list(s.columns) == [] and notes == ["all: few rows"]
    # an analysis without families (no regressions' families ran) shows the verdicts alone
    t, s, notes = verdict_display(dict(verdict=verdict))
    assert _rows(t) == [("copy", "fixed", "primary", "w", 2.0, 3.0, "0.200", "not significant")]
    assert s.empty and notes == []


def test_a_social_proof_fit_of_no_decisions_reports_zero_decisions_and_zero_resamples():
    from crossprofile_lib.stats.socialproof import ChoiceData, fit_social_proof
    boot = TemplateBootstrap.draw(["t0", "t1"], 5, np.random.default_rng(0))
    empty = fit_social_proof(ChoiceData(np.zeros((0, 3, 4)), np.zeros(0, int), np.array([], dtype=str), np.ones(0)),
                             boot, 5)
    assert {k: v for k, v in empty.items() if k != "table"} == dict(n_decisions=0, resamples=0, deterministic=False,
                                                                    note="no decisions to fit")
    assert empty["table"].empty


# --- issue 55: a model's statistics, whole ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def _ledger_rows(dev_templates):
    from crossprofile_lib.backends.ledger import ReferenceDecider
    from crossprofile_lib.run.runner import RunConfig, run_grid
    cfg = RunConfig(templates=["templates/dev"], seeds=(0,), budgets=("0.6",), policies=("R1", "ALL", "EMPTY"))
    return run_grid(cfg, backend=ReferenceDecider(), templates=dev_templates[:3])


def test_a_models_statistics_name_the_run_its_resamples_and_the_reference_deciders_note(_ledger_rows):
    from crossprofile_lib.stats.analysis import analyse_model
    m = analyse_model(_ledger_rows, load_prereg(), n_resamples=50, regressions=False, fit_resamples=0)
    assert list(m) == ["backend", "model", "decision_mode", "tokenizer", "n_decisions", "n_templates", "resamples",
                       "level", "prereg", "note", "headroom", "analysis_set", "failed_calls", "status",
                       "status_reasons", "status_label", "min_templates_confirmatory", "contrasts", "accuracy", "cells",
                       "composition", "relevance", "label_effects", "support_shared_minus_private", "net_lead",
                       "social_proof"]
    # 3 templates x 3 policies x 8 rows each (one seed, one budget)
    assert {k: m[k] for k in ("backend", "model", "decision_mode", "tokenizer", "n_decisions", "n_templates",
                              "resamples", "level", "prereg", "note", "min_templates_confirmatory")} == dict(
        backend="ledger", model="reference-decider(sp=0,irr=0,beta=inf)", decision_mode="ledger",
        tokenizer="offline-bpe-approx-v1", n_decisions=72, n_templates=3, resamples=50, level=0.95,
        prereg=str(DEFAULT_PREREG_PATH),
        note="reference decider (a normative evidence counter), not a language model", min_templates_confirmatory=10)
    h = m["headroom"]
    assert h["min_points"] == 15.0 and h["n_units"] == 3 and h["passed"] is True
    assert h["estimate"] == pytest.approx(100 - 500 / 24)     # ALL always right, EMPTY right in 5 of its 24 rows
    # the cell and composition tables carry their pooled rows
    assert "classic (pooled)" in set(m["cells"]["cell"])
    assert set(m["composition"]["cell"]) == {"classic", "mirror", "other", "all", "classic (pooled)", "mirror (pooled)"}
    assert m["contrasts"]["id"].tolist()[:1] == [load_prereg().contrasts[0].id] and len(m["contrasts"]) == 9
    assert m["net_lead"]["where"] == {"selection": "budget", "label_format": "full", "budget_label": "0.6"}
    assert m["net_lead"]["n"] == 24


def test_a_models_statistics_follow_the_prereg_settings_the_seed_and_another_backend(_ledger_rows):
    from crossprofile_lib.stats.analysis import analyse_model
    doc = {"settings": {"headroom_min_points": 90}, "contrasts": [{"id": "H", "terms": [{"weight": 1}]}]}
    m = analyse_model(_ledger_rows, parse_prereg(doc, "p.yaml"), n_resamples=20, regressions=False,
                      fit_resamples=0)
    assert m["headroom"]["min_points"] == 90.0 and m["headroom"]["passed"] is False and m["prereg"] == "p.yaml"
    assert m["status"] == "exploratory" and m["resamples"] == 20 and m["contrasts"]["id"].tolist() == ["H"]
    other = _ledger_rows.iloc[:24].assign(backend="openai").drop(columns=["decision_mode"])
    o = analyse_model(other, load_prereg(), n_resamples=5, regressions=False, fit_resamples=0)
    assert o["backend"] == "openai" and o["decision_mode"] == "" and "note" not in o
    # the resamples are drawn from the seed: the same seed, the same intervals; another seed, others
    a, b, c = (analyse_model(_ledger_rows, load_prereg(), seed=s, n_resamples=30, regressions=False, fit_resamples=0)
               for s in (4, 4, 5))
    assert (a["headroom"]["lo"], a["headroom"]["hi"]) == (b["headroom"]["lo"], b["headroom"]["hi"])
    assert a["accuracy"]["lo"].tolist() != c["accuracy"]["lo"].tolist()


def test_a_social_proof_fit_is_skipped_only_at_zero_requested_resamples_and_otherwise_reports_why_no_data(
        _ledger_rows):
    from crossprofile_lib.stats.analysis import analyse_model
    one = _ledger_rows[_ledger_rows.template_id == _ledger_rows.template_id.iloc[0]]     # one template: quicker
    for n in (None, 1, 5):
        m = analyse_model(one, load_prereg(), n_resamples=5, regressions=False, fit_resamples=n,
                          choice_data="no choice data: a test")
        assert m["social_proof"] == {"skipped": "no choice data: a test"}
    m = analyse_model(one, load_prereg(), n_resamples=5, regressions=False, fit_resamples=1)
    assert m["social_proof"] == {"skipped": "no rebuilt choice data handed in"}
    m = analyse_model(one, load_prereg(), n_resamples=5, regressions=False, fit_resamples=-1)
    assert m["social_proof"] == {"skipped": "not requested (--fit-resamples 0)"}


def test_an_extra_file_may_name_a_family_only_the_main_file_declares_and_redeclare_one_alike():
    from crossprofile_lib.stats.prereg import merge_extra
    main_doc = {"families": {"main": {"alpha": 0.1}, "bare": None}, "contrasts": [_contrast(id="m1")]}
    base = parse_prereg(main_doc, "main.yaml")
    out = merge_extra(base, main_doc, {"contrasts": [_contrast(id="e1", family="main")]}, "x.yaml")
    assert [(c.id, c.family) for c in out.contrasts] == [("m1", None), ("e1", "main")]
    assert sorted(out.families) == ["bare", "main"] and out.families["main"].alpha == 0.1
    # a family declared empty (null) in one file and {} in the other is declared alike; so is an equal mapping
    alike = merge_extra(base, main_doc, {"families": {"bare": {}, "main": {"alpha": 0.1}},
                                         "contrasts": [_contrast(id="e2", family="bare")]}, "y.yaml")
    assert (alike.families["bare"].correction, alike.families["bare"].alpha) == ("holm", 0.05)
    assert alike.source == "main.yaml + y.yaml" and alike.contrasts[1].family == "bare"
    with pytest.raises(PreregError) as e:
        merge_extra(base, main_doc, {"families": {"bare": {"correction": "none"}},
                                     "contrasts": [_contrast(id="e3")]}, "z.yaml")
    assert str(e.value) == "z.yaml: field 'families.bare': unique: family 'bare' is declared differently in main.yaml"
    # a family new in the extra file is added to the families corrected together
    # (and its contrasts may still name the main file's families)
    new = merge_extra(base, main_doc, {"families": {"own": {"correction": "none"}},
                                       "contrasts": [_contrast(id="e4", family="own"),
                                                     _contrast(id="e5", family="main")]}, "w.yaml")
    assert sorted(new.families) == ["bare", "main", "own"] and new.families["own"].correction == "none"
    assert [(c.id, c.family) for c in new.contrasts] == [("m1", None), ("e4", "own"), ("e5", "main")]


def test_a_contrast_lists_every_term_without_rows_and_an_uncorrected_p_equal_to_alpha_is_not_rejected():
    from crossprofile_lib.stats.contrasts import evaluate_contrasts
    df = pd.DataFrame(dict(tpl=["a", "a", "b", "b"], policy=["R1", "B4", "R1", "B4"],
                           correct=[True, False, True, True]))
    pre = parse_prereg({"families": {"side": {"correction": "none", "alpha": 0.5}}, "contrasts": [
        {"id": "two", "terms": [{"weight": 1, "where": {"policy": "M1"}}, {"weight": -1, "where": {"policy": "X"}}]},
        {"id": "half", "terms": [{"weight": 1, "where": {"policy": "R1"}}, {"weight": 1, "where": {"policy": "Y"}}]},
        # R1 is right in every resample: p = 2 (0 + 1) / (3 + 1) = 0.5, exactly the family's alpha: not rejected
        {"id": "edge", "family": "side", "terms": [{"weight": 1, "where": {"policy": "R1"}}]}]}, "p.yaml")
    out = evaluate_contrasts(df, pre, _boot(), template_col="tpl").set_index("id")
    assert out.loc["two", "reason"] == ("term 0: no rows with policy in ['M1'] (present: B4, R1); "
                                        "term 1: no rows with policy in ['X'] (present: B4, R1)")
    assert out.loc["half", "reason"] == "term 1: no rows with policy in ['Y'] (present: B4, R1)"
    assert out.loc["two", "n_rows"] == 0 and out.loc["half", "n_rows"] == 0 and out.loc["edge", "n_rows"] == 2
    assert not out.loc["two", "estimable"] and not out.loc["half", "estimable"] and np.isnan(out.loc["half", "p"])
    e = out.loc["edge"]
    assert (e["estimate"], e["p"], e["p_adjusted"], e["reject"], e["correction"], e["alpha"]) == \
        (100.0, 0.5, 0.5, False, "none", 0.5)


def test_a_prereg_without_a_path_is_named_prereg_and_a_bad_paper_reference_carries_the_figures_files_message():
    from crossprofile_lib.paper_figures import PAPER_FIGURES_PATH
    assert parse_prereg({"contrasts": [_contrast()]}).source == "<prereg>"
    with pytest.raises(PreregError) as e:
        parse_prereg({"contrasts": [_contrast(id="a"), _contrast(id="a")]})
    assert str(e.value) == "<prereg>: field 'contrasts[1].id': unique: id 'a' is used twice"
    with pytest.raises(PreregError) as e:
        parse_prereg({"contrasts": [_contrast(paper="no-such-figure/item")]}, "p.yaml")
    assert str(e.value) == (f"p.yaml: field 'contrasts[0].paper': paper reference: {PAPER_FIGURES_PATH}: no paper "
                            "figure 'no-such-figure/item' (a reference is '<figure id>/<item label>')")
    assert (e.value.path, e.value.field, e.value.rule) == ("p.yaml", "contrasts[0].paper", "paper reference")


def test_the_social_proof_table_takes_each_parameters_interval_p_and_bound_count_from_its_own_resamples(monkeypatch):
    import crossprofile_lib.stats.socialproof as SP
    # four resamples whose refits are set by hand: s at its upper (20) and lower (-0.3) bound once each, w at its
    # upper bound (5) once, beta never at a bound
    th = np.array([[20.0, -1.0, 2.0], [-0.3, -0.5, 2.0], [1.0, 2.0, 3.0], [2.0, 5.0, 4.0]])
    monkeypatch.setattr(SP, "batched_newton", lambda Xp, Wp, theta0: (th[:len(Wp)].copy(), np.ones(len(Wp), bool)))
    data, _ = _pattern_choices()
    boot = TemplateBootstrap.draw(sorted(set(data.template)), 4, np.random.default_rng(0))
    r = SP.fit_social_proof(data, boot, 4)
    t = r["table"]
    assert r["resamples"] == 4 and r["refit_resamples"] == 0
    assert t["resamples_at_bound"].tolist() == [2, 1, 0]
    # 95% linear percentiles of four values: 7.5% and 92.5% of the way between the outer pairs
    assert t["lo"].tolist() == pytest.approx([-0.3 + 0.075 * 1.3, -1.0 + 0.075 * 0.5, 2.0])
    assert t["hi"].tolist() == pytest.approx([2.0 + 0.925 * 18.0, 2.0 + 0.925 * 3.0, 3.0 + 0.925 * 1.0])
    # p of s: one of four at or below 0 -> 2 (1 + 1) / 5; of w: two on each side -> 2 (2 + 1) / 5, capped at 1;
    # beta is not tested (its p would be 2 / 5)
    assert t["p"].iloc[:2].tolist() == pytest.approx([0.8, 1.0]) and np.isnan(t["p"].iloc[2])


def test_the_likelihood_ratio_test_of_two_policies_has_one_degree_of_freedom_and_reports_a_gain_below_one():
    from scipy.stats import chi2
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM
    df = _synthetic(seed=1, T=10, n=32, pols=("R1", "B4"))    # no policy effect: a small gain
    r = lr_test(df)
    d = df.assign(y=df["correct"].astype(float))
    gain = GLM.from_formula("y ~ net_lead + irrelevant_tone + C(policy, Treatment('R1')) + C(template_id)", data=d,
                            family=Binomial()).fit().llf - \
        GLM.from_formula("y ~ net_lead + irrelevant_tone + C(template_id)", data=d, family=Binomial()).fit().llf
    assert 0 < 2 * gain < 1
    assert r["lr"]["df"] == 1 and r["lr"]["chi2"] == pytest.approx(2 * gain, rel=1e-9)
    assert r["lr"]["p"] == pytest.approx(chi2.sf(2 * gain, 1), rel=1e-9) and r["policy_significant"] is False


def test_a_cached_regression_fit_is_keyed_by_its_rows_and_its_reference(_ledger_rows, tmp_path, monkeypatch):
    import crossprofile_lib.stats.analysis as A
    from crossprofile_lib.stats.cache import FitCache
    fits = []
    monkeypatch.setattr(A, "regressions_fit", lambda d, ref: fits.append((len(d), ref)) or dict(fit=[len(d), ref]))

    def three_fits(d, boot, where, regressions, fit):
        half = d.iloc[: len(d) // 2]
        return [fit(d, "R1"), fit(half, "R1"), fit(d, "B4")]
    monkeypatch.setattr(A, "net_lead_analysis", three_fits)
    cache = FitCache(tmp_path)
    m = A.analyse_model(_ledger_rows, load_prereg(), n_resamples=10, fit_resamples=0, cache=cache)
    assert m["net_lead"] == [{"fit": [72, "R1"]}, {"fit": [36, "R1"]}, {"fit": [72, "B4"]}]
    assert fits == [(72, "R1"), (36, "R1"), (72, "B4")]
    again = A.analyse_model(_ledger_rows, load_prereg(), n_resamples=10, fit_resamples=0, cache=cache)
    assert again["net_lead"] == m["net_lead"] and len(fits) == 3        # all three read back, none refitted


def test_the_social_proof_cache_tells_fits_of_other_rows_template_names_or_interval_level_apart(tmp_path):
    from crossprofile_lib.stats.analysis import social_proof_cached
    from crossprofile_lib.stats.cache import FitCache
    rows, calls, data = _two_rows_and_counted_reasons()
    cache = FitCache(tmp_path)
    idx = np.array([[0, 1], [0, 0], [1, 1]])
    first = social_proof_cached(rows, TemplateBootstrap(("a", "b"), idx), 10, data, cache, choice_key="k")
    other_rows = social_proof_cached(rows.assign(correct=[True, True]), TemplateBootstrap(("a", "b"), idx), 10, data,
                                     cache, choice_key="k")
    other_names = social_proof_cached(rows, TemplateBootstrap(("a", "c"), idx), 10, data, cache, choice_key="k")
    other_level = social_proof_cached(rows, TemplateBootstrap(("a", "b"), idx, 0.9), 10, data, cache, choice_key="k")
    again = social_proof_cached(rows, TemplateBootstrap(("a", "b"), idx), 10, data, cache, choice_key="k")
    assert [first, other_rows, other_names, other_level, again] == [
        dict(skipped="reason 1"), dict(skipped="reason 2"), dict(skipped="reason 3"), dict(skipped="reason 4"),
        dict(skipped="reason 1")]
    assert len(calls) == 4


def test_a_models_statistics_hand_the_prereg_rows_and_the_callers_options_to_the_regressions_and_the_fit(
        _ledger_rows, monkeypatch):
    import crossprofile_lib.stats.analysis as A
    from crossprofile_lib.stats.cache import FitCache
    seen = {}
    monkeypatch.setattr(A, "net_lead_analysis", lambda d, boot, where, regressions, fit: seen.update(
        net=(len(d), boot.n_resamples, where, regressions)) or "net")
    monkeypatch.setattr(A, "social_proof_cached", lambda rows, boot, n, cd, cache, key: seen.update(
        sp=(len(rows), sorted(set(rows["policy"])), boot.n_resamples, n, cd, cache, key)) or "sp")
    doc = {"settings": {"net_lead_where": {"policy": "ALL"}, "social_proof_where": {"policy": ["R1", "EMPTY"]}},
           "contrasts": [{"id": "H", "terms": [{"weight": 1}]}]}
    pre = parse_prereg(doc, "p.yaml")
    m = A.analyse_model(_ledger_rows, pre, n_resamples=7)          # the defaults: regressions, 1000 fit resamples
    assert (m["net_lead"], m["social_proof"]) == ("net", "sp")
    assert seen["net"] == (72, 7, {"policy": "ALL"}, True)
    assert seen["sp"][:5] == (48, ["EMPTY", "R1"], 7, 1000, None) and seen["sp"][6] == ""
    assert isinstance(seen["sp"][5], FitCache)
    cache = FitCache(None)
    A.analyse_model(_ledger_rows, pre, n_resamples=5, regressions=False, fit_resamples=3, choice_data="why",
                    cache=cache, choice_key="inputs")
    assert seen["net"] == (72, 5, {"policy": "ALL"}, False)
    assert seen["sp"] == (48, ["EMPTY", "R1"], 5, 3, "why", cache, "inputs")


def test_analyse_with_its_defaults_reads_the_bundled_prereg_and_asks_for_regressions_and_1000_fit_resamples(
        monkeypatch):
    import crossprofile_lib.stats.analysis as A
    seen = []
    monkeypatch.setattr(A, "analyse_model", lambda d, prereg, seed, n_resamples, cd, regressions, fit_resamples, rows,
                        cache, choice_key: seen.append((prereg.source, seed, n_resamples, cd, regressions,
                                                        fit_resamples, cache, choice_key)) or {})
    df = pd.DataFrame(dict(backend=["a"], model=["m"], template_id=["f1"], error=[""]))
    assert A.analyse(df, rows={"given": 1}) == [dict(seed=0)]
    assert seen == [(str(DEFAULT_PREREG_PATH), 0, 10_000, None, True, 1000, None, "")]


def test_a_confirmatory_model_is_labelled_without_reasons_and_the_resamples_are_drawn_from_seed_0_by_default(
        _ledger_rows, monkeypatch):
    import crossprofile_lib.stats.analysis as A
    monkeypatch.setattr(A, "run_status", lambda headroom, analysis, n: ("confirmatory", []))
    boots = []
    monkeypatch.setattr(A, "net_lead_analysis", lambda d, boot, where, regressions, fit: boots.append(boot.idx))
    m = A.analyse_model(_ledger_rows, load_prereg(), n_resamples=6, fit_resamples=0)
    assert (m["status"], m["status_reasons"], m["status_label"]) == ("confirmatory", [], "confirmatory")
    A.analyse_model(_ledger_rows, load_prereg(), seed=0, n_resamples=6, fit_resamples=0)
    A.analyse_model(_ledger_rows, load_prereg(), seed=1, n_resamples=6, fit_resamples=0)
    assert boots[0].tolist() == boots[1].tolist() and boots[0].tolist() != boots[2].tolist()


def test_a_model_with_a_single_decision_is_analysed_and_labelled_exploratory_with_every_reason(_ledger_rows):
    from crossprofile_lib.stats.analysis import analyse_model
    m = analyse_model(_ledger_rows.iloc[:1], load_prereg(), n_resamples=5, regressions=False, fit_resamples=0)
    assert (m["backend"], m["n_decisions"], m["n_templates"]) == ("ledger", 1, 1)
    assert m["status_label"] == ("exploratory: the run has no ALL and EMPTY rows to check headroom; "
                                 "too few templates (1 < 10); analysis set: None")
    assert m["headroom"]["n_units"] == 0 and m["headroom"]["passed"] is False


def test_a_term_filtering_on_a_missing_column_is_refused_naming_the_prereg_file_and_the_terms_field():
    from crossprofile_lib.stats.contrasts import evaluate_contrasts
    df = pd.DataFrame(dict(template_id=["a", "b"], policy=["R1", "R1"], correct=[True, False]))
    pre = parse_prereg({"contrasts": [_contrast(id="ok"), {"id": "bad", "terms": [
        {"weight": 1, "where": {"policy": "R1"}}, {"weight": -1, "where": {"colour": "red"}}]}]}, "my.yaml")
    with pytest.raises(PreregError) as e:
        evaluate_contrasts(df, pre, _boot())
    assert str(e.value) == ("my.yaml: field 'contrasts[1].terms[1].where.colour': column: "
                            "the results table has no column 'colour'")


def test_of_several_prereg_errors_the_first_in_the_files_field_order_is_reported_not_the_alphabetical_first():
    # pydantic checks defaults before contrasts; alphabetically 'contrasts' would come first
    with pytest.raises(PreregError) as e:
        parse_prereg({"defaults": {"scale": "x"}, "contrasts": []}, "p.yaml")
    assert str(e.value) == "p.yaml: field 'defaults.scale': type: Input should be a valid number"
    # an unknown key still comes before every other error
    with pytest.raises(PreregError) as e:
        parse_prereg({"defaults": {"scale": "x"}, "zzz": 1, "contrasts": []}, "p.yaml")
    assert (e.value.field, e.value.rule) == ("zzz", "unknown key")


def test_a_family_with_no_estimable_contrast_leaves_the_families_after_it_corrected():
    from crossprofile_lib.stats.contrasts import evaluate_contrasts
    df = pd.DataFrame(dict(template_id=["a", "a", "b", "b"], policy=["R1", "B4", "R1", "B4"],
                           correct=[True, False, True, True]))
    pre = parse_prereg({"families": {"first": None, "second": {"correction": "none", "alpha": 0.6}}, "contrasts": [
        {"id": "none", "family": "first", "terms": [{"weight": 1, "where": {"policy": "M1"}}]},
        {"id": "r1", "family": "second", "terms": [{"weight": 1, "where": {"policy": "R1"}}]}]}, "p.yaml")
    out = evaluate_contrasts(df, pre, _boot()).set_index("id")
    assert (out.loc["none", "correction"], out.loc["none", "reject"]) == ("none", False)
    assert np.isnan(out.loc["none", "p_adjusted"]) and np.isnan(out.loc["none", "alpha"])
    # R1 right in every resample: p = 2 / 4 = 0.5 < 0.6, uncorrected
    r = out.loc["r1"]
    assert (r["p"], r["p_adjusted"], r["reject"], r["correction"], r["alpha"]) == (0.5, 0.5, True, "none", 0.6)


def test_a_prereg_path_that_is_a_folder_or_too_big_is_refused_naming_it_a_prereg_file(tmp_path):
    from crossprofile_lib.safety.inputs import PREREG_MAX_BYTES
    with pytest.raises(PreregError) as e:
        load_prereg(tmp_path)
    assert str(e.value) == (f"{tmp_path}: field '<file>': file (not a regular file): a folder; "
                            "a prereg file must be a regular file")
    big = tmp_path / "big.yaml"
    big.write_text("#" * (PREREG_MAX_BYTES + 1))
    with pytest.raises(PreregError) as e:
        load_prereg(big)
    assert str(e.value) == (f"{big}: field '<file>': file (size limit): {PREREG_MAX_BYTES + 1} bytes; "
                            f"a prereg file holds at most {PREREG_MAX_BYTES} bytes")


def test_a_policy_outside_the_tables_order_sorts_after_every_known_policy():
    from crossprofile_lib.stats.tables import means_table
    df = pd.DataFrame(dict(template_id=["a", "b", "a", "b"], policy=["Aaa-custom", "B4", "R1", "Aaa-custom"],
                           correct=[True, False, True, False]))
    t = means_table(df, ["policy"], ["correct"], _boot())
    assert t[["policy", "n", "estimate"]].values.tolist() == [["R1", 1, 100.0], ["B4", 1, 0.0],
                                                              ["Aaa-custom", 2, 50.0]]


def test_support_shared_minus_private_lists_an_all_policy_outside_the_tables_order_after_the_known_ones():
    rows = [("ALL-custom", "a", "shared", True), ("ALL-custom", "a", "private", False),
            ("ALL", "a", "shared", True), ("ALL", "b", "private", True)]
    df = pd.DataFrame(rows, columns=["policy", "template_id", "support_attr", "correct"])
    t = support_shared_minus_private(df, _boot())
    assert t[["policy", "n", "estimate"]].values.tolist() == [["ALL", 1, 0.0], ["ALL-custom", 1, 100.0]]


def test_a_fit_cache_key_does_not_depend_on_the_order_its_parts_were_given_in(tmp_path):
    from crossprofile_lib.stats.cache import FitCache
    c = FitCache(tmp_path)
    a = c.key("fit", {"rows": "abc", "reference": "R1", "level": 0.95})
    assert a == c.key("fit", {"level": 0.95, "reference": "R1", "rows": "abc"})
    assert a != c.key("fit", {"rows": "abc", "reference": "B4", "level": 0.95}) and len(a) == 64


def test_the_ml_fits_full_and_reduced_take_the_same_quadrature_points(monkeypatch):
    from crossprofile_lib.stats import netlead
    seen = []
    real = netlead.ml_fit

    def spy(X, y, groups, n_points=netlead.N_POINTS):
        seen.append((X.shape[1], n_points))
        return real(X, y, groups, n_points)
    monkeypatch.setattr(netlead, "ml_fit", spy)
    r = netlead.ml_logit(_synthetic(T=6), "B4", n_points=7)
    assert r["method"] == "ML random intercept per template, adaptive Gauss-Hermite (7 points)"
    assert [n for _, n in seen] == [7, 7] and seen[0][0] > seen[1][0]       # the reduced fit lacks the policy terms


def test_the_net_lead_analysis_asks_its_regressions_with_r1_as_the_reference_by_default():
    from crossprofile_lib.stats.netlead import net_lead_analysis
    df = _synthetic(T=6)
    asked = []
    out = net_lead_analysis(df, TemplateBootstrap.draw(sorted(set(df.template_id)), 20, np.random.default_rng(0)),
                            fit=lambda rows, reference: asked.append(reference) or {"fitted": True})
    assert asked == ["R1"] and out["fitted"] is True


def test_an_empty_list_in_a_prereg_filter_is_refused_as_matching_nothing():
    import copy
    from pathlib import Path

    from crossprofile_lib.stats.prereg import PreregError, parse_prereg
    doc = copy.deepcopy(yaml.safe_load((Path(__file__).resolve().parents[1] / "prereg.yaml").read_text()))
    doc["contrasts"][0]["terms"][0]["where"] = {"policy": []}
    with pytest.raises(PreregError) as e:
        parse_prereg(doc, "p.yaml")
    assert str(e.value) == "p.yaml: field 'contrasts[0].terms[0].where.policy': value: an empty list matches nothing"
