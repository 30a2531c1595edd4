"""RDP accountant of the Poisson-binomial mechanism (closed form) and the CKS conversion.

References
----------
Chen, Cormode, Bharadwaj, Romov, Özgür (2024), "Federated Experiment Design under Distributed
Differential Privacy", AISTATS, Appendix A (Algorithm 5, eq. 6); spec federated_secagg.md §2.3.
Canonne, Kamath, Steinke (2020), "The discrete Gaussian for differential privacy", Prop. 12.
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS, compute_epsilon
from numpy.typing import ArrayLike
from scipy.special import gammaln, logsumexp

#: The reproduction grid of spec §2.3 (dp_accounting's default orders).
DEFAULT_ORDERS: tuple[float, ...] = tuple(float(a) for a in DEFAULT_RDP_ORDERS)

# Terms beyond a Chernoff window are bounded (not summed): their total is at most
# exp(-_TAIL_MARGIN) relative to the kept mass, and that bound is added back (see _window).
_TAIL_MARGIN = 45.0


def check_orders(orders: ArrayLike | None) -> np.ndarray:
    """Validate a grid of Rényi orders (all > 1, finite); ``None`` gives :data:`DEFAULT_ORDERS`."""
    if orders is None:
        return np.asarray(DEFAULT_ORDERS, dtype=float)
    arr = np.asarray(orders, dtype=float).ravel()
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 1.0):
        raise ValueError(
            f"orders must be a non-empty sequence of finite Rényi orders > 1, got {orders!r}; "
            "pass None for dp_accounting's DEFAULT_RDP_ORDERS"
        )
    return arr


def check_theta(theta: float) -> float:
    """Refuse a PBM bias outside (0, 1/4] (spec §2.4 cap)."""
    if isinstance(theta, bool) or not (isinstance(theta, (int, float, np.floating))
                                       and 0.0 < float(theta) <= 0.25):
        raise ValueError(f"theta must be in (0, 1/4] (PBM bias cap, spec §2.4), got {theta!r}")
    return float(theta)


def check_count(name: str, value: int, minimum: int = 1) -> int:
    """Refuse a non-integer or too small count (clients, trials)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _window(n: int, theta: float, max_exponent: float) -> tuple[np.ndarray, float]:
    """Support points kept for the closed form, and the log of a bound on the dropped weight.

    With x_k = 2 theta (k - nq)/(q(1-q)n), log L(k) = log1p(x_k) <= x_k on the right and
    -log L(k) <= |x_k| (1-q)/q on the left, so |c| log L(k) <= b |k - nq| with
    b = 2 |c| theta / (q^2 n) where L^c > 1. Chernoff with Hoeffding's lemma then bounds each
    dropped tail of E[L^c] by exp(-2 s^2/n + b s) for s = |k - nq| >= b n / 4.
    """
    q = 0.5 - theta
    b = 2.0 * max_exponent * theta / (q * q * n)
    need = _TAIL_MARGIN + math.log(2.0)
    s = (b + math.sqrt(b * b + 8.0 * need / n)) * n / 4.0
    lo, hi = max(0, math.floor(n * q - s)), min(n, math.ceil(n * q + s))
    k = np.arange(lo, hi + 1, dtype=float)
    if lo == 0 and hi == n:
        return k, -math.inf
    return k, math.log(2.0) - 2.0 * s * s / n + b * s


