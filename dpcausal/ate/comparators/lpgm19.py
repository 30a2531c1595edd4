"""LPGM19: inverse propensity weighting with a DP-ERM logistic propensity (Lee, Gresele, Park &
Muandet 2019), as the seed paper runs it against its own estimators (Lebeda et al. 2025, §6 and
App. F; spec small_n_estimators.md §4, dp_ate_ensemble.md §6.6).

Four Gaussian draws, composed in GDP (SPECS.md "Comparators: LPGM19" derives each sensitivity):

1. the propensity ``theta`` of the L2-regularised logistic regression on ``z = (1, x)/sqrt 2``,
   ``x`` the covariates scaled by the public radius ``R`` and projected into the unit ball, by
   output perturbation (Chaudhuri, Monteleoni & Sarwate 2011, Cor. 8): ``Delta_theta = 2/(n
   lambda)`` plus the solver's tolerance;
2. the Horvitz-Thompson IPW mean of ``Gamma_i = A Y/pi - (1-A) Y/(1-pi)`` with the released
   propensity (post-processing) clipped to ``[eta, 1-eta]``: ``Delta = (sup - inf)/n`` over the
   range of ``Gamma``;
3. its second moment, for the CI: ``Delta = max(sup^2, inf^2)/n``;
4. its gradient ``G`` in ``theta`` (L2), for the CI's propensity-noise term:
   ``Delta = 2 B_mu (1-eta)/(eta n)``.

The CI adds to the sampling variance and the mean's noise the delta-method variance of the
propensity's noise, ``sigma_theta^2 ||G~||^2`` (without it the seed paper's binary design covered
0.55). It assumes a logistic propensity in ``x``; the comparison design's coverage is measured
(``tests/library/ate/test_comparators_lpgm19.py``), not assumed.

Departures from LPGM19 (decisions, SPECS.md): Gaussian noise at ``zeta``-GDP where the paper runs
pure epsilon-DP at ``epsilon = 7.05`` (``1.5``-GDP implies ``(7.05, 1e-5)``-DP); the public
radius ``R`` replaces the seed paper's data-driven 99 % rescaling; a CI is released.

References
----------
Lee, S. K., Gresele, L., Park, M., Muandet, K. (2019). Privacy-preserving causal inference via
inverse probability weighting. arXiv:1905.12592.
Chaudhuri, K., Monteleoni, C., Sarwate, A. D. (2011). Differentially private empirical risk
minimization. JMLR 12, 1069-1109.
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
    gaussian_vector,
    interval,
    noise_rng,
    noisy_moments,
    prepare_data,
    split_zeta,
    vector_noise_sd,
)
from dpcausal.validation import outcome_bounds as outcome_bounds_of

NAME = "lpgm19"
DEFAULT_SHARES = (0.45, 0.4, 0.05, 0.1)  # of zeta^2: propensity, IPW mean, 2nd moment, gradient
RIDGE_CONSTANT = 0.2  # lambda = RIDGE_CONSTANT / sqrt(n) unless given (decision, SPECS.md)
ASSUMPTION = ("the propensity is logistic in the covariates (LPGM19's model), rows with "
              "||x|| > covariate_radius are projected onto that ball")


def valid_for(*, design: str, binary_outcome: bool) -> bool:
    """Any design and outcome type: bounded outcomes; in an observational design it assumes
    :data:`ASSUMPTION` (a randomized design's constant propensity is logistic)."""
    return design in ("randomized", "observational")


def default_regularization(n: int) -> float:
    """``lambda = 0.2 / sqrt(n)``: the theta noise ``2/(n lambda zeta)`` and the ridge's
    shrinkage both fall as ``n^{-1/2}`` (decision, SPECS.md "Comparators: LPGM19")."""
    return RIDGE_CONSTANT / math.sqrt(n)


def grad_tolerance(n: int) -> float:
    """The solver stops at ``||grad J|| <= 1e-6 / n``; its error adds ``2 tol / lambda`` to the
    propensity's sensitivity (one millionth of ``2/(n lambda)``)."""
    return 1e-6 / n


def ipw_range(outcome_bounds: tuple[float, float], propensity_clip: float
              ) -> tuple[float, float]:
    """``(inf, sup)`` of ``Gamma = A Y/pi - (1-A) Y/(1-pi)`` over ``Y`` in the bounds, ``A`` in
    {0, 1}, ``pi`` in ``[eta, 1-eta]`` (SPECS.md "Comparators: LPGM19", eq. L2).

    ``Y/pi`` is monotone in ``Y`` and in ``1/pi``, so the extremes sit at the corners.
    """
    lo, hi = outcome_bounds
    eta = propensity_clip
    weights = (1 / eta, 1 / (1 - eta))
    treated = [y * w for y in (lo, hi) for w in weights]
    control = [-y * w for y in (lo, hi) for w in weights]
    return min(treated + control), max(treated + control)


def sensitivities(n: int, outcome_bounds: tuple[float, float], propensity_clip: float,
                  regularization: float) -> dict[str, float]:
    """Replace-one sensitivities (SPECS.md "Comparators: LPGM19", eqs. L1-L3, L5): ``theta``
    (L2), the IPW mean, its second moment and its gradient in ``theta`` (L2)."""
    inf, sup = ipw_range(outcome_bounds, propensity_clip)
    b_mu = max(abs(b) for b in outcome_bounds)
    eta = propensity_clip
    return {"theta": 2.0 / (n * regularization) + 2.0 * grad_tolerance(n) / regularization,
            "mean": (sup - inf) / n,
            "second_moment": max(sup * sup, inf * inf) / n,
            "gradient": 2.0 * b_mu * (1 - eta) / eta / n}


def features(X: np.ndarray, covariate_radius: float) -> np.ndarray:
    """``z = (1, x)/sqrt 2`` with ``x = X/R`` projected into the unit ball: ``||z|| <= 1``
    (LPGM19's ``||x|| <= 1`` with an intercept)."""
    x = X / covariate_radius
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))
    x = x / np.maximum(norms, 1.0)[:, None]
    return np.column_stack([np.ones(len(x)), x]) / math.sqrt(2.0)


