"""Many models in one book: model specs (``BACKENDS=``), imported run folders (``RUNS=``), which paper model a run
is, and each model's headroom verdict.

* A **model spec** (:class:`ModelSpec`) is ``provider/model[@options]``: ``templates``, ``seeds``, ``budgets``,
  ``variants`` separated by ``;``, items by ``+`` (or ``,``), ``opt.NAME=VALUE`` a backend option, e.g.
  ``deepseek/deepseek-v4-pro@templates=templates/formal;seeds=0+1+2``; an option not given is the book's ``model_*``
  parameter. In ``BACKENDS=a,b`` a comma starts a new spec only before a known provider (:func:`split_backends`).
* An **imported run** (:func:`import_run`) is read in place with zero model calls; refused (:class:`RunImportError`)
  when its header does not match its results or a template differs from the file of the same id here.
* **Which paper model** a run is comes from ONE file, ``resources/paper_models.yaml`` (:func:`paper_model_for`)."""

from __future__ import annotations

import re
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Optional

import yaml

from crossprofile_lib.backends import PROVIDERS, check_backend_spec
from crossprofile_lib.book.hbruns import HBRun
from crossprofile_lib.book.runs import REFERENCE, Run, resolve, with_cells
from crossprofile_lib.config import Budget, check_seed, check_variants
from crossprofile_lib.design import HEADROOM_MIN_POINTS, MODEL_POLICIES, PRIMARY_BUDGET
from crossprofile_lib.hiddenbench.run import HEADER as HB_HEADER
from crossprofile_lib.hiddenbench.run import read_tables
from crossprofile_lib.paper_figures import PAPER_FIGURES_PATH, _file
from crossprofile_lib.paths import file_sha256, resource, templates_dir
from crossprofile_lib.policies.guard import PolicyFileError
from crossprofile_lib.policies.plugins import ensure_recorded
from crossprofile_lib.run.results import ResultsError, read_header, read_results
from crossprofile_lib.run.verify import EditedTable, check_or_trust, trusted_from_env
from crossprofile_lib.safety.inputs import InputError, load_json
from crossprofile_lib.stats.headroom import headroom
from crossprofile_lib.task.templates import parse_template, template_paths

#: The editable mapping from run names to the paper's model columns.
PAPER_MODELS_PATH = resource("paper_models.yaml")
#: The options a model spec may set, and the BookParams field each replaces.
SPEC_OPTIONS = {"templates": "model_templates", "seeds": "model_seeds", "budgets": "model_budgets",
                "variants": "model_variants"}


class ModelSpecError(ValueError):
    """A model spec that cannot be used; the message names the spec and the rule."""


class RunImportError(ValueError):
    """A run folder that cannot be imported; the message names the folder and what is wrong."""


