"""``crossprofile book``: build the Jupyter Book (what ``make book`` and ``scripts/build_book.py`` run).

    crossprofile book                              # the defaults (BookParams), in the repository
    crossprofile book --quick --out _build/quick   # small parameters, staged in a folder
    BACKEND=deepseek/deepseek-flash TEMPLATES=templates/formal SEEDS=0,1,2 BUDGETS=0.4,0.6,0.8 crossprofile book

Environment / Make variables (:data:`VARIABLES`): BACKEND (``provider/model``; ``none`` for the
reference decider only), MODEL (joined to BACKEND when BACKEND has no ``/``), TEMPLATES, SEEDS,
BUDGETS, VARIANTS (the model sample), RESAMPLES (bootstrap resamples), HIDDENBENCH (a HiddenBench
file; default the bundled fixture), TOKENIZER (the reference decider's pricing; default qwen2.5),
POLICY_FILES (memory policies of your own), JOBS (notebooks executed at once), REPOSITORY_URL (launch
buttons). Every one is checked with the command line's own rules (:mod:`.args`) before anything
runs, then they become one :class:`~crossprofile_lib.book.params.BookParams`; a bad one stops the build
(exit 2) with a message naming the variable and the rule. A model sample without the primary budget
(``BUDGETS=0.4``) or with fewer variants builds every page: the chapters show it at its own budget,
with a notice. The build itself is :func:`crossprofile_lib.book.build.build`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from crossprofile_lib.cli import args as A

#: The documented Make variables: name -> what it sets. Checked by :func:`book_params` before
#: anything runs, with the command line's own rules.
VARIABLES = {
    "BACKEND": "the language-model backend, provider/model (none or ledger: the reference decider only)",
    "MODEL": "the model, joined to BACKEND when BACKEND names only the provider",
    "TEMPLATES": "the model sample's template files or folders (comma-separated)",
    "SEEDS": "the model sample's seeds (comma-separated integers)",
    "BUDGETS": "the model sample's budgets (ratios in (0, 1] or token counts such as 128t)",
    "VARIANTS": "the model sample's attribution variants (e.g. PSP,SPS)",
    "RESAMPLES": "bootstrap resamples (an integer >= 100)",
    "HIDDENBENCH": "a HiddenBench file (default: the bundled fixture)",
    "TOKENIZER": "the tokenizer pricing the reference decider's budgets (qwen2.5, llama-3.1, smollm2, offline, ...)",
    "POLICY_FILES": "memory policies of your own: Python files (or module:object) defining POLICY or POLICIES, "
                    "comma-separated",
    "JOBS": "notebooks executed at once (an integer >= 1)",
    "BACKENDS": "more language models, comma-separated model specs provider/model[@templates=a+b;seeds=0+1;"
                "budgets=0.6;variants=PSP+SPS] (crossprofile_lib/book/models.py)",
    "RUNS": "run folders made elsewhere by crossprofile run / crossprofile hiddenbench run, comma-separated "
            "(imported with zero model calls)",
}


def _error():
    from crossprofile_lib.book.build import BookConfigError
    return BookConfigError


def _check(name: str, value: str, parse):
    try:
        return parse(value)
    except (A.ArgError, ValueError) as e:
        raise _error()(f"{name}={value}: {e} ({VARIABLES[name]})") from None


def _root() -> Path:
    from crossprofile_lib.book.runs import ROOT
    return ROOT


def _templates(value: str) -> list[str]:
    out = A.csv(value)
    if not out:
        raise A.ArgError("empty list: give at least one template file or folder")
    for t in out:
        A.template_path(t if Path(t).is_absolute() else str(_root() / t))
    return out


def _tokenizer(value: str) -> str:
    """A tokenizer the suite knows (checked without fetching anything): ValueError naming the rule."""
    from crossprofile_lib.task.tokenizer import TOKENIZER_HELP, OfflineTokenizer
    from crossprofile_lib.task.vocabs import PACKAGED, canonical, user_names
    name = value.split(":", 1)[1] if value.startswith("vocab:") else value
    if (value in ("offline", OfflineTokenizer.name) or canonical(value) or value in PACKAGED or name in user_names()
            or value.split(":", 1)[0] in ("gguf", "hf") or Path(value).expanduser().exists()):
        return value
    raise ValueError(f"unknown tokenizer (use {TOKENIZER_HELP})")


def _policy_files(value: str) -> list[str]:
    """Each file loaded and checked now (crossprofile_lib.policies.plugins): a bad one names the file and the rule."""
    from crossprofile_lib.book.params import load_policy_file
    out = A.csv(value)
    for f in out:
        load_policy_file(f)
    return out


def _backends(value: str) -> list[str]:
    from crossprofile_lib.book.models import parse_specs, split_backends
    return [sp.text for sp in parse_specs(split_backends(value))]  # a ModelSpecError names the rule


def _runs(value: str) -> list[str]:
    """Each folder imported now (cheap: it reads the tables), so a bad one stops the build before any work."""
    from crossprofile_lib.book.models import RunImportError, import_run
    out = A.csv(value)
    for r in out:
        try:
            import_run(r)
        except RunImportError as e:
            msg = str(e)
            raise A.ArgError(f"folder {r}: " + (msg.split(": ", 1)[1] if msg.startswith("RUNS=") else msg)) from None
    return out


def _backend(env: dict) -> str:
    b = env.get("BACKEND", "").strip()
    model = env.get("MODEL", "").strip()
    err = _error()
    if model and not b:
        raise err(f"MODEL={model}: set BACKEND too (e.g. BACKEND=openai MODEL={model})")
    if not b or b in ("none", "ledger"):
        if model:
            raise err(f"MODEL={model}: BACKEND={b} runs no language model")
        return ""
    if "/" not in b:
        if not model:
            raise err(f"BACKEND={b}: name the model, BACKEND={b}/MODEL_NAME or BACKEND={b} MODEL=MODEL_NAME "
                      f"({VARIABLES['BACKEND']})")
        b = f"{b}/{model}"
    elif model:
        raise err(f"MODEL={model}: BACKEND={b} already names its model")
    return _check("BACKEND", b, A.backend)


def book_params(quick: bool = False, env: dict | None = None):
    """The book's parameters (:class:`BookParams`: the defaults, or :meth:`BookParams.quick`) with the
    Make variables' overrides, each checked first: a bad one raises ``BookConfigError`` naming it. The
    built book shows chapter 10's static view (``widgets`` False: no kernel behind a web page)."""
    from crossprofile_lib.book.params import MAKE_VARIABLES, BookParams, BookParamsError
    env = os.environ if env is None else env
    given = {}
    if env.get("BACKEND", "").strip() or env.get("MODEL", "").strip():
        given["backend"] = _backend(env)
    rules = {"TEMPLATES": _templates, "SEEDS": A.seeds, "BUDGETS": A.budgets, "VARIANTS": A.variants,
             "RESAMPLES": lambda v: A.int_between(100)(v.strip()), "BACKENDS": _backends, "RUNS": _runs,
             "TOKENIZER": lambda v: _tokenizer(v.strip()), "POLICY_FILES": _policy_files}
    for var, parse in rules.items():
        if env.get(var, "").strip():
            given[MAKE_VARIABLES[var]] = _check(var, env[var], parse)
    if env.get("HIDDENBENCH", "").strip():
        h = env["HIDDENBENCH"].strip()
        _check("HIDDENBENCH", h if Path(h).is_absolute() else str(_root() / h), A.input_file)
        given["hiddenbench_path"] = h
    try:
        return (BookParams.quick if quick else BookParams.resolve)(given, widgets=False)
    except BookParamsError as e:  # the model's own rules; its message names the Make variable
        raise _error()(str(e)) from None


