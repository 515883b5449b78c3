"""The reference decider's predictions on a task grid, analytically: the memories do not depend on ``(s, w, beta)``,
and the ledger picks ``o`` with probability ``softmax_o(beta * (x0 + s*x1 + w*(x2 + s*x3)))``, so expected accuracy
is the mean of ``P(correct)``. Decisions collapse into **patterns** (features with the target first, identical ones
merged); :func:`load_or_build` caches them and their probabilities on a grid, keyed by everything they depend on.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from crossprofile_lib import __version__
from crossprofile_lib.backends.ledger import ReferenceDecider
from crossprofile_lib.paths import cache_dir, file_sha256
from crossprofile_lib.run.rebuild import option_features
from crossprofile_lib.run.runner import RunConfig, build_requests
from crossprofile_lib.stats.socialproof import canonical
from crossprofile_lib.task.templates import load_templates, template_paths
from crossprofile_lib.task.tokenizer import get_tokenizer

FORMULA = "softmax(beta*(x0 + s*x1 + w*(x2 + s*x3))) v1"   # part of the cache key
TARGETS = ("correct", "chose_decoy")
#: the coarse parameter grid: social proof s, irrelevant weight w, inverse temperature beta
GRID = {"social_proof": tuple(np.round(np.linspace(-0.3, 4.5, 17), 6)),
        "irrelevant_weight": tuple(np.round(np.linspace(-3.0, 3.0, 13), 6)),
        "inverse_temperature": tuple(np.round(np.geomspace(0.05, 40.0, 13), 6))}


def default_cache_dir() -> Path:
    """``paperfit/`` in the call-cache folder (:func:`crossprofile_lib.paths.cache_dir`)."""
    return cache_dir() / "paperfit"


def grid_points(grid: dict = GRID) -> np.ndarray:
    """``(G, 3)`` every combination of the grid's (s, w, beta), s slowest."""
    s, w, b = (np.asarray(grid[k], dtype=float) for k in ("social_proof", "irrelevant_weight", "inverse_temperature"))
    return np.stack(np.meshgrid(s, w, b, indexing="ij"), axis=-1).reshape(-1, 3)


def target_probability(Xp: np.ndarray, theta: np.ndarray, chunk: int = 256) -> np.ndarray:
    """P(target option) for patterns ``Xp`` ``(P, K, 4)`` (target first) at ``theta`` ``(3,)`` or ``(G, 3)``, as
    ``1 / (1 + sum_k exp(u_k - u_0))`` (no overflow trouble: a huge term gives probability 0)."""
    return target_probability_diff(Xp[:, 1:, :] - Xp[:, :1, :], theta, chunk)


def target_probability_diff(D: np.ndarray, theta: np.ndarray, chunk: int = 256) -> np.ndarray:
    """As :func:`target_probability` from ``D = Xp[:, 1:] - Xp[:, :1]`` ``(P, K-1, 4)``."""
    th = np.atleast_2d(np.asarray(theta, dtype=float))
    P, K1, F = D.shape
    flat = D.reshape(P * K1, F).T
    out = np.empty((len(th), P))
    for g0 in range(0, len(th), chunk):
        t = th[g0:g0 + chunk]
        s, w, b = t[:, 0], t[:, 1], t[:, 2]
        phi = np.stack([b, b * s, b * w, b * w * s], axis=1)            # (g, 4)
        with np.errstate(over="ignore"):
            e = np.exp(phi @ flat).reshape(len(t), P, K1)
        out[g0:g0 + chunk] = 1.0 / (1.0 + e.sum(axis=2))
    return out[0] if np.ndim(theta) == 1 else out


@dataclass
class LedgerDesign:
    """The decisions of a grid as patterns: ``rows`` (the results-table columns known before deciding), ``Xp``
    ``(P, K, 4)``, ``pattern[target]`` ``(n,)`` each row's pattern, ``p_grid`` ``(G, P)`` at ``grid_points(grid)``."""

    rows: pd.DataFrame
    Xp: np.ndarray
    pattern: dict
    grid: dict
    p_grid: np.ndarray
    key: str
    config: dict
    from_cache: bool = False

    @property
    def units(self) -> tuple[str, ...]:
        return tuple(sorted(self.rows["template_id"].astype(str).unique()))

    def probability(self, theta) -> np.ndarray:
        return target_probability(self.Xp, theta)


