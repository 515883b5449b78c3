"""``crossprofile cache check|vacuum|export``: look after a call-cache file.

* ``check PATH`` -- a full check (file, SQLite header and length, ``PRAGMA integrity_check``,
  schema, every row decodes); exit 0 when healthy, 1 with the problem named when not;
* ``vacuum PATH`` -- checkpoint the journal and compact a healthy cache (sizes before/after);
* ``export PATH OUT.jsonl`` -- every readable entry as one JSON line (also from a damaged file:
  what SQLite can still read is saved, the rest counted).

``PATH`` is a cache file or the folder holding ``calls.sqlite``. The library functions are in
:mod:`crossprofile_lib.backends.cache`.
"""

from __future__ import annotations

import sys


def _cmd_check(args) -> int:
    from crossprofile_lib.backends.cache import CacheError, check_cache
    try:
        rep = check_cache(args.path)
    except CacheError as e:  # not the file's health: its surroundings (a full disk, a read-only folder)
        print(f"error: {e}", file=sys.stderr)
        return 1
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
        print(f"error: {e}", file=sys.stderr)
        return 1
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
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{written} entries -> {args.out}" + (f"; {bad} unreadable" if bad else ""))
    return 1 if bad else 0


def register(sub) -> None:
    c = sub.add_parser("cache", help="check, vacuum or export a call-cache file")
    csub = c.add_subparsers(dest="cache_cmd", required=True)
    from crossprofile_lib.cli.args import path_name
    k = csub.add_parser("check", help="full integrity check; exit 1 naming the problem")
    k.add_argument("path", type=path_name, help="cache file, or the folder holding calls.sqlite")
    k.set_defaults(func=_cmd_check, parser=k)
    v = csub.add_parser("vacuum", help="checkpoint and compact a healthy cache")
    v.add_argument("path", type=path_name, help="cache file, or the folder holding calls.sqlite")
    v.set_defaults(func=_cmd_vacuum, parser=v)
    e = csub.add_parser("export", help="write every readable entry as JSON lines")
    e.add_argument("path", type=path_name, help="cache file, or the folder holding calls.sqlite")
    e.add_argument("out", type=path_name, help="output .jsonl file (never the cache itself; an existing file only "
                                               "with --overwrite)")
    e.add_argument("--overwrite", action="store_true", help="replace an existing OUT file")
    e.set_defaults(func=_cmd_export, parser=e)
