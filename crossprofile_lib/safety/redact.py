"""The one redaction rule for every string that can hold a credential (lock file, run headers, the call
cache, results rows, logs, messages, the progress bar); deterministic, so a redacted URL still names its server.

* :func:`redact_url` -- userinfo becomes ``***@``; every query value and the fragment become ``***`` unless the
  parameter is known harmless (:data:`HARMLESS_QUERY`) and the value does not look like a key (a key may
  travel under any name: ``?code=KEY``); an unparsable URL keeps only what precedes its userinfo and query;
* :func:`redact_value` / :func:`redact_options` -- an option's value: ``***`` when its name looks secret
  (:func:`is_secret_name`) or it looks like a key (``sk-...``, ``hf_...``, ``Bearer ...``); URLs redacted;
* :func:`redact_argv` -- a command line: secret-named ``--opt VALUE`` / ``--opt=VALUE``, ``KEY=VALUE`` words, URLs;
* :func:`redact_text` -- free text: every URL and key-looking token, and the given secret strings.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

MASK = "***"
#: Query parameters whose values name a setting, never a credential (kept, unless the value looks like a key).
HARMLESS_QUERY = frozenset({"api-version", "api_version", "apiversion", "version", "v", "region", "location",
                            "format", "model", "deployment", "deployment-id", "lang", "locale", "stream"})
#: Words that mark a name as holding a secret (names are split at ``_ - .`` and camel case).
SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd", "pass", "passphrase",
                          "sig", "signature", "auth", "authorization", "credential", "credentials", "session",
                          "sessionid", "bearer", "cookie", "jwt", "private", "code", "sas", "otp"})
_URL_IN_TEXT = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
#: Tokens that look like keys wherever they appear (OpenAI/DeepSeek ``sk-``, Hugging Face ``hf_``,
#: GitHub, AWS access keys, ``Bearer`` headers, JWTs).
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}|\bhf_[A-Za-z0-9]{16,}|\bgh[pousr]_[A-Za-z0-9]{16,}"
                       r"|\bAKIA[0-9A-Z]{16}\b|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
                       r"|(?<=Bearer )[^\s'\"]+", re.IGNORECASE)
_WORD_SPLIT = re.compile(r"[_\-.\s]+|(?<=[a-z0-9])(?=[A-Z])")
_NAME_VALUE = re.compile(r"^(-{0,2}[A-Za-z_][A-Za-z0-9_.-]*)=(.*)$", re.DOTALL)


def is_secret_name(name: str) -> bool:
    """Whether a name looks like it holds a secret: one of its words (split at ``_ - .`` and camel case)
    is in :data:`SECRET_WORDS` (``apiKey``, ``x-api-key``, ``client_secret``; not ``max_tokens``)."""
    words = [w.lower() for w in _WORD_SPLIT.split(str(name).strip("-")) if w]
    return any(w in SECRET_WORDS for w in words) or str(name).lower().replace("-", "_") in ("api_key", "apikey")


def looks_like_key(value) -> bool:
    """Whether a string looks like a credential by its shape alone (``sk-...``, ``hf_...``, a JWT)."""
    return isinstance(value, str) and bool(_KEY_LIKE.search(value))


def _redact_pairs(q: str) -> str:
    if not q:
        return q
    pairs = parse_qsl(q, keep_blank_values=True)
    if not pairs:
        return MASK
    if all(k.lower() in HARMLESS_QUERY and not looks_like_key(v) for k, v in pairs):
        return q  # untouched, byte for byte (cache keys of clean URLs never change)
    out = []
    for k, v in pairs:
        if k.lower() in HARMLESS_QUERY and not looks_like_key(v):
            out.append(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}")
        else:  # a bare ``?TOKEN`` may be the key itself: nothing of it is kept
            out.append(f"{quote(k, safe='-_.~')}={MASK}" if v and not looks_like_key(k) else MASK)
    return "&".join(out)


def redact_url(url):
    """``url`` redacted (module doc); lists and tuples element-wise; ``None`` passes through."""
    if url is None:
        return None
    if isinstance(url, (list, tuple)):
        return type(url)(redact_url(u) for u in url)
    s = str(url)
    try:
        parts = urlsplit(s)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError:  # unparsable (an invalid IPv6 host, a bad port): hide userinfo, query and fragment
        head = re.split(r"[?#]", s, maxsplit=1)[0]
        scheme, sep, rest = head.partition("://")
        rest = re.sub(r"^[^/]*@", MASK + "@", rest) if sep else re.sub(r"^[^/]*@", MASK + "@", head)
        out = f"{scheme}{sep}{rest}" if sep else rest
        return _KEY_LIKE.sub(MASK, out + (f"?{MASK}" if "?" in s or "#" in s else ""))
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    frag = _redact_pairs(parts.fragment) if "=" in parts.fragment else (MASK if parts.fragment else "")
    return urlunsplit((parts.scheme, netloc, _KEY_LIKE.sub(MASK, parts.path), _redact_pairs(parts.query), frag))


def redact_text(text: str, secrets=()) -> str:
    """``text`` with URLs and key-looking tokens redacted and each of ``secrets`` (4+ characters) masked."""
    known = sorted((s for s in secrets if s and len(s) >= 4), key=len, reverse=True)
    out = str(text)
    for s in known:  # first: a secret holding a quote (RFC 3986 allows ' in userinfo) ends the URL match early
        out = out.replace(s, MASK)
    out = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), out)
    for s in known:
        out = out.replace(s, MASK)
    return _KEY_LIKE.sub(MASK, out)


def redact_value(name: str, value):
    """An option's value redacted (module doc); containers element-wise (dict keys are names)."""
    if is_secret_name(name):
        return MASK if value not in (None, "") else value
    if isinstance(value, dict):
        return {k: redact_value(str(k), v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(name, v) for v in value)
    if isinstance(value, str):
        m = _NAME_VALUE.match(value)
        if m and is_secret_name(m.group(1)):
            return f"{m.group(1)}={MASK}"
        return redact_text(value)
    return value


def redact_options(options: dict | None) -> dict:
    """``options`` (e.g. ``backend_options``) with every value through :func:`redact_value`."""
    return {k: redact_value(str(k), v) for k, v in (options or {}).items()}


def redact_argv(argv) -> list[str]:
    """A command line with every credential masked (module doc)."""
    out: list[str] = []
    mask_next = False
    for a in map(str, argv):
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        m = _NAME_VALUE.match(a)
        if m:
            name, value = m.groups()
            out.append(f"{name}={MASK}" if is_secret_name(name) else f"{name}={redact_value(name, value)}")
        elif a.startswith("-") and "://" not in a and is_secret_name(a):
            out.append(a)
            mask_next = True
        else:
            out.append(redact_text(a))
    return out


def url_secrets(url) -> list[str]:
    """The secret parts of ``url`` (password or key-like user name, query values not known harmless, the
    fragment), to scrub from text that may quote them without the URL (an HTTP library's error)."""
    if url is None:
        return []
    if isinstance(url, (list, tuple)):
        return [s for u in url for s in url_secrets(u)]
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return []
    out = []
    try:
        if parts.password:
            out.append(parts.password)
        elif parts.username and "@" in parts.netloc:  # KEY@host: the user name is the key
            out.append(parts.username)
    except ValueError:
        pass
    for q in (parts.query, parts.fragment):
        out += [v for k, v in parse_qsl(q, keep_blank_values=True)
                if v and (k.lower() not in HARMLESS_QUERY or looks_like_key(v))]
    if parts.fragment and "=" not in parts.fragment:
        out.append(parts.fragment)
    return out
