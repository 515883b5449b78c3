"""Issue 55, the cli wing: ``crossprofile stats``'s text report (``cli.stats.print_report``) read whole, on a result made
by hand (every section with a row or two, numbers chosen to read back), and the wording of each branch: a run that is
confirmatory or not, a headroom passed or failed, empty tables, a social-proof fit skipped or without decisions, the
verdict's three wordings. The analysis itself is the stats wing's (tests/test_wing_stats.py)."""

from __future__ import annotations

import copy
import math

import pandas as pd
import pytest

from crossprofile_lib.cli.stats import print_report

NAN = math.nan
E3 = ["estimate", "lo", "hi"]


def _t(rows, cols):
    return pd.DataFrame(rows, columns=cols)


def hand_res():
    """A stats result made by hand: every section of the report with a row or two, numbers chosen to read back."""
    fit = dict(method="fixed-effects logit, cluster-robust", formula="y ~ net_lead + C(policy)", reference_policy="R1")
    return dict(
        backend="openai", model="m7", note="a model run", n_templates=8, n_decisions=96, tokenizer="tok1",
        resamples=200, seed=3, level=0.9,
        analysis_set=dict(name="evaluation", n_templates=8, rule="held-out templates", rows_dropped=24,
                          development_templates=2),
        failed_calls="2 of 98 rows are failed model calls, dropped",
        headroom=dict(estimate=41.25, lo=30.0, hi=52.5, min_points=10.0, passed=False, status="exploratory"),
        status="exploratory", status_label="exploratory (headroom failed)", prereg="prereg.yaml",
        contrasts=pd.DataFrame([
            dict(id="H1", family="confirmatory", estimable=True, reason="", estimate=12.34, lo=5.0, hi=20.0, p=0.01234,
                 p_adjusted=0.02468, reject=True, paper={"Qwen": "30.1", "Llama": "25"}, title="R1 minus B4"),
            dict(id="H2", family="confirmatory", estimable=False, reason="no B3 rows", estimate=NAN, lo=NAN, hi=NAN,
                 p=NAN, p_adjusted=NAN, reject=False, paper=None, title="B3 minus R1"),
            dict(id="E1", family="", estimable=True, reason="", estimate=-3.0, lo=-6.0, hi=0.5, p=0.00001,
                 p_adjusted=NAN, reject=False, paper={}, title="an exploration")]),
        accuracy=_t([("R1", "0.6", "PSP", 80, 70, 90), ("B4", "0.6", "PSP", 60, 50, 70), ("R1", "0.6", "SPS", 75, 65, 85)],
                    ["policy", "budget_label", "variant"] + E3),
        cells=_t([("R1", "0.6", "correct", "classic", 80, 70, 90), ("R1", "0.6", "chose_decoy", "classic", 10, 5, 15),
                  ("R1", "0.8", "correct", "classic", 1, 1, 1), ("ALL", "none", "correct", "mirror", 90, 85, 95)],
                 ["policy", "budget_label", "outcome", "cell"] + E3),
        composition=_t([("R1", "0.6", "kept_support", "classic", 4.5, 4, 5), ("R1", "0.6", "kept_decoy", "other", 1, 1, 1),
                        ("ALL", "none", "kept_support", "mirror (pooled)", 5, 5, 5)],
                       ["policy", "budget_label", "outcome", "cell"] + E3),
        relevance=_t([("model", "precision", 90, 80, 95), ("model", "recall", 70, 60, 80)],
                     ["relevance_filter", "outcome"] + E3),
        label_effects=_t([("R1:unlabeled", "0.6", "classic", -5, -9, -1)], ["policy", "budget_label", "cell"] + E3),
        support_shared_minus_private=_t([("ALL", 40, 5.0, 1.0, 9.0, 0.03)], ["policy", "n"] + E3 + ["p"]),
        net_lead=dict(
            where={"policy": "R1"}, n=96, nondecreasing=False,
            by_net_lead=_t([(-1, 10, 20, 10, 30), (1, 20, 80, 70, 90)], ["net_lead", "n"] + E3),
            families=dict(primary=dict(family="copy", n=96, reference="R1", note="B3 apart"),
                          secondary=dict(family="all", policies=["ALL", "EMPTY"], n=40, note="the controls",
                                         separated=_t([("policy[EMPTY]", 0.0)], ["level", "accuracy"]))),
            fixed=dict(fit, terms=_t([("Intercept", 0.12345, 0.1, 1.2345, 0.2), ("policy[B4]", -1.5, 0.5, -3.0, 0.0027)],
                                     ["term", "coef", "sd", "z", "p"]),
                       wald=dict(chi2=9.0, df=1, p=0.0027), policy_significant=True, flat_templates=2,
                       warnings=["perfect separation in policy[B4]", "a convergence warning"]),
            lr=dict(fit, method="likelihood ratio", terms=pd.DataFrame(), error="the likelihood-ratio fit failed"),
            ml=dict(fit, method="ML random intercept", terms=pd.DataFrame(), template_sd=0.5, llf=-60.123,
                    lr=dict(chi2=4.2, df=1, p=0.04), wald_test=dict(chi2=3.9, p=0.048), policy_significant=True),
            mixed=dict(fit, method="mixed", terms=pd.DataFrame(), template_sd=0.25, policy_significant=False),
            gee=dict(fit, method="GEE", terms=pd.DataFrame(), lr=dict(chi2=2.0, df=2, p=0.3679), policy_significant=False),
            verdict=_t([("copy", "fixed", "primary", "joint Wald", 9.0, 1, 0.0027, True, True),
                        ("copy", "gee", "robustness", "joint Wald", 2.0, 2, 0.3679, False, False)],
                       ["family", "fit", "role", "test", "statistic", "df", "p", "policy_significant",
                        "agrees_with_primary"]),
            policy_significant=True),
        social_proof=dict(table=_t([("s", 0.4, 0.2, 0.6, 0.01, False), ("beta", 3.0, 2.0, 4.0, 0.00001, True)],
                                   ["parameter"] + E3 + ["p", "at_bound"]),
                          n_decisions=96, n_patterns=40, resamples=10,
                          rebuild=dict(invalid=1, memory_mismatch=0, not_rebuilt=2), note="fit on the copy policies"))


