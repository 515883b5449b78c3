"""``crossprofile validate [PATH...]``: check template files (rules 1-5 of SPEC section 2; default: the
bundled templates) and the design check (the classic cell holds under each pricing; ``--table`` prints it)."""

from __future__ import annotations

import sys

from crossprofile_lib.cli import args as A


def _cmd_validate(args) -> int:
    """One line per file (``ok`` on stdout, ``FAIL`` naming file, field and rule on stderr), then the
    summary; exit 1 if any file is invalid."""
    from collections import Counter

    from crossprofile_lib.paths import templates_dir
    from crossprofile_lib.task.design_check import DESIGN_PRICINGS, design_tokenizers
    from crossprofile_lib.task.tokenizer import default_tokenizer
    from crossprofile_lib.task.validate import summary, validate_paths
    paths = args.paths or [str(templates_dir())]
    design = []
    if not args.no_design:
        names = args.tokenizer or list(DESIGN_PRICINGS)
        design, missing = design_tokenizers(names, fetch=bool(args.tokenizer))
        for n, why in missing.items():
            if args.tokenizer:  # asked for by name: a usage error
                return A.fail(f"argument --tokenizer: {n}: {why}", 2)
            print(f"note: design check without {n}: {why}", file=sys.stderr)
        print(f"design check (classic cell, R1 in PSP at r = 0.6 keeps 5 / 0 / 4) priced with: "
              f"{', '.join(t.name for t in design)}", file=sys.stderr)
    try:
        verdicts = validate_paths(paths, n_options=args.options, tokenizer=default_tokenizer(), design=design)
    except FileNotFoundError as e:
        return A.fail(e, 2)
    if args.table:  # every template that passes rules 1-5, also those the design check fails
        _print_table(validate_paths(paths, n_options=args.options) if design else verdicts,
                     design or [default_tokenizer()])
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


def _print_table(verdicts, tokenizers) -> None:
    """Per template and tokenizer: T_all, B(0.6), the nine private lines' cost, what is left, the cheapest
    decoy line and what R1 keeps in PSP."""
    from crossprofile_lib.task.design_check import classic_fit
    print(f"{'template':28s} {'tokenizer':38s} {'T_all':>5s} {'B':>4s} {'nine':>4s} {'left':>4s} "
          f"{'decoy':>5s}  R1 keeps")
    for template in (v.template for v in verdicts if v.template is not None):
        for tok in tokenizers:
            f = classic_fit(template, tok)
            print(f"{f.template:28s} {f.tokenizer[:38]:38s} {f.t_all:5d} {f.budget:4d} {f.private_cost:4d} {f.left:4d} "
                  f"{f.cheapest_decoy.cost:5d}  {'/'.join(map(str, f.kept))}{'' if f.holds else '  <- does not hold'}")


COMMAND = "validate"
HELP = "validate template files (rules 1-5 of SPEC section 2)"


def register(sub) -> None:
    v = sub.add_parser(COMMAND, help=HELP)
    v.add_argument("paths", type=A.template_path, nargs="*",
                   help="files, folders or globs (default: the bundled templates, formal and dev)")
    v.add_argument("--options", type=A.int_between(2), default=3, help="option count (default 3)")
    v.add_argument("-v", "--verbose", action="store_true", help="list domains")
    v.add_argument("--tokenizer", action="append", default=None, metavar="NAME",
                   help="a pricing for the design check (repeatable; default: qwen2.5, llama-3.1, smollm2 and "
                        "offline, those available here)")
    v.add_argument("--no-design", action="store_true", help="skip the design check (templates of another design)")
    v.add_argument("--table", action="store_true",
                   help="print per template and tokenizer the budget, the nine private lines' cost and what R1 keeps")
    v.set_defaults(func=_cmd_validate)
