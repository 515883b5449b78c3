"""Untrusted input files: one safe-input layer that every file argument of the suite goes through.

Templates, HiddenBench JSON files, preregistration (``--prereg``) files, chat-template files
(``--chat-template``, ``hf:FOLDER``) and tokenizer files are all read by :func:`read_bytes` /
:func:`read_text`, then parsed by :func:`load_yaml` or :func:`load_json`. Each failure is an
:class:`InputError` (a ``ValueError``) naming the file, the field and the rule; callers wrap it in
their own subclass (:class:`TemplateError`, ``HiddenBenchError``, ``PreregError``). The rules, in
order:

* ``file (not a regular file)``, ``file (unreadable)``: a readable regular file (a folder, a
  FIFO, ``/dev/zero`` or a socket is refused before a byte is read: the file is opened
  non-blocking and checked with ``fstat``, so nothing can hang or read without end);
* ``file (size limit)``: at most the kind's cap (:data:`MAX_BYTES` for templates), checked before
  reading and again while reading;
* ``file (encoding)``: UTF-8. A UTF-8 byte-order mark is accepted (the **BOM rule**: editors on
  Windows write one; it is dropped); UTF-16/32, Latin-1 and binary files are named;
* ``file (control characters)``: no NUL or other control character except tab and newline, no
  invisible format character (zero-width space, bidi override, ...), no private-use, surrogate
  or unassigned code point; ``yaml (control characters)`` / ``json (control characters)``: the
  same for a value written with escapes (``"\\0"``, ``"\\u202e"``, a lone ``"\\ud800"``), naming
  the field;
* YAML (:class:`StrictLoader`): ``schema (YAML syntax)``, one document; ``yaml (anchor or
  alias)`` and ``yaml (merge key)`` (no alias bombs); ``yaml (tag)`` (core tags only); ``yaml
  (nesting depth)``; ``yaml (duplicate key)``; ``yaml (key type)``; ``schema (YAML value)``;
* JSON (:func:`load_json`): ``json (syntax)``; ``json (nesting depth)`` (checked on the text
  before parsing); ``json (duplicate key)`` (an object names a key once: JSON would silently keep
  the last); ``json (number)`` (no ``NaN``/``Infinity``, no integer of more than
  :data:`MAX_INT_DIGITS` digits, no float that overflows).

Template files also need the extension ``.yaml`` (``file (extension)``); :func:`template_paths`
expands files, folders and globs.
"""

from __future__ import annotations

import errno
import json
import math
import numbers
import os
import re
import stat
import unicodedata
from pathlib import Path
from typing import Iterable, Optional

import yaml

from crossprofile_lib.paths import resolve_template_path

MAX_BYTES = 64 * 1024   # a template: the largest real one is under 4 KiB
MAX_DEPTH = 8           # a template needs 3 (root -> facts -> fact -> value)
#: Caps of the other kinds of input file (bytes).
HIDDENBENCH_MAX_BYTES = 64 * 1024 * 1024   # the public file is about 0.3 MB
PREREG_MAX_BYTES = 1024 * 1024             # the bundled prereg.yaml is 5 KB
CHAT_TEMPLATE_MAX_BYTES = 1024 * 1024      # a Jinja chat template: a few KB
TOKENIZER_CONFIG_MAX_BYTES = 16 * 1024 * 1024   # tokenizer_config.json (may embed an added-token table)
JSON_MAX_DEPTH = 32
MAX_INT_DIGITS = 30
SUFFIX = ".yaml"
_CANDIDATE_SUFFIXES = (".yaml", ".yml")  # what a folder walk picks up (".yml" only to refuse it)
_CORE_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map"))
_ALLOWED_CONTROLS = frozenset("\t\n\r")
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn", "Cs"})


class InputError(ValueError):
    """An input file broke a rule. ``str()`` names the file, the field and the rule."""

    def __init__(self, path, field: str, rule: str, message: str):
        self.path, self.field, self.rule, self.detail = str(path), field, rule, message
        super().__init__(f"{path}: field '{field}': {rule}: {message}")


class TemplateError(InputError):
    """A template broke a rule. ``str()`` names the file, the field and the rule."""


class _Refused(Exception):
    def __init__(self, rule: str, field: str, message: str):
        self.rule, self.field, self.message = rule, field, message
        super().__init__(message)


