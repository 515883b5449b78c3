"""Preregistered contrasts: a small language read from ``prereg.yaml``, Holm-corrected.

A **contrast** is a weighted sum of cell means::

    estimate = scale * sum_k weight_k * mean(outcome | rows matching where_k)

Each term's ``where`` maps results-table columns to a value (equality) or a list of values
(membership); ``null`` removes a filter set higher up. Filters merge from the file's
``defaults.where``, then the contrast's ``where``, then the term's, later ones winning. So
H1, a difference of differences, is four terms::

    - id: H1
      family: confirmatory
      terms:
        - {weight: +1, where: {policy: R1, decoy_attr: shared}}
        - {weight: -1, where: {policy: B4, decoy_attr: shared}}
        - {weight: -1, where: {policy: R1, decoy_attr: private}}
        - {weight: +1, where: {policy: B4, decoy_attr: private}}

A cell mean pools the matching rows (each decision counts once); all terms of all contrasts
are estimated from one template-bootstrap count matrix (:mod:`.bootstrap`). p-values are
adjusted within each ``family`` by the family's ``correction`` (``holm``: statsmodels'
``multipletests(method="holm")``; ``none``). ``test_value`` (default 0) is the
value the p-value tests against. A contrast whose terms match no rows in a given
run is reported as not estimable (with the reason) and left out of its family.
``paper:`` entries are the paper's reported values, carried for comparison only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd
import yaml

from crossprofile_lib.design import HEADROOM_MIN_POINTS, PRIMARY_BUDGET
from crossprofile_lib.paths import prereg_path
from crossprofile_lib.stats.bootstrap import TemplateBootstrap

DEFAULT_PREREG_PATH = prereg_path()

_TOP_KEYS = {"version", "defaults", "families", "settings", "contrasts"}
_DEFAULT_KEYS = {"outcome", "scale", "where"}
_CONTRAST_KEYS = {"id", "title", "family", "outcome", "scale", "test_value", "where", "terms", "paper", "note"}
_FAMILY_KEYS = {"correction", "alpha"}
_CORRECTIONS = ("holm", "none")
#: a user's file without ``settings`` falls back to the repository prereg.yaml's (crossprofile_lib.design)
_SETTINGS = {"primary_budget": PRIMARY_BUDGET, "headroom_min_points": HEADROOM_MIN_POINTS,
             "net_lead_where": {"selection": "budget", "label_format": "full", "budget_label": PRIMARY_BUDGET},
             "social_proof_where": {}}


class PreregError(ValueError):
    """A preregistration file breaks a rule. ``str()`` names the file, the field and the rule."""

    def __init__(self, path: str, field: str, rule: str, message: str):
        self.path, self.field, self.rule = str(path), field, rule
        super().__init__(f"{path}: field '{field}': {rule}: {message}")


@dataclass(frozen=True)
class Term:
    weight: float
    where: dict  # column -> value, list of values, or None (no filter)


@dataclass(frozen=True)
class Contrast:
    id: str
    terms: tuple[Term, ...]
    title: str = ""
    family: Optional[str] = None
    outcome: str = "correct"
    scale: float = 100.0
    null: float = 0.0
    paper: Optional[dict] = None
    note: str = ""


@dataclass(frozen=True)
class Family:
    correction: str = "holm"
    alpha: float = 0.05


@dataclass(frozen=True)
class Prereg:
    contrasts: tuple[Contrast, ...]
    families: dict = field(default_factory=dict)
    settings: dict = field(default_factory=lambda: dict(_SETTINGS))
    source: str = "<built-in>"


def _num(x, path, fld) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise PreregError(path, fld, "type", f"must be a number, found {x!r}")
    return float(x)


def _where(x, path, fld) -> dict:
    if x is None:
        return {}
    if not isinstance(x, dict):
        raise PreregError(path, fld, "type", f"must be a mapping column -> value(s), found {type(x).__name__}")
    for k, v in x.items():
        vals = v if isinstance(v, list) else [v]
        if isinstance(v, list) and not v:
            raise PreregError(path, f"{fld}.{k}", "value", "an empty list matches nothing")
        for e in vals:
            if e is not None and not isinstance(e, (str, int, float, bool)):
                raise PreregError(path, f"{fld}.{k}", "value", f"must be a scalar or list of scalars, found {e!r}")
    return dict(x)


def _extra(d: dict, allowed: set, path, fld) -> None:
    extra = sorted(set(d) - allowed)
    if extra:
        raise PreregError(path, f"{fld}.{extra[0]}" if fld else extra[0], "unknown key",
                          f"allowed keys: {', '.join(sorted(allowed))}")


def parse_prereg(doc: Any, path: str = "<prereg>") -> Prereg:
    """Validate a parsed YAML document and build a :class:`Prereg` (errors name the field)."""
    if not isinstance(doc, dict):
        raise PreregError(path, "<top>", "type", "the file must be a mapping with a 'contrasts' list")
    _extra(doc, _TOP_KEYS, path, "")
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise PreregError(path, "defaults", "type", "must be a mapping")
    _extra(defaults, _DEFAULT_KEYS, path, "defaults")
    d_where = _where(defaults.get("where"), path, "defaults.where")
    d_outcome = str(defaults.get("outcome", "correct"))
    d_scale = _num(defaults.get("scale", 100), path, "defaults.scale")
    families = {}
    for name, f in (doc.get("families") or {}).items():
        f = f or {}
        if not isinstance(f, dict):
            raise PreregError(path, f"families.{name}", "type", "must be a mapping")
        _extra(f, _FAMILY_KEYS, path, f"families.{name}")
        corr = f.get("correction", "holm")
        if corr not in _CORRECTIONS:
            raise PreregError(path, f"families.{name}.correction", "value", f"one of {', '.join(_CORRECTIONS)}")
        alpha = _num(f.get("alpha", 0.05), path, f"families.{name}.alpha")
        if not 0 < alpha < 1:
            raise PreregError(path, f"families.{name}.alpha", "range", "must lie in (0, 1)")
        families[str(name)] = Family(corr, alpha)
    settings = dict(_SETTINGS)
    s = doc.get("settings") or {}
    if not isinstance(s, dict):
        raise PreregError(path, "settings", "type", "must be a mapping")
    _extra(s, set(_SETTINGS), path, "settings")
    for k, v in s.items():
        settings[k] = (_where(v, path, f"settings.{k}") if k.endswith("_where") else
                       _num(v, path, f"settings.{k}") if k == "headroom_min_points" else str(v))
    cs = doc.get("contrasts")
    if not isinstance(cs, list) or not cs:
        raise PreregError(path, "contrasts", "required", "a non-empty list of contrasts")
    out, seen = [], set()
    for i, c in enumerate(cs):
        fld = f"contrasts[{i}]"
        if not isinstance(c, dict):
            raise PreregError(path, fld, "type", "each contrast is a mapping with 'id' and 'terms'")
        _extra(c, _CONTRAST_KEYS, path, fld)
        cid = c.get("id")
        if not isinstance(cid, str) or not cid.strip():
            raise PreregError(path, f"{fld}.id", "required", "a non-empty string")
        if cid in seen:
            raise PreregError(path, f"{fld}.id", "unique", f"id '{cid}' is used twice")
        seen.add(cid)
        fam = c.get("family")
        if fam is not None and fam not in families:
            raise PreregError(path, f"{fld}.family", "declared", f"family '{fam}' is not under 'families' "
                              f"(declared: {', '.join(families) or 'none'})")
        c_where = {**d_where, **_where(c.get("where"), path, f"{fld}.where")}
        terms = c.get("terms")
        if not isinstance(terms, list) or not terms:
            raise PreregError(path, f"{fld}.terms", "required", "a non-empty list of {weight, where} terms")
        tl = []
        for j, t in enumerate(terms):
            tf = f"{fld}.terms[{j}]"
            if not isinstance(t, dict):
                raise PreregError(path, tf, "type", "a mapping with 'weight' and 'where'")
            _extra(t, {"weight", "where"}, path, tf)
            if "weight" not in t:
                raise PreregError(path, f"{tf}.weight", "required", "every term needs a weight")
            w = {k: v for k, v in {**c_where, **_where(t.get("where"), path, f"{tf}.where")}.items() if v is not None}
            tl.append(Term(_num(t["weight"], path, f"{tf}.weight"), w))
        paper = _paper(c.get("paper"), path, f"{fld}.paper")
        out.append(Contrast(cid, tuple(tl), str(c.get("title", "")), fam, str(c.get("outcome", d_outcome)),
                            _num(c.get("scale", d_scale), path, f"{fld}.scale"),
                            _num(c.get("test_value", 0.0), path, f"{fld}.test_value"), paper, str(c.get("note", ""))))
    return Prereg(tuple(out), families, settings, str(path))


def _paper(x, path, fld) -> Optional[dict]:
    """A contrast's paper values: a reference "<figure id>/<label>" into data/paper_figures.yaml
    (the one source of paper numbers), or a mapping model -> value for a contrast of the user's own."""
    if x is None or isinstance(x, dict):
        return x
    if isinstance(x, str):
        from crossprofile_lib.paper_figures import PaperFiguresError, paper_values
        try:
            return paper_values(x)
        except PaperFiguresError as e:
            raise PreregError(path, fld, "paper reference", str(e)) from None
    raise PreregError(path, fld, "type", "a reference '<figure id>/<item label>' or a mapping model -> paper value")


