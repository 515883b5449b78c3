"""The library's layering, checked on the source (every import statement, also those inside functions),
and followed transitively.

Wings are ranked from the ground floor up; a module may import its own wing and any wing of a lower rank,
never a higher one and never a sibling of the same rank:

0. ground floor: ``design`` (the paper's names and grids), ``config`` (the configuration models' shared
   types), ``paths``, ``rng``, ``safety/``
1. resources read as data: ``prompts``, ``paper_figures``
2. ``task/`` (templates, variants, discussion, budgets, tokenizer, memory, evidence, decision)
3. ``policies/`` and ``stats/`` (pure: a function of results tables)
4. ``backends/``
5. ``run/`` (pipeline, runner, results, rebuild)
6. ``hiddenbench/`` and ``paperfit/``
7. ``book/``
8. ``cli/``

Besides the ranks: statistics reach nothing of the task wing even transitively (the issue-20 defect:
``constants`` -> ``variants`` -> ``templates``), the template schema reaches no tokenizer, and no two
modules import each other at module level, directly or through others.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "crossprofile_lib"
PKG = "crossprofile_lib"

RANKS = {
    "": 0, "design": 0, "config": 0, "paths": 0, "rng": 0, "safety": 0,
    "prompts": 1, "paper_figures": 1,
    "task": 2,
    "policies": 3, "stats": 3,
    "backends": 4,
    "run": 5,
    "hiddenbench": 6, "paperfit": 6,
    "book": 7,
    "cli": 8,
}


def module_name(path: Path) -> str:
    rel = path.relative_to(LIB.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {module_name(p): p for p in LIB.rglob("*.py")}


def _resolve(mod: str) -> str:
    """The module a dotted name denotes (``pkg.mod.attr`` -> ``pkg.mod``)."""
    while mod and mod not in MODULES:
        mod = mod.rpartition(".")[0]
    return mod


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    """Modules of the package that ``path`` imports (``from . import x`` counts as ``pkg.x``).

    ``top_level_only``: only statements executed at import time (not inside a function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    nodes = ast.walk(tree)
    if top_level_only:
        def walk(n):
            for c in ast.iter_child_nodes(n):
                if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    continue
                yield c
                yield from walk(c)
        nodes = walk(tree)
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return {r for m in out if m == PKG or m.startswith(PKG + ".") for r in [_resolve(m)] if r}


def wing(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


@lru_cache(maxsize=None)
def closure(mod: str) -> frozenset[str]:
    seen, todo = set(), [mod]
    while todo:
        m = todo.pop()
        for d in imports(MODULES[m]):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return frozenset(seen)


def test_the_checker_sees_relative_lazy_and_package_imports():
    names = imports(LIB / "policies" / "b3.py")
    assert f"{PKG}.prompts" in names and f"{PKG}.task.decision" in names and f"{PKG}.policies.registry" in names
    assert f"{PKG}.run.runner" in imports(LIB / "cli" / "run.py")      # imported inside a function
    assert f"{PKG}.run.runner" not in imports(LIB / "cli" / "run.py", top_level_only=True)


def test_every_wing_has_a_rank():
    assert {wing(m) for m in MODULES} <= set(RANKS), sorted({wing(m) for m in MODULES} - set(RANKS))


def test_no_arrow_from_a_lower_wing_to_a_higher_or_a_sibling():
    bad = []
    for m, p in sorted(MODULES.items()):
        for d in sorted(imports(p)):
            a, b = wing(m), wing(d)
            if a != b and (RANKS[b] > RANKS[a] or (RANKS[b] == RANKS[a] and RANKS[a] > 0)):
                bad.append(f"{m} (rank {RANKS[a]}) imports {d} (rank {RANKS[b]})")
    assert not bad, "\n".join(bad)


def test_stats_reach_nothing_of_the_task_or_pipeline_even_transitively():
    bad = {m: sorted(d for d in closure(m) if RANKS[wing(d)] >= 2 and wing(d) != "stats")
           for m in MODULES if wing(m) == "stats"}
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, bad


def test_the_template_schema_reaches_no_tokenizer_and_no_pipeline():
    reach = closure(f"{PKG}.task.templates")
    assert not {d for d in reach if d.endswith(("tokenizer", "budgets", "discussion")) or RANKS[wing(d)] > 2}, reach


def test_policies_reach_no_backend_and_backends_no_policy():
    for w, forbidden in (("policies", ("backends", "run")), ("backends", ("policies", "run"))):
        for m in (m for m in MODULES if wing(m) == w):
            assert not {d for d in closure(m) if wing(d) in forbidden}, m


def test_no_import_circle_at_module_level():
    graph = {m: imports(p, top_level_only=True) - {m} for m, p in MODULES.items()}
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    # a package __init__ that imports its own submodules is not a circle unless a submodule imports
    # the package back
    real = [c for c in cycles if not all(b.startswith(a + ".") for a, b in zip(c, c[1:]))]
    assert not real, "\n".join(" -> ".join(c) for c in real)


@pytest.mark.parametrize("shim", ["backends/openai.py", "backends/deepseek.py", "balance.py", "policies.py",
                                  "constants.py", "runner.py", "templates.py"])
def test_no_shim_modules_remain(shim):
    assert not (LIB / shim).exists(), f"{shim} was moved into a wing (issue 20)"


def test_few_modules_on_the_ground_floor():
    flat = sorted(p.name for p in LIB.glob("*.py") if p.name != "__init__.py")
    assert flat == ["config.py", "design.py", "paper_figures.py", "paths.py", "prompts.py", "rng.py"], flat


#: Third-party modules a function may import on first use: the optional SDKs (a model backend, a chat
#: template) and the statistics libraries that cost seconds to import (only their fits need them).
LAZY_THIRD_PARTY = ("llama_cpp", "cyllama", "openai", "vllm", "tokenizers", "jinja2", "statsmodels", "scipy",
                    "torch", "transformers", "jsonschema")  # the last three: the vllm-cpu and http extras
#: Wings whose functions may import lazily: the command line (a fast ``--help``) and the book (IPython,
#: widgets and matplotlib live there; its modules are being thinned separately).
LAZY_WINGS = ("cli", "book")


def function_local_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import statement inside a function of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    out += [(node.lineno, a.name) for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    out.append((node.lineno, "." * node.level + (node.module or "")))
    return out


def test_the_local_import_checker_sees_a_function_local_import():
    assert f"{PKG}.run.runner" in {m for _, m in function_local_imports(LIB / "cli" / "run.py")}
    assert "statsmodels.genmod.families" in {m for _, m in function_local_imports(LIB / "stats" / "netlead.py")}


def test_imports_sit_at_module_tops_outside_the_command_line_and_the_book():
    """Issue 20: no function-local import of the package (there are no circles to dodge) nor of a
    declared dependency; only the optional SDKs and the slow statistics libraries are imported on use."""
    bad = []
    for m, p in sorted(MODULES.items()):
        if wing(m) in LAZY_WINGS:
            continue
        for line, mod in function_local_imports(p):
            if mod.split(".")[0] not in LAZY_THIRD_PARTY:
                bad.append(f"{p.relative_to(LIB.parent)}:{line}: import {mod} inside a function")
    assert not bad, "\n".join(bad)


#: What the book's functions may still import on first use: the notebook machinery (IPython, widgets,
#: matplotlib's inline backend, jupytext, papermill, nbformat, traitlets: the kernels' configuration) besides the
#: optional SDKs above.
BOOK_LAZY = LAZY_THIRD_PARTY + ("IPython", "ipywidgets", "matplotlib", "matplotlib_inline", "jupytext", "papermill",
                                "nbformat", "traitlets")


def test_the_book_imports_the_package_at_module_tops():
    """The book's modules import the package (and its declared dependencies) at their tops; only the
    notebook machinery and the optional SDKs load on first use."""
    bad = [f"{p.relative_to(LIB.parent)}:{line}: import {mod} inside a function"
           for m, p in sorted(MODULES.items()) if wing(m) == "book"
           for line, mod in function_local_imports(p) if mod.split(".")[0] not in BOOK_LAZY]
    assert not bad, "\n".join(bad)
