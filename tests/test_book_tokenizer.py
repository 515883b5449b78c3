"""The book prices its reference grid with Qwen2.5's tokenizer and says so (issue 21 item 2); where the
vocabulary cannot be had it falls back to the offline approximation, and the run says that instead."""

import pytest

from crossprofile_lib import book
from crossprofile_lib.book.experiments import BookRuns
from crossprofile_lib.book.params import DEFAULTS, QUICK
from crossprofile_lib.book.runs import REFERENCE_TOKENIZER, reference_run
from crossprofile_lib.paths import TOKENIZERS_ENV
from crossprofile_lib.task.tokenizer import OfflineTokenizer
from crossprofile_lib.task.vocabs import FETCH_ENV

SMALL = dict(templates=["templates/dev"], seeds=[0], budgets=["0.6"], policies=["R1", "ALL"], variants=["PSP"])


def test_the_book_default_is_the_paper_primary_models_tokenizer():
    assert REFERENCE_TOKENIZER == "qwen2.5" and DEFAULTS["tokenizer"] == "qwen2.5" and QUICK["tokenizer"] == "qwen2.5"


def test_reference_grid_priced_with_qwen25_and_says_so(named_vocabs, tmp_path):
    br = BookRuns(dict(QUICK, runs_root=str(tmp_path / "runs"), variants=["PSP"]))
    run = br.reference()
    assert run.header["tokenizer"] == "vocab:qwen2.5" and set(run.df["tokenizer"]) == {"vocab:qwen2.5"}
    assert run.pricing_note == "" and "Budgets priced with tokenizer vocab:qwen2.5." in run.who
    assert "offline" not in run.label
    # every reference run of the parameter set is priced the same way
    assert br.fit_check().header["tokenizer"] == "vocab:qwen2.5"
    # R1 in the classic cell keeps 5 / 0 / 4 under this pricing in every dev template
    r1 = run.df[run.df.policy == "R1"]
    assert set(zip(r1.kept_support, r1.kept_decoy, r1.kept_irrelevant)) == {(5, 0, 4)}


def test_offline_fallback_when_the_vocabulary_cannot_be_had(tmp_path, monkeypatch):
    monkeypatch.setenv(TOKENIZERS_ENV, str(tmp_path / "no-vocabs"))   # an empty tokenizers folder
    monkeypatch.setenv(FETCH_ENV, "0")                                  # and no automatic fetch
    run = reference_run(tmp_path / "runs", tokenizer="qwen2.5", **SMALL)
    assert run.header["tokenizer"] == OfflineTokenizer.name
    assert "qwen2.5's tokenizer is not available here" in run.pricing_note and FETCH_ENV in run.pricing_note
    assert "offline pricing" in run.label
    assert f"Budgets priced with the offline approximation ({OfflineTokenizer.name}): qwen2.5" in run.who
    # the fallback is the offline run itself (same configuration, same folder)
    plain = reference_run(tmp_path / "runs", tokenizer=None, **SMALL)
    assert plain.path == run.path and plain.pricing_note == "" and "offline pricing" not in plain.label


def test_offline_asked_for_is_no_fallback(tmp_path):
    run = reference_run(tmp_path / "runs", tokenizer="offline", **SMALL)
    assert run.header["tokenizer"] == OfflineTokenizer.name and run.pricing_note == ""
    assert f"Budgets priced with tokenizer {OfflineTokenizer.name}." in run.who


def test_an_unknown_tokenizer_is_a_bad_parameter_not_a_fallback(tmp_path):
    with pytest.raises(ValueError, match="book parameter tokenizer = 'qwen9'"):
        reference_run(tmp_path / "runs", tokenizer="qwen9", **SMALL)
    assert not (tmp_path / "runs").exists()   # nothing ran


def test_book_reexports_keep_working():
    assert book.reference_run is reference_run
