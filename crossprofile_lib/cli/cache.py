"""``crossprofile cache check|vacuum|export PATH``: look after a call-cache file (or the folder holding
``calls.sqlite``); the library functions are in :mod:`crossprofile_lib.backends.cache`."""

from __future__ import annotations

import sys

from crossprofile_lib.cli import args as A


def no_cache_yet(path) -> str:
    """The message for ``cache check PATH`` when PATH does not exist or is a folder without ``calls.sqlite``
    ('' when there is a file to check): not an error, the first model call makes the cache."""
    from pathlib import Path

    from crossprofile_lib.backends.cache import FILE_NAME
    from crossprofile_lib.paths import cache_dir
    p = Path(path).expanduser()
    if p.is_symlink() or (p.exists() and not (p.is_dir() and not (p / FILE_NAME).exists())):
        return ""   # a file (or a link, even a dangling one) is checked
    where = f"{p} does not exist" if not p.exists() else f"{p} holds no {FILE_NAME}"
    return (f"no call cache yet: {where}. Nothing to check: the cache is created by the first model call "
            f"(runs of the reference decider, backend ledger, make none). Runs started here use {cache_dir()} "
            f"($CROSSPROFILE_CACHE, else ./.crossprofile_cache if it exists, else the user cache folder; "
            f"--cache overrides).")


def _cmd_check(args) -> int:
    msg = no_cache_yet(args.path)
    if msg:   # a documented non-error: exit 0
        print(msg)
        return 0
    from crossprofile_lib.backends.cache import CacheError, check_cache
    try:
        rep = check_cache(args.path)
    except CacheError as e:  # not the file's health: its surroundings (a full disk, a read-only folder)
        return A.fail(e, 1)
    if rep["ok"]:
        print(f"{rep['file']}: ok, {rep['entries']} entries")
        return 0
    print(f"{rep['file']}: {rep['problem']}", file=sys.stderr)
    for k in rep["bad_rows"][:10]:
        print(f"  entry {k} does not decode", file=sys.stderr)
    if rep["entries"] is None:
        print(f"recover: move the file aside (mv {rep['file']} {rep['file']}.broken); the next run makes a new "
              f"cache and sends only the calls it lacks; 'crossprofile cache export {rep['file']} calls.jsonl' "
              f"saves what is still readable", file=sys.stderr)
    return 1


def _cmd_vacuum(args) -> int:
    from crossprofile_lib.backends.cache import CacheError, vacuum_cache
    try:
        before, after = vacuum_cache(args.path)
    except CacheError as e:
        return A.fail(e, 1)
    print(f"{args.path}: {before} -> {after} bytes")
    return 0


def _cmd_export(args) -> int:
    from crossprofile_lib.backends.cache import CacheError, export_cache, resolve_cache_file
    from crossprofile_lib.safety.outputs import WouldDestroy, WriteError, check_output_file
    f = resolve_cache_file(args.path)
    try:  # the destroy check: never over the cache (or its journal files), an existing export only with --overwrite
        check_output_file(args.out, inputs=[f] + [f"{f}{x}" for x in ("-wal", "-shm", "-journal")],
                          overwrite=args.overwrite, option="argument out:")
    except WouldDestroy as e:
        args.parser.error(str(e))
    try:
        written, bad = export_cache(args.path, args.out)
    except (CacheError, WriteError) as e:
        return A.fail(e, 1)
    print(f"{written} entries -> {args.out}" + (f"; {bad} unreadable" if bad else ""))
    return 1 if bad else 0


COMMAND = "cache"
HELP = "check, vacuum or export a call-cache file"


def register(sub) -> None:
    c = sub.add_parser(COMMAND, help=HELP)
    csub = c.add_subparsers(dest="cache_cmd", required=True)
    parsers = {}
    for name, func, what in (
            ("check", _cmd_check, "full integrity check; exit 1 naming the problem (exit 0 when there is no cache yet)"),
            ("vacuum", _cmd_vacuum, "checkpoint and compact a healthy cache"),
            ("export", _cmd_export, "write every readable entry as JSON lines")):
        parsers[name] = cp = csub.add_parser(name, help=what)
        cp.add_argument("path", type=A.path_name, help="cache file, or the folder holding calls.sqlite")
        cp.set_defaults(func=func, parser=cp)
    e = parsers["export"]
    e.add_argument("out", type=A.path_name, help="output .jsonl file (never the cache itself; an existing file only "
                                                 "with --overwrite)")
    e.add_argument("--overwrite", action="store_true", help="replace an existing OUT file")
