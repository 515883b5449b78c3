"""``crossprofile run``: run a grid and write DIR/results.parquet and DIR/run.json."""

from __future__ import annotations

import sys

from crossprofile_lib.cli import args as A
from crossprofile_lib.cli import model_options as M


def _grid_args(args) -> None:
    """Fill the grid options not given from ``--preset`` (else :class:`RunConfig`'s defaults)."""
    from crossprofile_lib.design import PRESETS
    from crossprofile_lib.run.runner import RunConfig
    preset = PRESETS[args.preset] if args.preset else {}
    from_preset = args.policies is None and "policies" in preset
    for name in ("templates", "seeds", "budgets", "policies", "variants"):
        if getattr(args, name) is None:
            setattr(args, name, list(preset.get(name, getattr(RunConfig, name))))
    if from_preset:  # the preset's policies this backend cannot run are left out, with a notice
        cannot = A.unsupported_policies(args.backend, args.policies)
        if cannot:
            args.policies = [p for p in args.policies if p not in cannot]
            print(f"notice: --preset {args.preset}: {', '.join(cannot)} left out on {args.backend}: "
                  + "; ".join(cannot.values()), file=sys.stderr)


def _dry_run(args, cfg, opts: dict) -> int:
    """``--dry-run``: the calls per policy and an estimate; nothing is sent, no model is loaded, no server asked
    (the runner counts the calls against a counting backend: :func:`crossprofile_lib.run.plan.call_plan`)."""
    import inspect

    from crossprofile_lib.backends import PROVIDERS, provider_class
    from crossprofile_lib.backends.cache import CacheError, CallCache, cache_folder
    from crossprofile_lib.run.plan import call_plan, describe, measured_rate
    provider, _, model = args.backend.partition("/")
    cls = provider_class(provider)
    model = model or PROVIDERS[provider][1]
    default_mode = inspect.signature(cls).parameters.get("decision_mode")
    mode = opts.get("decision_mode") or (default_mode.default if default_mode is not None else "generate")
    local_tok = args.tokenizer if args.tokenizer not in (None, "", "auto", "server") else None
    print(f"counting the calls of {args.backend} with the runner's own request builders ...", file=sys.stderr)
    plan = call_plan(cfg, decision_mode=mode if provider != "ledger" else "generate", tokenizer=local_tok)
    rate = (args.rate, "given with --rate") if args.rate else None
    if rate is None and provider != "ledger":
        try:
            folder = cache_folder(opts.get("cache"))
            f = folder if str(folder).endswith((".sqlite", ".db")) else folder / "calls.sqlite"
            if f.exists():
                rate = measured_rate(CallCache(opts.get("cache")), provider, model)
        except (CacheError, ValueError, OSError):
            rate = None
    grid = (f"{'preset ' + args.preset + ': ' if args.preset else ''}{plan['templates']} templates x "
            f"{plan['variants']} variants x {plan['seeds']} seeds; budgets {','.join(map(str, args.budgets))}; "
            f"{len(plan['policies'])} policies")
    if provider == "ledger":
        plan["decision_mode"] = "ledger"
    for line in describe(plan, args.backend, grid, model_calls=provider != "ledger", rate=rate):
        print(line)
    return 0