#: the report of :func:`hand_res`, line by line (trailing blanks of pandas' tables dropped), checked by eye against it:
#: the model's note, the 90% level, the analysis set's dropped rows, the FAILED headroom, a confirmatory contrast of an
#: exploratory run, the not-estimable note [1], only budget 0.6 and unbudgeted rows in the cell and composition tables
#: (R1 at 0.8 and the 'other' cell left out), the regressions' five fits, the separated level and the verdict table
REPORT = (
    '== openai / m7  (a model run)',
    ('   8 templates, 96 decisions, tokenizer tok1; template bootstrap, 200 resamples, seed 3, 90%'
     ' percentile intervals'),
    '   analysis set: evaluation (8 templates; held-out templates; 24 rows of 2 development templates dropped)',
    '   notice: 2 of 98 rows are failed model calls, dropped',
    '   headroom: ALL - EMPTY = 41.2 [30.0, 52.5] points (lower bound must exceed 10): FAILED',
    '   results are exploratory (headroom failed)',
    '',
    'Preregistered contrasts (prereg.yaml; p adjusted within family)',
    'id                         family          estimate      p  p_adj reject               paper          title',
    'H1 confirmatory (run exploratory)  12.3 [5.0, 20.0] 0.0123 0.0247    yes Qwen 30.1, Llama 25    R1 minus B4',
    'H2 confirmatory (run exploratory) not estimable [1]                                             B3 minus R1',
    'E1                                 -3.0 [-6.0, 0.5]  <1e-4                                   an exploration',
    '   not estimable:',
    '   [1] H2: no B3 rows',
    "   paper = the paper's reported values (SPEC sections 8, 10), not results of this run",
    '',
    'Accuracy (%) per policy x budget x variant',
    'variant                            PSP                SPS',
    'policy budget_label',
    'R1     0.6           80.0 [70.0, 90.0]  75.0 [65.0, 85.0]',
    'B4     0.6           60.0 [50.0, 70.0]',
    '',
    ('Classic (PSP) and mirror (SPS) cells at budget 0.6 and unbudgeted: accuracy and decoy choice (%);'
     " 'pooled' = PS* / SP* (both irrelevant levels), secondary"),
    ("   mirror = SPS is our reading (the paper does not state the mirror cell's irrelevant level; SPS"
     ' swaps every holder of the classic cell)'),
    'col                   accuracy classic chose decoy classic    accuracy mirror',
    'policy budget_label',
    'R1     0.6           80.0 [70.0, 90.0]    10.0 [5.0, 15.0]',
    'ALL    none                                                 90.0 [85.0, 95.0]',
    '',
    'Kept composition (mean facts kept; retention = kept support / 5) at budget 0.6 and unbudgeted',
    'col                    support classic support mirror (pooled)',
    'policy budget_label',
    'R1     0.6           4.50 [4.00, 5.00]',
    'ALL    none                                  5.00 [5.00, 5.00]',
    '',
    'Relevance filter precision / recall (%) against the roles',
    'outcome                   precision             recall',
    'relevance_filter',
    'model             90.0 [80.0, 95.0]  70.0 [60.0, 80.0]',
    '',
    'Label effects: label control minus labelled policy (points)',
    'col                                  classic',
    'policy       budget_label',
    'R1:unlabeled 0.6           -5.0 [-9.0, -1.0]',
    '',
    'ALL memory: accuracy with support shared minus support private (points)',
    'policy  n       estimate      p',
    '   ALL 40 5.0 [1.0, 9.0] 0.0300',
    '',
    "Accuracy (%) by net evidence lead (rows: {'policy': 'R1'}; 96 decisions); never falls as net lead rises: NO",
    ' net_lead  n          accuracy',
    '       -1 10 20.0 [10.0, 30.0]',
    '        1 20 80.0 [70.0, 90.0]',
    '   Regressions, primary family: copy (96 decisions; reference policy R1); B3 apart',
    '   [primary] fixed-effects logit, cluster-robust: y ~ net_lead + C(policy) (reference policy R1)',
    '      term   coef  sd     z      p',
    ' Intercept 0.1235 0.1 1.234    0.2',
    'policy[B4]   -1.5 0.5    -3 0.0027',
    '   joint Wald test of the policy terms: chi2 = 9.0, df = 1, p = 0.0027; significant: True',
    '   2 template(s) all correct or all wrong: no information under fixed effects, dropped',
    '   note: perfect separation in policy[B4]',
    '   [robustness] likelihood ratio: y ~ net_lead + C(policy) (reference policy R1)',
    '   the likelihood-ratio fit failed',
    "   [paper's model] ML random intercept: y ~ net_lead + C(policy) (reference policy R1)",
    ('   template random-intercept SD 0.500; log-likelihood -60.12; likelihood-ratio test of the policy'
     ' block: chi2 = 4.2, df = 1, p = 0.0400 (joint Wald: chi2 = 3.9, p = 0.0480); significant: True'),
    '   [robustness] mixed: y ~ net_lead + C(policy) (reference policy R1)',
    '   template random-intercept SD 0.250; policy terms significant after Holm: False',
    '   [robustness] GEE: y ~ net_lead + C(policy) (reference policy R1)',
    '   likelihood-ratio test of the policy terms: chi2 = 2.0, df = 2, p = 0.3679; significant: False',
    '   Secondary family: all (ALL, EMPTY tested; 40 decisions); the controls',
    '   separated levels, reported apart (a coefficient there is infinite, so no test is run on it):',
    '        level  accuracy',
    'policy[EMPTY]       0.0',
    ('   Verdict: policy terms stay significant once net lead and irrelevant tone are controlled (the'
     " headline is the primary fit, template fixed effects, family copy); the paper's model (ML random"
     ' intercept) says: significant'),
    'family   fit       role       test  statistic  df      p  policy_significant  agrees_with_primary',
    '  copy fixed    primary joint Wald       9.00   1 0.0027                True                 True',
    '  copy   gee robustness joint Wald       2.00   2 0.3679               False                False',
    '',
    ('Fitted decider parameters (conditional logit; beyond the paper): score = sum polarity * w_f * (1 +'
     ' s*(n-1)), P = softmax(beta * score)'),
    'parameter             estimate      p  at_bound',
    '        s 0.400 [0.200, 0.600] 0.0100     False',
    '     beta 3.000 [2.000, 4.000]  <1e-4      True',
    ('   96 decisions (40 distinct patterns), 10 bootstrap fits; left out: 1 invalid, 0 memories not'
     ' rebuilt identically, 2 not rebuilt'),
    '   note: fit on the copy policies',
    '',
)


