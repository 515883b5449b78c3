"""CrossProfile: which evidence a memory keeps decides an LLM group's decision.

The library reproduces and extends "Rare, Relevant, and Still Wrong: How Memory Fails LLM Group Decisions". Its
wings, from the ground floor up: :mod:`.design`, :mod:`.config`, :mod:`.paths`, :mod:`.rng`, :mod:`.safety`;
:mod:`.prompts`, :mod:`.paper_figures`; :mod:`.task`; :mod:`.policies` and :mod:`.stats`; :mod:`.backends`;
:mod:`.run`; :mod:`.hiddenbench` and :mod:`.paperfit`; :mod:`.book`; :mod:`.cli`.
"""

__version__ = "0.1.0"
