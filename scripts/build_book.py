"""Build the book: run the default experiments, execute the notebooks, build the HTML offline.

    python scripts/build_book.py                 # what `make book` runs (defaults: book.DEFAULTS)
    python scripts/build_book.py --quick --out _build/quick   # small parameters, staged in a folder
    BACKEND=deepseek/deepseek-chat TEMPLATES=templates/formal SEEDS=0,1,2 BUDGETS=0.4,0.6,0.8 \
        python scripts/build_book.py             # the same as `make book BACKEND=... ...`

Steps: (1) run every experiment the chapters read (the reference decider's full grid, its
social-proof and group-size runs, the language-model sample, HiddenBench) -- a model backend
answers from its call cache, so a rebuild makes no model calls; (2) convert each
``notebooks/*.md`` (jupytext) to a notebook and execute it with papermill into ``book/``
(``.ipynb``, generated, not tracked); (3) ``jupyter-book build . -W -n --keep-going``;
(4) check that no built page loads a script or stylesheet over http(s).

Environment / Make variables (:data:`VARIABLES`): BACKEND (``provider/model``; ``none`` for the
reference decider only), MODEL (joined to BACKEND when BACKEND has no ``/``), TEMPLATES, SEEDS,
BUDGETS, VARIANTS (the model sample), RESAMPLES (bootstrap resamples), HIDDENBENCH (a HiddenBench
file; default the bundled fixture), JOBS (notebooks executed at once). Every one is checked with
the command line's rules before anything runs; a bad one stops the build (exit 2) with a message
naming the variable and the rule. A model sample without the primary budget (``BUDGETS=0.4``) or
with fewer variants builds every page: the chapters show it at its own budget, with a notice.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# llama.cpp's OpenMP threads spin while they wait by default; on a shared or small CPU that costs the
# embedded model about 4x (measured here on 2 cores: 111 s -> 28 s for one task's 9 calls). Passive
# waiting is set before any model library loads; export OMP_WAIT_POLICY=ACTIVE to override.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from crossprofile_lib import book  # noqa: E402
from crossprofile_lib.book import launch_buttons  # noqa: E402
from crossprofile_lib.cli.args import csv  # noqa: E402

NOTEBOOKS = ROOT / "notebooks"
EXTERNAL = re.compile(r"""<(?:script|link)\b[^>]*(?:src|href)=["'](?:https?:)?//[^"']+["']""", re.IGNORECASE)


class BookConfigError(ValueError):
    """A Make variable (or option) the book cannot be built with; names the variable and the rule."""


#: The documented Make variables: name -> what it sets. Checked by :func:`parameters` before
#: anything runs, with the command line's own rules (crossprofile_lib.cli.args).
VARIABLES = {
    "BACKEND": "the language-model backend, provider/model (none or ledger: the reference decider only)",
    "MODEL": "the model, joined to BACKEND when BACKEND names only the provider",
    "TEMPLATES": "the model sample's template files or folders (comma-separated)",
    "SEEDS": "the model sample's seeds (comma-separated integers)",
    "BUDGETS": "the model sample's budgets (ratios in (0, 1] or token counts such as 128t)",
    "VARIANTS": "the model sample's attribution variants (e.g. PSP,SPS)",
    "RESAMPLES": "bootstrap resamples (an integer >= 100)",
    "HIDDENBENCH": "a HiddenBench file (default: the bundled fixture)",
    "JOBS": "notebooks executed at once (an integer >= 1)",
}


def _check(name: str, value: str, parse):
    from crossprofile_lib.cli.args import ArgError
    try:
        return parse(value)
    except (ArgError, ValueError) as e:
        raise BookConfigError(f"{name}={value}: {e} ({VARIABLES[name]})") from None


def _templates(value: str) -> list[str]:
    from crossprofile_lib.cli import args
    out = []
    for t in args.csv(value) or [""]:
        if not t:
            raise args.ArgError("empty list: give at least one template file or folder")
        path = t if Path(t).is_absolute() else str(ROOT / t)
        args.template_path(path)
        out.append(t)
    return out


def _backend(env: dict) -> str:
    from crossprofile_lib.cli import args
    b = env.get("BACKEND", "").strip()
    model = env.get("MODEL", "").strip()
    if model and not b:
        raise BookConfigError(f"MODEL={model}: set BACKEND too (e.g. BACKEND=openai MODEL={model})")
    if not b or b in ("none", "ledger"):
        if model:
            raise BookConfigError(f"MODEL={model}: BACKEND={b} runs no language model")
        return ""
    if "/" not in b:
        if not model:
            raise BookConfigError(f"BACKEND={b}: name the model, BACKEND={b}/MODEL_NAME or BACKEND={b} MODEL=MODEL_NAME "
                                  f"({VARIABLES['BACKEND']})")
        b = f"{b}/{model}"
    elif model:
        raise BookConfigError(f"MODEL={model}: BACKEND={b} already names its model")
    return _check("BACKEND", b, args.backend)


def parameters(quick: bool = False, env: dict | None = None) -> dict:
    """The notebooks' parameters: book.DEFAULTS (or book.QUICK) with the Make variables'
    overrides, each checked first: a bad one raises :class:`BookConfigError` naming it."""
    from crossprofile_lib.cli import args
    env = os.environ if env is None else env
    p = json.loads(json.dumps(book.QUICK if quick else book.DEFAULTS))
    p["widgets"] = False  # the built book shows chapter 10's static view (no kernel behind a web page)
    if env.get("BACKEND", "").strip() or env.get("MODEL", "").strip():
        p["backend"] = _backend(env)
    if env.get("TEMPLATES", "").strip():
        p["model_templates"] = _check("TEMPLATES", env["TEMPLATES"], _templates)
    if env.get("SEEDS", "").strip():
        p["model_seeds"] = _check("SEEDS", env["SEEDS"], args.seeds)
    if env.get("BUDGETS", "").strip():
        p["model_budgets"] = _check("BUDGETS", env["BUDGETS"], args.budgets)
    if env.get("VARIANTS", "").strip():
        p["model_variants"] = _check("VARIANTS", env["VARIANTS"], args.variants)
    if env.get("RESAMPLES", "").strip():
        p["n_resamples"] = _check("RESAMPLES", env["RESAMPLES"].strip(), args.int_at_least(100))
    if env.get("HIDDENBENCH", "").strip():
        h = env["HIDDENBENCH"].strip()
        _check("HIDDENBENCH", h if Path(h).is_absolute() else str(ROOT / h), args.existing_file)
        p["hiddenbench_path"] = h
    return p


def jobs(env: dict | None = None) -> int:
    """JOBS (default: the CPU count), checked."""
    from crossprofile_lib.cli import args
    env = os.environ if env is None else env
    v = env.get("JOBS", "").strip()
    return _check("JOBS", v, args.positive_int) if v else (os.cpu_count() or 1)


#: Pages every build keeps, even with --only: the landing page and the glossary/bibliography that
#: chapters cross-reference.
ALWAYS = ("intro", "glossary", "bibliography")


def _selected(stem: str, only: list[str]) -> bool:
    return not only or stem in only or stem.split("-")[0] in only or stem in ALWAYS


def stage(out: Path, only: list[str] | None = None) -> None:
    """Copy the book's sources (config, text pages, static files) into ``out``; with ``only``,
    the staged table of contents keeps just those chapters (a partial book that still builds
    with warnings as errors)."""
    import yaml
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "_config.yml", out / "_config.yml")
    shutil.copy2(ROOT / "references.bib", out / "references.bib")
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    if only:
        parts = []
        for part in toc.get("parts", []):
            ch = [c for c in part["chapters"] if _selected(Path(c["file"]).name, only)]
            if ch:
                parts.append(dict(part, chapters=ch))
        toc["parts"] = parts
    (out / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    (out / "book").mkdir(exist_ok=True)
    for f in (ROOT / "book").glob("*.md"):
        shutil.copy2(f, out / "book" / f.name)
    shutil.copytree(ROOT / "book" / "_static", out / "book" / "_static", dirs_exist_ok=True)


def execute(md: Path, out_dir: Path, params: dict) -> float:
    """jupytext-convert ``md`` and execute it with papermill into ``out_dir/<name>.ipynb``."""
    import jupytext
    import papermill as pm
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / (md.stem + ".ipynb")
        jupytext.write(jupytext.read(md), src)
        declared = pm.inspect_notebook(str(src))
        use = {k: v for k, v in params.items() if k in declared}
        dst = out_dir / src.name
        pm.execute_notebook(str(src), str(dst), parameters=use, cwd=str(ROOT),
                            kernel_name="python3", progress_bar=False, request_save_on_cell_execute=False)
        tidy(dst)
    return time.perf_counter() - t0


def tidy(path: Path) -> None:
    """Results first: the parameters cell and papermill's injected-parameters cell (no output) are
    left out of the web page (tag ``remove-cell``); the page's "built with" line names their values,
    and the downloadable notebook keeps both cells."""
    import nbformat
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        tags = c.metadata.setdefault("tags", [])
        if ("injected-parameters" in tags or "parameters" in tags) and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(nb, path)


def check_offline(html_dir: Path) -> list[str]:
    """Pages that load a script or stylesheet from another host."""
    bad = []
    for f in html_dir.rglob("*.html"):
        for m in EXTERNAL.finditer(f.read_text(errors="replace")):
            bad.append(f"{f.relative_to(html_dir)}: {m.group(0)[:120]}")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small parameters (book.QUICK): seconds, no model")
    ap.add_argument("--out", default=None, help="stage and build in this folder (default: the repository)")
    ap.add_argument("--only", default="", help="comma-separated notebook names to execute (default: all)")
    ap.add_argument("--no-html", action="store_true", help="execute the notebooks but skip jupyter-book")
    ap.add_argument("--jobs", type=int, default=None, help="notebooks executed at once (default: JOBS or the CPUs)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:  # every Make variable is checked before anything runs
        params = parameters(args.quick)
        args.jobs = args.jobs if args.jobs is not None else jobs()
        only = csv(args.only)
        known = [m.stem for m in NOTEBOOKS.glob("*.md")]
        unknown = [o for o in only if not any(k == o or k.split("-")[0] == o for k in known)]
        if unknown:
            raise BookConfigError(f"--only {args.only}: no notebook named {', '.join(unknown)} (notebooks: "
                                  f"{', '.join(sorted(known))})")
    except BookConfigError as e:
        print(f"make book: {e}. Nothing was run.", file=sys.stderr)
        return 2
    root = Path(args.out).resolve() if args.out else ROOT
    if root != ROOT:
        stage(root, only)
        params["runs_root"] = str(root / "runs")
    out_dir = root / "book"
    try:  # REPOSITORY_URL turns the Binder/Colab buttons on; a bad URL stops the build before it runs anything
        jb_config = launch_buttons.config_args(root, os.environ)
    except launch_buttons.LaunchConfigError as e:
        print(str(e), file=sys.stderr)
        return 2
    print(f"parameters: {json.dumps(params)}", flush=True)

    # (1) experiments, once, before the notebooks read them (a notebook that finds its run reruns nothing)
    t = time.perf_counter()
    for name, run in book.prepare(params, log=lambda s: print(s, flush=True)).items():
        rows = len(run.df) if hasattr(run, "df") else sum(len(t.get("decisions", ())) for t in run.tables.values()) \
            if run is not None else 0
        print(f"  {name}: {'skipped' if run is None else f'{rows} rows, {run.label}'}", flush=True)
    t_runs = time.perf_counter() - t

    # (2) notebooks
    mds = [m for m in sorted(NOTEBOOKS.glob("*.md")) if _selected(m.stem, only)]
    t = time.perf_counter()
    failed = []

    def one(md: Path):
        try:
            s = execute(md, out_dir, params)
            print(f"  executed {md.stem} in {s:.1f} s", flush=True)
        except Exception as e:  # report every failing notebook, then fail the build
            failed.append(md.stem)
            print(f"  FAILED {md.stem}: {type(e).__name__}: {str(e)[-2000:]}", flush=True)

    with ThreadPoolExecutor(max(1, args.jobs)) as ex:
        list(ex.map(one, mds))
    t_nb = time.perf_counter() - t
    if failed:
        print(f"notebooks failed: {', '.join(failed)}", file=sys.stderr)
        return 1

    # (3) HTML
    t_html = 0.0
    if not args.no_html:
        t = time.perf_counter()
        jb = Path(sys.executable).with_name("jupyter-book")
        rc = subprocess.call([str(jb), "build", str(root), "-W", "-n", "--keep-going", *jb_config], cwd=root)
        t_html = time.perf_counter() - t
        if rc:
            return rc
        bad = check_offline(root / "_build" / "html")
        if bad:
            print("pages load scripts or stylesheets from the network:\n  " + "\n  ".join(bad[:20]), file=sys.stderr)
            return 1
    total = time.perf_counter() - t0
    timing = dict(experiments_s=round(t_runs, 1), notebooks_s=round(t_nb, 1), html_s=round(t_html, 1),
                  total_s=round(total, 1), cpus=os.cpu_count(), quick=args.quick, backend=params["backend"])
    (root / "_build").mkdir(exist_ok=True)
    (root / "_build" / "book_timing.json").write_text(json.dumps(timing, indent=2) + "\n")
    print(f"book built in {total:.0f} s ({json.dumps(timing)}) -> {root / '_build' / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
