"""The runs the book reads: :class:`Run` is one run folder (results table and ``run.json``).

:func:`ensure_run` loads a folder recording the configuration asked for and runs it otherwise; a folder holding
**another** configuration is never overwritten (the run goes to ``<name>-<digest>``, under the folder's lock).
:func:`model_run` returns ``None`` for a backend that cannot run here and records why in ``skipped``. The ``ledger``
backend is the *reference decider*, never a model; where :data:`REFERENCE_TOKENIZER` cannot be had its budgets are
priced offline and :attr:`Run.pricing_note` says so."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from crossprofile_lib.design import GROUP_SIZE_POLICIES, MODEL_POLICIES, PRIMARY_BUDGET, REFERENCE_POLICIES, SOCIAL_PROOF_POLICIES
from crossprofile_lib.paths import checkout_root, file_sha256
from crossprofile_lib.policies.plugins import sources as plugin_sources
from crossprofile_lib.run.config import protocol_free
from crossprofile_lib.run.results import read_header, read_results, template_hashes
from crossprofile_lib.run.runner import RunConfig, run_to_dir
from crossprofile_lib.safety.outputs import locked_dir, write_text_atomic
from crossprofile_lib.stats.bootstrap import TemplateBootstrap
from crossprofile_lib.task.templates import template_paths
from crossprofile_lib.task.tokenizer import OfflineTokenizer, get_tokenizer
from crossprofile_lib.task.variants import VARIANT_NAMES, Variant
from crossprofile_lib.task.vocabs import VocabUnavailable

ROOT = checkout_root() or Path.cwd()
REFERENCE = "reference decider"
#: The tokenizer the book's reference grid prices its budgets with: the paper's primary model's (Qwen2.5).
REFERENCE_TOKENIZER = "qwen2.5"
#: The model sample rerun with the 'labels are not evidence' decision prompt (chapter 12).
LABELS_PROMPT = "labels-not-evidence"


def resolve(p: str | Path) -> Path:
    p = Path(p)
    return p if p.is_absolute() else ROOT / p


def slug(backend: str) -> str:
    """A folder name for a backend: ``llamacpp/smollm2-135m`` -> ``llamacpp-smollm2-135m``."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in backend).strip("-")


def reference_who(model: str) -> str:
    """The sentence naming the reference decider as the source of a result."""
    return (f"Backend: ledger, the {REFERENCE} (a normative evidence counter, not a language model); "
            f"model: {model}.")


def model_who(backend: str, model: str, header: dict, extra: str = "") -> str:
    """The sentence naming a language model's backend, model, decision mode and tokenizer, with `` (budgets priced
    with ...)`` when its budgets were not priced with the model's own tokenizer."""
    src = str(header.get("tokenizer_source") or "")
    note = f" (budgets priced with the {src})" if src.startswith("offline approximation") else ""
    return (f"Backend: {backend}; model: {model}; decision mode: {header.get('decision_mode', '?')}; "
            f"tokenizer: {header.get('tokenizer', '?')}{note}{extra}.")