def fit_logistic(Z: np.ndarray, A: np.ndarray, regularization: float, tol: float
                 ) -> np.ndarray:
    """The minimiser of ``J(theta) = (1/n) sum log(1 + e^{z theta}) - a z theta + (lambda/2)
    ||theta||^2`` (Chaudhuri et al. 2011, eq. 1), by damped Newton steps until ``||grad J|| <=
    tol``: ``J`` is ``lambda``-strongly convex, so the result is within ``tol/lambda`` of the
    exact minimiser."""
    n, p = Z.shape
    theta = np.zeros(p)

    def objective(t: np.ndarray) -> float:
        u = Z @ t
        return float(np.mean(np.logaddexp(0.0, u) - A * u) + 0.5 * regularization * t @ t)

    for _ in range(200):
        prob = expit(Z @ theta)
        grad = Z.T @ (prob - A) / n + regularization * theta
        if np.linalg.norm(grad) <= tol:
            return theta
        hess = (Z * (prob * (1 - prob))[:, None]).T @ Z / n + regularization * np.eye(p)
        step = np.linalg.solve(hess, grad)
        size, current = 1.0, objective(theta)
        slack = 1e-12 * (1.0 + abs(current))  # float noise must not stall the full step
        while objective(theta - size * step) > current + slack and size > 1e-10:
            size /= 2
        theta = theta - size * step
    raise AssertionError("bug: Newton's method did not reach the gradient tolerance of a "
                         "strongly convex objective in 200 steps")


def ipw_gradients(Z: np.ndarray, A: np.ndarray, Y: np.ndarray, theta: np.ndarray,
                  propensity_clip: float) -> np.ndarray:
    """Rows of ``d Gamma_i / d theta = -(A Y (1-pi)/pi + (1-A) Y pi/(1-pi)) z_i`` where the
    propensity is inside ``(eta, 1-eta)``, 0 where it is clipped (SPECS.md "Comparators:
    LPGM19", eq. L5): each row's norm is at most ``B_mu (1-eta)/eta``."""
    raw = expit(Z @ theta)
    pi = np.clip(raw, propensity_clip, 1 - propensity_clip)
    inside = (raw > propensity_clip) & (raw < 1 - propensity_clip)
    weight = np.where(inside, A * Y * (1 - pi) / pi + (1 - A) * Y * pi / (1 - pi), 0.0)
    return -weight[:, None] * Z


