"""The ``crossprofile`` command line.

Each command lives in the module named after it and adds itself with ``register(sub)``;
:data:`COMMANDS` lists them, in the order ``crossprofile --help`` shows them. Shared argument
types (seeds, budgets, policies, ``--backend-option``, ``--out``) are in :mod:`.args`.
"""

from __future__ import annotations

import argparse
import sys

#: Command modules (``crossprofile_lib.cli.<name>``), each with ``register(sub)``.
COMMANDS = ("validate", "run", "composition", "hiddenbench", "stats", "cache", "fit_paper", "book", "tokenizers")


def build_parser() -> argparse.ArgumentParser:
    import importlib
    p = argparse.ArgumentParser(prog="crossprofile", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return p


def main(argv=None) -> int:
    """Run one command; returns its exit status (2: a bad command line, named by argparse before
    any work; ``--help``: 0)."""
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except SystemExit as e:  # argparse's usage errors and --help, also from a command's parser.error
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)


if __name__ == "__main__":
    sys.exit(main())
