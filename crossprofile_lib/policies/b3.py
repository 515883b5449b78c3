"""``B3``: the model's evidence-preserving summary of the transcript (SPEC section 6): the prompt
(``prompts/b3_summary_v1.txt``), the word limit ``max(1, floor(B / 1.3))``, the cut of a summary over budget (longest
word prefix that fits; ``Memory.truncated``) and which claims a summary keeps (:func:`summary_kept`). The model call is
the caller's ``summarise(prompt, max_tokens)``; decoding is greedy (no draws from ``rng``).
"""

from __future__ import annotations

import re
from typing import Sequence

from crossprofile_lib import prompts as P
from crossprofile_lib.policies.registry import Policy, register
from crossprofile_lib.task.budgets import memory_tokens
from crossprofile_lib.task.decision import option_order
from crossprofile_lib.task.memory import Memory

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("the a an and or of to in on for at by with from its it is was were has had that this "
                  "than per".split())
#: a summary is cut to the budget anyway: generation stops this many tokens past it
EXTRA_TOKENS = 32


def word_limit(budget_tokens: int) -> int:
    """SPEC section 6: at most ``max(1, floor(B / 1.3))`` words for a budget of B tokens."""
    return max(1, (int(budget_tokens) * 10) // 13)  # exact: floor(B / 1.3) without float error


def summary_prompt(task, transcript, budget_tokens: int) -> tuple[P.Prompt, int]:
    """The B3 prompt for one task and budget, and the generation's token cap."""
    t = task.template
    order = option_order(task)
    prompt = P.render(P.B3_SUMMARY, description=t.description, options=P.lettered_options(t, order),
                      transcript=transcript.render(), word_limit=word_limit(budget_tokens))
    return prompt, int(budget_tokens) + EXTRA_TOKENS


def summary_kept(summary: str, claims: Sequence) -> list[int]:
    """Claims a summary keeps, by a documented string-matching rule: a claim is kept when at least
    60% of its content words (lower-cased, stop words dropped) occur in the summary."""
    have = set(_WORD.findall(summary.lower()))
    kept = []
    for i, c in enumerate(claims):
        words = [w for w in _WORD.findall(c.text.lower()) if w not in _STOP]
        if words and sum(w in have for w in words) >= 0.6 * len(words):
            kept.append(i)
    return kept


def cut_to_budget(text: str, budget: int, tokenizer) -> tuple[str, bool]:
    """Longest word prefix of ``text`` (line breaks kept) that fits ``budget`` tokens."""
    if memory_tokens(text, tokenizer) <= budget:
        return text, False
    parts = re.split(r"(\s+)", text)
    words = parts[0::2]
    lo, hi = 0, len(words)
    while lo < hi:  # largest k with prefix(k) fitting
        k = (lo + hi + 1) // 2
        if memory_tokens("".join(parts[:2 * k - 1]).strip(), tokenizer) <= budget:
            lo = k
        else:
            hi = k - 1
    return "".join(parts[:2 * lo - 1]).strip() if lo else "", True


def build_b3(spec, x) -> Memory:
    """The summary ``x.summarise`` returns for the B3 prompt, cut to ``x.budget`` if it runs over;
    ``kept`` lists the claims it restates."""
    if x.summarise is None:
        raise ValueError("B3 is a generated summary: it needs a model backend, not the reference decider")
    if x.budget is None:
        raise ValueError(f"policy '{spec.name}' needs a token budget")
    prompt, max_tokens = summary_prompt(x.task, x.transcript, x.budget)
    res = x.summarise(prompt, max_tokens)
    meta = {"prompt_file": prompt.file, "prompt_sha": prompt.sha, "cached": res.cached,
            "error": res.error or "", "word_limit": word_limit(x.budget)}
    text = " ".join((res.text or "").split()) if res.error is None else ""
    text, truncated = cut_to_budget(text, int(x.budget), x.tokenizer)
    kept = tuple(x.claims.claims[i] for i in summary_kept(text, x.claims.claims))
    return Memory(spec.name, "summary" if text else "empty", kept, tuple(1 for _ in kept), text,
                  memory_tokens(text, x.tokenizer), truncated, meta)


register(Policy("B3", "generated", "the model's summary", needs=frozenset({"transcript", "summarise"}),
                source="model", random=True, build=build_b3))
