"""Build the book: run the default experiments, execute the notebooks, build the HTML offline.

    python scripts/build_book.py            # what `make book` runs
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    jb = Path(sys.executable).with_name("jupyter-book")
    return subprocess.call([str(jb), "build", str(ROOT), "-W", "-n", "--keep-going"], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
