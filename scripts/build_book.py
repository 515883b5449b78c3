"""Build the book: ``python scripts/build_book.py [--quick] [--out DIR] [--only NAMES] [--no-html] [--jobs N]``.

A thin wrapper of ``crossprofile book`` (:mod:`crossprofile_lib.cli.book`; the build itself is
:mod:`crossprofile_lib.book.build`), kept so the command works from a checkout without an installed package.
Run by a Python that lacks the book's packages (a fresh shell's ``python3``, no virtualenv activated), it
runs itself again with the checkout's ``.venv/bin/python`` (what ``make install`` creates), or says to run
``make install`` first. Every Make variable (BACKEND, MODEL, TEMPLATES, SEEDS, BUDGETS, VARIANTS, RESAMPLES,
HIDDENBENCH, JOBS, REPOSITORY_URL) is read from the environment and checked before anything runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
#: Set in the environment of the re-run, so that a virtualenv that also lacks the packages cannot loop.
RERUN_ENV = "CROSSPROFILE_BUILD_BOOK_RERUN"


def _packages_missing() -> str:
    """The first of the book's packages this Python cannot import ("" when all can)."""
    import importlib.util
    for name in ("pandas", "papermill", "jupytext", "yaml"):
        if importlib.util.find_spec(name) is None:
            return name
    return ""


def _rerun_or_explain(missing: str) -> None:
    if VENV_PYTHON.exists() and not os.environ.get(RERUN_ENV):
        os.environ[RERUN_ENV] = "1"
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), str(Path(__file__).resolve()), *sys.argv[1:]])
    where = f"{VENV_PYTHON} lacks it too" if VENV_PYTHON.exists() else f"there is no {VENV_PYTHON.relative_to(ROOT)}"
    sys.stderr.write(f"scripts/build_book.py: {sys.executable} cannot import {missing} (the book's packages), and {where}: "
                     "run `make install` first (it creates .venv), or build with `make book BOOK_ARGS=\"...\"`, "
                     "which installs and runs from .venv in any shell\n")
    sys.exit(2)


if __name__ == "__main__":
    missing = _packages_missing()
    if missing:
        _rerun_or_explain(missing)

sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before any model library loads (see cli/book.py)

from crossprofile_lib.book.build import BookConfigError, check_offline, stage, tidy  # noqa: E402,F401
from crossprofile_lib.cli.book import VARIABLES, book_params, jobs, main, parameters  # noqa: E402,F401

if __name__ == "__main__":
    sys.exit(main())
