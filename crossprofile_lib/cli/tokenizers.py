"""``crossprofile tokenizers list|fetch|check``: the named tokenizers (the paper's models' vocabularies):
list them, fetch llama.cpp's vocab files (llama-cpp-python's source archive on PyPI, or ``--from`` a local
one) and rebuild them in pure Python, recheck them on llama.cpp's reference vectors (exit 1 on a mismatch).
The library is :mod:`crossprofile_lib.task.vocabs`."""

from __future__ import annotations

import sys

from crossprofile_lib.cli import args as A


def _cmd_list(args) -> int:
    from crossprofile_lib.task import vocabs
    folder = vocabs.tokenizers_dir()
    print(f"tokenizers folder: {folder}")
    for name, v in vocabs.NAMED.items():
        m = vocabs.installed(name, folder)
        state = f"installed, {m['reference_vectors_exact']}/{m['reference_vectors']} reference vectors exact" if m \
            else "not installed (crossprofile tokenizers fetch)"
        print(f"  {name:10s} {v.models}; aliases {', '.join(v.aliases)}; {v.file}: {state}")
    for name, (_, file, models) in vocabs.PACKAGED.items():
        try:
            where = str(vocabs.packaged_path(name))
        except FileNotFoundError as e:
            where = f"not available ({e})"
        print(f"  {name:10s} {models}: {where}")
    try:
        own = vocabs.user_names(folder)
    except ValueError as e:
        return A.fail(e, 1)
    for name, path in own.items():
        print(f"  {name:10s} {path} (from {folder / vocabs.USER_NAMES})")
    print("  offline    the file-free approximation offline-bpe-approx-v1 (prices labels as SmolLM2 does)")
    return 0


def _cmd_fetch(args) -> int:
    from crossprofile_lib.task import vocabs
    try:
        done = vocabs.fetch(args.names or None, sdist=args.sdist, force=args.force,
                            log=lambda s: print(s, file=sys.stderr))
    except ValueError as e:
        return A.fail(e, 1 if isinstance(e, vocabs.VocabUnavailable) else 2)
    for m in done:
        print(f"{m['name']}: {m['file']} ({m['models']}), {m['reference_vectors_exact']}/{m['reference_vectors']} "
              f"reference vectors exact -> {vocabs.tokenizers_dir()}")
    return 0


def _cmd_check(args) -> int:
    from crossprofile_lib.task import vocabs
    bad = 0
    for name in args.names or list(vocabs.NAMED):
        try:
            n, wrong = vocabs.check(name)
        except ValueError as e:
            print(f"{name}: {e}", file=sys.stderr)
            bad += 1
            continue
        if wrong:
            bad += 1
            text, want, got = wrong[0]
            print(f"{name}: {len(wrong)} of {n} reference vectors differ (first {text[:40]!r}: {got[:8]} "
                  f"instead of {want[:8]})", file=sys.stderr)
        else:
            print(f"{name}: {n}/{n} reference vectors exact")
    return 1 if bad else 0


COMMAND = "tokenizers"
HELP = "list, fetch or check the named tokenizers (qwen2.5, llama-3.1)"


def register(sub) -> None:
    from pathlib import Path
    t = sub.add_parser(COMMAND, help=HELP)
    tsub = t.add_subparsers(dest="tokenizers_cmd", required=True)
    tsub.add_parser("list", help="names, what they price, whether installed").set_defaults(func=_cmd_list)
    f = tsub.add_parser("fetch", help="get the vocab files from PyPI (llama-cpp-python's source archive), once")
    f.add_argument("names", nargs="*", help="names (default: all)")
    f.add_argument("--from", dest="sdist", type=Path, default=None,
                   help="a llama_cpp_python-<version>.tar.gz already on this machine (no download)")
    f.add_argument("--force", action="store_true", help="fetch and rebuild even when installed")
    f.set_defaults(func=_cmd_fetch)
    c = tsub.add_parser("check", help="recheck installed tokenizers on llama.cpp's reference vectors")
    c.add_argument("names", nargs="*", help="names (default: all)")
    c.set_defaults(func=_cmd_check)
