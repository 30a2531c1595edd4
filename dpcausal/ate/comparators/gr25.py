"""GR25: per-split IPW estimates of the ATE aggregated as a meta-analysis (Guha & Reiter 2025),
as the seed paper runs it on its binary-outcome design (Lebeda et al. 2025, App. F.2; spec
small_n_estimators.md §4, dp_ate_ensemble.md §6.4, §6.6).

The rows are split at random (OS entropy) into ``M`` public-size parts; each part fits its own
logistic propensity (clipped to ``[eta, 1-eta]``) and its own Hajek IPW estimate ``t_j`` (the
weighted arm means of GR25's weighted ATE, each within the outcome bounds, so ``|t_j| <= W = hi
- lo``). A replaced row changes one part only (subsample and aggregate), so the mean of the
``t_j`` moves by at most ``2W/M`` and the mean of the ``t_j^2`` by ``W^2/M`` (SPECS.md
"Comparators: GR25"). Both are released by the Gaussian mechanism and composed in GDP; the CI is
the meta-analysis of the ``M`` parts: ``t~ -/+ c sqrt(s~^2/M + sigma_1^2)``, ``s^2`` the parts'
sample variance from the noisy moments.

Departures from GR25 (decisions, SPECS.md): Gaussian noise at ``zeta``-GDP where the seed paper
runs GR25 at ``epsilon = 7.05``; a normal interval from the noisy moments where GR25 build their
interval by a Bayesian procedure; any bounded outcome is accepted, but the method (and
:func:`valid_for`) is for binary outcomes.

References
----------
Guha, S., Reiter, J. P. (2025). Differentially private estimation of weighted average treatment
effects for binary outcomes. Computational Statistics & Data Analysis 207, 108145.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import expit

from dpcausal.accounting import PrivacyCharge
from dpcausal.ate.ci import critical_values
from dpcausal.ate.comparators._mechanism import (
    ComparatorRelease,
    charge,
    check_clip,
    interval,
    noise_rng,
    noisy_moments,
    prepare_data,
    split_zeta,
)
from dpcausal.ate.comparators.lpgm19 import fit_logistic
from dpcausal.validation import outcome_bounds as outcome_bounds_of

NAME = "gr25"
DEFAULT_SHARES = (0.9, 0.1)  # of zeta^2: the mean of the parts, their second moment
ASSUMPTION = "binary outcomes; a logistic propensity within each part"


def valid_for(*, design: str, binary_outcome: bool) -> bool:
    """Binary outcomes only (GR25's setting), in either design."""
    return binary_outcome and design in ("randomized", "observational")


def rows_per_split(d: int) -> int:
    """``max(100, 20 (d + 1))`` rows per part: enough for a logistic fit of ``d + 1``
    coefficients (decision, SPECS.md "Comparators: GR25")."""
    return max(100, 20 * (d + 1))


def default_splits(n: int, d: int) -> int:
    """``M = max(2, n // rows_per_split(d))``."""
    return max(2, n // rows_per_split(d))


def sensitivities(n_splits: int, outcome_bounds: tuple[float, float]) -> dict[str, float]:
    """Replace-one sensitivities of the parts' mean and second moment (SPECS.md "Comparators:
    GR25", eqs. G1-G2): ``2W/M`` and ``W^2/M``."""
    lo, hi = outcome_bounds
    width = hi - lo
    return {"mean": 2 * width / n_splits, "second_moment": width * width / n_splits}


def split_estimate(X: np.ndarray, A: np.ndarray, Y: np.ndarray, propensity_clip: float) -> float:
    """Hajek IPW estimate of one part with its own logistic propensity (ridge ``1/m``, as
    scikit-learn's ``C = 1``); 0 when the part lacks an arm (a constant within ``[-W, W]``)."""
    m = len(A)
    treated = A.sum()
    if treated in (0, m):
        return 0.0
    Z = np.column_stack([np.ones(m), X])
    theta = fit_logistic(Z, A, 1.0 / m, 1e-8)
    pi = np.clip(expit(Z @ theta), propensity_clip, 1 - propensity_clip)
    w1, w0 = A / pi, (1 - A) / (1 - pi)
    return float(w1 @ Y / w1.sum() - w0 @ Y / w0.sum())


def _release(X: Any, A: Any, Y: Any, *, zeta: float,
            outcome_bounds: tuple[float, float] = (0.0, 1.0), propensity_clip: float = 0.1,
            n_splits: int | None = None, shares: tuple[float, ...] = DEFAULT_SHARES,
            alpha: float = 0.05, p1: float = 0.01, rng: np.random.Generator | None = None,
            evaluation: bool = False) -> ComparatorRelease:
    """The GR25 release at ``zeta``-GDP for the whole release: private ATE, CI and charge.

    Private and uncharged, as :func:`dpcausal.ate.comparators.lpgm19._release`.

    Parameters
    ----------
    X, A, Y : the covariates (n, d), the treatment in {0, 1} and the (binary) outcome.
    zeta : the Gaussian-DP budget of the whole release, split as ``shares`` of ``zeta^2``
        (the parts' mean, their second moment).
    outcome_bounds : public ``(lo, hi)``, ``(0, 1)`` for a binary outcome; clipped to it.
    propensity_clip : ``eta``.
    n_splits : ``M``, public; ``None`` is :func:`default_splits`.
    alpha, p1, rng, evaluation : as :func:`dpcausal.ate.comparators.lpgm19._release`.

    Notes
    -----
    With ``t_bar`` and ``q`` the mean of the ``t_j`` and of the ``t_j^2``:

    .. math::

        \\tilde t = \\bar t + N_1,\\quad \\tilde q = q + N_2,\\quad
        \\hat V = \\max(0, \\tilde q + z_{p_1}\\sigma_2 - \\tilde t^2)/(M - 1) + \\sigma_1^2.
    """
    lo, hi = outcome_bounds_of(outcome_bounds)
    eta = check_clip(propensity_clip)
    n = int(np.shape(A)[0])
    d = 1 if np.ndim(X) == 1 else int(np.shape(X)[1])
    M = default_splits(n, d) if n_splits is None else n_splits
    if not (isinstance(M, (int, np.integer)) and 2 <= M <= n // 2):
        raise ValueError(f"n_splits must be an integer in [2, n/2] = [2, {n // 2}], got "
                         f"{n_splits!r}")
    if len(shares) != 2:
        raise ValueError(f"shares must give two shares of zeta^2 (mean, second moment), got "
                         f"{shares!r}")
    z_mean, z_second = split_zeta(zeta, shares)
    sens = sensitivities(int(M), (lo, hi))
    params = {"estimator": NAME, "zeta": zeta, "outcome_bounds": (lo, hi),
              "propensity_clip": eta, "n_splits": int(M), "shares": tuple(shares),
              "alpha": alpha, "n": n, "sensitivities": sens, "assumption": ASSUMPTION}
    cost = charge_of(zeta, shares)
    gen = noise_rng(rng, evaluation)
    X, A, Y = prepare_data(X, A, Y, (lo, hi))
    parts = np.array_split(gen.permutation(n), int(M))
    t = np.array([split_estimate(X[p], A[p], Y[p], eta) for p in parts])
    ate, spread, sigma_mean = noisy_moments(t, sens, z_mean, z_second, gen, p1)
    variance = spread / (M - 1) + sigma_mean ** 2
    nonprivate = ({"ate": float(t.mean()), "second_moment": float(np.mean(t * t))}
                  if evaluation else None)
    return ComparatorRelease(NAME, ate, interval(ate, variance, alpha, p1), cost, params,
                             evaluation, nonprivate)


def charge_of(zeta: float, shares: tuple[float, ...] = DEFAULT_SHARES) -> PrivacyCharge:
    """The data-free charge of :func:`_release`: its two draws composed, ``zeta``-GDP."""
    return charge(NAME, zeta, shares)


def expected_halfwidth(n: int, d: int, *, zeta: float, outcome_bounds: tuple[float, float],
                       alpha: float = 0.05, outcome_sd: float | None = None,
                       **public: Any) -> float:
    """The CI half-width to expect from public facts (the planner's entry; SPECS.md
    "Comparators: GR25", eq. G3).

    Sampling: the Hajek IPW variance at propensity 1/2, ``4 sd^2 / n`` (``sd`` = ``outcome_sd``,
    or the worst case ``(hi - lo)/2``); noise: ``sigma_1 = 2W/(M zeta_1)``. Public knobs read from
    ``public``: ``n_splits`` (:func:`default_splits`), ``shares``, ``p1`` (0.01).
    """
    lo, hi = outcome_bounds_of(outcome_bounds)
    M = public.get("n_splits") or default_splits(n, d)
    z_mean = split_zeta(zeta, public.get("shares", DEFAULT_SHARES))[0]
    sd = (hi - lo) / 2 if outcome_sd is None else min(outcome_sd, (hi - lo) / 2)
    sigma = sensitivities(M, (lo, hi))["mean"] / z_mean
    c, _ = critical_values(alpha, public.get("p1", 0.01))
    return c * math.sqrt(4 * sd * sd / n + sigma ** 2)


__all__ = ["ASSUMPTION", "NAME", "charge_of", "expected_halfwidth", "sensitivities",
           "valid_for"]