def build_design(templates, seeds: Sequence[int], policies: Sequence[str], budgets: Sequence[str],
                 n_agents: int = 4, tokenizer: Optional[str] = None) -> tuple[pd.DataFrame, np.ndarray, dict]:
    """Build every memory of the grid (no decisions) and return ``(rows, Xp, pattern)``."""
    cfg = RunConfig(backend="ledger", seeds=list(seeds), budgets=list(budgets), policies=list(policies),
                    n_agents=n_agents, tokenizer=tokenizer)
    stub = ReferenceDecider(tokenizer=get_tokenizer(tokenizer))
    X, tgt, recs = [], {k: [] for k in TARGETS}, []
    for req, row in build_requests(templates, cfg, stub):
        t = req.task.template
        X.append(option_features(req.task, req.memory, req.option_order))
        tgt["correct"].append(req.option_order.index(t.correct_option))
        tgt["chose_decoy"].append(req.option_order.index(t.decoy_option))
        recs.append(row)
    if not recs:
        raise ValueError("the grid has no decisions (no templates, seeds or policies)")
    X = np.stack(X)
    both = np.concatenate([canonical(X, np.asarray(tgt[k])) for k in TARGETS])
    uniq, inv = np.unique(both, axis=0, return_inverse=True)
    inv = inv.ravel()
    n = len(X)
    pattern = {k: inv[i * n:(i + 1) * n] for i, k in enumerate(TARGETS)}
    drop = [c for c in ("option_order", "memory_sha", "error", "stance_source", "stance_agreement") if c in recs[0]]
    rows = pd.DataFrame(recs).drop(columns=drop)
    return rows, uniq.reshape(-1, X.shape[1], X.shape[2]), pattern


def cache_key(templates, seeds, policies, budgets, n_agents, tokenizer, grid) -> tuple[str, dict]:
    cfg = dict(templates=sorted(file_sha256(p)[:16] for p in template_paths(templates)),
               seeds=[int(s) for s in seeds], policies=list(policies), budgets=[str(b) for b in budgets],
               n_agents=int(n_agents), tokenizer=tokenizer or "default",
               grid={k: [float(v) for v in grid[k]] for k in sorted(grid)}, version=__version__, formula=FORMULA)
    return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:20], cfg


def load_or_build(templates: Sequence[str], seeds: Sequence[int], policies: Sequence[str],
                  budgets: Sequence[str], cache_dir: Optional[Path | str] = None, grid: dict = GRID,
                  n_agents: int = 4, tokenizer: Optional[str] = None) -> LedgerDesign:
    """The design and its grid probabilities, from ``cache_dir`` when the key matches, else built and written."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key, cfg = cache_key(templates, seeds, policies, budgets, n_agents, tokenizer, grid)
    npz, pq = cache_dir / f"ledger-{key}.npz", cache_dir / f"ledger-{key}.parquet"
    if npz.exists() and pq.exists():
        z = np.load(npz)
        return LedgerDesign(pd.read_parquet(pq), z["Xp"], {k: z[f"pattern_{k}"] for k in TARGETS}, grid, z["p_grid"],
                            key, cfg, True)
    rows, Xp, pattern = build_design(load_templates(list(templates), n_options=3), seeds, policies, budgets,
                                     n_agents, tokenizer)
    p_grid = target_probability(Xp, grid_points(grid))
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache_dir / f".ledger-{key}.{os.getpid()}"
    np.savez_compressed(f"{tmp}.npz", Xp=Xp, p_grid=p_grid, **{f"pattern_{k}": v for k, v in pattern.items()})
    rows.to_parquet(f"{tmp}.parquet", index=False)
    os.replace(f"{tmp}.parquet", pq)   # parquet first: the .npz marks a complete entry
    os.replace(f"{tmp}.npz", npz)
    return LedgerDesign(rows, Xp, pattern, grid, p_grid, key, cfg, False)