def parameters(quick: bool = False, env: dict | None = None) -> dict:
    """:func:`book_params` as the plain dict papermill injects."""
    return book_params(quick, env).model_dump()


def jobs(env: dict | None = None) -> int:
    """JOBS (default: the CPU count), checked."""
    env = os.environ if env is None else env
    v = env.get("JOBS", "").strip()
    return _check("JOBS", v, A.positive_int) if v else (os.cpu_count() or 1)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="small parameters (BookParams.quick): seconds, no model")
    p.add_argument("--out", default=None, help="stage and build in this folder (default: the repository)")
    p.add_argument("--only", default="", help="comma-separated notebook names to execute (default: all)")
    p.add_argument("--no-html", action="store_true", help="execute the notebooks but skip jupyter-book")
    p.add_argument("--jobs", type=int, default=None, help="notebooks executed at once (default: JOBS or the CPUs)")
    p.add_argument("--allow-other-files", action="store_true",
                   help="stage into an --out folder that already holds files of something else (otherwise refused, "
                        "naming them)")
    p.add_argument("--trust-edited", action="store_true",
                   help="import RUNS= folders whose table does not match its run.json (otherwise refused naming the "
                        "first bad row and the rule); each such run is marked UNVERIFIED on every page")


def run(args) -> int:
    """Check everything (Make variables, options, the checkout), then build; exit 2 before any work on a
    bad one."""
    # llama.cpp's OpenMP threads spin while they wait: up to 4x slower for the embedded model on a CPU other work
    # fills, faster alone (as the book runs it). So passive waiting only where at least one other task per core is
    # runnable when the build starts; OMP_WAIT_POLICY, when exported, decides.
    from crossprofile_lib.backends.llamacpp import busy_now
    if busy_now() >= (os.cpu_count() or 1):
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from crossprofile_lib.paths import book_root
    if getattr(args, "trust_edited", False):  # the chapters' kernels inherit it (crossprofile_lib.run.verify)
        from crossprofile_lib.run.verify import TRUST_ENV
        os.environ[TRUST_ENV] = "1"
    try:
        root = book_root()
    except FileNotFoundError as e:
        print(f"crossprofile book: {e}", file=sys.stderr)
        return 2
    from crossprofile_lib.book.build import BookConfigError, LaunchConfigError, build, check_only, check_url
    try:  # every Make variable is checked before anything runs
        params = book_params(args.quick)
        n_jobs = args.jobs if args.jobs is not None else jobs()
        only = A.csv(args.only)
        check_only(root, only)
        if os.environ.get("REPOSITORY_URL", "").strip():
            check_url(os.environ["REPOSITORY_URL"])
        if args.out and Path(args.out).resolve() != root.resolve():  # never mixed into a folder of other files
            from crossprofile_lib.safety.outputs import WouldDestroy, check_other_files
            try:
                check_other_files(args.out, "book", args.allow_other_files)
            except WouldDestroy as e:
                raise BookConfigError(str(e)) from None
    except (BookConfigError, LaunchConfigError) as e:
        print(f"make book: {e}. Nothing was run.", file=sys.stderr)
        return 2
    return build(params, root, Path(args.out) if args.out else None, only, n_jobs, html=not args.no_html,
                 quick=args.quick)


def main(argv=None) -> int:
    """The command as its own program (``scripts/build_book.py``)."""
    ap = argparse.ArgumentParser(prog="build_book.py", description=A.plain(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    return run(ap.parse_args(argv))


COMMAND = "book"
HELP = "build the Jupyter Book (make book)"


def register(sub) -> None:
    b = sub.add_parser(COMMAND, help=HELP, description=A.plain(__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(b)
    b.set_defaults(func=run)
