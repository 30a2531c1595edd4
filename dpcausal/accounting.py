"""Privacy accounting for Gaussian-DP releases: GDP <-> (epsilon, delta), zCDP, RDP, composition.

Every privacy figure the project prints or stores comes from here (or from ``dp_accounting`` for
non-Gaussian mechanisms, in the ledger). Tested against ``dp_accounting`` and spec §1.3's table.

References
----------
Dong, Roth, Su (2022), "Gaussian differential privacy", Cor. 2.13 (the conversion below).
Lebeda et al. (2025), Lemma 2; spec dp_ate_ensemble.md §1.3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

from scipy.optimize import brentq
from scipy.stats import norm

DEFAULT_DELTA = 1e-5


def gdp_delta(epsilon: float, zeta: float) -> float:
    """delta(epsilon) of a zeta-GDP mechanism: Lemma 2, spec §1.3.

    .. math:: \\delta(\\varepsilon) = \\Phi(-\\varepsilon/\\zeta + \\zeta/2)
              - e^{\\varepsilon}\\Phi(-\\varepsilon/\\zeta - \\zeta/2)
    """
    _check_positive("zeta", zeta)
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    # log-space for the second term: e^eps * Phi(x) overflows for eps > ~700 otherwise
    second = math.exp(epsilon + norm.logcdf(-epsilon / zeta - zeta / 2))
    return max(0.0, float(norm.cdf(-epsilon / zeta + zeta / 2) - second))


@lru_cache(maxsize=1024)
def gdp_epsilon(zeta: float, delta: float = DEFAULT_DELTA) -> float:
    """Smallest epsilon with zeta-GDP => (epsilon, delta)-DP, by root finding on Lemma 2
    (spec §1.3)."""
    _check_positive("zeta", zeta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if gdp_delta(0.0, zeta) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(hi, zeta) > delta:
        hi *= 2.0
        if hi > 1e6:
            raise ValueError(f"no finite epsilon reaches delta={delta} for zeta={zeta}")
    return float(brentq(lambda e: gdp_delta(e, zeta) - delta, 0.0, hi, xtol=1e-12, rtol=1e-12))


def gdp_zeta_for(epsilon: float, delta: float) -> float:
    """Largest zeta whose GDP guarantee implies (epsilon, delta)-DP (inverse of
    :func:`gdp_epsilon`)."""
    _check_positive("epsilon", epsilon)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    hi = 1.0
    while gdp_delta(epsilon, hi) < delta:
        hi *= 2.0
    return float(brentq(lambda z: gdp_delta(epsilon, z) - delta, 1e-12, hi, xtol=1e-14))


def compose_gdp(zetas: Sequence[float]) -> float:
    """GDP composition: zeta-GDP mechanisms compose to sqrt(sum zeta_j^2)-GDP (spec §1.3, §2.6)."""
    for z in zetas:
        if z < 0 or not math.isfinite(z):
            raise ValueError(f"every zeta must be finite and >= 0, got {z!r}")
    return math.sqrt(math.fsum(z * z for z in zetas))


def gdp_to_zcdp(zeta: float) -> float:
    """rho-zCDP of the zeta-GDP Gaussian mechanism: rho = zeta^2 / 2 (spec §1.3)."""
    return zeta * zeta / 2.0


def zcdp_to_gdp(rho: float) -> float:
    """zeta of the Gaussian mechanism that is rho-zCDP: zeta = sqrt(2 rho)."""
    _check_positive("rho", rho)
    return math.sqrt(2.0 * rho)


def gdp_rdp(zeta: float, order: float) -> float:
    """RDP curve of the zeta-GDP Gaussian mechanism: epsilon(alpha) = alpha zeta^2 / 2
    (spec §1.3)."""
    return order * zeta * zeta / 2.0


@dataclass(frozen=True)
class PrivacyCharge:
    """A data-free description of what one release costs, for the ledger to compose.

    ``mechanism`` is one of ``"gaussian"`` (exact in GDP: ``zeta``), ``"laplace"`` and
    ``"pure"`` (pure ``epsilon``-DP, e.g. randomized response), ``"approx"`` (``epsilon``,
    ``delta``) or ``"rdp"`` (a curve ``rdp_epsilons`` over ``rdp_orders``, e.g. PBM).
    """

    mechanism: str
    zeta: float | None = None
    epsilon: float | None = None
    delta: float = 0.0
    rdp_orders: tuple[float, ...] | None = None
    rdp_epsilons: tuple[float, ...] | None = None
    detail: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        kinds = {"gaussian", "laplace", "pure", "approx", "rdp"}
        if self.mechanism not in kinds:
            raise ValueError(f"mechanism must be one of {sorted(kinds)}, got {self.mechanism!r}")
        if self.mechanism == "gaussian" and not (self.zeta and self.zeta > 0):
            raise ValueError("a gaussian charge needs zeta > 0")
        if self.mechanism in {"laplace", "pure", "approx"} and not (
            self.epsilon and self.epsilon > 0
        ):
            raise ValueError(f"a {self.mechanism} charge needs epsilon > 0")
        if self.mechanism == "rdp" and (
            not self.rdp_orders or len(self.rdp_orders) != len(self.rdp_epsilons or ())
        ):
            raise ValueError("an rdp charge needs rdp_orders and rdp_epsilons of equal length")


def _check_positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
