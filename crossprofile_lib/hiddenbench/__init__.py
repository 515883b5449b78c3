"""HiddenBench (SPEC section 9): the controlled and natural protocols on the public task format."""

from crossprofile_lib.hiddenbench.ablations import ABLATIONS, DEFAULT_ABLATIONS, get_ablation, parse_ablations
from crossprofile_lib.hiddenbench.common import HB_BUDGETS, HB_POLICIES, task_view
from crossprofile_lib.hiddenbench.importer import (
           ENV_VAR,
           FIXTURE_PATH,
           HiddenBenchData,
           HiddenBenchError,
           HiddenBenchTask,
           load_hiddenbench,
           select_tasks,
)
from crossprofile_lib.hiddenbench.run import HBConfig, iter_artefacts, read_tables, run_hiddenbench
