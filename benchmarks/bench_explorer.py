"""Benchmark: chapter 10's live explorer in the published book (issue 53): how fast the page answers a control change
on a phone-class CPU, and what weight it adds to the site. Measured, never asserted in a test.

    python benchmarks/bench_explorer.py [--throttle 4] [--changes 40] [--seed 53] [--html DIR] [--no-default-export]

* **speed**: chapter 10 of a partial quick book shaped like the default book's explorer (``crossprofile book --quick
  --only 10`` with SEEDS=0,1,2 and BUDGETS=0.4,0.6,0.8,128t: 3 seeds x 4 budgets per template, as the default book),
  served on 127.0.0.1, opened in headless Chromium at 390 px with the DevTools CPU throttling (``--throttle``: 4, the
  slowdown Lighthouse uses for a mid-range phone). For each control, ``--changes`` changes to values drawn by
  ``numpy.random.default_rng(--seed)``, each timed in the page from the input event to the frame after the new view
  is in the page (``requestAnimationFrame``, then a task); the template control also on its first load of a template
  (its data file fetched and inflated) and again once loaded.
* **weight**: the explorer's files in that site (script, stylesheet, data), and the data the DEFAULT book exports
  (60 formal templates, 3 seeds, 4 budgets: ``export`` on the default parameters, its time too), on disk and gzipped.

Writes benchmarks/results/explorer.json (benchmarks/record.py: commit, command, load average).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))
from record import Recorder  # noqa: E402

from crossprofile_lib.book import explorer_export as X  # noqa: E402

SHAPE = {"SEEDS": "0,1,2", "BUDGETS": "0.4,0.6,0.8,128t", "TOKENIZER": "offline", "BACKEND": "none"}
PAGE = "book/10-explorer.html"

#: One change of a control, timed in the page: input event -> new view in the page -> the next frame.
TIMED = """(async (name, value) => {
  const frame = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  const el = document.querySelector(`.cp-live-controls [name='${name}']`);
  await frame();
  const t0 = performance.now();
  el.value = value; el.dispatchEvent(new Event('input', {bubbles: true}));
  await window.cpExplorer.pending;
  await frame();
  return [performance.now() - t0, window.cpExplorer.lastRenderMs, document.querySelector('.cp-live-view').dataset.shows];
})"""


def build(out: Path) -> Path:
    env = dict(os.environ, **SHAPE, CROSSPROFILE_CACHE=str(out.parent / "cache"))
    for k in ("REPOSITORY_URL", "RUNS", "BACKENDS", "POLICY_FILES", "TEMPLATES"):
        env.pop(k, None)
    cli = Path(sys.executable).with_name("crossprofile")
    subprocess.run([str(cli), "book", "--quick", "--only", "10", "--out", str(out)], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return out / "_build" / "html"


def sizes(folder: Path) -> dict:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {"files": len(files), "bytes": sum(p.stat().st_size for p in files),
            "gzip_bytes": sum(len(gzip.compress(p.read_bytes(), 9)) for p in files)}


def summary(ms: list[float]) -> dict:
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 1),
            "p90_ms": round(float(np.percentile(ms, 90)), 1), "max_ms": round(max(ms), 1)}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def speed(html: Path, throttle: float, changes: int, seed: int, profile: Path) -> dict:
    from browser import Browser, navigate, require_chromium
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(html)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    b = Browser(require_chromium(), profile, window="390,844")
    cdp = b.page()
    rng = np.random.default_rng(seed)
    out: dict = {}
    try:
        cdp.call("Emulation.setDeviceMetricsOverride", width=390, height=844, deviceScaleFactor=2, mobile=True)
        navigate(cdp, f"http://127.0.0.1:{httpd.server_address[1]}/{PAGE}")
        cdp.wait_for("window.cpExplorer && window.cpExplorer.rendered > 0", timeout=60)
        cdp.call("Emulation.setCPUThrottlingRate", rate=throttle)
        index = cdp.evaluate("window.cpExplorer.index")
        values = {"variant": [v[0] for v in index["variants"]], "policy": [p[0] for p in index["policies"]],
                  "budget": index["budgets"], "seed": [str(s) for s in index["seeds"]],
                  "social_proof": [str(i) for i in range(len(index["social_proof"]))]}
        templates = [t[0] for t in index["templates"]]
        first, again = [], []
        for t in [templates[i] for i in rng.permutation(len(templates))]:  # each template's first load, then again
            first.append(cdp.evaluate(TIMED + f"('template', {json.dumps(t)})", timeout=120)[0])
        for t in rng.choice(templates, changes):
            again.append(cdp.evaluate(TIMED + f"('template', {json.dumps(str(t))})", timeout=120)[0])
        out["template (first load: data file fetched and inflated)"] = summary(first)
        out["template (loaded before)"] = summary(again)
        for name, vals in values.items():
            ms, js = [], []
            for v in rng.choice(vals, changes):
                total, render, _ = cdp.evaluate(TIMED + f"({json.dumps(name)}, {json.dumps(str(v))})", timeout=120)
                ms.append(total)
                js.append(render)
            out[name] = {**summary(ms), "script_median_ms": round(statistics.median(js), 1)}
        out["errors"] = cdp.errors()
    finally:
        cdp.close()
        b.close()
        httpd.shutdown()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--throttle", type=float, default=4.0)
    ap.add_argument("--changes", type=int, default=40)
    ap.add_argument("--seed", type=int, default=53)
    ap.add_argument("--html", help="an already built site of that shape (default: build one in a temporary folder)")
    ap.add_argument("--no-default-export", action="store_true", help="skip the default book's export (minutes)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "explorer.json"))
    a = ap.parse_args()
    rec = Recorder()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        html = Path(a.html) if a.html else build(tmp / "book")
        site = {"script_and_stylesheet": sizes(html / "_static" / "cp-explorer") | {"note": "with the data below"},
                "data": sizes(html.joinpath(*X.SITE_DIR))}
        site["script_and_stylesheet"]["bytes"] -= site["data"]["bytes"]
        site["script_and_stylesheet"]["gzip_bytes"] -= site["data"]["gzip_bytes"]
        site["script_and_stylesheet"]["files"] -= site["data"]["files"]
        figures = {"what": "chapter 10's live explorer: a control change timed in the page under CPU throttling "
                           "(input event to the frame after the new view), and the weight it adds to the site",
                   "shape": {**SHAPE, "book": "--quick --only 10"}, "throttle": a.throttle, "viewport_px": 390,
                   "changes_per_control": a.changes, "seed": a.seed,
                   "speed": speed(html, a.throttle, a.changes, a.seed, tmp / "profile"), "this_site": site}
        if not a.no_default_export:
            from crossprofile_lib.cli.book import book_params
            params = book_params(False, {"BACKEND": "none"})
            grid = X.explorer_grid(params)
            t0 = time.perf_counter()
            s = X.export(params, tmp / "default", jobs=os.cpu_count() or 1)
            figures["default_book"] = {"export_s": round(time.perf_counter() - t0, 1), "jobs": os.cpu_count(),
                                       "templates": len(grid.templates), "combinations": grid.size,
                                       "largest_template_bytes": s["largest_template_bytes"],
                                       "data": sizes(tmp / "default")}
    rec.write(a.out, figures)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
