"""Untrusted input files: the one safe-input layer every file argument goes through.

Templates, HiddenBench JSON, ``--prereg``, chat-template and tokenizer files are read by :func:`read_bytes` /
:func:`read_text`, then parsed by :func:`load_yaml` or :func:`load_json`. A failure is an :class:`InputError`
(a ``ValueError``) naming the file, the field and the rule (callers subclass it). The rules, in order:

* ``file (not a regular file)``, ``file (unreadable)``: a folder, FIFO, ``/dev/zero`` or socket is refused
  before a byte is read (opened non-blocking, checked with ``fstat``);
* ``file (size limit)``: the kind's cap (:data:`MAX_BYTES` for templates), before and while reading;
* ``file (encoding)``: UTF-8; a UTF-8 byte-order mark is dropped (the **BOM rule**); UTF-16/32 are named;
* ``file (control characters)``: no control character but tab and newline, no invisible format, private-use,
  surrogate or unassigned code point; ``yaml``/``json (control characters)``: the same in escaped values;
* YAML (:class:`StrictLoader`): ``schema (YAML syntax)``, one document; ``yaml (anchor or alias)``, ``yaml
  (merge key)``, ``yaml (tag)`` (core tags only), ``yaml (nesting depth)``, ``yaml (duplicate key)``,
  ``yaml (key type)``, ``schema (YAML value)``;
* JSON (:func:`load_json`): ``json (syntax)``, ``json (nesting depth)`` (on the text, before parsing),
  ``json (duplicate key)``, ``json (number)`` (no NaN/Infinity, no integer over 40 digits, no float overflow).

Template files also need the extension ``.yaml`` (``file (extension)``). The file, character and JSON rules
live in :mod:`.text_input`.
"""

from __future__ import annotations

import math
import numbers
import os
from pathlib import Path
from typing import Iterable, Optional

import yaml

from crossprofile_lib.design import DOMAINS_FILE
from crossprofile_lib.paths import resolve_template_path
from crossprofile_lib.safety.text_input import (  # noqa: F401  (re-exported: the file, character and JSON rules)
    CHAT_TEMPLATE_MAX_BYTES,
    HIDDENBENCH_MAX_BYTES,
    MAX_BYTES,
    PREREG_MAX_BYTES,
    TOKENIZER_CONFIG_MAX_BYTES,
    InputError,
    TemplateError,
    _field,
    bad_char,
    check_json_value,
    decode_text,
    describe_char,
    input_file_problem,
    json_depth,
    load_json,
    parse_json,
    path_problem,
    read_bytes,
    read_text,
)

MAX_DEPTH = 8           # a template needs 3 (root -> facts -> fact -> value)
SUFFIX = ".yaml"
_CANDIDATE_SUFFIXES = (".yaml", ".yml")  # what a folder walk picks up (".yml" only to refuse it)
_CORE_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map"))


class _Refused(Exception):
    def __init__(self, rule: str, field: str, message: str):
        self.rule, self.field, self.message = rule, field, message
        super().__init__(message)


def _where(mark) -> str:
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


# --- YAML ------------------------------------------------------------------------------------