def ipw_terms(Z: np.ndarray, A: np.ndarray, Y: np.ndarray, theta: np.ndarray,
              propensity_clip: float) -> np.ndarray:
    """``Gamma_i = A Y/pi - (1-A) Y/(1-pi)`` with ``pi = clip(expit(z theta), eta, 1-eta)``
    (the seed paper's eq. 2 with the released propensity)."""
    pi = np.clip(expit(Z @ theta), propensity_clip, 1 - propensity_clip)
    return A * Y / pi - (1 - A) * Y / (1 - pi)


def _release(X: Any, A: Any, Y: Any, *, zeta: float, outcome_bounds: tuple[float, float],
            covariate_radius: float, propensity_clip: float = 0.1,
            regularization: float | None = None, shares: tuple[float, ...] = DEFAULT_SHARES,
            alpha: float = 0.05, p1: float = 0.01, rng: np.random.Generator | None = None,
            evaluation: bool = False) -> ComparatorRelease:
    """The LPGM19 release at ``zeta``-GDP for the whole release: private ATE, CI and charge.

    Private, as every noise-drawing body of the library: it draws uncharged. The comparators
    are not ``PrivateATE(estimator=...)`` values, so no public call reaches it: the reproduction
    calls it in evaluation mode; a release would charge :func:`charge_of` through the accountant
    before calling it.

    Parameters
    ----------
    X, A, Y : the covariates (n, d), the treatment in {0, 1} and the outcome.
    zeta : the Gaussian-DP budget of the whole release, split as ``shares`` of ``zeta^2``
        (propensity, IPW mean, second moment, gradient).
    outcome_bounds : public ``(lo, hi)``; outcomes are clipped to it.
    covariate_radius : public ``R``: covariates are divided by it and rows of norm above 1
        projected onto the unit ball.
    propensity_clip : ``eta``: the propensity is clipped to ``[eta, 1-eta]``.
    regularization : ``lambda`` of the DP-ERM objective; ``None`` is
        :func:`default_regularization`.
    alpha, p1 : the CI's level ``1 - alpha``; ``p1`` of it goes to the noisy second moment (as
        spec dp_ate_ensemble.md §3, eq. 11).
    rng, evaluation : the noise generator, injectable in evaluation mode only (OS entropy
        otherwise); evaluation keeps the pre-noise values in ``nonprivate``.

    Notes
    -----
    .. math::

        \\tilde\\tau = \\bar\\Gamma + N_1,\\quad \\tilde q = \\overline{\\Gamma^2} + N_2,\\quad
        \\hat V = \\max(0, \\tilde q + z_{p_1}\\sigma_2 - \\tilde\\tau^2)/n + \\sigma_1^2
        + \\sigma_\\theta^2 \\|\\tilde G\\|^2,

    the CI ``tau~ -/+ c sqrt(V)`` with ``c = Phi^-1(1 - alpha/2 + p1/2)``.
    """
    lo, hi = outcome_bounds_of(outcome_bounds)
    eta = check_clip(propensity_clip)
    if not (isinstance(covariate_radius, (int, float)) and covariate_radius > 0
            and math.isfinite(covariate_radius)):
        raise ValueError(f"covariate_radius must be a finite number > 0, got "
                         f"{covariate_radius!r}")
    n = int(np.shape(A)[0])
    lam = default_regularization(n) if regularization is None else regularization
    if not (isinstance(lam, (int, float)) and lam > 0 and math.isfinite(lam)):
        raise ValueError(f"regularization must be a finite number > 0, got {regularization!r}")
    if len(shares) != 4:
        raise ValueError(f"shares must give four shares of zeta^2 (propensity, mean, second "
                         f"moment, gradient), got {shares!r}")
    z_theta, z_mean, z_second, z_grad = split_zeta(zeta, shares)
    sens = sensitivities(n, (lo, hi), eta, lam)
    params = {"estimator": NAME, "zeta": zeta, "outcome_bounds": (lo, hi),
              "covariate_radius": float(covariate_radius), "propensity_clip": eta,
              "regularization": lam, "shares": tuple(shares), "alpha": alpha, "n": n,
              "sensitivities": sens, "assumption": ASSUMPTION}
    cost = charge_of(zeta, shares)
    gen = noise_rng(rng, evaluation)
    X, A, Y = prepare_data(X, A, Y, (lo, hi))
    Z = features(X, float(covariate_radius))
    theta = fit_logistic(Z, A, lam, grad_tolerance(n))
    noisy_theta = gaussian_vector(theta, sens["theta"], z_theta, gen)
    gamma = ipw_terms(Z, A, Y, noisy_theta, eta)
    ate, spread, sigma_mean = noisy_moments(gamma, sens, z_mean, z_second, gen, p1)
    gradient = ipw_gradients(Z, A, Y, noisy_theta, eta).mean(axis=0)
    noisy_gradient = gaussian_vector(gradient, sens["gradient"], z_grad, gen)
    sigma_theta = vector_noise_sd(sens["theta"], z_theta, len(theta))
    variance = (spread / n + sigma_mean ** 2
                + sigma_theta ** 2 * float(noisy_gradient @ noisy_gradient))
    nonprivate = ({"ate": float(gamma.mean()), "second_moment": float(np.mean(gamma * gamma)),
                   "gradient_norm": float(np.linalg.norm(gradient))} if evaluation else None)
    return ComparatorRelease(NAME, ate, interval(ate, variance, alpha, p1), cost,
                             {**params, "theta": tuple(noisy_theta.tolist())}, evaluation,
                             nonprivate)


