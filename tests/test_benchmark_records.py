"""Every benchmark results file says what was measured where (issue 26.4): the commit, the date, the
load average and the command (``benchmarks/record.py``), and the README and the book's reference pages (where
the README's measurements moved, issue 35) cite only results files that exist, here or, for an older measurement, in
git history (``git show REV:benchmarks/results/NAME``). Each benchmark keeps one current results file, and every file
left in ``benchmarks/`` is cited by a results file, a page of the book or the README (issue 54)."""

import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = sorted((ROOT / "benchmarks" / "results").glob("*.json"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from record import FIELDS, Recorder  # noqa: E402


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_results_file_records_commit_date_load_and_command(path):
    rec = json.loads(path.read_text()).get("record")
    assert isinstance(rec, dict), f"{path.name}: no 'record' (write it with benchmarks/record.py)"
    missing = [f for f in FIELDS if f not in rec]
    assert not missing, f"{path.name}: record lacks {missing}"
    assert re.fullmatch(r"[0-9a-f]{40}", rec["commit"]), f"{path.name}: commit {rec['commit']!r}"
    assert re.match(r"\d{4}-\d{2}-\d{2}", rec["date"]) and rec["command"].strip()
    for k in ("load_average_before", "load_average_after"):
        assert rec[k] is None or (len(rec[k]) == 3 and all(x >= 0 for x in rec[k])), f"{path.name}: {k}"


PAGES = [ROOT / "README.md", *sorted((ROOT / "book").glob("reference-*.md"))]


#: a file cited from git history (an older measurement): ``git show REV:PATH``
GIT_CITED = re.compile(r"git show ([0-9a-f]{7,40}):(benchmarks/[A-Za-z0-9_/.-]*[A-Za-z0-9_])")
#: a results file cited as it is now (not the PATH of a ``git show REV:PATH``)
CITED = re.compile(r"(?<![:\w/])benchmarks/results/([A-Za-z0-9_*.-]+\.json)")


def in_history(rev: str, path: str) -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}:{path}"], capture_output=True).returncode == 0


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_readme_and_reference_pages_cite_only_results_files_that_exist(page):
    text = page.read_text()
    cited = set(CITED.findall(text))
    names = {p.name for p in RESULTS}
    if page.name in ("README.md", "reference-benchmarks.md"):
        assert cited, f"{page.name} cites no results file"
    for c in cited:
        pattern = re.compile("^" + re.escape(c).replace(r"\*", ".*") + "$")
        assert any(pattern.match(n) for n in names), f"{page.name} cites benchmarks/results/{c}, which does not exist"
    for rev, path in set(GIT_CITED.findall(text)):
        assert in_history(rev, path), f"{page.name} cites `git show {rev}:{path}`, which this clone's history lacks"


def test_the_citation_forms_are_told_apart():
    text = "(`benchmarks/results/grid.json`; then `git show eec626e:benchmarks/results/fresh_ci.json`)"
    assert CITED.findall(text) == ["grid.json"]
    assert GIT_CITED.findall(text) == [("eec626e", "benchmarks/results/fresh_ci.json")]
    assert in_history("eec626e", "benchmarks/results/fresh_machine_726a75c.json")
    assert not in_history("eec626e", "benchmarks/results/no_such_run.json")


def _cites(text: str, path: str, name_alone: bool) -> bool:
    """Whether ``text`` names ``path`` (relative to the checkout): as itself, through a ``*`` pattern of it, or (in a
    results file, which names its siblings) by its file name alone."""
    for m in re.finditer(r"benchmarks/[A-Za-z0-9_/*.-]*[A-Za-z0-9_*]", text):
        if m.start() and text[m.start() - 1] == ":":  # the PATH of a git show REV:PATH, an older file
            continue
        if m.group() == path or ("*" in m.group() and fnmatch.fnmatchcase(path, m.group())):
            return True
    return name_alone and re.search(rf"(?<![\w.-]){re.escape(Path(path).name)}(?![\w.-])", text) is not None


def uncited(files: list[str], pages: dict[str, str], results: dict[str, str]) -> list[str]:
    """The files (paths under benchmarks/) that no page and no other results file cites."""
    return [f for f in files
            if not any(_cites(text, f, False) for text in pages.values())
            and not any(_cites(text, f, True) for name, text in results.items() if name != f)]


def test_every_file_in_benchmarks_is_cited_by_a_results_file_a_book_page_or_the_readme():
    """A script is cited by the results file it wrote (its record's command) or by the page that says how to run it; a
    results file by the page that quotes it (or by the results file combined from it). An uncited file is a decision
    already made or a measurement nobody reads: delete it (git keeps it) or say on a page what it is for."""
    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "benchmarks").rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts)
    pages = {p.name: p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "book").glob("*.md"))]}
    results = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
               for p in sorted((ROOT / "benchmarks" / "results").glob("*")) if p.suffix in (".json", ".md")}
    assert len(files) > 20 and uncited(files, pages, results) == []


def test_the_citation_check_catches_an_uncited_file_and_its_near_misses():
    files = ["benchmarks/bench_x.py", "benchmarks/results/x.json", "benchmarks/results/x_run.json",
             "benchmarks/results/old.json"]
    pages = {"reference-benchmarks.md": "`python benchmarks/bench_x.py` (`benchmarks/results/x.json`); earlier: "
                                        "`git show eec626e:benchmarks/results/old.json`"}
    results = {"benchmarks/results/x.json": '{"combined from": "x_run.json"}'}
    assert uncited(files, pages, results) == ["benchmarks/results/old.json"]
    # a results file does not cite itself, and a name inside a longer name is not a citation
    assert uncited(["benchmarks/results/x.json"], {}, {"benchmarks/results/x.json": "x.json"}) == ["benchmarks/results/x.json"]
    assert uncited(["benchmarks/results/x.json"], {}, {"benchmarks/results/y.json": "x.json.bak, old_x.json"}) \
        == ["benchmarks/results/x.json"]
    assert uncited(["benchmarks/results/llamacpp_loaded.json"], {"p": "`benchmarks/results/llamacpp*.json`"}, {}) == []


def test_one_current_results_file_per_fresh_machine_benchmark():
    """Issue 54: benchmarks/results/ held 18 ``fresh_ci*.json`` and 14 ``fresh_machine_*.json``, one per commit
    measured. The current run of each is ``fresh_ci.json`` and ``fresh_machine.json`` (fresh_machine.sh writes these
    names); older runs are in git history."""
    names = sorted(p.name for p in (ROOT / "benchmarks" / "results").glob("fresh_*"))
    assert names == ["fresh_ci.json", "fresh_machine.json"], names


def test_recorder_writes_the_fields(tmp_path):
    out = Recorder(command="python x.py --y").write(tmp_path / "r.json", {"figure": 1.5})
    assert json.loads((tmp_path / "r.json").read_text()) == out
    assert out["figure"] == 1.5 and out["record"]["command"] == "python x.py --y"
    assert all(f in out["record"] for f in FIELDS)
