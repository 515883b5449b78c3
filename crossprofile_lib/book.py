"""Helpers the book's notebooks share: runs, captions, notices and the paper-value tables.

Every chapter notebook (``notebooks/*.md``) starts with a papermill ``parameters`` cell and
then calls this module and :mod:`figures`; nothing is computed in a notebook twice.

* **Runs.** :func:`reference_run` and :func:`model_run` return a :class:`Run` (the tidy
  results table plus its ``run.json`` header). They run the experiment when its folder is
  missing or was made with another configuration (``ensure_run``); model backends answer from
  their call cache, so a rebuild makes no model calls. Relative paths resolve against the
  repository root, so a notebook runs from any working directory.
* **Naming.** :attr:`Run.label` names the backend and model of every number. The ``ledger``
  backend is always called the *reference decider*: a normative evidence counter, not a
  model of any LLM.
* **Captions and notices.** :class:`Captions` numbers figures and tables per chapter and puts
  the backend and model into every caption; :func:`run_notices` gives the boxes a run needs
  (reference decider, near-chance model, failed headroom check).
* **Paper values.** :func:`load_paper_figures` reads ``data/paper_figures.yaml`` (every number
  of SPEC section 10); :func:`paper_vs_suite` sets each beside this suite's value, the paper's in
  columns labelled ``paper``.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

ROOT = Path(os.environ.get("CROSSPROFILE_ROOT", Path(__file__).resolve().parents[1]))
PAPER_FIGURES = ROOT / "data" / "paper_figures.yaml"
REFERENCE = "reference decider"

#: The book's reference-decider grid: the paper's policies and controls plus the BAL repair.
REFERENCE_POLICIES = ("R1", "B4", "Random", "M1", "R1-rel", "R1-rel-oracle",
                      "R1-k7", "B4-k7", "Random-k7", "M1-k7", "R1-rel-k7",
                      "ALL:unlabeled", "ALL:shuffled", "R1:unlabeled", "B4:unlabeled",
                      "EMPTY", "ALL", "REF", "private-only", "shared-only", "BAL", "BAL-oracle")
#: Provenance formats compared under a social-proof reference decider (SPEC 6 and issue 8).
FORMATS = ("full", "unlabeled", "shuffled", "first-speaker", "claim-id")
SOCIAL_PROOF_POLICIES = tuple(p if f == "full" else f"{p}:{f}" for p in ("ALL", "R1", "B4", "BAL")
                              for f in FORMATS) + ("Random", "R1-rel", "EMPTY")
GROUP_SIZE_POLICIES = ("R1", "B4", "Random", "M1", "R1-rel", "BAL", "ALL", "EMPTY")
#: The social-proof sweep of chapter 6 needs only the ALL memory in its formats (unbudgeted).
SWEEP_POLICIES = tuple(p if f == "full" else f"ALL:{f}" for p in ("ALL",) for f in FORMATS)
#: The stochastic reference decider of chapter 7 (parameter recovery of the social-proof fit).
FIT_POLICIES = ("R1", "B4", "Random", "R1-rel", "ALL", "ALL:unlabeled", "ALL:shuffled", "EMPTY")
#: What a language-model sample runs (EMPTY and ALL give its headroom check).
MODEL_POLICIES = ("R1", "B4", "Random", "R1-rel", "R1-rel-oracle", "BAL", "BAL-oracle", "ALL", "ALL:unlabeled", "EMPTY")
#: The model sample rerun with the 'labels are not evidence' decision prompt (chapter 12).
LABELS_PROMPT = "labels-not-evidence"
LABELS_POLICIES = ("ALL", "ALL:unlabeled")

#: The book's default parameters: every notebook's ``parameters`` cell holds the same literals
#: (a test checks it), and ``make book`` passes them (with any Make-variable overrides).
DEFAULTS = dict(
    runs_root="runs",
    templates=["templates"],
    seeds=[0, 1, 2],
    budgets=["0.4", "0.6", "0.8", "128t"],
    backend="llamacpp/smollm2-135m",
    model_templates=["templates/formal/hospital-equipment/hospital-equipment-01.yaml",
                     "templates/formal/school-meals/school-meals-01.yaml"],
    model_seeds=[0],
    model_budgets=["0.6"],
    model_variants=["PSP", "PSS", "SPP", "SPS"],
    n_resamples=10000,
    boot_seed=0,
    social_proof=0.5,
    social_proof_sweep=[0.25, 0.5, 1.0, 2.0],
    stochastic_beta=2.0,
    group_sizes=[3, 4, 6, 8],
    hiddenbench_path="",
    hb_seeds=[0, 1, 2],
    hb_model_seeds=[0],
    hb_model_protocols=["controlled", "natural"],
    hb_ablations=["baseline"],
    hb_model_limit=1,
)
#: Small parameters for tests and a quick look (seconds, reference decider only).
QUICK = dict(DEFAULTS, templates=["templates/dev"], seeds=[0], budgets=["0.6"], backend="",
             n_resamples=200, social_proof_sweep=[0.5], group_sizes=[3, 4])


def resolve(p: str | Path) -> Path:
    p = Path(p)
    return p if p.is_absolute() else ROOT / p


def slug(backend: str) -> str:
    """A folder name for a backend: ``llamacpp/smollm2-135m`` -> ``llamacpp-smollm2-135m``."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in backend).strip("-")


