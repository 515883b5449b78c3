"""The run wing: a grid of decisions from templates to a results folder (:mod:`.config`, :mod:`.pipeline` with the
capability table, :mod:`.runner`, :mod:`.results` with the run header, :mod:`.rebuild`, :mod:`.relevance_filter`).
"""
