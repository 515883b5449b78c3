"""The unbudgeted controls and reference memories: ``EMPTY``, ``ALL``, ``REF`` (the whole
transcript), ``private-only`` (claims one speaker stated) and ``shared-only`` (the others)."""

from __future__ import annotations

from crossprofile_lib.policies.copy import claims_memory
from crossprofile_lib.policies.registry import Policy, register
from crossprofile_lib.task.budgets import memory_tokens
from crossprofile_lib.task.memory import Memory


def _empty(spec, x) -> Memory:
    return Memory(spec.name, "empty", (), (), "", 0)


def _keep(pred):
    def build(spec, x) -> Memory:
        cl = x.claims
        return claims_memory(spec, cl, [i for i, c in enumerate(cl.claims) if pred(c)], x.tokenizer, x.rng)
    return build


def _ref(spec, x) -> Memory:
    if x.transcript is None:
        raise ValueError("REF needs the transcript")
    text = x.transcript.render()
    cl = x.claims
    return Memory(spec.name, "transcript", tuple(cl.claims), tuple(c.count for c in cl.claims), text,
                  memory_tokens(text, x.tokenizer))


register(Policy("EMPTY", "unbudgeted", "no memory", build=_empty))
register(Policy("ALL", "unbudgeted", "every claim", build=_keep(lambda c: True)))
register(Policy("REF", "unbudgeted", "the transcript", needs=frozenset({"transcript"}), build=_ref))
register(Policy("private-only", "unbudgeted", "claims one speaker stated", build=_keep(lambda c: c.count == 1)))
register(Policy("shared-only", "unbudgeted", "claims several speakers stated", build=_keep(lambda c: c.count > 1)))