@dataclass
class Run:
    """One run folder: the tidy table (one row per decision) and its header."""

    path: Path
    df: pd.DataFrame
    header: dict
    boot: object = None  # the run's TemplateBootstrap, set by open_runs

    def _field(self, key: str) -> str:
        if key in self.header:
            return str(self.header[key])
        return str(self.df[key].iat[0]) if key in self.df.columns and len(self.df) else "?"

    @property
    def backend(self) -> str:
        return self._field("backend")

    @property
    def model(self) -> str:
        return self._field("model")

    @property
    def is_reference(self) -> bool:
        return self.backend == "ledger"

    @property
    def _extras(self) -> list[str]:
        cfg = self.header.get("config", {}) or {}
        out = []
        if cfg.get("n_agents", 4) != 4:
            out.append(f"{cfg['n_agents']} agents")
        dp = (cfg.get("backend_options") or {}).get("decision_prompt")
        if dp and dp != "default":
            out.append(f"decision prompt {dp}")
        return out

    @property
    def label(self) -> str:
        """Short name for legends and table columns (backend and model)."""
        extra = self._extras
        if self.is_reference:
            opts = self.header.get("config", {}).get("backend_options", {}) or {}
            extra = [f"{k.replace('_', ' ')} {v:g}" for k, v in sorted(opts.items()) if isinstance(v, (int, float))] + extra
            return f"{REFERENCE} (ledger{', ' + ', '.join(extra) if extra else ''})"
        return f"{self.backend} ({', '.join([self.header.get('decision_mode', '?') + ' mode'] + extra)})"

    @property
    def who(self) -> str:
        """The sentence every caption ends with."""
        extra = "".join(f"; {e}" for e in self._extras)
        if self.is_reference:
            return reference_who(self.model + extra)
        return (f"Backend: {self.backend}; model: {self.model}; decision mode: "
                f"{self.header.get('decision_mode', '?')}; tokenizer: {self.header.get('tokenizer', '?')}{extra}.")

    @property
    def n_templates(self) -> int:
        return int(self.df["template_id"].nunique())


def load_run(path: str | Path) -> Run:
    from .results import read_header, read_results
    p = resolve(path)
    return Run(p, read_results(p), read_header(p))


def _jsonable(x) -> object:
    return json.loads(json.dumps(x, default=str))


def ensure_run(path: str | Path, cfg, rerun: bool = False, progress: bool = False) -> Run:
    """Load the run in ``path``, running ``cfg`` first when the folder is missing or its
    ``run.json`` records another configuration."""
    from .runner import RunConfig, run_to_dir
    p = resolve(path)
    want = _jsonable(asdict(cfg))
    if not rerun and (p / "run.json").exists() and (p / "results.parquet").exists():
        have = json.loads((p / "run.json").read_text()).get("config")
        if have == want:
            return load_run(p)
    cfg = RunConfig(**{**asdict(cfg), "templates": [str(resolve(t)) if not Path(t).is_absolute() and
                                                    resolve(t).exists() else t for t in cfg.templates]})
    df, header = run_to_dir(cfg, p)
    header["config"] = want  # record the configuration as asked for (paths as given)
    (p / "run.json").write_text(json.dumps(header, indent=2, sort_keys=True, default=str) + "\n")
    return Run(p, df, header)


