"""Every benchmark results file says what was measured where (issue 26.4): the commit, the date, the
load average and the command (``benchmarks/record.py``), and the README and the book's reference pages (where
the README's measurements moved, issue 35) cite only results files that exist."""

import json
import re
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


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_readme_and_reference_pages_cite_only_results_files_that_exist(page):
    cited = set(re.findall(r"benchmarks/results/([A-Za-z0-9_*.-]+\.json)", page.read_text()))
    names = {p.name for p in RESULTS}
    if page.name in ("README.md", "reference-benchmarks.md"):
        assert cited, f"{page.name} cites no results file"
    for c in cited:
        pattern = re.compile("^" + re.escape(c).replace(r"\*", ".*") + "$")
        assert any(pattern.match(n) for n in names), f"{page.name} cites benchmarks/results/{c}, which does not exist"


def test_recorder_writes_the_fields(tmp_path):
    out = Recorder(command="python x.py --y").write(tmp_path / "r.json", {"figure": 1.5})
    assert json.loads((tmp_path / "r.json").read_text()) == out
    assert out["figure"] == 1.5 and out["record"]["command"] == "python x.py --y"
    assert all(f in out["record"] for f in FIELDS)
