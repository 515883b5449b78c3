"""The command line's exit statuses where they are decided (issue 55: the cli wing's mutation survivors):
``cache export`` exits 1 when entries could not be read (and says how many), 0 when all were written; ``cache check``
of a path with no cache yet is a documented non-error (exit 0), a damaged one exit 1 with the recovery; ``vacuum``
reports the sizes. In process (``crossprofile_lib.cli.main``), the library call replaced where the case is hard to
make on disk."""

from __future__ import annotations

import pytest

import crossprofile_lib.backends.cache as cache_mod
from crossprofile_lib.cli import main


@pytest.fixture
def cache_file(tmp_path):
    f = tmp_path / "cache" / cache_mod.FILE_NAME
    f.parent.mkdir()
    f.write_bytes(b"not really sqlite")
    return f


@pytest.mark.parametrize("written, bad, code", [(7, 0, 0), (5, 2, 1), (0, 3, 1)])
def test_cache_export_exit_status_counts_unreadable_entries(cache_file, tmp_path, monkeypatch, capsys, written, bad,
                                                            code):
    monkeypatch.setattr(cache_mod, "export_cache", lambda path, out: (written, bad))
    out = tmp_path / "calls.jsonl"
    assert main(["cache", "export", str(cache_file), str(out)]) == code
    said = capsys.readouterr().out
    assert f"{written} entries -> {out}" in said
    assert (f"; {bad} unreadable" in said) is (bad > 0)


def test_cache_export_never_over_the_cache_itself(cache_file, monkeypatch, capsys):
    monkeypatch.setattr(cache_mod, "export_cache", lambda path, out: pytest.fail("exported over the cache"))
    assert main(["cache", "export", str(cache_file.parent), str(cache_file)]) == 2
    assert "is the file this command reads" in capsys.readouterr().err


def test_cache_check_without_a_cache_is_not_an_error(tmp_path, capsys):
    assert main(["cache", "check", str(tmp_path / "nowhere")]) == 0
    assert "no call cache yet" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert main(["cache", "check", str(tmp_path / "empty")]) == 0
    assert f"holds no {cache_mod.FILE_NAME}" in capsys.readouterr().out


def test_cache_check_reports_health_and_damage(cache_file, monkeypatch, capsys):
    monkeypatch.setattr(cache_mod, "check_cache", lambda p: {"file": str(cache_file), "ok": True, "problem": None,
                                                             "entries": 12, "bad_rows": []})
    assert main(["cache", "check", str(cache_file)]) == 0
    assert f"{cache_file}: ok, 12 entries" in capsys.readouterr().out
    monkeypatch.setattr(cache_mod, "check_cache", lambda p: {"file": str(cache_file), "ok": False,
                                                             "problem": "truncated", "entries": None,
                                                             "bad_rows": ["k1", "k2"]})
    assert main(["cache", "check", str(cache_file)]) == 1
    err = capsys.readouterr().err
    assert "truncated" in err and "entry k1 does not decode" in err and "move the file aside" in err
    monkeypatch.setattr(cache_mod, "check_cache", lambda p: {"file": str(cache_file), "ok": False,
                                                             "problem": "2 entries do not decode", "entries": 10,
                                                             "bad_rows": ["k1", "k2"]})
    assert main(["cache", "check", str(cache_file)]) == 1
    assert "move the file aside" not in capsys.readouterr().err      # readable: no recovery needed


def test_cache_vacuum_reports_sizes(cache_file, monkeypatch, capsys):
    monkeypatch.setattr(cache_mod, "vacuum_cache", lambda p: (4096, 1024))
    assert main(["cache", "vacuum", str(cache_file)]) == 0
    assert "4096 -> 1024 bytes" in capsys.readouterr().out