def _report(capsys, res, primary="0.6"):
    capsys.readouterr()
    print_report(res, primary)
    return [line.rstrip() for line in capsys.readouterr().out.splitlines()]


def test_the_stats_report_reads_whole(capsys):
    assert _report(capsys, hand_res()) == list(REPORT)


def test_a_confirmatory_run_with_nothing_dropped_says_so_in_its_header(capsys):
    r = hand_res()
    r.update(note="", failed_calls="", status="confirmatory", status_label="confirmatory",
             analysis_set=dict(r["analysis_set"], rows_dropped=0))
    r["headroom"] = dict(r["headroom"], passed=True, min_points=7.5)
    out = _report(capsys, r)
    assert out[:5] == ["== openai / m7",
                       "   8 templates, 96 decisions, tokenizer tok1; template bootstrap, 200 resamples, seed 3, 90% "
                       "percentile intervals",
                       "   analysis set: evaluation (8 templates; held-out templates)",
                       "   headroom: ALL - EMPTY = 41.2 [30.0, 52.5] points (lower bound must exceed 7.5): passed",
                       "   results are confirmatory"]
    assert out[8].startswith("H1 confirmatory  12.3 [5.0, 20.0] 0.0123 0.0247    yes")
    del r["status_label"], r["analysis_set"]
    out = _report(capsys, r)
    assert out[2:4] == ["   headroom: ALL - EMPTY = 41.2 [30.0, 52.5] points (lower bound must exceed 7.5): passed",
                        "   results are exploratory"]          # no label: the headroom's own status


