"""Exact noise at array speed (issue 28 §4): one Cluster-DP release plus its estimate with the
exact lattice Laplace (:func:`dpcausal.noise.laplace_mechanism`, vectorised per group) beside the
same computation with floating-point Laplace noise of the same scale, in the same run.

Designs: the paper's simulation (3,500 units in 3 clusters, 12 response values) and 35 clusters
with 4 values (280 noisy histogram entries). Target: exact within 3x the float time.
Also prints the raw samplers: 10^5 exact draws as one array against one draw at a time.
Run: .venv/bin/python bench/exact_noise.py
"""

from __future__ import annotations

import statistics
import time
from fractions import Fraction

import numpy as np
import pandas as pd

import dpcausal.cluster_dp.mechanisms as kernels
from dpcausal.cluster_dp import ClusterDP, ResponseSpace
from dpcausal.noise import sample_discrete_laplace


def _float_histograms(counts: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """The baseline: p_hat + float Laplace(sigma / n_g), no lattice."""
    n = counts.sum(axis=1, keepdims=True)
    return counts / n + rng.laplace(0.0, 1.0, counts.shape) * sigma / n


def _design(clusters: int, values: int, n: int = 3500) -> tuple[pd.DataFrame, ClusterDP]:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"c": rng.integers(0, clusters, n), "z": rng.integers(0, 2, n),
                       "y": rng.integers(0, values, n).astype(float)})
    mech = ClusterDP(space=ResponseSpace(np.arange(values, dtype=float)), epsilon=3.0,
                     gamma=0.02, sigma=10.0)
    return df, mech


def _median_ms(df: pd.DataFrame, mech: ClusterDP, reps: int) -> float:
    times = []
    for seed in range(reps):
        t = time.perf_counter()
        mech._privatize(df, "c", "z", "y", random_state=seed, evaluation=True).estimate()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def main() -> None:
    for clusters, values in ((3, 12), (35, 4)):
        df, mech = _design(clusters, values)
        _median_ms(df, mech, 5)  # warm-up
        exact = _median_ms(df, mech, 200)
        real = kernels.exact_noisy_histograms
        kernels.exact_noisy_histograms = _float_histograms
        try:
            floating = _median_ms(df, mech, 200)
        finally:
            kernels.exact_noisy_histograms = real
        entries = 2 * clusters * values
        print(f"Cluster-DP privatize + estimate, 3,500 units, {clusters} clusters x {values} "
              f"values ({entries} noisy entries): exact {exact:.2f} ms, float {floating:.2f} ms, "
              f"ratio {exact / floating:.2f}x (target <= 3x)")

    rng = np.random.default_rng(1)
    scale = Fraction(2**20 * 10)
    t = time.perf_counter()
    sample_discrete_laplace(scale, rng, size=100_000)
    array_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(2_000):
        sample_discrete_laplace(scale, rng)
    one_us = 1e6 * (time.perf_counter() - t) / 2_000
    print(f"exact discrete Laplace at scale 2^20*10: {1e6 * array_s / 100_000:.2f} us per draw "
          f"as one array of 10^5, {one_us:.1f} us per draw one at a time")


if __name__ == "__main__":
    main()
