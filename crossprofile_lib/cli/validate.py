"""``crossprofile validate PATH...``: check template files (rules 1-5 of SPEC section 2)."""

from __future__ import annotations

import sys
import warnings

from . import args as A


def _cmd_validate(args) -> int:
    from collections import Counter

    from ..templates import TemplateError, TemplateWarning, load_template, template_paths
    try:
        paths = template_paths(args.paths)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    bad, ok, domains = 0, 0, Counter()
    for p in paths:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TemplateWarning)
            try:
                t = load_template(p, n_options=args.options)
            except TemplateError as e:
                bad += 1
                print(f"FAIL {e}", file=sys.stderr)
                continue
        ok += 1
        domains[t.domain] += 1
        for w in caught:
            print(f"warning: {w.message}", file=sys.stderr)
    print(f"{ok} templates valid, {bad} invalid ({len(domains)} domains)")
    if args.verbose:
        for d, n in sorted(domains.items()):
            print(f"  {n:3d}  {d}")
    return 1 if bad else 0


def register(sub) -> None:
    v = sub.add_parser("validate", help="validate template files (rules 1-5 of SPEC section 2)")
    v.add_argument("paths", type=A.template_path, nargs="+", help="files, folders or globs")
    v.add_argument("--options", type=A.int_at_least(2), default=3, help="option count (default 3)")
    v.add_argument("-v", "--verbose", action="store_true", help="list domains")
    v.set_defaults(func=_cmd_validate)
