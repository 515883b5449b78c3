"""Checking many template files (``crossprofile validate``): :func:`validate_paths` gives each file a :class:`Verdict`
(the field and the rule when it fails; ids unique across files) and never stops at a bad file; then :func:`summary`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from crossprofile_lib.safety.inputs import TemplateError, template_paths
from crossprofile_lib.safety.markup import markup_notes, template_fields
from crossprofile_lib.task.design_check import check_classic_cell
from crossprofile_lib.task.templates import UNIQUE_ID, Template, TemplateWarning, load_template, paraphrase_count, paraphrase_set


@dataclass
class Verdict:
    """The outcome of checking one file: valid (with its warnings) or the first broken rule."""

    path: Path
    template: Optional[Template] = None
    error: Optional[TemplateError] = None
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    def line(self) -> str:
        """One line naming the file and, for a failure, the field and the rule."""
        if self.ok:
            return f"ok   {self.path} ({self.template.id})"
        return "FAIL " + " ".join(str(self.error).split())


def validate_paths(paths, n_options: int = 3, tokenizer=None, design=()) -> list[Verdict]:
    """One :class:`Verdict` per template file under ``paths``, in order; a bad file never stops the others.
    ``design``: tokenizers for the design check (:mod:`.design_check`) on 3-option templates, on the facts and on
    each complete paraphrase set (field ``facts[i].paraphrases[k]``). An id used by an earlier valid file fails
    the later one (rule ``unique template id``); an unforeseen error is a failed verdict (rule ``internal error``).
    ``paths`` matching no file raise :class:`FileNotFoundError`."""
    out: list[Verdict] = []
    seen: dict[str, Path] = {}
    for p in template_paths(paths):
        v = Verdict(p)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", TemplateWarning)
                t = load_template(p, n_options=n_options, tokenizer=tokenizer)
            if t.id in seen:
                raise TemplateError(p, "id", UNIQUE_ID, f"template id '{t.id}' also used by {seen[t.id]}")
            seen[t.id] = p
            if design and n_options == 3:
                check_classic_cell(t, design, str(p))
                for k in range(paraphrase_count(t)):  # the design holds with each paraphrase set too
                    _check_paraphrase_design(t, k, design, p)
            # markup in a title or text: valid, shown as plain text by the book (crossprofile_lib/safety/markup.py)
            v.template, v.warnings = t, [str(w.message) for w in caught] + markup_notes(template_fields(t))
        except TemplateError as e:
            v.error = e
        except Exception as e:  # noqa: BLE001 - a hostile file must not hide the others' verdicts
            v.error = TemplateError(p, "<file>", "internal error",
                                    f"{type(e).__name__}: {e} (a validator bug: please report it with the file)")
        out.append(v)
    return out


def _check_paraphrase_design(t: Template, k: int, design, p) -> None:
    """The design check on paraphrase set ``k``; a failure names ``facts[i].paraphrases[k]``."""
    try:
        check_classic_cell(paraphrase_set(t, k), design, str(p))
    except TemplateError as e:
        fld = e.field
        if fld.startswith("facts[") and fld.endswith(".text"):
            fld = fld[:-len(".text")] + f".paraphrases[{k}]"
        raise TemplateError(p, fld, e.rule, f"paraphrase set {k}: {e.detail}") from None


def summary(verdicts: list[Verdict]) -> str:
    """``N templates valid, M invalid (K domains)``."""
    ok = [v for v in verdicts if v.ok]
    domains = {v.template.domain for v in ok}
    return f"{len(ok)} templates valid, {len(verdicts) - len(ok)} invalid ({len(domains)} domains)"
