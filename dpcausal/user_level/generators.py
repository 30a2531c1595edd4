"""Data generators: the paper's synthetic occupancy design, an ITMS-like substitute, and record
panels.

Only occupancy matters for Clip-User (worst-case analysis), so the first two return arrays ``A``;
:func:`make_user_level_panel` returns records (unit, stratum, arm, ts, y) for the release path.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def make_user_level_synthetic(seed: int, G: int = 12, q: float = 0.01,
                              gamma: float = 3) -> np.ndarray:
    """Synthetic occupancy array of paper §VI-A2: spec ``user_level_clip.md`` §5.2.

    ``L = 2**G - 1`` users; user ``l`` in ``[2**j, 2**(j+1) - 1]`` occupies ``G - j`` cells drawn
    uniformly without replacement; counts are iid Geometric(q) on {1, 2, ...}; then, cell by cell,
    the first arg-max user's count is multiplied by ``1 + gamma``. The RNG call order is the spec's
    (per user: the cell subset, then its counts), so draws match the spec's §5.6 bands.
    """
    if not (isinstance(G, (int, np.integer)) and 1 <= G <= 20):
        raise ValueError(f"G must be an integer in [1, 20], got {G!r}")
    if not 0 < q <= 1:
        raise ValueError(f"q must be in (0, 1], got {q!r}")
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma!r}")
    rng = np.random.default_rng(seed)
    L = 2**G - 1
    A = np.zeros((L, G), np.int64)
    for user in range(1, L + 1):
        k = G - (user.bit_length() - 1)          # G - floor(log2 user)
        cells = rng.choice(G, size=k, replace=False)
        A[user - 1, cells] = rng.geometric(q, size=k)
    for g in range(G):
        top = int(np.argmax(A[:, g]))
        A[top, g] = int(round((1 + gamma) * A[top, g]))
    return A


def make_itms_like(seed: int, G: int = 50, L: int = 223, G1: int = 11, n_routes: int = 10,
                   route_len: int = 15, p_k: float = 0.3, q_pass: float = 0.08,
                   p_idle: float = 0.05, q_idle: float = 0.01) -> np.ndarray:
    """Offline stand-in for the unavailable ITMS bus data (spec §5.1 proposal, not the paper's).

    Buses follow one of ``n_routes`` routes of ``route_len`` consecutive cells (route r covers
    cells ``(5 r + i) mod G``); each bus covers a contiguous window of ``k = 1 + Bin(G1-1, p_k)``
    cells (bus 0: ``k = G1``); per cell Geometric(q_pass) records, plus Geometric(q_idle) with
    probability ``p_idle`` (idling heavy hitters).
    """
    rng = np.random.default_rng(seed)
    routes = [[(5 * r + i) % G for i in range(route_len)] for r in range(n_routes)]
    A = np.zeros((L, G), np.int64)
    for user in range(L):
        route = routes[int(rng.integers(n_routes))]
        k = G1 if user == 0 else int(1 + rng.binomial(G1 - 1, p_k))
        s = int(rng.integers(0, route_len - k + 1))
        m = rng.geometric(q_pass, size=k)
        idle = rng.random(k) < p_idle
        m[idle] += rng.geometric(q_idle, size=int(idle.sum()))
        A[user, route[s:s + k]] = m
    return A


def make_user_level_panel(n_units: int = 1000, n_strata: int = 10, cells_per_unit: float = 4.0,
                          p_records: float = 0.4, heavy_share: float = 0.01,
                          heavy_factor: int = 20, effect: float = 5.0,
                          bounds: tuple[float, float] = (0.0, 65.0),
                          seed: int = 0) -> pd.DataFrame:
    """Records of units observed repeatedly across (stratum, arm) cells, values inside ``bounds``.

    Each unit visits about ``cells_per_unit`` distinct cells of ``n_strata x 2`` (Poisson, >= 1,
    duplicates merged) with Geometric(p_records) records per cell; a ``heavy_share`` of units has
    ``heavy_factor`` times more records. Outcome ``y`` = unit level + stratum level +
    ``effect * arm`` + noise, clamped to ``bounds``. Columns: unit_id, stratum, arm, ts, y.
    """
    rng = np.random.default_rng(seed)
    G = 2 * n_strata
    k = np.maximum(1, rng.poisson(cells_per_unit, n_units))
    unit = np.repeat(np.arange(n_units), k)
    cell = rng.integers(0, G, unit.size)
    key = np.unique(unit.astype(np.int64) * G + cell)
    unit, cell = key // G, key % G
    counts = rng.geometric(p_records, unit.size)
    heavy = rng.random(n_units) < heavy_share
    counts = np.where(heavy[unit], counts * heavy_factor, counts)
    ru = np.repeat(unit, counts)
    rc = np.repeat(cell, counts)
    lo, hi = bounds
    mid = (lo + hi) / 2
    unit_level = rng.normal(0, (hi - lo) / 10, n_units)
    stratum_level = rng.normal(0, (hi - lo) / 20, n_strata)
    stratum, arm = rc // 2, rc % 2
    y = (mid + unit_level[ru] + stratum_level[stratum] + effect * arm
         + rng.normal(0, (hi - lo) / 8, ru.size))
    return pd.DataFrame({
        "unit_id": ru, "stratum": stratum, "arm": arm,
        "ts": rng.random(ru.size), "y": np.clip(y, lo, hi)})
