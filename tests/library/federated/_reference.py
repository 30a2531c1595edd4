"""Hand-written, loop-based references for the federated tests (not using the package)."""

from __future__ import annotations

import math


def log_binom_pmf(n: int, p: float) -> list[float]:
    return [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + (k * math.log(p) if k else 0.0) + ((n - k) * math.log1p(-p) if n - k else 0.0)
            for k in range(n + 1)]


def log_convolve(a: list[float], b: list[float]) -> list[float]:
    out = [-math.inf] * (len(a) + len(b) - 1)
    for i, la in enumerate(a):
        for j, lb in enumerate(b):
            s = la + lb
            o = out[i + j]
            hi = max(o, s)
            out[i + j] = hi + math.log(math.exp(o - hi) + math.exp(s - hi)) if hi > -math.inf else s
    return out


def renyi(lp: list[float], lq: list[float], order: float) -> float:
    terms = [order * a + (1 - order) * b for a, b in zip(lp, lq, strict=True)]
    hi = max(terms)
    return (hi + math.log(sum(math.exp(t - hi) for t in terms))) / (order - 1)


def exact_pbm_rdp(n: int, m: int, theta: float, order: float) -> float:
    """Algorithm 3 (exact, worst neighbour (0, m)): spec §2.3, both directions."""
    q = 0.5 - theta
    p1 = log_binom_pmf(m * n, q)
    p2 = log_convolve(log_binom_pmf(m * (n - 1), q), log_binom_pmf(m, 1 - q))
    return max(renyi(p1, p2, order), renyi(p2, p1, order))


def sum_distribution(x: list[float], R: float, m: int, theta: float) -> list[float]:
    """Exact log-pmf of sum_i Binom(m, 1/2 + theta x_i / R) by repeated convolution."""
    out = [0.0]
    for xi in x:
        out = log_convolve(out, log_binom_pmf(m, 0.5 + theta * xi / R))
    return out
