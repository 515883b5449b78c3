"""Chapter 10's live explorer in the published book: the library's own computation exported at build time, for a page
that runs in the reader's browser with no kernel and nothing loaded from another machine.

:func:`explorer_grid` is what the explorer offers (it follows the build: the book's templates, model templates,
seeds, budgets and variants, the policies the book runs on the reference decider plus label controls and the policies
of your own, and the social-proof weights of the lab's slider and the book's runs). :func:`export` runs
:func:`~crossprofile_lib.book.explorer.walkthrough` for every template x variant x seed x budget of it and writes,
under ``out``:

* ``index.js``: the grid, the settings the page opens on, one file name per template;
* ``t/<digest>.js``: one template's data, loaded when the reader picks it: its facts, per task (variant/seed) the
  scripted discussion and claim list, each distinct memory (its lines as a prefix + a fact, tokens, kept counts,
  net lead, and per social-proof weight the reference decider's verdict: choice, verdict word, scores), each
  distinct walk (:mod:`.explorer_walk`) and, per budget and policy, which memory and walk it has.

Both are JavaScript files calling ``cpExplorerIndex(...)`` / ``cpExplorerTemplate(id, ...)``, so the page loads them
with ``<script>`` elements: it works from a static server and from the site folder opened as files. The page's script
(``book/_static/cp-explorer/explorer.js``) only looks things up and renders them as :func:`.explorer.render` does;
tests/test_explorer_live.py proves, in headless Chromium, that its data equals :meth:`.explorer.Exploration.data` for
every combination of a build's grid, and that the page renders what the library renders.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import multiprocessing
import shutil
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from crossprofile_lib.book.explorer import (
    EXERCISE_CELLS,
    EXERCISE_POLICIES,
    EXERCISE_SOCIAL_PROOF,
    EXPLORER_POLICIES,
    SOCIAL_PROOF_STEPS,
    _cell,
    _decider,
    find_template,
    verdict,
    walkthrough,
)
from crossprofile_lib.book.runs import REFERENCE, resolve
from crossprofile_lib.design import CLASSIC, MIRROR, VARIANT_NAMES, WALK_POLICIES
from crossprofile_lib.policies.registry import REGISTRY, parse_policy
from crossprofile_lib.task.budgets import Budget
from crossprofile_lib.task.templates import load_templates
from crossprofile_lib.task.variants import Variant

#: Where the build puts the data, under the HTML folder (next to the script, book/_static/cp-explorer/).
SITE_DIR = ("_static", "cp-explorer", "data")
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Grid:
    """What the explorer offers: every combination is exported."""

    templates: tuple          # Template objects, by id
    variants: tuple[str, ...]
    seeds: tuple[int, ...]
    budgets: tuple[str, ...]
    policies: tuple[str, ...]
    social_proof: tuple[float, ...]
    focus: dict

    @property
    def size(self) -> int:
        """Combinations of template x variant x seed x budget x policy x social-proof weight."""
        return (len(self.templates) * len(self.variants) * len(self.seeds) * len(self.budgets) * len(self.policies)
                * len(self.social_proof))


def _unique(xs) -> list:
    return list(dict.fromkeys(xs))


def _templates(paths: Sequence[str], focus_id: str) -> tuple:
    by_id: dict = {}
    for p in _unique(str(x) for x in paths):
        for t in load_templates([str(resolve(p))]):
            by_id.setdefault(t.id, t)
    if focus_id not in by_id:
        by_id[focus_id] = find_template(focus_id)
    return tuple(by_id[k] for k in sorted(by_id))


def explorer_grid(params) -> Grid:
    """The explorer's grid for a book's parameters (:class:`~crossprofile_lib.book.params.BookParams`)."""
    variants = set(params.variants) | set(params.model_variants) | {params.variant, CLASSIC, MIRROR}
    budgets = _unique(str(Budget.parse(b)) for b in [*params.budgets, *params.model_budgets, params.shown_budget])
    policies = _unique([*EXPLORER_POLICIES, *params.user_policies])
    sp = sorted({*SOCIAL_PROOF_STEPS, float(params.explorer_social_proof), float(params.social_proof),
                 *map(float, params.social_proof_sweep), EXERCISE_SOCIAL_PROOF, 0.0})
    focus = {"template": params.template_id, "variant": params.variant, "policy": params.policy, "seed": params.seed,
             "budget": str(Budget.parse(params.shown_budget)), "social_proof": f"{params.explorer_social_proof:g}"}
    if focus["policy"] not in policies:
        policies.insert(0, focus["policy"])
    return Grid(_templates([*params.templates, *params.model_templates], params.template_id),
                tuple(v for v in VARIANT_NAMES if v in variants),
                tuple(sorted({*params.seeds, *params.model_seeds, params.seed})), tuple(budgets), tuple(policies),
                tuple(sp), focus)


def policy_label(name: str) -> str:
    """The dropdown's label: the name and what the policy does (on the reference decider)."""
    spec = parse_policy(name)
    pol = REGISTRY[spec.base]
    fmt = {"full": "", "unlabeled": ", labels off", "shuffled": ", labels shuffled"}.get(spec.fmt, f", labels {spec.fmt}")
    k = f", the first {spec.fixed_k} claims" if spec.fixed_k is not None else ""
    model = "; the reference decider answers it from the roles" if pol.source == "model" else ""
    return f"{name}: {pol.doc}{k}{fmt}{model}"


