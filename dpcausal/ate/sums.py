"""Estimators from noisy sums over rows: the difference in means (``dim``, randomized designs) and
Lin's regression adjustment (``lin``): spec small_n_estimators.md §2-3, derivations in
``dpcausal/SPECS.md`` ("Estimators from noisy sums").

Both are one statistic vector ``S = sum_i f(row_i)``, each row's contribution bounded, released
once with exact discrete Gaussian noise (:func:`dpcausal.noise.gaussian_vector_mechanism`), then
post-processed. ``dim`` is ``lin`` without covariates (d = 0).

Scaled row (public bounds): ``y = (Y - c)/h`` in [-1, 1] with c, h the centre and half-width of
the outcome bounds; ``x_j`` each covariate clipped to its public (lo_j, hi_j) and mapped to
[-1, 1]; ``u = (1, x)`` in R^(d+1). Per arm a (A = a), the sums ``vech(sum u u^T)`` (its (0, 0)
entry is the arm's count n_a, its first row the covariate sums), ``sum u y`` and
``w_q sum y^2``; the vector is arm 1's block then arm 0's. One replaced row moves it by at most
``Delta = sqrt((d+1)(d+4) + 2 w_q^2)`` in L2 (:func:`sensitivity`; SPECS.md), attained by a row at
a corner of the bounds moved across arms.

The estimate (:func:`point`): per arm the centred normal equations with the covariate scatter
projected on the positive semi-definite cone and regularised at a public level: in an
observational design its eigenvalues floored (no ridge: a ridge shrinks the slopes toward 0,
i.e. toward the unadjusted difference in means, which there is the confounding; spec §6 E2; the
floor acts only in directions the noise swamps), in a randomized one a ridge (its pull is
toward an unbiased estimate); each arm's fit through its noisy means, evaluated at
the pooled covariate mean (Lin 2013), for the ATT (``estimand``) at the treated arm's
(the same vector and noise). Its CI (:func:`estimate_from`): the hull of a parametric
bootstrap interval over the known noise and the sampling variability given the released
statistics (Ferrando, Wang & Sheldon 2022; spec §6 E3) and the delta method's (per-arm residual
variance over the count and leverage at the pooled mean, the covariate mean's spread times the
slopes' difference, the noise's linearised variance), both of the unclipped estimate.

References
----------
Lin (2013), "Agnostic notes on regression adjustments to experimental data: reexamining
Freedman's critique", Ann. Appl. Stat. 7(1).
Wang (2018), "Revisiting differentially private linear regression: optimal and adaptive
prediction & estimation in unbounded domain", UAI (AdaSSP).
Ferrando, Wang, Sheldon (2022), "Parametric bootstrap for differentially private confidence
intervals", AISTATS.
Canonne, Kamath, Steinke (2020), "The discrete Gaussian for differential privacy", NeurIPS.
Rubin (2001), "Using propensity scores to help design observational studies: application to
the tobacco litigation", Health Serv. Outcomes Res. Methodol. 2.
Stuart (2010), "Matching methods for causal inference: a review and a look forward", Stat. Sci.
25(1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.special import ndtri

from dpcausal.validation import bounds_pair

SUM_ESTIMATORS = ("dim", "lin")
#: The functionals of the two arms' fits a ``dim``/``lin`` release may report (SPECS.md,
#: "Estimators from noisy sums", the ATT): the same statistic vector and noise for both.
ESTIMANDS = ("ate", "att")
#: Weight of the sums of squares in the vector: dim's (d = 0) bound is proven for any weight, lin's
#: needs w_q >= 1/sqrt(2) (SPECS.md); 1/2 costs dim 6% more noise on the means, 1 costs lin little.
Q_WEIGHT = {"dim": 0.5, "lin": 1.0}
#: The regularisation of lin's covariate scatter, in units of the noise sd of the Gram entries
#: times sqrt(d) (public, data-free): a ridge of about half the spectral norm of the scatter's
#: noise in randomized designs; in observational ones a floor of its eigenvalues at about that
#: spectral norm (2 sigma sqrt(d)), below which an eigenvalue is indistinguishable from noise.
RIDGE, EIGEN_FLOOR = 1.0, 2.0
#: Parametric bootstrap replicates of a ``dim``/``lin`` CI (the 2.5% quantile from 50 of them).
BOOTSTRAP_REPLICATES = 2000
ASSUMPTIONS = {
    ("dim", "randomized"): "randomized assignment (declared design): no model assumption",
    ("lin", "randomized"): "randomized assignment (declared design): valid without a model "
                           "assumption (Lin 2013)",
    ("lin", "observational"): "no unmeasured confounding, and outcomes linear in the covariates "
                              "within each arm (Lin's regression adjustment; not checked)",
}


def assumption(estimator: str, design: str) -> str:
    """The assumption a ``dim`` or ``lin`` release states (spec §3: published with the release)."""
    try:
        return ASSUMPTIONS[(estimator, design)]
    except KeyError:
        raise ValueError(f"estimator={estimator!r} is not available for design={design!r}: "
                         "'dim' needs design='randomized'") from None


def block_size(d: int) -> int:
    """Coordinates per arm: vech of the (d+1) x (d+1) Gram, d+1 cross-products, one square sum."""
    return (d + 1) * (d + 2) // 2 + (d + 1) + 1


def sensitivity(d: int, q_weight: float) -> float:
    """L2 sensitivity of the weighted statistic vector under replace-one (SPECS.md, "Estimators
    from noisy sums"): ``sqrt((d+1)(d+4) + 2 w_q^2)``; d = 0 gives dim's ``sqrt(4 + 2 w_q^2)``.

    Notes
    -----
    A row in arm a contributes ``f(u, y) = (vech(u u^T), u y, w_q y^2)``; with ``|u_i| <= 1``,
    ``u_0 = 1``: ``||vech(u u^T)||^2 = (||u||^4 + sum u_i^4)/2 <= ((d+1)^2 + (d+1))/2``,
    ``||u y||^2 <= d+1``, ``w_q^2 y^4 <= w_q^2``. Moved across arms the vector changes by
    ``(-f(u, y), f(u', y'))``: squared norm at most twice the sum. Within an arm it changes by
    ``f(u', y') - f(u, y)``, whose squared norm is ``||f'||^2 + ||f||^2 - 2<f', f>`` with
    ``<f', f> = (t^2 + sum c_i^2)/2 + t r + w_q^2 r^2 >= 0`` for ``t = <u', u>``, ``r = y' y``,
    ``c_i = u'_i u_i`` when ``w_q^2 >= 1/2``; for d = 0 directly:
    ``(y'-y)^2 (1 + w_q^2 (y'+y)^2) <= 4 + w_q^2``.
    """
    return math.sqrt((d + 1) * (d + 4) + 2.0 * q_weight**2)


def weights(d: int, q_weight: float) -> np.ndarray:
    """The weight of each coordinate of the vector: 1 except the square sums' ``w_q``."""
    w = np.ones(block_size(d))
    w[-1] = q_weight
    return np.concatenate([w, w])


