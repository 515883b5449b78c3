"""Design values fixed in one place and read from the project's files, never retyped.

* ``PRIMARY_BUDGET`` and ``HEADROOM_MIN_POINTS`` come from the ``settings`` block of
  ``prereg.yaml`` (SPEC section 8: r = 0.6 primary; ALL - EMPTY must exceed 15 points).
* ``CLASSIC`` / ``MIRROR`` are the paper's cells (SPEC section 3, revised): ``PSP`` and ``SPS``.
* ``PAPER_FIGURES_PATH`` is the one source of the paper's reported numbers.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import yaml

from .variants import CLASSIC, MIRROR  # noqa: F401  (re-exported)

ROOT = Path(os.environ.get("CROSSPROFILE_ROOT", Path(__file__).resolve().parents[1]))
PREREG_PATH = ROOT / "prereg.yaml"
PAPER_FIGURES_PATH = ROOT / "data" / "paper_figures.yaml"

#: Fallbacks used only when prereg.yaml has no ``settings`` entry (the file is user-editable).
_SETTINGS_DEFAULTS = {"primary_budget": "0.6", "headroom_min_points": 15.0}


@lru_cache(maxsize=None)
def prereg_settings(path: str | None = None) -> dict:
    """The ``settings`` block of ``prereg.yaml`` merged over the fallbacks."""
    p = Path(path) if path else PREREG_PATH
    doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    out = dict(_SETTINGS_DEFAULTS)
    out.update((doc.get("settings") or {}) if isinstance(doc, dict) else {})
    return out


PRIMARY_BUDGET: str = str(prereg_settings()["primary_budget"])
HEADROOM_MIN_POINTS: float = float(prereg_settings()["headroom_min_points"])