def reference_run(runs_root: str | Path = "runs", templates: Sequence[str] = ("templates",),
                  seeds: Sequence[int] = (0, 1, 2), budgets: Sequence[str] = ("0.4", "0.6", "0.8", "128t"),
                  social_proof: float = 0.0, n_agents: int = 4, policies: Optional[Sequence[str]] = None,
                  inverse_temperature: Optional[float] = None, name: Optional[str] = None) -> Run:
    """The reference decider's grid: ``runs/ledger``, ``runs/ledger-sp0.5`` (social-proof
    weight 0.5), ``runs/ledger-agents6`` (6 agents), ``runs/ledger-sp0.5-beta2`` (softmax with
    inverse temperature 2 instead of argmax)."""
    from .runner import RunConfig
    name = name or ("ledger" + (f"-sp{social_proof:g}" if social_proof else "") + (f"-agents{n_agents}" if n_agents != 4 else "")
            + (f"-beta{inverse_temperature:g}" if inverse_temperature is not None else ""))
    if policies is None:
        policies = SOCIAL_PROOF_POLICIES if social_proof else GROUP_SIZE_POLICIES if n_agents != 4 else REFERENCE_POLICIES
    opts = {"social_proof": float(social_proof)} if social_proof else {}
    if inverse_temperature is not None:
        opts["inverse_temperature"] = float(inverse_temperature)
    cfg = RunConfig(backend="ledger", templates=list(templates), seeds=list(seeds), budgets=list(budgets),
                    policies=list(policies), n_agents=n_agents, backend_options=opts)
    return ensure_run(Path(runs_root) / name, cfg)


def sweep_run(runs_root, templates, seeds, social_proof: float) -> Run:
    """The ALL memory in every provenance format, decided by a reference decider with
    social-proof weight ``social_proof`` (``runs/ledger-sp<s>-all``; chapter 6's sweep)."""
    return reference_run(runs_root, templates, seeds, ["0.6"], social_proof=social_proof, policies=SWEEP_POLICIES,
                         name=f"ledger-sp{social_proof:g}-all")


def fit_check_run(runs_root, templates, seeds, budgets, social_proof: float, inverse_temperature: float) -> Run:
    """A stochastic reference decider (softmax, known parameters) whose decisions the social-proof
    fit must recover (``runs/ledger-sp<s>-beta<b>``; chapter 7)."""
    return reference_run(runs_root, templates, seeds, budgets, social_proof=social_proof, policies=FIT_POLICIES,
                         inverse_temperature=inverse_temperature)


#: Why a model run was skipped (backend -> reason), for :func:`show_model_status`.
SKIPPED: dict = {}


def model_run(runs_root: str | Path, backend: str, templates: Sequence[str], seeds: Sequence[int] = (0,),
              budgets: Sequence[str] = ("0.6",), variants: Optional[Sequence[str]] = None,
              policies: Sequence[str] = MODEL_POLICIES, backend_options: Optional[dict] = None,
              suffix: str = "") -> Optional[Run]:
    """A language-model backend's run (``runs/<backend slug>``), or None when ``backend`` is
    empty or cannot be built here (the reason goes to :data:`SKIPPED`). Calls go through the
    backend's call cache: a finished grid makes no model calls."""
    from .runner import RunConfig
    from .variants import VARIANT_NAMES
    if not backend or backend == "ledger":
        return None
    cfg = RunConfig(backend=backend, templates=list(templates), seeds=list(seeds), budgets=list(budgets),
                    policies=list(policies), variants=list(variants or VARIANT_NAMES),
                    backend_options=dict(backend_options or {}))
    path = Path(runs_root) / (slug(backend) + (f"-{suffix}" if suffix else ""))
    try:
        return ensure_run(path, cfg)
    except (ImportError, FileNotFoundError, ValueError, OSError) as e:
        if (resolve(path) / "results.parquet").exists():
            SKIPPED[backend] = f"{type(e).__name__}: {e}; showing the stored run instead"
            return load_run(path)
        SKIPPED[backend] = f"{type(e).__name__}: {e}"
        return None


