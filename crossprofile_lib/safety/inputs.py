"""Template files: finding them and reading them safely, before any rule is applied.

A template file is untrusted input. Before its text reaches the schema it must pass, in order
(each failure is a :class:`TemplateError` naming the file, the field and the rule):

* ``file (extension)``: the name ends in ``.yaml`` (``.yml`` and others are refused, so one
  folder never mixes two spellings and nothing is skipped silently);
* ``file (not a regular file)``, ``file (unreadable)``;
* ``file (size limit)``: at most :data:`MAX_BYTES` (checked before parsing);
* ``file (encoding)``: UTF-8 (a UTF-8 byte-order mark is tolerated; UTF-16/32 are named);
* ``file (control characters)``: no NUL or other control character except tab and newline,
  no invisible format character (zero-width space, bidi override, ...), no private-use or
  unassigned code point; ``yaml (control characters)``: the same for values written with
  escapes (``"\\0"``, ``"\\u200b"``), naming the field;
* ``schema (YAML syntax)``: well-formed YAML, one document;
* ``yaml (anchor or alias)``: anchors and aliases are refused (no alias bombs); so are merge
  keys, ``yaml (merge key)``;
* ``yaml (tag)``: only the core tags ``!!str !!int !!float !!bool !!null !!seq !!map``;
* ``yaml (nesting depth)``: at most :data:`MAX_DEPTH` levels of collections;
* ``yaml (duplicate key)``: a key appears once per mapping (otherwise the last would win);
* ``yaml (key type)``: mapping keys are plain strings;
* ``schema (YAML value)``: a value YAML cannot turn into data (an integer of 10,000 digits).
"""

from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path
from typing import Iterable

import yaml

from crossprofile_lib.paths import resolve_template_path

MAX_BYTES = 64 * 1024   # the largest real template is under 4 KiB
MAX_DEPTH = 8           # a template needs 3 (root -> facts -> fact -> value)
SUFFIX = ".yaml"
_CANDIDATE_SUFFIXES = (".yaml", ".yml")  # what a folder walk picks up (".yml" only to refuse it)
_CORE_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map"))
_ALLOWED_CONTROLS = frozenset("\t\n\r")
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn", "Cs"})


class TemplateError(ValueError):
    """A template broke a rule. ``str()`` names the file, the field and the rule."""

    def __init__(self, path, field: str, rule: str, message: str):
        self.path, self.field, self.rule, self.detail = str(path), field, rule, message
        super().__init__(f"{path}: field '{field}': {rule}: {message}")


class _Refused(Exception):
    def __init__(self, rule: str, field: str, message: str):
        self.rule, self.field, self.message = rule, field, message
        super().__init__(message)


def _where(mark) -> str:
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


class StrictLoader(yaml.SafeLoader):
    """A SafeLoader that refuses anchors/aliases, non-core tags, deep nesting and duplicate keys.

    It keeps the path of the node being composed, so every refusal names its field
    (``facts[3].role``) the way schema errors do.
    """

    def __init__(self, stream):
        super().__init__(stream)
        self._path: list = []

    def _field(self, extra=None) -> str:
        parts = self._path + ([extra] if extra is not None else [])
        out = ""
        for p in parts:
            out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
        return out or "<file>"

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
                bad = _bad_char(node.value)
                if bad:
                    raise _Refused("yaml (control characters)", self._field(),
                                   f"{_describe_char(bad[1])} in the value{_where(node.start_mark)}: control, "
                                   "invisible and unassigned characters are not allowed")
            return node
        finally:
            if step is not None:
                self._path.pop()

    def _check_event(self, event) -> None:
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused("yaml (anchor or alias)", self._field(),
                           "anchors (&) and aliases (*) are not allowed in templates" + _where(event.start_mark))
        tag = getattr(event, "tag", None)
        if tag is not None and tag not in _CORE_TAGS:
            raise _Refused("yaml (tag)", self._field(),
                           f"tag '{tag}' is not allowed (only plain YAML values)" + _where(event.start_mark))
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)) and len(self._path) >= MAX_DEPTH:
            raise _Refused("yaml (nesting depth)", self._field(),
                           f"nested more than {MAX_DEPTH} levels deep" + _where(event.start_mark))

    def _check_keys(self, node: yaml.MappingNode) -> None:
        seen: dict[str, object] = {}
        for key, _ in node.value:
            if key.tag == "tag:yaml.org,2002:merge":
                raise _Refused("yaml (merge key)", self._field("<<"),
                               "merge keys (<<) are not allowed in templates" + _where(key.start_mark))
            if not isinstance(key, yaml.ScalarNode) or key.tag != "tag:yaml.org,2002:str":
                shown = key.value if isinstance(key, yaml.ScalarNode) else f"a {key.id}"
                raise _Refused("yaml (key type)", self._field(str(shown)),
                               f"mapping key {shown!r} is not a plain string" + _where(key.start_mark))
            if key.value in seen:
                raise _Refused("yaml (duplicate key)", self._field(key.value),
                               f"key '{key.value}' appears twice in one mapping (first{_where(seen[key.value])},"
                               f" again{_where(key.start_mark)}); YAML would silently keep the last")
            seen[key.value] = key.start_mark


