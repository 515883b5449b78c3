"""``--policy-file FILE`` and ``--policy-timeout SECONDS``: memory policies of your own on the command line.

Their values are read from ``argv`` before the command line is parsed (:func:`policy_file_values`,
:func:`policy_timeout_value`) and the files loaded (:func:`preload_policy_files`), so ``--policies Mine``
is checked against a registry that knows ``Mine`` (:mod:`crossprofile_lib.policies.plugins`).
Re-exported by :mod:`crossprofile_lib.cli.args`.
"""

from __future__ import annotations

import argparse
import math

ArgError = argparse.ArgumentTypeError


POLICY_FILE_HELP = ("a Python file (or module:object) defining POLICY or POLICIES, memory policies of your own "
                    "(book/reference-policies.md); repeatable; loaded and checked before anything else")


def add_policy_file_option(p) -> None:
    """``--policy-file FILE`` (repeatable). Its values are loaded by :func:`preload_policy_files` before the
    command line is parsed, so ``--policies Mine`` is checked against a registry that knows ``Mine``."""
    p.add_argument("--policy-file", dest="policy_files", action="append", default=[], metavar="FILE",
                   help=POLICY_FILE_HELP)
    p.add_argument("--policy-timeout", dest="policy_timeout", type=policy_timeout, default=None, metavar="SECONDS",
                   help="time limit of each call into a policy file's code (its import, order, packer, build); "
                        "default $CROSSPROFILE_POLICY_TIMEOUT, else 30; 0: none")


def policy_timeout(s: str) -> float:
    """argparse type of ``--policy-timeout``: seconds in [0, 86400] (0: no limit)."""
    try:
        v = float(s) if s.isascii() else math.nan
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or not 0 <= v <= 86_400:
        raise ArgError(f"'{s}' is not a number of seconds in [0, 86400] (0: no limit)")
    return v


def policy_timeout_value(argv):
    """The last ``--policy-timeout X`` / ``--policy-timeout=X`` of ``argv`` (unchecked), else None."""
    out, it = None, iter(argv)
    for a in it:
        if a == "--":
            break
        if a == "--policy-timeout":
            out = next(it, None)
        elif a.startswith("--policy-timeout="):
            out = a.partition("=")[2]
    return out


def policy_file_values(argv) -> list[str]:
    """The values of every ``--policy-file X`` / ``--policy-file=X`` in ``argv``, in order."""
    out, it = [], iter(argv)
    for a in it:
        if a == "--":
            break
        if a == "--policy-file":
            v = next(it, None)
            if v is not None:
                out.append(v)
        elif a.startswith("--policy-file="):
            out.append(a.partition("=")[2])
    return out


def preload_policy_files(argv) -> list:
    """Load (and check) the policy files named in ``argv``; raises ``PolicyFileError`` naming the file and
    the rule."""
    from crossprofile_lib.policies.plugins import TIMEOUT, load_all
    t = policy_timeout_value(argv)
    if t is not None:
        try:
            TIMEOUT[0] = policy_timeout(t)
        except ArgError:
            TIMEOUT[0] = None  # refused by the parser, naming --policy-timeout
    return load_all(policy_file_values(argv))
