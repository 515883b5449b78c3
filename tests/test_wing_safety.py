"""The redaction rule where it lives (issue 55: the safety wing's mutation survivors): a secret that contains a
shorter one is masked whole (longest first), secret names are found in camel case as in snake case, a command
line and a URL keep their harmless parts and lose their credentials. Property tests where the rule has an oracle
(no character of a secret survives), hand-checked cases for the names."""

from __future__ import annotations

import errno
from pathlib import Path

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


# --- the rules the seed-56 sample found unpinned ------------------------------------------------------------
def test_option_bool_takes_true_and_false_in_any_case_and_nothing_else():
    from crossprofile_lib.safety.inputs import option_bool
    assert option_bool("llamacpp", "stream", " True ") is True and option_bool("llamacpp", "stream", "FALSE") is False
    assert option_bool("llamacpp", "stream", "false") is False and option_bool("llamacpp", "stream", True) is True
    for bad in ("yes", "1", 1, None):
        with pytest.raises(ValueError) as e:
            option_bool("llamacpp", "stream", bad)
        assert str(e.value) == f"llamacpp: option stream={bad!r}: must be true or false"


def test_yaml_syntax_errors_and_anchors_name_the_file_field_and_place():
    from crossprofile_lib.safety.inputs import parse_yaml
    from crossprofile_lib.safety.text_input import InputError
    with pytest.raises(InputError) as e:
        parse_yaml("t.yaml", "a: [1, 2\n", InputError)
    assert (e.value.path, e.value.field, e.value.rule) == ("t.yaml", "<file>", "schema (YAML syntax)")
    assert e.value.detail == ("not valid YAML: while parsing a flow sequence: expected ',' or ']', but got "
                              "'<stream end>' (line 2, column 1)")
    with pytest.raises(InputError) as a:
        parse_yaml("t.yaml", "base: &b {x: 1}\n", InputError)
    assert a.value.field == "base" and a.value.detail == "anchors (&) and aliases (*) are not allowed (line 1, column 7)"


def test_a_template_file_without_the_yaml_extension_is_refused_by_its_path(tmp_path):
    from crossprofile_lib.safety.inputs import read_template_text
    from crossprofile_lib.safety.text_input import TemplateError
    p = tmp_path / "t.yml"
    p.write_text("title: x\n")
    with pytest.raises(TemplateError) as e:
        read_template_text(p)
    assert e.value.path == str(p) and str(e.value).startswith(f"{p}: field '<file>': file (extension): ")
    assert e.value.detail == "template files end in '.yaml' (found '.yml'); rename the file"
    with pytest.raises(TemplateError, match=r"\(found 'no extension'\)"):
        read_template_text(tmp_path / "t")


def test_markup_notes_name_each_kind_of_markup_and_how_the_book_shows_it():
    from crossprofile_lib.safety.markup import HOW_SHOWN, markup_notes
    notes = markup_notes([("title", "<b>bold</b> plan"), ("description", "plain words, $4 and $5"),
                          ("facts[0].text", "see [a](http://x.example) and $x^2$"), ("options[0].name", None)])
    assert notes == [f"title holds an HTML tag ('<b>'): {HOW_SHOWN}",
                     f"facts[0].text holds a Markdown link ('[a](http://x.example)'), TeX math ('$x^2$'): {HOW_SHOWN}"]
    assert markup_notes([]) == [] and markup_notes([("title", "nothing here")]) == []


def test_a_file_size_is_shown_in_bytes_kilobytes_or_megabytes(tmp_path):
    from crossprofile_lib.safety.outputs import _size
    cases = {9_999: "9999 bytes", 10_000: "10 kB", 999_999: "1000 kB", 1_000_000: "1.0 MB", 1_050_001: "1.1 MB",
             2_549_999: "2.5 MB"}
    for n, shown in cases.items():
        p = tmp_path / f"f{n}"
        with open(p, "wb") as fh:
            fh.truncate(n)                                                 # sparse: no bytes written
        assert _size(p) == shown, n
    assert _size(tmp_path / "missing") == "?"


def _lock_info(pid, host=None, started="2099-01-01T00:00:00Z", command="crossprofile run --out x"):
    import socket
    return {"pid": pid, "host": host or socket.gethostname(), "started": started, "command": command}