def _where(mark) -> str:
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


# --- characters ------------------------------------------------------------------------------

def bad_char(text: str):
    """``(index, char)`` of the first control, invisible, private-use, surrogate or unassigned
    character (tab, newline and carriage return are allowed), else None."""
    for i, ch in enumerate(text):
        if ch in _ALLOWED_CONTROLS or ch.isascii() and ch.isprintable():
            continue
        if unicodedata.category(ch) in _BAD_CATEGORIES:
            return i, ch
    return None


_bad_char = bad_char  # the name earlier modules used


def describe_char(ch: str) -> str:
    return f"character U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')}, category {unicodedata.category(ch)})"


_describe_char = describe_char


def _check_text(path, text: str, error=InputError) -> None:
    bad = bad_char(text)
    if bad:
        i, ch = bad
        line = text.count("\n", 0, i) + 1
        col = i - (text.rfind("\n", 0, i) + 1) + 1
        raise error(path, "<file>", "file (control characters)",
                    f"{describe_char(ch)} at line {line}, column {col}: control, invisible and "
                    "unassigned characters are not allowed")


# --- bytes and text --------------------------------------------------------------------------

def _errname(e: OSError) -> str:
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__


def read_bytes(path: Path | str, max_bytes: int, error=InputError, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (rules ``file (not a regular file)``,
    ``file (unreadable)``, ``file (size limit)``; see the module doc). Never blocks on a FIFO and
    never reads more than ``max_bytes + 1`` bytes."""
    path = Path(path)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                    else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise error(path, "<file>", "file (not a regular file)",
                        f"{kind}; a {what} must be a regular file")
        if st.st_size > max_bytes:
            raise error(path, "<file>", "file (size limit)",
                        f"{st.st_size} bytes; a {what} holds at most {max_bytes} bytes")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between the stat and the open
                raise error(path, "<file>", "file (not a regular file)", f"a {what} must be a regular file")
            chunks, n = [], 0
            while n <= max_bytes:
                b = os.read(fd, min(1 << 20, max_bytes + 1 - n))
                if not b:
                    break
                chunks.append(b)
                n += len(b)
            data = b"".join(chunks)
        finally:
            os.close(fd)
    except (InputError, error):
        raise
    except (OSError, ValueError) as e:  # ValueError: an embedded NUL in the name
        if isinstance(e, OSError) and e.errno == errno.ENOENT:
            msg = "cannot read: no such file"
        elif isinstance(e, OSError):
            msg = f"cannot read: {e.strerror or e} ({_errname(e)})"
        else:
            msg = f"cannot read: {e}"
        raise error(path, "<file>", "file (unreadable)", msg) from None
    if len(data) > max_bytes:
        raise error(path, "<file>", "file (size limit)", f"more than {max_bytes} bytes")
    return data


def decode_text(path, data: bytes, error=InputError, check_chars: bool = True) -> str:
    """``data`` as strict UTF-8 (a UTF-8 byte-order mark is dropped; UTF-16/32 and other encodings
    are named), then the control-character rule unless ``check_chars`` is false."""
    for bom, name in ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                      (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16")):
        if data.startswith(bom):
            raise error(path, "<file>", "file (encoding)", f"the file is {name}; save it as UTF-8")
    if data.count(b"\x00") * 4 > len(data):
        raise error(path, "<file>", "file (encoding)",
                    "NUL bytes between the characters: UTF-16 or UTF-32 without a byte-order mark (or a binary "
                    "file); save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise error(path, "<file>", "file (encoding)",
                    f"not UTF-8: byte 0x{data[e.start]:02x} at line {line} (offset {e.start}); "
                    f"save the file as UTF-8") from None
    if check_chars:
        _check_text(path, text, error)
    return text


def read_text(path: Path | str, max_bytes: int, error=InputError, what: str = "file",
              check_chars: bool = True) -> str:
    """:func:`read_bytes` then :func:`decode_text`: the text of a regular UTF-8 file."""
    return decode_text(path, read_bytes(path, max_bytes, error, what), error, check_chars)


# --- YAML ------------------------------------------------------------------------------------

class StrictLoader(yaml.SafeLoader):
    """A SafeLoader that refuses anchors/aliases, non-core tags, deep nesting and duplicate keys.

    It keeps the path of the node being composed, so every refusal names its field
    (``facts[3].role``) the way schema errors do. ``max_depth``: levels of collections allowed.
    """

    max_depth = MAX_DEPTH

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
    """Parse ``text`` (said to come from ``path``) with :class:`StrictLoader`; refusals become
    ``error`` (default :class:`TemplateError`)."""
    loader = StrictLoader(text)
    loader.max_depth = max_depth
    try:
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
        loader.dispose()


def load_yaml(path: Path | str, max_bytes: int, error=InputError, max_depth: int = MAX_DEPTH, what: str = "file"):
    """A YAML input file through every rule above (regular file .. strict YAML)."""
    return parse_yaml(path, read_text(path, max_bytes, error, what), error, max_depth)


# --- JSON ------------------------------------------------------------------------------------

class JSONObject(dict):
    """A decoded JSON object; ``duplicates`` lists the keys it named more than once."""

    duplicates: tuple = ()


def _object(pairs) -> JSONObject:
    obj = JSONObject(pairs)
    if len(obj) != len(pairs):
        seen, dups = set(), []
        for k, _ in pairs:
            if k in seen and k not in dups:
                dups.append(k)
            seen.add(k)
        obj.duplicates = tuple(dups)
    return obj


class _NumberRefused(ValueError):
    pass


def _parse_int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_INT_DIGITS:
        raise _NumberRefused(f"an integer of {len(s.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(s)


def _parse_float(s: str) -> float:
    v = float(s)
    if v in (float("inf"), float("-inf")):
        raise _NumberRefused(f"the number {s[:40]} is too large for a float")
    return v


def _parse_constant(s: str):
    raise _NumberRefused(f"'{s}' is not a JSON number (NaN and Infinity are not allowed)")


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (strings ignored)."""
    depth = best = 0
    for m in re.finditer(r"[\[\]{}]", _JSON_STRING.sub("", text)):
        depth += 1 if m.group(0) in "[{" else -1
        best = max(best, depth)
    return best


def _field(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<file>"


def check_json_value(value, path, error=InputError, where: tuple = ()) -> None:
    """Walk a decoded JSON value: refuse duplicate keys (``json (duplicate key)``) and strings with
    control, invisible, surrogate or unassigned characters (``json (control characters)``), naming
    the field (``where`` + the path inside ``value``)."""
    stack = [(value, tuple(where))]
    while stack:
        v, at = stack.pop()
        if isinstance(v, dict):
            dups = getattr(v, "duplicates", ())
            if dups:
                raise error(path, _field(at + (dups[0],)), "json (duplicate key)",
                            f"key '{dups[0]}' appears twice in one object; JSON would silently keep the last")
            for k, x in v.items():
                bad = bad_char(k)
                if bad:
                    raise error(path, _field(at), "json (control characters)",
                                f"{describe_char(bad[1])} in a key: control, invisible and unassigned characters "
                                "are not allowed")
                stack.append((x, at + (k,)))
        elif isinstance(v, list):
            stack.extend((x, at + (i,)) for i, x in enumerate(v))
        elif isinstance(v, str):
            bad = bad_char(v)
            if bad:
                raise error(path, _field(at), "json (control characters)",
                            f"{describe_char(bad[1])} in the value: control, invisible and unassigned characters "
                            "are not allowed")


def parse_json(path: Path | str, text: str, error=InputError, max_depth: int = JSON_MAX_DEPTH,
               check: bool = True):
    """Parse JSON ``text`` under the JSON rules of the module doc. ``check=False`` leaves the
    duplicate-key and character rules to the caller (:func:`check_json_value` per record, so one
    bad record of many can be reported and skipped); objects are :class:`JSONObject`."""
    d = json_depth(text)
    if d > max_depth:
        raise error(path, "<file>", "json (nesting depth)", f"nested {d} levels deep (at most {max_depth})")
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_int=_parse_int, parse_float=_parse_float,
                           parse_constant=_parse_constant)
    except _NumberRefused as e:
        raise error(path, "<file>", "json (number)", str(e)) from None
    except json.JSONDecodeError as e:
        raise error(path, "<file>", "json (syntax)", f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except (ValueError, RecursionError) as e:
        raise error(path, "<file>", "json (syntax)", "not valid JSON: " + " ".join(str(e).split())[:200]) from None
    if check:
        check_json_value(value, path, error)
    return value


def load_json(path: Path | str, max_bytes: int, error=InputError, max_depth: int = JSON_MAX_DEPTH,
              what: str = "file", check: bool = True):
    """A JSON input file through every rule above. The raw text is not checked for invisible
    characters (JSON escapes them; :func:`check_json_value` reads the decoded strings)."""
    return parse_json(path, read_text(path, max_bytes, error, what, check_chars=False), error, max_depth, check)


# --- template files --------------------------------------------------------------------------

def read_template_text(path: Path | str) -> str:
    """The text of a template file, after the file guards (extension .. control characters)."""
    path = Path(path)
    if path.suffix != SUFFIX:
        raise TemplateError(path, "<file>", "file (extension)",
                            f"template files end in '{SUFFIX}' (found '{path.suffix or 'no extension'}'); "
                            f"rename the file")
    return read_text(path, MAX_BYTES, TemplateError, "template file")


def _is_hidden(p: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in p.relative_to(root).parts)


def _walk(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.rglob("*")
                      if p.suffix.lower() in _CANDIDATE_SUFFIXES and not _is_hidden(p, folder) and not p.is_dir())
    except OSError as e:  # a symlink loop, a folder that cannot be listed
        raise FileNotFoundError(f"folder '{folder}' cannot be walked ({e.strerror or e})") from None


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
                matches = sorted(Path().glob(str(p))) if not p.is_absolute() else sorted(
                    Path(p.anchor).glob(str(p.relative_to(p.anchor))))
            except (ValueError, OSError) as e:  # "**" misused, an unreadable folder
                raise FileNotFoundError(f"no template file matches '{p}' ({e})") from None
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


# --- path names ------------------------------------------------------------------------------

NAME_MAX = 255     # bytes per path component (Linux, macOS)
PATH_MAX = 4096


def path_problem(p: Path | str) -> Optional[str]:
    """Why ``p`` can never name a file here (None when it can): an empty name, a NUL byte, a
    component longer than :data:`NAME_MAX` bytes, a path longer than :data:`PATH_MAX` bytes, or a
    symbolic-link loop."""
    s = os.fspath(p)
    if not s.strip():
        return "empty path"
    if "\x00" in s:
        return "the name holds a NUL character"
    try:
        raw = os.fsencode(s)
    except UnicodeError:
        return "the name cannot be encoded for this file system"
    if len(raw) > PATH_MAX:
        return f"the path is {len(raw)} bytes long (at most {PATH_MAX})"
    long = [c for c in raw.split(b"/") if len(c) > NAME_MAX]
    if long:
        return (f"a name in the path is {len(long[0])} bytes long (file systems allow at most {NAME_MAX} bytes "
                f"per name): '{os.fsdecode(long[0][:40])}...'")
    try:
        os.stat(s)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symbolic-link loop (the link points back at itself)"
        if e.errno == errno.ENAMETOOLONG:
            return "the name is too long for this file system"
    except ValueError as e:
        return str(e)
    return None


def input_file_problem(p: Path | str, max_bytes: Optional[int] = None) -> Optional[str]:
    """Why ``p`` cannot be read as an input file (None when it can), checked without reading it:
    :func:`path_problem`, then it exists, is a regular file (not a folder, FIFO or device), is
    readable and (with ``max_bytes``) not larger than that."""
    problem = path_problem(p)
    if problem:
        return problem
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return "does not exist"
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if stat.S_ISDIR(st.st_mode):
        return "is a folder, not a file"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a FIFO, device or socket is never read)"
    if not os.access(p, os.R_OK):
        return "is not readable"
    if max_bytes is not None and st.st_size > max_bytes:
        return f"is {st.st_size} bytes (at most {max_bytes})"
    return None


# --- option values -----------------------------------------------------------------------------

def option_number(owner: str, name: str, value, *, low: Optional[float] = None, high: Optional[float] = None,
                  integer: bool = False, allow_inf: bool = False, above: bool = False):
    """``value`` of option ``name`` (of ``owner``, e.g. ``backend ledger``) as a number under the strict
    rule every option value follows: a real number (a boolean is not ``1``, a string is not parsed),
    finite unless ``allow_inf`` (NaN never), an integer when ``integer``, and within ``[low, high]``
    (``above``: strictly above ``low``). Raises ``ValueError`` naming the option and the rule."""
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
