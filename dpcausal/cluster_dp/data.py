"""Data generators for the experiments of spec cluster_dp.md §4: GMM clusters and a YouTube-like
graph.

The real com-Youtube data cannot be fetched here; :func:`make_youtube_like` is the deterministic
synthetic stand-in of spec §4.2 and its results are labelled "YouTube-like synthetic".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpcausal.cluster_dp.spaces import ResponseSpace


@dataclass(frozen=True)
class Population:
    """Units with both potential outcomes (as values of ``space``) and cluster codes 0..C-1."""

    y0: np.ndarray
    y1: np.ndarray
    cidx: np.ndarray
    space: ResponseSpace
    label: str = ""

    def __post_init__(self) -> None:
        if not (self.y0.shape == self.y1.shape == self.cidx.shape):
            raise ValueError("y0, y1 and cidx must have the same shape")
        self.space.index(self.y0, "y0")
        self.space.index(self.y1, "y1")

    @property
    def n(self) -> int:
        return int(self.cidx.size)

    @property
    def C(self) -> int:
        return int(self.cidx.max()) + 1

    def subset(self, idx: np.ndarray) -> Population:
        return Population(self.y0[idx], self.y1[idx], self.cidx[idx], self.space, self.label)


def _quantize(yp: np.ndarray, k_prime: int, scale: float) -> np.ndarray:
    """y(0) = clip(round(y'/Delta), -K', K') with Delta = 2 scale / K' (spec §4.1, §4.2
    Option A)."""
    delta = 2 * scale / k_prime
    return np.clip(np.rint(yp / delta), -k_prime, k_prime) + 0.0  # + 0.0: no negative zeros


def make_gmm(
    seed: int,
    sizes: tuple[int, ...] = (2500, 5000, 10000),
    k_prime: int = 5,
    v: float = 5.0,
    beta: float = 4.5,
    tau: int = 1,
) -> Population:
    """GMM super-population: spec §4.1.

    y'_i = sqrt(beta) mu_c + sqrt(v - beta) w_i with mu_c, w_i ~ N(0, 1); y(0) is y' quantized to
    {-K'..K'} (step 2 sqrt(v)/K', clipped beyond ±2 sqrt(v)) and y(1) = y(0) + tau, so the ATE is
    tau.
    ``seed`` fixes mu and w, so sweeping beta uses common random numbers.
    """
    if not 0 <= beta <= v:
        raise ValueError(f"beta must be in [0, v] = [0, {v}], got {beta!r}")
    rng = np.random.default_rng(seed)
    C = len(sizes)
    mu = rng.standard_normal(C)
    cidx = np.repeat(np.arange(C), sizes)
    w = rng.standard_normal(cidx.size)
    yp = np.sqrt(beta) * mu[cidx] + np.sqrt(v - beta) * w
    y0 = _quantize(yp, k_prime, np.sqrt(v))
    space = ResponseSpace(np.arange(-k_prime, k_prime + tau + 1))
    return Population(y0, y0 + tau, cidx, space, label=f"GMM(seed={seed}, beta={beta})")


def youtube_like_sizes(
    n_clusters: int = 50, smallest: int = 199, ratio: float = 1.0295938, total: int = 22179
) -> np.ndarray:
    """Cluster sizes round(199 r^j), residual added to the largest so they sum to 22,179
    (spec §4.2)."""
    sizes = np.rint(smallest * ratio ** np.arange(n_clusters)).astype(np.int64)
    sizes[-1] += total - sizes.sum()
    return sizes


def make_youtube_like(
    seed: int = 0,
    v: float = 0.1,
    coef: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0),
    tau: int = 1,
    noise_seed: int | None = None,
) -> Population:
    """YouTube-like synthetic community data with Option A quantization to K = 8 levels (spec §4.2).

    Cluster features (n_c, internal edges, outside edges, density) are drawn from the stand-in
    model, centred and scaled to unit norm across the 50 clusters; y'(0) = x_c^T coef + N(0, v^2),
    y(0) = clip(round(y'/Delta), -3, 3) with Delta = 2 sd(y')/3, y(1) = y(0) + 1, Y = {-3..4}.
    ``noise_seed`` (default: from ``seed``) redraws only the outcome noise w_i (Exp. 7).
    """
    rng = np.random.default_rng(seed)
    n_c = youtube_like_sizes()
    pairs = n_c * (n_c - 1) / 2
    e_c = np.minimum(np.rint(n_c * rng.uniform(2, 10, n_c.size) / 2), pairs)
    x3 = np.rint(n_c * rng.uniform(0.5, 5, n_c.size))
    x = np.column_stack([n_c, e_c, x3, e_c / pairs]).astype(float)
    x -= x.mean(axis=0)
    x /= np.linalg.norm(x, axis=0)
    cidx = np.repeat(np.arange(n_c.size), n_c)
    noise_rng = rng if noise_seed is None else np.random.default_rng([seed, noise_seed])
    yp = x[cidx] @ np.asarray(coef, float) + v * noise_rng.standard_normal(cidx.size)
    y0 = _quantize(yp, 3, float(np.std(yp)))
    space = ResponseSpace(np.arange(-3, 3 + tau + 1))
    return Population(y0, y0 + tau, cidx, space, label=f"YouTube-like synthetic (seed={seed})")


def draw_subpopulation(
    rng: np.random.Generator, pop: Population, sizes: tuple[int, ...] = (500, 1000, 2000)
) -> Population:
    """Sample ``sizes[c]`` units without replacement from each cluster c (spec §4.1)."""
    idx = [
        rng.choice(np.flatnonzero(pop.cidx == c), size=s, replace=False)
        for c, s in enumerate(sizes)
    ]
    return pop.subset(np.sort(np.concatenate(idx)))


def assign_balanced(rng: np.random.Generator, cidx: np.ndarray, reps: int = 1) -> np.ndarray:
    """Completely randomized within clusters, n_{1,c} = floor(n_c/2) treated; shape (reps, n)
    (spec §4.1, §4.2)."""
    C = int(cidx.max()) + 1
    n_c = np.bincount(cidx, minlength=C)
    order = np.argsort(cidx[None, :] + rng.random((reps, cidx.size)), axis=1)
    sorted_c = np.sort(cidx)
    start = np.concatenate([[0], np.cumsum(n_c)[:-1]])
    treated_sorted = (np.arange(cidx.size) - start[sorted_c]) < n_c[sorted_c] // 2
    z = np.empty((reps, cidx.size), dtype=np.int64)
    np.put_along_axis(
        z, order, np.broadcast_to(treated_sorted, order.shape).astype(np.int64), axis=1
    )
    return z