@dataclass(frozen=True)
class ModelSpec:
    """One language model of the book: its backend and its own sample (None: the book's ``model_*`` parameter)."""

    backend: str
    templates: Optional[tuple[str, ...]] = None
    seeds: Optional[tuple[int, ...]] = None
    budgets: Optional[tuple[str, ...]] = None
    variants: Optional[tuple[str, ...]] = None
    backend_options: tuple[tuple[str, object], ...] = ()

    @classmethod
    def parse(cls, text: str) -> "ModelSpec":
        """``provider/model[@key=v1+v2;key=v]``; raises :class:`ModelSpecError` naming the part."""
        s = str(text).strip()
        backend, _, opts = s.partition("@")
        backend = backend.strip()
        if "/" not in backend:
            raise ModelSpecError(f"'{s}': a model spec is provider/model[@options] (e.g. "
                                 "deepseek/deepseek-v4-pro@templates=templates/formal;seeds=0+1+2)")
        try:
            check_backend_spec(backend)
        except ValueError as e:
            raise ModelSpecError(f"'{s}': {e}") from None
        given: dict = {}
        bopts: dict = {}
        for part in filter(None, (p.strip() for p in opts.split(";"))):
            key, eq, value = (x.strip() for x in part.partition("="))
            if eq and key.startswith("opt.") and len(key) > 4:
                name = key[4:].replace("-", "_")
                if name in bopts:
                    raise ModelSpecError(f"'{s}': option '{key}' given twice")
                bopts[name] = _typed(value)
                continue
            if not eq or key not in SPEC_OPTIONS:
                raise ModelSpecError(f"'{s}': option '{part}' is not key=value with a key of "
                                     f"{', '.join(SPEC_OPTIONS)} or opt.BACKEND_OPTION")
            if key in given:
                raise ModelSpecError(f"'{s}': option '{key}' given twice")
            items = [v.strip() for v in re.split(r"[+,]", value) if v.strip()]
            if not items:
                raise ModelSpecError(f"'{s}': option '{key}' has no value")
            try:
                given[key] = tuple(_check_option(key, items))
            except ValueError as e:
                raise ModelSpecError(f"'{s}': option {key}: {e}") from None
        return cls(backend, **given, backend_options=tuple(sorted(bopts.items())))

    @property
    def options(self) -> dict:
        """The options given (field name of :data:`SPEC_OPTIONS` -> list)."""
        return {k: list(getattr(self, k)) for k in SPEC_OPTIONS if getattr(self, k) is not None}

    @property
    def text(self) -> str:
        """The spec written back (``+`` between items)."""
        opts = ";".join([f"{k}={'+'.join(map(str, v))}" for k, v in self.options.items()]
                        + [f"opt.{k}={v}" for k, v in self.backend_options])
        return self.backend + (f"@{opts}" if opts else "")

    def sample(self, params) -> dict:
        """The model sample: ``model_templates``/``model_seeds``/... of ``params`` with this spec's options."""
        out = {f: list(getattr(params, f)) for f in SPEC_OPTIONS.values()}
        out.update({SPEC_OPTIONS[k]: v for k, v in self.options.items()})
        return out


def _typed(v: str):
    for cast in (int, float):
        with suppress(ValueError):
            return cast(v)
    return v


def _check_option(key: str, items: list[str]) -> list:
    if key == "seeds":
        try:
            return [check_seed(int(x)) for x in items]
        except (TypeError, ValueError) as e:
            raise ValueError(f"seeds are integers in 0..2^32-1 ({e})") from None
    if key == "budgets":
        return [str(Budget(x)) for x in items]
    if key == "variants":
        check_variants(items)
        return items
    return check_templates(items)


def check_templates(v) -> list[str]:
    """``v``, when each template file or folder exists; else :class:`ValueError` naming the path and the rule."""
    for t in v:
        if not str(t).strip():
            raise ValueError("empty path: give a template file or folder")
        try:
            template_paths([str(resolve(t))])
        except FileNotFoundError as e:
            raise ValueError(str(e)) from None
    return list(v)


def split_backends(value: str) -> list[str]:
    """``BACKENDS=a,b,c`` -> the spec strings: a comma starts a new spec only before ``<known provider>/``."""
    out: list[str] = []
    for tok in str(value).split(","):
        head = tok.strip().partition("/")[0]
        if out and not (head in PROVIDERS and "/" in tok):
            out[-1] += "," + tok
        else:
            out.append(tok)
    return [s.strip() for s in out if s.strip()]


def parse_specs(values) -> list[ModelSpec]:
    """Each spec parsed, none twice (:class:`ModelSpecError` names the repeated one)."""
    specs: list[ModelSpec] = []
    for v in values:
        sp = ModelSpec.parse(v)
        if any(s.text == sp.text for s in specs):
            raise ModelSpecError(f"'{v}': this model spec is given twice")
        specs.append(sp)
    return specs


