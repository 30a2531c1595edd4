"""Calibration of the PBM bias theta to a target (epsilon, delta): spec federated_secagg.md §2.4.

Pure functions of public parameters (group sizes, trials, budget); nothing here touches data, so
the orchestration layer can reserve the privacy charge between calibration and encoding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import brentq

from dpcausal._results import ResultMixin
from dpcausal.federated.rdp import (
    check_count,
    check_delta,
    check_epsilon,
    check_orders,
    cks_epsilon,
    gaussian_rho_theta,
    pbm_rdp,
)

THETA_CAP = 0.25
_REL_TOL = 1e-7


def _solve_increasing(f: Callable[[float], float], target: float, lo: float, hi: float) -> float:
    """Largest x in [lo, hi] (relative tolerance 1e-7) with f(x) <= target; f non-decreasing.

    Widens the bracket as needed, finds the crossing with Brent's method, then steps down until
    f(x) <= target, so the returned point never overshoots the target.
    """
    while f(lo) > target:
        hi, lo = lo, lo - 2.0 * abs(lo) - 1.0 if lo <= 0 else lo / 4.0
    x = hi
    if f(hi) > target:
        x = brentq(lambda v: f(v) - target, lo, hi, xtol=1e-12, rtol=_REL_TOL / 4)
    step = _REL_TOL * max(abs(x), 1e-12)
    while f(x) > target:
        x -= step
        step *= 2.0
    return x


def calibrate(n: int, m: int, epsilon: float, delta: float,
              orders: ArrayLike | None = None) -> float:
    """theta giving one PBM sum over ``n`` clients (``m`` trials) the target epsilon at delta.

    Procedure of spec §2.4: theta = 1/4 if CKS(pbm_rdp(n, m, 1/4)) <= epsilon, else bisection of
    CKS(pbm_rdp(n, m, theta)) = epsilon over (0, 1/4]. The returned theta never exceeds the
    target (the lower end of the final bracket, relative width 1e-7).

    Parameters
    ----------
    n, m : int
        Clients in the sum (plan with the smaller group) and trials per client.
    epsilon, delta : float
        Target (epsilon, delta).
    orders : sequence of float, optional
        Rényi orders for the CKS conversion (dp_accounting defaults when None).

    Returns
    -------
    float
        theta in (0, 1/4].
    """
    n, m = check_count("n", n), check_count("m", m)
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    return _calibrate(n, m, epsilon, delta, tuple(float(x) for x in check_orders(orders)))


@lru_cache(maxsize=256)
def _calibrate(n: int, m: int, epsilon: float, delta: float, orders: tuple[float, ...]) -> float:
    a = np.asarray(orders)

    def eps_of(theta: float) -> float:
        return cks_epsilon(pbm_rdp(n, m, theta, a), delta, a)[0]

    if eps_of(THETA_CAP) <= epsilon:
        return THETA_CAP
    rho = gaussian_rho_for(epsilon, delta, a)
    guess = gaussian_rho_theta(rho, n, m)
    return _solve_increasing(eps_of, epsilon, 0.5 * guess, min(THETA_CAP, 1.02 * guess))


def gaussian_rho_for(epsilon: float, delta: float, orders: ArrayLike | None = None) -> float:
    """Largest rho whose linear curve rho * a converts (CKS) to at most epsilon: spec §2.3 init."""
    a = check_orders(orders)

    def eps_of(rho: float) -> float:
        return cks_epsilon(rho * a, delta, a)[0]

    hi = 1.0
    while eps_of(hi) < epsilon:
        hi *= 4.0
    return _solve_increasing(eps_of, epsilon, hi / 4.0, hi)


@dataclass(frozen=True)
class JointCalibration(ResultMixin):
    """Per-group PBM parameters for mean (1) and second moment (2), and the composed privacy.

    ``theta2`` is empty when only the mean is released (oracle variance mode).
    """

    n: tuple[int, ...]
    m1: int
    m2: int
    theta1: tuple[float, ...]
    theta2: tuple[float, ...]
    mean_share: float
    epsilon_target: float
    epsilon: float
    delta: float
    optimal_order: float
    theta_capped: bool
    orders: tuple[float, ...]
    rdp_epsilons: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.theta1) != len(self.n) or self.theta2 and len(self.theta2) != len(self.n):
            raise AssertionError("bug: one theta per group expected")
        if not self.epsilon <= self.epsilon_target * (1 + 1e-9):
            raise AssertionError(
                f"bug: calibrated epsilon {self.epsilon} exceeds the target {self.epsilon_target}")


def composed_curve(n: Sequence[int], m1: int, theta1: Sequence[float], m2: int,
                   theta2: Sequence[float], orders: ArrayLike | None = None) -> np.ndarray:
    """Composed RDP of Algorithm 1: Theorem 3.2, spec §1 (precise version).

    eps_tot(a) = max_g [eps_{1,g}(a) + eps_{2,g}(a)]: one client sits in one group, so the groups
    are not charged twice. ``theta2`` empty means the second moment is not released.
    """
    a = check_orders(orders)
    total = np.zeros(a.size)
    groups = {(n_g, theta1[g], theta2[g] if len(theta2) else None) for g, n_g in enumerate(n)}
    for n_g, t1, t2 in groups:  # equal groups share one curve
        curve = pbm_rdp(n_g, m1, t1, a)
        if t2 is not None:
            curve = curve + pbm_rdp(n_g, m2, t2, a)
        total = np.maximum(total, curve)
    return total


def calibrate_joint(n: Sequence[int], m1: int, m2: int, epsilon: float, delta: float,
                    mean_share: float = 0.99, orders: ArrayLike | None = None,
                    release_second_moment: bool = True) -> JointCalibration:
    """Joint calibration of (theta1_g, theta2_g) for all groups: spec §2.4 (joint, share w).

    For a scalar rho: theta1_g = theta(w rho; n_g, m1), theta2_g = theta((1-w) rho; n_g, m2), each
    capped at 1/4; bisect log rho until CKS(max_g[eps_1g + eps_2g]) = epsilon. The composed curve is
    what gets converted, so the accounting is exact. With ``release_second_moment=False`` the whole
    budget goes to the mean (reproduction recipe, spec §6.2) and ``mean_share`` is not used.
    """
    sizes = tuple(check_count("n_g (clients in a group)", g, 2) for g in n)
    m1, m2 = check_count("m1", m1), check_count("m2", m2)
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    if release_second_moment and not (isinstance(mean_share, (int, float))
                                      and 0.0 < mean_share < 1.0):
        raise ValueError(f"mean_share must be in (0, 1), got {mean_share!r}; it is the budget "
                         "share of the first moment (0.99 in the paper)")
    w = float(mean_share) if release_second_moment else 1.0
    return _calibrate_joint(sizes, m1, m2, epsilon, delta, w,
                            tuple(float(x) for x in check_orders(orders)), release_second_moment)


@lru_cache(maxsize=256)
def _calibrate_joint(sizes: tuple[int, ...], m1: int, m2: int, epsilon: float, delta: float,
                     w: float, orders: tuple[float, ...],
                     release_second_moment: bool) -> JointCalibration:
    """Cached core of :func:`calibrate_joint` (pure in its hashable arguments)."""
    a = np.asarray(orders)

    def thetas(rho: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
        t1 = tuple(gaussian_rho_theta(w * rho, g, m1) for g in sizes)
        t2 = (tuple(gaussian_rho_theta((1.0 - w) * rho, g, m2) for g in sizes)
              if release_second_moment else ())
        return t1, t2

    def curve(rho: float) -> np.ndarray:
        return composed_curve(sizes, m1, thetas(rho)[0], m2, thetas(rho)[1], a)

    def eps_of(log_rho: float) -> float:
        return cks_epsilon(curve(math.exp(log_rho)), delta, a)[0]

    # largest rho that any capped theta can still respond to
    rho_cap = max(8.0 * max(m1, m2) / min(sizes), 1.0) / min(w, 1.0 - w if w < 1 else 1.0)
    if eps_of(math.log(rho_cap)) <= epsilon:
        log_rho = math.log(rho_cap)
    else:
        rho0 = gaussian_rho_for(epsilon, delta, a)
        hi = math.log(rho_cap)
        log_rho = _solve_increasing(eps_of, epsilon, math.log(rho0) - 1.0, hi)
    t1, t2 = thetas(math.exp(log_rho))
    rdp = composed_curve(sizes, m1, t1, m2, t2, a)
    eps, order = cks_epsilon(rdp, delta, a)
    capped = any(t >= 0.25 for t in t1 + t2)
    return JointCalibration(n=sizes, m1=m1, m2=m2, theta1=t1, theta2=t2, mean_share=w,
                            epsilon_target=epsilon, epsilon=eps, delta=delta,
                            optimal_order=order, theta_capped=capped,
                            orders=tuple(float(x) for x in a),
                            rdp_epsilons=tuple(float(x) for x in rdp))