def test_a_lock_records_its_holder_and_when_it_was_taken(tmp_path):
    import json
    import os
    import re
    import socket
    import time

    from crossprofile_lib.safety.outputs import LOCK_NAME, acquire, release
    lock = acquire(tmp_path)
    try:
        assert lock == tmp_path / LOCK_NAME
        info = json.loads(lock.read_text())
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", info["started"]), info["started"]
        written = time.mktime(time.strptime(info["started"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        assert abs(written - time.time()) < 86400                          # a date of today, not a clock check
    finally:
        release(lock)
    assert not lock.exists()


def test_a_live_holder_on_this_host_keeps_its_lock(tmp_path):
    import json
    import os

    from crossprofile_lib.safety.outputs import LOCK_NAME, FolderLocked, acquire
    lock = tmp_path / LOCK_NAME
    held = _lock_info(os.getppid())                                       # alive, and started before 2099
    lock.write_text(json.dumps(held))
    with pytest.raises(FolderLocked) as e:
        acquire(tmp_path)
    assert str(e.value) == (
        f"{tmp_path}: output folder is in use by another run: pid {os.getppid()} on host {held['host']} since "
        f"2099-01-01T00:00:00Z (crossprofile run --out x) (rule: one run per output folder; wait for it or choose "
        f"another --out); if no run is using this folder (the pid may now belong to another program), delete "
        f"{lock} and rerun")
    assert json.loads(lock.read_text()) == held


def test_another_hosts_lock_is_never_taken_over(tmp_path):
    import json

    from crossprofile_lib.safety.outputs import LOCK_NAME, FolderLocked, acquire
    lock = tmp_path / LOCK_NAME
    lock.write_text(json.dumps(_lock_info(2 ** 22 + 12345, host="elsewhere.invalid")))
    with pytest.raises(FolderLocked, match="it is on another host, so it cannot be checked here"):
        acquire(tmp_path)


def test_a_dead_or_reused_holders_lock_is_taken_over_with_a_notice(tmp_path, capsys):
    import json
    import os

    from crossprofile_lib.safety.outputs import LOCK_NAME, acquire, release
    lock = tmp_path / LOCK_NAME
    lock.write_text(json.dumps(_lock_info(2 ** 22 + 12345)))              # above any pid_max: no such process
    release(acquire(tmp_path))
    assert "took over a stale lock left by pid 4206649" in capsys.readouterr().err
    lock.write_text(json.dumps(_lock_info(os.getppid(), started="2000-01-01T00:00:00Z")))   # pid given out since
    release(acquire(tmp_path))
    err = capsys.readouterr().err
    assert f"pid {os.getppid()} now belongs to another process, started after the lock was written" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_fresh_lock_moved_away_by_mistake_is_put_back(tmp_path, monkeypatch):
    """Between reading a dead holder's lock and renaming it away, another run took it over: the rename moved the
    fresh lock, which goes back in place; that run keeps the folder."""
    import json
    import os

    from crossprofile_lib.safety import outputs
    lock = tmp_path / outputs.LOCK_NAME
    dead = 2 ** 22 + 12345
    lock.write_text(json.dumps(_lock_info(dead)))
    fresh = _lock_info(os.getppid())
    real_alive = outputs._pid_alive

    def alive(pid):
        if pid == dead:
            lock.write_text(json.dumps(fresh))                              # the other run's takeover
            return False
        return real_alive(pid)
    monkeypatch.setattr(outputs, "_pid_alive", alive)
    with pytest.raises(outputs.FolderLocked, match=f"in use by another run: pid {os.getppid()} "):
        outputs.acquire(tmp_path)
    assert json.loads(lock.read_text()) == fresh
    assert [p.name for p in tmp_path.iterdir()] == [outputs.LOCK_NAME]      # no stale copy left


def test_a_folder_of_other_files_is_refused_naming_five_of_them(tmp_path, monkeypatch):
    from crossprofile_lib.safety.outputs import WouldDestroy, check_other_files, check_output_folder
    monkeypatch.chdir(tmp_path)                                            # the current folder is not the one checked
    home = tmp_path / "home"
    home.mkdir()
    for n in ("g.txt", "a.txt", "b", "c.py", "d.md", "e.csv", "f.json", ".hidden"):
        (home / n).write_text("x")
    with pytest.raises(WouldDestroy) as e:
        check_other_files(home, "run", allowed=False)
    assert str(e.value) == (
        f"--out {home}: holds 7 file(s) or folder(s) that are not a run's (a.txt, b, c.py, d.md, e.csv and 2 more); "
        f"a run would mix with them. Choose a new or empty folder, or add --allow-other-files to write there anyway "
        f"(rule: an output folder holds one output and nothing else)")
    check_other_files(home, "run", allowed=True)
    for n in ("f.json", "g.txt"):
        (home / n).unlink()
    with pytest.raises(WouldDestroy, match=r"holds 5 file\(s\) or folder\(s\) that are not a book's "
                                           r"\(a.txt, b, c.py, d.md, e.csv\); .* add --force to write"):
        check_other_files(home, "book", allowed=False, option="--book", flag="--force")
    with pytest.raises(WouldDestroy, match="add --allow-other-files"):
        check_output_folder(home, "run")
    check_output_folder(home, "run", allow_other_files=True)
    check_other_files(tmp_path / "new", "run", allowed=False)              # not there yet: nothing to mix with


def test_a_finished_run_that_differs_is_replaced_only_with_overwrite(tmp_path):
    from crossprofile_lib.safety.outputs import WouldDestroy, check_output_folder
    (tmp_path / "results.parquet").write_bytes(b"x" * 12)
    calls = []

    def differs(folder):
        calls.append(folder)
        return ["seeds 0,1 vs 0,1,2", "model a vs b"]
    with pytest.raises(WouldDestroy) as e:
        check_output_folder(tmp_path, "run", same_work=differs)
    assert str(e.value) == (
        f"--out {tmp_path}: holds a finished run (results.parquet (12 bytes)) that this command would replace: "
        f"seeds 0,1 vs 0,1,2; model a vs b. Choose another --out, or add --overwrite to replace it (rule: no command "
        f"destroys existing work without an explicit flag)")
    check_output_folder(tmp_path, "run", same_work=differs, overwrite=True)
    assert calls == [tmp_path]                                             # with --overwrite it is not even asked
    check_output_folder(tmp_path, "run", same_work=lambda f: [])           # the same work: resumed, not refused


def test_secret_named_json_entries_give_every_value_they_hold():
    from crossprofile_lib.safety.redact import argv_secrets
    argv = ["run", "--backend-option", 'extra={"api_key": ["k1abcd", "k2abcd"], "token": 1.5, '
            '"password": {"a": "pw-one1"}, "secret": 12345678, "model": "m-visible"}']
    assert argv_secrets(argv) == ["k1abcd", "k2abcd", "pw-one1", "12345678"]
    assert argv_secrets(["--token", "tok-zzzz", "--api-key=kkkk9"]) == ["tok-zzzz", "kkkk9"]


def test_a_word_holding_a_url_is_not_a_secret_option_so_the_next_word_is_kept():
    from crossprofile_lib.safety.redact import argv_secrets, redact_argv
    argv = ["-http://h.example/a-token", "visible-value"]                  # a 'token' word, but a URL
    assert argv_secrets(argv) == []
    assert redact_argv(argv) == argv
    assert argv_secrets(["-a-token", "hidden-value"]) == ["hidden-value"]


def test_the_console_stream_masks_secrets_and_is_otherwise_the_wrapped_one(monkeypatch):
    import io

    from crossprofile_lib.safety.redact import RedactingStream
    monkeypatch.setenv("WINGTEST_API_KEY", "wing-secret-8842")
    inner = io.StringIO()
    s = RedactingStream(inner)
    s.write("key=wing-secret-8842\n")
    s.writelines(["a ", "wing-secret-8842"])
    assert s.getvalue() == f"key={MASK}\na {MASK}" and s.closed is False
    assert s.seekable() is True


def test_a_control_character_after_several_lines_gets_its_own_lines_column():
    from crossprofile_lib.safety.text_input import decode_text
    e = _refusal(decode_text, "f.txt", "a\nbb\ncc\x07".encode())
    assert "at line 3, column 3:" in e.detail
    e0 = _refusal(decode_text, "f.txt", "\nab\x07".encode())               # the newline at offset 0
    assert "at line 2, column 3:" in e0.detail


def test_json_refusals_name_the_key_or_value_that_holds_a_bad_character():
    from crossprofile_lib.safety.text_input import parse_json
    k = _refusal(parse_json, "f.json", '{"a\\u0007": 1}')
    assert (k.field, k.rule) == ("<file>", "json (control characters)")
    assert k.detail == ("character U+0007 (unnamed, category Cc) in a key: control, invisible and unassigned "
                        "characters are not allowed")
    n = _refusal(parse_json, "f.json", '{"x": {"b\\u200b": 1}}')
    assert n.field == "x" and n.detail.startswith("character U+200B (ZERO WIDTH SPACE, category Cf) in a key: ")
    v = _refusal(parse_json, "f.json", '{"x": ["ok", "\\u200b"]}')
    assert v.field == "x[1]" and " in the value: " in v.detail


def test_json_syntax_errors_name_the_file_and_the_place():
    from crossprofile_lib.safety.text_input import parse_json
    e = _refusal(parse_json, "f.json", '{"a": 1,}')
    assert (e.path, e.field, e.rule) == ("f.json", "<file>", "json (syntax)")
    assert e.detail == "not valid JSON: Expecting property name enclosed in double quotes (line 1, column 9)"
    assert str(e).startswith("f.json: field '<file>': json (syntax): not valid JSON: ")


def test_each_kind_of_file_that_is_not_regular_is_named(tmp_path, monkeypatch):
    import os
    import socket
    import tempfile

    from crossprofile_lib.safety.text_input import read_bytes
    assert _refusal(read_bytes, "/dev/null", 10).detail == "a device; a file must be a regular file"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert _refusal(read_bytes, fifo, 10).detail == "a FIFO (named pipe); a file must be a regular file"
    short = tempfile.mkdtemp(prefix="s")                                   # a socket path must be short
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(os.path.join(short, "s"))
        try:
            assert _refusal(read_bytes, os.path.join(short, "s"), 10).detail == "a socket; a file must be a regular file"
        finally:
            sock.close()
    finally:
        for n in os.listdir(short):
            os.unlink(os.path.join(short, n))
        os.rmdir(short)
    odd = tmp_path / "odd"                                                 # a type Linux lacks (BSD's whiteout)
    odd.write_text("x")
    real_stat = os.stat

    def stat(p, *a, **k):
        st = real_stat(p, *a, **k)
        return os.stat_result((0o160644,) + tuple(st)[1:]) if str(p) == str(odd) else st
    monkeypatch.setattr(os, "stat", stat)
    assert _refusal(read_bytes, odd, 10).detail == "not a regular file; a file must be a regular file"


def test_a_fifo_swapped_in_after_the_check_is_refused_without_blocking(tmp_path, monkeypatch):
    """The file is opened non-blocking: a FIFO put in place between the stat and the open (no writer) is refused
    by fstat instead of hanging the read (an alarm turns a hang into a failure)."""
    import os
    import signal

    from crossprofile_lib.safety.text_input import read_bytes
    regular = tmp_path / "regular"
    regular.write_text("x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: real_stat(regular if str(p) == str(fifo) else p, *a, **k))

    def hung(*_):
        raise TimeoutError("the open blocked on the FIFO")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(5)
    try:
        e = _refusal(read_bytes, fifo, 10)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert (e.path, e.field, e.rule, e.detail) == (str(fifo), "<file>", "file (not a regular file)",
                                                   "a file must be a regular file")


# --- two bugs the seed-56 sample's survivors showed (fixed in the wing's modules) ----------------------------
def test_a_character_yaml_never_allows_is_a_refusal_naming_the_file_not_a_yaml_crash():
    """parse_template(path, text) parses text that skipped the file guards: YAML's reader refuses U+0007 when the
    loader is built, which was outside the try (a bare yaml.ReaderError); now the file's YAML syntax refusal."""
    from crossprofile_lib.safety.inputs import parse_yaml
    from crossprofile_lib.safety.text_input import InputError, TemplateError
    from crossprofile_lib.task.templates import parse_template
    with pytest.raises(InputError) as e:
        parse_yaml("t.yaml", "title: a\x07", InputError)
    assert (e.value.path, e.value.field, e.value.rule) == ("t.yaml", "<file>", "schema (YAML syntax)")
    assert e.value.detail == ('not valid YAML: unacceptable character #x0007: special characters are not allowed '
                              'in "<unicode string>", position 8')
    with pytest.raises(TemplateError, match=r"^x\.yaml: field '<file>': schema \(YAML syntax\): "):
        parse_template("x.yaml", "title: a\x07")


@pytest.mark.parametrize("url, shown", [
    ("//user:pw9secret@host:bad/v1", f"//{MASK}@host:bad/v1"),                  # scheme-relative, a bad port
    ("http:\t//user:pw9secret@host:bad/v1?key=abc", f"http://{MASK}@host:bad/v1?{MASK}"),  # urlsplit drops the tab
    ("http://user:pw9secret@[::1/v1#frag", f"http://{MASK}@[::1/v1?{MASK}"),   # an invalid IPv6 host
    ("http://host:bad/v1", "http://host:bad/v1"),                              # nothing secret in it
])
def test_an_unparsable_url_never_shows_its_userinfo(url, shown):
    assert redact_url(url) == shown and "pw9secret" not in redact_url(url)


# --- seed-58 sample: the functions that held its survivors, every mutant explored ------------------------------
def test_template_fields_names_every_user_written_text_in_order():
    from types import SimpleNamespace as NS

    from crossprofile_lib.safety.markup import template_fields
    t = NS(title="T", description="D", options=[NS(name="o0"), NS(name="o1")], criteria=[NS(name="c0"), NS(name="c1")],
           facts=[NS(text="f0"), NS(text="f1"), NS(text="f2")])
    assert template_fields(t) == [("title", "T"), ("description", "D"), ("options[0].name", "o0"),
                                  ("options[1].name", "o1"), ("criteria[0].name", "c0"), ("criteria[1].name", "c1"),
                                  ("facts[0].text", "f0"), ("facts[1].text", "f1"), ("facts[2].text", "f2")]
    empty = NS(title="", description="", options=[], criteria=[], facts=[])
    assert template_fields(empty) == [("title", ""), ("description", "")]


def test_a_process_start_time_is_after_boot_and_a_child_starts_after_its_parent():
    import os
    import subprocess
    import sys

    from crossprofile_lib.safety.outputs import _process_start
    with open("/proc/stat", "rb") as fh:
        btime = next(int(ln.split()[1]) for ln in fh if ln.startswith(b"btime"))
    me = _process_start(os.getpid())
    assert me is not None and me >= btime
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        started = _process_start(child.pid)
    finally:
        child.communicate(b"")
    assert started is not None and me <= started


def test_a_lock_file_too_deeply_nested_to_parse_reads_as_no_holder(tmp_path):
    from crossprofile_lib.safety.outputs import _read_lock
    p = tmp_path / "lock"
    p.write_text("[" * 30000)                         # json.loads: RecursionError
    assert _read_lock(p) == {}
    p.write_text('{"pid": 12, "host": "box"}')
    assert _read_lock(p) == {"pid": 12, "host": "box"}
    p.write_text("[1, 2]")                            # JSON, but not a record
    assert _read_lock(p) == {}
    p.write_bytes(b'{"pid": "\xff"}')                  # not UTF-8
    assert _read_lock(p) == {}


@pytest.mark.parametrize("status", ["Name:\tx\nUmask:\tzz\n", "Umask:\n", "Name:\tx\n"])
def test_an_unreadable_umask_line_falls_back_to_the_process_umask(monkeypatch, status):
    import io
    import os

    from crossprofile_lib.safety import outputs
    monkeypatch.setattr(outputs, "open", lambda *a, **k: io.StringIO(status), raising=False)
    old = os.umask(0o037)
    try:
        assert outputs.current_umask() == 0o037
        assert os.umask(0o037) == 0o037               # the fallback put the umask back
    finally:
        os.umask(old)


def test_release_of_a_lock_already_gone_is_quiet(tmp_path, monkeypatch):
    import os

    from crossprofile_lib.safety import outputs
    lock = tmp_path / outputs.LOCK_NAME
    monkeypatch.setattr(outputs, "_read_lock", lambda p: {"pid": os.getpid()})   # removed after it was read
    outputs.release(lock)
    assert not lock.exists()
    lock.write_text("x")
    monkeypatch.setattr(outputs, "_read_lock", lambda p: {"pid": os.getpid() + 1})  # another process's lock
    outputs.release(lock)
    assert lock.read_text() == "x"


def test_an_atomic_text_file_is_utf8_whatever_the_locale(tmp_path):
    """Under the POSIX locale without UTF-8 mode Python's default encoding is ASCII: the file is UTF-8 anyway."""
    import os
    import subprocess
    import sys

    from crossprofile_lib.safety import redact
    from crossprofile_lib.safety.outputs import write_text_atomic
    here = tmp_path / "here.txt"
    redact.register_secret("zq9wv8kk")
    try:
        write_text_atomic(here, "caf\u00e9 key zq9wv8kk")
    finally:
        redact._REGISTERED.discard("zq9wv8kk")
    assert here.read_bytes() == f"caf\u00e9 key {MASK}".encode() and os.listdir(tmp_path) == ["here.txt"]
    dest = tmp_path / "out.txt"
    env = dict(os.environ, LC_ALL="POSIX", LANG="POSIX", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    code = ("import sys; from crossprofile_lib.safety.outputs import write_text_atomic; "
            "write_text_atomic(sys.argv[1], 'caf\\u00e9 \\u2014 \\u00fc')")
    r = subprocess.run([sys.executable, "-c", code, str(dest)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert dest.read_bytes() == "caf\u00e9 \u2014 \u00fc".encode()


def test_an_output_file_beside_its_inputs_is_allowed_and_its_folder_probed(tmp_path, monkeypatch):
    from crossprofile_lib.safety import outputs
    from crossprofile_lib.safety.outputs import WouldDestroy, check_output_file
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("{}")
    b.write_text("{}")
    probed = []
    monkeypatch.setattr(outputs, "_probe", lambda folder: probed.append(folder))
    check_output_file(tmp_path / "out.csv", inputs=[a, b])
    assert probed == [tmp_path]
    with pytest.raises(WouldDestroy) as e:
        check_output_file(b, inputs=[a, b], option="--out")
    assert str(e.value) == (f"--out {b}: is the file this command reads ({b}); writing there would destroy it "
                            f"(rule: an output never replaces the command's input)")

    def refuse(folder):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(outputs, "_probe", refuse)
    with pytest.raises(WouldDestroy) as e:
        check_output_file(tmp_path / "out.csv", option="--out")
    assert str(e.value) == (f"--out {tmp_path / 'out.csv'}: its folder {tmp_path} is not writable (Permission "
                            f"denied (EACCES); permission denied)")


def test_a_run_header_saved_with_a_utf8_bom_still_describes_the_folder(tmp_path):
    from crossprofile_lib.safety.outputs import describe_folder
    (tmp_path / "decisions.jsonl").write_text("")
    plain = describe_folder(tmp_path)
    (tmp_path / "run.json").write_bytes(b"\xef\xbb\xbf" + b'{"backend": "llamacpp", "model": "smol"}')
    described = describe_folder(tmp_path)
    assert described != plain and "by llamacpp (smol)" in described


def test_a_registered_secret_is_masked_and_empty_is_never_one():
    from crossprofile_lib.safety import redact
    try:
        redact.register_secret("  wq8zkq3v  ", "EMPTY", "ab", None, 1234)
        assert redact.mask_known("key wq8zkq3v here") == f"key {MASK} here"
        assert "EMPTY" not in redact._REGISTERED and "ab" not in redact._REGISTERED
        assert redact.mask_known("EMPTY ab 1234") == "EMPTY ab 1234"
    finally:
        redact._REGISTERED.discard("wq8zkq3v")


def test_a_secret_named_pair_inside_a_harmless_option_gives_its_value():
    from crossprofile_lib.safety.redact import _secret_values, argv_secrets
    assert _secret_values("extra", "token=zq9wv8") == ["zq9wv8"]
    assert _secret_values("extra", "model=smol") == []
    assert "zq9wv8" in argv_secrets(["crossprofile", "run", "--backend-option", "token=zq9wv8"])


def test_a_json_input_over_its_size_names_what_it_is(tmp_path):
    from crossprofile_lib.safety.text_input import load_json
    p = tmp_path / "f.json"
    p.write_text('{"a": 1}')
    assert _refusal(load_json, p, 4).detail == "8 bytes; a file holds at most 4 bytes"
    assert _refusal(load_json, p, 4, what="policy file").detail == "8 bytes; a policy file holds at most 4 bytes"
    assert load_json(p, 8) == {"a": 1}


def test_json_nested_past_python_s_recursion_limit_is_a_syntax_refusal():
    from crossprofile_lib.safety.text_input import parse_json
    e = _refusal(parse_json, "f.json", "[" * 5000 + "]" * 5000, max_depth=10 ** 6)
    assert (e.path, e.field, e.rule) == ("f.json", "<file>", "json (syntax)")
    assert e.detail == "not valid JSON: maximum recursion depth exceeded while decoding a JSON array from a unicode string"


def test_an_os_error_is_named_by_its_words_and_errno(tmp_path):
    from crossprofile_lib.safety.text_input import read_bytes
    f = tmp_path / "f"
    f.write_text("x")
    e = _refusal(read_bytes, f / "inside.json", 100)
    assert (e.field, e.rule, e.detail) == ("<file>", "file (unreadable)", "cannot read: Not a directory (ENOTDIR)")
    e = _refusal(read_bytes, tmp_path / ("a" * 300), 100)
    assert e.detail == "cannot read: File name too long (ENAMETOOLONG)"


def test_a_file_is_read_at_most_one_byte_past_its_limit(tmp_path, monkeypatch):
    """A file that grows after its size was checked: read_bytes asks for max_bytes + 1 bytes, never all of it."""
    import builtins

    from crossprofile_lib.safety import text_input
    asked = []

    class Spy:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def read(self, n=-1):
            asked.append(n)
            return self.fh.read(n)
    monkeypatch.setattr(text_input, "open", lambda *a, **k: Spy(builtins.open(*a, **k)), raising=False)
    p = tmp_path / "f.txt"
    p.write_text("abc")
    assert text_input.read_bytes(p, 10) == b"abc" and asked == [11]


def test_a_missing_or_oversized_lock_file_reads_as_no_holder(tmp_path):
    """Only the first 64 KiB of a lock file is read: a larger one (valid JSON past that) is no lock record."""
    from crossprofile_lib.safety.outputs import _read_lock
    assert _read_lock(tmp_path / "none") == {}
    p = tmp_path / "lock"
    p.write_text('{"pid": 12, "pad": "' + "x" * (64 * 1024) + '"}')
    assert _read_lock(p) == {}
    p.write_text('{"pid": 12, "pad": "' + "x" * (64 * 1024 - 40) + '"}')
    assert _read_lock(p)["pid"] == 12


def test_a_process_whose_name_holds_a_parenthesis_has_its_start_read(tmp_path):
    """/proc/PID/stat puts the command name in parentheses; a name such as 'a) 1 2 3' must not shift the fields."""
    import os
    import subprocess
    import sys

    from crossprofile_lib.safety.outputs import _process_start
    odd = tmp_path / "a) 1 2 3"
    odd.symlink_to(os.path.realpath(sys.executable))
    me = _process_start(os.getpid())
    child = subprocess.Popen([str(odd), "-I", "-S", "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        with open(f"/proc/{child.pid}/stat", "rb") as fh:
            assert fh.read().startswith(f"{child.pid} (a) 1 2 3) ".encode())
        started = _process_start(child.pid)
        plain = subprocess.Popen([sys.executable, "-I", "-S", "-c", "pass"])
        later = _process_start(plain.pid)
        plain.wait()
    finally:
        child.communicate(b"")
    assert started is not None and later is not None and me <= started <= later


def test_the_write_probe_is_a_hidden_file_in_the_folder_itself_and_is_removed(tmp_path, monkeypatch):
    import os

    from crossprofile_lib.safety.outputs import _probe
    removed = []
    real_unlink = os.unlink
    monkeypatch.setattr(os, "unlink", lambda p, *a, **k: (removed.append(str(p)), real_unlink(p, *a, **k)))
    _probe(tmp_path)
    assert len(removed) == 1 and os.path.dirname(removed[0]) == str(tmp_path)
    assert os.path.basename(removed[0]).startswith(".write-probe.") and os.listdir(tmp_path) == []
    with pytest.raises(FileNotFoundError):
        _probe(tmp_path / "missing")


def test_the_umask_is_read_from_proc_without_setting_it_and_else_set_to_022_for_an_instant(monkeypatch):
    """Read from /proc/self/status no thread sees the umask change; only where /proc cannot be read is it set
    (to 022, then straight back)."""
    import os

    from crossprofile_lib.safety import outputs
    calls = []
    real_umask = os.umask
    monkeypatch.setattr(os, "umask", lambda m: (calls.append(m), real_umask(m))[1])
    old = real_umask(0o027)
    try:
        assert outputs.current_umask() == 0o027 and calls == []

        def gone(*a, **k):
            raise FileNotFoundError(2, "No such file or directory")
        monkeypatch.setattr(outputs, "open", gone, raising=False)
        assert outputs.current_umask() == 0o027 and calls == [0o022, 0o027]
    finally:
        real_umask(old)


def test_an_output_file_refusal_names_the_option_the_path_and_why(tmp_path, monkeypatch):
    import os

    from crossprofile_lib.safety import outputs
    from crossprofile_lib.safety.outputs import WouldDestroy, check_output_file

    def refused(dest, **k):
        with pytest.raises(WouldDestroy) as e:
            check_output_file(dest, **k)
        return str(e.value)
    assert refused(tmp_path) == f"OUT {tmp_path}: is a folder; name a file (e.g. {tmp_path}/calls.jsonl)"
    assert refused(tmp_path / "x\x00y") == f"OUT {tmp_path / 'x'}\x00y: the name holds a NUL character"
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert refused(loop, option="--out") == f"--out {loop}: a symbolic-link loop (the link points back at itself)"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert refused(fifo, option="--out") == f"--out {fifo}: exists and is not a regular file"
    missing = tmp_path / "no" / "out.csv"
    assert refused(missing, option="--out") == f"--out {missing}: its folder {tmp_path / 'no'} does not exist"
    probed = []
    monkeypatch.setattr(outputs, "_probe", lambda folder: probed.append(folder))
    monkeypatch.chdir(tmp_path)
    check_output_file("out.csv")
    assert [str(p) for p in probed] == [str(tmp_path)]


def test_a_markup_note_quotes_at_most_40_characters_of_the_markup():
    from crossprofile_lib.safety.markup import HOW_SHOWN, markup_notes
    tag = '<a href="' + "h" * 50 + '">'
    assert markup_notes([("title", tag)]) == [f"title holds an HTML tag ({tag[:40]!r}): {HOW_SHOWN}"]
    assert tag[:40] == '<a href="' + "h" * 31


def test_a_secret_of_exactly_four_characters_is_registered():
    from crossprofile_lib.safety import redact
    try:
        redact.register_secret("wq8z", " zq7 ")
        assert "wq8z" in redact._REGISTERED and "zq7" not in redact._REGISTERED
        assert redact.mask_known("a wq8z b zq7") == f"a {MASK} b zq7"
    finally:
        redact._REGISTERED.discard("wq8z")


def test_secret_values_inside_harmless_options_lists_urls_and_json():
    from crossprofile_lib.safety.redact import _secret_values
    key = "sk-abcdefgh12"
    assert _secret_values("extra", ["token=zq9wv8", "x", "model=smol"]) == ["zq9wv8"]
    assert _secret_values("extra", "https://u:pw1x@a.example/,https://v:pw2y@b.example/") == ["pw1x", "pw2y"]
    assert _secret_values("extra", f"token={key}") == [key, key]              # key-like, then the pair's value
    assert _secret_values("extra", f'{{"a": "{key}"}}') == [key, key]         # key-like, then the JSON entry
    assert _secret_values("extra", '{"token": "zq9wv8", "u": "https://x:pw9q@h.example/"}') == ["zq9wv8", "pw9q"]
    assert _secret_values("extra", "plain words") == []


def test_load_json_refuses_bad_characters_by_field_and_may_leave_duplicates_to_the_caller(tmp_path):
    from crossprofile_lib.safety.text_input import load_json
    p = tmp_path / "f.json"
    p.write_text('{"x": "a\u200b"}')
    e = _refusal(load_json, p, 100)
    assert (e.path, e.field, e.rule) == (str(p), "x", "json (control characters)")
    assert e.detail == ("character U+200B (ZERO WIDTH SPACE, category Cf) in the value: control, invisible and "
                        "unassigned characters are not allowed")
    d = tmp_path / "d.json"
    d.write_text('{"k": 1, "k": 2}')
    assert load_json(d, 100, check=False) == {"k": 2}
    assert _refusal(load_json, d, 100).rule == "json (duplicate key)"


def test_json_depth_and_number_refusals_are_for_the_whole_file_and_a_caller_s_error_class_is_kept():
    from crossprofile_lib.safety.text_input import TemplateError, parse_json
    d = _refusal(parse_json, "f.json", '{"a": [[1]]}', max_depth=2)
    assert (d.path, d.field, d.rule, d.detail) == ("f.json", "<file>", "json (nesting depth)",
                                                   "nested 3 levels deep (at most 2)")
    n = _refusal(parse_json, "f.json", '{"x": NaN}')
    assert (n.field, n.rule, n.detail) == ("<file>", "json (number)",
                                           "'NaN' is not a JSON number (NaN and Infinity are not allowed)")
    with pytest.raises(TemplateError) as e:
        parse_json("t.json", '{"k": 1, "k": 2}', TemplateError)
    assert e.value.rule == "json (duplicate key)"


def test_read_bytes_refusals_name_the_path_the_whole_file_the_rule_and_why(tmp_path):
    from pathlib import Path

    from crossprofile_lib.safety.text_input import read_bytes

    def whole(e):
        return (e.path, e.field, e.rule, e.detail)
    big = tmp_path / "big.json"
    big.write_text("x" * 12)
    assert whole(_refusal(read_bytes, big, 10)) == (str(big), "<file>", "file (size limit)",
                                                     "12 bytes; a file holds at most 10 bytes")
    assert whole(_refusal(read_bytes, tmp_path, 10)) == (str(tmp_path), "<file>", "file (not a regular file)",
                                                          "a folder; a file must be a regular file")
    # a regular file whose stat says 0 bytes but which reads longer (it grew): refused on what was read
    assert whole(_refusal(read_bytes, Path("/proc/self/status"), 10)) == (
        "/proc/self/status", "<file>", "file (size limit)", "more than 10 bytes")
    assert whole(_refusal(read_bytes, tmp_path / "none", 10)) == (str(tmp_path / "none"), "<file>",
                                                                   "file (unreadable)", "cannot read: no such file")
    assert whole(_refusal(read_bytes, str(tmp_path / "a\x00b"), 10))[2:] == (
        "file (unreadable)", "cannot read: embedded null byte")


# --- seed-59 sample: its survivors' rules, pinned whole ------------------------------------------------------
def test_a_given_secret_of_four_characters_is_masked_and_of_three_is_not():
    assert redact_text("id abcd x", secrets=("abcd",)) == f"id {MASK} x"
    assert redact_text("id abc x", secrets=("abc",)) == "id abc x"


def test_a_secret_named_pair_as_an_option_value_is_masked_whole_to_its_end():
    """redact_value masks all after ``token=`` (spaces too); free text stops the value at a space."""
    assert redact_value("opt", "token=abc def") == f"token={MASK}"
    assert redact_value("opt", "api_key=a,b c") == f"api_key={MASK}"
    assert redact_value("opt", "model=abc def") == "model=abc def"


def test_a_fragment_of_pairs_gives_its_values_not_the_whole_fragment():
    assert url_secrets("http://h/p#state=abc") == ["abc"]
    assert url_secrets("http://h/p?key=abc#code=xyz&v=1") == ["abc", "xyz"]
    assert url_secrets("http://h/p#tok9tok9") == ["tok9tok9"]


def test_a_bom_refusal_names_the_files_path():
    from crossprofile_lib.safety.text_input import decode_text
    for data, name in ((b"\xff\xfe\x00\x00a\x00\x00\x00", "UTF-32"), (b"\xfe\xff\x00a", "UTF-16")):
        e = _refusal(decode_text, "dir/f.yaml", data)
        assert (e.path, e.field, e.rule, e.detail) == ("dir/f.yaml", "<file>", "file (encoding)",
                                                       f"the file is {name}; save it as UTF-8")


def test_an_unparsable_url_with_a_second_double_slash_still_hides_its_userinfo():
    assert redact_url("http://user:pw9secret@host:bad/a//b") == f"http://{MASK}@host:bad/a//b"
    assert redact_url("http://user:pw9secret@host:bad/a//b?k=1#f") == f"http://{MASK}@host:bad/a//b?{MASK}"


def test_a_userinfo_holding_at_signs_is_masked_up_to_the_last_one():
    assert redact_url("http://us@er:pw9@host/v1") == f"http://{MASK}@host/v1"
    assert redact_url("http://a@b@c:pw@host:8000/v1") == f"http://{MASK}@host:8000/v1"


@pytest.mark.parametrize("frag", ["v", "model", "tokenvalue"])
def test_a_fragment_without_pairs_is_masked_whole_even_a_harmless_word(frag):
    assert redact_url(f"http://h/p#{frag}") == f"http://h/p#{MASK}"


def _yaml_refusal(text):
    from crossprofile_lib.safety.inputs import parse_yaml
    from crossprofile_lib.safety.text_input import InputError
    with pytest.raises(InputError) as e:
        parse_yaml("t.yaml", text, InputError)
    return e.value.path, e.value.field, e.value.rule, e.value.detail


def test_a_refused_mapping_key_is_named_by_the_mapping_it_sits_in():
    assert _yaml_refusal("a:\n  !!binary x: 1") == (
        "t.yaml", "a", "yaml (tag)",
        "tag 'tag:yaml.org,2002:binary' is not allowed (only plain YAML values) (line 2, column 3)")
    assert _yaml_refusal("a:\n  - !!set {b: 1}: 2") == (
        "t.yaml", "a[0]", "yaml (tag)",
        "tag 'tag:yaml.org,2002:set' is not allowed (only plain YAML values) (line 2, column 5)")
    assert _yaml_refusal("a:\n  &k b: 1") == (
        "t.yaml", "a", "yaml (anchor or alias)", "anchors (&) and aliases (*) are not allowed (line 2, column 3)")


def test_a_yaml_value_that_cannot_be_read_is_refused_for_the_whole_file():
    path, field, rule, detail = _yaml_refusal("n: " + "1" * 5000)
    assert (path, field, rule) == ("t.yaml", "<file>", "schema (YAML value)")
    assert detail.startswith("a value cannot be read: ") and "5000 digits" in detail


@pytest.mark.parametrize("p, shown", [("", "'': empty path"), ("   ", "'   ': empty path"),
                                      ("a\x00b", "'a\x00b': the name holds a NUL character")])
def test_a_template_path_that_can_name_no_file_is_refused_with_why(p, shown):
    from crossprofile_lib.safety.inputs import template_paths
    with pytest.raises(FileNotFoundError) as e:
        template_paths(p)
    assert str(e.value) == shown


def test_an_os_error_is_explained_with_its_errno_name_only_when_it_has_one():
    import errno

    from crossprofile_lib.safety.outputs import _why
    assert _why(OSError(9999, "weird")) == "weird"
    assert _why(OSError("plain")) == "plain"
    assert _why(OSError(errno.ENOSPC, "No space")) == "No space (ENOSPC); the disk is full: free some space and rerun"


def test_an_empty_folder_is_described_as_files(tmp_path):
    from crossprofile_lib.safety.outputs import describe_folder
    assert describe_folder(tmp_path) == "files"


def test_a_folder_is_described_by_its_files_in_kind_order_and_the_first_json_header(tmp_path):
    from crossprofile_lib.safety.outputs import describe_folder
    (tmp_path / "results.parquet").write_bytes(b"abc")
    (tmp_path / "run.json").write_text('{"rows": 5, "backend": "b", "model": "m", "created": "2024-01-01"}')
    assert describe_folder(tmp_path) == ("results.parquet (3 bytes), run.json (66 bytes): 5 decisions by b (m), "
                                         "created 2024-01-01")
    (tmp_path / "run.json").write_text("not json")                   # the next header that reads as JSON
    (tmp_path / "hiddenbench_run.json").write_text('{"backend": "hb"}')
    (tmp_path / "artefacts").mkdir()
    (tmp_path / "artefacts" / "natural.jsonl").write_text("x" * 12000)
    assert describe_folder(str(tmp_path)) == (
        "results.parquet (3 bytes), run.json (8 bytes), hiddenbench_run.json (17 bytes), "
        "artefacts/natural.jsonl (12 kB): ? decisions by hb (?), created ?")
    (tmp_path / "hiddenbench_run.json").write_text("[1]")            # JSON, but not a header: no run words
    assert describe_folder(tmp_path) == ("results.parquet (3 bytes), run.json (8 bytes), hiddenbench_run.json "
                                         "(3 bytes), artefacts/natural.jsonl (12 kB)")


_NUL_WORDS = ("NUL bytes between the characters: UTF-16 or UTF-32 without a byte-order mark (or a binary file); "
              "save it as UTF-8")
_CONTROL = "control, invisible and unassigned characters are not allowed"


@pytest.mark.parametrize("data, rule, detail", [
    (b"\xff\xfea\x00", "file (encoding)", "the file is UTF-16; save it as UTF-8"),          # UTF-16 LE, its BOM
    (b"a\x00b\x00c\x00", "file (encoding)", _NUL_WORDS),                                    # half the bytes NUL
    (b"abc\x00", "file (control characters)",                                               # a quarter: not yet
     f"character U+0000 (unnamed, category Cc) at line 1, column 4: {_CONTROL}"),
    (b"ab\ncd\n\xffx", "file (encoding)", "not UTF-8: byte 0xff at line 3 (offset 6); save the file as UTF-8"),
    (b"\xe9", "file (encoding)", "not UTF-8: byte 0xe9 at line 1 (offset 0); save the file as UTF-8"),
    (b"a\n\x07", "file (control characters)",
     f"character U+0007 (unnamed, category Cc) at line 2, column 1: {_CONTROL}"),
])
def test_a_file_that_is_not_clean_utf8_is_refused_whole_naming_its_path(data, rule, detail):
    from crossprofile_lib.safety.text_input import decode_text
    e = _refusal(decode_text, "d/f.txt", data)
    assert (e.path, e.field, e.rule, e.detail) == ("d/f.txt", "<file>", rule, detail)


def test_parse_yaml_refusals_whole_syntax_with_and_without_context_depth_and_duplicates():
    from crossprofile_lib.safety.inputs import parse_yaml
    from crossprofile_lib.safety.text_input import InputError
    assert _yaml_refusal("a: [1, 2") == ("t.yaml", "<file>", "schema (YAML syntax)",
                                         "not valid YAML: while parsing a flow sequence: expected ',' or ']', but "
                                         "got '<stream end>' (line 1, column 9)")
    assert _yaml_refusal("a: b: c") == ("t.yaml", "<file>", "schema (YAML syntax)",
                                        "not valid YAML: mapping values are not allowed here (line 1, column 5)")
    assert _yaml_refusal("a: 1\na: 2") == (
        "t.yaml", "a", "yaml (duplicate key)", "key 'a' appears twice in one mapping (first (line 1, column 1), "
        "again (line 2, column 1)); YAML would silently keep the last")
    with pytest.raises(InputError) as e:
        parse_yaml("t.yaml", "[[[[1]]]]", InputError, max_depth=2)
    assert (e.value.path, e.value.field, e.value.rule, e.value.detail) == (
        "t.yaml", "[0][0]", "yaml (nesting depth)", "nested more than 2 levels deep (line 1, column 3)")
    assert parse_yaml("t.yaml", "[[1]]", InputError, max_depth=2) == [[1]]


def test_check_output_folder_refusals_whole_and_what_it_allows(tmp_path):
    from crossprofile_lib.safety.outputs import WouldDestroy, check_output_folder

    def refusal(*a, **k):
        with pytest.raises(WouldDestroy) as e:
            check_output_folder(*a, **k)
        return str(e.value).replace(str(tmp_path), "T")
    src = tmp_path / "in"
    src.mkdir()
    rule = ("write the output to a folder of its own (rule: an output folder is never an input folder, nor the folder "
            "of an input file)")
    assert refusal(src / "sub", "run", inputs=[src], option="--x") == (
        f"--x T/in/sub: is inside the folder T/in that this command reads (T/in); {rule}")
    assert refusal(src, "run", inputs=[src]) == f"--out T/in: is the folder T/in that this command reads (T/in); {rule}"
    runs = tmp_path / "r"
    runs.mkdir()
    (runs / "results.parquet").write_bytes(b"ab")
    assert refusal(runs, "hiddenbench run") == (
        "--out T/r: holds a run (results.parquet (2 bytes)); a hiddenbench run would mix with it in one folder "
        "(rule: one kind of run per folder; choose another --out)")
    replace = ("Choose another --out, or add --overwrite to replace it (rule: no command destroys existing work "
               "without an explicit flag)")
    assert refusal(runs, "run", same_work=lambda f: ["seed 1 vs 2", "model a vs b"]) == (
        f"--out T/r: holds a finished run (results.parquet (2 bytes)) that this command would replace: seed 1 vs 2; "
        f"model a vs b. {replace}")
    assert refusal(runs, "run", same_work=lambda f: ["x" * 700]) == (
        f"--out T/r: holds a finished run (results.parquet (2 bytes)) that this command would replace: {'x' * 600}. "
        f"{replace}")
    check_output_folder(runs, "run", same_work=lambda f: ["d"], overwrite=True)     # allowed with --overwrite
    check_output_folder(runs, "run", same_work=lambda f: [])                        # the same work: no refusal
    check_output_folder(runs, "run")                                                # no comparison asked


def test_a_lock_names_the_command_by_its_first_eight_words_with_secrets_masked(tmp_path, monkeypatch):
    import json
    import sys

    from crossprofile_lib.safety.outputs import acquire, release
    monkeypatch.setattr(sys, "argv", ["/usr/bin/crossprofile", "run", "--api-key", "sekrit123", "--out", "x", "a",
                                      "b", "c", "d"])
    lock = acquire(tmp_path)
    try:
        assert json.loads(lock.read_text())["command"] == f"crossprofile run --api-key {MASK} --out x a b"
    finally:
        release(lock)


def test_a_lock_refusal_is_whole_for_garbage_and_for_another_host(tmp_path):
    import json

    from crossprofile_lib.safety.outputs import LOCK_NAME, FolderLocked, acquire
    lock = tmp_path / LOCK_NAME
    lock.write_text("garbage")
    with pytest.raises(FolderLocked) as e:
        acquire(tmp_path)
    assert str(e.value) == (f"{tmp_path}: output folder is locked by {lock} (unreadable lock file); if no run is "
                            f"using this folder, delete {lock}")
    lock.write_text(json.dumps(_lock_info(2 ** 22 + 12345, host="elsewhere.invalid",
                                          command="crossprofile run --token abc")))
    with pytest.raises(FolderLocked) as e:
        acquire(tmp_path)
    assert str(e.value) == (
        f"{tmp_path}: output folder is in use by another run: pid 4206649 on host elsewhere.invalid since "
        f"2099-01-01T00:00:00Z (crossprofile run --token {MASK}) (rule: one run per output folder; wait for it or "
        f"choose another --out); it is on another host, so it cannot be checked here: if that run is over, delete "
        f"{lock}")
    assert lock.exists()


def test_a_dead_holders_lock_taken_over_says_so_whole(tmp_path, capsys):
    import json
    import socket

    from crossprofile_lib.safety.outputs import LOCK_NAME, acquire, release
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": 2 ** 22 + 12345, "host": socket.gethostname()}))
    release(acquire(tmp_path))
    assert capsys.readouterr().err == (f"notice: {tmp_path}: took over a stale lock left by pid 4206649 on host "
                                       f"{socket.gethostname()} since ? (that process no longer holds it)\n")


@pytest.mark.parametrize("url, shown", [
    ("http://h/p?V=1&key=2", f"http://h/p?V=1&key={MASK}"),                  # a harmless name in any case, kept as is
    ("http://h/p?model=a b&c=", f"http://h/p?model=a%20b&{MASK}"),           # kept values re-quoted; a blank: all masked
    ("http://h/p?Model=a/b&token=t", f"http://h/p?Model=a%2Fb&token={MASK}"),
    ("http://h/p?sk-abcdefghij12=1&v=2", f"http://h/p?{MASK}&v=2"),          # a key-looking name: nothing of it kept
    ("http://h/p?&&", f"http://h/p?{MASK}"),                                # no pairs at all
    ("http://h/p?=", f"http://h/p?{MASK}"),
    ("http://h/p?key", f"http://h/p?{MASK}"),
    ("http://h/p?v=1&model=x#region=eu", "http://h/p?v=1&model=x#region=eu"),  # all harmless: byte for byte
])
def test_query_pairs_keep_only_harmless_settings(url, shown):
    assert redact_url(url) == shown


@pytest.mark.parametrize("url, secrets", [
    (None, []),
    ("http://[::1", []),                                                     # unparsable: nothing to take
    (["http://a:pw1@h/", ("http://h/?key=k1&v=2",)], ["pw1", "k1"]),         # nested lists and tuples, in order
    ("http://us@h/", ["us"]),
    ("http://:pw2@h/", ["pw2"]),
    ("http://u:p@h:bad/", ["p"]),                                            # a bad port still gives the password
    ("http://h/?model=sk-abcdefghij12&region=eu&x=", ["sk-abcdefghij12"]),
    ("http://h/?a=1#model=m&token=t", ["1", "t"]),
])
def test_url_secrets_are_the_password_user_key_and_unharmless_values(url, secrets):
    assert url_secrets(url) == secrets


def test_a_command_line_is_redacted_word_by_word_whole():
    argv = ["run", "--api-key", "k1k1k1k1", "--model", "m", "--token=abcd", "api_key=zz9", "--base-url",
            "http://u:pw@h/v1?key=x", "note=see sk-abcdefghij12", "--key"]
    assert redact_argv(argv) == ["run", "--api-key", MASK, "--model", "m", f"--token={MASK}", f"api_key={MASK}",
                                 "--base-url", f"http://{MASK}@h/v1?key={MASK}", f"note=see {MASK}", "--key"]


def test_the_secrets_a_command_line_hands_over_in_order_four_characters_or_more():
    from crossprofile_lib.safety.redact import argv_secrets
    argv = ["run", "--api-key", "k1k1k1k1", "--model", "m", "--token=abcd", "api_key=zz9zz", "--base-url",
            "http://u:pw99@h/v1?key=xyzw", "--request-field", '{"token": "tttt1"}', "x=ab", "--password"]
    assert argv_secrets(argv) == ["k1k1k1k1", "abcd", "zz9zz", "pw99", "xyzw", "tttt1"]


def test_option_values_are_redacted_by_name_then_by_shape():
    from crossprofile_lib.safety.redact import redact_options
    assert redact_value("opts", {"api_key": "a", "model": "m", "nested": ["Bearer abcdefgh", None]}) == {
        "api_key": MASK, "model": "m", "nested": [f"Bearer {MASK}", None]}
    assert (redact_value("token", ""), redact_value("token", None), redact_value("token", 0)) == ("", None, MASK)
    assert redact_options(None) == {} and redact_options({"url": "http://u:p@h/"}) == {"url": f"http://{MASK}@h/"}


def test_free_text_loses_urls_secret_words_keys_and_given_secrets_whole():
    text = ("see http://u:pw'q9@h/v1?key=abc and token=xyz, password=***x; --api-key=kk and "
            "hf_abcdefghijklmnop12")
    assert redact_text(text, secrets=("pw'q9",)) == (
        f"see http://{MASK}@h/v1?key={MASK} and token={MASK}, password=***x; --api-key={MASK} and {MASK}")
    assert redact_text("model=gpt temperature=1 --seed=3") == "model=gpt temperature=1 --seed=3"
    assert redact_text("abcd abc", secrets=("abcd", "abc", "")) == f"{MASK} abc"
    assert redact_text("key=") == "key="


def test_an_empty_user_name_before_the_at_sign_is_no_secret():
    assert url_secrets("http://@h/") == [] and url_secrets("http://:@h/") == []
    assert url_secrets("http://us@h/?k") == ["us"]


@pytest.mark.parametrize("kind", ["run", "book"])
def test_an_output_folder_with_other_files_is_refused_naming_the_option_and_kind(tmp_path, kind):
    from crossprofile_lib.safety.outputs import WouldDestroy, check_output_folder
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(WouldDestroy) as e:
        check_output_folder(tmp_path, kind, option="--x")
    assert str(e.value) == (
        f"--x {tmp_path}: holds 1 file(s) or folder(s) that are not a {kind}'s (notes.txt); a {kind} would mix with "
        f"them. Choose a new or empty folder, or add --allow-other-files to write there anyway (rule: an output "
        f"folder holds one output and nothing else)")
    check_output_folder(tmp_path, kind, option="--x", allow_other_files=True)


def test_redact_text_masks_an_unknown_url_password_holding_a_quote():
    # RFC 3986 allows ' in userinfo; the URL match stops at the quote, so the userinfo is masked up to its @ first
    from crossprofile_lib.safety.redact import redact_text
    assert redact_text("see http://u:pw'q9@h/v1 now") == "see http://***@h/v1 now"
    assert redact_text("GET https://bob:o'neil@api.example:8443/v1?x=1") == "GET https://***@api.example:8443/v1?x=***"
    # near misses: an @ after the host's path, or after a space, is no userinfo
    assert redact_text("http://host/path and a@b") == "http://host/path and a@b"
    assert redact_text("ftp://h/x@y and http://host a@b.c") == "ftp://h/x@y and http://host a@b.c"


# --- acquire, explored whole (issue 55: 109 of 123 mutants killed before) ---------------------------------------

def test_a_lock_shortens_only_the_program_name_and_dates_itself_in_utc(tmp_path, monkeypatch):
    import json
    import sys
    import time

    from crossprofile_lib.safety.outputs import acquire, release
    monkeypatch.setattr(sys, "argv", ["/usr/bin/crossprofile", "run", "--out", "/srv/runs/a", "t/x.yaml"])
    fixed = time.struct_time((2031, 2, 3, 4, 5, 6, 0, 34, 0))
    monkeypatch.setattr(time, "gmtime", lambda *a: fixed)                   # UTC, whatever the local zone
    lock = acquire(tmp_path)
    try:
        info = json.loads(lock.read_text())
        assert info["command"] == "crossprofile run --out /srv/runs/a t/x.yaml"   # later paths kept whole
        assert info["started"] == "2031-02-03T04:05:06Z"
    finally:
        release(lock)


def test_a_lock_that_keeps_changing_hands_is_refused_after_three_tries(tmp_path, monkeypatch):
    import json
    import os

    from crossprofile_lib.safety import outputs
    lock = tmp_path / outputs.LOCK_NAME
    lock.write_text(json.dumps(_lock_info(2 ** 22 + 12345)))                # a dead holder's lock ...
    tries = []
    monkeypatch.setattr(outputs, "_try_create", lambda lk, info: tries.append(lk) and False)

    def taken_first(src, dst):                                              # ... that another run takes over first
        raise FileNotFoundError(2, "gone", str(src))
    monkeypatch.setattr(os, "replace", taken_first)
    with pytest.raises(outputs.FolderLocked) as e:
        outputs.acquire(tmp_path)
    assert str(e.value) == f"{tmp_path}: could not take the lock {lock} (it kept changing hands)"
    assert tries == [lock, lock, lock]


def test_a_lock_being_written_is_read_again_after_a_short_wait_and_a_readable_one_at_once(tmp_path, monkeypatch):
    import json
    import os
    import time

    from crossprofile_lib.safety import outputs
    lock = tmp_path / outputs.LOCK_NAME
    lock.write_text("")                                                     # created, not yet written
    holder = _lock_info(os.getppid())
    slept = []

    def sleep(s):                                                           # the other run writes while we wait
        slept.append(s)
        lock.write_text(json.dumps(holder))
    monkeypatch.setattr(time, "sleep", sleep)
    with pytest.raises(outputs.FolderLocked, match=f"in use by another run: pid {os.getppid()} on host "):
        outputs.acquire(tmp_path)
    assert len(slept) == 1 and 0 < slept[0] <= 0.1, slept                   # one short wait
    slept.clear()
    with pytest.raises(outputs.FolderLocked, match=f"in use by another run: pid {os.getppid()} on host "):
        outputs.acquire(tmp_path)
    assert slept == []                                                      # a readable lock: no wait


def test_a_lock_this_process_holds_is_not_taken_over_by_a_second_acquire(tmp_path, capsys):
    import json
    import os

    from crossprofile_lib.safety import outputs
    lock = outputs.acquire(tmp_path)
    key = str(lock.resolve())
    outputs._HELD.add(key)
    try:
        with pytest.raises(outputs.FolderLocked, match=f"in use by another run: pid {os.getpid()} on host "):
            outputs.acquire(tmp_path)
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        assert "took over" not in capsys.readouterr().err
    finally:
        outputs._HELD.discard(key)
        outputs.release(lock)
    assert not lock.exists()


def test_a_third_runs_lock_in_place_of_the_one_moved_away_by_mistake_wins(tmp_path, monkeypatch):
    """A dead holder's lock is renamed away, but another run had taken it over (so the fresh lock moved) and a third
    run has created a new lock meanwhile: the fresh one cannot go back (no error), and the third run holds the
    folder."""
    import json
    import os

    from crossprofile_lib.safety import outputs
    lock = tmp_path / outputs.LOCK_NAME
    dead = 2 ** 22 + 12345
    lock.write_text(json.dumps(_lock_info(dead)))
    third = _lock_info(os.getppid(), command="crossprofile run --out third")
    real_alive, real_read = outputs._pid_alive, outputs._read_lock

    def alive(pid):
        if pid == dead:
            lock.write_text(json.dumps(_lock_info(dead + 1)))               # another run's takeover
            return False
        return real_alive(pid)

    def read(p):
        info = real_read(p)
        if p.name.startswith(f"{outputs.LOCK_NAME}.stale-") and not lock.exists():
            lock.write_text(json.dumps(third))                              # the third run's new lock
        return info
    monkeypatch.setattr(outputs, "_pid_alive", alive)
    monkeypatch.setattr(outputs, "_read_lock", read)
    with pytest.raises(outputs.FolderLocked, match=r"in use by another run: .*\(crossprofile run --out third\)"):
        outputs.acquire(tmp_path)
    assert json.loads(lock.read_text()) == third
    assert [p.name for p in tmp_path.iterdir()] == [outputs.LOCK_NAME]      # the moved copy removed


@pytest.mark.parametrize("moved_fresh", [False, True])
def test_a_moved_away_lock_copy_already_gone_is_no_error(tmp_path, monkeypatch, capsys, moved_fresh):
    import json

    from crossprofile_lib.safety import outputs
    lock = tmp_path / outputs.LOCK_NAME
    dead = 2 ** 22 + 12345
    lock.write_text(json.dumps(_lock_info(dead)))
    real_read = outputs._read_lock

    def read(p):
        info = real_read(p)
        if p.name.startswith(f"{outputs.LOCK_NAME}.stale-"):
            p.unlink()                                                      # removed by someone else meanwhile
            return {"pid": dead + 1} if moved_fresh else info
        return info
    monkeypatch.setattr(outputs, "_read_lock", read)
    got = outputs.acquire(tmp_path)
    try:
        assert got == lock and json.loads(lock.read_text())["pid"] != dead
        assert ("took over a stale lock" in capsys.readouterr().err) is not moved_fresh
    finally:
        outputs.release(got)


# --- describe_folder, explored whole (issue 55: 61 of 70 mutants killed before) ---------------------------------

def test_a_header_too_deep_to_parse_is_skipped_for_the_next_one(tmp_path):
    from crossprofile_lib.safety.outputs import describe_folder
    (tmp_path / "run.json").write_text("[" * 100_000 + "]" * 100_000)   # JSON, but past the recursion limit
    (tmp_path / "hiddenbench_run.json").write_text('{"rows": 7, "backend": "hb", "model": "m", "created": "c"}')
    assert describe_folder(tmp_path) == ("run.json (200 kB), hiddenbench_run.json (58 bytes): 7 decisions by hb (m), "
                                         "created c")


def test_only_a_headers_first_four_mebibytes_are_read(tmp_path):
    from crossprofile_lib.safety.outputs import describe_folder
    tail = b'{"rows": 2, "backend": "b", "model": "m", "created": "c"}'
    (tmp_path / "run.json").write_bytes(b" " * (4 << 20) + tail)        # the header begins past 4 MiB: not read
    assert describe_folder(tmp_path) == "run.json (4.2 MB)"
    (tmp_path / "run.json").write_bytes(b" " * ((4 << 20) - len(tail)) + tail)   # ends at 4 MiB: read
    assert describe_folder(tmp_path) == "run.json (4.2 MB): 2 decisions by b (m), created c"


def test_a_header_without_a_backend_shows_a_question_mark_for_it(tmp_path):
    from crossprofile_lib.safety.outputs import describe_folder
    (tmp_path / "run.json").write_text('{"rows": 3}')
    assert describe_folder(tmp_path) == "run.json (11 bytes): 3 decisions by ? (?), created ?"


# --- option_number, explored whole (issue 55: three of the seed-60 survivors) ------------------------------------

@pytest.mark.parametrize("value, kw, message", [
    ("1", {}, "b: option o='1': must be a number, not str"),
    (True, {}, "b: option o=True: must be a number, not bool"),
    (None, {"integer": True}, "b: option o=None: must be an integer, not NoneType"),
    (8.5, {"integer": True}, "b: option o=8.5: must be an integer, not float"),
    (float("nan"), {}, "b: option o=nan: must be a finite number"),
    (float("inf"), {}, "b: option o=inf: must be a finite number"),
    (float("nan"), {"allow_inf": True}, "b: option o=nan: must be a finite number or inf"),
    (-0.5, {"low": 0}, "b: option o=-0.5: must be at least 0"),
    (0, {"low": 0, "above": True}, "b: option o=0: must be above 0"),
    (0, {"integer": True, "low": 1}, "b: option o=0: must be at least 1"),
    (2.5, {"low": 0.25, "high": 1.5}, "b: option o=2.5: must be at most 1.5"),
    (2000, {"integer": True, "high": 1024}, "b: option o=2000: must be at most 1024"),
])
def test_an_option_number_refusal_names_the_owner_option_value_and_rule(value, kw, message):
    from crossprofile_lib.safety.inputs import option_number
    with pytest.raises(ValueError) as e:
        option_number("b", "o", value, **kw)
    assert str(e.value) == message


def test_an_option_number_is_an_int_when_integral_and_a_float_otherwise():
    from crossprofile_lib.safety.inputs import option_number
    for value, kw, want in [(8.0, {"integer": True, "low": 1}, 8), (3, {}, 3.0), (0.25, {"low": 0.25}, 0.25),
                            (1.5, {"high": 1.5}, 1.5), (float("inf"), {"allow_inf": True, "low": 0}, float("inf")),
                            (1e-9, {"low": 0, "above": True}, 1e-9)]:
        got = option_number("b", "o", value, **kw)
        assert got == want and type(got) is type(want), (value, kw, got)


# --- _why, explored whole (issue 55: three of the seed-60 survivors) ---------------------------------------------

@pytest.mark.parametrize("err, why", [
    (OSError(errno.ENOSPC, "No space left on device"), "No space left on device (ENOSPC); the disk is full: free some space "
                                             "and rerun"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), "Disk quota exceeded (EDQUOT); the disk quota is exhausted: free some "
                                          "space and rerun"),
    (OSError(errno.EFBIG, "File too large"), "File too large (EFBIG); the file is larger than this process may write "
                                    "(file-size limit)"),
    (OSError(errno.EROFS, "Read-only file system"), "Read-only file system (EROFS); the file system is read-only"),
    (OSError(errno.EACCES, "Permission denied"), "Permission denied (EACCES); permission denied"),
    (OSError(errno.EPERM, "Operation not permitted"), "Operation not permitted (EPERM); permission denied"),
    (OSError(errno.ENOENT, "No such file or directory"), "No such file or directory (ENOENT)"),
    (OSError("no errno at all"), "no errno at all"),
])
def test_a_write_failure_is_named_by_its_errno_with_what_to_do(err, why):
    from crossprofile_lib.safety.outputs import _why
    assert _why(err) == why


# --- clean_leftovers and check_writable, explored whole (issue 55: two of the seed-60 survivors) ----------------

def test_a_leftover_notice_lists_up_to_three_names_and_marks_more_with_dots(tmp_path, capsys):
    from crossprofile_lib.safety.outputs import clean_leftovers
    for k in "cab":
        (tmp_path / f".run.json.{k}.tmp").write_text("x")
    (tmp_path / ".results.parquet.z.tmp").write_text("x")
    assert sorted(clean_leftovers(tmp_path, ["run.json"])) == [".run.json.a.tmp", ".run.json.b.tmp", ".run.json.c.tmp"]
    assert capsys.readouterr().err == (f"notice: {tmp_path}: removed 3 temporary file(s) an interrupted write left "
                                       f"behind (.run.json.a.tmp, .run.json.b.tmp, .run.json.c.tmp)\n")
    for k in "dcab":
        (tmp_path / f".run.json.{k}.tmp").write_text("x")
    assert len(clean_leftovers(tmp_path, ["run.json"])) == 4
    assert capsys.readouterr().err == (f"notice: {tmp_path}: removed 4 temporary file(s) an interrupted write left "
                                       f"behind (.run.json.a.tmp, .run.json.b.tmp, .run.json.c.tmp, ...)\n")
    assert clean_leftovers(tmp_path, ["results.parquet"]) == [".results.parquet.z.tmp"]
    assert capsys.readouterr().err.endswith("removed 1 temporary file(s) an interrupted write left behind "
                                            "(.results.parquet.z.tmp)\n")


def test_a_writable_check_creates_missing_parent_folders_and_refuses_a_file(tmp_path):
    from crossprofile_lib.safety.outputs import check_writable
    deep = tmp_path / "a" / "b" / "c"
    check_writable(deep)
    assert deep.is_dir() and list(deep.iterdir()) == []                    # the probe file is gone
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError) as e:
        check_writable(tmp_path / "f")
    assert str(e.value) == f"--out {tmp_path / 'f'}: exists and is not a folder"
    with pytest.raises(ValueError) as e:
        check_writable(tmp_path / "f" / "sub")
    assert str(e.value) == f"--out {tmp_path / 'f' / 'sub'}: cannot write there (ENOTDIR: Not a directory)"


def test_a_folder_where_no_file_can_be_created_is_refused_naming_the_errno(tmp_path, monkeypatch):
    import tempfile

    from crossprofile_lib.safety.outputs import check_writable
    real = tempfile.mkstemp
    failing = {tmp_path / "ro": OSError(errno.EROFS, "Read-only file system"), tmp_path / "odd": OSError(9999, "odd")}

    def mkstemp(*a, dir=None, **k):                                         # noqa: A002 (mkstemp's own name)
        if dir is not None and Path(dir) in failing:                       # root passes os.access checks; this fails
            raise failing[Path(dir)]
        return real(*a, dir=dir, **k)
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    with pytest.raises(ValueError) as e:
        check_writable(tmp_path / "ro")
    assert str(e.value) == f"--out {tmp_path / 'ro'}: cannot write there (EROFS: Read-only file system)"
    with pytest.raises(ValueError) as e:
        check_writable(tmp_path / "odd")
    assert str(e.value) == f"--out {tmp_path / 'odd'}: cannot write there (9999: odd)"   # an errno without a name
    check_writable(tmp_path / "fine")


def test_a_leftover_of_a_long_name_is_found_by_its_first_200_characters_and_one_not_removable_is_kept(
        tmp_path, monkeypatch, capsys):
    import pathlib

    from crossprofile_lib.safety.outputs import clean_leftovers
    long = "r" * 230 + ".parquet"                                          # atomic_write cuts the prefix at 200
    left = f".{'r' * 200}.k1.tmp"
    (tmp_path / left).write_text("x")
    assert clean_leftovers(tmp_path, [long]) == [left]
    capsys.readouterr()
    for k in "ab":
        (tmp_path / f".run.json.{k}.tmp").write_text("x")
    real_unlink = pathlib.Path.unlink

    def unlink(self, *a, **k):
        if self.name == ".run.json.a.tmp":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_unlink(self, *a, **k)
    monkeypatch.setattr(pathlib.Path, "unlink", unlink)
    assert clean_leftovers(tmp_path, ["run.json"]) == [".run.json.b.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".run.json.a.tmp"]
    assert capsys.readouterr().err.endswith("removed 1 temporary file(s) an interrupted write left behind "
                                            "(.run.json.b.tmp)\n")


def test_a_yaml_value_error_is_shown_on_one_line_cut_at_200_characters(monkeypatch):
    from crossprofile_lib.safety.inputs import StrictLoader, parse_yaml
    from crossprofile_lib.safety.text_input import InputError

    def fail(self):
        raise ValueError("ab  cd\n" * 100)                                 # a long reason over many lines
    monkeypatch.setattr(StrictLoader, "get_single_data", fail)
    with pytest.raises(InputError) as e:
        parse_yaml("t.yaml", "a: 1\n", InputError)
    assert (e.value.path, e.value.field, e.value.rule) == ("t.yaml", "<file>", "schema (YAML value)")
    assert e.value.detail == "a value cannot be read: " + "ab cd " * 33 + "ab"


def test_a_json_value_error_is_shown_on_one_line_cut_at_200_characters(monkeypatch):
    from crossprofile_lib.safety import text_input

    def fail(s):
        raise ValueError("ab  cd\n" * 100)                                 # a long reason over many lines
    monkeypatch.setattr(text_input, "_parse_float", fail)
    with pytest.raises(text_input.InputError) as e:
        text_input.parse_json("f.json", "[1.5]")
    assert (e.value.path, e.value.field, e.value.rule) == ("f.json", "<file>", "json (syntax)")
    assert e.value.detail == "not valid JSON: " + "ab cd " * 33 + "ab"


# --- StrictLoader's key checks, explored whole (issue 55: 97 of 105 mutants of _check_event/_check_keys killed) --

@pytest.mark.parametrize("text, field, rule, detail", [
    ("facts:\n  - {<<: {x: 1}, y: 2}\n", "facts[0].<<", "yaml (merge key)",
     "merge keys (<<) are not allowed (line 2, column 6)"),
    ("a:\n  ? [1, 2]\n  : x\n", "a.a sequence", "yaml (key type)",
     "mapping key 'a sequence' is not a plain string (line 2, column 5)"),
    ("? {k: v}\n: x\n", "a mapping", "yaml (key type)", "mapping key 'a mapping' is not a plain string (line 1, column 3)"),
    ("a: {1: b}\n", "a.1", "yaml (key type)", "mapping key '1' is not a plain string (line 1, column 5)"),
])
def test_a_merge_key_or_a_key_that_is_no_plain_string_is_refused_by_field_and_place(text, field, rule, detail):
    from crossprofile_lib.safety.inputs import parse_yaml
    from crossprofile_lib.safety.text_input import InputError
    with pytest.raises(InputError) as e:
        parse_yaml("t.yaml", text, InputError)
    assert (e.value.path, e.value.field, e.value.rule, e.value.detail) == ("t.yaml", field, rule, detail)


def test_a_plain_dict_from_elsewhere_is_checked_for_characters_and_has_no_duplicates():
    from crossprofile_lib.safety.text_input import InputError, check_json_value
    assert check_json_value({"k": ["ok", {"n": 1}]}, "p.json") is None   # a dict not decoded by parse_json
    with pytest.raises(InputError) as e:
        check_json_value({"k": [{"n": "a\x07b"}]}, "p.json", where=("rows", 3))
    assert (e.value.path, e.value.field, e.value.rule, e.value.detail) == (
        "p.json", "rows[3].k[0].n", "json (control characters)",
        "character U+0007 (unnamed, category Cc) in the value: control, invisible and unassigned characters are not "
        "allowed")


def test_a_query_of_only_harmless_settings_is_kept_byte_for_byte_in_any_case():
    # re-quoted, 'a+b' would read 'a%20b': a clean URL (a cache key) must not change at all
    assert redact_url("https://h/p?model=a+b&version=1") == "https://h/p?model=a+b&version=1"
    assert redact_url("https://h/p?Model=a+b&VERSION=2") == "https://h/p?Model=a+b&VERSION=2"
    # one secret: every pair is rebuilt, the harmless ones re-quoted
    assert redact_url("https://h/p?Model=a+b&token=zz") == "https://h/p?Model=a%20b&token=***"


def test_a_lock_holders_command_is_shown_cut_at_300_characters():
    from crossprofile_lib.safety.outputs import _describe
    info = {"pid": 7, "host": "box", "started": "s", "command": "run " + "abcd " * 100}
    assert _describe(info) == "pid 7 on host box since s (run " + "abcd " * 59 + "a)"   # 4 + 295 + 1 = 300
    assert _describe({"command": ""}) == "pid ? on host ? since ?"


# --- template_paths, explored whole (issue 55: 31 of 37 mutants killed before) ----------------------------------

def test_template_paths_take_a_file_as_named_and_walk_a_folder_a_glob_matches(tmp_path, monkeypatch):
    from crossprofile_lib.safety.inputs import template_paths
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t" / "sub").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    for n in ("t/b.yaml", "t/a.yaml", "t/domains.yaml", "t/sub/c.yaml", "t[1].yaml"):
        (tmp_path / n).write_text("x: 1\n")
    assert template_paths("t[1].yaml") == [Path("t[1].yaml")]               # an existing name is no glob
    assert template_paths("t*") == [Path("t/a.yaml"), Path("t/b.yaml"), Path("t/sub/c.yaml"), Path("t[1].yaml")]
    with pytest.raises(FileNotFoundError) as e:
        template_paths("empty")
    assert str(e.value) == "folder 'empty' holds no template file (*.yaml)"


def test_a_glob_that_cannot_be_searched_is_refused_with_why(tmp_path, monkeypatch):
    import pathlib

    from crossprofile_lib.safety.inputs import template_paths
    monkeypatch.chdir(tmp_path)

    def glob(self, pattern):
        raise PermissionError(errno.EACCES, "Permission denied", "x")
    monkeypatch.setattr(pathlib.Path, "glob", glob)
    with pytest.raises(FileNotFoundError) as e:
        template_paths("x/*.yaml")
    assert str(e.value) == "no template file matches 'x/*.yaml' ([Errno 13] Permission denied: 'x')"


# --- other_files / check_other_files, explored whole (issue 55: 47 of 53 mutants killed before) -----------------

def test_other_files_are_what_a_kind_would_not_have_written(tmp_path):
    from crossprofile_lib.safety.outputs import WouldDestroy, check_other_files, other_files
    for n in ("hiddenbench_run.json", "hiddenbench_x.parquet", "hiddenbench_x.json", "notes.parquet", "results.parquet",
              ".lock"):
        (tmp_path / n).write_text("x")
    assert other_files(tmp_path, "hiddenbench run") == ["hiddenbench_x.json", "notes.parquet", "results.parquet"]
    assert other_files(tmp_path, "run") == ["hiddenbench_run.json", "hiddenbench_x.json", "hiddenbench_x.parquet",
                                            "notes.parquet"]
    assert other_files(tmp_path, "something else") == ["hiddenbench_run.json", "hiddenbench_x.json",
                                                       "hiddenbench_x.parquet", "notes.parquet", "results.parquet"]
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.parquet").write_text("x")
    (run / "run.json").write_text("{}")
    check_other_files(run, "run", allowed=False)                            # a run's own files: no refusal
    for k in range(4):
        (run / f"n{k}.txt").write_text("x")
    with pytest.raises(WouldDestroy, match=r"holds 4 file\(s\) or folder\(s\) that are not a run's \(n0.txt, n1.txt, "
                                           r"n2.txt, n3.txt\); a run"):
        check_other_files(run, "run", allowed=False)


@pytest.mark.parametrize("n, shown", [(5, "a0, a1, a2, a3, a4"), (6, "a0, a1, a2, a3, a4 and 1 more"),
                                      (7, "a0, a1, a2, a3, a4 and 2 more")])
def test_a_refusal_names_five_other_files_and_counts_the_rest(tmp_path, n, shown):
    from crossprofile_lib.safety.outputs import WouldDestroy, check_other_files
    for k in range(n):
        (tmp_path / f"a{k}").write_text("x")
    with pytest.raises(WouldDestroy) as e:
        check_other_files(tmp_path, "run", allowed=False)
    assert f": holds {n} file(s) or folder(s) that are not a run's ({shown}); a run would mix" in str(e.value)


# --- _try_create, explored whole (issue 55: 21 of 29 mutants killed before) --------------------------------------

def test_a_lock_file_is_readable_by_all_and_writable_by_its_owner(tmp_path):
    import os

    from crossprofile_lib.safety.outputs import _try_create
    old = os.umask(0o022)
    try:
        assert _try_create(tmp_path / "l", {"pid": 1}) is True
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "l").st_mode & 0o777 == 0o644
    assert (tmp_path / "l").read_text() == '{"pid": 1}\n'
    assert _try_create(tmp_path / "l", {"pid": 2}) is False                # there already: not ours


def test_a_lock_that_cannot_be_created_or_written_is_refused_naming_it_and_why(tmp_path, monkeypatch):
    import os

    from crossprofile_lib.safety.outputs import _try_create
    lock = tmp_path / "missing" / "l"
    with pytest.raises(ValueError) as e:
        _try_create(lock, {})
    assert str(e.value) == (f"--out {lock.parent}: cannot create the lock file {lock} (No such file or directory "
                            f"(ENOENT))")
    lock = tmp_path / "l"
    removed = []

    def fsync(fd):
        if removed:
            lock.unlink()                                                   # and someone removed it meanwhile
        removed.append(fd)
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", fsync)
    for _ in range(2):
        with pytest.raises(ValueError) as e:
            _try_create(lock, {"pid": 1})
        assert str(e.value) == (f"--out {tmp_path}: cannot write the lock file {lock} (No space left on device "
                                f"(ENOSPC); the disk is full: free some space and rerun)")
        assert not lock.exists()                                            # no empty lock left to block a rerun


# --- path_problem and json_depth, explored whole (issue 55: 48 of 58 mutants killed before) ---------------------

def test_a_path_problem_names_each_kind_of_name_no_file_can_have():
    from crossprofile_lib.safety.text_input import path_problem
    assert path_problem("a\ud800b") == "the name cannot be encoded for this file system"   # a lone surrogate
    exact = "/" + ("a" * 99 + "/") * 40
    exact += "b" * (4096 - len(exact))                                     # 4096 bytes: not over PATH_MAX ...
    assert path_problem(exact) == "the name is too long for this file system"   # ... but the kernel's limit
    assert path_problem(exact + "c") == "the path is 4097 bytes long (at most 4096)"
    assert path_problem("x/" + "0123456789" * 30) == (
        "a name in the path is 300 bytes long (file systems allow at most 255 bytes per name): "
        "'0123456789012345678901234567890123456789...'")


def test_json_depth_counts_the_deepest_nesting_and_ignores_brackets_in_strings():
    from crossprofile_lib.safety.text_input import json_depth
    assert json_depth("[[],[[]]]") == 3                                     # deeper after a closed one
    assert json_depth('{"a": [], "b": [[1]], "s": "]]"}') == 3
    assert json_depth('["[[[[", {"k": "}}"}]') == 2
    assert json_depth("1") == 0


def test_a_yaml_value_with_a_control_character_is_refused_by_field_place_and_rule():
    from crossprofile_lib.safety.inputs import parse_yaml
    from crossprofile_lib.safety.text_input import InputError
    with pytest.raises(InputError) as e:
        parse_yaml("t.yaml", 'facts:\n  - text: "a\\x07b"\n', InputError)
    assert (e.value.field, e.value.rule, e.value.detail) == (
        "facts[0].text", "yaml (control characters)",
        "character U+0007 (unnamed, category Cc) in the value (line 2, column 11): control, invisible and unassigned "
        "characters are not allowed")


def test_secrets_on_a_command_line_shorter_than_four_characters_are_not_collected():
    from crossprofile_lib.safety.redact import argv_secrets
    assert argv_secrets(["run", "--api-key", "abc"]) == [] and argv_secrets(["run", "--api-key=xy"]) == []
    assert argv_secrets(["run", "--api-key", "abcd"]) == ["abcd"] and argv_secrets(["--api-key", ""]) == []


def test_a_yaml_file_that_is_a_folder_is_refused_as_a_file_by_default(tmp_path):
    from crossprofile_lib.safety.inputs import InputError, load_yaml
    with pytest.raises(InputError) as e:
        load_yaml(tmp_path, 1000)
    assert str(e.value) == f"{tmp_path}: field '<file>': file (not a regular file): a folder; a file must be a regular file"