def test_empty_tables_are_named_not_printed(capsys):
    r = hand_res()
    for k in ("relevance", "label_effects", "support_shared_minus_private", "cells", "composition"):
        r[k] = r[k].iloc[0:0]
    out = _report(capsys, r)
    i = out.index("Kept composition (mean facts kept; retention = kept support / 5) at budget 0.6 and unbudgeted")
    assert out[i - 1:i + 12] == [
        "", "Kept composition (mean facts kept; retention = kept support / 5) at budget 0.6 and unbudgeted", "",
        "Relevance filter precision / recall (%) against the roles", "   (no relevance-filter rows)", "",
        "Label effects: label control minus labelled policy (points)", "   (no label-control policies in this run)", "",
        "ALL memory: accuracy with support shared minus support private (points)", "   (no ALL rows)", "",
        "Accuracy (%) by net evidence lead (rows: {'policy': 'R1'}; 96 decisions); never falls as net lead rises: NO"]
    assert out[i - 2].startswith("   mirror = SPS is our reading")       # the empty cell table: no table, no blank


@pytest.mark.parametrize("sig, ml_sig, said", [
    (False, False, "are not significant once net lead and irrelevant tone are controlled (the headline is the primary "
                   "fit, template fixed effects, family copy); the paper's model (ML random intercept) says: not "
                   "significant"),
    (None, None, "could not be tested once net lead and irrelevant tone are controlled (the headline is the primary "
                 "fit, template fixed effects, family copy)")])
def test_the_verdict_line_says_whether_the_policy_terms_stay_significant(capsys, sig, ml_sig, said):
    r = copy.deepcopy(hand_res())
    r["net_lead"]["policy_significant"] = sig
    r["net_lead"]["ml"]["policy_significant"] = ml_sig
    out = _report(capsys, r)
    assert "   Verdict: policy terms " + said in out


def test_the_net_lead_header_for_all_rows_that_never_fall_and_a_primary_family_without_a_note(capsys):
    r = copy.deepcopy(hand_res())
    r["net_lead"].update(where={}, nondecreasing=True)
    r["net_lead"]["families"] = dict(primary=dict(family="copy", n=96, reference="B4"))
    out = _report(capsys, r)
    assert ("Accuracy (%) by net evidence lead (rows: all; 96 decisions); never falls as net lead rises: yes") in out
    assert "   Regressions, primary family: copy (96 decisions; reference policy B4)" in out
    assert not any(line.startswith("   Secondary family") for line in out)


@pytest.mark.parametrize("sp, lines", [
    (dict(skipped="no run header"), ["   skipped: no run header"]),
    (dict(n_decisions=0, note="no copy-policy decisions"), ["   no copy-policy decisions"]),
    (dict(n_decisions=0), ["   no decisions"])])
def test_a_social_proof_fit_skipped_or_without_decisions_says_why(capsys, sp, lines):
    r = hand_res()
    r["social_proof"] = sp
    out = _report(capsys, r)
    i = out.index("Fitted decider parameters (conditional logit; beyond the paper): score = sum polarity * w_f * "
                  "(1 + s*(n-1)), P = softmax(beta * score)")
    assert out[i + 1:] == lines + [""]


def test_a_social_proof_fit_without_rebuild_counts_or_note_ends_at_its_decisions(capsys):
    r = hand_res()
    r["social_proof"] = dict(r["social_proof"], rebuild={}, note="")
    out = _report(capsys, r)
    assert out[-2:] == ["   96 decisions (40 distinct patterns), 10 bootstrap fits", ""]
