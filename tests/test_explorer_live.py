"""Chapter 10's live explorer in the published book (issue 53): it runs in the reader's browser from the site folder
alone, and it cannot drift from the library.

Without a browser:

* the explorer's grid follows the build (templates, a reader's own template folder, seeds, budgets, variants, the
  book's policies with labels on, off and shuffled, policies of your own, every social-proof weight the book uses);
* the exported data is the same bytes for the same build, one file per template, every combination present;
* a policy's walk (what it keeps and drops, and why) is a replay checked against its memory: a memory the replay
  does not reproduce is refused, and the reasons' numbers add up.

In headless Chromium (tests/browser.py), on chapter 10 of a real partial build (``crossprofile book --quick --only 10
--out DIR``, the page as the published book has it):

* for EVERY template x variant x seed x budget x policy x social-proof weight of the build's grid, the data the page
  uses (its script's ``view()``) equals the library's :meth:`Exploration.data` (canonical JSON, SHA-256 per
  combination, the first difference shown), and the exercises' answers equal :func:`exercises_data` for every
  template, budget and seed;
* for a seeded sample of at least 300 combinations (``numpy.random.default_rng``), every social-proof weight
  offered among them and ties (not only EMPTY's) included, set through the page's own controls, the rendered view
  and exercises are the very DOM of the library's HTML (``isEqualNode``): the page shows what ``make lab`` shows;
* a book built with a reader's template folder and other seeds and budgets (TEMPLATES=, SEEDS=, BUDGETS=) gets an
  explorer over those, equal to the library for every combination of the reader's template;
* the page works by keyboard alone (every control reached with Tab, labelled, changed with the arrow keys; the
  views' summaries open with Enter), at 1280 and 390 px in the light and the dark theme with every text of the
  explorer, its controls included, at a contrast of at least 4.5 : 1 and nothing sticking out sideways;
* nothing is loaded from another machine, the site's link check passes, no console error, and the page works when
  the site folder is opened as files (``file://``), no server at all.

Speed is measured, never asserted: benchmarks/bench_explorer.py.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from crossprofile_lib.book import explorer
from crossprofile_lib.book import explorer_export as X
from crossprofile_lib.book.explorer_walk import WalkMismatch, reason, walk
from crossprofile_lib.book.params import BookParams
from crossprofile_lib.design import REFERENCE_POLICIES, WALK_POLICIES
from crossprofile_lib.policies import parse_policy

ROOT = Path(__file__).resolve().parents[1]
PAGE = "book/10-explorer.html"


def reader_folder(d: Path) -> Path:
    """A reader's own template folder: one template of their own (a development template under a new id)."""
    d.mkdir(parents=True, exist_ok=True)
    text = (ROOT / "templates" / "dev" / "dev-hospital-01.yaml").read_text()
    (d / "my-own-01.yaml").write_text(text.replace("id: dev-hospital-01", "id: my-own-01", 1))
    return d


# --------------------------------------------------------------------------- without a browser

def test_the_grid_follows_the_build(tmp_path):
    mine = reader_folder(tmp_path / "mine")
    p = BookParams.quick({"model_templates": [str(mine)], "model_seeds": [3, 5], "model_budgets": ["0.5", "100t"],
                          "model_variants": ["PSP"], "social_proof_sweep": [0.3], "seed": 5})
    g = X.explorer_grid(p)
    ids = [t.id for t in g.templates]
    assert "my-own-01" in ids and "hospital-equipment-01" in ids and "dev-hospital-01" in ids  # the focus template too
    assert g.seeds == (0, 3, 5) and g.budgets == ("0.6", "0.5", "100t")
    assert set(g.variants) == set(p.variants)  # the quick book's eight (PSP among them)
    assert 0.3 in g.social_proof and {0.0, 0.5, 1.0, 2.0} <= set(g.social_proof)
    q = BookParams.quick({"variants": ["PPP"], "model_variants": ["SSS"]})
    assert X.explorer_grid(q).variants == ("PPP", "PSP", "SPS", "SSS")  # the classic and mirror cells always
    assert g.size == len(ids) * 8 * 3 * 3 * len(g.policies) * len(g.social_proof)


