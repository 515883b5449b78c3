"""``crossprofile hiddenbench validate PATH`` and ``crossprofile hiddenbench run ...``."""

from __future__ import annotations

import sys

from crossprofile_lib.cli import args as A
from crossprofile_lib.cli import model_options as M


def _cmd_validate(args) -> int:
    from crossprofile_lib.hiddenbench.importer import HiddenBenchError, load_hiddenbench
    try:
        data = load_hiddenbench(args.path)
    except HiddenBenchError as e:
        print(f"FAIL {e}", file=sys.stderr)
        return 1
    for n in data.notes:
        print(f"note: {n}", file=sys.stderr)
    from crossprofile_lib.safety.markup import markup_notes
    for t in data.tasks:  # markup in a name or text: valid, shown as plain text (safety/markup.py)
        for n in markup_notes([(f"task {t.id}: name", t.name), (f"task {t.id}: description", t.description),
                               *((f"task {t.id}: possible_answers[{i}]", a) for i, a in enumerate(t.answers))]):
            print(f"note: {n}", file=sys.stderr)
    for e in data.errors:
        print(f"FAIL {e}", file=sys.stderr)
    if data.n_records == 0:
        args.parser.error(f"argument path: {args.path} holds an empty list (no HiddenBench tasks to check)")
    h = data.histogram()
    print(f"{data.path}: {len(data.tasks)} valid task(s), {len(data.errors)} malformed, "
          f"{data.n_records} record(s); data_source={data.data_source}")
    print("agents:  " + ", ".join(f"{k}: {v}" for k, v in h["agents"].items()))
    print("options: " + ", ".join(f"{k}: {v}" for k, v in h["options"].items()))
    return 1 if data.errors else 0


def _cmd_run(args) -> int:
    from crossprofile_lib.backends.cache import CacheStorageError
    from crossprofile_lib.backends.openai_compat import ServerUnreachable
    from crossprofile_lib.hiddenbench.common import protocol_unsupported
    from crossprofile_lib.hiddenbench.importer import HiddenBenchError, resolve_path
    from crossprofile_lib.hiddenbench.run import PROTOCOLS, HBConfig, run_hiddenbench
    from crossprofile_lib.prompts import PromptError
    from crossprofile_lib.safety.outputs import WriteError, check_output_folder, locked_dir
    protocols = list(PROTOCOLS) if args.protocol == "both" else [args.protocol]
    cls = A.backend_class(args.backend)
    why = next((w for p in protocols if cls is not None and (w := protocol_unsupported(p, cls, args.backend))), None)
    if why:
        args.parser.error(f"argument --protocol: {why}")
    opts = dict(args.backend_option or [])  # repeated --backend-option: the last one wins
    A.refuse_unknown_backend_options(args.parser, args.backend, opts, flags=M.collect(args, opts))
    cfg = A.build_config(args.parser, HBConfig, {"protocols": "--protocol", "backend_options": "--backend-option",
                                                 "resume": "--fresh"},
                         backend=args.backend, hiddenbench=args.hiddenbench, protocols=protocols,
                         seeds=args.seeds, ablations=args.ablations,
                         policies=args.policies if args.policies is not None else HBConfig.policies,
                         budgets=args.budgets, tasks=args.tasks, limit=args.limit, batch_tasks=args.batch_tasks,
                         max_words=args.max_words, confirm_duplicates=args.confirm_duplicates,
                         constrained_votes=args.constrained_votes, tokenizer=args.tokenizer,
                         backend_options=opts, resume=not args.fresh)
    try:
        with locked_dir(args.out):
            # the destroy check: never into the folder of the HiddenBench file, never into a run folder
            check_output_folder(args.out, "hiddenbench run", inputs=[resolve_path(cfg.hiddenbench)[0]],
                                allow_other_files=args.allow_other_files)
            header = run_hiddenbench(cfg, args.out, progress=bool(args.progress))
    except (CacheStorageError, ServerUnreachable) as e:  # the call cache's disk, the circuit breaker: run-time failures
        return A.fail(e, 1)
    except (HiddenBenchError, PromptError, ValueError, FileNotFoundError) as e:
        return A.fail(e, 2)
    except WriteError as e:  # a full disk: named; finished sessions are in artefacts/, calls in the cache
        return A.fail(f"{e}; finished sessions are kept in {args.out}/artefacts and the same command resumes from them", 1)
    for n in header["data_notes"]:
        print(f"note: {n}", file=sys.stderr)
    skipped = header.get("malformed_records") or []
    for m in skipped[:20]:
        print(f"skipped malformed record: {m}", file=sys.stderr)
    if skipped:
        print(f"note: {len(skipped)} malformed record(s) skipped"
              + (f" (the first 20 shown; all are in {args.out}/hiddenbench_run.json)" if len(skipped) > 20 else "")
              + f"; {header['n_tasks_in_file']} valid task(s) in the file", file=sys.stderr)
    for p, info in header["protocols"].items():
        print(f"{p}: {info['sessions_run']} session(s) run, {info['sessions_resumed']} resumed, rows {info['rows']} "
              f"by {header['backend']} ({header['model']}) on {header['data_source']}")
        for pol, why in info["skipped_policies"].items():
            print(f"  skipped {pol}: {why}")
        if "invalid_votes" in info:
            print(f"  invalid votes {info['invalid_votes']} (after {info['vote_retries']} retries), "
                  f"extraction fallbacks {info['extraction_fallbacks']}, chat errors {info['chat_errors']}")
    print(f"-> {args.out}/hiddenbench_run.json")
    if header.get("errors"):
        return A.fail(f"{header['errors']} rows are failed model calls (column 'error' set; "
                      f"{header.get('failed_sessions', 0)} sessions); every table refuses them. Rerun the same command: "
                      f"failed sessions are run again (finished calls come from the cache)", 1)
    return 0


