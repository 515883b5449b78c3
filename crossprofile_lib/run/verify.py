"""A results table checked against its run (``DIR/run.json``) before anything analyses it: ``stats``,
``composition`` and the book's ``RUNS=`` imports refuse a table that is not the one the run wrote
(:class:`EditedTable`, exit 2, naming the first bad row and the rule), unless the user passes ``--trust-edited``
(the book: ``TRUST_EDITED=1``), and then every output says the table was analysed unverified.

The rules, in the order checked (each names the row, counted from 0 as in the parquet file):

* ``run header``: there is a ``run.json`` and it is a JSON object whose ``config`` is an object, with a
  ``templates_sha256`` object and a ``rows`` count;
* ``run grid``: each row's ``template_id``, ``variant``, ``seed``, ``policy`` and ``budget_label`` belong to the
  run (``templates_sha256`` and ``config``'s lists; budgets by their labels, ``none`` for unbudgeted policies);
* ``template hashes``: a file with the recorded SHA-256 of every template the table names is found (the run's
  recorded paths, ``--templates``, the bundled templates), so the answer key can be recomputed from it;
* ``decision``: a decision is one of the template's options, or empty;
* ``answer key``: ``correct`` equals (decision == the template's correct option and not invalid), ``chose_decoy``
  equals (decision == its decoy option and not invalid);
* ``value ranges``: ``kept_support``, ``kept_decoy``, ``kept_irrelevant`` between 0 and the template's count of
  facts of that role; ``n_kept`` at least their sum (and at most ``n_claims``); ``|net_lead|`` at most
  ``kept_support + kept_decoy``; ``memory_tokens`` at least 0;
* ``duplicate row``: no (template, variant, seed, policy, budget) decision twice;
* ``row count``: as many rows as ``run.json`` records.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from crossprofile_lib.config import Budget
from crossprofile_lib.paths import file_sha256, templates_dir
from crossprofile_lib.task.templates import parse_template, template_paths

#: The environment variable that stands for ``--trust-edited`` where there is no command line (the book's pages).
TRUST_ENV = "CROSSPROFILE_TRUST_EDITED"
#: What every output of an unverified analysis says.
UNVERIFIED = "UNVERIFIED: analysed with --trust-edited"
KEY = ("template_id", "variant", "seed", "policy", "budget_label")


class EditedTable(ValueError):
    """A results table that does not match its ``run.json``: ``str()`` names the file, the first bad row and
    the rule; ``problem`` is the same without the remedy."""

    def __init__(self, where: str, problem: str):
        self.where, self.problem = where, problem
        super().__init__(f"{where}: {problem}; the table is not the one its run wrote, so it is not analysed "
                         f"(rerun the grid, restore the files, or pass --trust-edited to analyse it anyway, "
                         f"marked unverified in every output)")


def trusted_from_env() -> bool:
    """``$CROSSPROFILE_TRUST_EDITED`` set to 1/true/yes (the book's pages inherit ``--trust-edited`` this way)."""
    return os.environ.get(TRUST_ENV, "").strip().lower() in ("1", "true", "yes")


def _row(df: pd.DataFrame, mask) -> Optional[int]:
    bad = mask.to_numpy().nonzero()[0] if hasattr(mask, "to_numpy") else []
    return int(bad[0]) if len(bad) else None


def _describe(df: pd.DataFrame, i: int) -> str:
    r = df.iloc[i]
    parts = [f"{c} {r[c]}" for c in KEY if c in df.columns]
    return f"row {i} ({', '.join(parts)})"


def _template_files(config: dict, extra: Sequence[str], wanted: dict[str, str]) -> dict[str, dict[str, Path]]:
    """Template id -> {sha256: file} for the template files of ``extra``, the run's recorded paths and, for ids of
    ``wanted`` (id -> recorded sha256) still missing, the bundled ones."""
    out: dict[str, dict[str, Path]] = {}

    def missing() -> bool:
        return any(sha not in out.get(tid, {}) for tid, sha in wanted.items())
    specs = [*map(str, extra or ()), *[str(t) for t in (config.get("templates") or []) if isinstance(t, str)]]
    for spec in [*specs, str(templates_dir())]:
        if spec == str(templates_dir()) and not missing():
            break
        try:
            paths = template_paths([spec])
        except (FileNotFoundError, ValueError, OSError):
            continue
        for p in paths:
            try:
                sha = file_sha256(p)
                out.setdefault(str(parse_template(p).id), {}).setdefault(sha, p)
            except Exception:  # noqa: BLE001  (a broken file is the validator's business; it matches no run)
                continue
    return out


def verify_table(df: pd.DataFrame, header, where: str = "results.parquet", templates: Sequence[str] = ()) -> None:
    """Raise :class:`EditedTable` at the first rule (module doc) ``df`` breaks against ``header`` (the parsed
    ``run.json``, or None when there is none); ``templates``: more template paths to find the files in."""
    def refuse(problem: str):
        raise EditedTable(where, problem)

    if header is None:
        refuse("rule run header: there is no run.json beside it (the run's record: its rows, templates and grid)")
    if not isinstance(header, dict):
        refuse(f"rule run header: run.json is a {type(header).__name__}, not a JSON object")
    config = header.get("config")
    if not isinstance(config, dict):
        refuse(f"rule run header: run.json's config is {type(config).__name__ if config is not None else 'missing'}, "
               f"not an object")
    hashes = header.get("templates_sha256")
    if not isinstance(hashes, dict) or not hashes:
        refuse("rule run header: run.json records no templates_sha256 (a run made before runs recorded their "
               "templates), so the answer key cannot be checked")
    rows = header.get("rows")
    if isinstance(rows, bool) or not isinstance(rows, int):
        refuse(f"rule run header: run.json's rows is {rows!r}, not a row count")

    # run grid: every row belongs to the run
    allowed = {"template_id": set(map(str, hashes))}
    for key, col in (("variants", "variant"), ("policies", "policy")):
        if isinstance(config.get(key), list):
            allowed[col] = set(map(str, config[key]))
    if isinstance(config.get("seeds"), list):
        allowed["seed"] = {str(s) for s in config["seeds"]}
    if isinstance(config.get("budgets"), list):
        labels = {"none"}
        for b in config["budgets"]:
            try:
                labels.add(Budget(str(b)).label)
            except (ValueError, TypeError):
                labels.add(str(b))
        allowed["budget_label"] = labels
    for col, ok in allowed.items():
        if col in df.columns:
            i = _row(df, ~df[col].astype(str).isin(ok))
            if i is not None:
                what = "templates_sha256" if col == "template_id" else f"config's {col} list"
                refuse(f"{_describe(df, i)}: rule run grid: {col} {df[col].astype(object).iloc[i]!r} is not in the run "
                       f"(run.json's {what})")

    # template hashes: the answer key comes from the files the run used
    used = sorted(set(df["template_id"].astype(str)))
    files = _template_files(config, templates, {t: str(hashes[t]) for t in used})
    key: dict[str, object] = {}
    for tid in used:
        want = str(hashes[tid])
        path = files.get(tid, {}).get(want)
        if path is None:
            i = _row(df, df["template_id"].astype(str) == tid)
            found = ", ".join(f"{p} (sha256 {s[:12]}...)" for s, p in list(files.get(tid, {}).items())[:3])
            refuse(f"{_describe(df, i)}: rule template hashes: no template file with the SHA-256 run.json records "
                   f"for {tid} ({want[:12]}...) is here" + (f"; found {found}" if found else "")
                   + " (pass the run's templates with --templates), so its answer key cannot be recomputed")
        key[tid] = parse_template(path)

    tid = df["template_id"].astype(str)
    tmpl = tid.map(key)
    decision = df["decision"].fillna("").astype(str)
    options = tmpl.map(lambda t: {o.id for o in t.options})
    i = _row(df, ~pd.Series([d == "" or d in o for d, o in zip(decision, options)], index=df.index))
    if i is not None:
        refuse(f"{_describe(df, i)}: rule decision: decision {decision.iloc[i]!r} is not an option of template "
               f"{tid.iloc[i]} ({', '.join(sorted(options.iloc[i]))})")
    invalid = df["invalid"].astype(bool)
    for col, attr in (("correct", "correct_option"), ("chose_decoy", "decoy_option")):
        expect = (decision == tmpl.map(lambda t, a=attr: getattr(t, a))) & ~invalid
        have = df[col].astype("boolean").fillna(False).astype(bool)
        i = _row(df, have != expect)
        if i is not None:
            refuse(f"{_describe(df, i)}: rule answer key: {col} is {bool(have.iloc[i])}, but decision "
                   f"{decision.iloc[i]!r}{' (invalid)' if invalid.iloc[i] else ''} with the template's "
                   f"{attr.replace('_', ' ')} {getattr(tmpl.iloc[i], attr)!r} makes it {bool(expect.iloc[i])}")

    # value ranges
    for col, role in (("kept_support", "support"), ("kept_decoy", "decoy"), ("kept_irrelevant", "irrelevant")):
        most = tmpl.map(lambda t, r=role: sum(f.role == r for f in t.facts))
        i = _row(df, (df[col] < 0) | (df[col] > most))
        if i is not None:
            refuse(f"{_describe(df, i)}: rule value ranges: {col} = {df[col].iloc[i]}, outside 0..{most.iloc[i]} "
                   f"(the template's {role} facts)")
    kept = df["kept_support"] + df["kept_decoy"] + df["kept_irrelevant"]
    checks = [(df["n_kept"] < kept, "n_kept is below kept_support + kept_decoy + kept_irrelevant"),
              (df["net_lead"].abs() > df["kept_support"] + df["kept_decoy"],
               "|net_lead| is above kept_support + kept_decoy"),
              (df["memory_tokens"] < 0, "memory_tokens is negative")]
    if "n_claims" in df.columns:
        checks.append((df["n_kept"] > df["n_claims"], "n_kept is above n_claims"))
    for mask, what in checks:
        i = _row(df, mask)
        if i is not None:
            refuse(f"{_describe(df, i)}: rule value ranges: {what}")

    # duplicate rows, then the count
    cols = [c for c in KEY if c in df.columns]
    dup = df.duplicated(subset=cols, keep="first") if len(cols) == len(KEY) else pd.Series(False, index=df.index)
    i = _row(df, dup)
    if i is not None:
        first = _row(df, (df[cols] == df[cols].iloc[i]).all(axis=1))
        refuse(f"{_describe(df, i)}: rule duplicate row: the same decision as row {first}")
    if rows != len(df):
        refuse(f"rule row count: it holds {len(df)} rows, run.json records {rows} (rows deleted or added)")


def check_or_trust(df: pd.DataFrame, header, where: str, trust: bool, templates: Sequence[str] = ()) -> Optional[str]:
    """:func:`verify_table`; with ``trust`` a failed check is returned as the note every output must show
    (:data:`UNVERIFIED` and the problem) instead of raised. None: the table is the run's."""
    try:
        verify_table(df, header, where, templates)
    except EditedTable as e:
        if not trust:
            raise
        return f"{UNVERIFIED} ({e.problem})"
    return None
