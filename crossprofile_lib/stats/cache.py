"""A cache of the slow fits (net-lead regressions, social-proof fit) as JSON in ``DIR/.stats_cache/``, keyed by the
SHA-256 of everything a result depends on: rows, options, code (:func:`code_digest`) and, for the social-proof fit,
the template files. Written atomically; an unreadable entry is recomputed; nothing is pickled.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from crossprofile_lib import __version__

CACHE_DIRNAME = ".stats_cache"


def table_hash(df: pd.DataFrame) -> str:
    """SHA-256 of a table's rows (values, column names and order; not its index)."""
    h = hashlib.sha256()
    h.update(json.dumps([str(c) for c in df.columns]).encode())
    h.update(pd.util.hash_pandas_object(df, index=False).to_numpy().tobytes())
    return h.hexdigest()


@lru_cache(maxsize=None)
def code_digest() -> str:
    """Package version + SHA-256 of the statistics' source files."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256(__version__.encode())
    for p in sorted(here.glob("*.py")) + [here.parent / "run" / "rebuild.py"]:
        if p.exists():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return f"{__version__}+{h.hexdigest()[:16]}"


def files_digest(paths) -> str:
    """SHA-256 over the files under ``paths`` (files or folders), by relative name and content."""
    h = hashlib.sha256()
    for root in sorted(map(str, paths or [])):
        p = Path(root)
        files = sorted(p.rglob("*")) if p.is_dir() else [p]
        for f in files:
            if f.is_file():
                h.update(str(f.relative_to(p) if p.is_dir() else f.name).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def _encode(x: Any):
    if isinstance(x, pd.DataFrame):
        d = x.to_dict(orient="split")
        return {"__frame__": {"columns": [str(c) for c in d["columns"]], "data": _encode(d["data"])}}
    if isinstance(x, dict):
        if "__frame__" in x:
            raise ValueError("reserved key __frame__")
        return {str(k): _encode(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_encode(v) for v in x]
    if isinstance(x, np.ndarray):
        return _encode(x.tolist())
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return float(x)
    if x is None or isinstance(x, (str, int)):
        return x
    if x is pd.NA:
        return None
    raise TypeError(f"cannot cache a value of type {type(x).__name__}")


def _decode(x: Any):
    if isinstance(x, dict):
        if "__frame__" in x:
            f = x["__frame__"]
            return pd.DataFrame(f["data"], columns=f["columns"])
        return {k: _decode(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_decode(v) for v in x]
    return x


class FitCache:
    """``get(name, parts, compute)``: the stored result for ``(name, parts)``, else ``compute()`` stored. ``parts``
    may be a callable (called only when caching); ``folder=None`` (``--no-cache``) disables caching."""

    def __init__(self, folder: Optional[Path | str]):
        self.folder = Path(folder) if folder is not None else None
        self.hits = 0
        self.misses = 0
        self.write_error: Optional[str] = None

    @classmethod
    def for_run(cls, run_dir: Path | str, enabled: bool = True) -> "FitCache":
        return cls(Path(run_dir) / CACHE_DIRNAME if enabled else None)

    def key(self, name: str, parts: dict) -> str:
        doc = json.dumps({"name": name, "code": code_digest(), "parts": _encode(parts)}, sort_keys=True)
        return hashlib.sha256(doc.encode()).hexdigest()

    def get(self, name: str, parts: dict | Callable[[], dict], compute: Callable[[], Any]) -> Any:
        if self.folder is None:
            self.misses += 1
            return compute()
        parts = parts() if callable(parts) else parts
        path = self.folder / f"{name}-{self.key(name, parts)[:32]}.json"
        try:
            value = _decode(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            self.misses += 1
            value = compute()
            self._write(path, value)
            return value
        self.hits += 1
        return value

    def _write(self, path: Path, value) -> None:
        try:
            text = json.dumps(_encode(value), allow_nan=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except (OSError, TypeError, ValueError) as e:   # a read-only run folder: compute, do not store
            self.write_error = f"cannot write the stats cache {path.parent}: {e}"
