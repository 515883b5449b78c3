"""Rebuild a run's memories and turn its decisions into conditional-logit choice data for
:mod:`crossprofile_lib.stats.socialproof` (``stats/`` never imports the pipeline). A decision is used only when its
rebuilt memory has the row's ``memory_sha`` (B3 summaries and memories from a model's own filter usually do not;
they are left out and counted in ``info``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields
from typing import Optional

import numpy as np
import pandas as pd

from crossprofile_lib.backends.ledger import ReferenceDecider
from crossprofile_lib.policies import parse_policy
from crossprofile_lib.run.runner import RunConfig, build_requests
from crossprofile_lib.stats.cache import files_digest
from crossprofile_lib.stats.netlead import subset
from crossprofile_lib.stats.socialproof import ChoiceData
from crossprofile_lib.task.evidence import decode_features, fact_table, option_features  # noqa: F401  (re-exported)
from crossprofile_lib.task.templates import load_templates
from crossprofile_lib.task.tokenizer import get_tokenizer

KEY = ["template_id", "variant", "seed", "policy", "budget_label"]


def _info(n: int) -> dict:
    """Bookkeeping of a choice-data build: rows seen, used, and left out by reason."""
    return {"decisions": n, "used": 0, "invalid": 0, "not_rebuilt": 0, "memory_mismatch": 0,
            "left_out_by_policy": {}}


def _left_out(info: dict, why: str, policy: str) -> None:
    """Count a row left out for reason ``why``; all but invalid decisions also by policy."""
    info[why] += 1
    if why != "invalid":
        info["left_out_by_policy"][policy] = info["left_out_by_policy"].get(policy, 0) + 1


def _choice_data(X: list, ch: list, tid: list) -> ChoiceData:
    """Stack per-decision ``(K, 4)`` features into :class:`ChoiceData` (one option count only)."""
    if not X:
        return ChoiceData(np.zeros((0, 3, 4)), np.zeros(0, int), np.zeros(0, object), np.zeros(0))
    K = {x.shape[0] for x in X}
    if len(K) > 1:
        raise ValueError(f"decisions have different option counts {sorted(K)}; fit one option count at a time")
    return ChoiceData(np.stack(X), np.array(ch), np.array(tid, dtype=object), np.ones(len(X)))


def choice_data(pairs, df: pd.DataFrame) -> tuple[ChoiceData, dict]:
    """Join rebuilt ``(request, row)`` pairs with the results rows (valid decisions only): a row is used when a pair
    has its :data:`KEY` and the same ``memory_sha``; ``info`` counts the rows left out and why."""
    built = {tuple(row[k] for k in KEY): (req, row.get("memory_sha")) for req, row in pairs}
    X, ch, tid, tables = [], [], [], {}
    info = _info(len(df))
    # plain Python lists: iterating Arrow-backed columns row by row costs more than the rebuild
    keys = list(zip(*(df[c].tolist() for c in KEY)))
    for k, sha, decision, invalid in zip(keys, df["memory_sha"].tolist(), df["decision"].tolist(),
                                         df["invalid"].tolist()):
        req = built[k][0] if k in built else None
        if invalid or not decision:
            why = "invalid"
        elif req is None:
            why = "not_rebuilt"
        elif built[k][1] != sha:
            why = "memory_mismatch"
        else:
            why = None if decision in req.option_order else "not_rebuilt"
        if why:
            _left_out(info, why, k[KEY.index("policy")])
            continue
        tmpl = req.task.template
        if tmpl.id not in tables:
            tables[tmpl.id] = fact_table(tmpl)
        X.append(option_features(req.task, req.memory, req.option_order, tables[tmpl.id]))
        ch.append(req.option_order.index(decision))
        tid.append(k[0])
    info["used"] = len(X)
    return _choice_data(X, ch, tid), info


def rebuild_choice_data(df: pd.DataFrame, config, templates=None) -> tuple[ChoiceData, dict]:
    """The decisions' :class:`ChoiceData` and bookkeeping from the rebuilt memories of a run (``config``: its
    ``run.json`` ``config`` dict or a :class:`RunConfig`; ``templates``: loaded templates or paths, default the
    config's). Generated (B3) policies cannot be rebuilt and are left out."""
    cfg = dict(config) if isinstance(config, dict) else asdict(config)
    known = {f.name for f in fields(RunConfig)}
    cfg = {k: v for k, v in cfg.items() if k in known}
    present = {c: set(df[c].unique().tolist()) for c in ("policy", "variant", "seed")}
    pols = [p for p in cfg.get("policies", ()) if p in present["policy"] and parse_policy(p).selection != "generated"]
    cfg.update(policies=pols, variants=[v for v in cfg.get("variants", ()) if v in present["variant"]],
               seeds=[s for s in cfg.get("seeds", ()) if s in present["seed"]])
    run_cfg = RunConfig(**cfg)
    paths = (run_cfg.templates if templates is None else [templates] if isinstance(templates, (str, bytes))
             else list(templates))
    if paths and isinstance(paths[0], (str, bytes, os.PathLike)):  # paths, not loaded templates
        try:
            templates = load_templates(paths, n_options=run_cfg.n_options)
        except FileNotFoundError as e:
            raise FileNotFoundError(f"cannot rebuild memories: templates {list(paths)} not found ({e}); "
                                    f"pass the template paths the run used") from None
    else:
        templates = paths
    ids = set(df["template_id"].astype(str))
    templates = [t for t in templates if t.id in ids]
    stub = ReferenceDecider(tokenizer=get_tokenizer(run_cfg.tokenizer))
    pairs = list(build_requests(templates, run_cfg, stub)) if pols else []
    data, info = choice_data(pairs, df)
    info["policies_rebuilt"] = pols
    return data, info


