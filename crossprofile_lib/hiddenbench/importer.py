"""The HiddenBench importer (SPEC section 9): the public ``benchmark_all_clean.json``, a JSON array of tasks
``{"id", "name", "description", "shared_information": [...], "hidden_information": [one per agent],
"possible_answers": [...], "correct_answer", "rationale"}``. Not redistributable: read from ``--hiddenbench PATH`` or
``$HIDDENBENCH_PATH``, else the project's fixture (our own sentences; tables say so in ``data_source``).

Rules (each a :class:`HiddenBenchError` naming file, task and field; a malformed record is skipped): ``id`` an int or
non-empty string, unique; ``description`` non-empty; ``shared_information`` non-empty strings; ``hidden_information``
at least 2; ``possible_answers`` 2 to 10 distinct; ``correct_answer`` one of them (after whitespace/case
normalisation, keeping the answer's spelling); ``rationale`` absent, null or a string; no duplicate key, control,
invisible or unassigned character. The file goes through :mod:`crossprofile_lib.safety.inputs` (regular file, size
cap, strict UTF-8, JSON nested at most 32 levels, no NaN, no integer of more than 30 digits).
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from crossprofile_lib.paths import hiddenbench_fixture_path
from crossprofile_lib.safety.inputs import (
    HIDDENBENCH_MAX_BYTES,
    InputError,
    check_json_value,
    decode_text,
    parse_json,
    read_bytes,
)

ENV_VAR = "HIDDENBENCH_PATH"
FIXTURE_PATH = hiddenbench_fixture_path()
MAX_OPTIONS = 10


class HiddenBenchError(ValueError):
    """A malformed HiddenBench record. ``str()`` names the file, the task and the field."""

    def __init__(self, path: str, task: str, field: str, message: str):
        self.path, self.task, self.field, self.detail = str(path), task, field, message
        super().__init__(f"{path}: task {task}: field '{field}': {message}")


@dataclass(frozen=True)
class HiddenBenchTask:
    """One HiddenBench task. Agent ``A{i+1}`` holds every shared fact and ``hidden[i]``."""

    id: str
    name: str
    description: str
    shared: tuple[str, ...]
    hidden: tuple[str, ...]
    answers: tuple[str, ...]
    correct_answer: str
    rationale: Optional[str] = None

    @property
    def n_agents(self) -> int:
        return len(self.hidden)

    @property
    def n_options(self) -> int:
        return len(self.answers)

    @property
    def correct_index(self) -> int:
        return self.answers.index(self.correct_answer)


@dataclass(frozen=True)
class HiddenBenchData:
    """The valid tasks of a file, the errors of the malformed ones, and where they came from."""

    tasks: tuple[HiddenBenchTask, ...]
    errors: tuple[HiddenBenchError, ...]
    path: Path
    sha256: str
    is_fixture: bool
    n_records: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def data_source(self) -> str:
        """``fixture`` or ``<basename>@<sha256 prefix>`` (the column every table carries)."""
        return "fixture" if self.is_fixture else f"{self.path.name}@{self.sha256[:12]}"

    def histogram(self) -> dict[str, dict[int, int]]:
        """``{"agents": {3: n, 4: m}, "options": {...}}`` over the valid tasks."""
        return {"agents": dict(sorted(Counter(t.n_agents for t in self.tasks).items())),
                "options": dict(sorted(Counter(t.n_options for t in self.tasks).items()))}


def resolve_path(path: Optional[str | Path] = None) -> tuple[Path, bool]:
    """``(path, is_fixture)``: the given path, else ``$HIDDENBENCH_PATH``, else the fixture."""
    chosen = Path(path) if path else Path(os.environ[ENV_VAR]) if os.environ.get(ENV_VAR) else None
    if chosen is None:
        return FIXTURE_PATH, True
    try:
        return chosen, chosen.resolve() == FIXTURE_PATH
    except OSError:
        return chosen, False


def _norm(s: str) -> str:
    return " ".join(s.split()).casefold()


def _str_list(rec: dict, key: str, tid: str, path: str, min_len: int, max_len: Optional[int] = None):
    v = rec.get(key)
    if key not in rec:
        raise HiddenBenchError(path, tid, key, "missing")
    if not isinstance(v, list):
        raise HiddenBenchError(path, tid, key, f"must be a list of strings, found {type(v).__name__}")
    for i, s in enumerate(v):
        if not isinstance(s, str) or not s.strip():
            raise HiddenBenchError(path, tid, f"{key}[{i}]", "must be a non-empty string")
    if len(v) < min_len or (max_len is not None and len(v) > max_len):
        rng = f"at least {min_len}" if max_len is None else f"{min_len} to {max_len}"
        raise HiddenBenchError(path, tid, key, f"needs {rng} entries, found {len(v)}")
    return tuple(" ".join(s.split()) for s in v)


def _shown_id(rec: dict, where: str) -> str:
    rid = rec.get("id")
    ok = isinstance(rid, (int, str)) and not isinstance(rid, bool) and len(str(rid)) <= 80
    return str(rid).strip() if ok and str(rid).strip() else where


def parse_record(rec, index: int, path: str = "<hiddenbench>") -> HiddenBenchTask:
    """Check one record and return its task; raise :class:`HiddenBenchError` naming the field."""
    where = f"#{index}"
    if not isinstance(rec, dict):
        raise HiddenBenchError(path, where, "<record>", f"must be a JSON object, found {type(rec).__name__}")
    try:
        check_json_value(rec, path)
    except InputError as e:
        raise HiddenBenchError(path, _shown_id(rec, where), e.field, f"{e.rule}: {e.detail}") from None
    rid = rec.get("id")
    if "id" not in rec:
        raise HiddenBenchError(path, where, "id", "missing")
    if isinstance(rid, bool) or not (isinstance(rid, int) or (isinstance(rid, str) and rid.strip())):
        raise HiddenBenchError(path, where, "id", f"must be an integer or a non-empty string, found {rid!r}")
    tid = str(rid).strip()
    for key, required in (("name", False), ("description", True)):
        v = rec.get(key, "" if not required else None)
        if key not in rec and required:
            raise HiddenBenchError(path, tid, key, "missing")
        if not isinstance(v, str) or (required and not v.strip()):
            raise HiddenBenchError(path, tid, key, "must be a non-empty string" if required else "must be a string")
    shared = _str_list(rec, "shared_information", tid, path, 0)
    hidden = _str_list(rec, "hidden_information", tid, path, 2)
    answers = _str_list(rec, "possible_answers", tid, path, 2, MAX_OPTIONS)
    if len({_norm(a) for a in answers}) != len(answers):
        raise HiddenBenchError(path, tid, "possible_answers", "answers must be distinct")
    ca = rec.get("correct_answer")
    if "correct_answer" not in rec:
        raise HiddenBenchError(path, tid, "correct_answer", "missing")
    if not isinstance(ca, str):
        raise HiddenBenchError(path, tid, "correct_answer", f"must be a string, found {type(ca).__name__}")
    match = [a for a in answers if a == " ".join(ca.split())] or [a for a in answers if _norm(a) == _norm(ca)]
    if not match:
        raise HiddenBenchError(path, tid, "correct_answer", f"{ca!r} is not one of possible_answers {list(answers)}")
    rat = rec.get("rationale")
    if rat is not None and not isinstance(rat, str):
        raise HiddenBenchError(path, tid, "rationale", "must be a string or null")
    return HiddenBenchTask(tid, " ".join(rec.get("name", "").split()), " ".join(rec["description"].split()),
                           shared, hidden, answers, match[0], rat)


def load_hiddenbench(path: Optional[str | Path] = None, strict: bool = False) -> HiddenBenchData:
    """Load a HiddenBench file: malformed records are skipped into ``.errors`` (``strict``: the first raises)."""
    p, is_fixture = resolve_path(path)
    try:
        raw_bytes = read_bytes(p, HIDDENBENCH_MAX_BYTES, what="HiddenBench file")
        raw = parse_json(p, decode_text(p, raw_bytes, check_chars=False), check=False)
    except InputError as e:
        shown = p if path or not os.environ.get(ENV_VAR) else f"{p} (${ENV_VAR})"  # where the path came from
        raise HiddenBenchError(shown, "-", e.field, f"{e.rule}: {e.detail}") from None
    if not isinstance(raw, list):
        raise HiddenBenchError(p, "-", "<file>", f"must be a JSON array of tasks, found {type(raw).__name__}")
    tasks, errors, seen = [], [], {}
    for i, rec in enumerate(raw):
        try:
            t = parse_record(rec, i, str(p))
            if t.id in seen:
                raise HiddenBenchError(p, t.id, "id", f"duplicate id (also record #{seen[t.id]})")
        except HiddenBenchError as e:
            if strict:
                raise
            errors.append(e)
            continue
        seen[t.id] = i
        tasks.append(t)
    notes = ()
    if is_fixture and not path and not os.environ.get(ENV_VAR):
        notes = (f"no --hiddenbench PATH and no ${ENV_VAR}: using the project's FIXTURE {p.name} "
                 f"(our own sentences, not the public HiddenBench data)",)
    return HiddenBenchData(tuple(tasks), tuple(errors), p, hashlib.sha256(raw_bytes).hexdigest(), is_fixture,
                           len(raw), notes)


def select_tasks(data: HiddenBenchData, ids: Optional[list[str]] = None, limit: Optional[int] = None):
    """The tasks named by ``ids`` (in file order; unknown ids raise) and/or the first ``limit``."""
    tasks = list(data.tasks)
    if ids:
        known = {t.id for t in tasks}
        unknown = [i for i in ids if i not in known]
        if unknown:
            ids_there = ", ".join(t.id for t in tasks[:20]) + (", ..." if len(tasks) > 20 else "")
            raise ValueError(f"argument --tasks: unknown task id(s) {', '.join(unknown)}: {data.path} holds no such "
                             f"valid task (rule: each id must be a valid task's id; ids there: {ids_there or 'none'})")
        tasks = [t for t in tasks if t.id in set(ids)]
    return tasks[:limit] if limit else tasks
