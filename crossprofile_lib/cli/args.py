"""The command line's shared argument types: every option is parsed here, by argparse ``type=``
functions, so a bad command line stops with exit 2 and a message naming the option and the rule
before any work starts."""

from __future__ import annotations

import argparse
import re


def csv(s: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (blank items dropped)."""
    return [x.strip() for x in s.split(",") if x.strip()]


_INT = re.compile(r"^[+-]?\d+$")


def option_value(v: str):
    """A ``KEY=VALUE`` value, typed: int (``8``), float (``-0.5``, ``1e-3``, ``inf``), bool
    (``true``/``false``, any case), else the string itself."""
    s = v.strip()
    if _INT.match(s):
        return int(s)
    try:
        return float(s)
    except ValueError:
        pass
    if s.lower() in ("true", "false"):
        return s.lower() == "true"
    return v


def backend_option(s: str) -> tuple[str, object]:
    """argparse type of ``--backend-option KEY=VALUE``: ``(key, typed value)``; dashes in the key
    become underscores (``social-proof=0.5`` -> ``("social_proof", 0.5)``)."""
    k, eq, v = s.partition("=")
    k = k.strip()
    if not eq or not k:
        raise argparse.ArgumentTypeError(f"'{s}' is not KEY=VALUE")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", k):
        raise argparse.ArgumentTypeError(f"'{k}' is not an option name (letters, digits, '_' or '-')")
    return k.replace("-", "_"), option_value(v)


def backend_options(pairs) -> dict:
    """The ``(key, value)`` pairs of repeated ``--backend-option`` as a dict (last one wins)."""
    return dict(pairs or [])
