"""CrossProfile: which evidence a memory keeps decides an LLM group's decision.

The library reproduces and extends "Rare, Relevant, and Still Wrong: How Memory Fails LLM
Group Decisions". Its wings are named after the paper's stages, from the ground floor up:
:mod:`.design` (the paper's names and grids), :mod:`.config` (the configuration models' shared
types), :mod:`.paths`, :mod:`.rng`, :mod:`.safety`; :mod:`.prompts`, :mod:`.paper_figures`;
:mod:`.task` (templates, variants, discussion, budgets, memory, evidence); :mod:`.policies` and
:mod:`.stats`; :mod:`.backends` (the reference decider and the language models); :mod:`.run`
(configuration, pipeline, runner, run header, results); :mod:`.hiddenbench` and :mod:`.paperfit`;
:mod:`.book`; :mod:`.cli`.
"""

__version__ = "0.1.0"
