"""CrossProfile: which evidence a memory keeps decides an LLM group's decision.

The library reproduces and extends "Rare, Relevant, and Still Wrong: How Memory Fails LLM
Group Decisions". Modules are named after the paper's concepts: :mod:`templates`,
:mod:`variants`, :mod:`discussion`, :mod:`budgets`, :mod:`policies`, :mod:`provenance`,
:mod:`decider` (the reference decider), :mod:`evidence`, :mod:`runner`, :mod:`results`.
"""

__version__ = "0.1.0"