@lru_cache(maxsize=4)
def paper_model_rules(path: str = str(PAPER_MODELS_PATH)) -> tuple[tuple[re.Pattern, str], ...]:
    """The rules of ``paper_models.yaml`` as (pattern, paper model key); errors name the file, rule and reason."""
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"{p}: cannot be read as YAML ({e})") from None
    rules = (doc or {}).get("rules") if isinstance(doc, dict) else None
    if not isinstance(rules, list):
        raise ValueError(f"{p}: field 'rules': required: a list of {{pattern, paper}} mappings")
    known = set(_file(str(Path(PAPER_FIGURES_PATH).resolve())).models)
    out = []
    for i, r in enumerate(rules):
        if not isinstance(r, dict) or set(r) != {"pattern", "paper"}:
            raise ValueError(f"{p}: rules[{i}]: each rule has exactly the keys pattern and paper")
        try:
            rx = re.compile(str(r["pattern"]), re.IGNORECASE)
        except re.error as e:
            raise ValueError(f"{p}: rules[{i}].pattern {r['pattern']!r}: not a regular expression ({e})") from None
        if r["paper"] not in known:
            raise ValueError(f"{p}: rules[{i}].paper {r['paper']!r}: not a model of {PAPER_FIGURES_PATH} "
                             f"(known: {', '.join(sorted(known))})")
        out.append((rx, str(r["paper"])))
    return tuple(out)


def paper_model_for(backend: str, model: str = "", path: str = str(PAPER_MODELS_PATH)) -> Optional[str]:
    """The paper's model key this run is (first rule matching ``backend/model``), or None (no paper column)."""
    if not backend or backend.startswith("ledger"):
        return None
    name = f"{backend}/{model}" if model and model not in backend else backend
    return next((paper for rx, paper in paper_model_rules(path) if rx.search(name)), None)


def run_paper_model(run) -> Optional[str]:
    """:func:`paper_model_for` of a run (its header's backend and model)."""
    return None if run is None or run.is_reference else paper_model_for(run.backend, run.model)


@dataclass(frozen=True)
class ModelVerdict:
    """``confirmatory`` (headroom passed), ``exploratory`` (failed or not checked) or ``reference`` (no check)."""

    status: str
    reason: str = ""

    @property
    def counts(self) -> bool:
        """Whether the run's estimates may count as agreement with the paper."""
        return self.status in ("confirmatory", "reference")


def headroom_verdict(run, boot=None, min_points: float = HEADROOM_MIN_POINTS) -> ModelVerdict:
    """The headroom verdict (ALL - EMPTY, lower bound above ``min_points``); no ALL and EMPTY rows: exploratory."""
    if run is None:
        return ModelVerdict("exploratory", "no run")
    if run.is_reference:
        return ModelVerdict("reference", f"the {REFERENCE}, a normative evidence counter (not a model)")
    df, boot = run.df, boot if boot is not None else run.boot
    if "policy" not in df or not {"ALL", "EMPTY"} <= set(df["policy"]) or boot is None:
        return ModelVerdict("exploratory", "headroom not checked: the run has no ALL and EMPTY rows")
    try:
        h = headroom(df, boot, min_points)
    except (KeyError, ValueError):  # a HiddenBench table (tasks, not templates): its header's own check
        rec = (run.header or {}).get("headroom") or {}
        return ModelVerdict("confirmatory" if rec.get("passed") else "exploratory",
                            "" if rec.get("passed") else "headroom not passed in the run's header")
    if h.passed:
        return ModelVerdict("confirmatory", f"ALL - EMPTY {h.estimate:+.1f} points [{h.lo:+.1f}, {h.hi:+.1f}]")
    est = "not estimable" if h.estimate is None else f"{h.estimate:+.1f} points [{h.lo:+.1f}, {h.hi:+.1f}]"
    return ModelVerdict("exploratory", f"headroom failed: ALL - EMPTY {est}, the lower bound must exceed "
                                  f"{min_points:g} points")


def status_line(run) -> str:
    """``"<label>: its numbers are confirmatory (reason)."`` (the reference decider: not a model)."""
    v = headroom_verdict(run)
    what = {"reference": "not a model: its numbers show what the memory makes possible",
            "confirmatory": "its numbers are confirmatory", "exploratory": "its numbers are exploratory"}[v.status]
    return f"{run.label}: {what}" + (f" ({v.reason})" if v.reason and v.status != "reference" else "") + "."


@lru_cache(maxsize=2)
def local_template_hashes(root: str = "") -> dict[str, str]:
    """Template id -> sha256 of its file, for every template file here (``templates/``)."""
    out = {}
    for p in template_paths([root or str(templates_dir())]):
        try:
            out[str(parse_template(p).id)] = file_sha256(p)
        except Exception:  # a broken file is the validator's business; it matches no run
            continue
    return out


def _mismatch(folder: Path, what: str) -> RunImportError:
    return RunImportError(f"RUNS={folder}: {what}")


def _as_set(v) -> set:
    return set() if v is None else {str(x) for x in list(v)}


def check_crossprofile(folder: Path, header: dict, df) -> None:
    """Raise :class:`RunImportError` when ``run.json`` does not describe the results or a template differs."""
    for key in ("backend", "model"):
        have = sorted(df[key].astype(str).unique()) if key in df else []
        if header.get(key) is not None and have and have != [str(header[key])]:
            raise _mismatch(folder, f"run.json says {key} {header[key]!r}, its results hold {', '.join(have)}")
    rows = header.get("rows")
    if "rows" in header and (isinstance(rows, bool) or not isinstance(rows, int)):
        raise _mismatch(folder, f"run.json's rows is {rows!r}, not a row count")
    if "rows" in header and rows != len(df):
        raise _mismatch(folder, f"run.json records {header['rows']} rows, results.parquet holds {len(df)}")
    cfg = header.get("config") or {}
    if not isinstance(cfg, dict):
        raise _mismatch(folder, f"run.json's config is a {type(cfg).__name__}, not an object")
    for key, col in (("policies", "policy"), ("seeds", "seed"), ("variants", "variant")):
        if cfg.get(key) and col in df and _as_set(df[col].unique()) != _as_set(cfg[key]):
            extra = sorted(_as_set(df[col].unique()) - _as_set(cfg[key]))
            lost = sorted(_as_set(cfg[key]) - _as_set(df[col].unique()))
            raise _mismatch(folder, f"run.json's config.{key} does not match the results' {col} column "
                                    f"(in the results only: {extra or 'none'}; in run.json only: {lost or 'none'})")
    hashes = header.get("templates_sha256")
    if not isinstance(hashes, dict):
        raise _mismatch(folder, "run.json records no templates_sha256 (the run was made before runs recorded "
                                "their templates' hashes), so its templates cannot be checked against the files "
                                "here; rerun it with this version of crossprofile run")
    local = local_template_hashes()
    used = sorted(df["template_id"].astype(str).unique())
    missing = [t for t in used if t not in local]
    if missing:
        raise _mismatch(folder, f"template(s) {', '.join(missing[:5])} are not among the templates here")
    differ = [t for t in used if t in hashes and hashes[t] != local[t]]
    unrecorded = [t for t in used if t not in hashes]
    if differ:
        raise _mismatch(folder, f"template(s) {', '.join(differ[:5])} differ from the files here (sha256 of the "
                                "file); the run answered other questions than this book's templates ask")
    if unrecorded:
        raise _mismatch(folder, f"run.json's templates_sha256 lacks template(s) {', '.join(unrecorded[:5])}")


