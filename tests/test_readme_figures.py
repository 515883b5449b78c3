"""Every speed figure in the README comes from a results file (DEVELOPERS.md; issue 25): each time or rate
quoted in README.md (seconds, minutes, calls or decisions per second) must appear, to the README's rounding,
in one of benchmarks/results/*.json, and every results file the README names must exist and record its
commit and command."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

#: a number followed by a time or rate unit; the factor converts it to the results files' unit
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "minutes": 60.0, "calls/s": 1.0, "calls per second": 1.0,
          "decisions/s": 1.0}
_FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?(calls per second|calls/s|decisions/s|minutes|min|ms|us|s)\b")


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


def _recorded() -> list[float]:
    vals: list[float] = []
    for f in sorted(RESULTS.glob("*.json")):
        _numbers(json.loads(f.read_text(encoding="utf-8")), vals)
    return vals


def _decimals(s: str) -> int:
    return len(s.split(".")[1]) if "." in s else 0


def matches(figure: str, unit: str, recorded: list[float]) -> bool:
    """A README figure is backed when some recorded value, in the README's unit, rounds to it (or,
    for a time in minutes, when a recorded value in seconds does)."""
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


def test_every_readme_speed_figure_is_in_a_results_file():
    recorded = _recorded()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [f"README.md:{n}: {fig} {unit}  ({line[:90]})" for n, fig, unit, line in readme_figures(text)
               if not matches(fig, unit, recorded)]
    assert not missing, "speed figures in the README with no results file behind them:\n" + "\n".join(missing)


def test_the_scan_catches_an_invented_figure():
    # near misses: a figure one rounding step off its recorded value, and a minute figure not in seconds
    assert matches("6.18", "s", [6.18]) and matches("4.4", "min", [263.7]) and matches("84", "us", [8.4e-5])
    assert not matches("6.19", "s", [6.18]) and not matches("4.5", "min", [263.7])
    figs = list(readme_figures("the grid took 7.77 s, 12 calls/s and 3 min"))
    assert [(f, u) for _, f, u, _ in figs] == [("7.77", "s"), ("12", "calls/s"), ("3", "min")]

