"""Chapter 9's estimate of what a rerun costs: model calls per grid (from the runner's own request
builder, nothing called), decision-prompt tokens, and the time at an assumed latency and concurrency
(an assumption, not a measurement); then what the model sample of this build took."""

from __future__ import annotations

from typing import Optional

import pandas as pd

from crossprofile_lib.book.display import Markdown
from crossprofile_lib.book.params import BookParams
from crossprofile_lib.book.runs import Run
from crossprofile_lib.book.tables import grid_calls
from crossprofile_lib.design import MODEL_POLICIES

PAPER_GRID = "the paper's CrossProfile grid"
MODEL_SAMPLE = "this book's model sample"


def hours_column(p: BookParams) -> str:
    return f"hours at {p.api_seconds_per_call:g} s/call, {p.api_concurrency} at once"


def grid_costs(p: BookParams) -> pd.DataFrame:
    """One row per grid (the paper's, this book's model sample): calls, prompt tokens, hours (and the
    prompt cost when a price is given)."""
    grids = {
        PAPER_GRID: dict(templates=p.paper_templates, seeds=p.paper_seeds, budgets=p.paper_budgets,
                         policies=p.paper_policies, variants=None),
        MODEL_SAMPLE: dict(templates=p.model_templates, seeds=p.model_seeds, budgets=p.model_budgets,
                           policies=list(MODEL_POLICIES), variants=p.model_variants),
    }
    rows, hours = {}, hours_column(p)
    for name, g in grids.items():
        c = grid_calls(g["templates"], g["seeds"], g["budgets"], g["policies"], g["variants"])
        calls = c["decisions"] + c["relevance_calls"] + c["stance_calls"]
        rows[name] = {**c, "model calls": calls,
                      "prompt tokens (millions, decisions)": c["decisions"] * c["mean_prompt_tokens"] / 1e6,
                      hours: calls * p.api_seconds_per_call / p.api_concurrency / 3600}
        if p.price_per_million_prompt_tokens:
            rows[name]["prompt cost at the given price"] = (rows[name]["prompt tokens (millions, decisions)"]
                                                            * p.price_per_million_prompt_tokens)
    return pd.DataFrame(rows).T


def cost_takeaways(tab: pd.DataFrame, p: BookParams) -> list[str]:
    """The paper grid's calls and hours, and that a rebuild makes no model calls."""
    g = tab.loc[PAPER_GRID]
    return [
        f"The paper's CrossProfile grid makes <b>{g['model calls']:,.0f}</b> model calls "
        f"({g['decisions']:,.0f} decisions); at the assumed {p.api_seconds_per_call:g} s per call with "
        f"{p.api_concurrency} at once that is about {g[hours_column(p)]:.1f} hours.",
        "A rebuild with the same parameters answers every call from the call cache and makes no model calls."]


def measured_note(m: Optional[Run]):
    """What the model sample took when its run folder was written (from its run header)."""
    if m is None:
        return Markdown("No language-model run on this page (parameter `backend` is empty or the backend is unavailable).")
    n = len(m.df)
    return Markdown(
        f"**Measured here:** the model sample of {m.label} ({n} decisions on {m.n_templates} templates) took "
        f"{m.header.get('seconds', float('nan')):.0f} s when its run folder was written ({m.header.get('created', '?')}; "
        "calls already in the call cache then cost nothing), about "
        f"{m.header.get('seconds', 0) / max(n, 1):.2f} s per decision including its relevance calls. Rebuilding "
        "the book answers it from the call cache. The paper reports 8,466 valid and 174 invalid decisions for "
        "DeepSeek V4.1-Flash on CrossProfile (paper value).")