def labels_prompt_run(runs_root, backend, templates, seeds, budgets, variants) -> Optional[Run]:
    """The model sample's ALL memories decided with the 'labels are not evidence' decision
    prompt (``runs/<backend>-labels-not-evidence``; chapter 12)."""
    return model_run(runs_root, backend, templates, seeds, budgets, variants, policies=LABELS_POLICIES,
                     backend_options={"decision_prompt": LABELS_PROMPT}, suffix=LABELS_PROMPT)


def show_model_status(backend: str, run: Optional[Run]) -> None:
    """A box saying which language-model run this chapter shows, or why it shows none."""
    from IPython.display import display
    if not backend:
        display(admonition("note", "No language-model run on this page",
                           f"This page was built with the {REFERENCE} only (parameter <code>backend</code> is "
                           "empty). Chapter 9 shows how to rerun it on a model."))
    elif run is None:
        display(admonition("warning", f"{backend}: no run",
                           f"The model backend could not run here ({html.escape(SKIPPED.get(backend, 'unknown'))}); "
                           f"this page shows the {REFERENCE} only."))
    else:
        extra = f" ({html.escape(SKIPPED[backend])})" if backend in SKIPPED else ""
        display(admonition("note", f"Language-model sample: {run.label}",
                           f"{len(run.df)} decisions on {run.n_templates} templates, variants "
                           f"{', '.join(sorted(run.df['variant'].unique()))}, budgets "
                           f"{', '.join(sorted(run.df['budget_label'].unique()))}, from {html.escape(str(run.path.name))}"
                           f"{extra}."))


def prepare(params: dict, log=print) -> dict:
    """Run (or find) every experiment the chapters read, with the book's parameters."""
    import time
    out = {}
    p = params
    steps = [("ledger", lambda: reference_run(p["runs_root"], p["templates"], p["seeds"], p["budgets"]))]
    steps.append((f"ledger-sp{p['social_proof']:g}",
                  lambda: reference_run(p["runs_root"], p["templates"], p["seeds"], p["budgets"],
                                        social_proof=p["social_proof"])))
    for s in p["social_proof_sweep"]:
        steps.append((f"ledger-sp{s:g}-all", lambda s=s: sweep_run(p["runs_root"], p["templates"], p["seeds"], s)))
    for n in p["group_sizes"]:
        if n != 4:
            steps.append((f"ledger-agents{n}", lambda n=n: reference_run(p["runs_root"], p["templates"], p["seeds"],
                                                                        p["budgets"], n_agents=n)))
    steps.append((f"ledger-sp{p['social_proof']:g}-beta{p['stochastic_beta']:g}",
                  lambda: fit_check_run(p["runs_root"], p["templates"], p["seeds"], p["budgets"], p["social_proof"],
                                        p["stochastic_beta"])))
    steps.append(("hiddenbench-ledger", lambda: hiddenbench_run(p["runs_root"], "ledger", p["hiddenbench_path"],
                                                                ["controlled"], p["hb_seeds"])))
    if p.get("backend"):
        steps.append((slug(p["backend"]), lambda: model_run(p["runs_root"], p["backend"], p["model_templates"],
                                                            p["model_seeds"], p["model_budgets"], p["model_variants"])))
        steps.append((f"{slug(p['backend'])}-{LABELS_PROMPT}",
                      lambda: labels_prompt_run(p["runs_root"], p["backend"], p["model_templates"], p["model_seeds"],
                                                p["model_budgets"], p["model_variants"])))
        steps.append((f"hiddenbench-{slug(p['backend'])}",
                      lambda: hiddenbench_run(p["runs_root"], p["backend"], p["hiddenbench_path"],
                                              p["hb_model_protocols"], p["hb_model_seeds"], p["hb_ablations"],
                                              p["hb_model_limit"] or None)))
    for name, fn in steps:
        t0 = time.perf_counter()
        out[name] = fn()
        key = ("hiddenbench:ledger" if name == "hiddenbench-ledger" else
               f"hiddenbench:{p['backend']}" if name.startswith("hiddenbench") else p.get("backend", ""))
        why = SKIPPED.get(key, "")
        log(f"{name}: {time.perf_counter() - t0:.1f} s" + (f" (skipped: {why})"
                                                           if out[name] is None else ""))
    return out