def scale_outcome(Y: np.ndarray, outcome_bounds: tuple[float, float]) -> np.ndarray:
    """``(clip(Y) - c)/h`` in [-1, 1] (spec §2)."""
    lo, hi = outcome_bounds
    c, h = (lo + hi) / 2.0, (hi - lo) / 2.0
    return (np.clip(Y, lo, hi) - c) / h


def check_covariate_bounds(bounds: Any, columns: Sequence[Any] | None, d: int
                           ) -> list[tuple[float, float]]:
    """Public covariate bounds as d pairs in column order: a mapping column -> (lo, hi) (needs
    the DataFrame's ``columns``, every one named) or a sequence of d pairs, each checked by
    :func:`dpcausal.validation.bounds_pair` (finite, ``low < high``)."""
    if isinstance(bounds, Mapping):
        if columns is None:
            raise ValueError("covariate_bounds is a mapping column -> (lo, hi), which needs "
                             "named covariates (a DataFrame); with arrays pass d pairs in "
                             "column order")
        missing = [c for c in columns if c not in bounds]
        extra = [c for c in bounds if c not in list(columns)]
        if missing or extra:
            raise ValueError(f"covariate_bounds must name exactly the covariates: missing "
                             f"{missing}, not covariates {extra}")
        pairs = [bounds[c] for c in columns]
    else:
        try:
            pairs = list(bounds)
        except TypeError:
            raise ValueError(f"covariate_bounds must be a mapping column -> (lo, hi) or d pairs, "
                             f"got {bounds!r}") from None
        if len(pairs) != d:
            raise ValueError(f"covariate_bounds has {len(pairs)} pairs for {d} covariates: give "
                             "one (lo, hi) per covariate, in column order")
    return [bounds_pair(f"covariate_bounds[{j}]", pair) for j, pair in enumerate(pairs)]


