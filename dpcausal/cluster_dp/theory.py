"""Exact variances, the cluster-quality metric and the Theorem 3.5 bound (spec cluster_dp.md §1.1,
§3.2-3.5).

These use the potential outcomes (y0, y1) of every unit: simulation diagnostics and planning on
public or synthetic data only, never on private data.
"""

from __future__ import annotations

import numpy as np

from dpcausal.cluster_dp.spaces import ResponseSpace


def _cluster_stats(
    v: np.ndarray, cidx: np.ndarray, C: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-cluster size, mean and sample variance S^2 (ddof 1) of v."""
    n_c = np.bincount(cidx, minlength=C).astype(float)
    mean = np.bincount(cidx, weights=v, minlength=C) / n_c
    dev = v - mean[cidx]
    s2 = np.bincount(cidx, weights=dev * dev, minlength=C) / (n_c - 1)
    return n_c, mean, s2


def var_nodp_exact(y0: np.ndarray, y1: np.ndarray, cidx: np.ndarray, n1c: np.ndarray) -> float:
    """Neyman variance of the stratified difference in means over z: eq. (A.2), spec §1.1.

    .. math:: \\sum_c \\frac{n_c^2}{n^2}\\Big(\\frac{S^2(y_c(1))}{n_{1,c}}
              + \\frac{S^2(y_c(0))}{n_{0,c}} - \\frac{S^2(\\tau_c)}{n_c}\\Big)
    """
    y0, y1 = np.asarray(y0, float), np.asarray(y1, float)
    n1c = np.asarray(n1c, float)
    C = n1c.size
    n_c, _, s1 = _cluster_stats(y1, cidx, C)
    _, _, s0 = _cluster_stats(y0, cidx, C)
    _, _, st = _cluster_stats(y1 - y0, cidx, C)
    n = n_c.sum()
    return float(np.sum((n_c / n) ** 2 * (s1 / n1c + s0 / (n_c - n1c) - st / n_c)))


def phi(y0: np.ndarray, y1: np.ndarray, cidx: np.ndarray, n1c: np.ndarray) -> tuple[float, float]:
    """Cluster homogeneity metric phi_a = sum_c (n_c/n)^2 S^2(y_c(a))/n_{a,c}: Definition 3.4,
    spec §3.2."""
    n1c = np.asarray(n1c, float)
    C = n1c.size
    n_c, _, s1 = _cluster_stats(np.asarray(y1, float), cidx, C)
    _, _, s0 = _cluster_stats(np.asarray(y0, float), cidx, C)
    n = n_c.sum()
    return (
        float(np.sum((n_c / n) ** 2 * s0 / (n_c - n1c))),
        float(np.sum((n_c / n) ** 2 * s1 / n1c)),
    )


def a_term(
    x: np.ndarray | float, space: ResponseSpace, lam: float, gamma: float, sigma: float
) -> np.ndarray | float:
    """A(x) of Theorem 3.5 (appendix form, spec §3.3 and §6 E5).

    .. math:: A(x) = 2K\\Big[B^2\\big(\\tfrac{3}{(1-\\lambda)^2}+2\\big)
              + \\tfrac{(\\lambda\\sqrt K+1)^2}
              {(1-\\lambda)^2}\\|y\\|_2^2 (1-\\lambda(K-1)\\gamma)\\Big]
              \\Big[\\gamma + \\tfrac{\\sigma}{x}(e^{-\\gamma x/\\sigma} - e^{-x/\\sigma})\\Big]
    """
    K, B, l2 = space.K, space.B, space.l2sq
    first = B**2 * (3 / (1 - lam) ** 2 + 2) + (lam * np.sqrt(K) + 1) ** 2 / (1 - lam) ** 2 * l2 * (
        1 - lam * (K - 1) * gamma
    )
    return 2 * K * first * lemma_a12_bracket(x, gamma, sigma)


def lemma_a12_bracket(x: np.ndarray | float, gamma: float, sigma: float) -> np.ndarray | float:
    """gamma + (sigma/x)(e^{-gamma x/sigma} - e^{-x/sigma}) (Lemma A.12, spec §3.3); 1 at
    sigma = inf."""
    x = np.asarray(x, dtype=float)
    if np.isinf(sigma):
        out = np.ones_like(x)
    elif sigma == 0:
        out = np.full_like(x, gamma)
    else:
        out = gamma + (sigma / x) * (np.exp(-gamma * x / sigma) - np.exp(-x / sigma))
    return out if out.ndim else float(out)


def lemma_a12_bound(K: int, n: float, gamma: float, sigma: float) -> float:
    """Bound on E_w ||q_t - p_hat||_1 for a group of n units: Lemma A.12, spec §3.3."""
    return float(2 * K * lemma_a12_bracket(n, gamma, sigma))


def thm35_bound(
    n_cell: np.ndarray,
    phi0: float,
    phi1: float,
    space: ResponseSpace,
    lam: float,
    gamma: float,
    sigma: float,
) -> tuple[float, float]:
    """The two terms of Theorem 3.5's upper bound on Var_{DP,z}[tau_hat_Q] - Var_z[tau_hat_NoDP]
    (spec §3.3).

    Returns (first, second): first = (1/(1-lam)^2 - 1)(phi_0 + phi_1) (also the observed lower
    edge), second = sum_a sum_c (n_c/n)^2 A(n_{a,c})/n_{a,c}. ``n_cell`` has shape (C, 2).
    """
    n_cell = np.asarray(n_cell, dtype=float)
    n_c = n_cell.sum(axis=1)
    n = n_c.sum()
    first = (1 / (1 - lam) ** 2 - 1) * (phi0 + phi1)
    second = float(
        np.sum((n_c[:, None] / n) ** 2 * a_term(n_cell, space, lam, gamma, sigma) / n_cell)
    )
    return float(first), second


def exact_cond_var(
    y: np.ndarray,
    g: np.ndarray,
    weights: np.ndarray,
    q_t: np.ndarray,
    lam: float,
    space: ResponseSpace,
) -> np.ndarray:
    """Var_DP(tau_hat_Q | z, q_t) per repetition: spec §3.4 (equals eq. 26).

    .. math:: \\mathrm{Var}(\\hat y_i) = \\frac{\\lambda}{1-\\lambda}(y_i - m)^2
              + \\frac{\\lambda V_q}{(1-\\lambda)^2}, \\quad \\mathrm{Var}(\\hat\\tau) =
              \\sum_i w_i^2 \\mathrm{Var}(\\hat y_i)

    ``y`` observed values (R, n) or (n,), ``g`` group codes, ``weights`` the estimator's unit
    weights (:func:`dpcausal.cluster_dp.estimation.unit_weights`), ``q_t`` (R, G, K).
    """
    vals = space.values
    m = q_t @ vals  # (R, G)
    vq = q_t @ vals**2 - m**2
    R = q_t.shape[0]
    w2 = np.atleast_2d(weights)
    g2 = np.broadcast_to(g, w2.shape)
    r = np.arange(R)[:, None]
    mi, vi = m[r, g2], vq[r, g2]
    var_i = lam / (1 - lam) * (np.broadcast_to(y, w2.shape) - mi) ** 2 + lam * vi / (1 - lam) ** 2
    return np.sum(w2**2 * var_i, axis=1)


def uniform_var_exact(
    y0: np.ndarray,
    y1: np.ndarray,
    cidx: np.ndarray,
    n1c: np.ndarray,
    space: ResponseSpace,
    lam: float,
) -> float:
    """Var_{DP,z} of the stratified Uniform-Prior estimator (1): Theorem A.5 / Cor. A.6, spec §3.5.

    Pass ``cidx = 0`` for all units and ``n1c = [n_1]`` for the unstratified version (8).
    """
    y0, y1 = np.asarray(y0, float), np.asarray(y1, float)
    n1c = np.asarray(n1c, float)
    C = n1c.size
    n_c = np.bincount(cidx, minlength=C).astype(float)
    n0c = n_c - n1c
    n = n_c.sum()
    ybar, y2bar = space.values.mean(), (space.values**2).mean()
    m0 = np.bincount(cidx, weights=y0, minlength=C) / n_c
    m1 = np.bincount(cidx, weights=y1, minlength=C) / n_c
    q0 = np.bincount(cidx, weights=y0**2, minlength=C) / n_c
    q1 = np.bincount(cidx, weights=y1**2, minlength=C) / n_c
    w2 = (n_c / n) ** 2
    mid = np.sum(w2 * (1 / n0c + 1 / n1c)) * (lam * y2bar - lam**2 * ybar**2) / (1 - lam) ** 2
    last = np.sum(
        w2
        * (
            lam / (1 - lam) * (q0 / n0c + q1 / n1c)
            - 2 * lam * ybar / (1 - lam) * (m0 / n0c + m1 / n1c)
        )
    )
    return var_nodp_exact(y0, y1, cidx, n1c) + float(mid + last)
