"""The call count of a grid (crossprofile_lib/run/plan.py) is what a fresh model run sends: one
relevance-filter call per task unit, one B3 summary per unit and budget, one decision call per
distinct decision prompt; and the paper's design is the one the issue names."""

from crossprofile_lib.design import BUDGET_GRID, DEFAULT_POLICIES, VARIANT_NAMES
from crossprofile_lib.run.plan import PAPER_DESIGN, call_plan
from crossprofile_lib.run.runner import RunConfig


def test_counts_follow_the_grid_by_hand():
    cfg = RunConfig(templates=["templates/dev/dev-hospital-01.yaml", "templates/dev/dev-bus-route-01.yaml"],
                    seeds=[0, 1], budgets=["0.4", "0.6", "128t"], variants=["PSP", "SPS"],
                    policies=["R1", "R1-rel", "R1-rel-k7", "B3", "EMPTY", "ALL"])
    plan = call_plan(cfg)
    units = 2 * 2 * 2  # templates x seeds x variants
    assert plan["calls"]["relevance"] == units          # asked once per unit, shared by R1-rel and R1-rel-k7
    assert plan["calls"]["b3"] == units * 3             # one summary per unit and budget
    # rows: budgeted policies (R1, R1-rel, B3) x 3 budgets + unbudgeted (R1-rel-k7, EMPTY, ALL) once
    assert plan["decisions"] == units * (3 * 3 + 3)
    assert plan["calls"]["decision"] == plan["distinct_decision_prompts"] <= plan["decisions"]
    assert plan["calls"]["total"] == sum(v for k, v in plan["calls"].items() if k != "total")


def test_no_model_relevance_or_summary_no_such_calls():
    cfg = RunConfig(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0], budgets=["0.6"],
                    variants=["PSP"], policies=["R1", "R1-rel-oracle", "ALL"])
    plan = call_plan(cfg)
    assert set(plan["calls"]) == {"decision", "total"} and plan["decisions"] == 3


def test_the_paper_design_is_the_full_grid():
    assert list(PAPER_DESIGN.templates) == ["templates/formal"] and list(PAPER_DESIGN.seeds) == [0, 1, 2]
    assert tuple(PAPER_DESIGN.budgets) == BUDGET_GRID == ("0.4", "0.6", "0.8", "128t")
    assert tuple(PAPER_DESIGN.variants) == VARIANT_NAMES and len(VARIANT_NAMES) == 8
    assert tuple(PAPER_DESIGN.policies) == DEFAULT_POLICIES + ("B3",)
