"""Exact sensitivities, worst-case suppression biases and the per-cell error of Clip-User.

Every function works on Python/numpy integer scalars (returning ``float``) and, element-wise,
on numpy integer arrays (returning arrays), so the algorithm's scalar hot loop and the
vectorised scans of the pseudo-user step share one implementation.

References
----------
Rameshwar & Tandon, "On Improving the Composition Privacy Loss in Differential Privacy for
Fixed Estimation Error"; spec ``user_level_clip.md`` §2 (with erratum E1 corrected).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

VARIANTS = ("corrected", "paper_statement")


def _is_array(*xs: Any) -> bool:
    return any(isinstance(x, np.ndarray) for x in xs)


def T(N: Any, k: Any) -> Any:
    """Largest population variance / U^2 of N values in {0, U}, at most k equal to U: spec §2.

    .. math:: T(N, k) = j^*(N - j^*)/N^2,\\quad j^* = \\min(k, \\lfloor N/2 \\rfloor)

    Parameters
    ----------
    N : int or ndarray of int
        Number of values, ``N >= 1``.
    k : int or ndarray of int
        Largest number of values that may equal ``U``, ``k >= 0``.
    """
    if isinstance(N, np.ndarray) or isinstance(k, np.ndarray):
        N = np.asarray(N, dtype=np.int64)
        k = np.asarray(k, dtype=np.int64)
        if np.any(N < 1) or np.any(k < 0):
            raise ValueError("T(N, k) needs N >= 1 and k >= 0 element-wise")
        j = np.minimum(k, N // 2)
        return j * (N - j) / N.astype(np.float64) ** 2
    N, k = int(N), int(k)
    if N < 1 or k < 0:
        raise ValueError(f"T(N, k) needs N >= 1 and k >= 0, got N={N}, k={k}")
    return _t(N, k)


def _t(N: int, k: int) -> float:
    """:func:`T` for validated Python ints (hot path of Clip-User)."""
    j = k if k < N // 2 else N // 2
    return j * (N - j) / (N * N)


def delta_mu(c: Any, gstar: Any, U: float) -> Any:
    """User-level sensitivity of the (clipped) mean, eq. (5)/(9): spec §2.1, ``U*gstar/c``."""
    return U * gstar / c


def delta_var(c: Any, gstar: Any, U: float) -> Any:
    """User-level sensitivity of the (clipped) population variance, Prop III.1 / Lemma III.3:
    spec §2.2.

    .. math:: \\Delta_{Var} = U^2 T(c, \\Gamma^*)
    """
    return U * U * T(c, gstar)


def bias_mu(n: Any, c: Any, U: float) -> Any:
    """Worst-case bias of the mean after keeping c of n samples, Thm IV.1: spec §2.3,
    ``U(n-c)/n``."""
    return U * (n - c) / n


def bias_var(n: Any, c: Any, U: float, variant: str = "corrected") -> Any:
    """Worst-case bias of the variance after keeping c of n samples, Thm IV.2: spec §2.4.

    ``variant="corrected"`` (default) is ``U^2 T(n, n-c)``, the bound the appendix proof and brute
    force support. ``"paper_statement"`` is the printed, swapped statement ``U^2 T(n, c)``
    (erratum E1): it is NOT a valid bound and exists only to reproduce the paper's curves.
    """
    if variant == "corrected":
        k = n - c
    elif variant == "paper_statement":
        k = c
    else:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if _is_array(n, c):
        n = np.asarray(n, dtype=np.int64)
        k = np.asarray(k, dtype=np.int64)
        return np.where(n == np.asarray(c), 0.0, U * U * T(n, np.maximum(k, 0)))
    if c == n:
        return 0.0
    return U * U * T(n, k)


def grid_error(
    n: Any,
    c: Any,
    gstar: Any,
    U: float,
    eps: float,
    variant: str = "corrected",
    split: tuple[float, float] = (0.5, 0.5),
    weights: tuple[float, float] = (1.0, 1.0),
) -> Any:
    """Worst-case error of one cell's (mean, variance) release, eq. (11)-(13): spec §2.5, §7.4.

    .. math:: E_g = w_\\mu\\big(E_\\mu + \\Delta_\\mu/\\varepsilon_\\mu\\big)
              + w_{Var}\\big(E_{Var} + \\Delta_{Var}/\\varepsilon_{Var}\\big)

    with ``(eps_mu, eps_var) = split * eps``. A statistic whose share of ``split`` is 0 is not
    released and contributes nothing; with weights (1, 1) and split (1/2, 1/2) this is the paper's
    ``E_g``. ``+inf`` when ``c <= 0`` (an emptied cell is not releasable, spec A3). ``n`` is the
    cell's original number of records, ``c`` the retained number, ``gstar`` the largest retained
    count of one user.
    """
    if _is_array(n, c, gstar):
        eps_mu, eps_var = split[0] * eps, split[1] * eps
        w_mu, w_var = weights
        n_a, c_a, g_a = np.broadcast_arrays(
            np.asarray(n, np.int64), np.asarray(c, np.int64), np.asarray(gstar, np.int64))
        res = np.full(n_a.shape, np.inf)
        ok = c_a > 0
        n_a, c_a, g_a = n_a[ok], c_a[ok], g_a[ok]
        out = np.zeros(n_a.shape)
        if eps_mu > 0:
            out += w_mu * (bias_mu(n_a, c_a, U) + delta_mu(c_a, g_a, U) / eps_mu)
        if eps_var > 0:
            out += w_var * (bias_var(n_a, c_a, U, variant) + delta_var(c_a, g_a, U) / eps_var)
        res[ok] = out
        return res
    return scalar_grid_error(U, eps, variant, split, weights)(int(n), int(c), int(gstar))


def scalar_grid_error(
    U: float, eps: float, variant: str = "corrected", split: tuple[float, float] = (0.5, 0.5),
    weights: tuple[float, float] = (1.0, 1.0),
) -> Callable[[int, int, int], float]:
    """:func:`grid_error` with its public parameters bound, for Python-int (n, c, gstar).

    The Clip-User loop evaluates millions of candidates; this closure does plain float arithmetic
    (eq. (11)-(13), spec §2.5, same terms as the array path, tested equal) without dispatch.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    eps_mu, eps_var = split[0] * eps, split[1] * eps
    w_mu = weights[0] if eps_mu > 0 else 0.0
    w_var = weights[1] if eps_var > 0 else 0.0
    inv_mu = 1.0 / eps_mu if eps_mu > 0 else 0.0
    inv_var = 1.0 / eps_var if eps_var > 0 else 0.0
    U2 = U * U
    corrected = variant == "corrected"

    def error(n: int, c: int, gstar: int) -> float:
        if c <= 0:
            return math.inf
        out = w_mu * (U * (n - c) / n + U * gstar / c * inv_mu)         # Thm IV.1 + eq. (9)
        if w_var:
            bias = 0.0 if c == n else U2 * _t(n, n - c if corrected else c)   # Thm IV.2
            out += w_var * (bias + U2 * _t(c, gstar) * inv_var)          # + Lemma III.3
        return out

    return error


def check_error_params(
    U: float, eps: float, variant: str, split: tuple[float, ...], weights: tuple[float, ...]
) -> None:
    """Validate the public parameters of :func:`grid_error` (raises ``ValueError`` naming the
    fix)."""
    if not (isinstance(U, (int, float)) and math.isfinite(U) and U > 0):
        raise ValueError(f"U (the outcome range b - a) must be a finite number > 0, got {U!r}")
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {eps!r}; pick e.g. epsilon=1.0")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if (len(split) != 2 or min(split) < 0 or not math.isclose(sum(split), 1.0, abs_tol=1e-12)):
        raise ValueError(
            f"split must be two shares >= 0 summing to 1 (mean, variance), got {split!r}")
    if len(weights) != 2 or min(weights) < 0 or sum(weights) <= 0:
        raise ValueError(f"weights must be two numbers >= 0, not both 0, got {weights!r}")
    if all(w == 0 or s == 0 for w, s in zip(weights, split, strict=True)):
        raise ValueError(
            f"weights={weights!r} and split={split!r} leave no released statistic with a "
            "positive weight; give the released statistic a weight > 0")
