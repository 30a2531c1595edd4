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
    r"""The private variance V_hat_DP from the noisy ``r = sqrt(V_hat) + N(0, sigma2^2)``: spec §3.

    Parameters
    ----------
    noisy_sqrt_v : float
        r, the released noisy square root of V_hat.
    sigma_ate, sigma_var : float
        sigma1 and sigma2 of the calibration (public).
    p1 : float
        The share of the miscoverage given to the variance noise (eq. 11).
    mode : {"paper", "conservative"}
        ``"paper"``: eq. 11. ``"conservative"``: the spec §3 decision, for which coverage step 1
        holds exactly.

    Returns
    -------
    float
        V_hat_DP.

    Notes
    -----
    With :math:`z = \Phi^{-1}(1 - p_1)`:

    .. math::

        \hat V_{DP}^{paper} &= r^2 + \sigma_1^2 + z \sigma_2^2, \\
        \hat V_{DP}^{conservative} &= (\max(0, r) + z \sigma_2)^2 + \sigma_1^2.
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
    r"""The private CI of eq. 12 (eq. 8 at the defaults): spec §3.

    Parameters
    ----------
    ate_dp : float
        The released tau_DP.
    variance_dp : float
        V_hat_DP from :func:`private_variance`.
    alpha, p1 : float
        Miscoverage p of the CI and the share p1 of it given to the variance noise.

    Returns
    -------
    (float, float)
        The interval's lower and upper ends.

    Notes
    -----
    .. math:: CI_p = \left[\hat\tau_{DP} \mp \Phi^{-1}\left(1 - \frac{p}{2} + \frac{p_1}{2}\right)
              \sqrt{\hat V_{DP}}\right]
    """
    c, _ = critical_values(alpha, p1)
    half = c * math.sqrt(variance_dp)
    return ate_dp - half, ate_dp + half
