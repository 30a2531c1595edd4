"""Private variance and confidence interval: spec dp_ate_ensemble.md §3 (eqs. 7, 8, 11, 12;
App. B.1)."""

from __future__ import annotations

import math

from scipy.special import ndtri  # the standard normal quantile Phi^-1

CI_MODES = ("paper", "conservative")


def critical_values(alpha: float = 0.05, p1: float = 0.01) -> tuple[float, float]:
    """(c, z) = (Phi^-1(1 - alpha/2 + p1/2), Phi^-1(1 - p1)): eq. 12 and eq. 11; 2.0537, 2.3263
    at defaults.

    Phi is the standard normal CDF (App. B.1 defines it as the survival function: erratum, spec §3).
    """
    return float(ndtri(1.0 - alpha / 2.0 + p1 / 2.0)), float(ndtri(1.0 - p1))


def private_variance(
    noisy_sqrt_v: float, sigma_ate: float, sigma_var: float, p1: float = 0.01, mode: str = "paper"
) -> float:
    """V_hat_DP from r = sqrt(V_hat) + N(0, sigma2^2): spec §3.

    paper (eq. 11):        r^2 + sigma1^2 + z_{1-p1} sigma2^2
    conservative (§3):     (max(0, r) + z_{1-p1} sigma2)^2 + sigma1^2
                           (coverage step 1 holds exactly)
    """
    z = float(ndtri(1.0 - p1))
    if mode == "paper":
        return noisy_sqrt_v**2 + sigma_ate**2 + z * sigma_var**2
    if mode == "conservative":
        return (max(0.0, noisy_sqrt_v) + z * sigma_var) ** 2 + sigma_ate**2
    raise ValueError(f"ci mode must be one of {CI_MODES}, got {mode!r}")


def confidence_interval(
    ate_dp: float, variance_dp: float, alpha: float = 0.05, p1: float = 0.01
) -> tuple[float, float]:
    """[tau_DP -/+ Phi^-1(1 - alpha/2 + p1/2) sqrt(V_DP)]: eq. 12 (eq. 8 at the defaults)."""
    c, _ = critical_values(alpha, p1)
    half = c * math.sqrt(variance_dp)
    return ate_dp - half, ate_dp + half
