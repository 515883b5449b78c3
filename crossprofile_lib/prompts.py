"""Prompt files and the strict formatter (STYLE convention 2).

Prompts are versioned text files under ``prompts/`` (movable with ``CROSSPROFILE_PROMPTS``). :func:`render` fills
``{field}`` placeholders and fails loudly, naming the file and the field, when one is missing, unexpected or not a
plain name; every rendered prompt carries its file and the SHA-256 of its text (``sha``, 16 hex digits). The
decision prompt shows only the description, the options lettered in the seed's order and the memory (SPEC sections
6-7); no prompt names a fact's role, the answer key or the word "decoy", which :func:`render` refuses.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from crossprofile_lib.design import LETTERS
from crossprofile_lib.paths import prompts_dir

DECISION = "decision_v1.txt"
#: Decision-prompt variants selectable by name (backend option ``decision_prompt``):
#: ``labels-not-evidence`` adds that the number of members who stated a note is not evidence
#: strength (a repair the paper proposes for social proof).
DECISION_PROMPTS = {"default": DECISION, "labels-not-evidence": "decision_labels_not_evidence_v1.txt"}
FORMAT_REMINDER = "format_reminder_v1.txt"
RELEVANCE = "relevance_v1.txt"
B3_SUMMARY = "b3_summary_v1.txt"

EMPTY_MEMORY = "(no notes)"
prompt_dir = prompts_dir   # the prompt folder ($CROSSPROFILE_PROMPTS, else the bundled prompts/)
_FORBIDDEN = re.compile(r"\bdecoys?\b", re.IGNORECASE)


class PromptError(ValueError):
    """A prompt file is missing, or a render broke the strict formatter's rules."""


@dataclass(frozen=True)
class Prompt:
    file: str     # prompt file name, e.g. ``decision_v1.txt``
    text: str     # the rendered text
    sha: str      # first 16 hex digits of SHA-256(text)

    def message(self) -> dict:
        return {"role": "user", "content": self.text}


@lru_cache(maxsize=64)
def _load(folder: str, name: str) -> tuple[str, frozenset[str]]:
    path = Path(folder) / name
    if not path.exists():
        raise PromptError(f"{path}: prompt file not found (folder from CROSSPROFILE_PROMPTS or the "
                          f"repository's prompts/)")
    text = path.read_text(encoding="utf-8").rstrip("\n")
    fields = set()
    for _, fname, spec, conv in string.Formatter().parse(text):
        if fname is None:
            continue
        if not fname.isidentifier() or spec or conv:
            raise PromptError(f"{path}: placeholder '{{{fname}{'!' + conv if conv else ''}"
                              f"{':' + spec if spec else ''}}}' is not a plain field name "
                              f"(rule: placeholders are {{name}}; write literal braces as {{{{ }}}})")
        fields.add(fname)
    return text, frozenset(fields)


def fields_of(name: str) -> frozenset[str]:
    """The placeholder names of prompt file ``name``."""
    return _load(str(prompt_dir()), name)[1]


def render(name: str, /, **values) -> Prompt:
    """Fill prompt file ``name``; every placeholder needs a value and every value a placeholder."""
    folder = prompt_dir()
    text, fields = _load(str(folder), name)
    missing = sorted(fields - set(values))
    if missing:
        raise PromptError(f"{folder / name}: field '{missing[0]}' has no value "
                          f"(rule: every placeholder is filled; given: {', '.join(sorted(values)) or 'none'})")
    extra = sorted(set(values) - fields)
    if extra:
        raise PromptError(f"{folder / name}: field '{extra[0]}' is not a placeholder of this prompt "
                          f"(rule: no unused values; placeholders: {', '.join(sorted(fields))})")
    out = text.format(**{k: str(v) for k, v in values.items()})
    m = _FORBIDDEN.search(out)
    if m:
        raise PromptError(f"{folder / name}: rendered text contains the word '{m.group(0)}' "
                          f"(rule: no prompt names a fact's role)")
    return Prompt(name, out, hashlib.sha256(out.encode("utf-8")).hexdigest()[:16])


def lettered_options(template, order: Sequence[str]) -> str:
    """``A. <name>`` lines for the options in ``order`` (option ids)."""
    return "\n".join(f"{LETTERS[j]}. {template.option(o).name}" for j, o in enumerate(order))


def letters_for(order: Sequence[str]) -> tuple[str, ...]:
    return tuple(LETTERS[:len(order)])


def letters_text(letters: Sequence[str]) -> str:
    return ", ".join(letters[:-1]) + " or " + letters[-1] if len(letters) > 1 else letters[0]


def decision_prompt(task, memory, order: Sequence[str], variant: str = "default") -> Prompt:
    """The decision call (SPEC section 7): description, lettered options, memory."""
    t = task.template
    return render(DECISION_PROMPTS[variant], description=t.description, options=lettered_options(t, order),
                  memory=memory.text if memory.text.strip() else EMPTY_MEMORY,
                  letters=letters_text(letters_for(order)))


def format_reminder(order: Sequence[str]) -> Prompt:
    return render(FORMAT_REMINDER, letters=letters_text(letters_for(order)))


def relevance_prompt(task, claims: Sequence, order: Sequence[str]) -> Prompt:
    """The relevance filter: description, options and the claims' texts, numbered from 1."""
    t = task.template
    facts = "\n".join(f"{i + 1}. {c.text}" for i, c in enumerate(claims))
    return render(RELEVANCE, description=t.description, options=lettered_options(t, order), facts=facts)
