"""Which rows the statistics may use (SPEC section 8). **Failed calls are not decisions**: a table with ``error`` rows
is refused unless ``allow_errors`` drops them (counted). **Analysis set**: the formal templates (ids of the files under
``templates/formal/``); a run's development rows are dropped and counted, a run with no formal template is analysed as
it is (exploratory); ``analysis_set="all"`` keeps every row. **Status**: ``confirmatory`` only when the headroom check
passes, the set is formal and there are at least :data:`MIN_TEMPLATES_CONFIRMATORY` templates. **Relevance fallback**:
how often the model's relevance filter gave no usable answer (``relevance_invalid``: R1-rel then keeps what R1 keeps,
so a high rate pulls H3 toward 0), per backend, one call per task unit, failed calls left out; above
:data:`WARN_RATE` the run summary and ``crossprofile stats`` warn.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Optional

import pandas as pd
import yaml

from crossprofile_lib.paths import formal_templates_dir

FORMAL_DIR = formal_templates_dir()
#: fewest templates a run needs before its results may be called confirmatory
MIN_TEMPLATES_CONFIRMATORY = 10
ANALYSIS_SETS = ("formal", "all")
#: the fallback rate above which the summary warns (one unusable filter answer in ten)
WARN_RATE = 0.10
UNIT = ("template_id", "variant", "seed")


class FailedCallsError(ValueError):
    """A results table holds rows whose model call failed (``error`` set)."""


def failed_mask(df: pd.DataFrame) -> pd.Series:
    """True for rows whose ``error`` is non-empty (all False without the column)."""
    if "error" not in df.columns:
        return pd.Series(False, index=df.index)
    e = df["error"]
    return e.notna() & (e.astype(str).str.strip() != "")


def check_failed_calls(df: pd.DataFrame, allow_errors: bool = False, source: str = "the results table"
                       ) -> tuple[pd.DataFrame, str]:
    """``(rows to analyse, notice)``: failed calls refused, or dropped and counted with ``allow_errors``."""
    bad = failed_mask(df)
    n = int(bad.sum())
    if not n:
        return df, ""
    msg = (f"{source}: {n} of {len(df)} rows are failed model calls (column 'error' set); "
           "they are not decisions")
    if not allow_errors:
        raise FailedCallsError(f"{msg}. Rerun the command that made the run (finished calls come from the "
                               "cache) or pass --allow-errors to drop them")
    return df[~bad], f"{msg}: {n} dropped (--allow-errors)"


@lru_cache(maxsize=None)
def formal_template_ids(folder: Optional[str] = None) -> frozenset:
    """The ``id`` of every template file under ``templates/formal/`` (or ``folder``)."""
    ids = set()
    for p in sorted(Path(folder or FORMAL_DIR).rglob("*.y*ml")):
        try:
            doc = yaml.safe_load(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue   # the validator names broken files; here they are simply not formal
        if isinstance(doc, dict) and isinstance(doc.get("id"), str):
            ids.add(doc["id"])
    return frozenset(ids)


def select_analysis_set(df: pd.DataFrame, analysis_set: str = "formal", formal_ids=None) -> tuple[pd.DataFrame, dict]:
    """The rows of the analysis set and its record (name, rule, template counts, rows dropped)."""
    if analysis_set not in ANALYSIS_SETS:
        raise ValueError(f"analysis set '{analysis_set}': must be one of {', '.join(ANALYSIS_SETS)}")
    formal = formal_template_ids() if formal_ids is None else frozenset(formal_ids)
    tid = df["template_id"].astype(str)
    is_formal = tid.isin(formal)
    n_formal, n_other = int(tid[is_formal].nunique()), int(tid[~is_formal].nunique())
    rec = dict(rule="formal = template ids of the files under templates/formal/",
               formal_templates=n_formal, development_templates=n_other, rows_dropped=0)
    if analysis_set == "all" or not n_other or not n_formal:
        name = ("development templates only" if not n_formal else "formal" if not n_other
                else "all (formal and development templates)")
        return df, dict(rec, name=name, n_templates=n_formal + n_other)
    return df[is_formal], dict(rec, name="formal", n_templates=n_formal, rows_dropped=int((~is_formal).sum()))


def run_status(headroom: dict, analysis: dict, n_templates: int) -> tuple[str, list]:
    """``("confirmatory" | "exploratory", reasons)`` for one model's results (module doc)."""
    reasons = []
    if not headroom.get("passed"):
        reasons.append(headroom.get("reason") or "headroom check failed")
    if n_templates < MIN_TEMPLATES_CONFIRMATORY:
        reasons.append(f"too few templates ({n_templates} < {MIN_TEMPLATES_CONFIRMATORY})")
    if analysis.get("name") != "formal":
        reasons.append(f"analysis set: {analysis.get('name')}")
    return ("exploratory" if reasons else "confirmatory"), reasons


def prepare(df: pd.DataFrame, allow_errors: bool = False, analysis_set: str = "formal",
            source: str = "the results table") -> tuple[pd.DataFrame, dict]:
    """Failed calls checked, then the analysis set selected: the rows and ``{"analysis_set", "failed_calls"}``."""
    df, notice = check_failed_calls(df, allow_errors, source)
    df, rec = select_analysis_set(df, analysis_set)
    return df, {"analysis_set": rec, "failed_calls": notice}


def relevance_fallback(df: pd.DataFrame) -> dict:
    """``{backend: {"calls", "invalid", "rate", "high"}}`` (empty when no row used a model's filter)."""
    need = {"relevance_filter", "relevance_invalid", *UNIT}
    if not need <= set(df.columns):
        return {}
    d = df[df["relevance_filter"].astype(str) == "model"]
    d = d[~failed_mask(d)]
    out = {}
    for backend, g in d.groupby("backend" if "backend" in d.columns else (lambda _: "model"), sort=True):
        units = g.groupby(list(UNIT))["relevance_invalid"].max()
        n, k = int(len(units)), int(units.astype(bool).sum())
        out[str(backend)] = {"calls": n, "invalid": k, "rate": k / n if n else 0.0,
                             "high": bool(n and k / n > WARN_RATE)}
    return out


def fallback_lines(fb: dict) -> list[str]:
    """One line per backend for the run summary and ``crossprofile stats`` (``warning:`` when high)."""
    lines = []
    for backend, r in fb.items():
        text = (f"{backend}: relevance filter (R1-rel, BAL): {r['invalid']} of {r['calls']} answers unusable "
                f"({100 * r['rate']:.1f}%; relevance_invalid), R1-rel falls back to R1 there")
        if r["high"]:
            text = (f"warning: {text}; above {100 * WARN_RATE:.0f}% this biases H3 (R1-rel - R1) toward 0: use "
                    f"--decision-mode grammar or score (constrained JSON) or a stronger model")
        lines.append(text)
    return lines