class StrictLoader(yaml.SafeLoader):
    """A SafeLoader that refuses anchors/aliases, non-core tags, deep nesting and duplicate keys; each
    refusal names its field (``facts[3].role``). ``max_depth``: levels of collections allowed."""

    max_depth = MAX_DEPTH

    def __init__(self, stream):
        super().__init__(stream)
        self._path: list = []

    def _field(self, extra=None) -> str:
        return _field(self._path + ([extra] if extra is not None else []))

    def compose_node(self, parent, index):
        if isinstance(parent, yaml.SequenceNode):
            step = index
        elif isinstance(parent, yaml.MappingNode) and isinstance(index, yaml.ScalarNode):
            step = index.value
        else:  # the root, or a mapping key
            step = None
        if step is not None:
            self._path.append(step)
        try:
            event = self.peek_event()
            self._check_event(event)
            node = super().compose_node(parent, index)
            if isinstance(node, yaml.MappingNode):
                self._check_keys(node)
            elif isinstance(node, yaml.ScalarNode):
                bad = bad_char(node.value)
                if bad:
                    raise _Refused("yaml (control characters)", self._field(),
                                   f"{describe_char(bad[1])} in the value{_where(node.start_mark)}: control, "
                                   "invisible and unassigned characters are not allowed")
            return node
        finally:
            if step is not None:
                self._path.pop()

    def _check_event(self, event) -> None:
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused("yaml (anchor or alias)", self._field(),
                           "anchors (&) and aliases (*) are not allowed" + _where(event.start_mark))
        tag = getattr(event, "tag", None)
        if tag is not None and tag not in _CORE_TAGS:
            raise _Refused("yaml (tag)", self._field(),
                           f"tag '{tag}' is not allowed (only plain YAML values)" + _where(event.start_mark))
        if (isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent))
                and len(self._path) >= self.max_depth):
            raise _Refused("yaml (nesting depth)", self._field(),
                           f"nested more than {self.max_depth} levels deep" + _where(event.start_mark))

    def _check_keys(self, node: yaml.MappingNode) -> None:
        seen: dict[str, object] = {}
        for key, _ in node.value:
            if key.tag == "tag:yaml.org,2002:merge":
                raise _Refused("yaml (merge key)", self._field("<<"),
                               "merge keys (<<) are not allowed" + _where(key.start_mark))
            if not isinstance(key, yaml.ScalarNode) or key.tag != "tag:yaml.org,2002:str":
                shown = key.value if isinstance(key, yaml.ScalarNode) else f"a {key.id}"
                raise _Refused("yaml (key type)", self._field(str(shown)),
                               f"mapping key {shown!r} is not a plain string" + _where(key.start_mark))
            if key.value in seen:
                raise _Refused("yaml (duplicate key)", self._field(key.value),
                               f"key '{key.value}' appears twice in one mapping (first{_where(seen[key.value])},"
                               f" again{_where(key.start_mark)}); YAML would silently keep the last")
            seen[key.value] = key.start_mark


def parse_yaml(path: Path | str, text: str, error=TemplateError, max_depth: int = MAX_DEPTH):
    """Parse ``text`` (from ``path``) with :class:`StrictLoader`; refusals become ``error``."""
    loader = None
    try:
        loader = StrictLoader(text)  # a str is checked here, at once, for characters YAML never allows (ReaderError)
        loader.max_depth = max_depth
        return loader.get_single_data()
    except _Refused as e:
        raise error(path, e.field, e.rule, e.message) from None
    except yaml.MarkedYAMLError as e:
        what = f"{e.context}: {e.problem}" if e.context else str(e.problem)
        raise error(path, "<file>", "schema (YAML syntax)", f"not valid YAML: {what}{_where(e.problem_mark)}") from None
    except yaml.YAMLError as e:
        raise error(path, "<file>", "schema (YAML syntax)", "not valid YAML: " + " ".join(str(e).split())) from None
    except (ValueError, OverflowError, RecursionError) as e:  # e.g. an integer of 10,000 digits
        raise error(path, "<file>", "schema (YAML value)",
                    "a value cannot be read: " + " ".join(str(e).split())[:200]) from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml(path: Path | str, max_bytes: int, error=InputError, max_depth: int = MAX_DEPTH, what: str = "file"):
    """A YAML input file through every rule above (regular file .. strict YAML)."""
    return parse_yaml(path, read_text(path, max_bytes, error, what), error, max_depth)


# --- template files --------------------------------------------------------------------------

def read_template_text(path: Path | str) -> str:
    """The text of a template file, after the file guards (extension .. control characters)."""
    path = Path(path)
    if path.suffix != SUFFIX:
        raise TemplateError(path, "<file>", "file (extension)",
                            f"template files end in '{SUFFIX}' (found '{path.suffix or 'no extension'}'); "
                            f"rename the file")
    return read_text(path, MAX_BYTES, TemplateError, "template file")


