"""A data-free planner for the core release: how precise will it be, before anything is spent.

Everything that sets the noise of :class:`dpcausal.PrivateATE` is public (n, d, K, bounds, the
propensity clip, zeta, the CI share), so the expected width of the private CI can be computed
before the release, under a stated public assumption about the outcome's spread.

Assumption (public, overridable): the outcome has standard deviation ``outcome_sd`` in both
arms (default: half the width of the outcome bounds, the largest any distribution on the bounds
can have) and a share ``treated_share`` of units is treated (default 1/2). The non-private
variance is then that of a difference in means, ``V = sd^2 (1/p + 1/(1-p)) / n``; covariate
adjustment can only shrink it, so the ratios below are conservative for AIPW and G.

Expected private variance (spec dp_ate_ensemble.md §3, eq. 11 and the conservative form):
``"paper"``: ``V + sigma1^2 + z sigma2^2``; ``"conservative"``: ``(sqrt(V) + z sigma2)^2 +
sigma1^2`` with ``z = Phi^-1(1 - p1)``; the half-width is ``c sqrt(V_DP)`` with
``c = Phi^-1(1 - alpha/2 + p1/2)`` (eq. 12), against ``Phi^-1(1 - alpha/2) sqrt(V)`` without
privacy. sigma1 and sigma2 come from :func:`dpcausal.ate.sensitivity.calibrate` (Theorem 1, §2.5).

Rows-per-fold floors (our decision, spec §7 is silent past its 5(d+1)/50 warning): the folds of a
recommended K keep at least ``max(25, 8(d+1))`` rows for AIPW (5(d+1) before block ensembles),
``max(25, 10(d+1))`` for G and ``max(50, 50(d+1))`` for IPW with parametric nuisance models, and
``max(100, 10(d+1))`` for any other model kind; the default degree-2 models ("quadratic",
:mod:`dpcausal.ate.features`) count their p = d(d+3)/2 features as covariates:
``max(100, 10(p+1))``. The evidence: the paper's Exp. A runs all three
at 25 rows per fold (d = 1). AIPW at n = 10^6, d = 5 (``make_large``, block ensembles, pre-noise
estimate minus DoubleML IRM's on the same data, in DoubleML SEs of 0.0003): +3.2 at 25 rows per
fold, +0.8 at 32, +0.4/+0.5 at 36 (two data sets), +0.3 at 40, 0.0/+0.02 at 48: blocks, whose
cost no longer caps K, would reach that bias, which does not shrink with n while the SE does;
8(d+1) is 4 rows per parameter and arm. Our K sweep on Exp. D (n = 50,000,
d = 20, 3 data sets, pre-noise estimates, true ATE 0.15): AIPW and G stay within 0.0005 of the
truth up to K = 476 (105 rows per fold), while IPW's bias grows about linearly in K: 0.0006 at
K = 10, 0.0041 at 50, 0.0090 at 100, 0.0145 at 158 and 0.0557 at 476 (about 0.25 d / rows per
fold), hence its 50(d+1) floor (bias about 0.005 at d = 20).
``tests/library/ate/test_planner_sweep.py`` (slow) reruns the sweep at the recommended K.
These floors were measured at n <= 10^6; the fold-size bias does not fall with n while the noise
does, so at larger n ``n_folds="auto"`` with the default models keeps K where a public envelope
of that bias stays within 90% of a quarter of its noise sd (:func:`fold_bias_folds`), and a
stated K past it warns (:func:`check_fold_bias`; dpcausal/SPECS.md "Fold-size bias at large n").

Compute (this machine class, 2 cores; refitted to bench/ate_core.py with the fused aggregation
kernels and batched fits): ``seconds ~= a n + f K + n K (c_pi P + c_mu M)`` with
P = 1 if the estimator uses the propensity and M the number of outcome arms (G 2, IPW 0, AIPW 2):
a logistic propensity costs an exp and a reciprocal per prediction (about 3 CPU ns), a linear
outcome a clip (about 0.75 CPU ns, nothing where the linear collapse applies, which this model
ignores). Measured: AIPW at n = 10^6, K = 16,250 took 78 CPU seconds (4.6 CPU ns per row and
fold); the model charges 3.5 ns of wall time per row and fold, i.e. the 2 cores at 65%
efficiency, since they are shared (bench/ate_core.py prints wall and CPU seconds and the load).
"""

from __future__ import annotations

import math
import warnings
from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.special import ndtri

from dpcausal.ate import sums
from dpcausal.ate.blocks import BlockLayout, balanced_layout
from dpcausal.ate.complete_cases import count_sigma, split_zeta
from dpcausal.ate.sensitivity import SIGMA2_MODES, NoiseCalibration, calibrate
from dpcausal.validation import ComputeWarning, FoldBiasWarning

NUISANCES = {"g": 2, "ipw": 1, "aipw": 3}
MODEL_KINDS = ("parametric", "quadratic", "other")
_SECONDS_PER_ROW = 1.5e-6           # a: loading, validation, grouping, scores
_SECONDS_PER_FOLD = 1e-4            # f: batched fits and model objects
_SECONDS_PER_PROPENSITY = 1.9e-9    # c_pi: per out-of-fold propensity prediction
_SECONDS_PER_OUTCOME = 0.8e-9       # c_mu: per out-of-fold outcome prediction and arm
_OUTCOME_ARMS = {"g": 2, "ipw": 0, "aipw": 2}
_K_GRID = (2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000,
           100_000, 200_000)
CI_SHARES = (0.05, 0.1, 0.2, 0.3)
UNINFORMATIVE_RATIO = 10.0
FULL_ENSEMBLE_FOLDS = 256   # block_folds="auto" keeps the paper's full ensemble up to this K
MAX_BLOCK_FOLDS = 128       # ... and above it, blocks of at most this many folds (block_split)


#: The range of ``propensity_clip="auto"``: never more clipping than the former default 0.2
#: (where the noise hides the clip's bias), never less than 0.01 (the non-private reference).
AUTO_CLIP_RANGE = (0.01, 0.2)


def auto_propensity_clip(n: int, n_folds: int, zeta: float, layout: BlockLayout | None = None,
                         treated_share: float = 0.5) -> float:
    r"""``propensity_clip="auto"``: eta = 2 sqrt(a s / zeta) within :data:`AUTO_CLIP_RANGE`,
    s = 1/n + w (Theorem 1's s, w = 1/(K-1); a block layout's
    :meth:`~dpcausal.ate.blocks.BlockLayout.other_fold_weight`), a = :func:`arm_balance` of the
    public treated share (1 at 1/2): dpcausal/SPECS.md "The propensity clip for the release at
    hand" and its smaller arm. Pure function of public parameters.

    Notes
    -----
    Under the stated overlap assumption ``P(min(pi, 1 - pi) < t) <= t`` the clip biases AIPW by
    at most ``B_mu eta``, while the tight sensitivity (spec §2.4) gives the ATE noise
    ``sigma1 ~ 4 B_mu s / (eta zeta1)``; the worst-case error ``B_mu eta + sigma1`` is least where
    the two are equal:

    .. math:: \eta = 2 \sqrt{s / \zeta}, \qquad s = \frac{1}{n} + w,

    at which the bias bound is at most sigma1 (zeta >= zeta1). ``zeta`` is the estimate's
    budget (the release's, less the complete-case count's under ``missing="drop"``). With a
    smaller arm of share a/2 the assumption reads ``P(min(pi, 1 - pi) < t) <= t / a`` (as many
    units near 0 or 1 as the rarer arm makes likely), the bias bound ``B_mu eta / a``, and
    the balance ``eta = 2 sqrt(a s / zeta)``.
    """
    w = 1.0 / (n_folds - 1) if layout is None else layout.other_fold_weight()
    eta = 2.0 * math.sqrt(arm_balance(treated_share) * (1.0 / n + w) / zeta)
    lo, hi = AUTO_CLIP_RANGE
    return float(min(hi, max(lo, eta)))


def resolve_clip(propensity_clip: float | str, n: int, n_folds: int, zeta: float,
                 layout: BlockLayout | None = None, treated_share: float = 0.5) -> float:
    """``propensity_clip``, or :func:`auto_propensity_clip` for ``"auto"``."""
    if propensity_clip == "auto":
        return auto_propensity_clip(n, n_folds, zeta, layout, treated_share)
    return float(propensity_clip)


#: beta of the fold-size bias envelope ``b(m) <= beta B_mu (p + 1) / m`` of the AIPW ensemble with
#: the default degree-2 models on m rows per fold (dpcausal/SPECS.md "Fold-size bias at large n":
#: paired at 10^6 and 2 10^6 rows, the threshold design reaches 0.031-0.042 at 400-3,200 rows per
#: fold, about 1/m there; the other designs stay under 0.02 at or above the floor).
FOLD_BIAS_ENVELOPE = 0.045
#: The share of the ATE's noise sd the envelope may reach before :func:`check_fold_bias` warns:
#: a bias of a quarter sd costs a 95% CI under one point of coverage.
FOLD_BIAS_SHARE = 0.25
#: The share ``n_folds="auto"`` and the warning's advice keep (:func:`fold_bias_folds`): 90% of
#: :data:`FOLD_BIAS_SHARE`, clear of the threshold where a partitioned source's blocks round K
#: otherwise than a balanced layout.
FOLD_BIAS_KEPT = 0.9 * FOLD_BIAS_SHARE

#: ``noise_at(K)``: the ``(K, K', sigma1)`` of a release laid out as it is, with about K folds
#: (blocks round K).
NoiseAt = Callable[[int], tuple[int, int, float]]


def arm_balance(treated_share: float = 0.5) -> float:
    """``2 min(p, 1 - p)``: the smaller arm's share of a fold's rows against a balanced
    design's, 1 at p = 1/2 (SPECS.md "Fold-size bias at large n", the smaller arm). Each arm's
    outcome model, and the propensity's rarer class, see that share of a fold's rows."""
    if not 0 < treated_share < 1:
        raise ValueError(f"treated_share must be in (0, 1), got {treated_share!r}")
    return 2.0 * min(treated_share, 1.0 - treated_share)


def fold_bias_bound(rows_per_fold: int, d: int, outcome_bounds: Sequence[float],
                    treated_share: float = 0.5) -> float:
    """The envelope ``beta B_mu (p + 1) / m`` (:data:`FOLD_BIAS_ENVELOPE`) of the default models'
    fold-size bias on m = ``rows_per_fold`` times :func:`arm_balance` rows (a balanced fold's
    rows with as many in its smaller arm), p = d (d + 3) / 2 degree-2 features and B_mu half
    the width of the outcome bounds (SPECS.md "Fold-size bias at large n")."""
    lo, hi = _pair(outcome_bounds)
    m = rows_per_fold * arm_balance(treated_share)
    return FOLD_BIAS_ENVELOPE * (hi - lo) / 2.0 * (d * (d + 3) // 2 + 1) / m


def fold_bias_folds(n: int, d: int, outcome_bounds: Sequence[float], n_folds: int,
                    noise_at: NoiseAt, treated_share: float = 0.5) -> tuple[int, int]:
    """``(K, K')``: the largest release of at most ``n_folds`` folds, laid out by ``noise_at``,
    whose fold-size bias envelope (:func:`fold_bias_bound` of n // K rows) is at most
    :data:`FOLD_BIAS_KEPT` of its noise sd sigma1 (SPECS.md "Fold-size bias at large n": the rule of
    ``n_folds="auto"``). Bisection over K: the envelope falls and sigma1 grows as K falls (K
    public, sigma1 from the release's own calibration, ``propensity_clip="auto"`` rising as K
    falls); K = 2 when none fits. Public parameters only."""
    def fits(release: tuple[int, int, float]) -> bool:
        resolved, _, sigma = release
        return (fold_bias_bound(n // resolved, d, outcome_bounds, treated_share)
                <= FOLD_BIAS_KEPT * sigma)

    first = noise_at(n_folds)
    if fits(first):
        return first[:2]
    lo, hi = 2, n_folds          # fits(hi) is false; lo is the answer if nothing larger fits
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(noise_at(mid)) else (lo, mid)
    return noise_at(lo)[:2]


def check_fold_bias(n: int, d: int, outcome_bounds: Sequence[float], n_folds: int,
                    sigma_ate: float, noise_at: NoiseAt, treated_share: float = 0.5) -> None:
    """Warn (:class:`~dpcausal.validation.FoldBiasWarning`) when the envelope of the fold-size
    bias (:func:`fold_bias_bound`) of the release's K = ``n_folds`` folds exceeds
    :data:`FOLD_BIAS_SHARE` of its noise sd sigma1 = ``sigma_ate``: the CI, which accounts for
    noise and sampling, may then not cover. The warning names the K and K' that
    :func:`fold_bias_folds` finds (what ``n_folds="auto"`` takes when K is its only limit).
    Public parameters only (n, K, d, bounds, sigma1)."""
    bound = fold_bias_bound(n // n_folds, d, outcome_bounds, treated_share)
    if bound <= FOLD_BIAS_SHARE * sigma_ate:
        return
    k, kb = fold_bias_folds(n, d, outcome_bounds, n_folds, noise_at, treated_share)
    layout = f" and block_folds {kb:,}" if kb < k else ""
    warnings.warn(
        f"{n_folds:,} folds of {n // n_folds:,} rows are small against this release's noise "
        f"(sd {sigma_ate:.2g}): the default models' fold-size bias may reach {bound:.2g}, more "
        f"than a quarter of it, so the CI may not cover (dpcausal/SPECS.md \"Fold-size bias at "
        f"large n\"). Choose n_folds <= {k:,}{layout} (about {n // k:,} rows per fold; "
        "n_folds='auto' keeps this rule), or, on a randomized trial, estimator 'dim' or 'lin'",
        FoldBiasWarning, stacklevel=5)


def check_full_ensemble_cost(n: int, n_folds: int, block_folds: int, estimator: str,
                             compute_budget: float) -> None:
    """Warn (:class:`~dpcausal.validation.ComputeWarning`) when an int ``n_folds`` above
    :data:`FULL_ENSEMBLE_FOLDS` runs as one full ensemble (``block_folds`` = K: the library's
    meaning of an int K with ``block_folds="auto"``) whose predicted seconds
    (:func:`predicted_seconds`) exceed ``compute_budget``, naming the cost and the blocks of
    :data:`MAX_BLOCK_FOLDS` that would make it linear in n. Public parameters only."""
    if block_folds != n_folds or n_folds <= FULL_ENSEMBLE_FOLDS:
        return
    seconds = predicted_seconds(n, n_folds, estimator)
    if seconds <= compute_budget:
        return
    blocked = predicted_seconds(n, n_folds, estimator, MAX_BLOCK_FOLDS - 1)
    warnings.warn(
        f"n_folds={n_folds:,} without block_folds is the full ensemble: each of the {n:,} rows "
        f"meets {n_folds - 1:,} models, predicted about {_duration(seconds)} on this machine "
        f"class (compute_budget {compute_budget:g} s). Pass block_folds (e.g. "
        f"{MAX_BLOCK_FOLDS - 1}: about {_duration(blocked)}), or n_folds='auto'",
        ComputeWarning, stacklevel=5)


def _duration(seconds: float) -> str:
    """Seconds in the largest whole unit: "40 s", "12 min", "10 h"."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.0f} h"


def _pair(bounds: Sequence[float]) -> tuple[float, float]:
    lo, hi = bounds
    return float(lo), float(hi)


def rows_per_fold_floor(estimator: str, d: int, model_kind: str = "parametric",
                        treated_share: float = 0.5) -> int:
    """The fewest rows a fold of a recommended K keeps (module docstring: our decision).

    The balanced design's floor divided by :func:`arm_balance` of ``treated_share``: a fold
    keeps as many rows in its smaller arm as a balanced fold at the floor (SPECS.md "Fold-size
    bias at large n", the smaller arm). ``"quadratic"`` (the default degree-2 models,
    :mod:`dpcausal.ate.features`) counts their ``d (d + 3) / 2`` features as ``"other"``
    counts covariates."""
    if model_kind not in MODEL_KINDS:
        raise ValueError(f"model_kind must be one of {MODEL_KINDS}, got {model_kind!r}")
    if model_kind == "other":
        balanced = max(100, 10 * (d + 1))
    elif model_kind == "quadratic":   # the default models: p = d (d + 3) / 2 degree-2 features
        balanced = max(100, 10 * (d * (d + 3) // 2 + 1))
    else:
        balanced = {"aipw": max(25, 8 * (d + 1)), "g": max(25, 10 * (d + 1)),
                    "ipw": max(50, 50 * (d + 1))}[estimator]
    return math.ceil(balanced / arm_balance(treated_share) - 1e-9)


def predicted_seconds(n: int, n_folds: int, estimator: str, block_folds: int | None = None
                      ) -> float:
    """Fit + aggregate + release time on this machine class (module docstring); with blocks of
    K' = ``block_folds`` folds each row meets K' models instead of K, so the cost is linear in
    n at a fixed K' (spec §2.5b)."""
    per_row = n_folds if block_folds is None else block_folds
    return _SECONDS_PER_ROW * n + _SECONDS_PER_FOLD * n_folds + n * per_row * _per_pair(estimator)


def block_split(n_folds: int, block_folds: int | str | None = "auto") -> tuple[int, int]:
    """``(K, K')`` for a target K: ``None`` keeps the full ensemble (K' = K); an int K' takes
    ``B = max(1, K // K')`` blocks (K = B K'; K' = K when K < K'); ``"auto"``: B = 1 (the
    paper's estimator) up to K = 256, above it ``B = ceil(K / 128)`` blocks of ``K' = K // B``
    folds, so K' <= 128, K loses fewer than B folds, and the ATE noise exceeds the full
    ensemble's at the same K by the factor about ``(K-1)/(K-B)``, at most 1/127 (spec §2.5b:
    ``kappa/(K-B)``), while each row meets at most 128 models. Measured at n = 10^7 on 2
    workers (bench/partitioned_blocks.py): K' = 128 against 255 cut the workers' CPU from 115 to
    99 s and left the CI ratio at 1.19x / 1.20x."""
    if block_folds is None:
        return n_folds, n_folds
    if block_folds == "auto":
        if n_folds <= FULL_ENSEMBLE_FOLDS:
            return n_folds, n_folds
        B = -(-n_folds // MAX_BLOCK_FOLDS)
        return B * (n_folds // B), n_folds // B
    if not isinstance(block_folds, int) or isinstance(block_folds, bool) or block_folds < 2:
        raise ValueError(f"block_folds must be an int >= 2, None or 'auto', got {block_folds!r}")
    if n_folds <= block_folds:
        return n_folds, n_folds
    return (n_folds // block_folds) * block_folds, block_folds


def layout_for(n: int, n_folds: int, block_folds: int) -> BlockLayout | None:
    """The balanced block layout of ``(n, K, K')`` (None for the full ensemble)."""
    return None if block_folds == n_folds else balanced_layout(n, n_folds, block_folds)


def _per_pair(estimator: str) -> float:
    """Seconds per (row, fold) pair: c_pi P + c_mu M (module docstring)."""
    uses_pi = 1.0 if estimator in ("ipw", "aipw") else 0.0
    return uses_pi * _SECONDS_PER_PROPENSITY + _OUTCOME_ARMS[estimator] * _SECONDS_PER_OUTCOME


def expected_halfwidth(sigma_ate: float, sigma_var: float, variance: float, *,
                       ci: str = "conservative", alpha: float = 0.05, p1: float = 0.01) -> float:
    """Expected private CI half-width ``c sqrt(V_DP)`` for non-private variance ``variance``
    (spec §3: eq. 11 for ``"paper"``, the conservative form otherwise; eq. 12 for c).

    Parameters
    ----------
    sigma_ate, sigma_var : float
        sigma1 and sigma2 of the calibration.
    variance : float
        The assumed non-private variance of the estimate (:func:`nonprivate_variance`).
    ci : {"conservative", "paper"}
        The private-variance form (:func:`dpcausal.ate.ci.private_variance`), at the noise's mean.
    alpha, p1 : float
        Miscoverage of the CI and the share of it given to the variance noise.

    Returns
    -------
    float
        The half-width, with the variance noise at its expected value (zero).
    """
    z = float(ndtri(1.0 - p1))
    c = float(ndtri(1.0 - alpha / 2.0 + p1 / 2.0))
    if ci == "paper":
        v_dp = variance + sigma_ate**2 + z * sigma_var**2
    elif ci == "conservative":
        v_dp = (math.sqrt(variance) + z * sigma_var) ** 2 + sigma_ate**2
    else:
        raise ValueError(f"ci must be 'paper' or 'conservative', got {ci!r}")
    return c * math.sqrt(v_dp)


def nonprivate_variance(n: int, outcome_bounds: Sequence[float], outcome_sd: float | None = None,
                        treated_share: float = 0.5) -> float:
    """``sd^2 (1/p + 1/(1-p)) / n``: the stated public assumption (module docstring)."""
    lo, hi = map(float, outcome_bounds)
    sd = (hi - lo) / 2.0 if outcome_sd is None else float(outcome_sd)
    if not (math.isfinite(sd) and sd > 0):
        raise ValueError(f"outcome_sd must be a finite number > 0, got {outcome_sd!r}")
    if not 0 < treated_share < 1:
        raise ValueError(f"treated_share must be in (0, 1), got {treated_share!r}")
    return sd * sd * (1.0 / treated_share + 1.0 / (1.0 - treated_share)) / n


def candidate_folds(n: int, d: int, estimator: str, model_kind: str = "parametric",
                    compute_budget: float = 60.0, block_folds: int | str | None = None,
                    treated_share: float = 0.5) -> list[int]:
    """K candidates: a fixed grid, multiples of sqrt(n), and the largest K the floor and the
    compute budget allow (:func:`auto_folds`)."""
    root = int(math.isqrt(n))
    floor_k = n // rows_per_fold_floor(estimator, d, model_kind, treated_share)
    auto = auto_folds(n, d, estimator=estimator, model_kind=model_kind,
                      compute_budget=compute_budget, block_folds=block_folds,
                      treated_share=treated_share)[0]
    ks = set(_K_GRID) | {root, 5 * root, 10 * root, 15 * root, floor_k, auto}
    return sorted(k for k in ks if 2 <= k <= n // 2)


class EstimandNoise(NamedTuple):
    """How a planned release's estimand scales the ensemble's noise (:func:`estimand_noise`)."""

    estimand: str
    zeta: float         # the zeta of T, the score mean the ensemble calibrates
    divisor: float      # the estimand is T over this (the treated share for the ATT)
    widening: float     # the CI's count term (:func:`att_count_widening`; 1 for the ATE)

    def halfwidth(self, cal: NoiseCalibration, variance: float, *, ci: str, alpha: float,
                  p1: float) -> float:
        """The expected half-width (:func:`expected_halfwidth`) of the estimand: T's noise
        over the divisor, times the widening."""
        return self.widening * expected_halfwidth(
            cal.sigma_ate / self.divisor, cal.sigma_var / self.divisor, variance, ci=ci,
            alpha=alpha, p1=p1)


def estimand_noise(estimator: str, estimand: str, zeta: float, treated_share: float,
                   n: int) -> EstimandNoise:
    """The :class:`EstimandNoise` of a planned release of n rows: the ATE's ``("ate", zeta, 1,
    1)``, or for the AIPW ensemble's ATT ``("att", zeta sqrt(1 - s), p, w)``: T gets what the
    treated count leaves (:func:`dpcausal.ate.complete_cases.split_zeta`), the ATT is T over the
    treated share p, so T's noise is divided by p, and the CI's count term widens the
    half-width by ``w`` (:func:`att_count_widening`; SPECS.md "The ATT of the ensemble",
    planning). Other ensembles release the ATE only."""
    if estimand == "att" and estimator == "aipw":
        p = float(treated_share)
        return EstimandNoise("att", split_zeta(zeta)[0], p, att_count_widening(n, zeta, p))
    return EstimandNoise("ate", zeta, 1.0, 1.0)


def att_count_widening(n: int, zeta: float, treated_share: float) -> float:
    r"""The factor :math:`1 + \sqrt{2/\pi}\, s_c / p` by which the ATT's CI exceeds T's
    half-width over p (SPECS.md "The ATT of the ensemble", planning).

    The released half-width is :math:`c_{\alpha,p_1}(s_T + |\tilde R| s_c)/\tilde c`
    (:func:`dpcausal.ate.complete_cases.ratio_variance`) with
    :math:`s_c^2 = p(1-p)/n + \sigma_C^2/n^2`, :math:`\sigma_C` the treated count's noise at
    ``zeta sqrt(0.01)``. Planned at :math:`\tilde c = p` and an ATT small against its noise
    (the planner's assumption), :math:`\tilde R \approx \tilde T/p` with
    :math:`\tilde T \sim N(0, s_T^2)`, so :math:`E|\tilde R| = \sqrt{2/\pi}\, s_T/p`."""
    p = float(treated_share)
    s_c = math.sqrt(p * (1.0 - p) / n + (count_sigma(split_zeta(zeta)[1]) / n) ** 2)
    return 1.0 + math.sqrt(2.0 / math.pi) * s_c / p


def narrowest_noise_modes(n: int, n_folds: int, *, outcome_bounds: Sequence[float],
                          estimator: str = "aipw", propensity_clip: float | str = "auto",
                          zeta: float = 1.5, ci_share: float | None = None,
                          sigma2: str | None = None, ci: str = "conservative",
                          alpha: float = 0.05, p1: float = 0.01, sensitivity: str = "tight",
                          outcome_sd: float | None = None, treated_share: float = 0.5,
                          block_folds: int | None = None, estimand: str = "ate"
                          ) -> tuple[str, float]:
    """``(sigma2, ci_share)`` with the narrowest expected CI for a release of n rows in K folds
    (``None`` tries :data:`SIGMA2_MODES` / :data:`CI_SHARES`; a value is kept): the
    ``"auto"`` defaults of :class:`dpcausal.PrivateATE`. Data-free: public parameters and the
    stated outcome-spread assumption only (module docstring). With blocks of ``block_folds``
    folds only ``"tight"`` is valid (spec §2.5b). ``estimand="att"``: the ATT's noise
    (:func:`estimand_noise`)."""
    variance = nonprivate_variance(n, outcome_bounds, outcome_sd, treated_share)
    layout = layout_for(n, n_folds, n_folds if block_folds is None else block_folds)
    noise = estimand_noise(estimator, estimand, zeta, treated_share, n)
    best: tuple[float, str, float] | None = None
    for mode in _sigma2_modes(sigma2, layout):
        for share in _shares(estimator, ci_share):
            cal = calibrate(estimator, n, n_folds, _pair(outcome_bounds),
                            resolve_clip(propensity_clip, n, n_folds, noise.zeta, layout,
                                         treated_share), noise.zeta,
                            share, sensitivity, mode, layout, noise.estimand)
            half = noise.halfwidth(cal, variance, ci=ci, alpha=alpha, p1=p1)
            if best is None or half < best[0]:
                best = (half, mode, share)
    assert best is not None
    return best[1], best[2]


def layout_halfwidth(n: int, n_folds: int, layout: BlockLayout | None, *,
                     outcome_bounds: Sequence[float], estimator: str = "aipw",
                     propensity_clip: float | str = "auto", zeta: float = 1.5,
                     ci: str = "conservative",
                     alpha: float = 0.05, p1: float = 0.01, sensitivity: str = "tight",
                     outcome_sd: float | None = None, treated_share: float = 0.5,
                     estimand: str = "ate") -> tuple[float, float]:
    """``(halfwidth, ratio)``: the expected private CI half-width of a release of n rows in K
    folds cut into ``layout`` (a layout not balanced by :func:`layout_for`, e.g. the partitioned
    path's, whose blocks follow the partitions' row counts; None: the full ensemble), at its
    narrowest sigma2 and ci_share (only ``"tight"`` with blocks, spec §2.5b), and its ratio to
    the non-private ``z_{1-alpha/2} sqrt(V)`` under the stated outcome-spread assumption;
    ``estimand="att"``: the ATT's (:func:`estimand_noise`)."""
    variance = nonprivate_variance(n, outcome_bounds, outcome_sd, treated_share)
    noise = estimand_noise(estimator, estimand, zeta, treated_share, n)
    half = min(
        noise.halfwidth(cal, variance, ci=ci, alpha=alpha, p1=p1)
        for mode in _sigma2_modes(None, layout) for share in _shares(estimator, None)
        for cal in [calibrate(estimator, n, n_folds, _pair(outcome_bounds),
                              resolve_clip(propensity_clip, n, n_folds, noise.zeta, layout,
                                           treated_share),
                              noise.zeta, share, sensitivity, mode, layout, noise.estimand)])
    return half, half / (float(ndtri(1.0 - alpha / 2.0)) * math.sqrt(variance))


def _sigma2_modes(sigma2: str | None, layout: BlockLayout | None) -> list[str]:
    """The sigma2 modes to try: the given one, else both, else only "tight" for blocks."""
    if sigma2 is not None:
        return [sigma2]
    return list(SIGMA2_MODES) if layout is None else ["tight"]


def _shares(estimator: str, ci_share: float | None) -> list[float]:
    """The CI shares a plan tries: the given one, else :data:`CI_SHARES`, or 0 for the
    G-formula, which releases the point estimate only (``dpcausal.ate.params.G_NO_CI``)."""
    if ci_share is not None:
        return [ci_share]
    return [0.0] if estimator == "g" else list(CI_SHARES)


def plan(
    n: int,
    d: int,
    *,
    outcome_bounds: Sequence[float],
    estimator: str = "aipw",
    propensity_clip: float | str = "auto",
    zeta: float = 1.5,
    ci_share: float | None = None,
    sigma2: str | None = None,
    ci: str = "conservative",
    alpha: float = 0.05,
    p1: float = 0.01,
    sensitivity: str = "tight",
    n_folds: Iterable[int] | None = None,
    estimators: Iterable[str] | None = None,
    propensity_clips: Iterable[float | str] | None = None,
    model_kind: str = "parametric",
    outcome_sd: float | None = None,
    treated_share: float = 0.5,
    compute_budget: float = 60.0,
    block_folds: int | str | None = "auto",
    estimand: str = "ate",
    noise_at: NoiseAt | None = None,
) -> pd.DataFrame:
    """The planner's table: one row per (estimator, eta, K, sigma2, ci_share) candidate.

    Data-free: it reads n and d and public parameters, never values, and charges nothing.

    Parameters
    ----------
    n, d : int
        Rows (at least 4) and covariates (at least 1).
    outcome_bounds : (float, float)
        The public outcome bounds.
    estimator, propensity_clip, zeta, sensitivity
        As in :class:`dpcausal.PrivateATE`; ``propensity_clip="auto"`` (the default) is
        :func:`auto_propensity_clip` of each candidate K.
    ci_share, sigma2 : optional
        ``None`` tries :data:`CI_SHARES` / :data:`SIGMA2_MODES` (both public and data-free); a
        value fixes it.
    ci, alpha, p1
        As in :func:`expected_halfwidth`.
    n_folds, estimators, propensity_clips : iterables, optional
        Candidates to compare instead of the defaults (:func:`candidate_folds`, ``estimator``,
        ``propensity_clip``).
    model_kind : str
        ``"parametric"`` or another kind; sets the rows-per-fold floor.
    outcome_sd, treated_share : float
        The stated public assumption on the outcome's spread (module docstring).
    compute_budget : float
        Seconds of fit and aggregation a candidate may take (the compute model above).
    block_folds : int, "auto" or None
        Splits each candidate K into blocks (:func:`block_split`; None: the full ensemble).
    estimand : {"ate", "att"}
        ``"att"``: the AIPW rows plan the ATT (:func:`estimand_noise`: T's noise over the
        treated share, the share assumed by ``treated_share``, widened by the CI's count term
        at an ATT small against its noise, :func:`att_count_widening`);
        the other ensembles' rows stay the ATE's. The non-private variance is the same as the
        ATE's under the module's assumption (a constant propensity p: ``sd^2 (1/p +
        1/(1-p))/n`` for both).
    noise_at : callable, optional
        The AIPW release's ``K -> (K, K', sigma1)`` (:data:`NoiseAt`): its candidates then
        include the K that ``n_folds="auto"`` keeps under the fold-size bias rule
        (:func:`auto_folds`). Either way, with ``model_kind="quadratic"`` an AIPW K is feasible
        only where the envelope (:func:`fold_bias_bound`) is within :data:`FOLD_BIAS_KEPT` of
        the sigma1 of that K's narrowest row.

    Returns
    -------
    pandas.DataFrame
        Columns: estimator, propensity_clip, n_folds (K = B K'), n_blocks (B), block_folds (K'),
        rows_per_fold (of the smallest fold), sigma2, ci_share, sigma1 (noise sd of the ATE),
        sigma2_sd (noise sd of sqrt(V)), estimand, halfwidth, nonprivate_halfwidth, ratio,
        predictions, seconds, feasible (the floor met, and the compute budget too unless K is
        at most about sqrt(n): the rule of :func:`auto_n_folds`), informative (ratio <= 10) and
        recommended
        (exactly one row: the narrowest feasible CI, the smaller K on ties; at the "auto" K, since
        the CI narrows with K; when no K is feasible, the narrowest at the least K, which
        ``n_folds="auto"`` then takes).
    """
    if not (isinstance(n, int) and n >= 4):
        raise ValueError(f"n must be an int >= 4, got {n!r}")
    if not (isinstance(d, int) and d >= 1):
        raise ValueError(f"d must be an int >= 1, got {d!r}")
    variance = nonprivate_variance(n, outcome_bounds, outcome_sd, treated_share)
    base = float(ndtri(1.0 - alpha / 2.0)) * math.sqrt(variance)
    rows = []
    for est in (list(estimators) if estimators is not None else [estimator]):
        floor = rows_per_fold_floor(est, d, model_kind, treated_share)
        least = min(math.isqrt(n), n // floor)  # auto_n_folds never goes below this
        if n_folds is not None:
            splits = sorted({block_split(k, block_folds) for k in set(n_folds)})
        else:   # the grid, and "auto"'s own (K, K'): block_split does not return it from K
            splits = sorted({block_split(k, block_folds) for k in candidate_folds(
                n, d, est, model_kind, compute_budget, block_folds, treated_share)}
                | {auto_folds(n, d, estimator=est, model_kind=model_kind,
                              compute_budget=compute_budget, block_folds=block_folds,
                              outcome_bounds=outcome_bounds, treated_share=treated_share,
                              noise_at=noise_at if est == "aipw" else None)})
        etas = list(propensity_clips) if propensity_clips is not None else [propensity_clip]
        noise = estimand_noise(est, estimand, zeta, treated_share, n)
        for clip in (etas if est != "g" else etas[:1]):
            for k, kb in splits:
                layout = layout_for(n, k, kb)
                eta = resolve_clip(clip, n, k, noise.zeta, layout, treated_share)
                for mode in _sigma2_modes(sigma2, layout):
                    for share in _shares(est, ci_share):
                        cal = calibrate(est, n, k, _pair(outcome_bounds), eta, noise.zeta,
                                        share, sensitivity, mode, layout, noise.estimand)
                        half = (noise.halfwidth(cal, variance, ci=ci, alpha=alpha, p1=p1)
                                if est != "g" else math.nan)  # G: no CI (params.G_NO_CI)
                        seconds = predicted_seconds(n, k, est, kb)
                        rows.append({
                            "estimator": est, "propensity_clip": eta, "n_folds": k,
                            "n_blocks": k // kb, "block_folds": kb,
                            "rows_per_fold": n // k if layout is None else layout.fold_rows,
                            "sigma2": mode, "ci_share": share,
                            "sigma1": cal.sigma_ate, "sigma2_sd": cal.sigma_var,
                            "estimand": noise.estimand, "halfwidth": half,
                            "nonprivate_halfwidth": base, "ratio": half / base,
                            "predictions": n * kb * NUISANCES[est], "seconds": seconds,
                            "feasible": n // k >= floor
                            and (seconds <= compute_budget or k <= least),
                        })
    table = pd.DataFrame(rows)
    if model_kind == "quadratic":
        table["feasible"] &= _fold_bias_kept(table, n, d, outcome_bounds, treated_share)
    table["informative"] = table["ratio"] <= UNINFORMATIVE_RATIO
    # no K keeps the floor: n_folds="auto" takes its least K (auto_folds), so the plan does too
    pool = (table[table["feasible"]] if table["feasible"].any()
            else table[table["n_folds"] == table["n_folds"].min()])
    best = pool.sort_values(["halfwidth", "n_folds"], kind="stable").index[0]
    table["recommended"] = table.index == best
    return table


def _fold_bias_kept(table: pd.DataFrame, n: int, d: int, outcome_bounds: Sequence[float],
                    treated_share: float) -> pd.Series:
    """Per row of a plan: not AIPW, or its K's fold-size bias envelope within
    :data:`FOLD_BIAS_KEPT` of the sigma1 of that K's narrowest row (the noise modes "auto"
    takes), the rule of :func:`fold_bias_folds`."""
    keys = ["propensity_clip", "n_folds", "block_folds"]
    aipw = table[table["estimator"] == "aipw"]
    kept = pd.Series(True, index=table.index)
    if len(aipw):
        narrowest = aipw.loc[aipw.groupby(keys, sort=False)["halfwidth"].idxmin(),
                             keys + ["sigma1"]]
        sigma = aipw[keys].merge(narrowest, on=keys, how="left")["sigma1"].to_numpy()
        envelope = np.array([fold_bias_bound(n // k, d, outcome_bounds, treated_share)
                             for k in aipw["n_folds"]])
        kept[aipw.index] = envelope <= FOLD_BIAS_KEPT * sigma
    return kept


def recommended(table: pd.DataFrame) -> pd.Series:
    """The recommended row of a :func:`plan` table."""
    return table[table["recommended"]].iloc[0]


def auto_n_folds(n: int, d: int, *, estimator: str = "aipw", model_kind: str = "parametric",
                 compute_budget: float = 60.0, treated_share: float = 0.5) -> int:
    """``n_folds="auto"``: the largest K whose folds keep the floor's rows
    (:func:`rows_per_fold_floor` at ``treated_share``) and whose predicted compute fits the
    budget, and at least ``min(sqrt(n), n // 2)`` when the floor allows it."""
    floor = rows_per_fold_floor(estimator, d, model_kind, treated_share)
    by_floor = n // floor
    by_budget = int((compute_budget - _SECONDS_PER_ROW * n)
                    / (_SECONDS_PER_FOLD + n * _per_pair(estimator)))
    k = min(by_floor, max(by_budget, min(math.isqrt(n), by_floor)))
    return int(np.clip(k, 2, max(2, n // 2)))


def auto_folds(n: int, d: int, *, estimator: str = "aipw", model_kind: str = "parametric",
               compute_budget: float = 60.0, block_folds: int | str | None = "auto",
               outcome_bounds: Sequence[float] | None = None, noise_at: NoiseAt | None = None,
               treated_share: float = 0.5) -> tuple[int, int]:
    """``(K, K')`` for ``n_folds="auto"``: with blocks (``block_folds`` "auto" or an
    int), the largest K whose folds keep the floor's rows and whose predicted compute, linear in
    n at K' <= 128 models per row (:func:`predicted_seconds`), fits the budget, split by
    :func:`block_split`; with ``None``, the full ensemble's :func:`auto_n_folds` (K' = K).
    Given ``noise_at`` (the AIPW ensemble with the default degree-2 models, whose fold-size
    bias envelope was measured), K is also kept where that envelope is within
    :data:`FOLD_BIAS_KEPT` of the noise sd (:func:`fold_bias_folds`).

    Parameters
    ----------
    n, d : int
        Rows and covariates (public).
    estimator, model_kind, compute_budget, block_folds
        As in :func:`plan`.
    outcome_bounds : (float, float), optional
        The public outcome bounds; needed with ``noise_at``.
    noise_at : callable, optional
        ``K -> (K, K', sigma1)`` of the release laid out as it will be (:data:`NoiseAt`).
    treated_share : float
        The public treated share (stated, registered or pre-released; 1/2 when none is): the
        floor and the envelope count a fold's rows in its smaller arm (:func:`arm_balance`).

    Returns
    -------
    (int, int)
        K and K', the folds per block.
    """
    if block_folds is None:
        k = auto_n_folds(n, d, estimator=estimator, model_kind=model_kind,
                         compute_budget=compute_budget, treated_share=treated_share)
    else:
        floor = rows_per_fold_floor(estimator, d, model_kind, treated_share)
        by_floor = n // floor
        widest = ((by_floor if by_floor <= FULL_ENSEMBLE_FOLDS else MAX_BLOCK_FOLDS)
                  if block_folds == "auto" else int(block_folds))
        by_budget = int((compute_budget - _SECONDS_PER_ROW * n
                         - n * min(widest, by_floor) * _per_pair(estimator)) / _SECONDS_PER_FOLD)
        k = int(np.clip(min(by_floor, max(by_budget, min(math.isqrt(n), by_floor))),
                        2, max(2, n // 2)))
    if noise_at is not None:
        if outcome_bounds is None:
            raise ValueError("auto_folds needs outcome_bounds with noise_at")
        return fold_bias_folds(n, d, outcome_bounds, k, noise_at, treated_share)
    return (k, k) if block_folds is None else block_split(k, block_folds)


def zeta_for_halfwidth(target: float, n: int, n_folds: int, *, outcome_bounds: Sequence[float],
                       estimator: str = "aipw", propensity_clip: float | str = "auto",
                       ci_share: float = 0.1, sigma2: str = "tight", ci: str = "conservative",
                       alpha: float = 0.05, p1: float = 0.01, sensitivity: str = "tight",
                       outcome_sd: float | None = None, treated_share: float = 0.5,
                       block_folds: int | None = None, estimand: str = "ate") -> float:
    """The smallest zeta whose expected half-width is at most ``target`` (by root finding).

    Parameters
    ----------
    target : float
        The wanted half-width of the private CI.
    n, n_folds : int
        Rows and folds K.
    outcome_bounds, estimator, propensity_clip, ci_share, sigma2, ci, alpha, p1, sensitivity
        As in :func:`plan` (here ``ci_share`` and ``sigma2`` are fixed values).
    outcome_sd, treated_share : float
        The stated public assumption on the outcome's spread.
    block_folds : int, optional
        K' of a block layout (None: the full ensemble).
    estimand : {"ate", "att"}
        ``"att"``: the ATT's expected half-width (:func:`estimand_noise`).

    Returns
    -------
    float
        The zeta; ``inf`` when even unlimited budget cannot reach ``target`` (the non-private
        width is larger).
    """
    variance = nonprivate_variance(n, outcome_bounds, outcome_sd, treated_share)
    layout = layout_for(n, n_folds, n_folds if block_folds is None else block_folds)

    def excess(zeta: float) -> float:
        noise = estimand_noise(estimator, estimand, zeta, treated_share, n)
        cal = calibrate(estimator, n, n_folds, _pair(outcome_bounds),
                        resolve_clip(propensity_clip, n, n_folds, noise.zeta, layout,
                                     treated_share), noise.zeta,
                        ci_share, sensitivity, sigma2, layout, noise.estimand)
        return noise.halfwidth(cal, variance, ci=ci, alpha=alpha, p1=p1) - target

    return _smallest_zeta(excess, 1e6)


def zeta_for_sums_halfwidth(target: float, estimator: str, n: int, d: int, *,
                            outcome_bounds: Sequence[float], alpha: float = 0.05,
                            outcome_sd: float | None = None, treated_share: float = 0.5,
                            design: str = "observational") -> float:
    """The smallest zeta whose expected half-width of a ``dim``/``lin`` release is at most
    ``target``: the root of :func:`dpcausal.ate.sums.expected_halfwidth`, the figure
    :func:`dpcausal.ate.choice.compare` (the plan's estimator table) shows, which falls as zeta
    grows (its noise sd is ``Delta / zeta`` on the lattice, spec small_n_estimators.md §2).

    Parameters
    ----------
    target : float
        The wanted half-width of the private CI.
    estimator : {"dim", "lin"}
        The estimator from noisy sums.
    n, d : int
        Rows and covariates (public; ``dim`` ignores d).
    outcome_bounds, alpha, outcome_sd, treated_share, design
        As in :func:`dpcausal.ate.sums.expected_halfwidth`.

    Returns
    -------
    float
        The zeta; ``inf`` when even unlimited budget cannot reach ``target``: the half-width
        without noise (zeta -> inf, the sampling part alone) is at least ``target``.
    """
    bounds = _pair(outcome_bounds)

    def excess(zeta: float) -> float:
        return sums.expected_halfwidth(estimator, n, d, zeta=zeta, outcome_bounds=bounds,
                                       alpha=alpha, outcome_sd=outcome_sd,
                                       treated_share=treated_share, design=design) - target

    if excess(math.inf) >= 0:
        return math.inf
    return _smallest_zeta(excess, math.inf)


def _smallest_zeta(excess: Callable[[float], float], largest: float) -> float:
    """The root of ``excess``, decreasing in zeta (expected half-width minus target): doubling
    from 1 to bracket it, then Brent's method; ``inf`` once the bracket passes ``largest``."""
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2.0
        if hi > largest:
            return math.inf
    return float(brentq(excess, 1e-9, hi, xtol=1e-10, rtol=1e-10))
