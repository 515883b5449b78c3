"""An installed wheel works from any folder (issue 20): the package is built as a wheel, installed (not
editable) into a fresh virtualenv without the network, and the commands a newcomer runs first are run, as
real processes, from an empty folder that is not the checkout: ``validate`` (the bundled templates),
``run`` on the bundled formal templates (``templates/formal`` is not in that folder: the bundled one is
meant), ``stats``, ``composition`` and ``fit-paper`` (its cache in the user cache folder).

The new virtualenv gets the test environment's installed dependencies through a ``.pth`` line (no
download); the editable checkout of the test environment must not shadow the wheel, which the test checks
(``crossprofile_lib.__file__`` lies inside the new virtualenv)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _sh(cmd, cwd, env=None, timeout=1200) -> subprocess.CompletedProcess:
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, (cmd, p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    return p


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(python, crossprofile script, env)`` of a fresh virtualenv holding the wheel."""
    from conftest import fresh_clone
    tmp = tmp_path_factory.mktemp("wheel")
    src = fresh_clone(tmp / "src")   # a clean clone: building in the checkout would leave build/ and egg-info there
    dist = tmp / "dist"
    # the build backend installed here (the test extra's setuptools, the range of [build-system]); -v: its warnings
    build = _sh([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "--no-index",
                 "-w", dist, src], tmp)
    (tmp / "build.log").write_text(build.stdout + build.stderr)
    wheel = next(dist.glob("crossprofile-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "crossprofile_lib/resources/prereg.yaml" in names and "crossprofile_lib/resources/paper_figures.yaml" in names
    templates = [n for n in names if n.startswith("crossprofile_lib/resources/templates/") and n.endswith(".yaml")]
    # the 70 templates, and the decision domains beside them (templates/domains.yaml, not a template)
    assert "crossprofile_lib/resources/templates/domains.yaml" in templates and len(templates) == 71
    venv = tmp / "venv"
    _sh([sys.executable, "-m", "venv", venv], tmp)
    py = venv / "bin" / "python"
    _sh([py, "-m", "pip", "install", "--no-deps", "--no-index", wheel], tmp)
    site = Path(_sh([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp).stdout.strip())
    # the dependencies of the test environment, appended after the new venv's own site-packages
    (site / "zz_test_env_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CROSSPROFILE_", "PYTHON"))}
    env.update(XDG_CACHE_HOME=str(tmp / "user-cache"), MPLBACKEND="Agg")
    where = _sh([py, "-c", "import crossprofile_lib, sys; print(crossprofile_lib.__file__)"], tmp, env).stdout.strip()
    assert Path(where).resolve().is_relative_to(venv.resolve()), f"the wheel is shadowed by {where}"
    return py, venv / "bin" / "crossprofile", env, tmp


def test_the_installed_wheel_runs_from_an_unrelated_folder(installed):
    py, cp, env, tmp = installed
    here = tmp / "elsewhere"
    here.mkdir()
    assert not (here / "templates").exists() and ROOT not in here.parents

    v = _sh([cp, "validate"], here, env)
    assert "70 templates valid, 0 invalid" in v.stdout and str(tmp / "venv") in v.stdout

    r = _sh([cp, "run", "--backend", "ledger", "--out", "D", "--templates", "templates/formal", "--seeds", "0",
             "--budgets", "0.6"], here, env)
    assert "9600 decisions by ledger" in r.stdout
    df = pd.read_parquet(here / "D" / "results.parquet")
    assert len(df) == 9600 and df.template_id.nunique() == 60 and (df.backend == "ledger").all()
    header = json.loads((here / "D" / "run.json").read_text())
    assert header["config"]["templates"] == ["templates/formal"] and header["rows"] == 9600

    # few resamples: what is checked here is that the installed package finds its files, not the estimates
    s = _sh([cp, "stats", "D", "--resamples", "500", "--fit-resamples", "20"], here, env)
    assert "== ledger / reference-decider" in s.stdout and "headroom: ALL - EMPTY" in s.stdout
    assert f"Preregistered contrasts ({tmp / 'venv'}" in s.stdout and " H1 confirmatory" in s.stdout

    c = _sh([cp, "composition", "D"], here, env)
    assert c.stdout.startswith("kept support/decoy/irrelevant") and "\nR1 " in c.stdout

    f = _sh([cp, "fit-paper", "--resamples", "20", "--seeds", "0"], here, env, timeout=3000)
    assert "crossprofile fit-paper:" in f.stdout and "Fitted parameters" in f.stdout
    assert (tmp / "user-cache" / "crossprofile" / "paperfit").is_dir(), "fit-paper's cache is not in the user cache"
    assert not (here / ".crossprofile_cache").exists()
    assert sorted(p.name for p in here.iterdir()) == ["D"], "a command wrote into the working folder"


#: what setuptools prints for a deprecated form (``SetuptoolsDeprecationWarning``, ``BuildBackendWarning: ... is
#: deprecated``, "By 2027-Feb-18, you need to update your project ... or your builds will no longer be supported")
DEPRECATED = re.compile(r"DeprecationWarning|BuildBackendWarning|\bdeprecated\b|no longer be supported", re.IGNORECASE)


def deprecations(log: str) -> list[str]:
    return [line.strip() for line in log.splitlines() if DEPRECATED.search(line)]


def test_the_build_from_a_clean_clone_warns_of_nothing_deprecated(installed):
    """Issue 54: every install printed setuptools' warning that ``project.license`` as a TOML table is deprecated and
    that such builds stop being supported after 2027-02-18. The wheel above was built from a clean clone by the
    setuptools the ``test`` extra installs, which must lie in [build-system]'s range (what a build in isolation
    gets), and its backend's output names nothing deprecated."""
    from packaging.requirements import Requirement
    from packaging.version import Version
    tmp = installed[3]
    backend = Requirement(tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"][0])
    built_with = Version(importlib.metadata.version("setuptools"))
    assert backend.name == "setuptools" and built_with in backend.specifier, (built_with, str(backend))
    log = (tmp / "build.log").read_text()
    assert "Successfully built crossprofile" in log or "Saved " in log, log[-2000:]
    assert deprecations(log) == [], log[-6000:]


def test_the_deprecation_scan_catches_setuptools_warnings():
    old = """  _apply_pyprojecttoml.py:82: BuildBackendWarning: `project.license` as a TOML table is deprecated
          By 2027-Feb-18, you need to update your project and remove deprecated calls
          or your builds will no longer be supported.
  SetuptoolsDeprecationWarning: setup.py install is deprecated."""
    assert len(deprecations(old)) == 4
    assert deprecations("  warning: build_py: byte-compiling is disabled, skipping.\n  adding license file 'LICENSE'") == []
