"""Build the book (``crossprofile book``): :func:`build` runs every experiment (:meth:`BookRuns.prepare`; a rebuild makes
no model calls), executes each ``notebooks/*.md`` with papermill into ``book/<name>.ipynb``, runs ``jupyter-book build
. -W -n --keep-going`` and :func:`check_offline`. A book is one build: pages executed with other parameters are refused
(:func:`mixed_pages`). With ``out`` the sources are staged there (:func:`stage`), runs in ``out/runs``. The Binder/Colab
launch buttons come from ONE setting: off in ``_config.yml``, ``REPOSITORY_URL`` turns them on (:func:`config_args`)."""

from __future__ import annotations

import hashlib
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
from typing import Callable, Optional, Sequence

import yaml

from crossprofile_lib.book.experiments import BookRuns
from crossprofile_lib.book.explorer_export import export_site
from crossprofile_lib.book.params import BookParams
from crossprofile_lib.book.runs import _jsonable, n_rows
from crossprofile_lib.book.schedule import blas_share

#: A tag that loads something (src, href, data, poster, srcset) from another host; plain ``<a href>`` loads nothing.
EXTERNAL = re.compile(r"""<(?:script|link|img|iframe|frame|source|video|audio|track|embed|object|input|image)\b"""
                      r"""[^>]*?(?:\s(?:src|href|data|poster|xlink:href)=["']?\s*(?:https?:)?//"""
                      r"""|\ssrcset=["'][^"']*?(?:https?:)?//)[^>]*>""", re.IGNORECASE)
