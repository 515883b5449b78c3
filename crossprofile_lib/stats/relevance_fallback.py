"""How often the model's relevance filter gave no usable answer (``relevance_invalid``): R1-rel then keeps what R1
keeps, so a high rate pulls H3 toward 0. Counted per backend, one call per task unit, failed calls left out; above
:data:`WARN_RATE` the run summary and ``crossprofile stats`` warn.
"""

from __future__ import annotations

import pandas as pd

#: the fallback rate above which the summary warns (one unusable filter answer in ten)
WARN_RATE = 0.10
UNIT = ("template_id", "variant", "seed")


def relevance_fallback(df: pd.DataFrame) -> dict:
    """``{backend: {"calls", "invalid", "rate", "high"}}`` (empty when no row used a model's filter)."""
    need = {"relevance_filter", "relevance_invalid", *UNIT}
    if not need <= set(df.columns):
        return {}
    d = df[df["relevance_filter"].astype(str) == "model"]
    if "error" in d.columns:
        d = d[d["error"].fillna("").astype(str).str.strip() == ""]
    out = {}
    for backend, g in d.groupby("backend" if "backend" in d.columns else (lambda _: "model"), sort=True):
        units = g.groupby(list(UNIT))["relevance_invalid"].max()
        n, k = int(len(units)), int(units.astype(bool).sum())
        out[str(backend)] = {"calls": n, "invalid": k, "rate": k / n if n else 0.0,
                             "high": bool(n and k / n > WARN_RATE)}
    return out


def fallback_lines(fb: dict) -> list[str]:
    """One line per backend for the run summary and ``crossprofile stats`` (``warning:`` when high)."""
    lines = []
    for backend, r in fb.items():
        text = (f"{backend}: relevance filter (R1-rel, BAL): {r['invalid']} of {r['calls']} answers unusable "
                f"({100 * r['rate']:.1f}%; relevance_invalid), R1-rel falls back to R1 there")
        if r["high"]:
            text = (f"warning: {text}; above {100 * WARN_RATE:.0f}% this biases H3 (R1-rel - R1) toward 0: use "
                    f"--decision-mode grammar or score (constrained JSON) or a stronger model")
        lines.append(text)
    return lines