def scale_covariates(X: np.ndarray, covariate_bounds: Sequence[tuple[float, float]]
                     ) -> np.ndarray:
    """Each covariate clipped to its public bounds and mapped to [-1, 1] (spec §3)."""
    lo = np.array([b[0] for b in covariate_bounds], dtype=float)
    hi = np.array([b[1] for b in covariate_bounds], dtype=float)
    Xc = np.clip(np.asarray(X, dtype=float).reshape(len(X), len(lo)), lo, hi)
    return (Xc - (lo + hi) / 2.0) / ((hi - lo) / 2.0)


def statistics(x: np.ndarray, a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The UNWEIGHTED pre-noise vector of scaled rows ``x`` (n, d) in [-1, 1], 0/1 ``a``, ``y``
    in [-1, 1]: per arm (1 then 0) ``vech(sum u u^T)`` (row-major upper triangle), ``sum u y``,
    ``sum y^2`` with ``u = (1, x)``. Additive over disjoint chunks of rows. Non-private."""
    n, d = x.shape
    u = np.hstack([np.ones((n, 1)), x])
    iu = np.triu_indices(d + 1)
    blocks = []
    for arm in (1, 0):
        sel = a == arm
        ua, ya = u[sel], y[sel]
        gram = ua.T @ ua
        blocks.append(np.concatenate([gram[iu], ua.T @ ya, [ya @ ya]]))
    return np.concatenate(blocks)


@dataclass(frozen=True)
class SumsCalibration:
    """The public noise calibration of a ``dim``/``lin`` release."""

    estimator: str
    n: int
    d: int
    zeta: float
    q_weight: float
    sensitivity: float
    sigma: float          # sd of each weighted coordinate's noise (lattice-inflated)
    ridge: float          # added to the covariate scatter's eigenvalues (randomized designs)
    eigen_floor: float    # floor of the scatter's eigenvalues (observational designs)
    floor: float          # public floor of each arm's count


def calibrate_sums(estimator: str, n: int, d: int, zeta: float,
                   design: str = "observational") -> SumsCalibration:
    """Noise sd ``Delta / zeta`` per coordinate (the vector's L2 sensitivity over zeta:
    zeta-GDP, CKS Theorem 14 with the lattice step), the count floor ``max(1, 2 sigma)``, and
    the regularisation of lin's covariate scatter (public, data-free; SPECS.md, "Estimators
    from noisy sums", estimate): in a randomized design a ridge ``+ RIDGE sigma sqrt(d)`` (it
    shrinks the slopes toward the difference in means, unbiased there), in an observational one
    a floor ``max(eigenvalue, EIGEN_FLOOR sigma sqrt(d))`` (no pull toward the confounded
    difference in means in directions the data determine: spec small_n_estimators.md §6 E2)."""
    from dpcausal.noise import gaussian_vector_sigma

    dd = d if estimator == "lin" else 0
    qw = Q_WEIGHT[estimator]
    delta = sensitivity(dd, qw)
    sigma = gaussian_vector_sigma(delta / zeta, delta, 2 * block_size(dd))
    scale = sigma * math.sqrt(dd)
    randomized = design == "randomized"
    return SumsCalibration(estimator, n, dd, zeta, qw, delta, sigma,
                           RIDGE * scale if randomized else 0.0,
                           0.0 if randomized else EIGEN_FLOOR * scale, max(1.0, 2.0 * sigma))


@dataclass(frozen=True)
class ArmFit:
    """One arm's fit from the (noisy) statistics, in scaled units. Each field carries the
    statistics' leading (batch) shape: none for one vector, ``(B,)`` for B replicates."""

    count: np.ndarray
    mean_x: np.ndarray
    mean_y: np.ndarray
    slopes: np.ndarray
    scatter: np.ndarray     # PSD(S_xx), the centred covariate scatter
    inverse: np.ndarray     # S_reg^-1: PSD(S_xx), eigenvalues floored and raised
    residual_var: np.ndarray
    s_xy: np.ndarray        # the centred cross-products sum (x - xbar)(y - ybar)
    s_yy: np.ndarray        # the centred sum of squares of y