def test_the_policies_are_the_books_with_labels_on_off_and_shuffled():
    pols = set(explorer.EXPLORER_POLICIES)
    assert set(REFERENCE_POLICIES) <= pols and set(WALK_POLICIES) <= pols and "B3" not in pols
    for base in ("R1", "B4", "ALL", "BAL"):
        assert {base, f"{base}:unlabeled", f"{base}:shuffled"} <= pols
    for p in pols:
        parse_policy(p)  # every one is a registered policy
    assert "the reference decider answers it from the roles" in X.policy_label("R1-rel")
    assert X.policy_label("R1:shuffled") == "R1:shuffled: rarest first, labels shuffled"


def test_a_policy_of_your_own_joins_the_explorer():
    from crossprofile_lib.policies import plugins
    example = ROOT / "examples" / "policies" / "keep_longest.py"
    plugins.load(str(example))
    p = BookParams.quick({"policy_files": ["examples/policies/keep_longest.py"]})
    assert "Longest" in X.explorer_grid(p).policies


def _quick_small(**kw) -> BookParams:
    return BookParams.quick({"templates": ["templates/dev/dev-hospital-01.yaml"],
                             "model_templates": ["templates/dev/dev-hospital-01.yaml"],
                             "template_id": "dev-hospital-01", **kw})


def test_the_export_is_the_same_bytes_for_the_same_build_and_holds_every_combination(tmp_path):
    p = _quick_small(budgets=["0.4", "128t"], seeds=[0, 2])
    a, b = X.export(p, tmp_path / "a"), X.export(p, tmp_path / "b")
    files = sorted(f.relative_to(tmp_path / "a").as_posix() for f in (tmp_path / "a").rglob("*.js"))
    assert files == sorted(f.relative_to(tmp_path / "b").as_posix() for f in (tmp_path / "b").rglob("*.js"))
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert a == b and a["templates"] == 1 and len(files) == 2
    text = (tmp_path / "a" / "index.js").read_text()
    assert text.startswith("cpExplorerIndex(")
    index = json.loads(text[len("cpExplorerIndex("):-3])
    g = X.explorer_grid(p)
    assert index["seeds"] == [0, 2] and index["budgets"] == ["0.4", "128t", "0.6"]
    assert [x[0] for x in index["policies"]] == list(g.policies)
    assert [x[0] for x in index["social_proof"]] == [f"{s:g}" for s in g.social_proof]
    (tid, _, file), = index["templates"]
    body = (tmp_path / "a" / file).read_text()
    data = X.unpack(json.loads(body[body.index(",") + 1:-3]))
    assert set(data["tasks"]) == {f"{v}/{s}" for v in g.variants for s in g.seeds}
    for task in data["tasks"].values():
        assert set(task["pol"]) == set(g.budgets)
        assert all(len(row) == 3 * len(g.policies) for row in task["pol"].values())


def test_export_site_needs_chapter_10(tmp_path):
    assert X.export_site(_quick_small(), tmp_path) is None
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "10-explorer.html").write_text("<p>chapter 10</p>")
    assert X.export_site(_quick_small(), tmp_path)["templates"] == 1
    assert (tmp_path.joinpath(*X.SITE_DIR) / "index.js").is_file()


def test_a_walk_that_does_not_reproduce_its_memory_is_refused(hospital):
    w = explorer.walkthrough(hospital, "PSP", budget="0.4", policies=("R1", "B4"))
    spec = parse_policy("R1")
    with pytest.raises(WalkMismatch, match="policy R1: replaying its order keeps claims"):
        walk(spec, w.claims, w.memories["B4"], w.budget_tokens, explorer._decider(0.0).tokenizer)