@dataclass
class Run:
    """One run folder: the tidy table (one row per decision) and its header."""

    path: Path
    df: pd.DataFrame
    header: dict
    boot: object = None  # the run's TemplateBootstrap, set by the chapter preamble
    #: Why the offline approximation priced this run instead of the tokenizer asked for ("" when it did not).
    pricing_note: str = ""
    tag: str = ""  # set where two runs of one book would share a label (the folder name)
    #: Why the table does not match its run.json, when imported with --trust-edited ("" when it does): shown in
    #: its label and sentence on every page.
    unverified: str = ""

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
        if cfg.get("protocol", "scripted") != "scripted":  # the messy protocol and its extraction level
            out.append(f"messy protocol, {cfg.get('extraction', '?')} extraction, opinion rate "
                       f"{float(cfg.get('opinion_rate', 0)):g}")
        dp = (cfg.get("backend_options") or {}).get("decision_prompt")
        if dp and dp != "default":
            out.append(f"decision prompt {dp}")
        return out

    @property
    def label(self) -> str:
        """Short name for legends, table columns and captions (backend and model; ``· tag`` where set)."""
        extra, tag = self._extras, (f" · {self.tag}" if self.tag else "") + (" · UNVERIFIED" if self.unverified else "")
        if self.is_reference:
            opts = self.header.get("config", {}).get("backend_options", {}) or {}
            extra = [f"{k.replace('_', ' ')} {v:g}" for k, v in sorted(opts.items()) if isinstance(v, (int, float))] + extra
            if self.pricing_note:
                extra.append("offline pricing")
            return f"{REFERENCE} (ledger{', ' + ', '.join(extra) if extra else ''}){tag}"
        return f"{self.backend} ({', '.join([self.header.get('decision_mode', '?') + ' mode'] + extra)}){tag}"

    @property
    def who(self) -> str:
        """The full sentence naming backend, model, decision mode and tokenizer."""
        extra = "".join(f"; {e}" for e in self._extras)
        if self.unverified:
            extra += f"; {self.unverified}"
        if self.is_reference:
            tok = self.header.get("tokenizer", "?")
            priced = (f" Budgets priced with the offline approximation ({tok}): {self.pricing_note}."
                      if self.pricing_note else f" Budgets priced with tokenizer {tok}.")
            return reference_who(self.model + extra) + priced
        return model_who(self.backend, self.model, self.header, extra)

    @property
    def n_templates(self) -> int:
        return int(self.df["template_id"].nunique())

    @property
    def budgets(self) -> list[str]:
        """The run's budget labels (``none`` left out)."""
        if "budget_label" not in self.df.columns:
            return []
        return sorted(b for b in self.df["budget_label"].astype(str).unique() if b != "none")

    @property
    def variants(self) -> list[str]:
        return sorted(self.df["variant"].unique()) if "variant" in self.df.columns else []

    @property
    def seeds(self) -> list[int]:
        """The run's seeds, sorted."""
        return sorted(int(s) for s in self.df["seed"].unique()) if "seed" in self.df.columns else []

    @property
    def seed_list(self) -> str:
        """``"0, 1, 2"``: the run's seeds for a caption."""
        return ", ".join(map(str, self.seeds))


def primary_budget(run: Optional[Run], wanted: str = PRIMARY_BUDGET) -> tuple[str, str]:
    """``(budget, notice)``: ``wanted`` when the run has it, else the run's first ratio budget (notice says so)."""
    have = run.budgets if run is not None else []
    if not have or wanted in have:
        return wanted, ""
    ratios = [b for b in have if not b.endswith("t")]
    use = (ratios or have)[0]
    return use, (f"this run has no r = {wanted} (its budgets: {', '.join(have)}); its results are shown at "
                 f"r = {use} instead, where the paper's values (at r = {wanted}) are not comparable")


def with_cells(df: pd.DataFrame) -> pd.DataFrame:
    """``cell`` and ``pooled_cell`` recomputed from ``variant`` (a run folder from before SPEC section 3's revision)."""
    if "variant" not in df.columns:
        return df
    names = df["variant"].astype(str)
    cells = {v: Variant(v) for v in names.unique() if len(v) == 3 and set(v) <= {"P", "S"}}
    if not cells:
        return df
    return df.assign(cell=names.map(lambda v: cells[v].cell if v in cells else "other"),
                     pooled_cell=names.map(lambda v: cells[v].pooled_cell if v in cells else "other"))


def load_run(path: str | Path) -> Run:
    p = resolve(path)
    return Run(p, with_cells(read_results(p)), read_header(p))


def _jsonable(x) -> object:
    return json.loads(json.dumps(x, default=str))


def config_digest(config: dict) -> str:
    """8 hex digits naming a configuration (the suffix of a rerun's own folder)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:8]


def _stored(folder: Path, header: str = "run.json") -> Optional[dict]:
    """A stored run's header (None: no readable run there)."""
    try:
        return json.loads((folder / header).read_text())
    except (OSError, ValueError):
        return None


def _stored_config(folder: Path, header: str = "run.json") -> Optional[dict]:
    return (_stored(folder, header) or {}).get("config")


def _stored_policy_files(folder: Path, header: str = "run.json") -> Optional[list]:
    """The ``policy_files`` a stored run records (None: no run there)."""
    h = _stored(folder, header)
    return None if h is None else _jsonable(h.get("policy_files", []))


def own_folder(path: Path, want: dict, header: str = "run.json") -> Path:
    """``path`` when it is empty or holds ``want``; else the sibling ``<name>-<digest>``."""
    have = _stored_config(path, header)
    return path if have is None or have == want else path.with_name(f"{path.name}-{config_digest(want)}")


