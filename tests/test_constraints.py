"""constraints.txt (the full pinned environment) agrees with the direct pins in pyproject.toml."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _constraints() -> dict[str, str]:
    pins = {}
    for i, line in enumerate((ROOT / "constraints.txt").read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = PIN.match(line)
        assert m, f"constraints.txt line {i}: {line!r} is not 'name==version'"
        name = _norm(m.group(1))
        assert name not in pins, f"constraints.txt line {i}: {name} pinned twice"
        pins[name] = m.group(2)
    return pins


def test_every_direct_pin_matches_the_constraints():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in ("llm", "book", "test"):
        reqs += project["optional-dependencies"][extra]
    pins = _constraints()
    assert "crossprofile" not in pins, "the project itself must not be pinned in constraints.txt"
    for req in reqs:
        m = PIN.match(req)
        assert m, f"pyproject.toml: {req!r} is not pinned with =="
        name = _norm(m.group(1))
        assert pins.get(name) == m.group(2), f"{name}: pyproject.toml pins {m.group(2)}, constraints.txt {pins.get(name)}"


def test_makefile_installs_with_the_constraints():
    mk = (ROOT / "Makefile").read_text()
    installs = [ln for ln in mk.splitlines() if "$(PIP) install" in ln and "--upgrade pip" not in ln]
    assert installs and all("$(CONSTRAINTS)" in ln for ln in installs)
    assert "CONSTRAINTS := -c constraints.txt" in mk
