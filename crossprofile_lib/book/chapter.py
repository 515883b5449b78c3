"""ONE chapter preamble: ``ch = book.setup(globals(), 4, "social_proof")`` resolves and validates the chapter's parameters,
makes or finds its runs with their bootstraps, shows the "built with" line and the ONE provenance box, and returns a
:class:`Chapter` (parameters, runs, captions, the budget each run is shown at). No runs: ``reference=False, model=False``.
Where the numbers come from: :func:`run_notices` (what a reader must know about a run), :func:`provenance_box` (one
compact badge, details collapsible), :func:`built_with` (parameters, commit, date) and :func:`takeaways` (the page's
badge follows its first box)."""

from __future__ import annotations

import datetime as _dt
import html
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from crossprofile_lib.book.display import (
    HTML,
    MIN_TEMPLATES_FOR_INTERVALS,
    NEAR_CHANCE_FLAG,
    Captions,
    _count,
    admonition,
    data_source_box,
    display,
    name_html,
    near_chance,
    near_chance_name,
)
from crossprofile_lib.book.experiments import BookRuns
from crossprofile_lib.book.hbruns import HBRun
from crossprofile_lib.book.models import gaps, headroom_verdict, run_paper_model
from crossprofile_lib.book.params import BookParams
from crossprofile_lib.book.runs import REFERENCE, ROOT, Run, bootstrap, n_rows, primary_budget
from crossprofile_lib.book.style import model_signal, no_signal_note
from crossprofile_lib.design import HEADROOM_MIN_POINTS, PRIMARY_BUDGET
from crossprofile_lib.hiddenbench.measures import headroom as hb_headroom
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
    return HTML(f'<p class="cp-built-with"><small>{html.escape(built_with_text(params))}</small></p>')


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
    return HTML(f'<div class="admonition {kind} cp-provenance">{body}{warn_html}</div>')


def _short(p) -> str:
    try:
        return str(p.relative_to(ROOT))
    except (ValueError, AttributeError):
        return str(p)


#: The badge ``setup`` leaves for the page's first takeaways box, shown once (one kernel runs one chapter).
_PENDING: list = []


class _Boxes:
    """Several HTML objects shown as one output (a takeaways box and the badge after it)."""

    def __init__(self, *parts):
        self.data = "".join(p.data for p in parts if p is not None)

    def _repr_html_(self) -> str:
        return self.data


def takeaways(lines: Sequence[str], title: str = "What this build shows"):
    """The box of statements computed from the runs (``lines`` are HTML); the page's first carries the badge."""
    items = "".join(f"<li>{line}</li>" for line in lines if line)
    box = HTML(f'<div class="admonition tip cp-takeaways"><p class="admonition-title">{html.escape(title)}</p>'
                f"<ul>{items}</ul></div>")
    return _Boxes(box, _PENDING.pop()) if _PENDING else box


#: Runs a chapter may ask for besides the reference grid and the model sample.
EXTRA_RUNS = ("social_proof", "fit_check", "hiddenbench", "hiddenbench_model")


@dataclass
class Chapter:
    """What one chapter reads: its parameters, runs and captions."""

    number: int
    params: BookParams
    runs: BookRuns
    cap: Captions
    ref: Optional[Run] = None
    model: Optional[Run] = None
    sp: Optional[Run] = None
    fit: Optional[Run] = None
    hb: Optional[HBRun] = None
    hb_model: Optional[HBRun] = None
    notices: list = field(default_factory=list)
    models: list = field(default_factory=list)
    """Every language model's CrossProfile run (BACKEND, BACKENDS, RUNS); :attr:`model` is the primary one."""
    hb_models: list = field(default_factory=list)
    """Every language model's HiddenBench run; :attr:`hb_model` is the primary one."""

    @property
    def all_models(self) -> list[Run]:
        """Every model's CrossProfile run (:attr:`models`, else the primary one)."""
        return self.models or ([self.model] if self.model is not None else [])

    @property
    def all_hb_models(self) -> list[HBRun]:
        """Every model's HiddenBench run (:attr:`hb_models`, else the primary one)."""
        return list(self.hb_models) or ([self.hb_model] if self.hb_model is not None else [])

    @property
    def shown(self) -> list[Run]:
        """The reference grid and every model's sample: one column per model."""
        return [r for r in [self.ref, *self.all_models] if r is not None]

    def budget(self, run: Optional[Run]) -> str:
        """The budget ``run`` is shown at: the primary budget, or the run's own when it lacks it."""
        return primary_budget(run)[0]

    def with_signal(self, runs: Optional[Sequence[Run]] = None, what: str = "The model's panel") -> list[Run]:
        """The runs worth a figure panel (:func:`~.figures.model_signal`), and a line per other run saying why not."""
        out = []
        for r in (self.shown if runs is None else runs):
            sig = model_signal(r, r.boot)
            if sig.ok:
                out.append(r)
            else:
                display(no_signal_note(sig, what))
        return out

    def at(self, run: Run, t, budget_col: str = "budget_label"):
        """Rows of a long table ``t`` at the budget ``run`` is shown at."""
        return t[t[budget_col].astype(str) == self.budget(run)]