def _bad_char(text: str):
    """``(index, char)`` of the first control, invisible, private-use or unassigned character."""
    for i, ch in enumerate(text):
        if ch in _ALLOWED_CONTROLS or ch.isascii() and ch.isprintable():
            continue
        if unicodedata.category(ch) in _BAD_CATEGORIES:
            return i, ch
    return None


def _describe_char(ch: str) -> str:
    return f"character U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')}, category {unicodedata.category(ch)})"


def _check_text(path, text: str) -> None:
    bad = _bad_char(text)
    if bad:
        i, ch = bad
        line = text.count("\n", 0, i) + 1
        col = i - (text.rfind("\n", 0, i) + 1) + 1
        raise TemplateError(path, "<file>", "file (control characters)",
                            f"{_describe_char(ch)} at line {line}, column {col}: control, invisible and "
                            "unassigned characters are not allowed")


def read_template_text(path: Path | str) -> str:
    """The text of a template file, after the file guards (extension .. control characters)."""
    path = Path(path)
    if path.suffix != SUFFIX:
        raise TemplateError(path, "<file>", "file (extension)",
                            f"template files end in '{SUFFIX}' (found '{path.suffix or 'no extension'}'); "
                            f"rename the file")
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise TemplateError(path, "<file>", "file (not a regular file)", "not a regular file")
        if st.st_size > MAX_BYTES:
            raise TemplateError(path, "<file>", "file (size limit)",
                                f"{st.st_size} bytes; a template file holds at most {MAX_BYTES} bytes")
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as e:
        raise TemplateError(path, "<file>", "file (unreadable)", f"cannot read: {e.strerror or e}") from None
    if len(data) > MAX_BYTES:
        raise TemplateError(path, "<file>", "file (size limit)", f"more than {MAX_BYTES} bytes")
    for bom, name in ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                      (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16")):
        if data.startswith(bom):
            raise TemplateError(path, "<file>", "file (encoding)", f"the file is {name}; save it as UTF-8")
    if data.count(b"\x00") * 4 > len(data):
        raise TemplateError(path, "<file>", "file (encoding)",
                            "NUL bytes between the characters: UTF-16 or UTF-32 without a byte-order mark; "
                            "save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise TemplateError(path, "<file>", "file (encoding)",
                            f"not UTF-8: byte 0x{data[e.start]:02x} at line {line} (offset {e.start}); "
                            f"save the file as UTF-8") from None
    _check_text(path, text)
    return text


def parse_yaml(path: Path | str, text: str):
    """Parse template text with :class:`StrictLoader`; refusals become :class:`TemplateError`."""
    loader = StrictLoader(text)
    try:
        return loader.get_single_data()
    except _Refused as e:
        raise TemplateError(path, e.field, e.rule, e.message) from None
    except yaml.MarkedYAMLError as e:
        what = f"{e.context}: {e.problem}" if e.context else str(e.problem)
        raise TemplateError(path, "<file>", "schema (YAML syntax)",
                            f"not valid YAML: {what}{_where(e.problem_mark)}") from None
    except yaml.YAMLError as e:
        raise TemplateError(path, "<file>", "schema (YAML syntax)",
                            "not valid YAML: " + " ".join(str(e).split())) from None
    except (ValueError, OverflowError, RecursionError) as e:  # e.g. an integer of 10,000 digits
        raise TemplateError(path, "<file>", "schema (YAML value)",
                            "a value cannot be read: " + " ".join(str(e).split())[:200]) from None
    finally:
        loader.dispose()


def _is_hidden(p: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in p.relative_to(root).parts)


def _walk(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*")
                  if p.suffix.lower() in _CANDIDATE_SUFFIXES and not _is_hidden(p, folder) and not p.is_dir())


def template_paths(paths: Iterable[Path | str] | Path | str) -> list[Path]:
    """Expand files, folders and glob patterns into template paths, in order, each once.

    A folder contributes every ``*.yaml`` and ``*.yml`` file under it (recursively, hidden
    files and folders skipped); the ``.yml`` ones are then refused by the extension rule,
    never skipped. A path that matches nothing, or a folder with no template file, raises
    :class:`FileNotFoundError`. A ``templates/...`` path that does not exist in the working folder
    means the bundled templates (:func:`crossprofile_lib.paths.resolve_template_path`).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: list[Path] = []
    for p in paths:
        p = resolve_template_path(p)
        if p.is_dir():
            found = _walk(p)
            if not found:
                raise FileNotFoundError(f"folder '{p}' holds no template file (*{SUFFIX})")
            out.extend(found)
        elif p.exists() or p.is_symlink():
            out.append(p)
        else:
            matches = sorted(Path().glob(str(p))) if not p.is_absolute() else sorted(
                Path(p.anchor).glob(str(p.relative_to(p.anchor))))
            if not matches:
                raise FileNotFoundError(f"no template file matches '{p}'")
            for m in matches:
                out.extend(_walk(m) if m.is_dir() else [m])
    seen, unique = set(), []
    for p in out:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique
