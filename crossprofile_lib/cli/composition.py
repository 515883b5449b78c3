"""``crossprofile composition DIR``: kept support/decoy/irrelevant per policy x variant."""

from __future__ import annotations

import sys

from crossprofile_lib.cli import args as A


def _cmd_composition(args) -> int:
    from crossprofile_lib.run.results import ResultsError, read_results
    from crossprofile_lib.stats.composition import composition_table, composition_wide
    try:
        df = read_results(args.dir)
    except ResultsError as e:
        return A.fail(e, 2)
    if df.empty:
        args.parser.error(f"argument dir: {args.dir}: the results table has no rows (nothing to tabulate)")
    labels = list(dict.fromkeys(df["budget_label"]))
    if args.budget not in set(labels) | {"all"}:   # "none" only where the table has unbudgeted rows
        args.parser.error(f"argument --budget: no rows at budget '{args.budget}' in {args.dir} "
                          f"(budgets there: {', '.join(labels)}; or 'all')")
    from crossprofile_lib.run.results import read_header, run_folder
    from crossprofile_lib.run.verify import EditedTable, check_or_trust
    try:
        header = read_header(args.dir)
    except ResultsError:
        header = None
    try:  # the table against its run.json (rows, template hashes, the answer key, value ranges)
        unverified = check_or_trust(df, header, f"{run_folder(args.dir)}/results.parquet", args.trust_edited)
    except EditedTable as e:
        return A.fail(e, 2)
    if unverified:
        print(f"warning: {unverified}", file=sys.stderr)
        print(f"!! {unverified}")
    first = df.iloc[0]
    print(f"kept support/decoy/irrelevant (mean over templates and seeds), budget {args.budget}; "
          f"backend {first['backend']}, model {first['model']}")
    if args.long:
        print(composition_table(df, budget=args.budget).to_string(float_format=lambda x: f"{x:.2f}"))
    else:
        print(composition_wide(df, budget=args.budget).to_string())
    return 0


COMMAND = "composition"
HELP = "kept support/decoy/irrelevant per policy x variant"


def register(sub) -> None:
    from crossprofile_lib.design import PRIMARY_BUDGET
    c = sub.add_parser(COMMAND, help=HELP)
    c.add_argument("dir", type=A.path_name, help="a run folder (results.parquet) or a parquet file")
    c.add_argument("--budget", default=PRIMARY_BUDGET,
                   help=f"budget label (default {PRIMARY_BUDGET}; 128t, none, all)")
    c.add_argument("--long", action="store_true", help="one row per policy x variant")
    c.add_argument("--trust-edited", action="store_true",
                   help="tabulate a table that does not match its run.json (otherwise refused naming the first bad "
                        "row and the rule), marked UNVERIFIED in the output")
    A.add_policy_file_option(c)
    c.set_defaults(func=_cmd_composition, parser=c)
