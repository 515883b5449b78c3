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
