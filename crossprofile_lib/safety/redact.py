"""Secrets in URLs: :func:`redact_url` is the one function every writer of a URL goes through.

A base URL may carry a key (``https://user:KEY@host/v1``, ``...?api_key=KEY``). Wherever a URL is
written or keyed -- the call cache (key and stored field), ``run.json``,
``hiddenbench_run.json``, logs, error messages, the progress bar -- it is redacted first:

* userinfo (``user:password@``) becomes ``***@``;
* a query or fragment value whose name looks secret (``key``, ``api_key``, ``apikey``, ``token``,
  ``access_token``, ``secret``, ``password``, ``passwd``, ``pwd``, ``sig``, ``signature``,
  ``auth``, ``credential``, ``session``...) becomes ``***``.

:func:`redact_options` applies the same rule to a backend's options wherever a run header records them.

Redaction is deterministic, so a redacted URL still identifies the server in cache keys (two
keys on one server share a cache, as the API key never was part of the key).
:func:`redact_text` redacts every URL found in free text (error messages).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
_SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|sig|auth|credential|session|bearer", re.IGNORECASE)
_URL_IN_TEXT = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")


def is_secret_name(name: str) -> bool:
    """Whether an option, header or query name looks like it holds a secret (``api_key``,
    ``token``, ``password``...): its value is never typed, written or keyed."""
    return bool(_SECRET_NAME.search(name))


def redact_options(options: dict) -> dict:
    """The one redaction rule of run headers (``run.json``, ``hiddenbench_run.json``) and configuration
    hashes: a value whose name looks secret (:func:`is_secret_name`) becomes ``***``; a value whose name
    holds ``url`` is redacted as a URL (:func:`redact_url`); others pass unchanged."""
    return {k: (MASK if is_secret_name(k) else redact_url(v) if "url" in k.lower() else v)
            for k, v in (options or {}).items()}


def _redact_query(q: str) -> str:
    if not q:
        return q
    pairs = parse_qsl(q, keep_blank_values=True)
    if not any(_SECRET_NAME.search(k) for k, _ in pairs):
        return q  # untouched, byte for byte (cache keys of clean URLs never change)
    return urlencode([(k, MASK if _SECRET_NAME.search(k) else v) for k, v in pairs], safe="*")


def redact_url(url):
    """``url`` with userinfo and secret-looking query values replaced by ``***`` (see module doc).
    Lists and tuples are redacted element-wise; ``None`` passes through."""
    if url is None:
        return None
    if isinstance(url, (list, tuple)):
        return type(url)(redact_url(u) for u in url)
    s = str(url)
    try:
        parts = urlsplit(s)
    except ValueError:  # unparsable: hide anything after an '@' or a '?'
        return re.sub(r"[^/@]*@", MASK + "@", s.split("?")[0])
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, netloc, parts.path, _redact_query(parts.query), _redact_query(parts.fragment)))


def redact_text(text: str, secrets=()) -> str:
    """``text`` with every URL in it redacted and every string in ``secrets`` replaced by ``***``."""
    out = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), str(text))
    for s in secrets:
        if s and len(s) >= 4:
            out = out.replace(s, MASK)
    return out


def url_secrets(url) -> list[str]:
    """The secret parts of ``url`` (password, secret query values), to scrub from free text that
    may quote them without the URL (e.g. an HTTP library's error)."""
    if url is None:
        return []
    if isinstance(url, (list, tuple)):
        return [s for u in url for s in url_secrets(u)]
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return []
    out = []
    if parts.password:
        out.append(parts.password)
    elif parts.username and "@" in parts.netloc:  # KEY@host: the user name is the key
        out.append(parts.username)
    for q in (parts.query, parts.fragment):
        out += [v for k, v in parse_qsl(q, keep_blank_values=True) if _SECRET_NAME.search(k) and v]
    return out