def _log_moments(n: int, theta: float, exponents: np.ndarray) -> np.ndarray:
    """log E_{K~Binom(n, q)}[L(K)^c] for each exponent c, q = 1/2 - theta (spec §2.3 closed form).

    Numerics (spec §7.3, review note): normalised log-pmf, log L(k) via ``log1p`` of
    L(k) - 1 = 2 theta (k - n q) / (q (1 - q) n), and ``expm1`` for small moments.
    """
    q = 0.5 - theta
    k, log_tail = _window(n, theta, float(np.max(np.abs(exponents))))
    logpmf = (gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)
              + k * math.log(q) + (n - k) * math.log1p(-q))
    logpmf -= logsumexp(logpmf)
    log_l = np.log1p(2.0 * theta * (k - n * q) / (q * (1.0 - q) * n))
    pmf = np.exp(logpmf)
    out = np.empty(exponents.size)
    block = max(1, 2_000_000 // k.size)  # bound the (orders x support) temporaries
    for start in range(0, exponents.size, block):
        cl = exponents[start:start + block, None] * log_l[None, :]
        big = logsumexp(logpmf + cl, axis=1)
        near_one = np.abs(big) < 1e-2  # moment close to 1: sum pmf * (L^c - 1), no cancellation
        if near_one.any():
            c_small = cl[near_one]
            small = np.abs(c_small) < 1.0
            terms = np.where(small, pmf * np.expm1(np.where(small, c_small, 0.0)),
                             np.exp(np.minimum(logpmf + c_small, 700.0)) - pmf)
            big[near_one] = np.log1p(terms.sum(axis=1))
        out[start:start + block] = np.logaddexp(big, log_tail) if log_tail > -math.inf else big
    return out


def pbm_rdp(n: int, m: int, theta: float, orders: ArrayLike | None = None) -> np.ndarray:
    """RDP curve of one PBM sum over ``n`` clients with ``m`` trials each.

    Algorithm 5 / eq. (6) in closed form: spec federated_secagg.md §2.3. Returns
    ``m * max(D_a(P1||P2), D_a(P2||P1))`` per order, with P1 = Binom(n, q),
    P2 = Binom(n-1, q) * Ber(1-q), q = 1/2 - theta.

    Parameters
    ----------
    n : int
        Number of clients whose trials are summed (>= 1).
    m : int
        Binomial trials per client (>= 1).
    theta : float
        PBM bias, in (0, 1/4].
    orders : sequence of float, optional
        Rényi orders (> 1); dp_accounting's DEFAULT_RDP_ORDERS when None.

    Returns
    -------
    numpy.ndarray
        epsilon(order) for each order.

    Notes
    -----
    .. math:: D_\\alpha(P_1\\|P_2) = \\tfrac{1}{\\alpha-1}\\log E_{K}[L(K)^{1-\\alpha}],\\quad
              D_\\alpha(P_2\\|P_1) = \\tfrac{1}{\\alpha-1}\\log E_{K}[L(K)^{\\alpha}]

    Support points outside a Chernoff window are not summed; a rigorous upper bound on their
    weight (relative size < e^-45) is added instead, so the result never understates the curve.
    """
    n = check_count("n", n)
    m = check_count("m", m)
    theta = check_theta(theta)
    a = check_orders(orders)
    moments = _log_moments(n, theta, np.concatenate([1.0 - a, a]))
    forward, backward = moments[: a.size], moments[a.size:]
    return m * np.maximum(forward, backward) / (a - 1.0)


def cks_epsilon(rdp: ArrayLike, delta: float,
                orders: ArrayLike | None = None) -> tuple[float, float]:
    """(epsilon, optimal order) of an RDP curve at ``delta``: CKS 2020 Prop. 12, spec §1.

    Delegates to ``dp_accounting.rdp.compute_epsilon``:
    eps = min_a { eps(a) + [log(1/delta) + (a-1) log(1 - 1/a) - log a] / (a - 1) }.
    """
    a = check_orders(orders)
    curve = np.asarray(rdp, dtype=float).ravel()
    if curve.shape != a.shape:
        raise ValueError(f"rdp has {curve.size} values but there are {a.size} orders")
    check_delta(delta)
    eps, order = compute_epsilon(a, curve, delta)
    return float(eps), float(order)


def check_delta(delta: float) -> float:
    """Refuse a DP delta outside (0, 1)."""
    if not (isinstance(delta, (int, float, np.floating)) and 0.0 < float(delta) < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return float(delta)


def check_epsilon(epsilon: float) -> float:
    """Refuse a target epsilon that is not a finite number > 0."""
    if isinstance(epsilon, bool) or not (isinstance(epsilon, (int, float, np.floating))
                                         and math.isfinite(epsilon) and float(epsilon) > 0.0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    return float(epsilon)


def gaussian_rho_theta(rho: float, n: int, m: int) -> float:
    """theta whose PBM curve is close to rho-zCDP, capped at 1/4: spec §2.3 asymptotics.

    theta(rho) = sqrt(rho n / (8 m + 4 rho n)), from eps(a) ~ 8 a m theta^2 / (n (1 - 4 theta^2)).
    Used to initialise calibration and to map a joint rho to (theta1, theta2); never for accounting.
    """
    return min(0.25, math.sqrt(rho * n / (8.0 * m + 4.0 * rho * n)))
