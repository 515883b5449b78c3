"""Properties of the instrument, shown on reference-decider runs over the development
templates: H1 is large and positive, accuracy never falls as the net lead rises, the headroom
check passes, and with a social-proof weight removing labels helps in the classic cell."""

import numpy as np
import pytest

from crossprofile_lib.backends.ledger import ReferenceDecider
from crossprofile_lib.run.runner import RunConfig, run_grid
from crossprofile_lib.stats import tables as T
from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.contrasts import evaluate_contrasts, load_prereg
from crossprofile_lib.stats.netlead import net_lead_analysis


@pytest.fixture(scope="module")
def default_run(dev_templates):
    """The full default grid (every policy, budget, variant, 3 seeds) on the default ledger."""
    df = run_grid(RunConfig(templates=["templates/dev"]), templates=dev_templates)
    boot = TemplateBootstrap.draw(df.template_id.unique(), 2000, np.random.default_rng(0))
    return df, boot


@pytest.fixture(scope="module")
def social_run(dev_templates):
    cfg = RunConfig(templates=["templates/dev"], budgets=("0.6",),
                    policies=("R1", "R1:unlabeled", "B4", "B4:unlabeled", "ALL", "ALL:unlabeled", "ALL:shuffled"))
    df = run_grid(cfg, backend=ReferenceDecider(social_proof=0.5), templates=dev_templates)
    boot = TemplateBootstrap.draw(df.template_id.unique(), 2000, np.random.default_rng(0))
    return df, boot


def test_h1_is_large_and_positive(default_run):
    df, boot = default_run
    c = evaluate_contrasts(df, load_prereg(), boot).set_index("id")
    assert c.loc["H1", "estimate"] > 40 and c.loc["H1", "lo"] > 20 and c.loc["H1", "reject"]
    assert c.loc[["H1", "H2", "H3"], "estimable"].all()
    assert (c.loc[["H1", "H2", "H3"], "correction"] == "holm").all()


def test_accuracy_never_falls_as_net_lead_rises(default_run):
    df, boot = default_run
    for where in ({"selection": "budget", "label_format": "full", "budget_label": "0.6"}, {}):
        r = net_lead_analysis(df, boot, where, regressions=False)
        assert r["nondecreasing"], r["by_net_lead"]
        t = r["by_net_lead"].set_index("net_lead")
        assert t.loc[-2, "estimate"] == 0 and t.loc[4, "estimate"] == 100


def test_headroom_passes_and_fails(default_run):
    df, boot = default_run
    h = T.headroom(df, boot)
    assert h["passed"] and h["status"] == "confirmatory" and h["lo"] > 15
    assert T.headroom(df, boot, min_points=99)["status"] == "exploratory"
    assert T.headroom(df[df.policy != "EMPTY"], boot)["status"] == "exploratory"


def test_tables_cover_every_policy_budget_and_variant(default_run):
    df, boot = default_run
    acc = T.accuracy_table(df, boot)
    combos = df.groupby(["policy", "budget_label"]).ngroups
    assert len(acc) == combos * 9 and (acc.lo <= acc.estimate + 1e-9).all() and (acc.estimate <= acc.hi + 1e-9).all()
    r1 = acc[(acc.policy == "R1") & (acc.budget_label == "0.6") & (acc.variant == "all")].iloc[0]
    assert r1.estimate == pytest.approx(100 * df[(df.policy == "R1") & (df.budget_label == "0.6")].correct.mean())
    cells = T.cell_table(df, boot).set_index(["policy", "budget_label", "cell", "outcome"])
    assert cells.loc[("R1", "0.6", "classic", "correct"), "estimate"] > 90
    assert cells.loc[("B4", "0.6", "classic", "chose_decoy"), "estimate"] > 50
    comp = T.composition_table(df, boot).set_index(["policy", "budget_label", "cell", "outcome"])
    assert comp.loc[("ALL", "none", "all", "kept_support"), "estimate"] == 5
    assert comp.loc[("ALL", "none", "all", "retention"), "estimate"] == 1
    rel = T.relevance_table(df, boot).set_index("outcome")
    assert rel.loc["precision", "estimate"] == 100 and rel.loc["recall", "estimate"] == 100


def test_removing_labels_helps_in_the_classic_cell_with_social_proof(social_run):
    df, boot = social_run
    le = T.label_effects(df, boot).set_index(["policy", "budget_label", "cell"])
    for pol, bud in (("ALL:unlabeled", "none"), ("ALL:shuffled", "none")):
        assert le.loc[(pol, bud, "classic"), "estimate"] > 0 and le.loc[(pol, bud, "classic"), "lo"] > 0
    assert le.loc[("ALL:unlabeled", "none", "classic"), "p"] < 0.05
    ss = T.support_shared_minus_private(df, boot).set_index("policy")
    assert ss.loc["ALL", "estimate"] > 0 and ss.loc["ALL:unlabeled", "estimate"] == 0


def test_label_effects_vanish_without_social_proof(default_run):
    df, boot = default_run
    le = T.label_effects(df, boot)
    assert set(le.policy) >= {"ALL:unlabeled", "ALL:shuffled", "R1:unlabeled", "B4:unlabeled"}
    assert (le.estimate.abs() < 1e-9).all()
