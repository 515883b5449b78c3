"""Secrets in URLs: one redaction function, used for every URL that is written or keyed."""

from crossprofile_lib.backends.base import ChatRequest
from crossprofile_lib.backends.cache import call_key
from crossprofile_lib.hiddenbench.run import HBConfig
from crossprofile_lib.run.results import config_record
from crossprofile_lib.safety.redact import (
    MASK,
    is_secret_name,
    redact_argv,
    redact_options,
    redact_text,
    redact_url,
    url_secrets,
)

K = "sk-canary-7f3e"


def test_userinfo_and_secret_query_values_are_masked_and_clean_urls_untouched():
    assert redact_url(f"https://user:{K}@api.example.com/v1") == "https://***@api.example.com/v1"
    assert redact_url(f"https://{K}@api.example.com/v1") == "https://***@api.example.com/v1"
    for name in ("api_key", "key", "token", "access_token", "client_secret", "password", "sig", "apiKey"):
        out = redact_url(f"http://h:8000/v1?{name}={K}&region=eu")
        assert K not in out and "region=eu" in out and f"{name}=***" in out
    for clean in ("http://127.0.0.1:8000/v1", "https://api.deepseek.com", "http://h/v1?region=eu%20west&api-version=2",
                  "https://x.openai.azure.com/openai/deployments/d?api-version=2024-02-01"):
        assert redact_url(clean) == clean  # byte for byte: cache keys of clean URLs never change
    # every other query value is masked whatever its name (Azure Functions pass the key as ?code=)
    for name in ("code", "x", "q", "auth_code", "sv"):
        out = redact_url(f"http://h/v1?{name}={K}&region=eu")
        assert K not in out and out.endswith("region=eu") and f"{name}=***" in out
    assert K not in redact_url(f"http://h/v1?{K}") and K not in redact_url(f"http://h/v1#{K}")
    assert K not in redact_url(f"http://h/v1?region={K}")  # a harmless name with a key-shaped value
    assert redact_url(f"http://u:{K}@[::1/v1?code={K}") == "http://***@[::1/v1?***"  # an unparsable URL
    assert redact_url([f"http://a:{K}@h1/v1", "http://h2/v1"]) == ["http://***@h1/v1", "http://h2/v1"]
    assert redact_url(None) is None


def test_free_text_and_secret_parts():
    url = f"http://me:{K}@h:1/v1?token=abcd1234"
    assert set(url_secrets(url)) == {K, "abcd1234"}
    text = f"APIConnectionError: cannot reach {url}; key {K} rejected"
    out = redact_text(text, url_secrets(url))
    assert K not in out and "abcd1234" not in out and "http://***@h:1/v1?token=***" in out


def test_cache_key_and_hiddenbench_header_never_hold_the_secret():
    r = ChatRequest(({"role": "user", "content": "hi"},))
    k1 = call_key({"provider": "openai", "model": "m", "base_url": f"http://u:{K}@h/v1"}, r, "generate")
    k2 = call_key({"provider": "openai", "model": "m", "base_url": "http://u:other-key@h/v1"}, r, "generate")
    assert k1 == k2  # keyed by the redacted URL: a new key on the same server reuses the cache
    cfg = config_record(HBConfig(backend_options={"base_url": f"http://u:{K}@h/v1", "api_key": K, "concurrency": 4}))
    assert cfg["backend_options"] == {"base_url": "http://***@h/v1", "api_key": "***", "concurrency": 4}


def test_secret_names_are_words_not_substrings():
    for name in ("api_key", "apiKey", "x-api-key", "access_token", "client_secret", "password", "sig", "code",
                 "Authorization", "session_id", "private_key"):
        assert is_secret_name(name), name
    for name in ("max_tokens", "tokenizer", "keyboard", "monkey", "n_ctx", "base_url", "decision_mode", "timeout"):
        assert not is_secret_name(name), name


def test_command_lines_and_options_go_through_one_rule():
    argv = ["crossprofile", "run", "--base-url", f"http://u:{K}@h/v1?code={K}", "--backend-option", f"api_key={K}",
            f"--backend-option=token={K}", "--api-key", K, f"--password={K}", "--tokenizer", "gguf:/m.gguf",
            "--seeds", "0,1", f"sk-{'a' * 20}"]
    out = redact_argv(argv)
    assert not any(K in a or "sk-aaaa" in a for a in out), out
    assert out[:3] == ["crossprofile", "run", "--base-url"] and out[-4:-1] == ["gguf:/m.gguf", "--seeds", "0,1"]
    opts = redact_options({"base_url": f"http://h/v1?code={K}", "api_key": K, "timeout": 5, "chat_template": "chatml",
                           "extra_body": {"token": K, "n": 1}, "urls": [f"http://{K}@a/v1"]})
    assert K not in repr(opts) and opts["timeout"] == 5 and opts["chat_template"] == "chatml"
    assert opts["api_key"] == MASK and opts["extra_body"] == {"token": MASK, "n": 1}


def test_the_shells_working_folder_is_no_secret(monkeypatch, tmp_path):
    """PWD names the current folder, not a password: masked, it hid every path under it in every message (a
    policy file's clash named '***/../mypol/p.py'); a variable whose name says password still is one."""
    from crossprofile_lib.safety import redact
    monkeypatch.setenv("PWD", str(tmp_path))
    monkeypatch.setenv("OLDPWD", str(tmp_path / "before"))
    monkeypatch.setenv("DB_PWD", "hunter2-long-enough")
    msg = f"{tmp_path}/../mypol/p.py: clash; the key was hunter2-long-enough"
    assert redact.redact_text(msg) == f"{tmp_path}/../mypol/p.py: clash; the key was {redact.MASK}"