def unit_column(df: pd.DataFrame) -> str:
    """The resampling unit: the template (CrossProfile) or the task (HiddenBench)."""
    return "template_id" if "template_id" in df.columns else "task_id"


def bootstrap(run, n_resamples: int = 10_000, seed: int = 0):
    """The template bootstrap shared by every statistic of one run (``(B, T)`` count matrix);
    HiddenBench tables resample tasks."""
    from .stats.bootstrap import TemplateBootstrap
    df = run.df if hasattr(run, "df") else run
    return TemplateBootstrap.draw(df[unit_column(df)].astype(str).unique(), n_resamples, np.random.default_rng(seed))


# --------------------------------------------------------------------------- display helpers
def _html(s: str):
    from IPython.display import HTML
    return HTML(s)


def admonition(kind: str, title: str, body: str):
    """A visible box (``note``, ``warning``, ``important``, ``tip``) that renders in Jupyter
    and in the book. ``body`` is HTML."""
    return _html(f'<div class="admonition {kind}"><p class="admonition-title">{html.escape(title)}</p>'
                 f"<p>{body}</p></div>")


def reference_who(model: str) -> str:
    """Caption sentence for results computed directly by the reference decider (no run folder)."""
    return (f"Backend: ledger, the {REFERENCE} (a normative evidence counter, not a language model); "
            f"model: {model}.")


def _who_all(runs) -> str:
    """Caption sentence(s) for ``runs``: Run objects, or strings used as they are."""
    runs = [r for r in (runs if isinstance(runs, (list, tuple)) else [runs]) if r is not None]
    return " ".join(dict.fromkeys(r if isinstance(r, str) else r.who for r in runs))


class Captions:
    """Numbered captions for one chapter; each names the backend and model of its runs."""

    def __init__(self, chapter: int | str):
        self.chapter, self._n = chapter, {"Figure": 0, "Table": 0}

    def _next(self, kind: str) -> str:
        self._n[kind] += 1
        return f"{kind} {self.chapter}.{self._n[kind]}"

    def text(self, kind: str, text: str, runs) -> str:
        return f"{self._next(kind)}. {text} {_who_all(runs)}".strip()

    def figure(self, text: str, runs):
        num = self._next("Figure")
        return _html(f'<p class="caption cp-caption"><strong>{num}.</strong> '
                     f"{html.escape((text + ' ' + _who_all(runs)).strip())}</p>")

    def table(self, df: pd.DataFrame, text: str, runs, fmt: Optional[str | dict] = None, precision: int = 1,
              gradient: Optional[Sequence[str]] = None, hide_index: bool = False):
        """A pandas Styler with the caption (and optional colour gradient over ``gradient`` columns)."""
        st = df.style.set_caption(html.escape(self.text("Table", text, runs)))
        st = st.format(fmt, precision=precision, na_rep="–") if fmt is not None else st.format(precision=precision,
                                                                                              na_rep="–")
        if gradient is not None:
            st = st.background_gradient(cmap="RdYlGn", subset=list(gradient), vmin=0, vmax=100)
        if hide_index:
            st = st.hide(axis="index")
        return st.set_table_styles([{"selector": "caption",
                                     "props": "caption-side: top; text-align: left; font-weight: bold;"}])


def show_figure(fig, caption) -> None:
    """Display a matplotlib figure, then its caption; close the figure."""
    import matplotlib.pyplot as plt
    from IPython.display import display
    display(fig)
    plt.close(fig)
    display(caption)


def near_chance_name(name: str) -> bool:
    """Models known to decide near chance (SmolLM2-135M)."""
    return "smollm2-135m" in name.lower()


def near_chance(run: Run) -> bool:
    return near_chance_name(run.backend + run.model)


