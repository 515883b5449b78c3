"""The task wing: one decision task of the paper, from its template to the memory a decision sees.

Templates (:mod:`.templates`, validated by :mod:`.validate` with :mod:`.hints` and :mod:`.roleblind`),
the 2^3 attribution variants (:mod:`.variants`), the scripted discussion and its claim list
(:mod:`.discussion`), token prices and budgets (:mod:`.tokenizer`, :mod:`.budgets`), the memory type and
its speaker labels (:mod:`.memory`, :mod:`.provenance`), what a memory kept (:mod:`.evidence`) and the
decision call's interface (:mod:`.decision`). Nothing here calls a policy, a backend or the runner.
"""
