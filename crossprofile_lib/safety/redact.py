"""The one redaction rule for every string that can hold a credential (lock file, run headers, the call
cache, results rows, logs, messages, the progress bar); deterministic, so a redacted URL still names its server.

* :func:`redact_url` -- userinfo becomes ``***@``; every query value and the fragment become ``***`` unless the
  parameter is known harmless (:data:`HARMLESS_QUERY`) and the value does not look like a key (a key may
  travel under any name: ``?code=KEY``); an unparsable URL keeps only what precedes its userinfo and query;
* :func:`redact_value` / :func:`redact_options` -- an option's value: ``***`` when its name looks secret
  (:func:`is_secret_name`) or it looks like a key (``sk-...``, ``hf_...``, ``Bearer ...``); URLs redacted;
* :func:`redact_argv` -- a command line: secret-named ``--opt VALUE`` / ``--opt=VALUE``, ``KEY=VALUE`` words, URLs;
* :func:`redact_text` -- free text: every URL and key-looking token, every ``secret_name=VALUE`` /
  ``--secret-name=VALUE`` word, every known secret (:func:`known_secrets`) and the given secret strings.

**Known secrets** (:func:`known_secrets`): the values of the environment's key variables (a name with a word such as
``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``: ``CROSSPROFILE_API_KEY``, ``OPENAI_API_KEY``, ``HF_TOKEN``; values of 8+
characters), the secret parts of its ``*_BASE_URL`` variables, and every secret the suite was handed
(:func:`register_secret`: ``--backend-option api_key=...``, a base URL's userinfo and query values, the value of a
secret-named option on the command line). They are masked wherever they appear, whatever their shape: in URL paths
(``http://host/KEY/v1``), request fields, headers, a server's answer (:func:`holds_secret`: never cached), messages
(:class:`RedactingStream` on the console) and every file the suite writes. A URL path segment that looks random
(20+ letters and digits, both) is masked too.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
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
#: a URL's userinfo in text, up to its ``@``: it may hold quotes (RFC 3986 allows ``'`` there), which end a URL match
_USERINFO_IN_TEXT = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/@<>]+@")
#: Tokens that look like keys wherever they appear (OpenAI/DeepSeek ``sk-``, Hugging Face ``hf_``,
#: GitHub, AWS access keys, ``Bearer`` headers, JWTs).
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}|\bhf_[A-Za-z0-9]{16,}|\bgh[pousr]_[A-Za-z0-9]{16,}"
                       r"|\bAKIA[0-9A-Z]{16}\b|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
                       r"|(?<=Bearer )[^\s'\"]+", re.IGNORECASE)
_WORD_SPLIT = re.compile(r"[_\-.\s]+|(?<=[a-z0-9])(?=[A-Z])")
_NAME_VALUE = re.compile(r"^(-{0,2}[A-Za-z_][A-Za-z0-9_.-]*)=(.*)$", re.DOTALL)


#: Words that mark an environment variable as holding a key (narrower than :data:`SECRET_WORDS`: ``SSH_AUTH_SOCK``
#: and ``XDG_SESSION_ID`` hold no key; ``PWD`` and ``OLDPWD`` are :data:`ENV_NOT_SECRET`).
ENV_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd", "passphrase",
                              "credential", "credentials"})
#: Variables whose names hold such a word but never a key: the shell's working folder (``PWD`` is the current
#: directory, not a password; masking it hid every path under it in every message).
ENV_NOT_SECRET = frozenset({"PWD", "OLDPWD"})
#: An environment key shorter than this is not masked in free text (it would mask ordinary words).
ENV_SECRET_MIN = 8
#: A random-looking run in a URL path: 20+ letters and digits with at least one of each.
_RANDOM_RUN = re.compile(r"(?<![A-Za-z0-9])(?=[A-Za-z0-9]*[0-9])(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{20,}(?![A-Za-z0-9])")
_SECRET_WORD_VALUE = re.compile(r"(?<![\w-])(-{0,2}[A-Za-z_][A-Za-z0-9_.-]*)=([^\s'\",;)\]}&#]+)")
_REGISTERED: set[str] = set()


def register_secret(*values) -> None:
    """Add ``values`` (strings of 4+ characters; others ignored) to the secrets masked everywhere in this process."""
    for v in values:
        if isinstance(v, str) and len(v.strip()) >= 4 and v.strip() != "EMPTY":
            _REGISTERED.add(v.strip())


@lru_cache(maxsize=512)
def _env_words(name: str) -> frozenset:
    return frozenset(w.lower() for w in _WORD_SPLIT.split(name) if w)


def _env_secrets() -> set[str]:
    out = set()
    for name, value in os.environ.items():
        words = _env_words(name)
        if name in ENV_NOT_SECRET:
            continue
        if words & ENV_SECRET_WORDS and len(value.strip()) >= ENV_SECRET_MIN:
            out.add(value.strip())
        elif "url" in words and "://" in value:
            out.update(s for s in url_secrets(value) if len(s) >= 4)
    return out


def known_secrets() -> list[str]:
    """Every secret this process knows of (module doc), longest first."""
    return sorted(_REGISTERED | _env_secrets(), key=len, reverse=True)


def holds_secret(text, extra=()) -> bool:
    """Whether ``text`` holds a known secret (or one of ``extra``): e.g. a server's answer echoing the key."""
    if not isinstance(text, str) or not text:
        return False
    return any(s in text for s in [*known_secrets(), *(e for e in extra if e and len(e) >= 4)])


def mask_known(text: str, extra=()) -> str:
    """``text`` with every known secret (and each of ``extra``) masked, nothing else changed."""
    out = str(text)
    for s in sorted({*known_secrets(), *(e for e in extra if e and len(e) >= 4)}, key=len, reverse=True):
        if s in out:
            out = out.replace(s, MASK)
    return out


class RedactingStream:
    """A text stream (the console) that masks every known secret in what is written to it; everything else
    is the wrapped stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, s):
        return self._stream.write(mask_known(s) if isinstance(s, str) else s)

    def writelines(self, lines):
        for ln in lines:
            self.write(ln)

    def __getattr__(self, name):
        return getattr(self._stream, name)


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
        # the authority starts at the first '//' (after the scheme, or at the start: '//user:pw@host:port/'), once
        # the tabs and line breaks urlsplit drops are gone ('http:\t//user:pw@...')
        head = re.split(r"[?#]", re.sub(r"[\t\r\n]", "", s), maxsplit=1)[0]
        scheme, sep, rest = head.partition("//") if "//" in head else ("", "", head)
        out = scheme + sep + re.sub(r"^[^/]*@", MASK + "@", rest)
        return _KEY_LIKE.sub(MASK, out + (f"?{MASK}" if "?" in s or "#" in s else ""))
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    frag = _redact_pairs(parts.fragment) if "=" in parts.fragment else (MASK if parts.fragment else "")
    path = _RANDOM_RUN.sub(MASK, mask_known(_KEY_LIKE.sub(MASK, parts.path)))
    return urlunsplit((parts.scheme, netloc, path, _redact_pairs(parts.query), frag))


def redact_text(text: str, secrets=()) -> str:
    """``text`` with URLs, key-looking tokens and ``secret_name=VALUE`` words redacted and every known secret
    (:func:`known_secrets`) and each of ``secrets`` (4+ characters) masked."""
    known = sorted({*(s for s in secrets if s and len(s) >= 4), *known_secrets()}, key=len, reverse=True)
    out = str(text)
    for s in known:  # first: a secret holding a quote (RFC 3986 allows ' in userinfo) ends the URL match early
        out = out.replace(s, MASK)
    out = _USERINFO_IN_TEXT.sub(lambda m: m.group(1) + MASK + "@", out)   # an unknown password holding a quote
    out = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), out)
    for s in known:
        out = out.replace(s, MASK)
    out = _SECRET_WORD_VALUE.sub(lambda m: f"{m.group(1)}={MASK}" if is_secret_name(m.group(1))
                                 and not m.group(2).startswith(MASK) else m.group(0), out)
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


def _secret_values(name: str, value) -> list[str]:
    """The secrets in ``value`` of an option or field called ``name``: all of it when the name is secret, else
    the secret-named entries of a JSON object, the secret parts of URLs and ``Bearer`` tokens."""
    if is_secret_name(name):
        return [str(value)] if isinstance(value, (str, int)) else [s for v in (value.values() if isinstance(
            value, dict) else value if isinstance(value, (list, tuple)) else []) for s in _secret_values(name, v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _secret_values(str(k), v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _secret_values(name, v)]
    if not isinstance(value, str):
        return []
    out = url_secrets([u for u in value.split(",") if "://" in u])
    out += [m.group(0) for m in _KEY_LIKE.finditer(value)]
    inner = _NAME_VALUE.match(value)
    if inner:
        out += _secret_values(inner.group(1), inner.group(2))
    elif value[:1] in "{[":
        try:
            out += _secret_values(name, json.loads(value))
        except ValueError:
            pass
    return out


def argv_secrets(argv) -> list[str]:
    """The secrets a command line hands the suite (to :func:`register_secret`): the value of every secret-named
    ``--opt VALUE`` / ``--opt=VALUE`` (a mistyped ``--api-key=KEY`` too), secret-named ``KEY=VALUE`` words
    (``--backend-option api_key=...``, ``--request-field token=...``, JSON objects), URLs' secret parts."""
    out: list[str] = []
    take_next = False
    for a in map(str, argv):
        if take_next:
            out.append(a)
            take_next = False
            continue
        m = _NAME_VALUE.match(a)
        if m:
            out += _secret_values(*m.groups())
        elif a.startswith("-") and "://" not in a and is_secret_name(a):
            take_next = True
        else:
            out += _secret_values("", a)
    return [s for s in out if s and len(s) >= 4]
