"""HiddenBench (SPEC section 9): the controlled and natural protocols on the public task format."""

from crossprofile_lib.hiddenbench.ablations import DEFAULT_ABLATIONS
from crossprofile_lib.hiddenbench.importer import FIXTURE_PATH
from crossprofile_lib.hiddenbench.run import HBConfig, iter_artefacts, read_tables, run_hiddenbench
