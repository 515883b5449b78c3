"""How ``make test`` shares the tests between its workers through pytest-xdist's public options only
(``--dist loadfile --no-loadscope-reorder``; issue 54: the suite's own scheduler subclassed xdist's and overrode its
private ``_split_scope`` / ``_assign_work_unit``, and xdist's ``xdist_group`` mark has no effect under pytest 9.2):
each module goes to one worker, so a module's ``scope="module"`` fixture is built once; the longest modules are
collected first (tests/conftest.py ``LONG_MODULES``); the quick book is built once for all workers
(``once_per_run``: a lock in the run's common temporary folder, xdist's documented recipe), and ``make test`` ends
with one line saying what it skipped and why."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_make_test_uses_xdists_public_file_scheduling_in_collection_order():
    mk = (ROOT / "Makefile").read_text()
    line = next(ln for ln in mk.splitlines() if "-m pytest" in ln and "-n $(TEST_JOBS)" in ln)
    assert "--dist loadfile --no-loadscope-reorder" in line, line
    assert "pytest_xdist_make_scheduler" not in (ROOT / "tests" / "conftest.py").read_text()


def test_the_long_modules_come_first_in_their_order_the_rest_as_collected():
    ids = ["tests/test_a.py::test_1", "tests/test_site.py::test_x", "tests/test_b.py::T::test_2",
           "tests/test_book_browser.py::test_y[1]", "tests/test_site.py::test_z", "tests/test_book_browser.py::test_w"]
    order = [ids[i] for i in conftest.long_first(ids)]
    assert order == ["tests/test_book_browser.py::test_y[1]", "tests/test_book_browser.py::test_w",
                     "tests/test_site.py::test_x", "tests/test_site.py::test_z",
                     "tests/test_a.py::test_1", "tests/test_b.py::T::test_2"]


def test_the_long_modules_exist():
    """A renamed module would silently lose its place at the front of the queue."""
    for m in conftest.LONG_MODULES:
        assert (ROOT / m).is_file(), m


class _Factory:
    """tmp_path_factory as one xdist worker sees it: its own basetemp under the run's common folder."""

    def __init__(self, common: Path, worker: str):
        self.base = common / worker
        self.base.mkdir(parents=True, exist_ok=True)

    def getbasetemp(self) -> Path:
        return self.base

    def mktemp(self, name: str) -> Path:
        p = self.base / name
        p.mkdir()
        return p


def test_once_per_run_makes_the_value_once_for_all_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    made, started, results = [], threading.Event(), {}

    def make(folder: Path) -> dict:
        made.append(folder)
        started.set()
        (folder / "book.html").write_text("built")
        return {"folder": str(folder)}

    def worker(name):
        if name != "gw0":
            started.wait(60)  # the other worker asks while (or after) the first one builds
        results[name] = conftest.once_per_run(_Factory(tmp_path, name), "quick-clone", make)

    threads = [threading.Thread(target=worker, args=(w,)) for w in ("gw0", "gw1", "gw2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(made) == 1 and made[0] == tmp_path / "quick-clone"
    assert results == {w: {"folder": str(tmp_path / "quick-clone")} for w in ("gw0", "gw1", "gw2")}


def test_once_per_run_fails_or_skips_every_worker_as_the_first(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    calls = []

    def broken(folder):
        calls.append(folder)
        raise RuntimeError("the recipe failed")

    with pytest.raises(RuntimeError):
        conftest.once_per_run(_Factory(tmp_path, "gw0"), "book", broken)
    with pytest.raises(pytest.fail.Exception, match="made by another worker, failed there: RuntimeError: the recipe"):
        conftest.once_per_run(_Factory(tmp_path, "gw1"), "book", broken)
    assert len(calls) == 1

    def skipping(folder):
        pytest.skip("no .venv")

    for w in ("gw0", "gw1"):
        with pytest.raises(pytest.skip.Exception, match="no .venv"):
            conftest.once_per_run(_Factory(tmp_path, w), "skipped", skipping)
    monkeypatch.delenv("PYTEST_XDIST_WORKER")  # no xdist: made here, in a folder of its own
    assert conftest.once_per_run(_Factory(tmp_path, "main"), "alone", lambda f: f.name) == "alone"


def _skipped(reason: str, when: str = "setup"):
    return SimpleNamespace(longrepr=("tests/test_x.py", 3, f"Skipped: {reason}"), when=when)


def test_the_skip_summary_is_one_line_with_each_reason_and_its_count():
    chromium = "chromium not installed (make install-browser, or Debian: apt-get install -y chromium; CI installs it)"
    line = conftest.skip_summary([_skipped(chromium), _skipped("needs a GPU"), _skipped(chromium)])
    assert line == f"skipped 3: 2 for {chromium}; needs a GPU"
    assert "\n" not in line and conftest.skip_summary([]) is None


def test_make_test_prints_the_skip_summary_under_q(tmp_path):
    """The hook writes the line in pytest's terminal summary, which -q keeps (pytest's own skip reasons need -rs)."""
    import subprocess
    import sys
    (tmp_path / "conftest.py").write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('suite_conftest', {str(ROOT / 'tests' / 'conftest.py')!r})\n"
        "suite = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(suite)\n"
        "pytest_terminal_summary = suite.pytest_terminal_summary\n")
    (tmp_path / "test_s.py").write_text("import pytest\n\ndef test_a():\n    pytest.skip('chromium not installed')\n\n"
                                        "def test_b():\n    pass\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(tmp_path)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert re.search(r"^skipped 1: chromium not installed$", r.stdout, re.M), r.stdout
