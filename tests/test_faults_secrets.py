"""Secrets in URLs: one redaction function, used for every URL that is written or keyed."""

from crossprofile_lib.backends.base import ChatRequest
from crossprofile_lib.backends.cache import call_key
from crossprofile_lib.hiddenbench.run import HBConfig
from crossprofile_lib.run.header import config_record
from crossprofile_lib.safety.redact import redact_text, redact_url, url_secrets

K = "sk-canary-7f3e"


def test_userinfo_and_secret_query_values_are_masked_and_clean_urls_untouched():
    assert redact_url(f"https://user:{K}@api.example.com/v1") == "https://***@api.example.com/v1"
    assert redact_url(f"https://{K}@api.example.com/v1") == "https://***@api.example.com/v1"
    for name in ("api_key", "key", "token", "access_token", "client_secret", "password", "sig", "apiKey"):
        out = redact_url(f"http://h:8000/v1?{name}={K}&region=eu")
        assert K not in out and "region=eu" in out and f"{name}=***" in out
    for clean in ("http://127.0.0.1:8000/v1", "https://api.deepseek.com", "http://h/v1?region=eu%20west&x=1"):
        assert redact_url(clean) == clean  # byte for byte: cache keys of clean URLs never change
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
