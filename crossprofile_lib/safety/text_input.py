"""The safe-input layer's file, character and JSON rules, and path names that can never name a file;
the rules are listed in :mod:`crossprofile_lib.safety.inputs`, which re-exports the public names."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import unicodedata
from pathlib import Path
from typing import Optional

MAX_BYTES = 64 * 1024   # a template: the largest real one is under 4 KiB
#: Caps of the other kinds of input file (bytes).
HIDDENBENCH_MAX_BYTES = 64 * 1024 * 1024   # the public file is about 0.3 MB
PREREG_MAX_BYTES = 1024 * 1024             # the bundled prereg.yaml is 5 KB
CHAT_TEMPLATE_MAX_BYTES = 1024 * 1024      # a Jinja chat template: a few KB
TOKENIZER_CONFIG_MAX_BYTES = 16 * 1024 * 1024   # tokenizer_config.json (may embed an added-token table)
JSON_MAX_DEPTH = 32
MAX_INT_DIGITS = 40  # transformers writes int(1e30), 31 digits, as "no limit" in tokenizer_config.json
_ALLOWED_CONTROLS = frozenset("\t\n\r")
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn", "Cs"})


class InputError(ValueError):
    """An input file broke a rule. ``str()`` names the file, the field and the rule."""

    def __init__(self, path, field: str, rule: str, message: str):
        self.path, self.field, self.rule, self.detail = str(path), field, rule, message
        super().__init__(f"{path}: field '{field}': {rule}: {message}")


class TemplateError(InputError):
    """A template broke a rule. ``str()`` names the file, the field and the rule."""


# --- characters ------------------------------------------------------------------------------

def bad_char(text: str):
    """``(index, char)`` of the first control, invisible, private-use, surrogate or unassigned character
    (tab, newline and carriage return allowed), else None."""
    for i, ch in enumerate(text):
        if ch in _ALLOWED_CONTROLS or ch.isascii() and ch.isprintable():
            continue
        if unicodedata.category(ch) in _BAD_CATEGORIES:
            return i, ch
    return None


def describe_char(ch: str) -> str:
    return f"character U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')}, category {unicodedata.category(ch)})"


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
    """The bytes of a regular file of at most ``max_bytes``; never blocks on a FIFO, never reads more
    than ``max_bytes + 1`` bytes."""
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
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between the stat and the open
                raise error(path, "<file>", "file (not a regular file)", f"a {what} must be a regular file")
            data = fh.read(max_bytes + 1)
    except (InputError, error):
        raise
    except (OSError, ValueError) as e:  # ValueError: an embedded NUL in the name
        why = ("no such file" if isinstance(e, FileNotFoundError)
               else f"{e.strerror or e} ({_errname(e)})" if isinstance(e, OSError) else str(e))
        raise error(path, "<file>", "file (unreadable)", f"cannot read: {why}") from None
    if len(data) > max_bytes:
        raise error(path, "<file>", "file (size limit)", f"more than {max_bytes} bytes")
    return data


def decode_text(path, data: bytes, error=InputError, check_chars: bool = True) -> str:
    """``data`` as strict UTF-8 (a BOM dropped, other encodings named), then the character rule."""
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


# --- path names ------------------------------------------------------------------------------

NAME_MAX = 255     # bytes per path component (Linux, macOS)
PATH_MAX = 4096


def path_problem(p: Path | str) -> Optional[str]:
    """Why ``p`` can never name a file here (None when it can): empty, a NUL, a name or path too long,
    a symbolic-link loop."""
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
    """Why ``p`` cannot be read as an input file (None when it can), without reading it: a path problem,
    missing, not a regular file, unreadable or (with ``max_bytes``) too large."""
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


# --- JSON ------------------------------------------------------------------------------------

class JSONObject(dict):
    """A decoded JSON object; ``duplicates``: the keys it named more than once."""

    duplicates: tuple = ()


def _object(pairs) -> JSONObject:
    obj = JSONObject(pairs)
    if len(obj) != len(pairs):  # each repeated key once, in the order of its second mention
        seen: set = set()
        obj.duplicates = tuple(dict.fromkeys(k for k, _ in pairs if k in seen or seen.add(k)))
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
    """Refuse duplicate keys and strings with bad characters in a decoded JSON value, naming the field
    (``where`` + the path inside ``value``)."""
    stack = [(value, tuple(where))]
    while stack:
        v, at = stack.pop()
        if isinstance(v, dict):
            dups = getattr(v, "duplicates", ())
            if dups:
                raise error(path, _field(at + (dups[0],)), "json (duplicate key)",
                            f"key '{dups[0]}' appears twice in one object; JSON would silently keep the last")
            for k, x in v.items():
                _check_string(k, "a key", path, error, at)
                stack.append((x, at + (k,)))
        elif isinstance(v, list):
            stack.extend((x, at + (i,)) for i, x in enumerate(v))
        elif isinstance(v, str):
            _check_string(v, "the value", path, error, at)


def _check_string(s: str, what: str, path, error, at: tuple) -> None:
    bad = bad_char(s)
    if bad:
        raise error(path, _field(at), "json (control characters)",
                    f"{describe_char(bad[1])} in {what}: control, invisible and unassigned characters are not allowed")


def parse_json(path: Path | str, text: str, error=InputError, max_depth: int = JSON_MAX_DEPTH,
               check: bool = True):
    """Parse JSON ``text`` under the JSON rules; ``check=False`` leaves the duplicate-key and character
    rules to the caller (:func:`check_json_value` per record, so one bad record can be skipped)."""
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
    """A JSON input file through every rule (characters are checked on the decoded strings)."""
    return parse_json(path, read_text(path, max_bytes, error, what, check_chars=False), error, max_depth, check)