def import_run(path: str | Path) -> Run | HBRun:
    """A run folder made elsewhere, read in place: a :class:`Run` or an :class:`HBRun`; a refusal raises
    :class:`RunImportError` naming the folder and the rule. A CrossProfile run's table is verified against its
    ``run.json`` (:mod:`crossprofile_lib.run.verify`: rows, template hashes, the answer key, value ranges); with
    ``crossprofile book --trust-edited`` (``$CROSSPROFILE_TRUST_EDITED``) a mismatch is imported, its label and
    sentence marked UNVERIFIED on every page. Every file is read through the safe-input layer (a FIFO or a device
    in the folder is refused, never opened); a header of the wrong shape is named, never an internal error."""
    folder = resolve(path)
    if not folder.is_dir():
        raise RunImportError(f"RUNS={path}: not a folder")
    if (folder / HB_HEADER).exists() or (folder / HB_HEADER).is_symlink():
        try:
            header = load_json(folder / HB_HEADER, 16 << 20, what="HiddenBench run header")
        except InputError as e:
            raise _mismatch(folder, f"{HB_HEADER}: {e.rule}: {e.detail}") from None
        if not isinstance(header, dict):
            raise _mismatch(folder, f"{HB_HEADER} is a JSON {type(header).__name__}, not an object (the run header)")
        protocols = header.get("protocols")
        if not isinstance(protocols, dict):
            raise _mismatch(folder, f"{HB_HEADER}: 'protocols' is {type(protocols).__name__}, not an object")
        tables = {}
        for proto in protocols:
            if proto not in ("controlled", "natural"):
                raise _mismatch(folder, f"{HB_HEADER} lists protocol {proto!r} (known: controlled, natural)")
            try:
                tables[proto] = read_tables(folder, proto)
            except (FileNotFoundError, OSError, ValueError) as e:
                raise _mismatch(folder, f"{HB_HEADER} lists protocol {proto!r} but its table cannot be read ({e})") \
                    from None
        if not tables:
            raise _mismatch(folder, f"{HB_HEADER} lists no protocol with tables")
        _policies_recorded(folder, header, HB_HEADER)
        return HBRun(folder, header, tables)
    try:
        header, df = read_header(folder), read_results(folder)
    except ResultsError as e:
        raise _mismatch(folder, f"{e} (a run folder holds results.parquet and run.json, or {HB_HEADER})") from None
    trust = trusted_from_env()
    if not trust:
        check_crossprofile(folder, header, df)
    try:
        unverified = check_or_trust(df, header, f"{folder}/results.parquet", trust)
    except EditedTable as e:
        raise _mismatch(folder, f"{e.problem}; the table is not the one its run wrote (rerun it, restore the files, "
                                f"or build with crossprofile book --trust-edited to show it marked UNVERIFIED)") from None
    _policies_recorded(folder, header, "run.json")
    return Run(folder, with_cells(df), header, unverified=unverified or "")


def _policies_recorded(folder: Path, header: dict, name: str) -> None:
    """Load the run's own policy files (header ``policy_files``) from the recorded path when the SHA-256
    matches; otherwise :class:`RunImportError` says which file to give with ``POLICY_FILES``."""
    records = header.get("policy_files")
    if records is not None and not (isinstance(records, list) and all(isinstance(r, dict) for r in records)):
        raise _mismatch(folder, f"{name}: 'policy_files' is not a list of objects")
    try:
        ensure_recorded(records, f"{folder}/{name}")
    except PolicyFileError as e:
        names = sorted({n for r in header.get("policy_files") or () for n in r.get("policies", ())})
        raise _mismatch(folder, f"its results hold memory policies of your own ({', '.join(names)}) from a policy "
                                f"file this book cannot load ({e}); give that file with POLICY_FILES=...") from None


def gaps(run: Run) -> list[str]:
    """What a model run lacks for the chapters (model policies, classic and mirror variants, primary budget)."""
    out = []
    pol = set(run.df["policy"].astype(str)) if "policy" in run.df else set()
    lost = [p for p in MODEL_POLICIES if p not in pol]
    if lost:
        out.append(f"no rows for the policies {', '.join(lost)}: tables and contrasts that need them show "
                   "'not in this run'")
    lost_v = [v for v in ("PSP", "SPS") if v not in run.variants]
    if lost_v:
        out.append(f"no variant {', '.join(lost_v)}: the classic / mirror cells it names are not shown")
    if PRIMARY_BUDGET not in run.budgets:
        out.append(f"no r = {PRIMARY_BUDGET}: its estimates at another budget are not comparable with the paper's")
    return out


def unique_labels(runs: list) -> list:
    """``runs`` with :attr:`Run.tag` set to the folder name where two runs would share a label."""
    n = Counter(r.label for r in runs)
    return [replace(r, tag=r.path.name) if n[r.label] > 1 else r for r in runs]