def _stamp(cfg) -> tuple:
    """The template files ``cfg.templates`` names with their modification times (a cache key)."""
    paths = tuple(str(resolve(t)) for t in cfg.templates)
    return paths, tuple(sorted((str(f), f.stat().st_mtime_ns) for t in paths for f in
                               (Path(t).rglob("*.yaml") if Path(t).is_dir() else [Path(t)])))


def _hashes(cfg) -> dict:
    """Template id -> sha256 of the files ``cfg.templates`` names now (cached while no file changes)."""
    try:
        return dict(_hashes_at(*_stamp(cfg)))
    except OSError:
        return {}


@lru_cache(maxsize=64)
def _hashes_at(paths: tuple, stamp: tuple) -> tuple:
    try:
        return tuple(sorted(template_hashes(list(paths)).items()))
    except (OSError, ValueError):
        return ()


@lru_cache(maxsize=64)
def _file_hashes_at(paths: tuple, stamp: tuple) -> frozenset:
    try:
        return frozenset(file_sha256(p) for p in template_paths(list(paths)))
    except (OSError, ValueError):
        return frozenset()


def _same_templates(folder: Path, cfg) -> bool:
    """Whether the run in ``folder`` answered the template files as they are now (unrecorded: yes). A template's id
    is read from its bytes, so the recorded id -> sha256 map equals today's exactly when the two sets of file hashes
    are equal: compared without parsing a template (60 parses cost every chapter seconds)."""
    stored = (_stored(folder) or {}).get("templates_sha256")
    if not isinstance(stored, dict):
        return True
    try:
        return set(stored.values()) == _file_hashes_at(*_stamp(cfg))
    except OSError:
        return stored == {}


def ensure_run(path: str | Path, cfg, rerun: bool = False, progress: bool = False) -> Run:
    """Load the run of ``cfg`` from ``path`` when its ``run.json`` records ``cfg``, else run it (into a sibling
    ``path-<digest>`` when ``path`` holds another configuration; ``rerun=True`` reruns into ``path``)."""
    want = _jsonable(protocol_free(asdict(cfg)))
    p = resolve(path) if rerun else own_folder(resolve(path), want)
    mine = plugin_sources(cfg.policies)  # policies of your own: a stored run counts only with the same file hashes
    if mine and not rerun and _stored_policy_files(p) not in (None, mine):
        p = p.with_name(f"{p.name}-{config_digest({'config': want, 'policy_files': mine})}")

    def holds(folder: Path) -> bool:
        return (_stored_config(folder) == want and (folder / "results.parquet").exists()
                and (not mine or _stored_policy_files(folder) == mine))
    if not rerun and holds(p):
        if _same_templates(p, cfg):
            return load_run(p)
        # a template file changed since: neither read nor overwrite the old answers (a folder of its own)
        p = p.with_name(f"{p.name}-{config_digest({'config': want, 'templates_sha256': _hashes(cfg)})}")
        if holds(p) and _same_templates(p, cfg):
            return load_run(p)
    cfg = RunConfig(**{**asdict(cfg), "templates": [str(resolve(t)) if not Path(t).is_absolute() and
                                                    resolve(t).exists() else t for t in cfg.templates]})
    p.mkdir(parents=True, exist_ok=True)
    with locked_dir(p):
        df, header = run_to_dir(cfg, p)
        header["config"] = want  # record the configuration as asked for (paths as given)
        write_text_atomic(p / "run.json", json.dumps(header, indent=2, sort_keys=True, default=str) + "\n")
    return Run(p, with_cells(df), header)


def reference_tokenizer(name: Optional[str]) -> tuple[Optional[str], str]:
    """The reference grid's tokenizer for the book parameter ``tokenizer``, and why the offline
    approximation stands in for it (``""`` when it does not); ``None``/``""``/``offline`` ask for the approximation.
    A name no rule knows raises :class:`ValueError` naming it."""
    if name is None or str(name).strip() in ("", "offline", OfflineTokenizer.name):
        return None, ""
    name = str(name).strip()
    try:
        get_tokenizer(name)
    except (VocabUnavailable, ImportError, OSError) as e:
        return None, f"{name}'s tokenizer is not available here ({type(e).__name__}: {e})"
    except ValueError as e:
        raise ValueError(f"book parameter tokenizer = {name!r}: {e}") from None
    return name, ""


