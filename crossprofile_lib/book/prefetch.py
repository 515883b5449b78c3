"""``python -m crossprofile_lib.book.prefetch --reference-only``: the reference decider's runs of the default
parameters on every core, while ``make book`` installs the engine."""

from __future__ import annotations

import argparse
import os
import time

from crossprofile_lib.book.experiments import BookRuns
from crossprofile_lib.book.schedule import run_steps


def main(argv=None) -> int:
    """``--reference-only``: the reference runs of the default parameters (``HIDDENBENCH`` from the environment)."""
    ap = argparse.ArgumentParser(prog="python -m crossprofile_lib.book.prefetch", description=main.__doc__)
    ap.add_argument("--reference-only", action="store_true", required=True,
                    help="run only the reference decider's runs (no language model)")
    ap.add_argument("--workers", type=int, default=None, help="processes at once (default: the cores)")
    a = ap.parse_args(argv)
    params = {"backend": ""}
    if os.environ.get("HIDDENBENCH", "").strip():
        params["hiddenbench_path"] = os.environ["HIDDENBENCH"].strip()
    t0 = time.perf_counter()
    run_steps(BookRuns(params), a.workers, log=lambda s: print(s, flush=True))
    print(f"reference runs ready in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
