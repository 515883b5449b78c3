"""``python -m crossprofile_lib.book.prefetch --reference-only``: the reference decider's runs of the
book's default parameters, on every core, before the build needs them (what ``make book`` runs while
the embedded engine installs). The work is :func:`crossprofile_lib.book.schedule.main`."""

from crossprofile_lib.book.schedule import main

if __name__ == "__main__":
    raise SystemExit(main())
