"""The run wing: a grid of decisions from templates to a results folder (:mod:`.config`, :mod:`.capabilities`,
:mod:`.pipeline`, :mod:`.runner`, :mod:`.results`, :mod:`.header`, :mod:`.rebuild`, :mod:`.relevance_filter`).
"""