def charge_of(zeta: float, shares: tuple[float, ...] = DEFAULT_SHARES) -> PrivacyCharge:
    """The data-free charge of :func:`_release`: its four draws composed, ``zeta``-GDP."""
    return charge(NAME, zeta, shares)


def expected_halfwidth(n: int, d: int, *, zeta: float, outcome_bounds: tuple[float, float],
                       alpha: float = 0.05, outcome_sd: float | None = None,
                       **public: Any) -> float:
    """The CI half-width to expect from public facts (the planner's entry; SPECS.md
    "Comparators: LPGM19", eq. L4).

    At propensity 1/2: sampling ``4 E[Y^2] / n``; the mean's noise ``sigma_1^2``; the
    propensity's noise ``sigma_theta^2 ||G||^2`` with ``||G||^2 = ||E[Y z]||^2 <= E[Y^2]``
    (Cauchy-Schwarz, ``||z|| <= 1``). ``E[Y^2]`` is the worst case ``max(lo^2, hi^2)``, or
    ``outcome_sd^2 + mid^2`` when ``outcome_sd`` is given (the mean assumed at the bounds' centre
    ``mid``). Public knobs read from ``public``: ``propensity_clip`` (0.1), ``regularization``
    (:func:`default_regularization`), ``shares``, ``p1`` (0.01).
    """
    lo, hi = outcome_bounds_of(outcome_bounds)
    eta = check_clip(public.get("propensity_clip", 0.1))
    z_theta, z_mean, _, _ = split_zeta(zeta, public.get("shares", DEFAULT_SHARES))
    lam = public.get("regularization") or default_regularization(n)
    m2 = max(lo * lo, hi * hi)
    if outcome_sd is not None:
        m2 = min(m2, outcome_sd ** 2 + ((lo + hi) / 2) ** 2)
    sens = sensitivities(n, (lo, hi), eta, lam)
    sigma_mean, sigma_theta = sens["mean"] / z_mean, sens["theta"] / z_theta
    c, _ = critical_values(alpha, public.get("p1", 0.01))
    return c * math.sqrt(4 * m2 / n + sigma_mean ** 2 + sigma_theta ** 2 * m2)


__all__ = ["ASSUMPTION", "NAME", "charge_of", "expected_halfwidth", "sensitivities",
           "valid_for"]