def _cmd_run(args) -> int:
    from crossprofile_lib.backends.openai_compat import ServerUnreachable
    from crossprofile_lib.run.runner import RunConfig, run_to_dir
    from crossprofile_lib.task.templates import TemplateError, template_paths
    if args.out is None and not args.dry_run:
        args.parser.error("the following arguments are required: --out")
    _grid_args(args)
    cannot = A.unsupported_policies(args.backend, args.policies)
    if cannot:
        args.parser.error(f"argument --policies: backend '{args.backend}' cannot run {', '.join(cannot)}: "
                          + "; ".join(cannot.values()))
    opts = dict(args.backend_option or [])  # repeated --backend-option: the last one wins
    # model-backend options, recorded in run.json like --backend-option; before the output folder's
    # lock is taken: a refused command line writes nothing
    flags = M.collect(args, opts)
    cfg = A.build_config(args.parser, RunConfig, _FLAGS, backend=args.backend, templates=args.templates,
                         seeds=args.seeds, budgets=args.budgets, policies=args.policies,
                         variants=args.variants, n_agents=args.agents,
                         n_options=args.options, tokenizer=args.tokenizer, backend_options=opts,
                         protocol=args.protocol, extraction=args.extraction or "oracle",
                         opinion_rate=RunConfig.opinion_rate if args.opinion_rate is None else args.opinion_rate)
    if args.protocol == "scripted" and (args.extraction not in (None, "oracle") or args.opinion_rate is not None):
        args.parser.error("argument --extraction/--opinion-rate: needs --protocol messy (the scripted discussion "
                          "says every fact verbatim; its claims are the facts)")
    if args.extraction == "model" and args.backend == "ledger":
        from crossprofile_lib.task.extraction import MODEL_UNAVAILABLE
        args.parser.error(f"argument --extraction: {MODEL_UNAVAILABLE}")
    A.refuse_unknown_backend_options(args.parser, args.backend, opts, flags=flags)
    if args.dry_run:
        return _dry_run(args, cfg, opts)
    from crossprofile_lib.backends.cache import CacheStorageError
    from crossprofile_lib.safety.outputs import WriteError, check_output_folder, locked_dir
    try:
        from crossprofile_lib.backends import backend_for
        with locked_dir(args.out):  # taken before a backend loads a model or probes a server
            # the destroy check: never into the template folder, never over a HiddenBench run, and a
            # finished run of another grid only with --overwrite
            from crossprofile_lib.paths import resolve_template_path
            inputs = [*template_paths(cfg.templates), *(resolve_template_path(t) for t in cfg.templates)]
            check_output_folder(args.out, "run", inputs=inputs, overwrite=args.overwrite,
                                allow_other_files=args.allow_other_files,
                                same_work=lambda folder: grid_differences(cfg, folder))
            try:
                backend = backend_for(cfg)
            except TypeError as e:
                raise ValueError(f"backend '{cfg.backend}' does not take one of the options "
                                 f"{sorted(cfg.backend_options)} ({e})") from None
            progress = sys.stderr.isatty() if args.progress is None else args.progress
            extractor = None
            if cfg.protocol == "messy" and cfg.extraction == "model":  # the natural protocol's extractor
                from crossprofile_lib.backends.base import CHAT
                from crossprofile_lib.hiddenbench.claims import model_extractor
                if CHAT not in getattr(backend, "capabilities", frozenset()):
                    raise ValueError(f"--extraction model: backend '{cfg.backend}' cannot chat (the model-based "
                                     f"claim extractor sends one chat call per utterance)")
                extractor = model_extractor(backend)
            df, header = run_to_dir(cfg, args.out, backend=backend, progress=progress, extractor=extractor)
    except (CacheStorageError, ServerUnreachable) as e:  # the call cache's disk, the circuit breaker: run-time failures
        return A.fail(e, 1)
    except (TemplateError, ValueError, FileNotFoundError) as e:
        return A.fail(e, 2)
    except WriteError as e:  # a full disk, a file-size limit: named; the model calls are in the cache
        return A.fail(f"{e}; model calls already made are in the call cache, so the same command reruns without making "
                      f"them again", 1)
    print(f"{header['rows']} decisions by {header['backend']} ({header['model']}) in {header['seconds']} s "
          f"-> {args.out}/results.parquet")
    if header.get("errors"):
        return A.fail(f"{header['errors']} decisions failed after their retries (rows with 'error' set); rerun the same "
                      f"command to retry only those", 1)
    return 0


#: RunConfig field -> the option that sets it (others: ``--field-name``)
_FLAGS = {"n_agents": "--agents", "n_options": "--options", "backend_options": "--backend-option"}


def grid_differences(cfg, folder) -> list[str]:
    """How the run ``cfg`` differs from the finished run in ``folder`` (its ``run.json``), one
    phrase per setting (empty: the same grid, which a rerun recomputes identically)."""
    import json

    from crossprofile_lib.run.results import ResultsError, config_record, read_header
    try:
        old = read_header(folder).get("config")
    except ResultsError as e:
        return [f"its run.json cannot be read ({e})"]
    if not isinstance(old, dict):
        return ["its run.json records no configuration"]
    new = json.loads(json.dumps(config_record(cfg), default=str))
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if k == "templates":
            a, b = _template_files(a), _template_files(b)
        if k == "backend_options":
            a, b = (_grid_options(x) for x in (a, b))
            for o in sorted(set(a) | set(b)):
                if a.get(o) != b.get(o):
                    out.append(f"--backend-option {o} {_short(a.get(o, '(unset)'))} there, "
                               f"{_short(b.get(o, '(unset)'))} now")
        elif a != b:
            out.append(f"{k} {_short(old.get(k))} there, {_short(new.get(k))} now")
    return out