#: Fewer templates than this and a run's template-bootstrap intervals get a warning: resampling
#: k templates gives at most C(2k-1, k) distinct samples (3 for k = 2), so the intervals say little.
MIN_TEMPLATES_FOR_INTERVALS = 10


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def run_notices(run: Optional[Run], boot=None, min_points: float = 15.0) -> list:
    """Boxes to show above a run's results: what the reference decider is; that SmolLM2-135M
    decides near chance; a warning when the headroom check (ALL - EMPTY) fails; a warning when the
    run has too few templates for its bootstrap intervals to mean much."""
    if run is None:
        return []
    out = []
    k = int(run.df["template_id"].nunique()) if "template_id" in run.df.columns else 0
    if boot is not None and 0 < k < MIN_TEMPLATES_FOR_INTERVALS:
        out.append(admonition("warning", f"Only {_count(k, 'template')}: intervals are not reliable",
                              f"{html.escape(run.label)} ran on {_count(k, 'template')}. Every 95% "
                              "interval below resamples templates, and with so few the intervals (and the headroom "
                              f"check) say little; read them as descriptive. Run at least {MIN_TEMPLATES_FOR_INTERVALS} "
                              "templates (e.g. TEMPLATES=templates/formal) for intervals worth quoting."))
    if run.is_reference:
        out.append(admonition("note", f"Results of the {REFERENCE}",
                              f"These numbers come from the {REFERENCE} ({html.escape(run.model)}), a normative "
                              "evidence counter that scores each option by the kept facts' polarities. It is not a "
                              "model of any LLM: it shows what the memory makes possible, never what a model does."))
    if near_chance(run):
        out.append(admonition("important", "SmolLM2-135M decides near chance",
                              f"{html.escape(run.backend)} is a 135-million-parameter model that runs on any CPU. "
                              "Its decisions are close to chance (one in three), so its differences between "
                              "policies are mostly noise; it is here to show the pipeline runs end to end on a "
                              "real model, not to estimate the paper's effects."))
    if boot is not None and {"ALL", "EMPTY"} <= set(run.df["policy"]):
        from .stats.tables import headroom
        h = headroom(run.df, boot, min_points)
        if not h["passed"]:
            out.append(admonition("warning", "Headroom check failed: exploratory results",
                                  f"ALL - EMPTY = {h['estimate']:.1f} points [{h['lo']:.1f}, {h['hi']:.1f}] for "
                                  f"{html.escape(run.label)}; the lower bound must exceed {min_points:g} points. "
                                  "Every result of this run below is exploratory."))
    return out


def show_notices(run: Optional[Run], boot=None) -> None:
    from IPython.display import display
    for box in run_notices(run, boot):
        display(box)


def fmt_ci(est, lo, hi, digits: int = 1) -> str:
    if est is None or (isinstance(est, float) and np.isnan(est)):
        return "–"
    return f"{est:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def ci_pivot(t: pd.DataFrame, index: str | list, columns: str | list, digits: int = 1) -> pd.DataFrame:
    """Pivot a long ``estimate/lo/hi`` table into cells ``'est [lo, hi]'``."""
    t = t.assign(_ci=[fmt_ci(e, l, h, digits) for e, l, h in zip(t["estimate"], t["lo"], t["hi"])])
    out = t.pivot_table(index=index, columns=columns, values="_ci", aggfunc="first", sort=False)
    out.columns.name = columns if isinstance(columns, str) else None
    return out


def details(summary: str, body_html: str, open_: bool = False):
    """A collapsible HTML block (no JavaScript)."""
    return _html(f"<details{' open' if open_ else ''}><summary>{html.escape(summary)}</summary>{body_html}</details>")


#: The modules whose documentation states a choice the paper leaves open (chapter 3).
SILENT_CHOICES = (
    ("crossprofile_lib.tokenizer", "Tokenizer: a file-free default that prices labels like a byte-level BPE"),
    ("crossprofile_lib.variants", "Private facts: how they are dealt to agents"),
    ("crossprofile_lib.discussion", "Scripted discussion and claim list"),
    ("crossprofile_lib.budgets", "Budgets: what T_all prices"),
    ("crossprofile_lib.policies", "Policies: greedy first-fit, M1 rotation, fixed-k, formats"),
    ("crossprofile_lib.provenance", "Label controls and count-free formats"),
    ("crossprofile_lib.decider", "The reference decider, tie-breaking with common random numbers"),
    ("crossprofile_lib.balance", "BAL, the balance-aware memory"),
    ("crossprofile_lib.evidence", "Net lead and irrelevant-fact tone"),
    ("crossprofile_lib.rng", "Seeded random streams"),
    ("crossprofile_lib.backends.llamacpp", "The embedded model and its decision mode"),
    ("crossprofile_lib.stats.netlead", "The net-lead regression"),
    ("crossprofile_lib.stats.socialproof", "The fitted social-proof weight"),
)