def _attach(run: Optional[Run], p: BookParams) -> Optional[Run]:
    if run is not None and run.boot is None:
        run.boot = bootstrap(run, p.n_resamples, p.boot_seed)
    return run


def setup(params: dict, chapter: int | str, *extra: str, reference: bool = True, model: bool = True,
          notes: Sequence[tuple[str, str, str]] = (), show: bool = True, results_first: bool = True) -> Chapter:
    """The chapter preamble. ``params``: the chapter's globals; ``extra``: names from :data:`EXTRA_RUNS`; ``notes``: (kind,
    title, HTML) boxes folded into the provenance box; ``show``: display the line and the box; ``results_first``: the
    badge goes under the page's first takeaways box."""
    bad = [e for e in extra if e not in EXTRA_RUNS]
    if bad:
        raise ValueError(f"setup(): unknown run(s) {bad}; known: {', '.join(EXTRA_RUNS)}")
    declared = [k for k in BookParams.model_fields if k in params]  # the book parameters among the globals
    p = BookParams.resolve({k: params[k] for k in declared})
    br = BookRuns(p)
    ch = Chapter(chapter, p, br, Captions(chapter))
    rows = []
    if reference:
        ch.ref = _attach(br.reference(), br.params)
        rows.append(("reference grid", ch.ref, _budget_notice(ch.ref, "the reference grid") + run_notices(ch.ref, ch.ref.boot)))
    if model:
        ch.models = [_attach(r, br.params) for r in br.models()]
        primary = br.model()
        ch.model = next((r for r in ch.models if primary is not None and r.path == primary.path),
                        ch.models[0] if ch.models else None)
        if not ch.models:
            rows.append(("language model", None, _no_model_notices(br)))
        for r in ch.models:
            imported = _imported(br, r)
            notices = _model_notices(br, r, r is ch.model and not imported, imported)
            rows.append(("language model" + (", imported" if imported else ""), r, notices + [_paper_notice(r)]))
    if "social_proof" in extra:
        ch.sp = _attach(br.social_proof(), br.params)
        s = p.social_proof
        rows.append(("social-proof decider", ch.sp, [Notice(
            "important", f"A reference decider with social-proof weight {s:g}",
            f"The run labelled <b>{html.escape(ch.sp.label)}</b> is the {REFERENCE} with a social-proof parameter: "
            f"a line revealing n speakers counts 1 + {s:g}(n - 1) times. It shows the mechanism the paper "
            "describes; it is not a measurement of any language model.")]))
    if "fit_check" in extra:
        ch.fit = _attach(br.fit_check(), br.params)
        rows.append(("stochastic decider", ch.fit, [Notice(
            "important", "A stochastic reference decider",
            f"<b>{html.escape(ch.fit.label)}</b> is the {REFERENCE} with social-proof weight "
            f"{p.social_proof:g} that samples its choice from softmax({p.stochastic_beta:g} "
            "x score) instead of taking the argmax. It checks that the social-proof fit recovers known "
            "parameters; it is not a language model.")]))
    hb_notices = []
    if "hiddenbench" in extra:
        ch.hb = br.hiddenbench()
        if ch.hb is None:
            hb_notices.append(Notice("warning", "HiddenBench: no reference run",
                                     html.escape(br.skipped.get("hiddenbench:ledger", "unknown reason"))))
    if "hiddenbench_model" in extra:
        ch.hb_models = br.hb_models()
        ch.hb_model = br.hiddenbench_for(br.backend) if br.backend else (ch.hb_models[0] if ch.hb_models else None)
        for b in dict.fromkeys(sp.backend for sp in br.specs()):
            if f"hiddenbench:{b}" in br.skipped and not any(h.backend == b for h in ch.hb_models):
                hb_notices.append(Notice("warning", f"{b}: no HiddenBench run",
                                         html.escape(br.skipped.get(f"hiddenbench:{b}", "unknown reason"))))
    for role, h in [("HiddenBench, reference", ch.hb)] + [("HiddenBench, model", h) for h in ch.all_hb_models]:
        if h is not None:
            rows.append((role, h, _hb_notices(h, p.boot_seed)))
    src = next((h for h in (ch.hb, ch.hb_model, *ch.hb_models) if h is not None), None)
    if src is not None:
        box = data_source_box(src)
        kind = "warning" if "FIXTURE" in box.data else "note"
        hb_notices.append(Notice(kind, "HiddenBench data source" + (": the project's FIXTURE" if kind == "warning"
                                                                     else ""), box.data))
    ch.notices = [Notice(*n) for n in notes] + hb_notices
    if reference and len(ch.ref.variants) < 8:
        ch.notices.append(Notice("note", f"{len(ch.ref.variants)} of the 8 variants",
                                 f"The reference grid ran the variants {', '.join(ch.ref.variants)} only (parameter "
                                 "<code>variants</code>); tables and contrasts that need another variant are left "
                                 "out or marked not estimable."))
    if show:
        badge = provenance_box(rows, ch.notices, built_with_text({k: getattr(p, k) for k in declared}))
        if results_first:  # shown under the page's first "What this build shows" box
            _PENDING[:] = [badge]
        else:
            display(badge)
    return ch


