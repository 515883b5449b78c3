"""HiddenBench (SPEC section 9): the importer, the controlled (scripted) protocol, the natural
discussion with claim extraction, the disclosure rate and the four prompt ablations.

Modules: :mod:`config` (the run configuration, validated), :mod:`importer` (the public file format, the
fixture, ``data_source``),
:mod:`common` (the task as backends see it, budgets, memories, composition),
:mod:`controlled`, :mod:`natural`, :mod:`claims` (extraction parsing, near-duplicate merging),
:mod:`disclosure` (the "restated in full" rule), :mod:`ablations`, :mod:`measures`
(group vote, summaries, headroom, paper figures) and :mod:`run` (streaming, resuming, tables).
"""

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

__all__ = ["ABLATIONS", "DEFAULT_ABLATIONS", "ENV_VAR", "FIXTURE_PATH", "HB_BUDGETS", "HB_POLICIES", "HBConfig",
           "HiddenBenchData", "HiddenBenchError", "HiddenBenchTask", "get_ablation", "iter_artefacts",
           "load_hiddenbench", "parse_ablations", "read_tables", "run_hiddenbench", "select_tasks", "task_view"]