COMMAND = "hiddenbench"
HELP = "HiddenBench: validate a file, run the controlled/natural protocols"


def register(sub) -> None:
    from crossprofile_lib.hiddenbench.ablations import DEFAULT_ABLATIONS
    from crossprofile_lib.hiddenbench.common import HB_BUDGETS, HB_POLICIES
    hb = sub.add_parser(COMMAND, help=HELP)
    hsub = hb.add_subparsers(dest="hb_cmd", required=True)
    v = hsub.add_parser("validate", help="check a HiddenBench JSON file; print task count and histograms")
    v.add_argument("path", type=A.path_name, help="a file in the public HiddenBench format (never copied into the project)")
    v.set_defaults(func=_cmd_validate, parser=v)
    r = hsub.add_parser("run", help="run HiddenBench and write the tables and artefacts to --out")
    r.add_argument("--backend", type=A.backend, default="ledger", help="ledger (composition only) or provider/model")
    r.add_argument("--out", type=A.out_dir, required=True, help="output folder (checked for writing first)")
    r.add_argument("--allow-other-files", action="store_true",
                   help="write into an --out folder that already holds files of something else (otherwise refused)")
    r.add_argument("--hiddenbench", type=A.input_file, default=None, metavar="PATH",
                   help="HiddenBench file (default: $HIDDENBENCH_PATH, else the project's FIXTURE)")
    r.add_argument("--protocol", choices=["controlled", "natural", "both"], default="controlled")
    r.add_argument("--ablations", type=A.ablations, default=",".join(DEFAULT_ABLATIONS), help="natural prompt ablations")
    r.add_argument("--seeds", type=A.seeds, default="0,1,2", help="distinct seeds in 0..2^32-1 (default 0,1,2)")
    r.add_argument("--policies", type=A.policies, help="comma-separated policy specs (default: " + ",".join(HB_POLICIES) + ")")
    r.add_argument("--budgets", type=A.budgets, default=",".join(HB_BUDGETS),
                   help="ratios in (0, 1] and fixed budgets (128t)")
    r.add_argument("--tasks", type=A.names, default=None, help="comma-separated task ids (default: all)")
    r.add_argument("--limit", type=A.positive_int, default=None, help="first N tasks only")
    r.add_argument("--batch-tasks", type=A.int_between(1, 10_000), default=4, help="tasks per lockstep chunk (default 4)")
    r.add_argument("--max-words", type=A.int_between(1, 10_000), default=60,
                   help="word limit asked for in round messages")
    r.add_argument("--confirm-duplicates", action="store_true",
                   help="ask the model to confirm near-duplicate claims in the grey zone")
    r.add_argument("--constrained-votes", action="store_true",
                   help="send the vote's JSON schema (constrained decoding where the backend has it)")
    r.add_argument("--tokenizer", default=None, help=M.TOKENIZER_HELP)
    r.add_argument("--backend-option", action="append", metavar="KEY=VALUE", type=A.backend_option,
                   help="backend option (typed: int, float, true/false, else string)")
    r.add_argument("--fresh", action="store_true", help="discard earlier artefacts instead of resuming")
    M.add_model_options(r)  # the same model-backend options as 'crossprofile run' (with --progress)
    r.set_defaults(func=_cmd_run, parser=r)
