"""What the comparators share: the budget split, the exact Gaussian draws, the result and the CI.

Each comparator (:mod:`.lpgm19`, :mod:`.gr25`) releases a few statistics, each by the Gaussian
mechanism at its own ``zeta_j``; the release is ``sqrt(sum zeta_j^2)``-GDP by GDP composition
(Dong, Roth & Su 2022, Cor. 3.3; :func:`dpcausal.accounting.compose_gdp`), charged as one
Gaussian :class:`~dpcausal.accounting.PrivacyCharge`. SPECS.md "Comparators" derives each
sensitivity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpcausal.accounting import PrivacyCharge, compose_gdp
from dpcausal.ate.ci import critical_values
from dpcausal.noise import (
    gaussian_lattice_step,
    gaussian_mechanism,
    sample_discrete_gaussian,
    secure_rng,
)


@dataclass(frozen=True)
class ComparatorRelease:
    """One comparator release: the private ATE, its CI, the charge and the public parameters.

    ``nonprivate`` holds the pre-noise statistics in evaluation mode only (``None`` in a
    release).
    """

    estimator: str
    ate: float
    ci: tuple[float, float]
    charge: PrivacyCharge
    params: dict[str, Any]
    evaluation: bool = False
    nonprivate: dict[str, float] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.ci[0] <= self.ate <= self.ci[1]:
            raise AssertionError(f"bug: the CI {self.ci} does not hold the ATE {self.ate}")
        if self.evaluation != (self.nonprivate is not None):
            raise AssertionError("bug: non-private values are kept in evaluation mode only")


def split_zeta(zeta: float, shares: Sequence[float], name: str = "shares") -> list[float]:
    """``zeta_j = zeta sqrt(share_j)`` for shares of ``zeta^2`` summing to 1, so that
    ``compose_gdp(zeta_j) = zeta`` (GDP composition, spec dp_ate_ensemble.md §1.3)."""
    if not (isinstance(zeta, (int, float)) and math.isfinite(zeta) and zeta > 0):
        raise ValueError(f"zeta must be a finite number > 0, got {zeta!r}")
    if any(not (s > 0) for s in shares) or not math.isclose(math.fsum(shares), 1.0,
                                                            rel_tol=1e-12):
        raise ValueError(f"{name} must be positive shares of zeta^2 summing to 1, got "
                         f"{tuple(shares)!r}")
    return [zeta * math.sqrt(s) for s in shares]


def charge(estimator: str, zeta: float, shares: Sequence[float]) -> PrivacyCharge:
    """The data-free Gaussian charge of a comparator's draws at ``zeta_j`` (:func:`split_zeta`),
    composed: ``zeta = compose_gdp(zetas)``."""
    zetas = tuple(split_zeta(zeta, shares))
    return PrivacyCharge("gaussian", zeta=compose_gdp(zetas),
                         detail={"estimator": estimator, "zetas": zetas})


def noise_rng(rng: np.random.Generator | None, evaluation: bool) -> np.random.Generator:
    """OS entropy in a release; an injected generator only in evaluation mode."""
    if rng is None:
        return secure_rng()
    if not evaluation:
        raise ValueError("rng is for evaluation mode only (evaluation=True): a release draws "
                         "its noise from OS entropy; pass rng=None")
    return rng


def gaussian_scalar(value: float, sensitivity: float, zeta: float,
                    rng: np.random.Generator) -> float:
    """A scalar of sensitivity ``Delta`` at ``zeta``-GDP: lattice value plus exact discrete
    Gaussian of scale ``Delta/zeta`` inflated for the rounding
    (:func:`dpcausal.noise.gaussian_mechanism`)."""
    return gaussian_mechanism(float(value), sensitivity / zeta, sensitivity, rng)


def gaussian_vector(values: np.ndarray, l2_sensitivity: float, zeta: float,
                    rng: np.random.Generator) -> np.ndarray:
    """A vector of L2 sensitivity ``Delta`` at ``zeta``-GDP, exactly: SPECS.md "Comparators",
    the vector lattice.

    Each coordinate is rounded to the lattice ``gamma Z`` (``gamma`` the power of two of
    :func:`dpcausal.noise.gaussian_lattice_step` of ``Delta/zeta``), so two neighbours' lattice
    points differ by at most ``Delta/gamma + sqrt(p)`` steps in L2; independent discrete
    Gaussians of scale ``s`` per coordinate are then ``(Delta/gamma + sqrt(p))^2 / (2 s^2)``-zCDP
    (CKS 2020, Thm 4 per coordinate, composed). ``s = (Delta + gamma sqrt(p)) / (gamma zeta)``
    makes that ``zeta^2/2``, the zCDP of ``zeta``-GDP's Gaussian; ``sqrt(p)`` is bounded above by
    a rational so the claim holds in exact arithmetic.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or not np.isfinite(values).all():
        raise AssertionError("bug: a vector release needs a finite 1-d array")
    step = gaussian_lattice_step(l2_sensitivity / zeta)
    sqrt_p = Fraction(math.isqrt(values.size * 10**12) + 1, 10**6)  # >= sqrt(p)
    scale = (Fraction(l2_sensitivity) / Fraction(step) + sqrt_p) / Fraction(zeta)
    noise = sample_discrete_gaussian(scale ** 2, rng, size=values.size)
    return (np.rint(values / step) + noise) * step