def _hb_notices(h: HBRun, boot_seed: int) -> list[Notice]:
    """A model's HiddenBench run whose measured headroom check fails is near chance on this page."""
    if h.is_reference:
        return []
    d = h.decisions("controlled")
    hr = hb_headroom(d, np.random.default_rng(boot_seed)) if not d.empty else None
    if hr is not None and hr.passed:
        return []
    if hr is None or hr.estimate is None:
        return [Notice("warning", f"{h.label}: HiddenBench headroom not measured",
                       "Its controlled run has no ALL and EMPTY decisions, so this page cannot tell whether its "
                       "accuracies carry signal; read them as unchecked.")]
    return [Notice("important", f"{h.label} decides near chance on HiddenBench (measured)",
                   f"Its headroom check fails (ALL - EMPTY = {hr.estimate:.1f} points [{hr.lo:.1f}, {hr.hi:.1f}]; the "
                   f"lower bound must exceed {hr.min_points:g}): its HiddenBench accuracies say nothing about the "
                   "paper's models; they show the protocol running end to end.")]


def _paper_notice(run: Run) -> Notice:
    """Which of the paper's models this run is set beside (crossprofile_lib/resources/paper_models.yaml)."""
    pm, v = run_paper_model(run), headroom_verdict(run)
    status = (f" Its numbers are <b>{v.status}</b> ({html.escape(v.reason)}).")
    if pm:
        return Notice("note", f"{run.label}: compared with the paper's {pm}",
                      f"Its model name matches the paper's <b>{html.escape(pm)}</b> (rules in "
                      "<code>crossprofile_lib/resources/paper_models.yaml</code>); the paper's values beside it are "
                      f"that model's.{status}")
    return Notice("note", f"{run.label}: not one of the paper's models",
                  "Its model name matches no rule of <code>crossprofile_lib/resources/paper_models.yaml</code>, so "
                  f"no paper value is set beside it (never another model's).{status}")


def _imported(br: BookRuns, run: Run) -> bool:
    return any(isinstance(r, Run) and r.path == run.path for r in br.imported())


def _no_model_notices(br: BookRuns) -> list[Notice]:
    b = br.backend
    if not b:
        return [Notice("note", "No language-model run on this page",
                       f"This page was built with the {REFERENCE} only (parameter <code>backend</code> is empty). "
                       '<a href="09-rerun.html">Chapter 9</a> shows how to rerun it on a model.')]
    return [Notice("warning", f"{b}: no run",
                   f"The model backend could not run here ({html.escape(br.skipped.get(b, 'unknown'))}); "
                   f"this page shows the {REFERENCE} only.")]


def _model_notices(br: BookRuns, run: Run, primary: bool, imported: bool) -> list[Notice]:
    """The primary model's run: a stored run shown in its place; another model's: imported (zero calls), what it
    lacks. Then its budget and :func:`run_notices`."""
    b = br.backend
    if primary:
        out = [Notice("warning", f"{b}: stored run shown", html.escape(br.skipped[b]))] if b in br.skipped else []
    else:
        out = [Notice("note", f"{run.label}: imported run folder",
                      f"Read in place from <code>{html.escape(str(run.path))}</code> (parameter <code>runs</code>, "
                      "Make variable RUNS): made elsewhere, no model call on this machine.")] if imported else []
        out += [Notice("warning", f"{run.label}: what this page cannot show", html.escape(g) + ".") for g in gaps(run)]
    return out + _budget_notice(run, "the model run" if primary else run.label) + run_notices(run, run.boot)


def _budget_notice(run: Run, where: str) -> list[Notice]:
    """The warning that ``run`` (in ``where``) lacks the primary budget; none when it has it."""
    why = primary_budget(run)[1]
    return [Notice("warning", f"No r = {PRIMARY_BUDGET} in {where}", html.escape(why) + ".")] if why else []
