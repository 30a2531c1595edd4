"""Poisson-binomial mechanism (PBM): client-side encoders and server-side decoders.

Spec federated_secagg.md §2.1 (first moment, Algorithm 2) and §2.2 (second moment). Noise comes
from the injected ``numpy.random.Generator`` (simulation only; a deployment needs a CSPRNG on the
client, spec §7.3).
"""

from __future__ import annotations

import math

import numpy as np

from dpcausal.federated.rdp import check_count, check_theta


def check_bound(R: float) -> float:
    """Refuse an outcome bound R that is not a finite number > 0 (a bool or a string is
    refused, not coerced)."""
    if isinstance(R, bool) or not (isinstance(R, (int, float, np.floating))
                                   and math.isfinite(R) and R > 0):
        raise ValueError(f"R must be a finite outcome bound > 0, got {R!r}")
    return float(R)


def clip_outcomes(x: np.ndarray, R: float) -> np.ndarray:
    """Clip client outcomes to [-R, R]: spec §1 (Outcomes).

    Departs from spec §1 (which logs the clip count on the client): no count is returned, since
    in this one-process simulation any total would be an exact, non-private figure held next to
    the server.
    """
    R = check_bound(R)
    arr = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError("outcomes must be finite numbers; drop or impute NaN/inf before encoding")
    return np.clip(arr, -R, R)


def pbm_encode(x: np.ndarray, R: float, m: int, theta: float,
               rng: np.random.Generator) -> np.ndarray:
    """First-moment PBM report Z ~ Binom(m, 1/2 + theta x / R) per client: Algorithm 2, spec §2.1.

    Output is in {0, ..., m} (erratum 2: the paper writes Z_m). Inputs are clipped to [-R, R].
    """
    m, theta = check_count("m1", m), check_theta(theta)
    xc = clip_outcomes(x, R)
    return rng.binomial(m, 0.5 + theta * xc / R).astype(np.int64)


def pbm2_encode(x: np.ndarray, R: float, m: int, theta: float,
                rng: np.random.Generator) -> np.ndarray:
    """Second-moment PBM report Z' ~ Binom(m2, 1/2 + theta2 (x^2 - R^2/2)/(R^2/2)): spec §2.2."""
    m, theta = check_count("m2", m), check_theta(theta)
    xc = clip_outcomes(x, R)
    half = R * R / 2.0
    return rng.binomial(m, 0.5 + theta * (xc * xc - half) / half).astype(np.int64)


def decode_mean(total: int, n_g: int, m: int, theta: float, R: float) -> float:
    """Unbiased group mean from S = sum Z_i: eq. (3) corrected (erratum 1), spec §2.1.

    .. math:: \\hat\\mu_g = \\frac{R}{n_g m \\theta}\\left(S - \\frac{n_g m}{2}\\right)
    """
    theta = check_theta(theta)
    return R / (n_g * m * theta) * (total - n_g * m / 2.0)


def decode_second_moment(total: int, n_g: int, m: int, theta: float, R: float) -> float:
    """Unbiased sum of x_i^2 from S' = sum Z'_i: spec §2.2.

    .. math:: \\hat S_{2,g} = n_g R^2/2 + \\frac{R^2}{2 m_2 \\theta_2}(S' - n_g m_2/2)
    """
    theta = check_theta(theta)
    return n_g * R * R / 2.0 + R * R / (2.0 * m * theta) * (total - n_g * m / 2.0)


def mean_noise_bound(n_g: int, m: int, theta: float, R: float) -> float:
    """Data-free bound on Var(mu_hat_g | x): Theorem 4.1, spec §2.1: R^2 / (4 n_g m theta^2).

    Refuses theta outside (0, 1/4], a count below 1 and an R whose figures leave float64.
    """
    n_g, m = check_count("n_g", n_g), check_count("m", m)
    theta, R = check_theta(theta), check_bound(R)
    return R * R / (4.0 * n_g * m * theta * theta)


def private_variance(second_moment: float, mean: float, n_g: int, noise_bound: float,
                     R: float, debias: bool = True) -> float:
    """Private sample variance of one group: spec §2.2 (paper form with n_g, plus [D] fixes).

    s2 = (S2_hat - n_g mu_hat^2)/(n_g - 1), plus (n_g/(n_g-1)) * Var_DP(mu_hat) when ``debias``
    (the paper's E[s2|x] = s^2 is off by that amount), clipped to [0, R^2 n_g/(n_g-1)].
    """
    s2 = (second_moment - n_g * mean * mean) / (n_g - 1)
    if debias:
        s2 += n_g / (n_g - 1) * noise_bound
    return float(min(max(s2, 0.0), R * R * n_g / (n_g - 1)))