def test_the_reasons_add_up(hospital):
    w = explorer.walkthrough(hospital, "PSP", budget="0.4", policies=explorer.EXPLORER_POLICIES)
    fit = w.walks["R1"]
    assert fit.rule == "fit" and any(not s.kept for s in fit.steps)
    used = 0
    for s in fit.steps:
        assert s.left == w.budget_tokens - used and (s.cost <= s.left) == s.kept
        used += s.cost if s.kept else 0
        assert reason(fit, s) == ("kept" if s.kept else
                                  f"dropped: its line needs {s.cost} tokens, {s.left} of {w.budget_tokens} left")
    k7 = w.walks["R1-k7"]
    assert [s.kept for s in k7.steps] == [r < 7 for r in range(len(k7.steps))]
    assert reason(w.walks["EMPTY"], w.walks["EMPTY"].steps[0]) == "dropped: EMPTY keeps no memory"
    assert w.walks["REF"].rule == "transcript" and all(s.kept for s in w.walks["REF"].steps)
    for s in w.walks["private-only"].steps:
        assert s.kept == (w.claims.claims[s.claim].count == 1)


def test_the_lab_and_the_page_offer_the_same_policies_and_weights():
    """The JupyterLab controls offer the page's policies and the slider's weights (the page adds the book's own)."""
    pytest.importorskip("ipywidgets")
    box = explorer.controls(explorer.templates_by_id(), "hospital-equipment-01")
    widgets = [w for row in box.children[:3] for w in row.children]
    pol = next(w for w in widgets if w.description == "policy")
    sp = next(w for w in widgets if w.description == "social proof")
    assert list(pol.options)[:len(explorer.EXPLORER_POLICIES)] == list(explorer.EXPLORER_POLICIES)
    assert (sp.min, sp.max, sp.step) == (0.0, 2.0, 0.25)
    assert set(explorer.SOCIAL_PROOF_STEPS) <= set(X.explorer_grid(BookParams.quick()).social_proof)


# --------------------------------------------------------------------------- the built page, in a browser

def build_partial(out: Path, env_extra: dict | None = None) -> Path:
    """Chapter 10 (with the pages every build keeps) of the quick book, built into ``out``: its ``_build/html``."""
    env = dict(os.environ, TOKENIZER="offline", BACKEND="none", CROSSPROFILE_CACHE=str(out.parent / "cache"),
               **(env_extra or {}))
    for k in ("REPOSITORY_URL", "RUNS", "BACKENDS", "POLICY_FILES"):
        env.pop(k, None)
    cli = Path(sys.executable).with_name("crossprofile")
    r = subprocess.run([str(cli), "book", "--quick", "--only", "10", "--out", str(out), "--jobs", "2"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    html = out / "_build" / "html"
    assert (html / PAGE).is_file() and (html.joinpath(*X.SITE_DIR) / "index.js").is_file(), r.stdout[-2000:]
    return html


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(chromium, tmp_path_factory):
    """The quick book's chapter 10, built once for this module, served on 127.0.0.1."""
    html = build_partial(tmp_path_factory.mktemp("explorer-book") / "book")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(html)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield html, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser(chromium, tmp_path_factory):
    from browser import Browser
    b = Browser(chromium, tmp_path_factory.mktemp("chromium-explorer"), window="1280,2000")
    yield b
    b.close()


RENDERED = "(k => { const v = document.querySelector('.cp-live-view'); return !!v && v.dataset.shows === k; })"


def open_page(browser, url: str, width: int = 1280, theme: str = "light"):
    """A page with the explorer rendered by its script (``cpExplorer.rendered``), at ``width`` px in ``theme``."""
    from browser import navigate
    cdp = browser.page()
    cdp.call("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": theme}])
    cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=2000, deviceScaleFactor=1, mobile=width < 600)
    navigate(cdp, url)
    cdp.wait_for("window.cpExplorer && window.cpExplorer.rendered > 0", timeout=60)
    return cdp


CANON = """const canon = x => Array.isArray(x) ? '[' + x.map(canon).join(',') + ']'
  : (x !== null && typeof x === 'object')
    ? '{' + Object.keys(x).sort().map(k => JSON.stringify(k) + ':' + canon(x[k])).join(',') + '}'
  : JSON.stringify(x);
const sha = async s => [...new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(s)))]
  .map(b => b.toString(16).padStart(2, '0')).join('');"""

