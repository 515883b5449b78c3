"""``crossprofile validate [PATH...]``: check template files (rules 1-5 of SPEC section 2); no path: the
templates bundled with the package (:func:`crossprofile_lib.paths.templates_dir`)."""

from __future__ import annotations

import sys

from crossprofile_lib.cli import args as A


def _cmd_validate(args) -> int:
    """One line per file (``ok`` on stdout, ``FAIL`` naming file, field and rule on stderr), then
    the summary; exit 1 if any file is invalid. The checks live in :mod:`crossprofile_lib.task.validate`."""
    from collections import Counter

    from crossprofile_lib.paths import templates_dir
    from crossprofile_lib.task.tokenizer import default_tokenizer
    from crossprofile_lib.task.validate import summary, validate_paths
    try:
        verdicts = validate_paths(args.paths or [str(templates_dir())], n_options=args.options,
                                  tokenizer=default_tokenizer())
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for v in verdicts:
        print(v.line(), file=sys.stdout if v.ok else sys.stderr)
        for w in v.warnings:
            print(f"warning: {w}", file=sys.stderr)
    print(summary(verdicts))
    if args.verbose:
        domains = Counter(v.template.domain for v in verdicts if v.ok)
        for d, n in sorted(domains.items()):
            print(f"  {n:3d}  {d}")
    return 0 if all(v.ok for v in verdicts) else 1


def register(sub) -> None:
    v = sub.add_parser("validate", help="validate template files (rules 1-5 of SPEC section 2)")
    v.add_argument("paths", type=A.template_path, nargs="*",
                   help="files, folders or globs (default: the bundled templates, formal and dev)")
    v.add_argument("--options", type=A.int_at_least(2), default=3, help="option count (default 3)")
    v.add_argument("-v", "--verbose", action="store_true", help="list domains")
    v.set_defaults(func=_cmd_validate)