def _lines(text: str, facts: Sequence[str]) -> list[list]:
    """A memory text as ``[prefix, fact index]`` lines (``prefix + fact text`` is the line; -1: no fact)."""
    if not text:
        return []
    by_len = sorted(range(len(facts)), key=lambda i: -len(facts[i]))
    out = []
    for line in text.split("\n"):
        f = next((i for i in by_len if line.endswith(facts[i])), -1)
        out.append([line[:len(line) - len(facts[f])] if f >= 0 else line, f])
    if "\n".join(p + (facts[f] if f >= 0 else "") for p, f in out) != text:
        raise AssertionError("a memory text does not split into its lines")  # cannot happen: each line is rebuilt
    return out


def _runs(xs: list):
    """``xs`` or, when every item is the same, that item alone."""
    return xs[0] if xs and len(set(map(json.dumps, xs))) == 1 else xs


class _Table:
    """Distinct JSON values, each stored once and referred to by its index."""

    def __init__(self):
        self.items: list = []
        self._at: dict[str, int] = {}

    def add(self, value) -> int:
        key = json.dumps(value, separators=(",", ":"))
        if key not in self._at:
            self._at[key] = len(self.items)
            self.items.append(value)
        return self._at[key]


def template_data(template, grid: Grid) -> dict:
    """Everything the page shows for ``template`` over ``grid`` (the format: the module doc)."""
    facts = list(template.facts)
    ftext = [f.text for f in facts]
    fidx = {f.id: i for i, f in enumerate(facts)}
    opts = list(template.option_ids)
    strings, verdicts, tasks, budgets, rules, t_all = _Table(), _Table(), {}, {}, {}, None
    budgeted = [p for p in grid.policies if parse_policy(p).selection in ("budget", "generated")]
    for v in grid.variants:
        for seed in grid.seeds:
            mems, orders, pol, task, seen = _Table(), _Table(), {}, None, {}
            first = None
            for b in grid.budgets:
                # policies without a budget keep the same memory at every budget: built once, with the first
                w = walkthrough(template, v, seed=seed, budget=b, policies=grid.policies if first is None else budgeted)
                budgets[b], t_all = w.budget_tokens, w.t_all
                if first is None:
                    first = w
                else:
                    for p in set(grid.policies) - set(budgeted):
                        w.memories[p], w.walks[p] = first.memories[p], first.walks[p]
                if task is None:
                    order = list(w.transcript.speaker_order)
                    costs = {s.claim: s.cost for s in w.walks[grid.policies[0]].steps}
                    task = {"order": order,
                            "utt": [x for u in w.transcript.utterances for x in (order.index(u.speaker), fidx[u.fact_id])],
                            "claims": [x for c in w.claims.claims
                                       for x in (fidx[c.fact_id], c.first_mention, ",".join(c.speakers), c.count)],
                            "costs": [costs[i] for i in range(len(w.claims))]}
                row = []
                for p in grid.policies:
                    m, wk = w.memories[p], w.walks[p]
                    rule = [wk.rule, wk.doc, wk.k]
                    if rules.setdefault(p, rule) != rule or wk.budget not in (None, w.budget_tokens) or any(
                            s.cost != task["costs"][s.claim] for s in wk.steps):
                        raise AssertionError(f"{template.id} {v}/{seed} {p}: a walk the page cannot show as it is")
                    key = (m.text, m.tokens, m.kept_facts())
                    if key not in seen:
                        c, vs = w.composition(p), [verdict(w, p, s) for s in grid.social_proof]
                        seen[key] = mems.add([
                            m.tokens, c.kept_support, c.kept_decoy, c.kept_irrelevant, c.net_lead,
                            [x for pre, f in _lines(m.text, ftext) for x in (strings.add(pre), f)],
                            _runs([verdicts.add([opts.index(x.option), strings.add(x.word(template)),
                                                 *[y for o, sc in x.scores.items() for y in (opts.index(o), f"{sc:+g}")]])
                                   for x in vs])])
                    mask = sum(1 << i for i, s in enumerate(wk.steps) if s.kept)
                    left = [s.left for s in wk.steps if not s.kept and s.left is not None]
                    row += [seen[key], orders.add([s.claim for s in wk.steps]), [mask, *left] if left else mask]
                pol[b] = row
            tasks[f"{v}/{seed}"] = {**task, "mems": mems.items, "orders": orders.items, "pol": pol}
    return {"id": template.id, "title": template.title, "t_all": t_all, "budgets": budgets,
            "options": [template.option(o).name for o in opts], "correct": opts.index(template.correct_option),
            "decoy": opts.index(template.decoy_option), "facts": [[f.text, f.role] for f in facts],
            "rules": [rules[p] for p in grid.policies], "strings": strings.items, "verdicts": verdicts.items,
            "tasks": tasks}