def load_prereg(path: str | Path | None = None) -> Prereg:
    """Read a preregistration file (default: the repository's ``prereg.yaml``)."""
    p = Path(path) if path is not None else DEFAULT_PREREG_PATH
    try:
        doc = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise PreregError(str(p), "<file>", "exists", "no such file") from None
    except yaml.YAMLError as e:
        raise PreregError(str(p), "<file>", "YAML", str(e).replace("\n", " ")) from None
    return parse_prereg(doc, str(p))


def _coerce(series: pd.Series, v):
    if pd.api.types.is_bool_dtype(series):
        return v
    if pd.api.types.is_numeric_dtype(series):
        return float(v) if not isinstance(v, bool) and isinstance(v, (int, float, str)) and _isnum(v) else v
    return str(v) if not isinstance(v, bool) else v


def _isnum(v) -> bool:
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def row_mask(df: pd.DataFrame, where: dict, path: str = "<prereg>", fld: str = "where") -> tuple[np.ndarray, str]:
    """Boolean mask ``(n_rows,)`` of the rows matching ``where``, and why it is empty (or '')."""
    mask = np.ones(len(df), dtype=bool)
    for col, v in where.items():
        if col not in df.columns:
            raise PreregError(path, f"{fld}.{col}", "column", f"the results table has no column '{col}'")
        vals = [_coerce(df[col], e) for e in (v if isinstance(v, list) else [v])]
        m = df[col].isin(vals).to_numpy()
        if mask.any() and not (mask & m).any():
            known = sorted(map(str, df.loc[mask, col].unique()))[:12]
            return mask & m, f"no rows with {col} in {vals} (present: {', '.join(known)})"
        mask &= m
    return mask, ("" if mask.any() else "no rows")


