"""The complete-case estimate of ``missing="drop"``, released privately: SPECS.md "Missing and
non-finite values", ``drop``.

Every row stays in n (public), so K and the fold layout come from n; an incomplete row trains no
model and scores 0, so the released ``tau_DP`` of :func:`dpcausal.ate.release.draw_release` is
``T = S/n`` with ``S`` the complete cases' score sum (its sensitivity is the "impute" policy's
Delta_tau, since a row switching between complete and incomplete is one of the neighbours that
derivation covers). The complete-case count ``C`` is released with its own discrete Gaussian
(sensitivity 1), on a share :data:`COUNT_SHARE` of zeta^2, and the estimate is their ratio
``T~ / (C~/n)``; its CI is the delta method's.
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
    and incomplete) over its zeta (spec §1.3, Gaussian mechanism)."""
    return 1.0 / zeta_count


def complete_case_release(base: ATERelease, count: int, zeta_count: float,
                          rng: np.random.Generator, *,
                          outcome_bounds: tuple[float, float] | None = None) -> ATERelease:
    r"""The complete-case release from ``base`` (T~ and its CI, unclamped) and the exact
    complete-case ``count``, drawn here once: SPECS.md "Missing and non-finite values", ``drop``.

    Parameters
    ----------
    base : ATERelease
        :func:`~dpcausal.ate.release.draw_release` of ``T = S/n`` over all n rows, not clamped.
    count : int
        C, the number of complete cases (non-private; only its noisy value leaves).
    zeta_count : float
        The count's GDP budget (:func:`split_zeta`).
    rng : numpy.random.Generator
        As for ``base``.
    outcome_bounds : (float, float), optional
        Clamp the estimate and its CI to their feasible range (post-processing).

    Returns
    -------
    ATERelease
        ``ate = T~ / c~`` with ``c~ = clip(C~, 1, n)/n``; zeta the GDP composition of both parts.

    Notes
    -----
    With :math:`R = T/c`, the delta method gives
    :math:`V_R \approx (V_T - 2R\,\mathrm{Cov}(T, c) + R^2 V_c)/c^2`. Within the sample
    :math:`\mathrm{Cov}(T, c) = T(1-c)/n` and :math:`R\,\mathrm{Cov}(T, c) = T^2(1-c)/(nc) \ge 0`,
    so leaving it out only widens the interval:

    .. math:: \hat V_R = \frac{\hat V_{DP} + \tilde R^2 \left(\tilde c(1-\tilde c)/n
              + \sigma_c^2/n^2\right)}{\tilde c^2},

    where :math:`\hat V_{DP}` is T's private variance (sampling and noise, spec §3) and
    :math:`\sigma_c` the count's noise scale.
    """
    n = base.n
    sigma_c = count_sigma(zeta_count)
    noisy_count = gaussian_mechanism(float(count), sigma_c, 1.0, rng)
    share = min(max(noisy_count, 1.0), float(n)) / n   # post-processing of the noisy count
    ate = cast(float, base.ate) / share
    ci = variance = se = None
    if base.variance is not None:
        v_count = share * (1.0 - share) / n + (sigma_c / n) ** 2
        variance = (base.variance + ate * ate * v_count) / (share * share)
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
                      "score_mean": base.nonprivate["ate"], "complete_cases": float(count)}
    clamped_to = None
    if outcome_bounds is not None:
        ate, ci, clamped_to = clamp_to_feasible(ate, ci, outcome_bounds)
    return replace(base, ate=ate, ci=ci, se=se, variance=variance, privacy=privacy, noise=noise,
                   nonprivate=nonprivate, clamped_to=clamped_to)
