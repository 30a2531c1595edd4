"""Ratios of a score mean to a noisy count, released privately: the complete-case estimate of
``missing="drop"`` (SPECS.md "Missing and non-finite values", ``drop``) and the ensemble's ATT
(SPECS.md "The ATT of the ensemble"; the count is then the treated rows, complete ones under
"drop").

Every row stays in n (public), so K and the fold layout come from n; an incomplete row trains no
model and scores 0, so the released ``tau_DP`` of :func:`dpcausal.ate.release.draw_release` is
``T = S/n`` with ``S`` the complete cases' score sum (its sensitivity is the "impute" policy's
Delta_tau, since a row switching between complete and incomplete is one of the neighbours that
derivation covers). The complete-case count ``C`` is released with its own discrete Gaussian
(sensitivity 1), on a share :data:`COUNT_SHARE` of zeta^2, and the estimate is their ratio
``T~ / (C~/n)``; its CI is the delta method's. The ATT is the same construction with ``T`` the
mean of the ATT scores and ``C`` the number of usable treated rows.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import cast

import numpy as np

from dpcausal.accounting import gdp_epsilon, gdp_to_zcdp
from dpcausal.ate.ci import confidence_interval
from dpcausal.ate.release import ATERelease, clamp_to_feasible
from dpcausal.contract import Privacy
from dpcausal.noise import gaussian_mechanism

#: The share of zeta^2 that the complete-case count gets (the rest goes to T and its CI, split
#: by ``ci_share`` as usual): public and fixed, so the charge is data-free.
COUNT_SHARE = 0.01


def split_zeta(zeta: float) -> tuple[float, float]:
    """(zeta of T and its CI, zeta of the count): ``zeta sqrt(1 - s)``, ``zeta sqrt(s)`` with
    s = :data:`COUNT_SHARE`; GDP composition gives back zeta (SPECS.md, ``drop``)."""
    return zeta * math.sqrt(1.0 - COUNT_SHARE), zeta * math.sqrt(COUNT_SHARE)


def count_sigma(zeta_count: float) -> float:
    """The count's noise scale: sensitivity 1 (replace-one: one row switches between complete
    and incomplete, or treated and not) over its zeta (spec §1.3, Gaussian mechanism)."""
    return 1.0 / zeta_count


#: What a ratio release divides by: the complete cases (``missing="drop"``, ATE) or the usable
#: treated rows (the ATT, complete ones under "drop").
COUNTS = ("complete_cases", "treated")


def ratio_variance(v_t: float, ratio: float, share: float, sigma_c: float, n: int,
                   count: str) -> float:
    r"""The delta method's variance of ``R~ = T~ / c~`` (SPECS.md "Missing and non-finite
    values", ``drop``, and "The ATT of the ensemble", its CI).

    Parameters
    ----------
    v_t : float
        T's private variance :math:`\hat V_{DP}` (sampling and noise, spec §3).
    ratio, share : float
        :math:`\tilde R` and :math:`\tilde c = \mathrm{clip}(\tilde C, 1, n)/n`.
    sigma_c : float
        The count's noise scale.
    n : int
        Rows.
    count : {"complete_cases", "treated"}
        What ``c`` counts (:data:`COUNTS`).

    Notes
    -----
    With :math:`V_c = \tilde c(1-\tilde c)/n + \sigma_c^2/n^2` and
    :math:`V_R \approx \mathrm{Var}(T - R c)/c^2`. Complete cases:
    :math:`R\,\mathrm{Cov}(T, c) = T^2(1-c)/(nc) \ge 0` within the sample, so leaving it out
    only widens the interval, :math:`\hat V_R = (\hat V_{DP} + \tilde R^2 V_c)/\tilde c^2`.
    Treated rows: the control rows' scores are not 0, so the covariance has no known sign, and
    the bound valid for every correlation is taken,
    :math:`\hat V_R = (\sqrt{\hat V_{DP}} + |\tilde R| \sqrt{V_c})^2/\tilde c^2`.
    """
    v_count = share * (1.0 - share) / n + (sigma_c / n) ** 2
    if count == "complete_cases":
        return (v_t + ratio * ratio * v_count) / (share * share)
    if count == "treated":
        return (math.sqrt(v_t) + abs(ratio) * math.sqrt(v_count)) ** 2 / (share * share)
    raise ValueError(f"count must be one of {COUNTS}, got {count!r}")


def count_ratio_release(base: ATERelease, count: int, zeta_count: float,
                        rng: np.random.Generator, *,
                        outcome_bounds: tuple[float, float] | None = None,
                        counted: str = "complete_cases") -> ATERelease:
    r"""The ratio release from ``base`` (T~ and its CI, unclamped) and the exact ``count``,
    drawn here once: SPECS.md "Missing and non-finite values", ``drop``, and "The ATT of the
    ensemble".

    Parameters
    ----------
    base : ATERelease
        :func:`~dpcausal.ate.release.draw_release` of ``T = S/n`` over all n rows, not clamped.
    count : int
        C, the number of complete cases or of usable treated rows (non-private; only its
        noisy value leaves).
    zeta_count : float
        The count's GDP budget (:func:`split_zeta`).
    rng : numpy.random.Generator
        As for ``base``.
    outcome_bounds : (float, float), optional
        Clamp the estimate and its CI to their feasible range (post-processing).
    counted : {"complete_cases", "treated"}
        What C counts (:data:`COUNTS`): it names C in ``nonprivate`` and sets the CI's
        covariance rule (:func:`ratio_variance`).

    Returns
    -------
    ATERelease
        ``ate = T~ / c~`` with ``c~ = clip(C~, 1, n)/n``; zeta the GDP composition of both
        parts; the CI the delta method's (:func:`ratio_variance`).
    """
    n = base.n
    sigma_c = count_sigma(zeta_count)
    noisy_count = gaussian_mechanism(float(count), sigma_c, 1.0, rng)
    share = min(max(noisy_count, 1.0), float(n)) / n   # post-processing of the noisy count
    ate = cast(float, base.ate) / share
    ci = variance = se = None
    if base.variance is not None:
        variance = ratio_variance(base.variance, ate, share, sigma_c, n, counted)
        se = math.sqrt(variance)
        ci = confidence_interval(ate, variance, base.alpha, base.params.get("p1", 0.01))
    zeta = math.hypot(float(base.privacy.zeta or 0.0), zeta_count)
    privacy = Privacy(
        epsilon=gdp_epsilon(zeta, base.privacy.delta), delta=base.privacy.delta, unit="row",
        mechanism="gaussian", zeta=zeta, rho=gdp_to_zcdp(zeta),
        detail={**base.privacy.detail, "zeta_count": zeta_count})
    noise = {**base.noise, "sigma_count": sigma_c, "sensitivity_count": 1.0}
    nonprivate = None
    if base.nonprivate is not None:
        nonprivate = {**base.nonprivate, "ate": base.nonprivate["ate"] * n / max(count, 1),
                      "score_mean": base.nonprivate["ate"], counted: float(count)}
    clamped_to = None
    if outcome_bounds is not None:
        ate, ci, clamped_to = clamp_to_feasible(ate, ci, outcome_bounds)
    return replace(base, ate=ate, ci=ci, se=se, variance=variance, privacy=privacy, noise=noise,
                   nonprivate=nonprivate, clamped_to=clamped_to)
