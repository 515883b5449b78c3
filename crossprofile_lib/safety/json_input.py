"""The safe-input layer's JSON rules (:mod:`crossprofile_lib.safety.inputs`, which re-exports every
name here): ``json (syntax)``, ``json (nesting depth)`` checked on the text before parsing,
``json (duplicate key)``, ``json (number)`` and ``json (control characters)``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from crossprofile_lib.safety.text_input import (
    JSON_MAX_DEPTH,
    MAX_INT_DIGITS,
    InputError,
    bad_char,
    describe_char,
    read_text,
)

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