def reference_run(runs_root: str | Path = "runs", templates: Sequence[str] = ("templates/formal",),
                  seeds: Sequence[int] = (0, 1, 2), budgets: Sequence[str] = ("0.4", "0.6", "0.8", "128t"),
                  social_proof: float = 0.0, n_agents: int = 4, policies: Optional[Sequence[str]] = None,
                  inverse_temperature: Optional[float] = None, name: Optional[str] = None,
                  variants: Optional[Sequence[str]] = None, tokenizer: Optional[str] = None) -> Run:
    """The reference decider's grid (``runs/ledger``, ``-sp0.5``, ``-agents6``, ``-sp0.5-beta2``), budgets priced
    with ``tokenizer`` (None: offline; see :func:`reference_tokenizer`)."""
    tokenizer, why = reference_tokenizer(tokenizer)
    name = name or ("ledger" + (f"-sp{social_proof:g}" if social_proof else "") + (f"-agents{n_agents}" if n_agents != 4 else "")
                    + (f"-beta{inverse_temperature:g}" if inverse_temperature is not None else ""))
    if policies is None:
        policies = SOCIAL_PROOF_POLICIES if social_proof else GROUP_SIZE_POLICIES if n_agents != 4 else REFERENCE_POLICIES
    opts = {"social_proof": float(social_proof)} if social_proof else {}
    if inverse_temperature is not None:
        opts["inverse_temperature"] = float(inverse_temperature)
    cfg = RunConfig(backend="ledger", templates=list(templates), seeds=list(seeds), budgets=list(budgets),
                    policies=list(policies), variants=list(variants or VARIANT_NAMES), n_agents=n_agents,
                    backend_options=opts, tokenizer=tokenizer)
    run = ensure_run(Path(runs_root) / name, cfg)
    run.pricing_note = why
    return run


#: What goes wrong when a model backend cannot run here (a missing library, file or key).
UNAVAILABLE = (ImportError, FileNotFoundError, ValueError, OSError)


def model_run(runs_root: str | Path, backend: str, templates: Sequence[str], seeds: Sequence[int] = (0,),
              budgets: Sequence[str] = (PRIMARY_BUDGET,), variants: Optional[Sequence[str]] = None,
              policies: Sequence[str] = MODEL_POLICIES, backend_options: Optional[dict] = None,
              suffix: str = "", skipped: Optional[dict] = None) -> Optional[Run]:
    """A backend's run (``runs/<backend slug>``), or None when it is empty or cannot be built here (the reason goes
    to ``skipped[backend]``); a finished grid makes no model calls (the call cache)."""
    skipped = {} if skipped is None else skipped
    if not backend or backend == "ledger":
        return None
    cfg = RunConfig(backend=backend, templates=list(templates), seeds=list(seeds), budgets=list(budgets),
                    policies=list(policies), variants=list(variants or VARIANT_NAMES),
                    backend_options=dict(backend_options or {}))
    path = Path(runs_root) / (slug(backend) + (f"-{suffix}" if suffix else ""))
    try:
        return ensure_run(path, cfg)
    except UNAVAILABLE as e:
        stored = own_folder(resolve(path), _jsonable(protocol_free(asdict(cfg))))
        if (stored / "results.parquet").exists():
            skipped[backend] = f"{type(e).__name__}: {e}; showing the stored run instead"
            return load_run(stored)
        skipped[backend] = f"{type(e).__name__}: {e}"
        return None


def n_rows(run) -> int:
    """A run's decision rows (a HiddenBench run: over its protocols)."""
    return len(run.df) if hasattr(run, "df") else sum(len(t.get("decisions", ())) for t in run.tables.values())


def unit_column(df: pd.DataFrame) -> str:
    """The resampling unit: the template (CrossProfile) or the task (HiddenBench)."""
    return "template_id" if "template_id" in df.columns else "task_id"


def bootstrap(run, n_resamples: int = 10_000, seed: int = 0):
    """The template bootstrap shared by every statistic of one run (HiddenBench resamples tasks)."""
    df = run.df if hasattr(run, "df") else run
    return TemplateBootstrap.draw(df[unit_column(df)].astype(str).unique(), n_resamples, np.random.default_rng(seed))