def docstring_html(module: str) -> str:
    """A module's documentation as preformatted HTML (an import failure is said, not raised)."""
    import importlib
    import inspect
    try:
        doc = inspect.getdoc(importlib.import_module(module)) or "(no documentation)"
    except Exception as e:  # an optional backend may be missing here
        doc = f"(module {module} cannot be imported here: {type(e).__name__}: {e})"
    return (f"<p><code>{html.escape(module)}</code></p>"
            f"<pre style='white-space: pre-wrap'>{html.escape(doc)}</pre>")


def open_runs(runs_root, templates, seeds, budgets, backend, model_templates, model_seeds, model_budgets,
              model_variants, n_resamples: int = 10_000, boot_seed: int = 0, show: bool = True):
    """The chapter's two runs: the reference decider's grid and the language-model sample (or
    None), each with its template bootstrap attached (``run.boot``); shows their notices."""
    ref = reference_run(runs_root, templates, seeds, budgets)
    model = model_run(runs_root, backend, model_templates, model_seeds, model_budgets, model_variants)
    for r in (ref, model):
        if r is not None:
            r.boot = bootstrap(r, n_resamples, boot_seed)
    if show:
        show_notices(ref, ref.boot)
        show_model_status(backend, model)
        show_notices(model, model.boot if model is not None else None)
    return ref, model


def social_proof_fit(run: Run, fit_resamples: Optional[int] = 1000) -> dict:
    """Fit the reference decider's (social proof, irrelevant weight, inverse temperature) to a
    run's decisions (:mod:`crossprofile_lib.stats.socialproof`), memories rebuilt from its config."""
    from .rebuild import rebuild_choice_data
    from .stats.socialproof import fit_social_proof
    cfg = run.header.get("config", {})
    paths = [str(resolve(t)) for t in cfg.get("templates", ["templates"])]
    data, info = rebuild_choice_data(run.df, cfg, templates=paths)
    out = fit_social_proof(data, run.boot if run.boot is not None else bootstrap(run, fit_resamples or 1000),
                           fit_resamples)
    out["rebuild"] = info
    return out


# --------------------------------------------------------------------------- HiddenBench (chapter 8)
@dataclass
class HBRun:
    """A HiddenBench run folder: its header and, per protocol, its tables."""

    path: Path
    header: dict
    tables: dict

    @property
    def backend(self) -> str:
        return str(self.header.get("backend", "?"))

    @property
    def model(self) -> str:
        return str(self.header.get("model", "?"))

    @property
    def is_reference(self) -> bool:
        return self.backend == "ledger"

    @property
    def label(self) -> str:
        return (f"{REFERENCE} (ledger)" if self.is_reference else
                f"{self.backend} ({self.header.get('decision_mode', '?')} mode)")

    @property
    def who(self) -> str:
        src = self.header.get("data_source", "?")
        base = reference_who(self.model) if self.is_reference else (
            f"Backend: {self.backend}; model: {self.model}; decision mode: {self.header.get('decision_mode', '?')}.")
        return f"{base} Data: {src}."

    def decisions(self, protocol: str = "controlled") -> pd.DataFrame:
        return self.tables.get(protocol, {}).get("decisions", pd.DataFrame())


def hiddenbench_run(runs_root: str | Path, backend: str = "ledger", path: str = "", protocols=("controlled",),
                    seeds=(0, 1, 2), ablations=None, limit: Optional[int] = None,
                    policies: Optional[Sequence[str]] = None) -> Optional[HBRun]:
    """Run (or resume) HiddenBench into ``runs/hiddenbench-<backend>``; None when ``backend``
    cannot run here (reason in :data:`SKIPPED`). ``path`` = "" uses $HIDDENBENCH_PATH or the
    project's fixture; the file is read in place, never copied."""
    try:
        from .hiddenbench import DEFAULT_ABLATIONS, HBConfig, read_tables, run_hiddenbench
        from .hiddenbench.run import HEADER
    except ImportError as e:
        SKIPPED[f"hiddenbench:{backend}"] = f"the HiddenBench library is not available ({e})"
        return None
    kw = dict(backend=backend or "ledger", hiddenbench=path or None, protocols=tuple(protocols), seeds=tuple(seeds),
              ablations=tuple(ablations or DEFAULT_ABLATIONS), limit=limit)
    if policies:
        kw["policies"] = tuple(policies)
    cfg = HBConfig(**kw)
    out = resolve(Path(runs_root) / f"hiddenbench-{slug(backend or 'ledger')}")
    want = _jsonable(asdict(cfg))
    hdr = out / HEADER
    try:
        if not (hdr.exists() and json.loads(hdr.read_text()).get("config") == want):
            run_hiddenbench(cfg, out)
    except (ImportError, FileNotFoundError, ValueError, OSError) as e:
        SKIPPED[f"hiddenbench:{backend}"] = f"{type(e).__name__}: {e}"
        if not hdr.exists():
            return None
    header = json.loads(hdr.read_text())
    tables = {}
    for p in protocols:
        try:
            tables[p] = read_tables(out, p)
        except FileNotFoundError:
            pass
    return HBRun(out, header, tables)


def data_source_box(hb: HBRun):
    """The visible box naming HiddenBench's data source: the fixture or the user's file."""
    h = hb.header
    used, total = h.get("n_tasks"), h.get("n_tasks_in_file", h.get("n_tasks"))
    subset = f"; this run used {used} of its {total} valid tasks" if used != total else ""
    if isinstance(used, int) and used < MIN_TEMPLATES_FOR_INTERVALS:
        subset += (f"; its intervals resample only {_count(used, 'task')} and say little "
                   f"(fewer than {MIN_TEMPLATES_FOR_INTERVALS})")
    if h.get("data_is_fixture"):
        return admonition("warning", "Data source: the project's FIXTURE, not HiddenBench",
                          "These HiddenBench results were computed on <code>tests/fixtures/hiddenbench_fixture.json"
                          f"</code> (tasks written for this project in the public file's format{subset}). "
                          "They test the pipeline; they are not results on the public benchmark. Give the public "
                          "<code>benchmark_all_clean.json</code> with the parameter <code>hiddenbench_path</code> or "
                          "<code>HIDDENBENCH_PATH</code> (it is never bundled or copied).")
    return admonition("note", f"Data source: {html.escape(str(h.get('data_source')))}",
                      f"The user's HiddenBench file <code>{html.escape(Path(str(h.get('data_path', ''))).name)}</code> "
                      f"(sha256 {html.escape(str(h.get('data_sha256', ''))[:16])}…, {total} valid tasks, "
                      f"{len(h.get('malformed_records', []))} malformed{subset}), read in place.")


#: The pseudo-policy under which :func:`hb_natural_as_run` files each session's group vote.
GROUP_VOTE = "group vote"


def hb_natural_as_run(hb: Optional[HBRun]) -> Optional[Run]:
    """The natural discussion as one :class:`Run` for the paper comparison (resampling unit: the
    task): the decided memory-policy rows, plus one row per session under the pseudo-policy
    ``"group vote"`` (``correct`` = the majority vote was right, ``budget_label`` ``none``) that
    also carries the session's ``disclosure_rate``. None without a natural run."""
    if hb is None or "natural" not in hb.tables:
        return None
    decided = hb_as_run(hb, "natural")
    s = hb.tables["natural"].get("sessions", pd.DataFrame())
    parts = [decided.df] if decided is not None else []
    if not s.empty:
        parts.append(pd.DataFrame({"task_id": s["task_id"], "seed": s["seed"], "ablation": s["ablation"],
                                   "policy": GROUP_VOTE, "budget_label": "none",
                                   "correct": s["group_correct"].astype(bool),
                                   "disclosure_rate": s["disclosure_rate"].astype(float)}))
    if not parts:
        return None
    return Run(hb.path, pd.concat(parts, ignore_index=True), dict(hb.header, config={}))


def hb_as_run(hb: Optional[HBRun], protocol: str = "controlled") -> Optional[Run]:
    """A HiddenBench protocol's decided rows as a :class:`Run` (resampling unit: the task), or
    None when nothing was decided (the reference decider makes no HiddenBench decisions)."""
    if hb is None:
        return None
    d = hb.decisions(protocol)
    if d.empty or "decided" not in d or not d["decided"].any():
        return None
    d = d[d["decided"].astype(bool)].copy()
    d["correct"] = d["correct"].astype(bool)
    return Run(hb.path, d, dict(hb.header, config={}))
