"""Where a chapter's numbers come from: :func:`run_notices` (what a reader must know about a run), :func:`provenance_box`
(one compact badge, details collapsible), :func:`built_with` (parameters, commit, date) and :func:`takeaways` (the
page's badge follows its first box)."""

from __future__ import annotations

import datetime as _dt
import html
from dataclasses import dataclass
from typing import Optional, Sequence

from crossprofile_lib.book.display import (
    MIN_TEMPLATES_FOR_INTERVALS,
    NEAR_CHANCE_FLAG,
    _count,
    _html,
    admonition,
    name_html,
    near_chance,
    near_chance_name,
)
from crossprofile_lib.book.runs import REFERENCE, ROOT, Run, n_rows
from crossprofile_lib.design import HEADROOM_MIN_POINTS
from crossprofile_lib.run.results import git_commit
from crossprofile_lib.stats.tables import headroom


@dataclass(frozen=True)
class Notice:
    """One thing a reader must know about a run: ``kind`` (note, warning, important), title, HTML body."""

    kind: str
    title: str
    body: str

    @property
    def data(self) -> str:
        return admonition(self.kind, self.title, self.body).data

    def _repr_html_(self) -> str:
        return self.data


def run_notices(run: Optional[Run], boot=None, min_points: float = HEADROOM_MIN_POINTS) -> list[Notice]:
    """The reference decider is not a model; a near-chance model; a failed headroom check; too few templates."""
    if run is None:
        return []
    out = []
    k = int(run.df["template_id"].nunique()) if "template_id" in run.df.columns else 0
    if boot is not None and 0 < k < MIN_TEMPLATES_FOR_INTERVALS:
        out.append(Notice("warning", f"Only {_count(k, 'template')}: intervals are not reliable",
                          f"{html.escape(run.label)} ran on {_count(k, 'template')}. Every 95% "
                          "interval resamples templates, and with so few the intervals (and the headroom "
                          f"check) say little; read them as descriptive. Run at least {MIN_TEMPLATES_FOR_INTERVALS} "
                          "templates (e.g. TEMPLATES=templates/formal) for intervals worth quoting."))
    if run.is_reference:
        out.append(Notice("note", f"Results of the {REFERENCE}",
                          f"These numbers come from the {REFERENCE} ({html.escape(run.model)}), a normative "
                          "evidence counter that scores each option by the kept facts' polarities. It is not a "
                          "model of any LLM: it shows what the memory makes possible, never what a model does."))
    if near_chance(run, boot):
        small = (" It is SmolLM2-135M, a 135-million-parameter model that runs on any CPU, here to show the pipeline "
                 "runs end to end on a real model.") if near_chance_name(run.backend + run.model) else ""
        out.append(Notice("important", f"{run.label} decides near chance (measured)",
                          f"This run's own headroom check says its memory barely moves its decisions, so its "
                          "differences between policies are mostly noise and its numbers are flagged "
                          f"<i>{NEAR_CHANCE_FLAG}</i> wherever they appear; they do not estimate the paper's "
                          f"effects.{small}"))
    if boot is not None and {"ALL", "EMPTY"} <= set(run.df["policy"]):
        h = headroom(run.df, boot, min_points)
        if not h["passed"]:
            out.append(Notice("warning", "Headroom check failed: exploratory results",
                              f"ALL - EMPTY = {h['estimate']:.1f} points [{h['lo']:.1f}, {h['hi']:.1f}] for "
                              f"{html.escape(run.label)}; the lower bound must exceed {min_points:g} points. "
                              "Every result of this run is exploratory."))
    return out


def _commit() -> str:
    c = git_commit(ROOT)
    return (c[:10] + ("-dirty" if c.endswith("-dirty") else "")) if c else "unknown (not a git checkout)"


def _listing(v) -> str:
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v) if v else "(none)"
    return str(v)


#: The parameters the "built with" line names, in this order, with their display names.
BUILT_WITH = (("backend", "backend"), ("templates", "templates"), ("seeds", "seeds"), ("budgets", "budgets"),
              ("model_templates", "model templates"), ("model_seeds", "model seeds"),
              ("model_budgets", "model budgets"), ("model_variants", "model variants"),
              ("hb_budgets", "HiddenBench budgets"), ("n_resamples", "bootstrap resamples"))


