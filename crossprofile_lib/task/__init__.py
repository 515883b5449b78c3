"""The task wing: one decision task of the paper, from its template to the memory a decision sees (templates,
variants, discussion, tokenizers, budgets, memory, provenance, evidence, the decision interface); it calls no
policy, backend or runner.
"""