#: CSS that loads from another host: ``url(//...)`` and ``@import "//..."``.
CSS_EXTERNAL = re.compile(r"""(?:url\(\s*["']?\s*|@import\s+["'])(?:https?:)?//[^)"'\s]*""", re.IGNORECASE)
_STYLE = re.compile(r"""<style\b[^>]*>(.*?)</style>|\sstyle=(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE | re.DOTALL)

#: Sphinx warnings a partial book (``only``) tolerates: links to chapters left out and to their labels.
PARTIAL_BOOK_QUIET = ("ref.doc", "ref.numref", "ref.ref")

#: Pages every build keeps, even with ``only`` (chapters cross-reference them).
ALWAYS = ("intro", "glossary", "bibliography")
#: The launch buttons' services and what a REPOSITORY_URL looks like.
BINDER = "https://mybinder.org"
COLAB = "https://colab.research.google.com"
URL = re.compile(r"^https://[A-Za-z0-9.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/?$")


class LaunchConfigError(ValueError):
    """A bad REPOSITORY_URL (the message names it and the rule)."""


def check_url(url: str) -> str:
    """``url`` (stripped) when it is a repository URL; else :class:`LaunchConfigError` naming the rule."""
    url = url.strip()
    if not URL.match(url) or "/OWNER/" in url:
        raise LaunchConfigError(f"REPOSITORY_URL: {url!r} is not a repository URL like "
                                "https://github.com/OWNER/NAME (the launch buttons would be dead links)")
    return url


def configured(config: Path, url: str, out: Path) -> Path:
    """Write ``config`` with the repository ``url`` and Binder/Colab on into ``out``; return ``out``."""
    url = check_url(url)
    doc = yaml.safe_load(Path(config).read_text())
    doc["repository"] = dict(doc.get("repository") or {}, url=url.rstrip("/"))
    doc["launch_buttons"] = dict(doc.get("launch_buttons") or {}, binderhub_url=BINDER, colab_url=COLAB)
    doc.setdefault("html", {})["use_repository_button"] = True
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def config_args(root: Path, env: dict) -> list[str]:
    """Extra ``jupyter-book build`` arguments: ``--config FILE`` when REPOSITORY_URL is set, else none."""
    url: Optional[str] = (env.get("REPOSITORY_URL") or "").strip()
    if not url:
        return []
    return ["--config", str(configured(root / "_config.yml", url, root / "_build" / "_config.launch.yml"))]


class BookConfigError(ValueError):
    """A Make variable (or option) the book cannot be built with; names the variable and the rule."""


def notebooks(root: Path) -> list[Path]:
    """The chapter sources, ``root/notebooks/*.md``, in order."""
    return sorted((root / "notebooks").glob("*.md"))


def selected(stem: str, only: Sequence[str]) -> bool:
    """Whether chapter ``stem`` (``04-rarest-first``) is built with ``only`` (names or numbers; empty: all)."""
    return not only or stem in only or stem.split("-")[0] in only or stem in ALWAYS


def check_only(root: Path, only: Sequence[str]) -> None:
    """:class:`BookConfigError` when ``only`` names a chapter that does not exist."""
    known = [m.stem for m in notebooks(root)]
    unknown = [o for o in only if not any(k == o or k.split("-")[0] == o for k in known)]
    if unknown:
        raise BookConfigError(f"--only {','.join(only)}: no notebook named {', '.join(unknown)} (notebooks: "
                              f"{', '.join(sorted(known))})")


def stage(root: Path, out: Path, only: Sequence[str] = ()) -> None:
    """Copy the book's sources from ``root`` into ``out``; ``only`` keeps just those chapters in the table of contents."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(root / "_config.yml", out / "_config.yml")
    shutil.copy2(root / "references.bib", out / "references.bib")
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    if only:
        # a link to a chapter left out is plain text, not an error (every other warning still fails the build)
        cfg = yaml.safe_load((out / "_config.yml").read_text())
        sphinx_cfg = cfg.setdefault("sphinx", {}).setdefault("config", {})
        sphinx_cfg["suppress_warnings"] = sorted({*sphinx_cfg.get("suppress_warnings", []), *PARTIAL_BOOK_QUIET})
        (out / "_config.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        toc["parts"] = [dict(part, chapters=ch) for part in toc.get("parts", [])
                        if (ch := [c for c in part["chapters"] if selected(Path(c["file"]).name, only)])]
    (out / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    (out / "book").mkdir(exist_ok=True)
    for f in (root / "book").glob("*.md"):
        shutil.copy2(f, out / "book" / f.name)
    shutil.copytree(root / "book" / "_static", out / "book" / "_static", dirs_exist_ok=True)


#: Parameters every chapter receives, declared or not (POLICY_FILES changes the reference grid every chapter reads).
EVERY_CHAPTER = ("policy_files",)


def chapter_engine() -> Optional[str]:
    """papermill's engine ``crossprofile`` (the kernel on local sockets, not TCP: crossprofile_lib/book/kernel.py), or
    papermill's default where this install predates its registration in pyproject.toml (``make install`` adds it)."""
    from papermill.engines import papermill_engines
    from papermill.exceptions import PapermillException
    try:
        papermill_engines.get_engine("crossprofile")
        return "crossprofile"
    except PapermillException:
        return None


def execute(md: Path, out_dir: Path, params: dict, cwd: Path) -> float:
    """Execute ``md`` with papermill into ``out_dir/<name>.ipynb`` with the parameters it declares (``None`` left out)
    and those of :data:`EVERY_CHAPTER`."""
    import jupytext
    import papermill as pm
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / (md.stem + ".ipynb")
        jupytext.write(jupytext.read(md), src)
        declared = pm.inspect_notebook(str(src))
        use = {k: v for k, v in params.items() if (k in declared or k in EVERY_CHAPTER) and v is not None and v != []}
        dst = out_dir / src.name
        pm.execute_notebook(str(src), str(dst), parameters=use, cwd=str(cwd), engine_name=chapter_engine(),
                            kernel_name="python3", progress_bar=False, request_save_on_cell_execute=False)
        tidy(dst, params)
    return time.perf_counter() - t0


def build_id(params: dict) -> str:
    """The digest of one build's parameters (every field of :class:`BookParams`): pages of one book share it."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:16]


#: The chapters that take longest (the net-lead fits, the fit to the paper's figures, the messy protocol's grid):
#: executed first (a fresh default build at eaf9d05 ended on chapter 15 alone: 65.6 s of 193.2 s of notebooks).
LONGEST = ("07-net-evidence", "13-what-social-proof-explains", "15-messy")

#: Where each executed chapter records the build it belongs to (notebook metadata).
STAMP_KEY = "crossprofile_build"


def toc_pages(root: Path) -> list[str]:
    """The page files (``book/04-rarest-first``) of the table of contents at ``root``."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc.get("root", "")] + [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])]
    return [f for f in files if f]


def mixed_pages(root: Path, params: dict) -> list[str]:
    """The executed chapters NOT built with ``params``, each with the parameters that differ (or "no build record")."""
    import nbformat
    want, out = build_id(params), []
    for f in toc_pages(root):
        nbp = root / (f + ".ipynb")
        if not nbp.exists():
            continue
        rec = nbformat.read(nbp, as_version=4).metadata.get(STAMP_KEY) or {}
        if rec.get("id") == want:
            continue
        got = rec.get("params")
        if not isinstance(got, dict):
            out.append(f"{f}: no build record (executed by an older build)")
            continue
        diff = sorted(k for k in set(params) | set(got) if params.get(k) != got.get(k))
        out.append(f"{f}: built with " + ", ".join(f"{k}={json.dumps(got.get(k), default=str)}" for k in diff[:6])
                   + (" ..." if len(diff) > 6 else "") + " (this build: "
                   + ", ".join(f"{k}={json.dumps(params.get(k), default=str)}" for k in diff[:6]) + ")")
    return out


def tidy(path: Path, params: Optional[dict] = None) -> None:
    """Hide the parameters cells on the web page (tag ``remove-cell``; the notebook keeps them); with ``params`` record
    the build (metadata ``crossprofile_build``: id and parameters)."""
    import nbformat
    nb = nbformat.read(path, as_version=4)
    if params is not None:
        nb.metadata[STAMP_KEY] = {"id": build_id(params), "params": _jsonable(params)}
    for c in nb.cells:
        tags = c.metadata.setdefault("tags", [])
        if ("injected-parameters" in tags or "parameters" in tags) and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(nb, path)


def check_offline(html_dir: Path) -> list[str]:
    """``page: what it loads`` for every built page or stylesheet that loads anything from another host."""
    bad = []
    for f in sorted(html_dir.rglob("*.html")) + sorted(html_dir.rglob("*.css")):
        text = f.read_text(errors="replace")
        found = [m.group(0) for m in EXTERNAL.finditer(text)] if f.suffix == ".html" else []
        styles = ["".join(g or "" for g in m.groups()) for m in _STYLE.finditer(text)] if f.suffix == ".html" else [text]
        found += [m.group(0) for css in styles for m in CSS_EXTERNAL.finditer(css)]
        bad += [f"{f.relative_to(html_dir)}: {x[:120]}" for x in found]
    return bad


def build(params: BookParams, root: Path, out: Optional[Path] = None, only: Sequence[str] = (), jobs: int = 1,
          html: bool = True, quick: bool = False, env: Optional[dict] = None,
          log: Callable[[str], None] = lambda s: print(s, flush=True)) -> int:
    """Build the book of ``params`` from ``root`` (staged into ``out``); exit status 0 built, 1 a notebook or the HTML
    failed, 2 a bad ``REPOSITORY_URL``. ``only``: chapters to execute (:func:`check_only`); ``html``: run jupyter-book."""
    env = os.environ if env is None else env
    t0 = time.perf_counter()
    target = out.resolve() if out is not None else root
    if target != root:
        stage(root, target, only)
        params = params.replace(runs_root=str(target / "runs"))
    out_dir = target / "book"
    try:  # REPOSITORY_URL turns the Binder/Colab buttons on; a bad URL stops the build before it runs anything
        jb_config = config_args(target, env)
    except LaunchConfigError as e:
        print(str(e), file=sys.stderr)
        return 2
    values = params.model_dump()
    log(f"parameters: {json.dumps(values)}")

    # (1) experiments, once, before the notebooks read them (a notebook that finds its run reruns nothing)
    t = time.perf_counter()
    for name, run in BookRuns(params).prepare(log=log).items():
        log(f"  {name}: {'skipped' if run is None else f'{n_rows(run)} rows, {run.label}'}")
    t_runs = time.perf_counter() - t

    # (2) notebooks; the LONGEST go first, so that none of them ends the build alone
    mds = sorted((m for m in notebooks(root) if selected(m.stem, only)), key=lambda m: m.stem not in LONGEST)
    t = time.perf_counter()
    failed = []

    def one(md: Path):
        try:
            s = execute(md, out_dir, values, root)
            log(f"  executed {md.stem} in {s:.1f} s")
        except Exception as e:  # report every failing notebook, then fail the build
            failed.append(md.stem)
            log(f"  FAILED {md.stem}: {type(e).__name__}: {str(e)[-2000:]}")

    with blas_share(jobs), ThreadPoolExecutor(max(1, jobs)) as ex:
        list(ex.map(one, mds))
    t_nb = time.perf_counter() - t
    if failed:
        print(f"notebooks failed: {', '.join(sorted(failed))}", file=sys.stderr)
        return 1

    # (3) HTML: a book is one build; a page executed with other parameters stops it
    t_html = 0.0
    if html:
        mixed = mixed_pages(target, _jsonable(values))
        if mixed:
            print("refusing to build a mixed book: these pages come from another build:\n  " + "\n  ".join(mixed)
                  + "\nRebuild every chapter (no --only), or build a partial book in its own folder "
                  "(--only ... --out DIR: its table of contents keeps only those chapters).", file=sys.stderr)
            return 1
        t = time.perf_counter()
        jb = Path(sys.executable).with_name("jupyter-book")
        rc = subprocess.call([str(jb), "build", str(target), "-W", "-n", "--keep-going", *jb_config], cwd=target)
        t_html = time.perf_counter() - t
        if rc:
            return rc
        export_site(params, target / "_build" / "html", jobs=jobs, log=log)  # the data chapter 10's live explorer reads
        bad = check_offline(target / "_build" / "html")
        if bad:
            print("pages load scripts, stylesheets, fonts or images from the network:\n  " + "\n  ".join(bad[:20]),
                  file=sys.stderr)
            return 1
    total = time.perf_counter() - t0
    timing = dict(experiments_s=round(t_runs, 1), notebooks_s=round(t_nb, 1), html_s=round(t_html, 1),
                  total_s=round(total, 1), cpus=os.cpu_count(), quick=quick, backend=params.backend)
    (target / "_build").mkdir(exist_ok=True)
    (target / "_build" / "book_timing.json").write_text(json.dumps(timing, indent=2) + "\n")
    log(f"book built in {total:.0f} s ({json.dumps(timing)}) -> {target / '_build' / 'html' / 'index.html'}")
    return 0
