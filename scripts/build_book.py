"""Build the book: ``python scripts/build_book.py [--quick] [--out DIR] [--only NAMES] [--no-html] [--jobs N]``.

A thin wrapper of ``crossprofile book`` (:mod:`crossprofile_lib.cli.book`; the build itself is
:mod:`crossprofile_lib.book.build`), kept so the README's command works from a checkout without an
installed package. Every Make variable (BACKEND, MODEL, TEMPLATES, SEEDS, BUDGETS, VARIANTS, RESAMPLES,
HIDDENBENCH, JOBS, REPOSITORY_URL) is read from the environment and checked before anything runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before any model library loads (see cli/book.py)

from crossprofile_lib.book.build import BookConfigError, check_offline, stage, tidy  # noqa: E402,F401
from crossprofile_lib.cli.book import VARIABLES, book_params, jobs, main, parameters  # noqa: E402,F401

if __name__ == "__main__":
    sys.exit(main())
