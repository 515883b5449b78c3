"""End to end: the natural HiddenBench protocol on the embedded model over the fixture (small).

One 3-agent fixture task, one seed, the baseline ablation, five policies: about 50 model
calls, several minutes on two busy cores (prompt evaluation dominates: about 35 ms per prompt
token measured here), so the test stays at one session. SmolLM2-135M is a junk-prone model:
the test checks the protocol's bookkeeping (every artefact stored, every count consistent,
invalid answers counted), never its accuracy.
"""

import json

import pytest

from crossprofile_lib.hiddenbench.run import HBConfig, iter_artefacts, read_tables, run_hiddenbench

pytestmark = [pytest.mark.llm, pytest.mark.slow]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    from crossprofile_lib.task.llama_engine import installed
    if not installed():
        pytest.skip("no llama.cpp engine is installed (make test installs it)")
    try:
        from crossprofile_lib.backends import get_backend
        return get_backend("llamacpp/smollm2-135m", cache=str(tmp_path_factory.mktemp("hb_cache")))
    except (ImportError, FileNotFoundError, ValueError) as e:
        pytest.skip(f"embedded model unavailable: {e}")


@pytest.fixture(scope="module")
def run(smollm2, tmp_path_factory):
    out = tmp_path_factory.mktemp("hb_smollm2")
    cfg = HBConfig(backend="llamacpp/smollm2-135m", protocols=["natural"], seeds=[0], ablations=["baseline"],
                   policies=["R1", "B4", "EMPTY", "ALL", "REF"], tasks=["5"], max_words=15)
    header = run_hiddenbench(cfg, out, backend=smollm2)
    return out, header, read_tables(out, "natural")


def test_every_artefact_is_stored(run):
    out, header, t = run
    assert header["backend"] == "llamacpp/smollm2-135m" and header["data_source"] == "fixture"
    recs = list(iter_artefacts(out, "natural"))
    assert len(recs) == 1
    for rec in recs:
        a = rec["artefacts"]
        n = len(a["speaking_order"])
        assert n == 3 and len(a["votes"]) == 2 * n and len(a["messages"]) == 2 * n
        assert all(isinstance(m["raw"], str) for m in a["messages"])
        assert len(a["extraction"]) == sum(1 for m in a["messages"] if m["text"])
        assert {m["policy"] for m in a["memories"]} == {"R1", "B4", "EMPTY", "ALL", "REF"}
        assert all(m["decision"] is None or m["decision"] in "ABC" for m in a["memories"])
        assert a["calls"] and all(c["prompt_file"] for c in a["calls"])
    json.loads((out / "hiddenbench_run.json").read_text())


def test_counts_are_consistent(run):
    out, header, t = run
    v, s, d = t["votes"], t["sessions"], t["decisions"]
    assert len(v) == 6 and len(s) == 1 and len(d) == 5
    assert (v.model == "smollm2-135m").all() and (d.backend == "llamacpp/smollm2-135m").all()
    assert (v.correct <= ~v.invalid).all()             # an invalid vote is never correct
    info = header["protocols"]["natural"]
    assert info["invalid_votes"] == int(v.invalid.sum())
    assert s.n_claims.le(s.n_claims_raw).all() and s.disclosure_rate.between(0, 1).all()
    assert d[d.policy == "EMPTY"].n_kept.eq(0).all()
    b = d[d.selection == "budget"]
    assert (b.memory_tokens <= b.budget_tokens).all()
