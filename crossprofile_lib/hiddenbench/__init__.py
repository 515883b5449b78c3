"""HiddenBench (SPEC section 9): the controlled and natural protocols on the public task format (the runner:
:mod:`.run`; nothing is imported here, so the command line's parser reads its choices without pandas)."""
