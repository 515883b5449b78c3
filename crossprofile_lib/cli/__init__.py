"""The ``crossprofile`` command line.

Each command lives in the module named after it, which names it (``COMMAND``, its ``--help`` line ``HELP``) and
adds it with ``register(sub)``; :data:`COMMANDS` lists them in ``--help`` order. Shared argument types: :mod:`.args`.
"""

from __future__ import annotations

import argparse
import sys

#: Command modules (``crossprofile_lib.cli.<name>``), each with ``register(sub)``.
COMMANDS = ("validate", "run", "composition", "hiddenbench", "stats", "cache", "fit_paper", "book", "tokenizers",
            "hf_folder")


def build_parser(argv=None) -> argparse.ArgumentParser:
    """The parser of every command; given ``argv``, only the command it names gets its options (the others
    a line in ``--help``), so a command never pays for importing what the others' options need."""
    import importlib

    from crossprofile_lib.cli.args import plain, refuse_repeats
    p = argparse.ArgumentParser(prog="crossprofile", description=plain(__doc__.splitlines()[0]))
    sub = p.add_subparsers(dest="cmd", required=True)
    wanted = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    for name in COMMANDS:
        m = importlib.import_module(f"{__name__}.{name}")
        if wanted is None or wanted == m.COMMAND:
            m.register(sub)
        else:
            sub.add_parser(m.COMMAND, help=m.HELP)
    refuse_repeats(p)  # an option given twice is refused, never silently the last one
    return p


def main(argv=None) -> int:
    """Run one command; returns its exit status (2: a bad command line, before any work; 1: a run-time
    failure; 130: Ctrl-C). No failure ends in a traceback (``CROSSPROFILE_TRACEBACK=1`` shows one): what a
    command does not report is reported here, redacted, anything unforeseen as an ``internal error``.
    As the process's own command (``argv`` None), threads a policy file left running do not keep it alive
    (:func:`_leave_policy_threads`)."""
    code = _main(argv)
    if argv is None:
        _leave_policy_threads(code)
    return code


def _leave_policy_threads(code: int) -> None:
    """When policy files of the user's were loaded and threads they started are still running (not daemon
    threads, so Python would wait for them forever), say so and end the process now with ``code``: the
    command's work is done and written."""
    guard = sys.modules.get("crossprofile_lib.policies.guard")
    if guard is None or not guard.PLUGINS:
        return
    import threading
    left = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if not left:
        return
    import os
    files = ", ".join(sorted({s.spec for s in guard.PLUGINS.values()}))
    print(f"notice: {len(left)} thread(s) started by the policy file(s) {files} still running "
          f"({', '.join(t.name for t in left[:5])}); the command is done and does not wait for them",
          file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _main(argv=None) -> int:
    """:func:`main`'s work, its console redacted: every secret the command line hands over (a key in an option, a
    mistyped ``--api-key=KEY``, a base URL's userinfo) and every key in the environment is masked in everything
    printed (:class:`~crossprofile_lib.safety.redact.RedactingStream`)."""
    from crossprofile_lib.safety.redact import RedactingStream, argv_secrets, known_secrets, register_secret
    argv = sys.argv[1:] if argv is None else list(argv)
    register_secret(*argv_secrets(argv))
    if not known_secrets():
        return _command(argv)
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(out), RedactingStream(err)
    try:
        return _command(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _command(argv) -> int:
    import os

    from crossprofile_lib.cli.args import ArgError, fail, policy_file_values, preload_policy_files
    from crossprofile_lib.safety.redact import redact_text
    if policy_file_values(argv):  # your own policies are registered before --policies is parsed
        from crossprofile_lib.policies.plugins import PolicyFileError
        try:
            preload_policy_files(argv)
        except (ArgError, ValueError) as e:  # ValueError: also a bad $CROSSPROFILE_POLICY_TIMEOUT
            where = ("argument --policy-timeout: " if isinstance(e, ArgError)
                     else "argument --policy-file: " if isinstance(e, PolicyFileError) else "")
            print(f"crossprofile: error: {where}{e}. Nothing was run.", file=sys.stderr)
            return 2
    try:
        args = build_parser(argv).parse_args(argv)
        return args.func(args)
    except SystemExit as e:  # argparse's usage errors and --help, also from a command's parser.error
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C); finished model calls are in the call cache", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001  (the last resort: a message, never a traceback)
        if os.environ.get("CROSSPROFILE_TRACEBACK"):
            raise
        msg = redact_text(" ".join(str(e).split()))[:2000]
        if isinstance(e, MemoryError):
            return fail(f"out of memory ({msg or 'MemoryError'}); use smaller options", 1)
        if isinstance(e, OSError):
            where = f"{e.filename}: " if getattr(e, "filename", None) and str(e.filename) not in msg else ""
            return fail(f"{where}{msg}", 1)
        if isinstance(e, ValueError):
            return fail(msg, 2)
        print(f"internal error (a bug: please report it with the command line): {type(e).__name__}: {msg}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
