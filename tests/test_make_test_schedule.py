"""How ``make test`` shares the tests between its workers (tests/conftest.py, ``--dist loadgroup``): the tests
reading the one quick book go to one worker together, every other test with its module, so that a module's
``scope="module"`` fixture is built once; the longest units are sent out first."""

from __future__ import annotations

from pathlib import Path

import conftest

ROOT = Path(__file__).resolve().parents[1]


def test_a_test_goes_with_its_module_unless_it_reads_the_quick_book():
    unit = conftest.work_unit
    assert unit("tests/test_cli_errors.py::test_bad_command_line[seeds-not-integer]") == "tests/test_cli_errors.py"
    assert unit("tests/test_cli_errors.py::test_bad_command_line[seeds-2^32]") == "tests/test_cli_errors.py"
    assert unit("tests/test_runner.py::TestX::test_y") == "tests/test_runner.py"  # a class goes with its module too
    # the quick book's readers, from three modules, are one unit; the rest of their modules are not in it
    assert unit("tests/test_book_browser.py::test_every_page_renders_offline_legibly") == conftest.QUICK_BOOK_GROUP
    assert unit("tests/test_notebooks.py::test_chapter_ran_whole_at_the_quick_parameters[intro]") \
        == conftest.QUICK_BOOK_GROUP
    assert unit("tests/test_notebooks.py::test_notebook_runs_under_nbval[intro]") == "tests/test_notebooks.py"
    assert unit("tests/test_site.py::test_pages_workflow_is_valid") == "tests/test_site.py"
    # the README recipe's build IS the quick book: its test goes with the book's readers
    assert unit("tests/test_site.py::test_readme_quick_recipe_and_the_pages_workflow_on_one_fresh_clone") \
        == conftest.QUICK_BOOK_GROUP


def test_the_long_units_name_existing_modules():
    """A renamed module would silently lose its place at the front of the queue."""
    for u in conftest.LONG_UNITS:
        assert u == conftest.QUICK_BOOK_GROUP or (ROOT / u).is_file(), u
    for prefix in conftest.QUICK_BOOK_TESTS:
        assert (ROOT / prefix.split("::")[0]).is_file(), prefix
