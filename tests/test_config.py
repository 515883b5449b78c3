"""One validated configuration (issue 20): the Budget type parsed once, the run / HiddenBench / prereg /
paper-figures models (a docstring per field, errors naming field and rule), the command line building its
configuration through the same models, one capability table, one run-header builder with one redaction
rule, one headroom type, and the cache folder's order."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from pydantic import BaseModel, ValidationError

from crossprofile_lib import config as C
from crossprofile_lib import paths
from crossprofile_lib.backends import provider_class
from crossprofile_lib.backends.base import CAPABILITIES
from crossprofile_lib.backends.ledger import ReferenceDecider
from crossprofile_lib.cli import args as A
from crossprofile_lib.config import Budget, rule_errors
from crossprofile_lib.hiddenbench.common import PolicyPlan
from crossprofile_lib.hiddenbench.config import HBConfig
from crossprofile_lib.hiddenbench.measures import headroom as hb_headroom
from crossprofile_lib.hiddenbench.run import run_hiddenbench
from crossprofile_lib.paper_figures import PaperFiguresError, PaperFiguresFile, load_paper_figures
from crossprofile_lib.policies import NEEDS
from crossprofile_lib.run.config import RunConfig
from crossprofile_lib.run.pipeline import NEED_CAPABILITY, unsupported
from crossprofile_lib.run.runner import run_grid, run_to_dir
from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.stats.headroom import Headroom
from crossprofile_lib.stats.prereg import PreregFile
from crossprofile_lib.stats.tables import headroom as template_headroom

ONE = "templates/dev/dev-hospital-01.yaml"


# --- Budget -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, ratio, fixed, label", [
    ("0.6", 0.6, None, "0.6"), (0.6, 0.6, None, "0.6"), ("0.60", 0.6, None, "0.6"), (" 1 ", 1.0, None, "1"),
    ("128t", None, 128, "128t"), ("t128", None, 128, "128t"), ("1t", None, 1, "1t"),
])
def test_a_budget_is_parsed_once_into_its_canonical_label(text, ratio, fixed, label):
    b = Budget(text)
    assert (b.ratio, b.fixed_tokens, b.label, str(b)) == (ratio, fixed, label, label)
    assert b == label and Budget(b) is b and json.dumps([b]) == f'["{label}"]'
    assert b.tokens(101) == (fixed if fixed is not None else math.floor(ratio * 101))


@pytest.mark.parametrize("text, rule", [
    ("t0", "at least 1 token"), ("0t", "at least 1 token"), ("-5t", "at least 1 token"),
    ("0", "not in (0, 1]"), ("1.5", "not in (0, 1]"), ("nan", "not in (0, 1]"), ("inf", "not in (0, 1]"),
    ("half", "neither a ratio"), (True, "neither a ratio"),
])
def test_the_command_line_and_the_library_refuse_the_same_budgets(text, rule):
    """One parser: ``t0`` was a 0-token budget for the library and an error for the command line."""
    with pytest.raises(ValueError, match=rule.replace("(", r"\(").replace(")", r"\)").replace("]", r"\]")):
        Budget(text)
    if isinstance(text, str):
        with pytest.raises(argparse.ArgumentTypeError, match="budget"):
            A.budget(text)


def test_a_budget_survives_copy_and_pickle_with_its_parsed_fields():
    import copy
    import pickle
    for b in (Budget("t128"), Budget("0.4")):
        for c in (copy.deepcopy(b), pickle.loads(pickle.dumps(b))):
            assert (c, c.ratio, c.fixed_tokens) == (b, b.ratio, b.fixed_tokens) and isinstance(c, Budget)


# --- the models ---------------------------------------------------------------------------------

def _described(cls, seen=None) -> list[str]:
    """Every field of ``cls`` and of the models it nests, without a description."""
    seen = set() if seen is None else seen
    if cls in seen:
        return []
    seen.add(cls)
    fields = C._fields(cls)
    out = [f"{cls.__name__}.{n}" for n, f in fields.items() if not (f.description or "").strip()]
    for f in fields.values():
        for t in _nested_models(f.annotation):
            out += _described(t, seen)
    return out


def _nested_models(tp):
    from typing import get_args
    if isinstance(tp, type) and (issubclass(tp, BaseModel) or hasattr(tp, "__pydantic_fields__")):
        yield tp
    for a in get_args(tp):
        yield from _nested_models(a)


@pytest.mark.parametrize("cls", [RunConfig, HBConfig, PreregFile, PaperFiguresFile])
def test_every_field_has_a_docstring(cls):
    assert C._fields(cls), cls
    assert not _described(cls), _described(cls)


@pytest.mark.parametrize("kw, field, rule", [
    (dict(seeds=[-1]), "seeds[0]", "seed"),
    (dict(seeds=[0, 1, 0]), "seeds", "unique"),
    (dict(budgets=["0.6", "0.60"]), "budgets", "unique"),
    (dict(budgets=["t0"]), "budgets[0]", "budget"),
    (dict(policies=["R1", "NOPE"]), "policies", "policy"),
    (dict(policies=["R1-k0"]), "policies", "policy"),
    (dict(policies=["R1", "R1"]), "policies", "unique"),
    (dict(variants=["PSP", "XYZ"]), "variants", "variant"),
    (dict(n_agents=1), "n_agents", "range"),
    (dict(backend="openai/"), "backend", "backend"),
    (dict(colour="red"), "colour", "unknown key"),
])
def test_a_bad_run_configuration_names_the_field_and_the_rule(kw, field, rule):
    with pytest.raises(ValidationError) as e:
        RunConfig(**kw)
    assert rule_errors(e.value)[0][:2] == (field, rule)


def test_a_run_configuration_is_recorded_as_the_command_line_wrote_it():
    cfg = RunConfig(templates=Path("templates/dev"), seeds=[0], budgets=["0.6", "t128"], policies=["R1"])
    d = dataclasses.asdict(cfg)
    assert d["templates"] == ("templates/dev",) and d["budgets"] == ("0.6", "128t")
    assert json.loads(json.dumps(d))["budgets"] == ["0.6", "128t"]
    assert RunConfig.budgets == ("0.4", "0.6", "0.8", "128t") and RunConfig().budgets[3].fixed_tokens == 128
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seeds = (1,)


@pytest.mark.parametrize("kw, field, rule", [
    (dict(protocols=["controlled", "chat"]), "protocols", "protocol"),
    (dict(ablations=["nope"]), "ablations", "ablation"),
    (dict(batch_tasks=0), "batch_tasks", "range"),
    (dict(limit=0), "limit", "range"),
    (dict(tasks=["1", "1"]), "tasks", "unique"),
])
def test_a_bad_hiddenbench_configuration_names_the_field_and_the_rule(kw, field, rule):
    with pytest.raises(ValidationError) as e:
        HBConfig(**kw)
    assert rule_errors(e.value)[0][:2] == (field, rule)


def test_the_command_line_names_the_option_of_a_field_the_model_refuses(capsys):
    p = argparse.ArgumentParser(prog="crossprofile run")
    with pytest.raises(SystemExit) as e:
        A.build_config(p, RunConfig, {"n_agents": "--agents"}, n_agents=1)
    assert e.value.code == 2 and "argument --agents: Input should be greater than or equal to 2" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        A.build_config(p, HBConfig, {}, batch_tasks=0)
    assert "argument --batch-tasks:" in capsys.readouterr().err
    assert A.build_config(p, RunConfig, {}, seeds=[3]).seeds == (3,)


@pytest.mark.parametrize("figure, field, rule", [
    ({"id": "a", "result": "r", "data": "crossprofile", "items": [{"label": "R1", "unit": "percent", "paper": {"m": 1}}]},
     "figures[0].items[0].unit", "value"),
    ({"id": "a", "result": "r", "data": "crossprofile", "items": [{"label": "R1", "unit": "%", "paper": {}}]},
     "figures[0].items[0].paper", "required"),
    ({"id": "a", "result": "r", "data": "crossprofile", "items": [{"label": "R1", "unit": "%"}]},
     "figures[0].items[0].paper", "required"),
    ({"id": "a", "result": "r", "data": "elsewhere", "items": []}, "figures[0].data", "value"),
    ({"result": "r", "data": "crossprofile", "items": []}, "figures[0].id", "required"),
    ({"id": "a", "result": "r", "data": "crossprofile", "items": [], "colour": 1}, "figures[0].colour", "unknown key"),
])
def test_a_bad_paper_figures_file_names_file_field_and_rule(tmp_path, figure, field, rule):
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump({"figures": [figure]}))
    with pytest.raises(PaperFiguresError) as e:
        load_paper_figures(f)
    assert str(e.value).startswith(f"{f}: field '{field}': {rule}:"), str(e.value)


def test_the_bundled_paper_figures_validate():
    doc = yaml.safe_load(paths.paper_figures_path().read_text())
    PaperFiguresFile.model_validate(doc)
    assert len(load_paper_figures()) == sum(len(f["items"]) for f in doc["figures"])


# --- capabilities -------------------------------------------------------------------------------

def test_one_table_maps_every_need_onto_a_capability():
    assert set(NEED_CAPABILITY) == set(NEEDS)
    assert {r.capability for r in NEED_CAPABILITY.values()} - {None} <= set(CAPABILITIES)


def test_unsupported_is_the_one_answer_for_every_caller():
    pols = ["R1", "R1-rel", "R1-rel-oracle", "BAL", "BAL-oracle", "B3", "REF"]
    ledger, openai = provider_class("ledger"), provider_class("openai")
    # a grid: the reference decider answers relevance and stances from the roles, writes no summary
    assert set(unsupported(pols, ledger)) == {"B3"}
    assert unsupported(pols, ReferenceDecider()) == unsupported(pols, ledger.capabilities) == unsupported(pols, ledger)
    assert unsupported(pols, openai) == {}
    # no roles to fall back on (HiddenBench): model inputs need the model's capability
    assert set(unsupported(pols, ledger, model_inputs=True)) == {"R1-rel", "BAL", "B3"}
    # the command line and HiddenBench's plan ask the same function
    assert A.unsupported_policies("ledger", pols) == unsupported(pols, ledger)
    plan = PolicyPlan.for_backend(pols, ReferenceDecider(), "controlled")
    assert plan.skipped["B3"] == unsupported(["B3"], ledger)["B3"] and "R1-rel" in plan.skipped
    assert "not implemented for HiddenBench" in plan.skipped["BAL-oracle"]
    assert [s.name for s in plan.specs] == ["R1", "R1-rel-oracle", "REF"]


def test_the_runner_refuses_a_policy_its_backend_cannot_run():
    with pytest.raises(ValueError, match="cannot run B3: B3 is a generated summary"):
        run_grid(RunConfig(templates=[ONE], seeds=[0], budgets=["0.6"], policies=["R1", "B3"], variants=["PSP"]))


# --- one header, one redaction rule ------------------------------------------------------------

SECRET = "s3cr3t-VALUE-9f"
SECRET_OPTIONS = {"auth": SECRET, "bearer": SECRET, "credential": SECRET, "api_key": SECRET, "token": SECRET,
                  "password": SECRET, "session_id": SECRET, "x_signature": SECRET, "proxy_url": f"http://u:{SECRET}@h/"}


def test_both_run_headers_mask_the_same_secret_names(tmp_path):
    """run.json masked 10 secret names, hiddenbench_run.json 4: now one rule, one builder."""
    opts = dict(SECRET_OPTIONS, social_proof=0.0)
    cfg = RunConfig(templates=[ONE], seeds=[0], budgets=["0.6"], policies=["R1", "ALL"], variants=["PSP"],
                    backend_options=opts)
    _, run_h = run_to_dir(cfg, tmp_path / "run", backend=ReferenceDecider())
    hb_h = run_hiddenbench(HBConfig(seeds=[0], policies=["R1"], tasks=["1"], backend_options=opts), tmp_path / "hb",
                           backend=ReferenceDecider())
    for h, f in ((run_h, tmp_path / "run" / "run.json"), (hb_h, tmp_path / "hb" / "hiddenbench_run.json")):
        text = f.read_text()
        assert SECRET not in text, f
        got = json.loads(text)["config"]["backend_options"]
        assert got == dict({k: "***" for k in SECRET_OPTIONS}, proxy_url="http://***@h/", social_proof=0.0), f
        for k in ("backend", "model", "decision_mode", "tokenizer", "tokenizer_source", "package_version",
                  "git_commit", "seconds", "created"):
            assert k in h, (f, k)
    assert run_h["config"]["backend_options"] == hb_h["config"]["backend_options"]


# --- one headroom type ---------------------------------------------------------------------------

def test_both_headroom_checks_return_the_one_type_with_one_rule():
    tids = [f"t{i}" for i in range(10)]
    rows = [(p, t, c, True) for t in tids for p, c in (("ALL", True), ("EMPTY", False))]
    df = pd.DataFrame(rows, columns=["policy", "template_id", "correct", "decided"])
    boot = TemplateBootstrap.draw(tids, 200, np.random.default_rng(0))
    a = template_headroom(df, boot)
    b = hb_headroom(df.rename(columns={"template_id": "task_id"}), np.random.default_rng(0), n_resamples=200)
    assert type(a) is type(b) is Headroom
    assert (a.estimate, a.lo, a.passed, a.status, a.n_units) == (100.0, 100.0, True, "confirmatory", 10)
    assert (b.estimate, b.lo, b.passed, b.n_units) == (100.0, 100.0, True, 10)
    assert a["passed"] and a.as_dict()["status"] == "confirmatory" and json.dumps(a.as_dict())
    assert not template_headroom(df, boot, min_points=100.0).passed  # the bound must exceed the threshold
    assert Headroom.of(20.0, 15.0, 25.0, 15.0, 3).status == "exploratory"
    assert Headroom.of(20.0, 15.01, 25.0, 15.0, 3).passed
    none = template_headroom(df[df.policy == "ALL"], boot)
    assert none.estimate is None and not none.passed and "no ALL and EMPTY" in none.reason


# --- the cache folder ---------------------------------------------------------------------------

def test_the_cache_folder_is_the_variable_then_an_existing_legacy_folder_then_the_user_cache(tmp_path, monkeypatch):
    import platformdirs
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(paths.CACHE_ENV, raising=False)
    user = Path(platformdirs.user_cache_dir("crossprofile", appauthor=False))
    assert paths.cache_dir() == user and str(user).startswith(str(tmp_path / "xdg"))
    (tmp_path / ".crossprofile_cache").write_text("a file, not a cache folder")
    assert paths.cache_dir() == user
    (tmp_path / ".crossprofile_cache").unlink()
    (tmp_path / ".crossprofile_cache").mkdir()
    assert paths.cache_dir() == tmp_path / ".crossprofile_cache"
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "mine"))
    assert paths.cache_dir() == tmp_path / "mine"
    monkeypatch.setenv(paths.CACHE_ENV, "")       # empty: as if unset
    assert paths.cache_dir() == tmp_path / ".crossprofile_cache"


def test_a_field_path_drops_pydantic_schema_tags_but_keeps_a_key_that_only_looks_like_one():
    from crossprofile_lib.config import field_path
    assert field_path(("contrasts", 0, "function-after[_check(), str]", "terms", 1, "list[int]", "weight")) == \
        "contrasts[0].terms[1].weight"
    # a user's key named like a tag but without brackets is a key: an unknown key is named, not reported as '<top>'
    assert field_path(("function-x",)) == "function-x"
    assert field_path(("families", "my-union-key", "alpha")) == "families.my-union-key.alpha"
