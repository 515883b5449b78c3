"""Hostile template files (issue 14 item 3): every file gets a verdict, the summary always prints."""

import os
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from crossprofile_lib.safety.inputs import MAX_BYTES, TemplateError, read_template_text, template_paths
from crossprofile_lib.task.templates import load_template, load_templates
from crossprofile_lib.task.validate import summary, validate_paths

ROOT = Path(__file__).resolve().parents[1]
BROKEN = ROOT / "tests" / "broken_templates"
EXPECTED = yaml.safe_load((BROKEN / "expected.yaml").read_text())
GOOD = ROOT / "templates" / "dev" / "dev-hospital-01.yaml"


def _mixed_folder(tmp_path: Path) -> Path:
    """Two valid templates around hostile ones, in name order: good first, hostile in the middle."""
    d = tmp_path / "mixed"
    d.mkdir()
    shutil.copy(GOOD, d / "a-good.yaml")
    shutil.copy(ROOT / "templates" / "dev" / "dev-school-meals-01.yaml", d / "z-good.yaml")
    for name in ("31-latin1.yaml", "32-utf16-bom.yaml", "35-binary-png.yaml", "45-yml-extension.yml",
                 "66-alias-bomb.yaml", "69-deep-flow-nesting.yaml", "55-duplicate-key-correct-option.yaml"):
        shutil.copy(BROKEN / name, d / f"m-{name}")
    return d


def test_every_corpus_file_gets_a_verdict_and_none_passes():
    verdicts = validate_paths(BROKEN)
    files = {v.path.name for v in verdicts}
    assert files >= {e["file"] for e in EXPECTED}  # .yml and .YAML files are checked, not skipped
    by_name = {v.path.name: v for v in verdicts}
    for e in EXPECTED:
        v = by_name[e["file"]]
        assert not v.ok and v.error.rule.startswith(e["rule"]) and v.error.field == e["field"], v.line()
        line = v.line()
        assert "\n" not in line and e["file"] in line and e["field"] in line and e["rule"] in line
    assert summary(verdicts).startswith(f"0 templates valid, {len(verdicts)} invalid")


def test_a_hostile_file_does_not_stop_the_others(tmp_path):
    verdicts = validate_paths(_mixed_folder(tmp_path))
    assert [v.path.name for v in verdicts if v.ok] == ["a-good.yaml", "z-good.yaml"]
    assert summary(verdicts) == "2 templates valid, 7 invalid (2 domains)"


def test_duplicate_ids_across_files_fail_the_later_file(tmp_path):
    for name in ("a.yaml", "b.yaml"):
        shutil.copy(GOOD, tmp_path / name)
    a, b = validate_paths(tmp_path)
    assert a.ok and not b.ok
    assert b.error.rule == "unique template id" and b.error.field == "id" and "a.yaml" in str(b.error)


def test_size_limit_is_checked_before_reading(tmp_path):
    p = tmp_path / "huge.yaml"
    with open(p, "wb") as fh:  # a sparse 4 GiB file: reading it would take far longer than the check
        fh.truncate(4 << 30)
    tracemalloc.start()  # refused before reading: reading would hold 4 GiB
    try:
        with pytest.raises(TemplateError) as ei:
            read_template_text(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ei.value.rule == "file (size limit)" and peak < 2 * MAX_BYTES + (1 << 20), peak
    (tmp_path / "edge.yaml").write_bytes(b"#" * MAX_BYTES)  # exactly at the limit: read, then refused as empty
    with pytest.raises(TemplateError, match="must hold a mapping"):
        load_template(tmp_path / "edge.yaml")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
def test_a_fifo_is_not_read(tmp_path):
    os.mkfifo(tmp_path / "pipe.yaml")
    with pytest.raises(TemplateError) as ei:
        load_template(tmp_path / "pipe.yaml")
    assert ei.value.rule == "file (not a regular file)"


def test_alias_bomb_and_deep_nesting_are_refused_quickly():
    tracemalloc.start()  # refused without building the expanded structure (an alias bomb expands to GiB)
    try:
        for name in ("66-alias-bomb.yaml", "69-deep-flow-nesting.yaml", "70-deep-block-nesting.yaml"):
            with pytest.raises(TemplateError):
                load_template(BROKEN / name)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak


def test_utf8_bom_is_tolerated(tmp_path):
    p = tmp_path / "bom.yaml"
    p.write_bytes(b"\xef\xbb\xbf" + GOOD.read_bytes())
    assert load_template(p).id == "dev-hospital-01"


def test_template_paths_walk(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").mkdir()
    for rel in ("b.yaml", "sub/a.yaml", "c.yml", "notes.md", ".hidden/x.yaml", ".y.yaml"):
        (tmp_path / rel).write_text("x: 1\n")
    names = [p.relative_to(tmp_path).as_posix() for p in template_paths(tmp_path)]
    assert names == ["b.yaml", "c.yml", "sub/a.yaml"]
    assert len(template_paths([tmp_path, tmp_path / "b.yaml"])) == 3  # each file once
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no template file"):
        template_paths(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="no template file matches"):
        template_paths(tmp_path / "nope-*.yaml")


def test_load_templates_refuses_a_yml_file(tmp_path):
    shutil.copy(GOOD, tmp_path / "a.yml")
    with pytest.raises(TemplateError, match="file \\(extension\\)"):
        load_templates(tmp_path)


def test_cli_validate_in_a_real_process(tmp_path):
    folder = _mixed_folder(tmp_path)
    r = subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", "validate", str(folder)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    out_lines, err_lines = r.stdout.splitlines(), r.stderr.splitlines()
    assert out_lines[-1] == "2 templates valid, 7 invalid (2 domains)"
    assert sum(ln.startswith("ok   ") for ln in out_lines) == 2
    fails = [ln for ln in err_lines if ln.startswith("FAIL ")]
    assert len(fails) == 7 and all(str(folder) in ln and "field '" in ln for ln in fails)
    assert any("yaml (duplicate key)" in ln and "correct_option" in ln for ln in fails)


def test_mutated_files_never_crash_the_validator(tmp_path):
    """300 seeded byte-level mutations of a valid template: each file a verdict, no internal error."""
    rng = np.random.default_rng(20261130)
    good = GOOD.read_bytes()
    tokens = [b"&a ", b"*a", b"!!python/object:x ", b"<<: ", b"[", b"]", b"{", b"}", b"? ", b": ", b"- ",
              b"\t", b"\x00", b"\xff", b"---\n", b"%TAG ! tag:x,2000:\n", b"!x ", b"'", b'"', b"|\n",
              b'"\\u200b"', b"~", b"1" * 5000, b"\xc3", b"\xe2\x80\xae", b"#", b"&b [*b]", b"[" * 50]
    for i in range(300):
        b = bytearray(good)
        for _ in range(int(rng.integers(1, 5))):
            pos, op = int(rng.integers(0, len(b))), int(rng.integers(0, 3))
            if op == 0:
                b[pos:pos] = tokens[int(rng.integers(len(tokens)))]
            elif op == 1:
                del b[pos:pos + int(rng.integers(1, 20))]
            else:
                b[pos] = int(rng.integers(0, 256))
        (tmp_path / f"m{i:03d}.yaml").write_bytes(bytes(b))
    verdicts = validate_paths(tmp_path)
    assert len(verdicts) == 300
    assert not [v.line() for v in verdicts if not v.ok and v.error.rule == "internal error"]
    assert sum(not v.ok for v in verdicts) > 250  # the mutations do break files


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_give_a_template_error(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("h") / "x.yaml"
    p.write_bytes(data)
    with pytest.raises(TemplateError):
        load_template(p)
