"""Every speed figure in the README and in the book's reference pages comes from a results file (DEVELOPERS.md;
issues 25 and 35): each time or rate quoted (seconds, minutes, calls or decisions per second) must appear, to
the page's rounding, in a results file in benchmarks/results/ that the same section of the page names (so a
figure is traceable to the file, its commit and its command), or in an older results file the section cites from git
history (``git show REV:benchmarks/results/NAME``); every results file a page names must exist and record its
commit and command (tests/test_benchmark_records.py checks the record)."""

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

#: The pages whose figures are checked: the README and the reference pages the book renders (the README's
#: reference material moved there, issue 35).
PAGES = [ROOT / "README.md", *sorted((ROOT / "book").glob("reference-*.md"))]

#: a number followed by a time or rate unit; the factor converts it to the results files' unit
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "minutes": 60.0, "calls/s": 1.0, "calls per second": 1.0,
          "decisions/s": 1.0}
_FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?(calls per second|calls/s|decisions/s|minutes|min|ms|us|s)\b")
_CITED = re.compile(r"(?<![:\w/])benchmarks/results/([A-Za-z0-9_*.-]+\.json)")
_GIT_CITED = re.compile(r"git show ([0-9a-f]{7,40}):(benchmarks/results/[A-Za-z0-9_.-]+\.json)")
_HEADING = re.compile(r"^#{1,6} ", re.M)


def _numbers(x, out):
    if isinstance(x, bool) or x is None:
        return out
    if isinstance(x, (int, float)):
        out.append(float(x))
    elif isinstance(x, dict):
        for v in x.values():
            _numbers(v, out)
    elif isinstance(x, list):
        for v in x:
            _numbers(v, out)
    elif isinstance(x, str):  # figures recorded in a note ("about 5 minutes")
        for m in re.finditer(r"\d[\d,]*(?:\.\d+)?", x):
            out.append(float(m.group().replace(",", "")))
    return out


def _files(cited: set[str]) -> list[Path]:
    """The results files named (a ``*`` in a name matches any text)."""
    out = []
    for c in sorted(cited):
        pattern = re.compile("^" + re.escape(c).replace(r"\*", ".*") + "$")
        out += [p for p in sorted(RESULTS.glob("*.json")) if pattern.match(p.name)]
    return out


def _recorded(files=None) -> list[float]:
    vals: list[float] = []
    for f in (sorted(RESULTS.glob("*.json")) if files is None else files):
        _numbers(json.loads(f.read_text(encoding="utf-8")), vals)
    return vals


def _git_recorded(cited: set[tuple[str, str]]) -> list[float]:
    """The numbers of the results files a section cites from git history (``git show REV:PATH``)."""
    vals: list[float] = []
    for rev, path in sorted(cited):
        r = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True, text=True)
        assert r.returncode == 0, f"`git show {rev}:{path}` failed (is this a clone with its history?): {r.stderr}"
        _numbers(json.loads(r.stdout), vals)
    return vals


def _decimals(s: str) -> int:
    return len(s.split(".")[1]) if "." in s else 0


def matches(figure: str, unit: str, recorded: list[float]) -> bool:
    """A figure is backed when some recorded value, in the page's unit, rounds to it (or, for a time in
    minutes, when a recorded value in seconds does)."""
    v = float(figure.replace(",", ""))
    d = _decimals(figure.replace(",", ""))
    half = 0.5 * 10 ** -d + 1e-9
    for w in recorded:
        if abs(w - v) <= half:
            return True
        if unit in ("min", "minutes") and abs(w / 60 - v) <= half:
            return True
        if unit in ("ms", "us") and abs(w / _UNITS[unit] - v) <= half:
            return True
    return False


def readme_figures(text: str):
    for n, line in enumerate(text.splitlines(), 1):
        for m in _FIGURE.finditer(line):
            yield n, m.group(1), m.group(2), line.strip()


def sections(text: str):
    """(first line number, text) of each part of a page between headings."""
    starts = [0] + [m.start() for m in _HEADING.finditer(text) if m.start()]
    for a, b in zip(starts, starts[1:] + [len(text)]):
        yield text.count("\n", 0, a) + 1, text[a:b]


def unbacked(text: str, name: str) -> list[str]:
    """The figures of a page that no results file named in their section holds."""
    out = []
    for first, sec in sections(text):
        cited, from_git = set(_CITED.findall(sec)), set(_GIT_CITED.findall(sec))
        recorded = _recorded(_files(cited)) + _git_recorded(from_git)
        cited |= {f"{rev}:{path}" for rev, path in from_git}
        for n, fig, unit, line in readme_figures(sec):
            if not matches(fig, unit, recorded):
                why = "no results file named in its section" if not cited else f"not in {', '.join(sorted(cited))}"
                out.append(f"{name}:{first + n - 1}: {fig} {unit} ({why}): {line[:90]}")
    return out


def test_every_speed_figure_is_in_a_results_file_its_section_names():
    missing = [x for p in PAGES for x in unbacked(p.read_text(encoding="utf-8"), p.relative_to(ROOT).as_posix())]
    assert not missing, "speed figures with no results file behind them:\n" + "\n".join(missing)


def test_the_pages_carry_figures_and_the_readme_its_build_times():
    counts = {p.name: len(list(readme_figures(p.read_text(encoding="utf-8")))) for p in PAGES}
    assert counts["README.md"] >= 2 and counts["reference-benchmarks.md"] >= 20, counts  # the scan reads something


def test_the_scan_catches_an_invented_figure():
    # near misses: a figure one rounding step off its recorded value, and a minute figure not in seconds
    assert matches("6.18", "s", [6.18]) and matches("4.4", "min", [263.7]) and matches("84", "us", [8.4e-5])
    assert not matches("6.19", "s", [6.18]) and not matches("4.5", "min", [263.7])
    figs = list(readme_figures("the grid took 7.77 s, 12 calls/s and 3 min"))
    assert [(f, u) for _, f, u, _ in figs] == [("7.77", "s"), ("12", "calls/s"), ("3", "min")]


def test_a_figure_must_be_in_the_file_its_section_names():
    assert matches("6.18", "s", _recorded([RESULTS / "grid.json"]))  # the grid's minimum, as the benchmarks page quotes it
    page = "# A\n\nThe grid took 6.18 s (`benchmarks/results/grid.json`).\n\n# B\n\nIt took 6.18 s.\n"
    bad = unbacked(page, "page")
    assert len(bad) == 1 and "page:7:" in bad[0] and "no results file named" in bad[0], bad
    wrong = "# A\n\nThe grid took 6.19 s (`benchmarks/results/grid.json`).\n"
    assert len(unbacked(wrong, "p")) == 1 and "not in grid.json" in unbacked(wrong, "p")[0]
    assert not unbacked("# A\n\nThe grid took 6.18 s (`benchmarks/results/grid.json`).\n", "p")


def test_a_figure_may_come_from_a_results_file_in_git_history():
    page = ("# A\n\nIdle, 6.7 min (`git show eec626e:benchmarks/results/fresh_machine_726a75c.json`).\n\n"
            "# B\n\nIdle, 6.7 min (`benchmarks/results/grid.json`).\n")
    bad = unbacked(page, "p")
    assert len(bad) == 1 and "p:7:" in bad[0], bad
