"""``crossprofile stats --no-cache`` prints the same digits as the golden report: every table, every
estimate, interval, p-value and fit of a small stochastic grid, text and JSON.

The golden files (``tests/golden/stats_small/report.txt``, ``report.json``) were written at
commit 7f0571e (before issue 26's speed work on ``stats``: targeted statsmodels imports, one
fixed-effects fit shared by the Wald and likelihood-ratio tests, the variational mixed fit's
gradient without scipy.sparse, the recorded choice data decoded at once). A speed change must
keep every digit: the text report is compared character for character, the JSON report value
for value (floats to a relative 1e-12: a changed estimate fails, a last-bit BLAS difference on
another CPU does not). An intended change of an estimate rewrites the golden with

    python tests/test_stats_golden.py --write

and says why in its commit.

The grid: the reference decider made stochastic (social_proof=0.4, irrelevant_weight=0.3,
inverse_temperature=3) on the 60 formal templates, seed 0, budget 0.6, seven policies (copy
family, R1-rel for a secondary family of its own, ALL, EMPTY); 2000 resamples, 200 social-proof
refits. Every fit of the command is fitted there (none refused for too few templates).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "stats_small"
RUN = ["run", "--backend", "ledger", "--templates", "templates/formal", "--seeds", "0", "--budgets", "0.6",
       "--policies", "R1,B4,Random,M1,R1-rel,ALL,EMPTY", "--backend-option", "social_proof=0.4",
       "--backend-option", "irrelevant_weight=0.3", "--backend-option", "inverse_temperature=3"]
STATS = ["--no-cache", "--resamples", "2000", "--fit-resamples", "200"]


def normalise(text: str, run_dir: Path) -> str:
    """The report without the run folder's and the checkout's paths (they differ between machines)."""
    return text.replace(str(run_dir), "<RUN>").replace(str(ROOT), "<ROOT>")


def reports(run_dir: Path, capture) -> dict:
    """``{"report.txt": text, "report.json": json text}`` of ``crossprofile stats`` on ``run_dir``
    (``capture(args) -> stdout``)."""
    return {"report.txt": normalise(capture(["stats", str(run_dir), *STATS]), run_dir),
            "report.json": normalise(capture(["stats", str(run_dir), *STATS, "--json"]), run_dir)}


def same_json(a, b, path="$", rel=1e-12) -> list[str]:
    """Where two JSON values differ (floats: beyond ``rel``; everything else exactly)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in same_json(a[k], b[k], f"{path}.{k}", rel)]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in same_json(x, y, f"{path}[{i}]", rel)]
    if isinstance(a, float) and isinstance(b, float) and not isinstance(a, bool):
        return [] if math.isclose(a, b, rel_tol=rel, abs_tol=1e-300) else [f"{path}: {a!r} != {b!r}"]
    return [] if (type(a) is type(b) and a == b) else [f"{path}: {a!r} != {b!r}"]


@pytest.fixture(scope="module")
def now(tmp_path_factory) -> dict:
    from crossprofile_lib.cli import main
    run_dir = tmp_path_factory.mktemp("golden") / "run"
    assert main([*RUN, "--out", str(run_dir)]) == 0
    return reports(run_dir, _in_process(main))


def _in_process(main):
    import contextlib
    import io

    def capture(args):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(args) == 0
        return buf.getvalue()
    return capture


def test_text_report_is_the_golden_digit_for_digit(now):
    golden = (GOLDEN / "report.txt").read_text(encoding="utf-8")
    assert "BinomialBayesMixedGLM.fit_vb" in golden and "GEE logit" in golden and "not fitted" not in golden
    if now["report.txt"] != golden:
        import difflib
        diff = "".join(list(difflib.unified_diff(golden.splitlines(True), now["report.txt"].splitlines(True),
                                                 "golden", "now"))[:80])
        pytest.fail(f"crossprofile stats prints other digits than the golden report:\n{diff}")


def test_json_report_is_the_golden_value_for_value(now):
    golden = json.loads((GOLDEN / "report.json").read_text(encoding="utf-8"))
    diffs = same_json(golden, json.loads(now["report.json"]))
    assert not diffs, f"{len(diffs)} values differ from the golden, e.g. " + "; ".join(diffs[:10])


def test_the_comparison_sees_a_changed_estimate():
    golden = json.loads((GOLDEN / "report.json").read_text(encoding="utf-8"))
    changed = json.loads(json.dumps(golden))
    terms = changed["models"][0]["net_lead"]["mixed"]["terms"]
    terms[0]["coef"] = terms[0]["coef"] * (1 + 1e-9)        # the mixed fit's first coefficient, 9th digit
    assert same_json(golden, changed) == ["$.models[0].net_lead.mixed.terms[0].coef: "
                                          f"{golden['models'][0]['net_lead']['mixed']['terms'][0]['coef']!r} != "
                                          f"{terms[0]['coef']!r}"]
    assert same_json(golden, golden) == []
    assert same_json({"a": 1}, {"a": 1.0}) and same_json({"a": True}, {"a": 1})


def _write() -> None:
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cli = [sys.executable, "-m", "crossprofile_lib.cli"]
        subprocess.run(cli + RUN + ["--out", str(run_dir)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        out = reports(run_dir, lambda a: subprocess.run(cli + a, check=True, cwd=ROOT, text=True,
                                                        stdout=subprocess.PIPE).stdout)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, text in out.items():
        (GOLDEN / name).write_text(text, encoding="utf-8")
        print(f"wrote {GOLDEN / name}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/test_stats_golden.py --write")
    _write()
