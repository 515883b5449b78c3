"""Issue 34 item 2, the named vocabularies' rebuild: checked on every run, not only when fetched fresh.

``crossprofile tokenizers fetch`` rebuilds each named tokenizer from its GGUF file and installs it only if it
reproduces every one of llama.cpp's reference vectors (:func:`crossprofile_lib.task.vocabs.convert`). On a
machine where the tokenizers are already installed that path never runs, so a bug in it would pass every
other test. Here it runs each time on a copy of the installed files in a fresh folder, with the rebuild
itself (a minute of pure-Python work) replaced by the installed tokenizer -- right or deliberately broken --
so what is tested is the check and the install: a wrong tokenizer is refused and nothing is written; a
right one is installed with its hashes; a GGUF that is not the registered file is refused before any work.
"""

from __future__ import annotations

import json
import shutil

import pytest
from tokenizers import Tokenizer

from crossprofile_lib.task import gguf_bpe, vocabs

NAME = "qwen2.5"


@pytest.fixture()
def fresh(named_vocabs, tmp_path, monkeypatch):
    """A tokenizers folder holding only the raw files of NAME (GGUF and vectors), as after extraction."""
    v = vocabs.NAMED[NAME]
    src = vocabs.tokenizers_dir()
    installed = Tokenizer.from_file(str(src / f"{NAME}.tokenizer.json"))
    for m in v.members:
        shutil.copy2(src / m, tmp_path / m)
    monkeypatch.setenv(vocabs.TOKENIZERS_ENV, str(tmp_path))
    assert vocabs.tokenizers_dir() == tmp_path and vocabs.installed(NAME, tmp_path) is None
    return v, tmp_path, installed


def _rebuild_as(monkeypatch, tok):
    monkeypatch.setattr(gguf_bpe, "build_tokenizer", lambda vocab: tok)
    monkeypatch.setattr(gguf_bpe, "read_vocab", lambda path: None)


def test_a_right_rebuild_is_installed_with_its_hashes(fresh, monkeypatch):
    v, folder, installed = fresh
    _rebuild_as(monkeypatch, installed)
    m = vocabs.convert(v, folder, log=lambda s: None)
    n = len(gguf_bpe.reference_vectors(folder / v.file))
    assert n == 46 and m["reference_vectors"] == m["reference_vectors_exact"] == n
    assert m["gguf_sha256"] == v.sha256
    assert vocabs.installed(NAME, folder) == m == json.loads((folder / f"{NAME}.json").read_text())
    t = vocabs.load(NAME, fetch_missing=False)
    assert t.count("[A1,A2,A3,A4] ") == 10 and t.count("[A2] ") == 4


def test_a_rebuild_that_misses_a_vector_is_refused_and_nothing_is_written(fresh, monkeypatch):
    v, folder, installed = fresh
    broken = json.loads(installed.to_str())
    broken["model"]["merges"] = broken["model"]["merges"][:20000]
    _rebuild_as(monkeypatch, Tokenizer.from_str(json.dumps(broken)))
    with pytest.raises(vocabs.VocabUnavailable, match=r"tokenizer qwen2\.5: \d+ of llama\.cpp's 46 reference vectors "
                                                      r"differ \(first: .*\); not installed"):
        vocabs.convert(v, folder, log=lambda s: None)
    assert not (folder / f"{NAME}.tokenizer.json").exists() and not (folder / f"{NAME}.json").exists()
    assert vocabs.installed(NAME, folder) is None


def test_one_wrong_vector_is_enough_to_refuse(fresh, monkeypatch):
    v, folder, installed = fresh
    vectors = gguf_bpe.reference_vectors(folder / v.file)
    text, want = vectors[-1][0], vectors[-1][1]
    assert gguf_bpe.mismatches(installed, vectors) == []
    monkeypatch.setattr(gguf_bpe, "reference_vectors", lambda path: vectors[:-1] + [(text, list(want) + [0])])
    _rebuild_as(monkeypatch, installed)
    with pytest.raises(vocabs.VocabUnavailable, match="1 of llama.cpp's 46 reference vectors differ"):
        vocabs.convert(v, folder, log=lambda s: None)


def test_a_gguf_that_is_not_the_registered_file_is_refused_before_rebuilding(fresh, monkeypatch):
    v, folder, installed = fresh
    data = bytearray((folder / v.file).read_bytes())
    data[-1] ^= 1
    (folder / v.file).write_bytes(bytes(data))
    monkeypatch.setattr(gguf_bpe, "build_tokenizer", lambda vocab: pytest.fail("rebuilt a damaged file"))
    with pytest.raises(vocabs.VocabUnavailable, match="SHA-256 differs from the registered one"):
        vocabs.convert(v, folder, log=lambda s: None)


def test_an_installed_json_that_differs_from_its_manifest_is_not_installed(fresh, monkeypatch):
    v, folder, installed = fresh
    _rebuild_as(monkeypatch, installed)
    vocabs.convert(v, folder, log=lambda s: None)
    j = folder / f"{NAME}.tokenizer.json"
    j.write_text(j.read_text().replace('"merges"', '"merges" ', 1))
    assert vocabs.installed(NAME, folder) is None