def _unpack(block: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    iu = np.triu_indices(d + 1)
    m = (d + 1) * (d + 2) // 2
    gram = np.zeros(block.shape[:-1] + (d + 1, d + 1))
    gram[..., iu[0], iu[1]] = block[..., :m]
    gram = gram + np.swapaxes(np.triu(gram, 1), -1, -2)
    return gram, block[..., m:m + d + 1], block[..., -1]


def _psd_eigen(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues clipped at 0 and eigenvectors of the symmetric part: the nearest positive
    semi-definite matrix is ``vecs diag(vals) vecs^T``."""
    vals, vecs = np.linalg.eigh((matrix + np.swapaxes(matrix, -1, -2)) / 2.0)
    return np.maximum(vals, 0.0), vecs


def fit_arm(block: np.ndarray, d: int, ridge: float, eigen_floor: float, floor: float
            ) -> ArmFit:
    """Centred normal equations of one arm (SPECS.md, "Estimators from noisy sums", estimate):
    the count floored at the public ``floor``, the covariate scatter projected on the PSD cone,
    its eigenvalues floored at ``eigen_floor`` and raised by ``ridge``, slopes
    ``S_reg^-1 S_xy``. With both 0 the pseudo-inverse (null directions get slope 0): without
    noise, Lin's OLS. ``block`` may carry leading batch axes."""
    gram, cross, sq = _unpack(block, d)
    count = np.maximum(gram[..., 0, 0], floor)
    mean_x, mean_y = gram[..., 0, 1:] / count[..., None], cross[..., 0] / count
    s_xx = gram[..., 1:, 1:] - count[..., None, None] * (mean_x[..., :, None]
                                                        * mean_x[..., None, :])
    s_xy = cross[..., 1:] - count[..., None] * mean_x * mean_y[..., None]
    s_yy = sq - count * mean_y**2
    vals, vecs = _psd_eigen(s_xx)
    shrunk = np.maximum(vals, eigen_floor) + ridge
    tiny = 1e-10 * np.maximum(count, 1.0)[..., None]          # rounding of an exact zero
    inv_vals = np.where(shrunk > tiny, 1.0 / np.where(shrunk > tiny, shrunk, 1.0), 0.0)
    scatter = (vecs * vals[..., None, :]) @ np.swapaxes(vecs, -1, -2)
    inverse = (vecs * inv_vals[..., None, :]) @ np.swapaxes(vecs, -1, -2)
    slopes = (inverse @ s_xy[..., None])[..., 0]
    rss = (s_yy - 2.0 * np.sum(slopes * s_xy, axis=-1)
           + (slopes[..., None, :] @ s_xx @ slopes[..., :, None])[..., 0, 0])
    residual_var = np.clip(rss / np.maximum(count - d - 1.0, 1.0), 0.0, 1.0)
    return ArmFit(count, mean_x, mean_y, slopes, scatter, inverse, residual_var, s_xy, s_yy)


def check_estimand(estimand: str) -> str:
    """``estimand`` if it is one of :data:`ESTIMANDS`, else a ``ValueError`` naming them."""
    if estimand not in ESTIMANDS:
        raise ValueError(f"estimand must be one of {ESTIMANDS}, got {estimand!r}")
    return estimand


def point(stats: np.ndarray, d: int, ridge: float, eigen_floor: float, floor: float, *,
          clip: bool = True, estimand: str = "ate"
          ) -> tuple[np.ndarray, ArmFit, ArmFit, np.ndarray]:
    """``(tau, arm 1, arm 0, xbar)`` in scaled units: ``mu_1(xbar) - mu_0(xbar)``,
    ``mu_a(x) = ybar_a + (x - xbar_a)^T beta_a`` (spec §3; SPECS.md "Estimators from noisy
    sums"), each ``mu_a`` clipped to [-1, 1] unless ``clip`` is False (the CI's unclipped
    estimator). ``estimand`` "ate": ``xbar`` the pooled covariate mean (Lin 2013); "att": the
    treated arm's, so ``tau = ybar_1 - mu_0(xbar_1)``, the mean over the treated of
    ``mu_1(x) - mu_0(x)`` (the ATT). ``stats`` may carry leading batch axes."""
    check_estimand(estimand)
    size = block_size(d)
    one = fit_arm(stats[..., :size], d, ridge, eigen_floor, floor)
    zero = fit_arm(stats[..., size:], d, ridge, eigen_floor, floor)
    if estimand == "att":
        xbar = one.mean_x
    else:
        total = (one.count + zero.count)[..., None]
        xbar = (one.count[..., None] * one.mean_x + zero.count[..., None] * zero.mean_x) / total
    mu = [f.mean_y + np.sum((xbar - f.mean_x) * f.slopes, axis=-1) for f in (one, zero)]
    if clip:
        mu = [np.clip(m, -1.0, 1.0) for m in mu]
    return mu[0] - mu[1], one, zero, xbar


def _covariate_mean_variance(one: ArmFit, zero: ArmFit, xbar: np.ndarray) -> float:
    """``(beta_1 - beta_0)^T Sigma_x (beta_1 - beta_0) / n``: the spread of the covariate mean
    times the difference of the slopes (the population ATE's share of the sampling variance)."""
    if not xbar.size:
        return 0.0
    n = float(one.count + zero.count)
    spread = np.zeros((xbar.size, xbar.size))
    for f in (one, zero):   # within-arm scatter plus between-arm
        gap = f.mean_x - xbar
        spread += f.scatter + f.count * np.outer(gap, gap)
    diff = one.slopes - zero.slopes
    return float(diff @ spread @ diff) / n**2


def _treated_contrast(one: ArmFit, zero: ArmFit) -> ArmFit:
    """The treated arm as the ATT's variance sees it (SPECS.md, "Estimators from noisy sums",
    the ATT): slopes ``beta_0`` and residual variance ``v_1`` of ``y - beta_0^T x`` over the
    treated, ``(S_yy - 2 beta_0^T S_xy + beta_0^T S_xx beta_0) / (n_1 - 1)`` from the arm's
    centred sums (linear in its noise: no inverse of its scatter), within [0, (1 +
    ||beta_0||_1)^2] (Popoviciu: ``y - beta_0^T x`` lies in an interval of that half-width).
    Its per-arm variance at ``xbar_1`` is ``v_1 / n_1``: ``ybar_1 - beta_0^T xbar_1``'s."""
    b0 = zero.slopes
    quad = one.s_yy - 2.0 * b0 @ one.s_xy + b0 @ one.scatter @ b0
    cap = (1.0 + float(np.sum(np.abs(b0)))) ** 2
    v1 = np.clip(quad / np.maximum(one.count - 1.0, 1.0), 0.0, cap)
    return replace(one, slopes=b0, residual_var=v1)


def _variance_arms(one: ArmFit, zero: ArmFit, xbar: np.ndarray, estimand: str
                   ) -> tuple[tuple[ArmFit, ArmFit], float]:
    """The arms whose per-arm variance ``s_a^2 (1/n_a + gap_a^T S_reg^-1 gap_a)`` at ``xbar``
    sums to the estimand's sampling variance, and the population covariate mean's variance
    they leave out (SPECS.md, "Estimators from noisy sums"): ATE the fitted arms and
    :func:`_covariate_mean_variance`; ATT the treated contrast (:func:`_treated_contrast`,
    which holds ``xbar_1``'s spread) and the control arm, nothing left out."""
    if estimand == "att":
        return (_treated_contrast(one, zero), zero), 0.0
    return (one, zero), _covariate_mean_variance(one, zero, xbar)


def sampling_variance(one: ArmFit, zero: ArmFit, xbar: np.ndarray, estimand: str = "ate"
                      ) -> float:
    """Per arm ``s_a^2 (1/n_a + (xbar - xbar_a)^T S_reg^-1 (xbar - xbar_a))`` (the
    residual variance at the evaluation point), plus for the ATE ``(beta_1 - beta_0)^T Sigma_x
    (beta_1 - beta_0) / n`` for the spread of the covariate mean (the population ATE); for the
    ATT ``v_1 / n_1 + s_0^2 (1/n_0 + (xbar_1 - xbar_0)^T S_reg,0^-1 (xbar_1 - xbar_0))``
    (:func:`_variance_arms`); scaled units, one fit."""
    arms, var = _variance_arms(one, zero, xbar, estimand)
    for f in arms:
        gap = xbar - f.mean_x
        var += float(f.residual_var * (1.0 / f.count + gap @ f.inverse @ gap))
    return var


def noise_variance(stats: np.ndarray, d: int, ridge: float, eigen_floor: float, floor: float,
                   sigma: np.ndarray, estimand: str = "ate"
                   ) -> float:
    """Delta-method variance of the unclipped estimate from the noise: ``sum_k (d tau / d S_k)^2
    sigma_k^2`` at the released statistics, by central differences of :func:`point` (all 2p
    shifted vectors in one batch). Reported as the release's noise sd; the CI is
    the hull of :func:`estimate_from`."""
    step = 1e-4 * np.maximum(np.asarray(sigma, dtype=float), 1e-12)
    shifts = np.diag(step)
    taus = point(np.concatenate([stats + shifts, stats - shifts]), d, ridge, eigen_floor, floor,
                 clip=False, estimand=estimand)[0]
    grad = (taus[:stats.size] - taus[stats.size:]) / (2.0 * step)
    return float(np.sum((grad * sigma) ** 2))


def model_statistics(fit: ArmFit, d: int) -> tuple[np.ndarray, np.ndarray, float]:
    """One arm's fitted model as the parametric bootstrap's centre, its design fixed at the
    fit's count, means and (PSD) scatter: ``(Gram G, theta, s^2)`` with
    ``theta = (ybar - xbar^T beta, beta)``; the model's pre-noise block is ``vech(G)``,
    ``G theta``, ``theta^T G theta + n s^2``."""
    n = float(fit.count)
    gram = np.empty((d + 1, d + 1))
    gram[0, 0] = n
    gram[0, 1:] = gram[1:, 0] = n * fit.mean_x
    gram[1:, 1:] = fit.scatter + n * np.outer(fit.mean_x, fit.mean_x)
    theta = np.concatenate([[float(fit.mean_y - fit.mean_x @ fit.slopes)], fit.slopes])
    return gram, theta, float(fit.residual_var)


def bootstrap_deviations(stats: np.ndarray, cal: SumsCalibration, rng: np.random.Generator,
                         replicates: int = BOOTSTRAP_REPLICATES, estimand: str = "ate"
                         ) -> np.ndarray:
    """Parametric bootstrap of the unclipped estimate given the released statistics (Ferrando,
    Wang & Sheldon 2022; SPECS.md, "Estimators from noisy sums", CI). Per replicate and arm: the
    model's pre-noise block (:func:`model_statistics`) with a fresh draw of its sampling
    variability (``sum u e ~ N(0, s^2 G)``, ``sum e^2 = s^2 (n + sqrt(2n) z)``) and of the known
    noise (sd ``sigma / w`` per coordinate), re-estimated by :func:`point` for ``estimand``;
    minus the model's own estimate; plus a normal draw of the covariate mean's spread
    (population ATE; 0 for the ATT, whose treated arm is modelled as the control fit plus a
    constant with ``y - beta_0^T x``'s residual variance: :func:`_variance_arms`). Returns the
    B deviations ``tau* - tau_model`` in scaled units: post-processing of the released vector."""
    d = cal.d
    _, one, zero, xbar = point(stats, d, cal.ridge, cal.eigen_floor, cal.floor, clip=False,
                               estimand=estimand)
    arms, spread_var = _variance_arms(one, zero, xbar, estimand)
    iu = np.triu_indices(d + 1)
    centre, blocks = [], []
    for fit in arms:
        gram, theta, s2 = model_statistics(fit, d)
        cross = gram @ theta
        sq = float(theta @ cross) + float(fit.count) * s2
        vals, vecs = _psd_eigen(gram)
        ue = (math.sqrt(s2) * rng.standard_normal((replicates, d + 1))) @ (vecs * np.sqrt(vals)).T
        e2 = s2 * math.sqrt(2.0 * float(fit.count)) * rng.standard_normal(replicates)
        centre.append(np.concatenate([gram[iu], cross, [sq]]))
        blocks.append(np.column_stack([np.broadcast_to(gram[iu], (replicates, iu[0].size)),
                                       cross + ue, sq + 2.0 * ue @ theta + e2]))
    model = np.concatenate(centre)
    noisy = np.hstack(blocks) + (rng.standard_normal((replicates, model.size))
                                 * (cal.sigma / weights(d, cal.q_weight)))
    taus = point(noisy, d, cal.ridge, cal.eigen_floor, cal.floor, clip=False,
                 estimand=estimand)[0]
    tau_model = float(point(model, d, cal.ridge, cal.eigen_floor, cal.floor, clip=False,
                            estimand=estimand)[0])
    return taus - tau_model + math.sqrt(spread_var) * rng.standard_normal(replicates)


@dataclass(frozen=True)
class SumsEstimate:
    """A ``dim``/``lin`` estimate from the released vector, scaled units (times h for the
    outcome's): the clipped estimate, its CI, and the sampling and noise variances of the
    delta method (reported, not the CI's)."""

    tau: float
    ci: tuple[float, float]
    sampling_var: float
    noise_var: float


def estimate_from(noisy_weighted: np.ndarray, cal: SumsCalibration, *, alpha: float,
                  rng: np.random.Generator, estimand: str = "ate") -> SumsEstimate:
    """The ``estimand`` (:func:`point`) and its ``1 - alpha`` CI from the released (weighted,
    noisy) vector: post-processing only (SPECS.md, "Estimators from noisy sums", CI; the same
    construction for either estimand, each with its own functional and sampling variance).
    The CI is the hull of two intervals around the unclipped estimate t: the basic parametric
    bootstrap interval ``[t - q_{1-alpha/2}, t - q_{alpha/2}]`` (q the quantiles of
    :func:`bootstrap_deviations`), which follows the estimate's nonlinearity in the noise, and
    the delta method's
    ``t +/- z sqrt(V_sampling + V_noise)``, which holds where a floored count makes the
    bootstrap's centre biased; then widened to hold the clipped estimate. ``rng`` draws the
    bootstrap's replicates (not privacy noise)."""
    w = weights(cal.d, cal.q_weight)
    stats = np.asarray(noisy_weighted, dtype=float) / w
    post = (cal.d, cal.ridge, cal.eigen_floor, cal.floor)
    tau, one, zero, xbar = point(stats, *post, estimand=estimand)
    raw = float(point(stats, *post, clip=False, estimand=estimand)[0])
    v_s = sampling_variance(one, zero, xbar, estimand)
    v_n = noise_variance(stats, *post, cal.sigma / w, estimand)
    q_lo, q_hi = np.quantile(bootstrap_deviations(stats, cal, rng, estimand=estimand),
                             [alpha / 2, 1 - alpha / 2])
    half = float(ndtri(1 - alpha / 2)) * math.sqrt(v_s + v_n)
    lo = min(raw - float(q_hi), raw - half, float(tau))
    hi = max(raw - float(q_lo), raw + half, float(tau))
    return SumsEstimate(float(tau), (lo, hi), v_s, v_n)


#: The covariate imbalance the planner assumes between the arms, per covariate in within-arm
#: standard deviations (standardised mean difference): none in a randomized design; in an
#: observational one 0.25, the largest at which regression adjustment is held reliable (Rubin
#: 2001; Stuart 2010, section 6.2). Lin's noise grows with it where an arm's scatter is
#: noise-dominated (SPECS.md, "Estimators from noisy sums", planner).
PLANNED_IMBALANCE = {"randomized": 0.0, "observational": 0.25}
#: Draws of the release's noise in the planner's prediction (antithetic pairs; a fixed seed: the
#: prediction is a deterministic function of public facts).
PLANNING_DRAWS = 512


def planning_statistics(n: int, d: int, *, treated_share: float, outcome_sd_scaled: float,
                        imbalance: float) -> np.ndarray:
    """A pre-noise statistic vector made of public facts only (no data value), the planner's
    stand-in for the release's (SPECS.md, "Estimators from noisy sums", planner): arm sizes
    ``n p`` and ``n (1 - p)``; covariates independent and uniform within their bounds in each
    arm (scaled variance 1/3), the arms' means ``imbalance / sqrt(3)`` apart in every covariate
    around a pooled mean of 0; the outcome with scaled sd ``s`` in both arms, no covariate
    explaining it (slopes 0, as the sampling part assumes), and mean ``sqrt((1 - s^2)/3)``:
    the root mean square of a mean uniform over the range the spread allows (Bhatia-Davis,
    ``|m| <= sqrt(1 - s^2)``); the noise of a count and of the covariate sums enters the
    estimate times the mean."""
    s2 = min(outcome_sd_scaled**2, 1.0)
    m, v = math.sqrt((1.0 - s2) / 3.0), 1.0 / 3.0
    gap = imbalance * math.sqrt(v) * np.ones(d)
    iu = np.triu_indices(d + 1)
    blocks = []
    for n_a, mean_x in ((n * treated_share, (1.0 - treated_share) * gap),
                        (n * (1.0 - treated_share), -treated_share * gap)):
        gram = np.empty((d + 1, d + 1))
        gram[0, 0] = n_a
        gram[0, 1:] = gram[1:, 0] = n_a * mean_x
        gram[1:, 1:] = n_a * (v * np.eye(d) + np.outer(mean_x, mean_x))
        blocks.append(np.concatenate([gram[iu], m * gram[:, 0], [n_a * (m * m + s2)]]))
    return np.concatenate(blocks)


def expected_halfwidth(estimator: str, n: int, d: int, *, zeta: float,
                       outcome_bounds: tuple[float, float], alpha: float = 0.05,
                       outcome_sd: float | None = None, treated_share: float = 0.5,
                       design: str = "observational", imbalance: float | None = None,
                       estimand: str = "ate") -> float:
    """The planner's expected half-width of a ``dim``/``lin`` CI, from public facts (SPECS.md,
    "Estimators from noisy sums", planner): ``h sqrt(w_s^2 + w_n^2)`` with the sampling part
    ``w_s = z sd/h sqrt(1/n_1 + 1/n_0)`` (no gain assumed from covariates) and the noise part
    ``w_n`` the ``1 - alpha`` quantile of ``|t(S + e) - t(S)|`` over :data:`PLANNING_DRAWS`
    antithetic draws ``+/- e`` of the release's noise, ``S`` :func:`planning_statistics` and
    ``t`` the unclipped estimate of the release's calibration for ``design`` (count floor,
    ridge or eigenvalue floor). Where an arm's count or scatter is noise-dominated this follows
    the estimate's nonlinearity in the noise, which the CI's parametric bootstrap follows and
    the delta method misses. ``imbalance``: the covariate imbalance assumed (default
    :data:`PLANNED_IMBALANCE` of the design). ``estimand``: the effect ``t`` estimates
    (:func:`point`; the ATT's noise enters through the control arm's slopes at the treated
    mean). ``zeta=inf`` gives the limit without noise, the sampling part alone."""
    check_estimand(estimand)
    lo, hi = outcome_bounds
    h = (hi - lo) / 2.0
    ratio = min((h if outcome_sd is None else float(outcome_sd)) / h, 1.0)
    z = float(ndtri(1.0 - alpha / 2.0))
    sampling = z * ratio * math.sqrt(1.0 / (n * treated_share)
                                     + 1.0 / (n * (1.0 - treated_share)))
    if zeta == math.inf:
        return h * sampling
    cal = calibrate_sums(estimator, n, d, zeta, design)
    shift = PLANNED_IMBALANCE[design] if imbalance is None else float(imbalance)
    stats = planning_statistics(n, cal.d, treated_share=treated_share,
                                outcome_sd_scaled=ratio, imbalance=shift)
    noise = (np.random.default_rng(0).standard_normal((PLANNING_DRAWS // 2, stats.size))
             * (cal.sigma / weights(cal.d, cal.q_weight)))
    taus = point(np.vstack([stats, stats + noise, stats - noise]), cal.d, cal.ridge,
                 cal.eigen_floor, cal.floor, clip=False, estimand=estimand)[0]
    return h * math.hypot(sampling, float(np.quantile(np.abs(taus[1:] - taus[0]), 1.0 - alpha)))


def chunk_statistics(X: np.ndarray | pd.DataFrame | None, A: np.ndarray, Y: np.ndarray, *,
                     estimator: str, outcome_bounds: tuple[float, float],
                     covariate_bounds: Sequence[tuple[float, float]] | None = None,
                     usable: np.ndarray | None = None) -> np.ndarray:
    """The UNWEIGHTED pre-noise statistic vector of a chunk of rows (``dim``: no covariates),
    additive across chunks: sum the chunks' vectors, then release once. Rows with
    ``usable`` False contribute nothing. Non-private: keep it in memory."""
    keep = np.ones(len(A), dtype=bool) if usable is None else np.asarray(usable, dtype=bool)
    a = np.asarray(A, dtype=float)[keep]
    y = scale_outcome(np.asarray(Y, dtype=float)[keep], outcome_bounds)
    if estimator == "dim":
        x = np.zeros((int(keep.sum()), 0))
    else:
        if covariate_bounds is None or X is None:
            raise ValueError("estimator='lin' needs covariate_bounds")
        x = scale_covariates(np.asarray(X, dtype=float)[keep], covariate_bounds)
    return statistics(x, a, y)