def built_with_text(params: dict) -> str:
    """``Built with backend ..., templates ...; commit ...; date ...`` from the chapter's declared parameters."""
    parts = []
    for key, name in BUILT_WITH:
        if key not in params or (key.startswith("model_") and not params.get("backend")):
            continue
        v = params[key]
        if key == "backend":
            v = v or f"none ({REFERENCE} only)"
        parts.append(f"{name} {_listing(v)}")
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "Built with " + "; ".join(parts + [f"commit {_commit()}", f"date {date}"]) + "."


def built_with(params: dict):
    """The page's "built with" line (HTML)."""
    return _html(f'<p class="cp-built-with"><small>{html.escape(built_with_text(params))}</small></p>')


def provenance_box(runs: Sequence[tuple[str, Optional[Run], list]], extra: Sequence[Notice] = (),
                   built: str = ""):
    """ONE badge per chapter: a visible line per run (warning titles stay visible), folded details with
    ``built``, backend, model, run folder and every notice. ``runs``: (role, run or None, notices)."""
    line, rows, boxes = [], [], []
    for role, run, notices in runs:
        if run is not None:
            line.append(f"{html.escape(role)}: <b>{name_html(run)}</b>")
            rows.append(f"<tr><td>{html.escape(role)}</td><td>{html.escape(run.who)}</td>"
                        f"<td><code>{html.escape(_short(run.path))}</code></td><td>{n_rows(run)}</td></tr>")
        else:
            line.append(f"{html.escape(role)}: <i>none</i>")
        boxes += notices
    boxes += list(extra)
    warn = [n.title for n in boxes if n.kind in ("warning", "important")]
    kind = "warning" if any(n.kind == "warning" for n in boxes) else "note"
    head = " · ".join(line) if line else "no runs (this page computes from the templates and the code)"
    table = ("<table><tr><th>run</th><th>backend and model</th><th>folder</th><th>rows</th></tr>"
             + "".join(rows) + "</table>") if rows else ""
    built_html = f'<p class="cp-built-with"><small>{html.escape(built)}</small></p>' if built else ""
    warn_html = ("<p class='cp-provenance-warnings'>" + "; ".join(f"<b>{html.escape(w)}</b>" for w in warn)
                 + " (details in the fold)</p>") if warn else ""
    body = (f'<details class="cp-provenance-details"><summary><span class="cp-badge-label">Provenance</span> '
            f"{head} <small>(details: build parameters, commit, backends, models, run folders, "
            f"{_count(len(boxes), 'notice')})</small></summary>{built_html}{table}" + "".join(n.data for n in boxes)
            + "</details>")
    return _html(f'<div class="admonition {kind} cp-provenance">{body}{warn_html}</div>')


def _short(p) -> str:
    try:
        return str(p.relative_to(ROOT))
    except (ValueError, AttributeError):
        return str(p)


#: The badge ``setup`` leaves for the page's first takeaways box (one kernel runs one chapter).
_PENDING: list = []


def defer(obj) -> None:
    """Show ``obj`` (the page's provenance badge) right after the page's first takeaways box."""
    _PENDING.clear()
    _PENDING.append(obj)


def pending():
    """The deferred badge, once (None when there is none or it was shown)."""
    return _PENDING.pop() if _PENDING else None


class _Boxes:
    """Several HTML objects shown as one output (a takeaways box and the badge after it)."""

    def __init__(self, *parts):
        self.data = "".join(p.data for p in parts if p is not None)

    def _repr_html_(self) -> str:
        return self.data


def takeaways(lines: Sequence[str], title: str = "What this build shows"):
    """The box of statements computed from the runs (``lines`` are HTML); the page's first carries the badge."""
    items = "".join(f"<li>{line}</li>" for line in lines if line)
    box = _html(f'<div class="admonition tip cp-takeaways"><p class="admonition-title">{html.escape(title)}</p>'
                f"<ul>{items}</ul></div>")
    badge = pending()
    return box if badge is None else _Boxes(box, badge)
