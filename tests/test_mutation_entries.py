"""The mutation trial's entries still apply: every ``original`` snippet of ``benchmarks/mutation/mutations.yaml``
occurs exactly once in its file (else the trial reports it ``no-longer-applies`` and measures nothing), and the
held-out half is a fresh draw over the pool. A refactor that moves a snippet must update its entry in the same change."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _trial():
    spec = importlib.util.spec_from_file_location("mutation_run", ROOT / "benchmarks" / "mutation" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TRIAL = _trial()
MUTATIONS = TRIAL.load_mutations()


def test_every_snippet_occurs_exactly_once(tmp_path):
    stale = []
    for m in MUTATIONS:
        f = ROOT / m["file"]
        text = f.read_text(encoding="utf-8") if f.is_file() else ""
        if text.count(m["original"]) != 1:
            stale.append(f"{m['id']} ({m['file']}: {text.count(m['original'])} times)")
            continue
        # the trial's own apply() writes the mutant into a copy
        copy = tmp_path / m["id"] / m["file"]
        copy.parent.mkdir(parents=True)
        copy.write_text(text, encoding="utf-8")
        assert TRIAL.apply(tmp_path / m["id"], m) == text and m["replacement"] in copy.read_text(encoding="utf-8")
    assert not stale, "entries whose original snippet is not in their file exactly once (update them): " + \
        ", ".join(stale)


def test_held_out_half_is_the_seeded_draw():
    held = TRIAL.heldout_ids(MUTATIONS)
    pool = {m["id"] for m in MUTATIONS if m.get("pool") == TRIAL.HELDOUT_POOL}
    assert held <= pool and len(held) == len(pool) // 2