def evaluate_contrasts(df: pd.DataFrame, prereg: Prereg, boot: TemplateBootstrap,
                       template_col: str = "template_id") -> pd.DataFrame:
    """One row per contrast: estimate, percentile interval, bootstrap p, adjusted p, decision.

    All terms of all contrasts become columns of one ``(T, J)`` sums matrix, so the whole
    file costs two ``(B, T) @ (T, J)`` products.
    """
    unit = boot.codes(df[template_col].astype(str).tolist())
    cols_S, cols_N, C, rows = [], [], [], []
    for k, c in enumerate(prereg.contrasts):
        if c.outcome not in df.columns:
            raise PreregError(prereg.source, f"contrasts[{k}].outcome", "column",
                              f"the results table has no column '{c.outcome}'")
        y = df[c.outcome].astype(float).to_numpy()
        reasons, start, ns = [], len(cols_S), []
        for j, t in enumerate(c.terms):
            m, why = row_mask(df, t.where, prereg.source, f"contrasts[{k}].terms[{j}].where")
            if why:
                reasons.append(f"term {j}: {why}")
            S, N = boot.sums(unit, np.where(m, 0, -1), y, 1)
            cols_S.append(S[:, 0])
            cols_N.append(N[:, 0])
            ns.append(int(N.sum()))
        weights = np.array([t.weight for t in c.terms])
        C.append((start, weights, c))
        rows.append(dict(id=c.id, title=c.title, family=c.family or "", outcome=c.outcome,
                         n_rows=min(ns), estimable=not reasons, reason="; ".join(reasons),
                         paper=c.paper))
    S, N = np.column_stack(cols_S), np.column_stack(cols_N)
    point, draws = boot.means(S, N)
    K = len(C)
    est_p, est_d = np.full(K, np.nan), np.full((boot.n_resamples, K), np.nan)
    nulls = np.zeros(K)
    for k, (start, w, c) in enumerate(C):
        nulls[k] = c.null
        if rows[k]["estimable"]:
            sl = slice(start, start + len(w))
            est_p[k] = c.scale * point[sl] @ w
            est_d[:, k] = c.scale * draws[:, sl] @ w
    summ = boot.summarize(est_p, est_d, nulls)
    out = pd.DataFrame(rows)
    for key in ("estimate", "lo", "hi", "p", "n_undefined"):
        out[key] = summ[key]
    out.loc[~out.estimable, ["estimate", "lo", "hi", "p"]] = np.nan
    out["p_adjusted"], out["reject"] = np.nan, False
    out["correction"] = "none"
    for name, fam in prereg.families.items():
        sel = (out.family == name) & out.estimable & out.p.notna()
        if not sel.any():
            continue
        if fam.correction == "holm":
            rej, padj = holm(out.loc[sel, "p"].to_numpy(), fam.alpha)
        else:
            padj = out.loc[sel, "p"].to_numpy()
            rej = padj < fam.alpha
        out.loc[sel, "p_adjusted"], out.loc[sel, "reject"] = padj, rej
        out.loc[sel, "correction"] = fam.correction
        out.loc[sel, "alpha"] = fam.alpha
    out["reject"] = out["reject"].astype(bool)
    return out


def holm(pvals, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down adjustment (statsmodels' ``multipletests``): ``(reject, p_adjusted)``."""
    from statsmodels.stats.multitest import multipletests
    rej, padj, _, _ = multipletests(np.asarray(pvals, dtype=float), alpha=alpha, method="holm")
    return rej, padj
