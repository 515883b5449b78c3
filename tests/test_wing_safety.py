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