#: Backend options that never change a decision (how calls are sent, where they are cached), so a
#: rerun that changes only them recomputes the same grid.
_NOT_THE_GRID = frozenset({"concurrency", "max_retries", "timeout", "cache", "retry_wait", "retry_wait_max",
                           "circuit_breaker", "progress", "base_url", "api_key", "n_threads", "n_batch", "n_ctx",
                           "tokenize_timeout", "max_concurrency", "stop_on_refusal", "retry_after_max"})


def _grid_options(opts) -> dict:
    return {k: v for k, v in (opts or {}).items() if k not in _NOT_THE_GRID} if isinstance(opts, dict) else {"?": opts}


def _template_files(spec) -> object:
    from crossprofile_lib.task.templates import template_paths
    try:
        return sorted(str(p.resolve()) for p in template_paths(spec if isinstance(spec, list) else [spec]))
    except (OSError, ValueError, TypeError):
        return spec


def _short(v) -> str:
    s = ",".join(map(str, v)) if isinstance(v, list) else str(v)
    return s if len(s) <= 80 else s[:77] + "..."


COMMAND = "run"
HELP = "run a grid and write DIR/results.parquet and DIR/run.json"


def register(sub) -> None:
    from crossprofile_lib.design import BUDGET_GRID, DEFAULT_POLICIES, PRESETS
    r = sub.add_parser(COMMAND, help=HELP)
    r.add_argument("--backend", type=A.backend, default="ledger",
                   help="ledger (reference decider) or provider/model")
    r.add_argument("--out", type=A.out_dir, help="output folder (checked for writing first; required unless --dry-run)")
    r.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="paper: the paper's design (60 formal templates, 3 seeds, 8 variants, every policy and "
                        "control including B3, budgets 0.4,0.6,0.8,128t); options given beside it override it")
    r.add_argument("--dry-run", action="store_true",
                   help="print the calls per policy and an estimate from a measured rate; run nothing")
    r.add_argument("--rate", type=A.positive_float, default=None, metavar="CALLS_PER_S",
                   help="--dry-run: the rate to estimate with (default: measured from the call cache)")
    r.add_argument("--templates", type=A.template_path, nargs="+", default=None,
                   help="template files, folders or globs (default: templates, all 70)")
    r.add_argument("--seeds", type=A.seeds, default=None, help="distinct seeds in 0..2^32-1 (default 0,1,2)")
    r.add_argument("--budgets", type=A.budgets, default=None,
                   help="ratios in (0, 1] and fixed budgets (128t) (default " + ",".join(BUDGET_GRID) + ")")
    r.add_argument("--policies", type=A.policies, default=None, help="comma-separated policy specs (default: "
                   + ",".join(DEFAULT_POLICIES) + ")")
    r.add_argument("--variants", type=A.variants, default=None, help="comma-separated variants (default: all 8)")
    r.add_argument("--agents", type=A.int_between(2, 64), default=4, help="agents per group (2..64; default 4)")
    r.add_argument("--options", type=A.int_between(2, 10), default=3, help="options per template (2..10; default 3)")
    r.add_argument("--tokenizer", default=None, help=M.TOKENIZER_HELP)
    r.add_argument("--backend-option", action="append", metavar="KEY=VALUE", type=A.backend_option,
                   help="backend option, e.g. social_proof=0.5 for the ledger (typed: int, float, true/false, "
                        "else string)")
    r.add_argument("--allow-other-files", action="store_true",
                   help="write into an --out folder that already holds files of something else (otherwise refused, "
                        "naming them)")
    r.add_argument("--overwrite", action="store_true",
                   help="replace a finished run of another grid in --out (otherwise refused, naming it)")
    r.add_argument("--protocol", choices=("scripted", "messy"), default="scripted",
                   help="controlled discussion: scripted (every fact verbatim; default) or messy (paraphrases, "
                        "restatements and opinion lines; task/messy.py)")
    r.add_argument("--extraction", choices=("oracle", "exact", "fuzzy", "model"), default=None,
                   help="--protocol messy: claim extraction level (default oracle; task/extraction.py); model needs "
                        "a model backend")
    r.add_argument("--opinion-rate", type=_rate, default=None, metavar="R",
                   help="--protocol messy: share of fact lines followed by an opinion, agreement or hedge line, "
                        "in [0, 1] (default 0.25)")
    M.add_model_options(r)
    A.add_policy_file_option(r)
    r.set_defaults(func=_cmd_run, parser=r)


def _rate(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise A.ArgError(f"'{text}' is not a number") from None
    if not 0.0 <= v <= 1.0:
        raise A.ArgError(f"{text} is not in [0, 1]")
    return v
