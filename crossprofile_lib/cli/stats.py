"""``crossprofile stats DIR``: the paper's inference (SPEC section 8) over a run's results table;
the text report is :func:`crossprofile_lib.cli.report.print_report`, ``--json`` prints everything
(every budget) as JSON."""

from __future__ import annotations

import json
import sys

from crossprofile_lib.cli import args as A


def _cmd_stats(args) -> int:
    from crossprofile_lib.run.results import ResultsError, read_header, read_results, run_folder
    from crossprofile_lib.stats.analysis import analyse, to_jsonable
    from crossprofile_lib.stats.contrasts import PreregError, load_prereg
    try:
        df = read_results(args.dir)
        prereg = load_prereg(args.prereg, args.prereg_extra)
    except (ResultsError, PreregError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        header = read_header(args.dir)
    except ResultsError as e:
        if (run_folder(args.dir) / "run.json").exists():  # there but damaged: what it records (policy files,
            print(f"error: {e}; restore the run's run.json (or rerun the grid) before its statistics",  # templates)
                  file=sys.stderr)                                                                 # is unknown
            return 2
        print(f"notice: {e}; the social-proof fit rebuilds nothing without it", file=sys.stderr)
        header = {}
    header = header if isinstance(header, dict) else {}
    config = header.get("config")
    config = config if isinstance(config, dict) else None
    args.dir = str(run_folder(args.dir))  # a results.parquet named directly: its folder
    from crossprofile_lib.policies.plugins import PolicyFileError, ensure_recorded
    try:  # the run's own policies: from the files run.json records (same SHA-256), or --policy-file
        ensure_recorded(header.get("policy_files"), f"{args.dir}/run.json")
    except PolicyFileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from crossprofile_lib.stats.analysis_set import FailedCallsError, prepare
    try:
        rows, prepared = prepare(df, args.allow_errors, args.analysis_set, source=f"{args.dir}/results.parquet")
    except FailedCallsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if prepared["failed_calls"]:
        print(f"notice: {prepared['failed_calls']}", file=sys.stderr)
    if rows.empty:
        print(f"error: {args.dir}/results.parquet: no decisions left to analyse", file=sys.stderr)
        return 1
    try:
        from crossprofile_lib.run.rebuild import choice_data_rebuilder, rebuild_inputs_key
        from crossprofile_lib.stats.cache import FitCache
        cache = FitCache.for_run(args.dir, enabled=not args.no_cache)
        choice = choice_data_rebuilder(rows, config, args.templates, prereg.settings["social_proof_where"])
        res = analyse(rows, prereg, n_resamples=args.resamples, seed=args.seed, choice_data=choice,
                      regressions=not args.no_regressions, fit_resamples=args.fit_resamples, rows=prepared,
                      cache=cache, choice_key=rebuild_inputs_key(config, args.templates))
    except PreregError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if cache.write_error:
        print(f"notice: {cache.write_error} (fits not cached)", file=sys.stderr)
    from crossprofile_lib.stats.analysis_set import fallback_lines, relevance_fallback
    fb = relevance_fallback(rows)
    if args.json:
        print(json.dumps(to_jsonable({"run": str(args.dir), "models": res, "relevance_fallback": fb}), indent=1))
    else:
        for r in res:
            from crossprofile_lib.cli.report import print_report
            print_report(r, str(prereg.settings["primary_budget"]))
        for line in fallback_lines(fb):
            print(line)
    return 0


#: The command's name and its line in ``crossprofile --help`` (read without importing what :func:`register` needs).
COMMAND = "stats"
HELP = ("template-bootstrap inference: preregistered contrasts (Holm), tables, net-lead regressions, "
        "fitted social-proof weight")


def register(sub) -> None:
    from crossprofile_lib.stats.analysis_set import ANALYSIS_SETS
    from crossprofile_lib.stats.cache import CACHE_DIRNAME
    s = sub.add_parser(COMMAND, help=HELP)
    s.add_argument("dir", type=A.path_name, help="a run folder (results.parquet + run.json), or its results.parquet")
    s.add_argument("--json", action="store_true", help="print everything as JSON (all budgets)")
    s.add_argument("--prereg", type=A.input_file, default=None,
                   help="contrast file (default: the repository's prereg.yaml)")
    s.add_argument("--prereg-extra", dest="prereg_extra", action="append", default=[], metavar="FILE",
                   type=A.input_file,
                   help="an extra contrast file merged into --prereg (repeatable): contrasts of your own, e.g. "
                        "'Mine - R1', in a family of either file (Holm-corrected with it)")
    s.add_argument("--resamples", type=A.int_between(1, A.MAX_RESAMPLES), default=10_000,
                   help=f"bootstrap resamples (default 10000; at most {A.MAX_RESAMPLES})")
    s.add_argument("--seed", type=A.seed, default=0, help="seed of the resample index matrix (default 0)")
    s.add_argument("--fit-resamples", type=A.int_between(0, A.MAX_FIT_RESAMPLES), default=1000,
                   help="bootstrap fits for the social-proof weight (first N resamples; default 1000; 0 skips)")
    s.add_argument("--no-regressions", action="store_true", help="skip the net-lead regressions (fixed effects, mixed, GEE)")
    s.add_argument("--allow-errors", action="store_true",
                   help="drop rows whose model call failed (column 'error' set) instead of refusing the run")
    s.add_argument("--analysis-set", choices=ANALYSIS_SETS, default=ANALYSIS_SETS[0],
                   help="formal (default): confirmatory statistics on the formal templates only (ids of the files "
                        "under templates/formal/), development templates dropped; all: every template (exploratory)")
    s.add_argument("--no-cache", action="store_true",
                   help=f"refit the regressions and the social-proof weight instead of reading them from "
                        f"DIR/{CACHE_DIRNAME}/ (keyed by the table's hash, options and code)")
    s.add_argument("--templates", type=A.template_path, nargs="+", default=None,
                   help="template paths to rebuild memories from (default: those in run.json)")
    A.add_policy_file_option(s)
    s.set_defaults(func=_cmd_stats)