#: Every combination of one template as the page computes it: (key, SHA-256 of its canonical view), grid order.
PAGE_HASHES = "(() => {" + CANON + """
return async id => {
  const X = window.cpExplorer, I = X.index; await X.load(id); const out = [];
  for (const [v] of I.variants) for (const seed of I.seeds) for (const b of I.budgets) for (const [p] of I.policies)
    for (const [s] of I.social_proof) {
      const d = X.view({template: id, variant: v, seed: String(seed), budget: b, policy: p, social_proof: s});
      out.push([[v, seed, b, p, s].join('|'), await sha(canon(d))]);
    }
  const ex = [];
  for (const seed of I.seeds) for (const b of I.budgets)
    ex.push([[b, seed].join('|'), await sha(canon(X.exercisesData(id, b, seed)))]);
  return {views: out, exercises: ex};
}; })()"""


def canon(d) -> str:
    return json.dumps(d, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha(d) -> str:
    return hashlib.sha256(canon(d).encode()).hexdigest()


def library_views(template, grid: X.Grid):
    """Every combination of ``template`` as the library shows it: (key, :meth:`Exploration.data`), grid order. One
    walkthrough per task and budget serves every policy in focus (its memories do not depend on the other
    policies walked beside it; explore() walks the focus policy with the walkthrough's defaults)."""
    for v in grid.variants:
        for seed in grid.seeds:
            for b in grid.budgets:
                w = explorer.walkthrough(template, v, seed=seed, budget=b, policies=grid.policies)
                for p in grid.policies:
                    pols = WALK_POLICIES if p in WALK_POLICIES else (p, *WALK_POLICIES)
                    wp = dataclasses.replace(w, policies=tuple(pols))
                    for s in grid.social_proof:
                        yield "|".join([v, str(seed), b, p, f"{s:g}"]), explorer.Exploration(wp, p, s).data()


def page_view(cdp, tid: str, key: str) -> dict:
    v, seed, b, p, s = key.split("|")
    settings = dict(template=tid, variant=v, seed=seed, budget=b, policy=p, social_proof=s)
    return cdp.evaluate(f"window.cpExplorer.view({json.dumps(settings)})")


def first_difference(a, b, path="") -> str:
    if type(a) is not type(b) or not isinstance(a, (dict, list)):
        return f"{path}: page {a!r} != library {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return first_difference(a.get(k), b.get(k), f"{path}.{k}")
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return first_difference(x, y, f"{path}[{i}]")
    return f"{path}: page has {len(a)} items, library {len(b)}"


def check_whole_grid(cdp, grid: X.Grid, only: set | None = None) -> tuple[int, list]:
    """Compare the page's data with the library's for every combination of ``grid`` (templates in ``only``);
    returns (combinations compared, the combinations with a tie in focus)."""
    n, ties = 0, []
    for t in grid.templates:
        if only is not None and t.id not in only:
            continue
        page = cdp.evaluate(PAGE_HASHES + f"({json.dumps(t.id)})", timeout=600)
        lib = [(k, d) for k, d in library_views(t, grid)]
        assert [k for k, _ in page["views"]] == [k for k, _ in lib], f"{t.id}: the page's grid is not the build's"
        for (k, h), (_, d) in zip(page["views"], lib):
            if h != sha(d):
                pytest.fail(f"{t.id} {k}: the page's data differs from the library's: "
                            f"{first_difference(page_view(cdp, t.id, k), d)}")
            if d["focus"]["verdict"].startswith("tie between"):
                ties.append((t.id, k))
        n += len(lib)
        for k, h in page["exercises"]:
            b, seed = k.split("|")
            assert h == sha(explorer.exercises_data(t, b, int(seed))), f"{t.id} {k}: the exercises' answers differ"
    return n, ties


def quick_grid() -> X.Grid:
    """The grid of the quick book that :func:`site` builds (the Make variables as it sets them)."""
    from crossprofile_lib.cli.book import book_params
    return X.explorer_grid(book_params(True, {"TOKENIZER": "offline", "BACKEND": "none"}))


@pytest.mark.slow
def test_the_pages_data_equals_the_library_for_every_combination(site, browser):
    _, url = site
    grid = quick_grid()
    cdp = open_page(browser, f"{url}/{PAGE}")
    try:
        index = cdp.evaluate("window.cpExplorer.index")
        assert [t[0] for t in index["templates"]] == [t.id for t in grid.templates]
        n, ties = check_whole_grid(cdp, grid)
        assert n == grid.size and ties
        assert cdp.errors() == []
    finally:
        cdp.close()


def sample(grid: X.Grid, rng: np.random.Generator, n: int = 300) -> list[tuple]:
    """``n`` combinations drawn by ``rng``, then ties (top score shared, from the library): 20 of policies other
    than EMPTY where the grid has them, and 2 of EMPTY's."""
    combos = [(t.id, v, seed, b, p, f"{s:g}") for t in grid.templates for v in grid.variants for seed in grid.seeds
              for b in grid.budgets for p in grid.policies for s in grid.social_proof]
    ties = []
    for t in grid.templates:
        for v in grid.variants:
            for seed in grid.seeds:
                for b in grid.budgets:
                    w = explorer.walkthrough(t, v, seed=seed, budget=b, policies=grid.policies)
                    ties += [(t.id, v, seed, b, p, f"{s:g}") for p in grid.policies for s in grid.social_proof
                             if len(explorer.verdict(w, p, s).tied) > 1]
    other = [c for c in ties if c[4] != "EMPTY"]
    assert other, "no tie but EMPTY's in the grid: the sample could not show one"
    picked = [combos[i] for i in rng.choice(len(combos), n, replace=False)]
    picked += [other[i] for i in rng.choice(len(other), min(20, len(other)), replace=False)]
    return picked + [c for c in ties if c[4] == "EMPTY"][:2]


@pytest.mark.slow
def test_the_page_renders_what_the_library_renders_for_a_seeded_sample(site, browser):
    """At least 300 combinations, set through the page's own controls: the view and the exercises are the very DOM
    of :func:`explorer.explore`'s and :func:`explorer.exercises`' HTML, which the JupyterLab explorer displays."""
    _, url = site
    grid = quick_grid()
    picked = sample(grid, np.random.default_rng(53))
    assert len(picked) >= 300
    assert {c[5] for c in picked} == {f"{s:g}" for s in grid.social_proof}, "every social-proof weight offered"
    by_id = {t.id: t for t in grid.templates}
    cdp = open_page(browser, f"{url}/{PAGE}")
    try:
        exercises_html, ties = {}, 0
        for tid, v, seed, b, p, s in picked:
            got = set_controls(cdp, dict(template=tid, variant=v, policy=p, budget=b, seed=str(seed), social_proof=s))
            want = explorer.explore(by_id[tid], v, p, b, float(s), seed)
            diff = cdp.evaluate(SAME_DOM + f"({json.dumps(want.html())}, '.cp-live-view > .cp-explorer-view')")
            assert diff is None, f"{got}: the page renders otherwise than the library: {diff}"
            ties += want.data()["focus"]["verdict"].startswith("tie between")
            if (tid, b, seed) not in exercises_html:
                exercises_html[tid, b, seed] = explorer.exercises(by_id[tid], b, seed)
            diff = cdp.evaluate(SAME_DOM + f"({json.dumps(exercises_html[tid, b, seed])}, '.cp-live-exercises > ol')")
            assert diff is None, f"{got}: the page's exercises differ from the library's: {diff}"
        assert ties >= min(22, len(picked) - 300) and cdp.errors() == []
    finally:
        cdp.close()


#: ``null`` when the element ``sel`` is the very DOM of ``html`` (isEqualNode); else both, for the message. The book
#: theme's own script marks scrollable blocks for the keyboard (``tabindex`` on a <pre>): left out of the comparison.
SAME_DOM = """((html, sel) => { const t = document.createElement('template'); t.innerHTML = html;
  const want = t.content.firstElementChild, shown = document.querySelector(sel);
  if (!shown) return {want: want.outerHTML.slice(0, 3000), got: null};
  const got = shown.cloneNode(true); got.querySelectorAll('[tabindex]').forEach(e => e.removeAttribute('tabindex'));
  return want.isEqualNode(got) ? null : {want: want.outerHTML.slice(0, 3000), got: got.outerHTML.slice(0, 3000)}; })"""

#: Set the page's controls as a reader does (each control changed fires its input event) and wait for the view.
SET = """(s => { const F = ['template', 'variant', 'policy', 'budget', 'seed', 'social_proof'];
  const form = document.querySelector('.cp-live-controls'), labels = window.cpExplorer.index.social_proof.map(x => x[0]);
  for (const f of F) { const el = form.querySelector(`[name='${f}']`);
    const v = f === 'social_proof' ? String(labels.indexOf(s[f])) : s[f];
    if (el.value !== v) { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); } }
  return F.map(f => s[f]).join('|'); })"""


def set_controls(cdp, s: dict) -> str:
    key = cdp.evaluate(SET + f"({json.dumps(s)})")
    cdp.wait_for(RENDERED + f"({json.dumps(key)})", timeout=60, every=0.02)
    return key


@pytest.mark.slow
def test_a_book_built_with_a_readers_templates_seeds_and_budgets_gets_an_explorer_over_those(chromium, browser,
                                                                                             tmp_path):
    mine = reader_folder(tmp_path / "my templates")
    env = {"TEMPLATES": str(mine), "SEEDS": "3,5", "BUDGETS": "0.5,100t"}
    html = build_partial(tmp_path / "book", env)
    from crossprofile_lib.cli.book import book_params
    grid = X.explorer_grid(book_params(True, {"TOKENIZER": "offline", "BACKEND": "none", **env}))
    assert "my-own-01" in [t.id for t in grid.templates] and grid.seeds == (0, 3, 5)
    assert grid.budgets == ("0.6", "0.5", "100t")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(html)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    cdp = open_page(browser, f"http://127.0.0.1:{httpd.server_address[1]}/{PAGE}#template=my-own-01&variant=SPS&"
                             "policy=B4&budget=100t&seed=5&social_proof=0.5")
    try:
        index = cdp.evaluate("window.cpExplorer.index")
        assert index["seeds"] == [0, 3, 5] and index["budgets"] == ["0.6", "0.5", "100t"]
        assert "my-own-01" in [t[0] for t in index["templates"]]
        # a link that names the settings opens on them
        cdp.wait_for(RENDERED + "('my-own-01|SPS|B4|100t|5|0.5')", timeout=60)
        n, _ = check_whole_grid(cdp, grid, only={"my-own-01"})
        assert n == grid.size // len(grid.templates)
        # another link followed on the same page
        cdp.evaluate("location.hash = 'template=dev-hospital-01&variant=PPP&policy=M1&budget=0.5&seed=3&social_proof=2'")
        cdp.wait_for(RENDERED + "('dev-hospital-01|PPP|M1|0.5|3|2')", timeout=60)
    finally:
        cdp.close()
        httpd.shutdown()


def press(cdp, key: str, shift: bool = False) -> None:
    """One key pressed and released, as a keyboard does (the DevTools input domain; the only call here that is
    not a plain page script)."""
    codes = {"Tab": 9, "Enter": 13, "ArrowDown": 40, "ArrowRight": 39}
    text = {"Enter": "\r"}.get(key)
    for kind in ("keyDown" if text else "rawKeyDown", "keyUp"):
        cdp.call("Input.dispatchKeyEvent", type=kind, key=key, code=key, windowsVirtualKeyCode=codes[key],
                 modifiers=8 if shift else 0, **({"text": text} if text and kind == "keyDown" else {}))


ACTIVE = "(e => e ? (e.id || e.tagName.toLowerCase()) : null)(document.activeElement)"
CONTROLS = """[...document.querySelectorAll('.cp-live-controls select, .cp-live-controls input')]
  .map(e => ({id: e.id, name: e.name, label: e.labels && e.labels.length ? e.labels[0].textContent.trim() : ''}))"""


@pytest.mark.slow
def test_keyboard_alone_reaches_labels_and_changes_every_control(site, browser):
    _, url = site
    cdp = open_page(browser, f"{url}/{PAGE}")
    try:
        controls = cdp.evaluate(CONTROLS)
        assert [c["name"] for c in controls] == ["template", "variant", "policy", "budget", "seed", "social_proof"]
        assert all(c["label"] for c in controls), controls
        cdp.evaluate("document.activeElement && document.activeElement.blur(), window.scrollTo(0, 0), true")
        seen = []
        for _ in range(400):  # Tab through the page until the last control has had the focus
            press(cdp, "Tab")
            a = cdp.evaluate(ACTIVE)
            if a in [c["id"] for c in controls] and a not in seen:
                seen.append(a)
            if len(seen) == len(controls):
                break
        assert seen == [c["id"] for c in controls], f"Tab reached {seen}"
        # the slider has the focus: the arrow key moves the social-proof weight and the view follows
        before = cdp.evaluate("window.cpExplorer.state")
        press(cdp, "ArrowRight")
        cdp.wait_for("window.cpExplorer.state.social_proof !== " + json.dumps(before["social_proof"]), timeout=30)
        after = cdp.evaluate("window.cpExplorer.state")
        fields = ["template", "variant", "policy", "budget", "seed", "social_proof"]
        cdp.wait_for(RENDERED + f"({json.dumps('|'.join(str(after[f]) for f in fields))})")
        assert cdp.evaluate("document.querySelector('.cp-live-controls output').textContent") == after["social_proof"]
        # back to the policy (Shift+Tab) and the next one with the arrow key
        for _ in range(3):
            press(cdp, "Tab", shift=True)
        assert cdp.evaluate(ACTIVE) == next(c["id"] for c in controls if c["name"] == "policy")
        press(cdp, "ArrowDown")
        cdp.wait_for("window.cpExplorer.state.policy !== " + json.dumps(after["policy"]), timeout=30)
        policy = cdp.evaluate("window.cpExplorer.state.policy")
        cdp.wait_for(f"document.querySelector('.cp-live-view .cp-explorer-view').dataset.policy === {json.dumps(policy)}")
        # on to the view: the focus policy's summary is reached with Tab and closes and opens with Enter
        for _ in range(60):
            press(cdp, "Tab")
            if cdp.evaluate("document.activeElement.tagName === 'SUMMARY'"):
                break
        opened = "document.activeElement.parentElement.open"
        assert cdp.evaluate(opened) is True
        press(cdp, "Enter")
        cdp.wait_for(f"!{opened}", timeout=10)
        press(cdp, "Enter")
        cdp.wait_for(opened, timeout=10)
        # on to the exercises: a check button sets the controls to what the exercise asks about
        for _ in range(200):
            press(cdp, "Tab")
            if cdp.evaluate("!!document.activeElement.closest('.cp-live-checks')"):
                break
        want = cdp.evaluate("JSON.parse(document.activeElement.dataset.set)")
        press(cdp, "Enter")
        cdp.wait_for(f"(w => Object.keys(w).every(k => window.cpExplorer.state[k] === w[k]))({json.dumps(want)})",
                     timeout=30)
        assert cdp.evaluate("document.querySelector('.cp-live-view .cp-explorer-view').dataset.policy") == want["policy"]
        assert cdp.errors() == []
    finally:
        cdp.close()


#: The explorer's controls, measured as CONTRAST measures text: the select's text and the slider's value against
#: what is behind them.
CONTROL_CONTRAST = r"""(() => {
  const parse = c => { const m = c.match(/rgba?\(([^)]+)\)/); const v = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number);
                       return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
  const over = (t, u) => [0, 1, 2].map(i => t[i] * t[3] + u[i] * (1 - t[3])).concat([1]);
  const bg = el => { const ls = [];
                     for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor);
                                                                 if (c[3] > 0) { ls.push(c); if (c[3] >= 1) break; } }
                     let b = [255, 255, 255, 1]; for (let i = ls.length - 1; i >= 0; i--) b = over(ls[i], b); return b; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
                     return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const sel = '.cp-live-controls select, .cp-live-controls label, .cp-live-controls output, .cp-live-status, ' +
              '.cp-live-checks button';
  return [...document.querySelectorAll(sel)]
    .map(el => { const b = bg(el); return [el.tagName.toLowerCase() + ' ' + (el.name || el.htmlFor || ''),
                                           ratio(over(parse(getComputedStyle(el).color), b), b)]; });
})()"""


@pytest.mark.slow
@pytest.mark.parametrize("theme,width", [("light", 1280), ("dark", 1280), ("light", 390), ("dark", 390)])
def test_legible_in_both_themes_on_a_desktop_and_a_phone(site, browser, theme, width):
    from test_book_browser import CONTRAST, INSPECT, min_scale
    _, url = site
    cdp = open_page(browser, f"{url}/{PAGE}", width, theme)
    try:
        # every part of the explorer shown: the other policies, their walks, the discussion, the claims, the answers
        cdp.evaluate("document.querySelectorAll('.cp-live details').forEach(d => d.open = true), true")
        c = cdp.evaluate(CONTRAST)
        assert c["theme"] == theme and c["checked"] > 200 and c["found"].get(".cp-caption")
        assert c["n_low"] == 0, c["low"]
        low = [(what, round(r, 2)) for what, r in cdp.evaluate(CONTROL_CONTRAST) if r < 4.5]
        assert not low, f"explorer controls below 4.5:1 ({theme}, {width} px): {low}"
        info = cdp.evaluate(f"const MIN_SCALE = {min_scale(width)};" + INSPECT)
        assert info["page_overflow"] <= 1 and not info["over"] and not info["cut"] and not info["loose"], info
        assert cdp.errors() == []
    finally:
        cdp.close()


@pytest.mark.slow
def test_from_the_site_folder_alone_nothing_from_another_machine(site, browser, tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_site
    from browser import navigate, off_machine
    html, url = site
    folder = tmp_path / "_site"
    make_site.make_site(html, folder)
    # the link check: nothing from another machine, no dead link but those of a partial book (--only 10) to the
    # chapters it left out
    left_out = re.compile(r"^book/[\w-]+\.html: (\d\d-[\w-]+)\.html(#[\w-]+)? \(no such file in the site\)$")
    problems = make_site.check(folder)
    assert all((m := left_out.match(p)) and (ROOT / "notebooks" / f"{m.group(1)}.md").is_file()
                            and not (folder / "book" / f"{m.group(1)}.html").exists() for p in problems), problems
    cdp = open_page(browser, f"{url}/{PAGE}")
    try:
        set_controls(cdp, dict(template=cdp.evaluate("window.cpExplorer.index.templates[1][0]"), variant="SPS",
                               policy="BAL-oracle", budget="0.6", seed="0", social_proof="1"))
        requested = cdp.requests()
        assert any("/_static/cp-explorer/data/t/" in u for u in requested), requested  # a template loaded on demand
        assert not off_machine(requested) and cdp.errors() == []
    finally:
        cdp.close()
    cdp = browser.page()
    try:  # the site folder opened as files: no server at all
        navigate(cdp, (folder / PAGE).as_uri())
        cdp.wait_for("window.cpExplorer && window.cpExplorer.rendered > 0", timeout=60)
        assert cdp.evaluate("document.querySelector('.cp-live-status').textContent").startswith("Showing ")
        set_controls(cdp, dict(template=cdp.evaluate("window.cpExplorer.index.templates[2][0]"), variant="PSP",
                               policy="R1", budget="0.6", seed="0", social_proof="0"))
    finally:
        cdp.close()
    shutil.rmtree(folder)
