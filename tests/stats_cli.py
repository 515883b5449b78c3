"""Run ``crossprofile stats`` in-process for a test and return ``(exit code, stdout, stderr)``."""

from crossprofile_lib.cli import main


def run_stats(capsys, *args):
    capsys.readouterr()
    rc = main(["stats", *map(str, args)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err
