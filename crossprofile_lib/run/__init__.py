"""The run wing: a grid of decisions from templates to a results folder.

:mod:`.config` is the run configuration (:class:`~.config.RunConfig`, validated); :mod:`.capabilities` the one
table of which backend can run which policy; :mod:`.pipeline` is the one chain task -> discussion -> claim
list -> memories; :mod:`.runner` runs a grid and writes :mod:`.results` (the tidy table) and the run header
(:mod:`.header`, shared with HiddenBench's); :mod:`.rebuild` rebuilds a run's memories as
choice data for the social-proof fit; :mod:`.relevance_filter` simulates a noisy relevance filter.
"""