def _walk(folder: Path) -> list[Path]:
    try:  # hidden files and folders are skipped
        return sorted(p for p in folder.rglob("*") if p.suffix.lower() in _CANDIDATE_SUFFIXES and p.name != DOMAINS_FILE
                      and not any(part.startswith(".") for part in p.relative_to(folder).parts) and not p.is_dir())
    except OSError as e:  # a symlink loop, a folder that cannot be listed
        raise FileNotFoundError(f"folder '{folder}' cannot be walked ({e.strerror or e})") from None


def template_paths(paths: Iterable[Path | str] | Path | str) -> list[Path]:
    """Files, folders (every ``*.yaml`` and ``*.yml`` under it, hidden ones and ``domains.yaml`` lists skipped;
    ``.yml`` is then refused, never skipped) and globs as template paths, in order, each once. A path matching nothing
    raises :class:`FileNotFoundError`; a missing ``templates/...`` means the bundled templates."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: list[Path] = []
    for p in paths:
        problem = path_problem(p)
        if problem:
            raise FileNotFoundError(f"'{p}': {problem}")
        p = resolve_template_path(p)
        if p.is_dir():
            found = _walk(p)
            if not found:
                raise FileNotFoundError(f"folder '{p}' holds no template file (*{SUFFIX})")
            out.extend(found)
        elif p.exists() or p.is_symlink():
            out.append(p)
        else:
            try:
                matches = sorted(Path(p.anchor).glob(str(p.relative_to(p.anchor))))  # anchor "" of a relative path: "."
            except (ValueError, OSError) as e:  # "**" misused, an unreadable folder
                raise FileNotFoundError(f"no template file matches '{p}' ({e})") from None
            if not matches:
                raise FileNotFoundError(f"no template file matches '{p}'")
            for m in matches:
                out.extend(_walk(m) if m.is_dir() else [m] if m.name != DOMAINS_FILE else [])  # a domains list
    unique: dict[str, Path] = {}  # each file once, by its real path
    for p in out:
        unique.setdefault(os.path.realpath(p), p)
    return list(unique.values())


# --- option values -----------------------------------------------------------------------------

def option_bool(owner: str, name: str, value) -> bool:
    """``value`` of option ``name`` (of ``owner``) as a bool (``True``/``False``, or the strings ``true``/``false`` in
    any case); else ``ValueError`` naming the option and the rule (``1``, ``yes`` or ``"no"`` are not guessed at)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"{owner}: option {name}={value!r}: must be true or false")


def option_number(owner: str, name: str, value, *, low: Optional[float] = None, high: Optional[float] = None,
                  integer: bool = False, allow_inf: bool = False, above: bool = False):
    """``value`` of option ``name`` (of ``owner``) as a number: real (not a bool or string), finite unless
    ``allow_inf`` (NaN never), integral when ``integer``, in ``[low, high]`` (``above``: strictly above
    ``low``); else ``ValueError`` naming the option and the rule."""
    ok_type = isinstance(value, numbers.Integral if integer else numbers.Real) and not isinstance(value, bool)
    if integer and isinstance(value, float) and value.is_integer():
        ok_type, value = True, int(value)
    if not ok_type:
        raise ValueError(f"{owner}: option {name}={value!r}: must be {'an integer' if integer else 'a number'}, "
                         f"not {type(value).__name__}")
    v = int(value) if integer else float(value)
    if not integer and (math.isnan(v) or (math.isinf(v) and not allow_inf)):
        raise ValueError(f"{owner}: option {name}={value!r}: must be a finite number"
                         + (" or inf" if allow_inf else ""))
    if low is not None and (v <= low if above else v < low):
        raise ValueError(f"{owner}: option {name}={value!r}: must be {'above' if above else 'at least'} {low:g}")
    if high is not None and v > high:
        raise ValueError(f"{owner}: option {name}={value!r}: must be at most {high:g}")
    return v
