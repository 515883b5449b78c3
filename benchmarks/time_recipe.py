"""Time one README recipe as a new user runs it: in a fresh shell (``env -i PATH=/usr/bin:/bin HOME=<empty
folder>``: no virtualenv activated, an empty user cache, so an empty call cache), from the checkout's root.

    python benchmarks/time_recipe.py --out benchmarks/results/quick_book.json --clean _build/quick \\
        -- make book BACKEND=none BOOK_ARGS="--quick --out _build/quick"

``--clean DIR`` deletes DIR first (a build folder), so the figure is a first build, not a rebuild. The file
records the commit, the date, the load average before and after, the command and the wall time
(``benchmarks/record.py``); the figure is written as measured, never adjusted for the load.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import ROOT, Recorder  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the results file to write")
    ap.add_argument("--clean", action="append", default=[], help="a folder (under the checkout) deleted first")
    ap.add_argument("recipe", nargs=argparse.REMAINDER, help="the recipe, after --")
    a = ap.parse_args(argv)
    recipe = [x for x in a.recipe if x != "--"] if a.recipe[:1] == ["--"] else a.recipe
    if not recipe:
        ap.error("give the recipe after --")
    for d in a.clean:
        p = (ROOT / d).resolve()
        if ROOT not in p.parents:
            ap.error(f"--clean {d}: not a folder under {ROOT}")
        shutil.rmtree(p, ignore_errors=True)
    line = shlex.join(recipe) if len(recipe) > 1 else recipe[0]
    rec = Recorder(argv=sys.argv)
    with tempfile.TemporaryDirectory(prefix="recipe-home-") as home:
        t0 = time.monotonic()
        r = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", f"HOME={home}", "bash", "-c", line], cwd=ROOT)
        wall = time.monotonic() - t0
    rec.write(a.out, {"recipe": line, "shell": "env -i PATH=/usr/bin:/bin HOME=<empty folder> bash -c RECIPE",
                      "exit_status": r.returncode, "niceness": os.nice(0),
                      "wall_s": round(wall, 1), "wall_min": round(wall / 60, 1)})
    print(f"{line}: exit {r.returncode}, {wall:.1f} s -> {a.out}")
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