def index_data(grid: Grid, files: dict) -> dict:
    """The page's index: the grid, labels, the settings it opens on and each template's file."""
    return {"version": FORMAT_VERSION, "reference": REFERENCE,
            "templates": [[t.id, t.title, files[t.id]] for t in grid.templates],
            "variants": [[v, _cell(v), [Variant(v).support_attr, Variant(v).decoy_attr, Variant(v).irrelevant_attr]]
                         for v in grid.variants],
            "seeds": list(grid.seeds), "budgets": list(grid.budgets),
            "policies": [[p, policy_label(p)] for p in grid.policies],
            "walk_policies": list(WALK_POLICIES),
            "social_proof": [[f"{s:g}", _decider(s).model] for s in grid.social_proof],
            "exercises": {"cells": [list(c) for c in EXERCISE_CELLS], "policies": list(EXERCISE_POLICIES),
                          "social_proof": f"{EXERCISE_SOCIAL_PROOF:g}"},
            "focus": grid.focus}


def _js(call: str, *args) -> str:
    return f"{call}({','.join(json.dumps(a, separators=(',', ':'), ensure_ascii=False) for a in args)});\n"


def pack(data) -> str:
    """JSON, gzip-compressed (no time stamp: the same data gives the same bytes), base64: the page inflates it with
    the browser's own ``DecompressionStream``. A template's data shrinks about eightfold."""
    raw = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def unpack(text: str):
    """The data :func:`pack` packed."""
    return json.loads(gzip.decompress(base64.b64decode(text)))


def _one(args) -> tuple[str, str]:
    template, grid = args
    return template.id, _js("cpExplorerTemplate", template.id, pack(template_data(template, grid)))


def export(params, out: Path, jobs: int = 1, log: Callable[[str], None] = lambda s: None) -> dict:
    """Write the explorer's data for ``params`` into ``out`` (replaced); returns a summary (files, bytes, grid size)."""
    grid = explorer_grid(params)
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    (out / "t").mkdir(parents=True)
    work = [(t, grid) for t in grid.templates]
    if jobs > 1 and len(work) > 1:
        with ProcessPoolExecutor(min(jobs, len(work)), mp_context=multiprocessing.get_context("fork")) as ex:
            done = list(ex.map(_one, work))
    else:
        done = [_one(w) for w in work]
    files, total = {}, 0
    for tid, text in done:
        data = text.encode()
        name = f"t/{hashlib.sha256(data).hexdigest()[:16]}.js"
        (out / name).write_bytes(data)
        files[tid], total = name, total + len(data)
    index = _js("cpExplorerIndex", index_data(grid, files)).encode()
    (out / "index.js").write_bytes(index)
    summary = {"templates": len(grid.templates), "combinations": grid.size, "bytes": total + len(index),
               "largest_template_bytes": max(len(t.encode()) for _, t in done)}
    log(f"  explorer data: {summary['templates']} templates, {summary['combinations']:,} combinations, "
        f"{summary['bytes'] / 1e6:.2f} MB in {out}")
    return summary


def export_site(params, html_dir: Path, jobs: int = 1, log: Callable[[str], None] = lambda s: None) -> Optional[dict]:
    """The build's hook: export into ``html_dir/_static/cp-explorer/data`` when chapter 10's page was built."""
    if not (html_dir / "book" / "10-explorer.html").is_file():
        return None
    return export(params, html_dir.joinpath(*SITE_DIR), jobs=jobs, log=log)
