"""Inference over a results table (SPEC section 8): pure functions on arrays and frames, importing nothing of the
pipeline (the social-proof fit's choice data are rebuilt by :mod:`crossprofile_lib.run.rebuild` and handed in).
"""
