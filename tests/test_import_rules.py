"""The library's layering, checked on the source (every import statement, also those inside
functions): statistics and the template schema know nothing of the pipeline; memory policies
import no backend; backends import no policy (they receive what they need as arguments)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "crossprofile_lib"
PKG = "crossprofile_lib"

#: modules that build tasks, discussions, memories or decisions: the pipeline side
PIPELINE = ("runner", "pipeline", "policies", "backends", "discussion", "rebuild", "walkthrough", "hiddenbench",
            "book", "cli", "decider", "evidence", "provenance", "budgets", "memory")


def module_name(path: Path) -> str:
    rel = path.relative_to(LIB.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (``from . import x`` counts as ``pkg.x``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # `from . import x` may name a module
    return {m for m in out if m == PKG or m.startswith(PKG + ".")}


def files(*rel: str) -> list[Path]:
    out = []
    for r in rel:
        p = LIB / r
        out.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    return out


def offenders(paths, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for p in paths:
        for m in sorted(imports(p)):
            top = m.split(".")[1] if m.count(".") else ""
            if top in forbidden:
                bad.append(f"{p.relative_to(LIB.parent)} imports {m}")
    return bad


def test_the_checker_sees_relative_lazy_and_package_imports(tmp_path):
    src = LIB / "policies" / "b3.py"
    names = imports(src)
    assert f"{PKG}.prompts" in names and f"{PKG}.decider" in names and f"{PKG}.policies.registry" in names
    assert f"{PKG}.runner" in imports(LIB / "rebuild.py")      # imported inside a function


def test_stats_import_nothing_of_the_pipeline():
    bad = offenders(files("stats"), PIPELINE + ("templates",))
    assert not bad, "stats/ must be functions of results tables (helper S's part of issue 12):\n" + "\n".join(bad)


def test_templates_import_nothing_of_the_pipeline_nor_the_tokenizer():
    bad = offenders(files("templates.py"), PIPELINE + ("tokenizer",))
    assert not bad, "the template schema must not depend on the pipeline or the tokenizer:\n" + "\n".join(bad)


def test_policies_import_no_backend():
    bad = offenders(files("policies"), ("backends", "runner", "pipeline"))
    assert not bad, "policies receive callables from the pipeline, never a backend:\n" + "\n".join(bad)


def test_backends_import_no_policy():
    bad = offenders(files("backends"), ("policies", "runner", "pipeline"))
    assert not bad, "backends receive memories and prompts, never a policy:\n" + "\n".join(bad)


@pytest.mark.parametrize("shim", ["backends/openai.py", "backends/deepseek.py", "balance.py", "policies.py"])
def test_no_shim_modules_remain(shim):
    assert not (LIB / shim).exists(), f"{shim} was replaced (provider table / policies package)"