def noisy_moments(values: np.ndarray, sensitivities: dict[str, float], zeta_mean: float,
                  zeta_second: float, rng: np.random.Generator, p1: float
                  ) -> tuple[float, float, float]:
    """The mean and second moment of ``values`` released by :func:`gaussian_scalar` (in that
    order); returns ``(mean~, spread, sigma_mean)`` with ``spread = max(0, q~ + z_{p1} sigma_q -
    mean~^2)``, the upper ``1 - p1`` bound on their variance (spec dp_ate_ensemble.md §3, eq. 11:
    :func:`dpcausal.ate.ci.critical_values`), and ``sigma_mean = Delta_mean / zeta_mean``."""
    mean = gaussian_scalar(float(values.mean()), sensitivities["mean"], zeta_mean, rng)
    second = gaussian_scalar(float(np.mean(values * values)), sensitivities["second_moment"],
                             zeta_second, rng)
    _, z1 = critical_values(0.05, p1)
    sigma_second = sensitivities["second_moment"] / zeta_second
    return mean, max(0.0, second + z1 * sigma_second - mean * mean), (
        sensitivities["mean"] / zeta_mean)


def vector_noise_sd(l2_sensitivity: float, zeta: float, p: int) -> float:
    """The continuous-equivalent per-coordinate noise SD of :func:`gaussian_vector`."""
    step = gaussian_lattice_step(l2_sensitivity / zeta)
    return (l2_sensitivity + step * (math.sqrt(p) + 1e-6)) / zeta


def interval(ate: float, variance: float, alpha: float, p1: float) -> tuple[float, float]:
    """``ate -/+ c sqrt(variance)`` with ``c`` of eq. 12 (spec dp_ate_ensemble.md §3):
    :func:`dpcausal.ate.ci.critical_values`."""
    c, _ = critical_values(alpha, p1)
    half = c * math.sqrt(variance)
    return (ate - half, ate + half)


def check_clip(propensity_clip: float) -> float:
    """``eta`` in (0, 1/2): the propensity is clipped to ``[eta, 1 - eta]``."""
    if not (isinstance(propensity_clip, (int, float)) and 0 < propensity_clip < 0.5):
        raise ValueError(f"propensity_clip must be in (0, 0.5), got {propensity_clip!r}")
    return float(propensity_clip)


def prepare_data(X: Any, A: Any, Y: Any, outcome_bounds: tuple[float, float]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``X`` (n, d), ``A`` in {0, 1} and ``Y`` clipped to the bounds, as float arrays.

    Only the shapes (public) can refuse. Values are coerced on one path whatever they are, so
    that no answer depends on a person's value: a non-finite covariate becomes 0, a treatment
    other than 1 counts as control, a non-finite outcome becomes ``lo`` (all inside the bounds
    the sensitivities assume).
    """
    X = np.asarray(X, dtype=float)
    X = X.reshape(-1, 1) if X.ndim == 1 else X
    A = np.asarray(A, dtype=float).ravel()
    Y = np.asarray(Y, dtype=float).ravel()
    if X.ndim != 2 or not (X.shape[0] == A.size == Y.size) or A.size < 2:
        raise ValueError(f"X, A, Y must hold the same number (>= 2) of rows, got shapes "
                         f"{X.shape}, {A.shape}, {Y.shape}")
    lo, hi = outcome_bounds
    X = np.where(np.isfinite(X), X, 0.0)
    A = (A == 1.0).astype(float)
    Y = np.clip(np.where(np.isfinite(Y), Y, lo), lo, hi)
    return X, A, Y
