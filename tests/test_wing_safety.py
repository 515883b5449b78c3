"""The redaction rule where it lives (issue 55: the safety wing's mutation survivors): a secret that contains a
shorter one is masked whole (longest first), secret names are found in camel case as in snake case, a command
line and a URL keep their harmless parts and lose their credentials. Property tests where the rule has an oracle
(no character of a secret survives), hand-checked cases for the names."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossprofile_lib.safety.redact import (
    MASK,
    holds_secret,
    is_secret_name,
    mask_known,
    redact_argv,
    redact_text,
    redact_url,
    redact_value,
    url_secrets,
)

ALNUM = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=4, max_size=12)


@settings(max_examples=80, deadline=None)
@given(short=ALNUM, tail=ALNUM, before=st.sampled_from(["", "key ", "x="]), after=st.sampled_from(["", " end", "/v1"]))
def test_a_secret_containing_a_shorter_one_is_masked_whole(short, tail, before, after):
    """Oracle: with the longer secret masked first, nothing of it remains; masking the shorter first would leave
    its tail in the text."""
    long = short + tail
    text = f"{before}{long}{after}"
    for out in (mask_known(text, extra=(short, long)), mask_known(text, extra=(long, short)),
                redact_text(text, secrets=(short, long))):
        assert long not in out and tail not in out.replace(MASK, "\0"), out
        assert out.count(MASK) >= 1
    assert mask_known(text, extra=(short, long)) == f"{before}{MASK}{after}"


def test_masking_keeps_everything_else_and_ignores_too_short_secrets():
    assert mask_known("a b c abc", extra=("abc",)) == "a b c abc"          # under 4 characters: not a secret
    assert mask_known("token wxyz1 wxyz", extra=("wxyz",)) == f"token {MASK}1 {MASK}"
    assert holds_secret("the key is wxyz1", extra=("wxyz",)) and not holds_secret("nothing here", extra=("wxyz",))
    assert not holds_secret("", extra=("wxyz",)) and not holds_secret(None, extra=("wxyz",))


@pytest.mark.parametrize("name", ["accessToken", "clientSecret", "apiKey", "x-api-key", "api_key", "API-KEY",
                                  "sessionId", "AUTH_TOKEN", "authHeader", "privateKey", "password", "--api-key",
                                  "refreshToken", "X-Amz-Signature", "sas"])
def test_secret_names_in_every_spelling(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["max_tokens", "maxTokens", "monkey", "keyboard", "tokenizer", "passage", "seed",
                                  "base_url", "model", "temperature", "--seeds"])
def test_names_that_only_look_like_secrets(name):
    assert not is_secret_name(name)


def test_camel_case_option_values_are_redacted():
    assert redact_value("accessToken", "abc123") == MASK and redact_value("clientSecret", "") == ""
    assert redact_value("headers", {"Authorization": "Bearer abcdefghijk", "Accept": "json"}) == \
        {"Authorization": MASK, "Accept": "json"}
    assert redact_value("extra", "refreshToken=zz9zz9") == f"refreshToken={MASK}"
    assert redact_value("max_tokens", 64) == 64


def test_command_line_keeps_its_settings_and_loses_its_credentials():
    argv = ["crossprofile", "run", "--api-key", "S3CRETVALUE", "--accessToken=abc123", "--backend-option",
            "api_key=zzzz", "--seeds", "0,1", "--base-url", "https://u:pw@host.example/v1?model=x"]
    assert redact_argv(argv) == ["crossprofile", "run", "--api-key", MASK, f"--accessToken={MASK}",
                                 "--backend-option", f"api_key={MASK}", "--seeds", "0,1", "--base-url",
                                 f"https://{MASK}@host.example/v1?model=x"]


def test_url_keeps_harmless_query_and_server_and_names_its_secrets():
    url = "https://user:pw@host.example/v1?api-version=2024&key=abc&model=x#frag"
    assert redact_url(url) == f"https://{MASK}@host.example/v1?api-version=2024&key={MASK}&model=x#{MASK}"
    assert url_secrets(url) == ["pw", "abc", "frag"]
    assert redact_url("http://host:8000/v1") == "http://host:8000/v1"             # nothing secret: unchanged
    assert redact_url("http://host/v1?model=sk-abcdefghij12") == f"http://host/v1?model={MASK}"   # a key by shape
    assert url_secrets("http://KEYVALUE@host/v1") == ["KEYVALUE"]                  # KEY@host: the user is the key


def test_free_text_masks_urls_and_secret_words_but_not_settings():
    t = redact_text("calling https://host/v1?token=abc123 with accessToken=xyz987 and max_tokens=64")
    assert t == f"calling https://host/v1?token={MASK} with accessToken={MASK} and max_tokens=64"


def test_output_folder_is_never_an_input_folder_but_a_sibling_with_a_longer_name_is_fine(tmp_path):
    from crossprofile_lib.safety.outputs import WouldDestroy, check_output_folder
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "a.json").write_text("{}")
    check_output_folder(tmp_path / "runs2", "run", inputs=[runs])                 # runs2 is not inside runs
    check_output_folder(tmp_path / "run", "run", inputs=[runs])                   # nor is run
    with pytest.raises(WouldDestroy, match="is inside the folder"):
        check_output_folder(runs / "sub", "run", inputs=[runs])
    with pytest.raises(WouldDestroy, match="is the folder"):
        check_output_folder(runs, "run", inputs=[runs])
    # an input FILE: its folder is refused, a folder below it is not an input folder
    with pytest.raises(WouldDestroy, match="is the folder"):
        check_output_folder(runs, "run", inputs=[runs / "a.json"])
    check_output_folder(runs / "sub", "run", inputs=[runs / "a.json"])
    check_output_folder(tmp_path / "out", "run", inputs=[])


# --- more of the redaction rule ---------------------------------------------------------------------------
def test_a_value_that_is_not_text_holds_no_secret():
    assert holds_secret(12345, extra=("1234",)) is False and holds_secret(["1234"], extra=("1234",)) is False


def test_a_fragment_of_pairs_keeps_its_names_and_a_query_key_is_quoted():
    assert redact_url("http://h/p#state=abc&code=xyz") == f"http://h/p#state={MASK}&code={MASK}"
    assert redact_url("http://h/p#tokenvalue") == f"http://h/p#{MASK}"
    assert redact_url("http://h/p?a/b=1&model=x") == f"http://h/p?a%2Fb={MASK}&model=x"


def test_a_base_url_variables_secret_parts_are_known_secrets(monkeypatch):
    from crossprofile_lib.safety.redact import known_secrets
    monkeypatch.setenv("MY_SERVER_BASE_URL", "http://user:pw123456@h.example/v1?key=k9k9k9k9")
    monkeypatch.setenv("MY_SERVER_NOTE", "http://anyone:notakey99@h.example/v1")     # not a URL variable, no key word
    known = known_secrets()
    assert "pw123456" in known and "k9k9k9k9" in known and "notakey99" not in known
    assert mask_known("the server said pw123456") == f"the server said {MASK}"


# --- input files: what each refusal says ------------------------------------------------------------------
def _refusal(fn, *a, **k):
    from crossprofile_lib.safety.text_input import InputError
    with pytest.raises(InputError) as e:
        fn(*a, **k)
    return e.value


def test_a_control_character_is_placed_at_its_line_and_column():
    from crossprofile_lib.safety.text_input import decode_text
    e = _refusal(decode_text, "f.txt", "first line\nab\x07cd\n".encode())
    assert e.rule == "file (control characters)" and "at line 2, column 3:" in e.detail
    e1 = _refusal(decode_text, "f.txt", "\x07".encode())
    assert "at line 1, column 1:" in e1.detail


def test_encodings_other_than_utf8_are_named():
    from crossprofile_lib.safety.text_input import decode_text
    assert "the file is UTF-32" in _refusal(decode_text, "f", b"\x00\x00\xfe\xff\x00\x00\x00a").detail
    assert "the file is UTF-32" in _refusal(decode_text, "f", b"\xff\xfe\x00\x00a\x00\x00\x00").detail
    assert "the file is UTF-16" in _refusal(decode_text, "f", b"\xfe\xff\x00a").detail
    # NULs: refused as an encoding when more than a quarter of the bytes; 2 of 9 is not (then a control character)
    assert "NUL bytes between the characters" in _refusal(decode_text, "f", b"a\x00b\x00c\x00").detail
    e = _refusal(decode_text, "f", b"abc\x00def\x00g")
    assert e.rule == "file (control characters)"
    assert decode_text("f", "\ufeffcaf\u00e9".encode()) == "caf\u00e9"       # a UTF-8 BOM is dropped


def test_json_refusals_name_their_rule():
    from crossprofile_lib.safety.text_input import parse_json
    big = "1" + "0" * 400 + ".5"
    e = _refusal(parse_json, "f.json", f'{{"x": {big}}}')
    assert e.rule == "json (number)" and e.detail == f"the number {big[:40]} is too large for a float"
    d = _refusal(parse_json, "f.json", '{"a": {"k": 1, "k": 2}}')
    assert d.rule == "json (duplicate key)" and d.field.endswith("k")
    assert d.detail == "key 'k' appears twice in one object; JSON would silently keep the last"


def test_unreadable_files_say_why(tmp_path):
    from crossprofile_lib.safety.text_input import read_bytes
    e = _refusal(read_bytes, tmp_path / "none.yaml", 100)
    assert e.rule == "file (unreadable)" and e.detail == "cannot read: no such file"
    f = _refusal(read_bytes, tmp_path, 100)
    assert f.rule == "file (not a regular file)" and f.detail == "a folder; a file must be a regular file"
    g = _refusal(read_bytes, tmp_path, 100, what="template")
    assert g.detail == "a folder; a template must be a regular file"
    (tmp_path / "big").write_bytes(b"x" * 101)
    assert _refusal(read_bytes, tmp_path / "big", 100).detail == "101 bytes; a file holds at most 100 bytes"


# --- output files ----------------------------------------------------------------------------------------
def test_write_errors_say_what_failed_and_what_to_do(tmp_path):
    import errno

    from crossprofile_lib.safety.outputs import write_error
    e = write_error(tmp_path / "x", OSError(errno.EACCES, "Permission denied"))
    assert e.errno == errno.EACCES and e.filename == str(tmp_path / "x")
    assert str(e).startswith(f"cannot write {tmp_path / 'x'}: Permission denied (EACCES); permission denied; its")
    full = write_error("out.json", OSError(errno.ENOSPC, "No space left"), "cannot append to")
    assert "cannot append to out.json: No space left (ENOSPC); the disk is full: free some space and rerun" in str(full)


def test_an_existing_output_file_needs_overwrite_but_an_empty_one_does_not(tmp_path):
    from crossprofile_lib.safety.outputs import WouldDestroy, check_output_file
    (tmp_path / "empty.jsonl").write_text("")
    check_output_file(tmp_path / "empty.jsonl")                              # 0 bytes: nothing to destroy
    (tmp_path / "full.jsonl").write_text("x")
    with pytest.raises(WouldDestroy, match="exists .*add --overwrite"):
        check_output_file(tmp_path / "full.jsonl")
    check_output_file(tmp_path / "full.jsonl", overwrite=True)
    with pytest.raises(WouldDestroy, match="is a folder"):
        check_output_file(tmp_path)
    with pytest.raises(WouldDestroy):
        check_output_file(tmp_path / "no" / "such" / "x.jsonl")              # its folder does not exist
    check_output_file("relative-name.jsonl")                                 # the current folder


def test_a_folder_of_one_kind_refuses_another_and_names_what_it_holds(tmp_path):
    import json

    from crossprofile_lib.safety.outputs import WouldDestroy, check_output_folder, describe_folder, other_files
    hb = tmp_path / "hb"
    hb.mkdir()
    (hb / "hiddenbench_run.json").write_text(json.dumps({"rows": 12, "backend": "llamacpp", "model": "smol",
                                                         "created": "today"}))
    (hb / "hiddenbench_extra.parquet").write_text("")
    assert describe_folder(hb).endswith(": 12 decisions by llamacpp (smol), created today")
    assert other_files(hb, "hiddenbench run") == []
    with pytest.raises(WouldDestroy, match="holds a hiddenbench run"):
        check_output_folder(hb, "run")
    check_output_folder(hb, "hiddenbench run")


def test_leftover_temporary_files_are_removed_and_listed(tmp_path, capsys):
    from crossprofile_lib.safety.outputs import clean_leftovers
    names = [f".results.parquet.{k}.tmp" for k in "abcd"]
    for n in names:
        (tmp_path / n).write_text("x")
    (tmp_path / "keep").mkdir()
    (tmp_path / ".results.parquet.dir.tmp").mkdir()                     # not a file: kept
    gone = clean_leftovers(tmp_path, ["results.parquet"])
    assert sorted(gone) == sorted(names) and (tmp_path / ".results.parquet.dir.tmp").is_dir()
    err = capsys.readouterr().err
    assert "removed 4 temporary file(s)" in err and ", ...)" in err
    assert clean_leftovers(tmp_path, ["results.parquet"]) == [] and capsys.readouterr().err == ""


def test_the_umask_is_read_from_the_process():
    import os

    from crossprofile_lib.safety.outputs import current_umask
    old = os.umask(0o027)
    try:
        assert current_umask() == 0o027
    finally:
        os.umask(old)


# --- YAML and template paths -----------------------------------------------------------------------------
def test_yaml_refusals_name_their_field_and_rule(tmp_path):
    from crossprofile_lib.safety.inputs import load_yaml, parse_yaml
    from crossprofile_lib.safety.text_input import InputError

    def refused(text):
        with pytest.raises(InputError) as e:
            parse_yaml("t.yaml", text, InputError)
        return e.value
    m = refused("base: &b {x: 1}\nfacts:\n  - {<<: *b}\n")
    assert m.rule == "yaml (anchor or alias)"
    mk = refused("facts:\n  - {<<: {x: 1}, y: 2}\n")
    assert mk.rule == "yaml (merge key)" and mk.field == "facts[0].<<"
    k = refused("facts:\n  - {1: a}\n")
    assert k.rule == "yaml (key type)" and k.field == "facts[0].1" and k.detail.startswith("mapping key '1' is not a plain")
    d = refused("facts:\n  - text: a\n    role: x\n    text: b\n")
    assert d.rule == "yaml (duplicate key)" and d.field == "facts[0].text"
    assert "key 'text' appears twice in one mapping (first (line 2, column 5), again (line 4, column 5))" in d.detail
    c = refused("facts:\n  - text: \"a\\x07b\"\n")
    assert c.rule == "yaml (control characters)" and c.field == "facts[0].text"
    v = refused("n: 1" + "0" * 5000 + "\n")
    assert v.rule == "schema (YAML value)" and v.detail.startswith("a value cannot be read: ")
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(InputError) as e:
        load_yaml(tmp_path / "dir.yaml", 1000, what="domains list")
    assert e.value.detail == "a folder; a domains list must be a regular file"


def test_template_paths_expand_globs_and_skip_domain_lists(tmp_path, monkeypatch):
    from crossprofile_lib.safety.inputs import template_paths
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t").mkdir()
    for n in ("b.yaml", "a.yaml", "domains.yaml", "c.txt"):
        (tmp_path / "t" / n).write_text("x: 1\n")
    assert [p.name for p in template_paths("t/*.yaml")] == ["a.yaml", "b.yaml"]
    assert [p.name for p in template_paths(str(tmp_path / "t" / "?.yaml"))] == ["a.yaml", "b.yaml"]
    assert [p.name for p in template_paths("t")] == ["a.yaml", "b.yaml"]
    with pytest.raises(FileNotFoundError, match="no template file matches"):
        template_paths("t/*.yml")


def test_a_lock_holder_is_described_with_its_command_redacted():
    from crossprofile_lib.safety.outputs import _describe
    assert _describe({"pid": 42, "host": "box", "started": "2026-01-01T00:00:00Z",
                      "command": "crossprofile run --api-key S3CRET --out runs/a"}) == \
        f"pid 42 on host box since 2026-01-01T00:00:00Z (crossprofile run --api-key {MASK} --out runs/a)"
    assert _describe({}) == "pid ? on host ? since ?"


def test_a_process_start_time_is_read_from_proc_and_none_for_no_such_process():
    import os
    import time

    from crossprofile_lib.safety.outputs import _process_start
    me = _process_start(os.getpid())
    assert me is not None and time.time() - 3 * 86400 < me <= time.time() + 1
    assert _process_start(2 ** 22 + 12345) is None


def test_an_unreadable_header_does_not_stop_the_description(tmp_path):
    from crossprofile_lib.safety.outputs import describe_folder
    (tmp_path / "run.json").mkdir()                                  # a folder where the header should be
    (tmp_path / "results.parquet").write_text("x")
    assert describe_folder(tmp_path).startswith("results.parquet (1 bytes)")


def test_an_os_error_is_named_by_its_errno(tmp_path):
    from crossprofile_lib.safety.text_input import InputError, read_bytes
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    with pytest.raises(InputError) as e:
        read_bytes(loop, 100)
    assert e.value.detail.startswith("cannot read: ") and e.value.detail.endswith("(ELOOP)")


def test_a_leftover_that_is_a_link_is_kept_and_refusals_name_the_option(tmp_path):
    from crossprofile_lib.safety.outputs import WouldDestroy, check_output_folder, clean_leftovers
    (tmp_path / "target").write_text("keep me")
    (tmp_path / ".results.parquet.x.tmp").symlink_to(tmp_path / "target")
    assert clean_leftovers(tmp_path, ["results.parquet"]) == []
    assert (tmp_path / ".results.parquet.x.tmp").is_symlink() and (tmp_path / "target").read_text() == "keep me"
    with pytest.raises(WouldDestroy) as e:
        check_output_folder(tmp_path, "run", inputs=[tmp_path])
    assert str(e.value).startswith(f"--out {tmp_path}: is the folder")
