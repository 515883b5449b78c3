"""Decision domains as data (SPEC section 2): the paper's 12 are the bundled default
(``resources/templates/domains.yaml``, :data:`crossprofile_lib.design.DOMAINS`); a file named ``domains.yaml`` in a
template's folder or any folder above it adds its domains for that template. The file is untrusted input, read by
the safe-input layer; its shape::

    domains:
      - airport catering contract
      - ferry operator

A folder walk never takes a ``domains.yaml`` for a template (:func:`crossprofile_lib.safety.inputs.template_paths`).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from crossprofile_lib.design import DOMAINS, DOMAINS_FILE
from crossprofile_lib.safety.inputs import TemplateError, load_yaml

#: A domains file is small (the bundled one is under 1 KiB).
MAX_BYTES = 64 * 1024
RULE = "domains file"


def read_domains(path: Path | str) -> tuple[str, ...]:
    """The domains one ``domains.yaml`` lists; a :class:`TemplateError` naming the file, the field and the rule
    ``domains file`` when it is not a mapping with a ``domains`` list of short, distinct, non-blank strings."""
    raw = load_yaml(path, MAX_BYTES, TemplateError, what="domains file")
    if not isinstance(raw, dict) or set(raw) != {"domains"}:
        raise TemplateError(path, "<file>", RULE, "a domains file holds one key, 'domains', with a list of names")
    items = raw["domains"]
    if not isinstance(items, list) or not items:
        raise TemplateError(path, "domains", RULE, "'domains' must be a non-empty list of names")
    out: list[str] = []
    for i, d in enumerate(items):
        if not isinstance(d, str) or not d.strip() or len(d) > 80 or any(c in d for c in "<>&"):
            raise TemplateError(path, f"domains[{i}]", RULE, f"{str(d)[:40]!r} is not a domain name (plain text, "
                                                             f"1-80 characters)")
        if " ".join(d.split()) in out:
            raise TemplateError(path, f"domains[{i}]", RULE, f"domain {d!r} is listed twice")
        out.append(" ".join(d.split()))
    return tuple(out)


def domain_files(template_path: Path | str) -> tuple[Path, ...]:
    """Every ``domains.yaml`` in the folder of ``template_path`` and the folders above it, nearest first."""
    folder = Path(os.path.abspath(template_path)).parent
    return tuple(d / DOMAINS_FILE for d in (folder, *folder.parents) if (d / DOMAINS_FILE).is_file())


def domains_for(template_path: Path | str) -> frozenset[str]:
    """The domains a template at ``template_path`` may name: the paper's 12 and every ``domains.yaml`` above it."""
    return _domains(domain_files(template_path), tuple(_stamp(f) for f in domain_files(template_path)))


def _stamp(f: Path) -> tuple[int, int]:
    st = f.stat()
    return st.st_mtime_ns, st.st_size


@lru_cache(maxsize=256)  # a grid reloads the same folders on every run; an edited file has a new stamp
def _domains(files: tuple[Path, ...], _stamps) -> frozenset[str]:
    out = set(DOMAINS)
    for f in files:
        out.update(read_domains(f))
    return frozenset(out)
