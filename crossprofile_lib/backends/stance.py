"""The stance call of the balance-aware memory (``BAL``, :mod:`crossprofile_lib.policies.bal`).

One call per claim list: the model sees the task description, the lettered options and the
claims' texts (numbered; never roles, labels or speaker counts) and answers, per claim, the
option it is about, ``for`` or ``against``, and whether it bears on a stated criterion, as
JSON ``{"stances": [{"n", "option", "direction", "criterion"}]}`` (prompt
``prompts/stance_v1.txt``). A claim the answer leaves out or garbles gets no stance; ``BAL``
then keeps it only after every stanced claim (see :mod:`crossprofile_lib.policies.bal`).
"""

from __future__ import annotations

import json
import re
from typing import Optional, Sequence

from crossprofile_lib import prompts as P
from crossprofile_lib.backends.base import ChatRequest
from crossprofile_lib.task.evidence import Stance

STANCE = "stance_v1.txt"


def stance_schema(n: int, letters: Sequence[str]) -> dict:
    item = {"type": "object", "additionalProperties": False,
            "required": ["n", "option", "direction", "criterion"],
            "properties": {"n": {"type": "integer", "minimum": 1, "maximum": n},
                           "option": {"type": "string", "enum": list(letters)},
                           "direction": {"type": "string", "enum": ["for", "against"]},
                           "criterion": {"type": "boolean"}}}
    return {"type": "object", "additionalProperties": False, "required": ["stances"],
            "properties": {"stances": {"type": "array", "maxItems": n, "items": item}}}


def stance_request(task, claims: Sequence, order: Sequence[str], constrained: bool) -> ChatRequest:
    t = task.template
    facts = "\n".join(f"{i + 1}. {c.text}" for i, c in enumerate(claims))
    prompt = P.render(STANCE, description=t.description, options=P.lettered_options(t, order), facts=facts)
    letters = P.letters_for(order)
    return ChatRequest((prompt.message(),), max_tokens=24 + 28 * len(claims), purpose="stance",
                       prompt_file=prompt.file, json_schema=stance_schema(len(claims), letters) if constrained else None)


def parse_stances(text: str, n: int, order: Sequence[str]) -> Optional[tuple[Optional[Stance], ...]]:
    """One stance (or None) per claim from the model's JSON; None when nothing parses.

    Entries with an unknown letter, direction or number are dropped; a number given twice
    keeps its first entry."""
    m = re.search(r"\{.*\}", text or "", re.DOTALL)
    if not m:
        return None
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError:
        return None
    items = obj.get("stances") if isinstance(obj, dict) else None
    if not isinstance(items, list):
        return None
    letters = P.letters_for(order)
    out: list[Optional[Stance]] = [None] * n
    for it in items:
        if not isinstance(it, dict):
            continue
        k, opt, d, crit = it.get("n"), it.get("option"), it.get("direction"), it.get("criterion")
        if not (isinstance(k, int) and 1 <= k <= n and out[k - 1] is None):
            continue
        if opt not in letters or d not in ("for", "against") or not isinstance(crit, bool):
            continue
        out[k - 1] = Stance(order[letters.index(opt)], 1 if d == "for" else -1, crit)
    return tuple(out)
