"""Cluster-DP (Algorithm 2), Cluster-Free-DP and Uniform-Prior-DP as vectorised array kernels.

The kernels work on integer codes and are vectorised over R repetitions: group codes ``g`` may be
shape (n,) or (R, n) (a fresh assignment per repetition), outputs are (R, n) / (R, G, K).
The user-facing object is :class:`dpcausal.cluster_dp.release.ClusterDP`.

Sampler notes (privacy_testing.md): a release's priors take their noise from
:func:`exact_noisy_histograms`, the exact discrete Laplace of :mod:`dpcausal.noise` on a
power-of-two lattice (floating-point Laplace leaks through its low bits). The reproduction kernels
(:func:`noisy_priors`, :func:`privatize_arrays`, used by the simulations) keep numpy's
floating-point ``Generator.laplace``, vectorised over repetitions, and accept sigma = 0: they never
publish anything. The resampling is an inverse-CDF draw from ``Generator.random`` (a discrete
output); coins and uniforms are drawn for every unit and group whatever the data (constant shape).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpcausal.noise import laplace_mechanism, lattice_step


def qtilde(p_hat: np.ndarray, w: np.ndarray, gamma: float) -> np.ndarray:
    """Truncate and renormalise a noisy histogram: Algorithm 2 steps 3-4, spec cluster_dp.md §2.1.

    Vectorised over leading axes; the last axis has length K. Closed forms (proof of Lemma A.7):
    if S = sum clip(p+w, gamma, 1) > 1, q_t = gamma + (q - gamma)(1 - K gamma)/(S - K gamma);
    otherwise q_t = q + (1 - q)(1 - S)/(K - S). The result sums to 1 and lies in
    [gamma, 1 - (K-1) gamma].
    """
    K = p_hat.shape[-1]
    q = np.clip(p_hat + w, gamma, 1.0)
    S = q.sum(axis=-1, keepdims=True)
    over = S > 1.0
    # the unused branch is masked out; the denominators are never 0 on the branch that is used
    with np.errstate(divide="ignore", invalid="ignore"):
        down = gamma + (q - gamma) * ((1.0 - K * gamma) / (S - K * gamma))
        up = q + (1.0 - q) * ((1.0 - S) / (K - S))
    return np.where(over, down, up)


def transition_matrix(q_t: np.ndarray, lam: float) -> np.ndarray:
    """Q[y', y] = (1 - lam) 1{y' = y} + lam q_t(y'): eq. (2), spec §2.1 (columns: true y)."""
    K = q_t.shape[-1]
    return (1.0 - lam) * np.eye(K) + lam * q_t[..., :, None] * np.ones(K)


def group_counts(y_idx: np.ndarray, g: np.ndarray, G: int, K: int) -> np.ndarray:
    """Histogram of outcome codes per group: counts[r, g, k] (spec §1.1, p_hat numerator)."""
    g2 = np.atleast_2d(g)
    R = g2.shape[0]
    flat = (np.arange(R)[:, None] * G + g2) * K + np.broadcast_to(y_idx, g2.shape)
    return np.bincount(flat.ravel(), minlength=R * G * K).reshape(R, G, K)


def draw_prior_noise(rng: np.random.Generator, sigma: float, n_g: np.ndarray, K: int) -> np.ndarray:
    """Laplace(sigma / n_{a,c}) noise, i.i.d. per (repetition, group, value): Algorithm 2 step 2.

    ``n_g`` has shape (R, G); the result has shape (R, G, K).
    """
    scale = sigma / np.asarray(n_g, dtype=float)
    return rng.laplace(0.0, 1.0, size=scale.shape + (K,)) * scale[..., None]


def exact_noisy_histograms(counts: np.ndarray, sigma: float,
                           rng: np.random.Generator) -> np.ndarray:
    """p_hat + Laplace(sigma/n_{a,c}) for every (group, value) of one release, drawn exactly:
    Algorithm 2 steps 1-2, spec §2.1 and §6 E1.

    ``counts`` has shape (G, K). Each cell p_hat(y) = count/n is rounded, in exact rational
    arithmetic, to the lattice of :func:`dpcausal.noise.lattice_step` (1/n) and released by
    :func:`dpcausal.noise.laplace_mechanism` (every group in one vectorised draw) with
    sensitivity 1/n and epsilon 1/sigma: its
    continuous-equivalent scale is sigma/n (1 + <= 2^-19). One substituted label moves 1/n of
    mass between two cells of its group, so the group's histogram costs 2/sigma, the strict
    eps1 (the paper's 1/sigma is erratum E1); groups compose in parallel. The exact rounding
    keeps neighbouring cells within ``floor(1/(n g)) + 1`` lattice steps, the sensitivity the
    sampler is calibrated to, for n < 2^31.
    """
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be a finite number > 0 for noisy priors, got {sigma!r}")
    n = [sum(row) for row in np.asarray(counts).tolist()]
    on_lattice = np.array([[round(Fraction(count, m) / Fraction(lattice_step(1.0 / m)))
                            * lattice_step(1.0 / m) for count in row]
                           for row, m in zip(np.asarray(counts).tolist(), n, strict=True)])
    sensitivity = 1.0 / np.array(n, dtype=float)[:, None]   # one lattice per group
    return laplace_mechanism(on_lattice, sensitivity, 1.0 / sigma, rng)


def release_priors(counts: np.ndarray, gamma: float, sigma: float,
                   rng: np.random.Generator) -> np.ndarray:
    """q_tilde of every group of one release: Algorithm 2 steps 1-4 with exact noise (spec §2.1).

    ``counts`` has shape (G, K); sigma = inf is the uniform prior, which reads no count
    (spec §2.3, decision A2).
    """
    if math.isinf(sigma):
        return np.full(counts.shape, 1.0 / counts.shape[-1])
    noisy = exact_noisy_histograms(counts, sigma, rng)
    return qtilde(noisy, np.zeros_like(noisy), gamma)


def noisy_priors(
    counts: np.ndarray, gamma: float, sigma: float, rng: np.random.Generator
) -> np.ndarray:
    """q_tilde for every group from its counts: Algorithm 2 steps 1-4 (spec §2.1), reproduction
    kernel (floating-point noise, vectorised over repetitions; releases use
    :func:`release_priors`).

    sigma = inf returns the uniform prior without touching the counts (spec §2.3 decision A2).
    """
    R, G, K = counts.shape
    if np.isinf(sigma):
        return np.full((R, G, K), 1.0 / K)
    n_g = counts.sum(axis=-1)
    p_hat = counts / n_g[..., None]
    w = np.zeros_like(p_hat) if sigma == 0 else draw_prior_noise(rng, sigma, n_g, K)
    return qtilde(p_hat, w, gamma)


def resample(
    y_idx: np.ndarray, g: np.ndarray, q_t: np.ndarray, lam: float, rng: np.random.Generator
) -> np.ndarray:
    """Keep each label with prob 1 - lam, else redraw it from its group's q_t: Algorithm 2 step 5.

    ``q_t`` has shape (R, G, K), ``g`` shape (n,) or (R, n); returns codes of shape (R, n).
    The coin and the uniform are drawn for every unit (constant shape, whatever the data).
    """
    R, n = q_t.shape[0], np.shape(y_idx)[-1]
    keep = rng.random((R, n)) >= lam
    u = rng.random((R, n))
    return apply_resampling(y_idx, g, q_t, keep, u)


def apply_resampling(
    y_idx: np.ndarray, g: np.ndarray, q_t: np.ndarray, keep: np.ndarray, u: np.ndarray
) -> np.ndarray:
    """Algorithm 2 step 5 given the coins: y_tilde = y if keep else the inverse-CDF draw of q_t
    at u.

    The inverse-CDF draw uses one sorted array of all groups' CDFs, shifted by 2 per row so that a
    single ``searchsorted`` serves every (repetition, group). Shapes: q_t (R, G, K); g, keep, u
    broadcastable to (R, n).
    """
    R, G, K = q_t.shape
    n = np.shape(y_idx)[-1]
    g2 = np.broadcast_to(g, (R, n))
    cdf = np.cumsum(q_t, axis=-1)
    cdf[..., -1] = 1.0
    rows = np.arange(R)[:, None] * G + g2  # (R, n) row of each unit's CDF
    flat = (cdf.reshape(R * G, K) + 2.0 * np.arange(R * G)[:, None]).ravel()
    drawn = np.searchsorted(flat, u + 2.0 * rows, side="right") - rows * K
    np.minimum(drawn, K - 1, out=drawn)  # u + 2 row rounding at the top edge
    return np.where(keep, np.broadcast_to(y_idx, (R, n)), drawn)


def privatize_arrays(
    y_idx: np.ndarray,
    g: np.ndarray,
    G: int,
    K: int,
    gamma: float,
    sigma: float,
    lam: float,
    rng: np.random.Generator,
    reps: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2 on codes for ``reps`` repetitions: returns (y_tilde codes (R, n), q_t (R, G, K)).

    Cluster-DP: g = 2 * cluster + arm; Cluster-Free-DP: g = arm; Uniform-Prior-DP: sigma = inf.
    Inputs are assumed validated (every group non-empty); see ClusterDP.check_input for checks.
    """
    g2 = np.broadcast_to(g, (reps, np.shape(y_idx)[-1]))
    counts = group_counts(y_idx, g2, G, K)
    q_t = noisy_priors(counts, gamma, sigma, rng)
    return resample(y_idx, g2, q_t, lam, rng), q_t
