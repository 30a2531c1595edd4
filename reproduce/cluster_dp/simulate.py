"""Vectorised repetitions of (assignment, privatization, estimation) for experiments and benchmarks.

Each repetition draws a fresh balanced assignment (unless ``z`` is given), runs the mechanism kernel
of :mod:`dpcausal.cluster_dp.mechanisms` and the estimator of :mod:`dpcausal.cluster_dp.estimation`;
repetitions are processed in chunks so memory stays O(chunk x n).
"""

from __future__ import annotations

import math

import numpy as np

from dpcausal.cluster_dp.data import Population, assign_balanced
from dpcausal.cluster_dp.estimation import debias, stratified_dim
from dpcausal.cluster_dp.mechanisms import privatize_arrays

MECHANISMS = ("cluster", "cluster_free", "uniform", "none")


def simulate(
    pop: Population,
    mechanism: str,
    lam: float,
    gamma: float,
    sigma: float,
    reps: int,
    rng: np.random.Generator,
    strata: str = "clusters",
    z: np.ndarray | None = None,
    chunk: int = 100,
) -> tuple[np.ndarray, np.ndarray]:
    """tau_hat and V_hat for ``reps`` repetitions of (z, DP): Theorem 3.2 / §3.6 on Algorithm 2
    output.

    ``mechanism="none"`` gives the non-private stratified difference in means (eq. 5).
    ``z`` (n,) fixes the assignment (conditional-on-z experiments); otherwise it is redrawn.
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if strata not in ("clusters", "none"):
        raise ValueError(f"strata must be 'clusters' or 'none', got {strata!r}")
    space, cidx, C = pop.space, pop.cidx, pop.C
    vals, K = space.values, space.K
    y0i, y1i = space.index(pop.y0), space.index(pop.y1)
    s, S = (cidx, C) if strata == "clusters" else (np.zeros_like(cidx), 1)
    if mechanism == "uniform":
        gamma, sigma = 1.0 / K, math.inf
    taus, vhats = [], []
    for start in range(0, reps, chunk):
        R = min(chunk, reps - start)
        zz = np.broadcast_to(z, (R, cidx.size)) if z is not None else assign_balanced(rng, cidx, R)
        y_idx = np.where(zz == 1, y1i, y0i)
        if mechanism == "none":
            v = vals[y_idx]
        else:
            pooled = mechanism != "cluster"
            g = zz if pooled else 2 * cidx + zz
            G = 2 if pooled else 2 * C
            yt, q_t = privatize_arrays(y_idx, g, G, K, gamma, sigma, lam, rng, reps=R)
            m = q_t @ vals
            v = debias(vals[yt], np.take_along_axis(m, g, axis=1), lam)
        t, vh = stratified_dim(v, s, zz, S)
        taus.append(t)
        vhats.append(vh)
    return np.concatenate(taus), np.concatenate(vhats)
