"""Sub-commands for runs and their tables: ``run``, ``composition``."""

from __future__ import annotations

import sys


def _csv(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def _cmd_run(args) -> int:
    from .runner import RunConfig, run_to_dir
    from .templates import TemplateError
    opts = {}
    for kv in args.backend_option or []:
        k, _, v = kv.partition("=")
        opts[k.replace("-", "_")] = float(v) if v.replace(".", "", 1).replace("inf", "1").isdigit() or v == "inf" else v
    cfg = RunConfig(backend=args.backend, templates=args.templates, seeds=[int(s) for s in _csv(args.seeds)],
                    budgets=_csv(args.budgets), policies=_csv(args.policies) if args.policies else RunConfig.policies,
                    variants=_csv(args.variants) if args.variants else RunConfig.variants,
                    n_agents=args.agents, n_options=args.options, tokenizer=args.tokenizer, backend_options=opts)
    try:
        df, header = run_to_dir(cfg, args.out)
    except (TemplateError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{header['rows']} decisions by {header['backend']} ({header['model']}) in {header['seconds']} s "
          f"-> {args.out}/results.parquet")
    return 0


def _cmd_composition(args) -> int:
    from .results import ResultsError, read_results
    from .tables import composition_table, composition_wide
    try:
        df = read_results(args.dir)
    except ResultsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    first = df.iloc[0]
    print(f"kept support/decoy/irrelevant (mean over templates and seeds), budget {args.budget}; "
          f"backend {first['backend']}, model {first['model']}")
    if args.long:
        print(composition_table(df, budget=args.budget).to_string(float_format=lambda x: f"{x:.2f}"))
    else:
        print(composition_wide(df, budget=args.budget).to_string())
    return 0


def register(sub) -> None:
    from .policies import DEFAULT_POLICIES
    from .runner import DEFAULT_BUDGETS
    r = sub.add_parser("run", help="run a grid and write DIR/results.parquet and DIR/run.json")
    r.add_argument("--backend", default="ledger", help="ledger (reference decider) or provider/model")
    r.add_argument("--out", required=True, help="output folder")
    r.add_argument("--templates", nargs="+", default=["templates"], help="template files, folders or globs")
    r.add_argument("--seeds", default="0,1,2")
    r.add_argument("--budgets", default=",".join(DEFAULT_BUDGETS), help="ratios and fixed budgets (128t)")
    r.add_argument("--policies", default=None, help="comma-separated policy specs (default: "
                   + ",".join(DEFAULT_POLICIES) + ")")
    r.add_argument("--variants", default=None, help="comma-separated variants (default: all 8)")
    r.add_argument("--agents", type=int, default=4)
    r.add_argument("--options", type=int, default=3)
    r.add_argument("--tokenizer", default=None, help="offline (default), gguf:PATH or hf:FOLDER")
    r.add_argument("--backend-option", action="append", metavar="KEY=VALUE",
                   help="backend option, e.g. social_proof=0.5 for the ledger")
    r.set_defaults(func=_cmd_run)
    c = sub.add_parser("composition", help="kept support/decoy/irrelevant per policy x variant")
    c.add_argument("dir")
    c.add_argument("--budget", default="0.6", help="budget label (0.6, 128t, none, all)")
    c.add_argument("--long", action="store_true", help="one row per policy x variant")
    c.set_defaults(func=_cmd_composition)
    from .cli_stats import register as _register_stats; _register_stats(sub)  # noqa: E702
