"""The safe-input layer (issue 23): one rule set for every input file -- templates, HiddenBench
files, prereg files, chat-template and tokenizer files, run headers. Real files, FIFOs and devices;
the command-line cases run the real ``crossprofile`` in its own process."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossprofile_lib.backends.llm import ChatTemplate
from crossprofile_lib.hiddenbench.importer import FIXTURE_PATH, HiddenBenchError, load_hiddenbench
from crossprofile_lib.run.results import ResultsError, read_header
from crossprofile_lib.safety.inputs import (
    InputError,
    input_file_problem,
    json_depth,
    load_json,
    option_number,
    parse_json,
    path_problem,
    read_bytes,
)
from crossprofile_lib.stats.contrasts import PreregError, load_prereg
from crossprofile_lib.task.tokenizer import get_tokenizer

ROOT = Path(__file__).resolve().parents[1]
FIFO = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")


def _cli(*args, timeout=120, env=None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("CROSSPROFILE_")} | (env or {})
    return subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", *map(str, args)], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture()
def records():
    return json.loads(FIXTURE_PATH.read_text())


# --- one rule for every file: a regular file, read with a cap -----------------------------------------------

@FIFO
def test_no_reader_blocks_on_a_fifo_or_reads_dev_zero(tmp_path):
    import threading
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    opened = []  # a writer waits on the FIFO: it gets through only if some loader opened it for reading

    def writer():
        with open(fifo, "wb"):
            opened.append(not checked.is_set())
    checked = threading.Event()
    w = threading.Thread(target=writer, daemon=True)
    w.start()
    loaders = [lambda p: load_hiddenbench(p), lambda p: load_prereg(p), lambda p: ChatTemplate.from_spec(str(p)),
               lambda p: get_tokenizer(f"gguf:{p}"), lambda p: read_bytes(p, 1024)]
    for load in loaders:
        for p in (fifo, Path("/dev/zero"), tmp_path):
            with pytest.raises(ValueError, match="regular file|not a folder|is a folder"):
                load(p)
    checked.set()
    while w.is_alive():  # let the writer go, counted as the test's own open (again, if it had not reached its open)
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        w.join(0.05)
    assert opened == [False], "a loader opened the FIFO for reading (it would have blocked without this writer)"
    assert input_file_problem(fifo).startswith("is not a regular file") and input_file_problem(tmp_path) == \
        "is a folder, not a file"


def test_size_cap_is_checked_before_reading(tmp_path, monkeypatch):
    import crossprofile_lib.safety.text_input as text_input
    p = tmp_path / "sparse.json"
    with open(p, "wb") as fh:
        fh.truncate(8 << 30)  # 8 GiB, sparse: reading it would take minutes

    real_open = os.open

    def guarded_open(path, *a, **k):
        if Path(path) == p:
            raise AssertionError("the file was opened: its size was not checked first")
        return real_open(path, *a, **k)
    monkeypatch.setattr(text_input.os, "open", guarded_open)
    # the refusal quotes the size stat() reports (a read would stop at the cap and say "more than ...")
    with pytest.raises(HiddenBenchError, match=f"{8 << 30} bytes.*size limit|size limit.*{8 << 30} bytes"):
        load_hiddenbench(p)
    with pytest.raises(InputError, match="size limit"):
        read_bytes(p, 100)


def test_path_names_the_file_system_cannot_hold(tmp_path):
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    assert "symbolic-link loop" in path_problem(loop)
    assert "255 bytes" in path_problem(tmp_path / ("n" * 256))
    assert path_problem(tmp_path / ("n" * 255)) is None and path_problem("") == "empty path"
    assert "NUL" in path_problem("a\x00b")


# --- JSON: duplicate keys, depth, numbers, characters, the BOM rule ---------------------------------------------

@pytest.mark.parametrize("text, rule", [
    ('{"a": 1, "a": 2}', "json (duplicate key)"),
    ("[" * 40 + "]" * 40, "json (nesting depth)"),
    ('[' + "7" * 5000 + ']', "json (number)"),
    ('[NaN]', "json (number)"), ('[1e999]', "json (number)"), ('[-Infinity]', "json (number)"),
    ('["a\\u0000b"]', "json (control characters)"), ('["\\u202e"]', "json (control characters)"),
    ('["\\ud800"]', "json (control characters)"), ('{"\\u200bkey": 1}', "json (control characters)"),
    ('[1,]', "json (syntax)"), ("", "json (syntax)"),
])
def test_json_rules(text, rule):
    with pytest.raises(InputError) as ei:
        parse_json("f.json", text)
    assert ei.value.rule == rule, ei.value
    assert "f.json" in str(ei.value)


def test_json_near_misses_pass():
    assert parse_json("f", '{"a": {"a": 1}, "b": [1.5, -2, "\\u00e9t\\u00e9", "tab\\there"]}') == {
        "a": {"a": 1}, "b": [1.5, -2, "été", "tab\there"]}
    assert parse_json("f", "[" * 32 + "]" * 32) is not None and json_depth('["[[[", {"a": "]]"}]') == 2
    assert parse_json("f", "[" + "9" * 30 + "]") == [int("9" * 30)]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_give_an_input_error(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("j") / "x.json"
    p.write_bytes(data)
    try:
        load_json(p, 1 << 20)
    except InputError:
        pass


# --- HiddenBench files ------------------------------------------------------------------------------------------

def test_a_duplicate_key_makes_its_record_malformed_not_a_silent_answer_change(tmp_path, records):
    r = records[0]
    text = json.dumps(records[:2])
    first = json.dumps(r)
    text = text.replace(first, first[:-1] + f', "correct_answer": {json.dumps(r["possible_answers"][0])}}}', 1)
    (tmp_path / "hb.json").write_text(text)
    d = load_hiddenbench(tmp_path / "hb.json")
    assert [t.id for t in d.tasks] == [str(records[1]["id"])]
    assert d.errors[0].field == "correct_answer" and "duplicate key" in str(d.errors[0])


@pytest.mark.parametrize("value", ["a\u0000b", "a\u202eb", "zero\u200bwidth", "\ud800"])
def test_hidden_characters_make_a_record_malformed(tmp_path, records, value):
    r = copy.deepcopy(records[0])
    r["shared_information"] = [value]
    (tmp_path / "hb.json").write_text(json.dumps([r, records[1]]))
    d = load_hiddenbench(tmp_path / "hb.json")
    assert len(d.tasks) == 1 and d.errors[0].field == "shared_information[0]"
    assert "control characters" in str(d.errors[0])


def test_bom_is_accepted_like_templates_and_utf16_is_named(tmp_path, records):
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(records).encode())
    assert len(load_hiddenbench(tmp_path / "bom.json").tasks) == len(records)
    (tmp_path / "u16.json").write_bytes(json.dumps(records).encode("utf-16"))
    with pytest.raises(HiddenBenchError, match="UTF-16"):
        load_hiddenbench(tmp_path / "u16.json")


def test_deep_nesting_and_a_5000_digit_id_are_named(tmp_path, records):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(HiddenBenchError, match="nesting depth"):
        load_hiddenbench(tmp_path / "deep.json")
    (tmp_path / "id.json").write_text(json.dumps([records[0]]).replace('"id": ', '"id": ' + "7" * 5000 + ', "x": '))
    with pytest.raises(HiddenBenchError, match="5000 digits"):
        load_hiddenbench(tmp_path / "id.json")


def test_skipped_records_are_reported_on_the_console(tmp_path, records):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "hb.json").write_text(json.dumps(records[:2] + [{"id": "broken-one"}]))
    r = _cli("hiddenbench", "run", "--out", tmp_path / "out", "--hiddenbench", tmp_path / "data" / "hb.json",
             "--seeds", "0", "--policies", "R1,ALL", "--limit", "1")
    assert r.returncode == 0, r.stderr
    assert "skipped malformed record" in r.stderr and "broken-one" in r.stderr and "1 malformed record(s)" in r.stderr


@FIFO
def test_hiddenbench_path_env_var_fifo_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / "pipe.json")
    r = _cli("hiddenbench", "run", "--out", tmp_path / "out", "--seeds", "0", "--policies", "R1", timeout=60,
             env={"HIDDENBENCH_PATH": str(tmp_path / "pipe.json")})
    assert r.returncode == 2 and "not a regular file" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


# --- prereg files, run headers, chat templates, tokenizers ------------------------------------------------------

@pytest.mark.parametrize("text, rule", [
    ("a: &x [1]\nb: *x\n", "yaml (anchor or alias)"), ("contrasts: []\ncontrasts: []\n", "yaml (duplicate key)"),
    ("a: " + "[" * 50 + "]" * 50 + "\n", "yaml (nesting depth)"), ("a: !!python/name:os.system\n", "yaml (tag)"),
    ("a: 'x\x00'\n", "file (control characters)"),
])
def test_prereg_goes_through_the_strict_yaml_rules(tmp_path, text, rule):
    (tmp_path / "p.yaml").write_text(text)
    with pytest.raises(PreregError) as ei:
        load_prereg(tmp_path / "p.yaml")
    assert ei.value.rule == rule
    (tmp_path / "bin.yaml").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(PreregError, match="file \\(encoding\\)"):
        load_prereg(tmp_path / "bin.yaml")


def test_run_header_must_be_an_object_and_a_parquet_path_names_its_folder(tmp_path):
    (tmp_path / "run.json").write_text("[1, 2]")
    with pytest.raises(ResultsError, match="must be a JSON object"):
        read_header(tmp_path)
    with pytest.raises(ResultsError, match="must be a JSON object"):
        read_header(tmp_path / "results.parquet")  # the table named directly: its folder's header
    (tmp_path / "run.json").write_text("[" * 10_000 + "]" * 10_000)
    with pytest.raises(ResultsError, match="nesting depth"):
        read_header(tmp_path)


@pytest.mark.parametrize("source, message", [
    ("{% for m in messages %}{{ m.content }", "not a valid Jinja template"),
    ("{{ raise_exception('no') }}", "cannot render"), ("{{ messages[7].content }}", "cannot render"),
])
def test_a_broken_chat_template_file_is_refused_when_named(tmp_path, source, message):
    (tmp_path / "t.jinja").write_text(source)
    with pytest.raises(ValueError, match=message):
        ChatTemplate.from_spec(str(tmp_path / "t.jinja"))


def test_chat_template_folders_and_configs(tmp_path):
    with pytest.raises(ValueError, match="not a folder"):
        ChatTemplate.from_spec(f"hf:{tmp_path / 'none'}")
    (tmp_path / "tokenizer_config.json").write_text('{"bos_token": "<s>"}')
    with pytest.raises(ValueError, match="has no chat template"):
        ChatTemplate.from_spec(f"hf:{tmp_path}")
    (tmp_path / "tokenizer_config.json").write_text('{"chat_template": "a", "chat_template": "b"}')
    with pytest.raises(ValueError, match="duplicate key"):
        ChatTemplate.from_spec(f"hf:{tmp_path}")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": [
        {"name": "tool_use", "template": "x"}, {"name": "default", "template": "{{ messages[0]['content'] }}"}]}))
    assert ChatTemplate.from_spec(f"hf:{tmp_path}").render([{"role": "user", "content": "hi"}]) == "hi"
    # a folder as transformers 5 saves it: the template in chat_template.jinja, "no limit" as int(1e30), 31 digits
    tf5 = tmp_path / "tf5"
    tf5.mkdir()
    (tf5 / "tokenizer_config.json").write_text('{"bos_token": "<|begin_of_text|>", "model_max_length": '
                                               '1000000000000000019884624838656}')
    (tf5 / "chat_template.jinja").write_text("{{ bos_token }}{% for m in messages %}[{{ m['content'] }}]{% endfor %}")
    t = ChatTemplate.from_spec(f"hf:{tf5}")
    assert t.render([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Decision:"}]) == \
        "<|begin_of_text|>[hi]Decision:"
    (tf5 / "tokenizer_config.json").write_text('{"model_max_length": 1' + "0" * 40 + '}')  # 41 digits: refused
    with pytest.raises(ValueError, match="an integer of 41 digits"):
        ChatTemplate.from_spec(f"hf:{tf5}")
    (tmp_path / "m.gguf").write_text("not a model")
    with pytest.raises(ValueError, match="not a GGUF file"):
        ChatTemplate.from_spec(f"gguf:{tmp_path / 'm.gguf'}")


def test_a_broken_tokenizer_file_is_named(tmp_path):
    (tmp_path / "tokenizer.json").write_text('{"model": [')
    with pytest.raises(ValueError, match="cannot be read"):
        get_tokenizer(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ValueError, match="does not exist"):
        get_tokenizer(f"hf:{tmp_path / 'empty'}")


# --- option values: one strict rule -----------------------------------------------------------------------------

@pytest.mark.parametrize("value, kw, ok", [
    (0.5, {}, True), (-0.5, {}, True), (True, {}, False), (float("nan"), {}, False), (float("inf"), {}, False),
    (float("inf"), {"allow_inf": True, "low": 0}, True), (-1.0, {"low": 0, "allow_inf": True}, False),
    ("1", {}, False), (0, {"low": 0, "above": True}, False), (1e-9, {"low": 0, "above": True}, True),
    (8, {"integer": True, "low": 1}, True), (8.0, {"integer": True, "low": 1}, True), (8.5, {"integer": True}, False),
    (0, {"integer": True, "low": 1}, False), (2000, {"integer": True, "high": 1024}, False),
])
def test_option_numbers_are_strict(value, kw, ok):
    if ok:
        option_number("backend x", "opt", value, **kw)
    else:
        with pytest.raises(ValueError, match="backend x: option opt="):
            option_number("backend x", "opt", value, **kw)


# --- the real-model options (issue 28) under the same strict rule (issue 23) --------------------------------------

@pytest.mark.parametrize("opt, value, ok", [
    ("concurrency", "auto", True), ("concurrency", " AUTO ", True), ("concurrency", 4, True), ("concurrency", 4.0, True),
    ("concurrency", "4", False), ("concurrency", "fast", False), ("concurrency", 0, False), ("concurrency", True, False),
    ("concurrency", 2000, False), ("concurrency", 2.5, False),
    ("max_concurrency", 64, True), ("max_concurrency", 0, False), ("max_concurrency", 1.5, False),
    ("max_concurrency", "8", False), ("max_concurrency", 5000, False),
    ("stop_on_refusal", 0, True), ("stop_on_refusal", 3, True), ("stop_on_refusal", -1, False),
    ("stop_on_refusal", True, False), ("stop_on_refusal", 1.5, False),
    ("tokenize_timeout", 0.5, True), ("tokenize_timeout", 0, False), ("tokenize_timeout", float("nan"), False),
    ("tokenize_timeout", float("inf"), False), ("tokenize_timeout", "60", False),
    ("sampling", "server", True), ("sampling", "greedy", False),
    ("tokenizer_fallback", "offline", True), ("tokenizer_fallback", "maybe", False),
])
def test_real_model_options_are_strict(opt, value, ok, tmp_path):
    """concurrency is 'auto' (the AIMD rule) or a strict integer 1..1024; the other real-model options
    follow the one strict rule too, each refused naming the option; nothing is sent (offline tokenizer,
    a port nobody listens on)."""
    from crossprofile_lib.backends.openai_compat import OpenAICompatBackend
    kw = dict(base_url="http://127.0.0.1:9/v1", tokenizer="offline", api_key="k", cache=tmp_path / "cache")
    if ok:
        b = OpenAICompatBackend("m", **kw, **{opt: value})
        if opt == "concurrency":
            assert b.concurrency == ("auto" if isinstance(value, str) else int(value))
    else:
        with pytest.raises(ValueError, match=rf"{opt}\W"):
            OpenAICompatBackend("m", **kw, **{opt: value})
