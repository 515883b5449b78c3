"""An installed wheel works from any folder (issue 20): the package is built as a wheel, installed (not
editable) into a fresh virtualenv without the network, and the commands a newcomer runs first are run, as
real processes, from an empty folder that is not the checkout: ``validate`` (the bundled templates),
``run`` on the bundled formal templates (``templates/formal`` is not in that folder: the bundled one is
meant), ``stats``, ``composition`` and ``fit-paper`` (its cache in the user cache folder).

The new virtualenv gets the test environment's installed dependencies through a ``.pth`` line (no
download); the editable checkout of the test environment must not shadow the wheel, which the test checks
(``crossprofile_lib.__file__`` lies inside the new virtualenv)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
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
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"   # a copy: building in the checkout would leave build/ and egg-info there
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "crossprofile_lib", src / "crossprofile_lib", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp / "dist"
    _sh([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", dist, src], tmp)
    wheel = next(dist.glob("crossprofile-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "crossprofile_lib/resources/prereg.yaml" in names and "crossprofile_lib/resources/paper_figures.yaml" in names
    assert sum(n.startswith("crossprofile_lib/resources/templates/") and n.endswith(".yaml") for n in names) == 70
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