def recorded_choice_data(df: pd.DataFrame) -> Optional[tuple[ChoiceData, dict]]:
    """Choice data from the ``option_features`` column the runner records (no rebuild; None for a run written before
    it). The rows a rebuild uses (generated B3 memories left out), plus memories from a model's own relevance filter
    or stances: their features were recorded from the memory the model actually saw."""
    if "option_features" not in df.columns or not len(df):
        return None
    feats = df["option_features"].tolist()
    if any(not isinstance(f, str) or not f for f in feats):
        return None
    info = dict(_info(len(df)), source="option_features recorded at run time")
    X, ch, tid, used_pols = [], [], [], []
    for f, pol, sel, order, decision, invalid, t in zip(
            feats, df["policy"].tolist(), df["selection"].tolist(), df["option_order"].tolist(),
            df["decision"].tolist(), df["invalid"].tolist(), df["template_id"].tolist()):
        order = order.split(",")
        if invalid or not decision or sel == "generated" or decision not in order:
            _left_out(info, "invalid" if invalid or not decision else "not_rebuilt", pol)
            continue
        X.append(f)
        ch.append(order.index(decision))
        tid.append(t)
        used_pols.append(pol)
    info["used"] = len(X)
    info["policies_rebuilt"] = list(dict.fromkeys(used_pols))
    stacked = _decode_all(X)
    if stacked is not None:
        return ChoiceData(stacked, np.array(ch), np.array(tid, dtype=object), np.ones(len(X))), info
    return _choice_data([decode_features(f) for f in X], ch, tid), info


def _decode_all(feats: list) -> Optional[np.ndarray]:
    """:func:`decode_features` of every string at once, ``(n, K, F)`` (the same floats: numpy
    parses the same integer strings), or None where the rows differ in option or feature count
    (the per-row path then raises its error) or there are none."""
    if not feats:
        return None
    separators = {f.translate(_NOT_SEPARATORS) for f in feats}     # e.g. ",,,;,,,;,,,"
    if len(separators) != 1 or len({len(o) for o in separators.pop().split(";")}) != 1:
        return None
    k, n_f = feats[0].count(";") + 1, feats[0].split(";")[0].count(",") + 1
    return np.array(",".join(feats).replace(";", ",").split(","), dtype=float).reshape(len(feats), k, n_f)


#: str.translate table that keeps only the separators ``,`` and ``;``
_NOT_SEPARATORS = {c: None for c in range(128) if chr(c) not in ",;"}


def choice_data_rebuilder(df: pd.DataFrame, config: Optional[dict], templates=None, where: Optional[dict] = None):
    """Choice data for one (backend, model) of ``df``, as :func:`crossprofile_lib.stats.analysis.analyse` takes
    it: ``(backend, model) -> (ChoiceData, info)``, or a reason string where the memories cannot be rebuilt
    (no run header, templates not found); rebuilt only when called (``analyse`` calls it only when its cache
    has no fit). ``where``: the rows to use (prereg.yaml's ``settings.social_proof_where``)."""
    def rebuild(backend: str, model: str):
        d = subset(df[(df["backend"].astype(str) == backend) & (df["model"].astype(str) == model)], where)
        recorded = recorded_choice_data(d)
        if recorded is not None:
            return recorded
        if config is None:
            return "no run header (run.json) to rebuild the memories from"
        try:
            return rebuild_choice_data(d, config, templates)
        except (FileNotFoundError, ValueError) as e:
            return f"cannot rebuild the memories: {e}"
    return rebuild


def rebuild_inputs_key(config: Optional[dict], templates=None) -> str:
    """What a rebuild depends on besides the rows: the run's configuration and the content of
    the template files it reads (a key part of the social-proof fit's cache entry)."""
    paths = templates if templates is not None else (config or {}).get("templates", [])
    paths = [paths] if isinstance(paths, (str, bytes)) else [str(p) for p in paths]
    try:
        files = files_digest(paths)
    except OSError:
        files = "unreadable"
    cfg = {k: v for k, v in (config or {}).items() if k != "templates"}     # the files' content counts, not their path
    return json.dumps({"config": cfg, "files": files}, sort_keys=True, default=str)
