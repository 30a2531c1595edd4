"""Sensitivities and noise calibration as pure functions of public parameters.

Spec dp_ate_ensemble.md §1.2 (bounds, shift trick), §2.4 (Prop. 2, Lemmas 4-7, Theorem 1) and
§2.5 (sigma1, sigma2, budget split). Nothing here touches data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpcausal._results import ResultMixin
from dpcausal.ate.blocks import BlockLayout
from dpcausal.ate.sums import ESTIMANDS

PAPER_SENSITIVITY_MODES = ("theorem1", "lemma", "released_code")
SENSITIVITY_MODES = ("tight",) + PAPER_SENSITIVITY_MODES
SIGMA2_MODES = ("paper", "tight")


def score_key(estimator: str, estimand: str = "ate") -> str:
    """The key of a score's constants: the estimator's, or ``"aipw_att"`` for the AIPW
    ensemble's ATT score (SPECS.md "The ATT of the ensemble"); the ATT is the ensemble's for
    AIPW only."""
    if estimand == "ate":
        return estimator
    if estimand == "att" and estimator == "aipw":
        return "aipw_att"
    raise ValueError(f"estimand={estimand!r} with estimator={estimator!r}: the ensemble's ATT "
                     f"is AIPW's (estimand one of {ESTIMANDS}; 'att' with 'aipw' only)")


def outcome_scale(estimator: str, outcome_bounds: tuple[float, float]) -> tuple[float, float]:
    """(B_mu, centre): spec §1.2 shift trick.

    G and AIPW scores are shift-invariant, so outcomes are centred at the midpoint and
    B_mu = (hi - lo)/2; IPW is not, so centre = 0 and B_mu = max(|lo|, |hi|).
    """
    lo, hi = float(outcome_bounds[0]), float(outcome_bounds[1])
    if estimator == "ipw":
        return max(abs(lo), abs(hi)), 0.0
    return (hi - lo) / 2.0, (lo + hi) / 2.0


def theorem1_constant(estimator: str, B_mu: float, B_pi: float) -> float:
    """C of Theorem 1: 16 B_mu^2 (G), 4 B_mu^2 B_pi^2 (IPW), 16 B_mu^2 (1+B_pi)^2 (AIPW);
    spec §2.4. The ATT score (``"aipw_att"``, not in the paper): ``16 B_mu^2 (B_pi-1)^2``, the
    square of the larger of its two :func:`tight_constants` (SPECS.md "The ATT of the
    ensemble"), so that Theorem 1's form and the paper's sigma2 bound the tight ones."""
    return {
        "g": 16.0 * B_mu**2,
        "ipw": 4.0 * B_mu**2 * B_pi**2,
        "aipw": 16.0 * B_mu**2 * (1.0 + B_pi) ** 2,
        "aipw_att": 16.0 * B_mu**2 * (B_pi - 1.0) ** 2,
    }[estimator]


def lemma_constants(estimator: str, B_mu: float, B_pi: float) -> tuple[float, float]:
    """(Delta_=, kappa) of Lemmas 4, 5, 7 (mean/harmonic aggregators over all K-1 models);
    spec §2.4.

    Delta_= bounds the change of the replaced row's score; kappa/(K-1) bounds the change of every
    score outside the replaced row's fold. The ATT score has no lemma in the paper: its
    ``"aipw_att"`` constants are :func:`tight_constants`'.
    """
    if estimator == "aipw_att":
        return tight_constants(estimator, B_mu, B_pi)
    return {
        "g": (4.0 * B_mu, 4.0 * B_mu),
        "ipw": (2.0 * B_mu * B_pi, B_mu * B_pi),
        "aipw": (4.0 * B_mu * (1.0 + B_pi), 4.0 * B_mu * (1.0 + B_pi)),
    }[estimator]


def tight_constants(estimator: str, B_mu: float, B_pi: float) -> tuple[float, float]:
    r"""(Delta_=, kappa) from the clipped ranges of the fold models (spec §2.4, derived here; the
    ``"tight"`` mode of :func:`ate_sensitivity`): valid for the mean (mu) and harmonic (pi,
    1 - pi) aggregators, and at most the lemmas' constants.

    Notes
    -----
    After the shift trick every fold model's outcome prediction and every Y lie in
    ``[-B_mu, B_mu]`` (IPW: ``|Y| <= B_mu``), and every model's ``1/pi`` and ``1/(1-pi)`` lie in
    ``[B_pi/(B_pi-1), B_pi]``, an interval of length ``R = B_pi - B_pi/(B_pi-1)``. For a treated
    row, with ``a`` its aggregated ``1/pi``, the AIPW score is ``mu1 - mu0 + a (Y - mu1)``.
    Replacing one model of the K-1 it averages moves mu1, mu0 by ``d1, d0`` with
    ``|d_t| <= 2 B_mu/(K-1)`` and a by ``|da| <= R/(K-1)``, and the score by

    .. math:: d_1 (1 - a') - d_0 + da (Y - \mu_1),

    so ``kappa = 2 B_mu (B_pi - 1) + 2 B_mu + 2 B_mu R = 2 B_mu (B_pi + R)`` (control rows alike,
    with ``1/(1-pi)``). The score itself is ``mu1 (1 - a) - mu0 + a Y``, at most ``2 a B_mu <=
    2 B_pi B_mu`` in absolute value, so ``Delta_= = 4 B_mu B_pi``. IPW: ``a Y`` moves by at most
    ``R B_mu / (K-1)`` and ``|a Y| <= B_pi B_mu``. G is the lemmas' ``4 B_mu`` twice. At
    ``B_mu = 1, eta = 0.2``, AIPW's kappa is 17.5 against Lemma 7's 24; spec §2.4's exhaustive
    corner search attains 17.48 at K = 500.

    The ATT score (``"aipw_att"``, SPECS.md "The ATT of the ensemble"): ``A (Y - mu0) - (1 - A)
    r (Y - mu0)`` with ``r = 1/(1-pi) - 1`` the aggregated odds, in ``[1/(B_pi-1), B_pi-1]``
    (its range also has length ``R``). ``|Gamma| <= 2 B_mu (B_pi - 1)`` for ``B_pi >= 2``, so
    ``Delta_= = 4 B_mu (B_pi - 1)``; a treated row moves by ``|d0|``, a control row by
    ``|dr| |Y - mu0| + r' |d0|``, so ``kappa = 2 B_mu (R + B_pi - 1)``.
    """
    spread = B_pi - B_pi / (B_pi - 1.0)
    return {
        "g": (4.0 * B_mu, 4.0 * B_mu),
        "ipw": (2.0 * B_mu * B_pi, B_mu * spread),
        "aipw": (4.0 * B_mu * B_pi, 2.0 * B_mu * (B_pi + spread)),
        "aipw_att": (4.0 * B_mu * (B_pi - 1.0), 2.0 * B_mu * (spread + B_pi - 1.0)),
    }[estimator]


def score_constants(estimator: str, B_mu: float, B_pi: float, sensitivity: str
                    ) -> tuple[float, float]:
    """(Delta_=, kappa) of a sensitivity mode: :func:`tight_constants` for ``"tight"``, else the
    lemmas' (:func:`lemma_constants`), which the other modes' sigma2 has always used."""
    if sensitivity == "tight":
        return tight_constants(estimator, B_mu, B_pi)
    return lemma_constants(estimator, B_mu, B_pi)


def score_bound(estimator: str, B_mu: float, B_pi: float) -> float:
    """M = sup |Gamma_i|: 2 B_mu (G), B_mu B_pi (IPW), 2 B_mu (1 + B_pi) (AIPW); spec §1.2;
    2 B_mu (B_pi - 1) for the ATT score (SPECS.md "The ATT of the ensemble")."""
    return {"g": 2.0 * B_mu, "ipw": B_mu * B_pi, "aipw": 2.0 * B_mu * (1.0 + B_pi),
            "aipw_att": 2.0 * B_mu * (B_pi - 1.0)}[estimator]


def ate_sensitivity(
    estimator: str, n: int, n_folds: int, B_mu: float, B_pi: float,
    mode: str = "tight", binary_outcome: bool = False, layout: BlockLayout | None = None,
) -> float:
    r"""sup |tau_hat(D) - tau_hat(D')| over replace-one neighbours: spec §2.4, §2.5b.

    Parameters
    ----------
    estimator : {"g", "ipw", "aipw"}
    n, n_folds : int
        Rows and folds K (public).
    B_mu, B_pi : float
        Outcome bound after the shift trick (:func:`outcome_scale`) and 1/propensity_clip.
    mode : {"tight", "theorem1", "lemma", "released_code"}
        ``"tight"`` (default): ``Delta_=/n + kappa w`` with :func:`tight_constants`, about 0.73
        of Theorem 1 for AIPW at eta = 0.2. ``"theorem1"``: ``sqrt(C) (1/n + w)``, what the
        paper calibrates with. ``"lemma"``: ``Delta_=/n + kappa w`` with the lemmas' constants,
        valid and about half for IPW. ``"released_code"``: the
        authors' plotting constants (1/K, halved AIPW), NOT a valid bound, for reproducing the
        paper's figures only (spec §2.4, §8 item 11); full ensemble only.
    binary_outcome : bool
        Bounds (0, 1): changes the ``"released_code"`` AIPW constant only.
    layout : BlockLayout, optional
        Block ensemble (spec §2.5b); None is the full ensemble.

    Returns
    -------
    float
        The sensitivity Delta_tau; the ATE noise is ``sigma1 = Delta_tau / zeta1``.

    Notes
    -----
    Theorem 1 (spec §2.5), with ``w = 1/(K-1)`` for the full ensemble:

    .. math:: \Delta_\tau = \sqrt{C} \left(\frac{1}{n} + w\right), \qquad
              \sigma_1 = \frac{\sqrt{C}}{\zeta_1} \left(\frac{1}{n} + \frac{1}{K-1}\right),

    with ``C`` from :func:`theorem1_constant`. For blocks (``layout`` with B > 1),
    ``w = n_b,max / (n (K'-1))`` (:meth:`dpcausal.ate.blocks.BlockLayout.other_fold_weight`).
    """
    K = n_folds
    w = 1.0 / (K - 1) if layout is None else layout.other_fold_weight()
    if mode == "theorem1":
        return math.sqrt(theorem1_constant(estimator, B_mu, B_pi)) * (1.0 / n + w)
    if mode in ("lemma", "tight"):
        d_eq, kappa = score_constants(estimator, B_mu, B_pi, mode)
        return d_eq / n + kappa * w
    if mode == "released_code":
        if estimator == "aipw_att":
            raise ValueError("sensitivity='released_code' reproduces the paper's ATE figures; "
                             "the ATT (estimand='att') uses 'tight' (the default), 'lemma' or "
                             "'theorem1'")
        if layout is not None and layout.n_blocks > 1:
            raise ValueError("sensitivity='released_code' reproduces the paper's full ensemble; "
                             "use block_folds=None with it")
        d_eq = {"g": 4 * B_mu, "ipw": 2 * B_mu * B_pi, "aipw": 4 * B_mu * B_pi}[estimator]
        d_ne = {"g": 4 * B_mu, "ipw": B_mu * B_pi,
                "aipw": 2 * B_mu * B_pi if binary_outcome else (2 * B_pi + 2) * B_mu}[estimator]
        return d_eq / n + d_ne / K
    raise ValueError(f"sensitivity mode must be one of {SENSITIVITY_MODES}, got {mode!r}")


def sqrt_variance_sensitivity(
    estimator: str, n: int, n_folds: int, B_mu: float, B_pi: float, mode: str = "paper",
    layout: BlockLayout | None = None, sensitivity: str = "tight",
) -> float:
    r"""sup |sqrt(V_hat) - sqrt(V_hat')|: spec §2.5, §2.5b.

    Parameters
    ----------
    estimator, n, n_folds, B_mu, B_pi, layout
        As in :func:`ate_sensitivity`.
    sensitivity : str
        The ATE's sensitivity mode: ``"tight"`` bounds the scores' changes with
        :func:`tight_constants`, the others with the lemmas' (:func:`score_constants`).
    mode : {"paper", "tight"}
        ``"paper"``: Theorem 1's sigma2 times zeta2, full ensemble only (not shown valid for
        B > 1, spec §2.5b). ``"tight"``: the projection bound (spec §2.5); for blocks,
        ``sqrt(Delta_=^2 + n_b,max kappa^2/(K'-1)^2) / sqrt(n(n-1))`` (spec §2.5b).

    Returns
    -------
    float
        The sensitivity Delta_V; the variance noise is ``sigma2 = Delta_V / zeta2``.

    Notes
    -----
    With ``s = 1/n + 1/(K-1)`` (Theorem 1 and the derived tight bound, spec §2.5):

    .. math::

        \Delta_V^{paper} &= \sqrt{\frac{2C}{n-1}} \left(s + \sqrt{s}\right), \\
        \Delta_V^{tight} &= \frac{\sqrt{\Delta_=^2 + n \kappa^2 / (K-1)^2}}{\sqrt{n (n-1)}}.
    """
    K = n_folds
    if layout is not None and layout.n_blocks > 1:
        if mode == "paper":
            raise ValueError("sigma2='paper' is Theorem 1's bound for the full ensemble and is "
                             "not shown valid for blocks (spec §2.5b): use sigma2='tight' or "
                             "'auto' with block_folds, or block_folds=None")
        if mode == "tight":
            d_eq, kappa = score_constants(estimator, B_mu, B_pi, sensitivity)
            spread = layout.block_rows * kappa**2 / (layout.block_folds - 1) ** 2
            return math.sqrt(d_eq**2 + spread) / math.sqrt(n * (n - 1))
    if mode == "paper":
        s = 1.0 / n + 1.0 / (K - 1)
        C = theorem1_constant(estimator, B_mu, B_pi)
        return math.sqrt(2.0 * C / (n - 1)) * (s + math.sqrt(s))
    if mode == "tight":
        d_eq, kappa = score_constants(estimator, B_mu, B_pi, sensitivity)
        return math.sqrt(d_eq**2 + n * kappa**2 / (K - 1) ** 2) / math.sqrt(n * (n - 1))
    raise ValueError(f"sigma2 mode must be one of {SIGMA2_MODES}, got {mode!r}")


def split_budget(zeta: float, ci_share: float) -> tuple[float, float]:
    """(zeta1, zeta2) = (zeta sqrt(1-r), zeta sqrt(r)), r = ci_share: spec §2.5 decision."""
    return zeta * math.sqrt(1.0 - ci_share), zeta * math.sqrt(ci_share)


@dataclass(frozen=True)
class NoiseCalibration(ResultMixin):
    """Public noise calibration of one release (spec §2.5, §2.6): all data-free."""

    estimator: str
    n: int
    n_folds: int
    n_blocks: int
    block_folds: int
    block_rows: int
    B_mu: float
    B_pi: float
    centre: float
    C: float
    sensitivity_mode: str
    sensitivity: float
    sigma2_mode: str
    sensitivity_var: float
    zeta: float
    zeta1: float
    zeta2: float
    sigma_ate: float
    sigma_var: float
    estimand: str = "ate"

    def __post_init__(self) -> None:
        if not (self.sigma_ate > 0 and self.sensitivity > 0):
            raise AssertionError("bug: a release must have positive sensitivity and noise")


def calibrate(
    estimator: str,
    n: int,
    n_folds: int,
    outcome_bounds: tuple[float, float],
    propensity_clip: float,
    zeta: float,
    ci_share: float = 0.1,
    sensitivity: str = "tight",
    sigma2: str = "paper",
    layout: BlockLayout | None = None,
    estimand: str = "ate",
) -> NoiseCalibration:
    r"""Theorem 1 calibration: sigma1 = Delta_tau/zeta1, sigma2 = Delta_V/zeta2; spec §2.5, and
    §2.5b for a block ``layout``. Pure function of public parameters.

    Parameters
    ----------
    estimator : {"g", "ipw", "aipw"}
    n, n_folds : int
        Rows and folds K.
    outcome_bounds : (float, float)
        Public outcome bounds; B_mu and the centre follow by :func:`outcome_scale`.
    propensity_clip : float
        eta; B_pi = 1/eta.
    zeta : float
        Total GDP budget of the release, split by :func:`split_budget`.
    ci_share : float
        r: the share of zeta^2 spent on the variance (0 for a point estimate only).
    sensitivity, sigma2 : str
        Modes of :func:`ate_sensitivity` and :func:`sqrt_variance_sensitivity`.
    layout : BlockLayout, optional
        Block ensemble (spec §2.5b); None (or B = 1) is the full ensemble.
    estimand : {"ate", "att"}
        ``"att"``: the AIPW ensemble's ATT numerator ``T = sum Gamma_i / n`` with the ATT
        score's constants (:func:`score_key`; SPECS.md "The ATT of the ensemble"); ``zeta``
        is then T's share of the release (the treated count takes the rest).

    Returns
    -------
    NoiseCalibration
        Every public figure of the noise: sensitivities, zeta1, zeta2, sigma1, sigma2.

    Notes
    -----
    Releasing tau_DP is zeta1-GDP and the CI of eq. 12 is ``sqrt(zeta1^2 + zeta2^2)``-GDP
    (Theorem 1, spec §2.5):

    .. math:: \zeta_1 = \zeta \sqrt{1 - r}, \quad \zeta_2 = \zeta \sqrt{r}, \quad
              \sigma_1 = \Delta_\tau / \zeta_1, \quad \sigma_2 = \Delta_V / \zeta_2.
    """
    key = score_key(estimator, estimand)
    B_mu, centre = outcome_scale(estimator, outcome_bounds)
    B_pi = 1.0 / propensity_clip
    binary = tuple(float(b) for b in outcome_bounds) == (0.0, 1.0)
    if layout is not None and layout.n_blocks == 1:
        layout = None
    d_tau = ate_sensitivity(key, n, n_folds, B_mu, B_pi, sensitivity, binary, layout)
    d_var = sqrt_variance_sensitivity(key, n, n_folds, B_mu, B_pi, sigma2, layout,
                                      sensitivity)
    zeta1, zeta2 = split_budget(zeta, ci_share)
    return NoiseCalibration(
        estimator=estimator, n=n, n_folds=n_folds,
        n_blocks=1 if layout is None else layout.n_blocks,
        block_folds=n_folds if layout is None else layout.block_folds,
        block_rows=n if layout is None else layout.block_rows, B_mu=B_mu, B_pi=B_pi, centre=centre,
        C=theorem1_constant(key, B_mu, B_pi),
        sensitivity_mode=sensitivity, sensitivity=d_tau,
        sigma2_mode=sigma2, sensitivity_var=d_var,
        zeta=zeta, zeta1=zeta1, zeta2=zeta2,
        sigma_ate=d_tau / zeta1,
        sigma_var=d_var / zeta2 if zeta2 > 0 else 0.0, estimand=estimand,
    )
