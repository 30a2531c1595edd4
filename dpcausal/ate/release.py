"""The noisy release: spec dp_ate_ensemble.md §2.2 steps 4-5, §2.6 (what is published), §3 (CI).

``draw_release`` is the only function that adds noise to the ATE. It draws its two discrete
Gaussians unconditionally (same shape whatever the budget split), once per call, through the
exact lattice sampler :func:`dpcausal.noise.gaussian_mechanism`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np
from scipy.special import ndtri

from dpcausal.accounting import DEFAULT_DELTA, gdp_epsilon, gdp_to_zcdp
from dpcausal.ate.ci import confidence_interval, private_variance
from dpcausal.ate.sensitivity import NoiseCalibration
from dpcausal.contract import Privacy, Release
from dpcausal.noise import gaussian_mechanism, gaussian_vector_mechanism, secure_rng


@dataclass(frozen=True, kw_only=True)
class ATERelease(Release):
    """One differentially private ATE release (spec §2.6): a :class:`dpcausal.Release`.

    ``ate`` and ``ci`` are the private outputs, ``se = sqrt(variance)`` the total private standard
    error sqrt(V_DP) (sampling and noise; ``ci``/``variance``/``se`` are ``None`` for a
    point-estimate-only release), ``level = 1 - alpha``. ``privacy``, ``noise`` and ``params``
    are public by construction. ``nonprivate`` holds the pre-noise estimate and variance only in
    evaluation mode. ``clamped_to`` is the feasible range ``[-(hi - lo), hi - lo]`` of the outcome
    bounds when the noisy ATE or a CI end fell outside it and was clamped into it
    (:func:`clamp_to_feasible`), else ``None``.
    """

    kind: ClassVar[str] = "ate"

    variance: float | None
    noise: dict[str, Any]
    n_folds: int | None     # None for the estimators from noisy sums ("dim", "lin")
    estimator: str
    params: dict[str, Any] = field(default_factory=dict)
    nonprivate: dict[str, float] | None = None
    clamped_to: tuple[float, float] | None = None

    @classmethod
    def _decoded(cls, values: dict[str, Any], d: Mapping[str, Any]) -> dict[str, Any]:
        if values.get("clamped_to") is not None:  # JSON has no tuples
            values["clamped_to"] = tuple(values["clamped_to"])
        return super()._decoded(values, d)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.evaluation != (self.nonprivate is not None):
            raise AssertionError("bug: nonprivate values must exist exactly in evaluation mode")
        if not (self.ci is None) == (self.variance is None) == (self.se is None):
            raise AssertionError("bug: a CI is released together with its private variance")
        if (self.se is not None and self.variance is not None
                and not math.isclose(self.se**2, self.variance, rel_tol=1e-9)):
            raise AssertionError("bug: se must be sqrt(variance)")

    @property
    def alpha(self) -> float:
        """1 - level: the CI's miscoverage (eq. 12)."""
        return 1.0 - self.level

    @property
    def estimator_name(self) -> str:
        """The estimator that made the release: ``aipw``, ``ipw``, ``g``, ``dim`` or ``lin``."""
        return self.estimator

    @property
    def estimand(self) -> str:
        """The effect released: ``"ate"``, or ``"att"`` (the average effect on the treated;
        SPECS.md "The ATT of the ensemble"), as its params state (releases made before the
        estimand existed are ATEs)."""
        return str(self.params.get("estimand") or "ate")

    def estimate_rows(self) -> list[dict[str, Any]]:
        """The released estimate, named by its estimand ("ATE" or "ATT")."""
        return [dict(row, name=self.estimand.upper()) for row in super().estimate_rows()]

    def noise_share(self) -> float | None:
        """sigma_ate^2 / V_DP: the share of the released variance that is privacy noise."""
        if self.variance is None:
            return None
        return float(self.noise["sigma_ate"] ** 2 / self.variance)

    def ledger_detail(self) -> dict[str, Any]:
        """With a pre-release of the planning facts (:mod:`dpcausal.ate.prerelease`): the
        estimator ``auto`` chose after the charge and the learned facts, for the ledger."""
        if not self.params.get("prerelease"):
            return {}
        keys = ("learned_treated_share", "learned_outcome_sd_treated",
                "learned_outcome_sd_control", "prerelease_sigma")
        return {"chosen": {"estimator": self.estimator, **{k: self.params[k] for k in keys}}}

    def extra_rows(self) -> list[tuple[str, str]]:
        z = self.noise
        blocks = self.params.get("n_blocks") or 1
        folds = f"K={self.n_folds}" + (f" = {blocks} blocks of {self.params['block_folds']} folds"
                                       if blocks > 1 else "")
        ratio = self.estimand == "att" and "sigma_count" in z   # the ensemble's ATT
        rows = [
            ("estimator", f"{self.estimator.upper()}  ({folds})" if self.n_folds
             else _SUMS_NAMES.get(self.estimator, self.estimator)),
            ("privacy (GDP)", f"{self.privacy.zeta:.4g}-GDP = {self.privacy.rho:.4g}-zCDP"),
            ("noise sd (ATT score mean)" if ratio else f"noise sd ({self.estimand.upper()})",
             f"{z['sigma_ate']:.4g}  (sensitivity {z['sensitivity']:.4g}, "
             f"{z['sensitivity_mode']})"),
        ]
        if self.estimand == "att":
            rows.insert(0, ("estimand", _ATT_RATIO.format(**z) if ratio
                            else "ATT (average effect on the treated)"))
        if self.params.get("design") is not None:
            rows.append(("design", str(self.params["design"])))
        if self.params.get("assumption"):
            rows.append(("assumption", str(self.params["assumption"])))
        if self.params.get("prerelease"):
            rows.append(("pre-release", _prerelease_text(self.params)))
        if self.ci is None:
            rows.append(("CI", "not released (ci_share=0)"))
        policy = self.params.get("missing")
        if policy == "drop":
            rows.append(("missing values", "complete cases: their count noisy and charged, n "
                                           "all rows"))
        elif policy == "drop_public_count":
            rows.append(("missing values", "dropped: n is the exact complete-case count, "
                                           "declared public (relation fact complete_cases)"))
        elif policy == "impute":
            imputed = _SUMS_IMPUTED.get(self.estimator, "imputed: covariates {fill:g} + "
                                        "indicator; no treatment/outcome: score 0")
            rows.append(("missing values", imputed.format(fill=self.params["missing_fill"])))
        if self.clamped_to is not None:
            lo, hi = self.clamped_to
            rows.append(("clamped", f"to the feasible range [{lo:.4g}, {hi:.4g}] of the outcome "
                                    "bounds (post-processing, no privacy cost)"))
        if self.evaluation and self.nonprivate is not None:
            rows.append((f"non-private {self.estimand.upper()}", f"{self.nonprivate['ate']:.6g}"))
        return rows


def _prerelease_text(p: Mapping[str, Any]) -> str:
    """The pre-release of the planning facts in words (:mod:`dpcausal.ate.prerelease`): its
    share of zeta^2 and noise, the learned facts, and those the choice used."""
    learned = dict(item.split(":") for item in str(p["facts_source"]).split(","))
    used = ", ".join(f"{f.replace('_', ' ')} {p[f]:.4g} ({learned[f]})"
                     for f in ("treated_share", "outcome_sd"))
    return (f"{p['prerelease']:g} of zeta^2 ({p['prerelease_zeta']:.4g}-GDP; noise sd "
            f"{p['prerelease_sigma']:.4g} per arm count, scaled sum and sum of squares): "
            f"treated share {p['learned_treated_share']:.4g}, outcome sd "
            f"{p['learned_outcome_sd_treated']:.4g} (treated) / "
            f"{p['learned_outcome_sd_control']:.4g} (control); {p['estimator']} chosen on "
            f"{used}; released on {p['zeta_release']:.4g}-GDP")


# What "impute" does in the estimators from noisy sums (SPECS.md "Estimators from noisy sums",
# missing values): the fill without an indicator column; a row without a usable treatment or
# outcome is left out of the sums. The ensemble's line (fill + indicator, score 0) is the default.
_SUMS_IMPUTED = {"dim": "covariates unused; no treatment/outcome: the row adds nothing",
                 "lin": "imputed: covariates {fill:g}, no indicator; no treatment/outcome: the "
                        "row adds nothing"}

# The ensemble's ATT (SPECS.md "The ATT of the ensemble"): how it was released.
_ATT_RATIO = ("ATT (average effect on the treated): mean ATT score over the noisy treated "
              "share (count noise sd {sigma_count:.3g})")

_SUMS_NAMES = {"dim": "DIM (difference in means, from noisy arm sums)",
               "lin": "LIN (Lin's regression adjustment, from noisy sufficient statistics)"}


def draw_sums_release(statistics: np.ndarray, calibration: Any, rng: np.random.Generator, *,
                      alpha: float = 0.05, delta: float = DEFAULT_DELTA,
                      outcome_bounds: tuple[float, float],
                      params: dict[str, Any] | None = None, evaluation: bool = False,
                      estimand: str = "ate") -> ATERelease:
    """A ``dim``/``lin`` release (spec small_n_estimators.md §2-3; :mod:`dpcausal.ate.sums`):
    the weighted statistic vector plus exact discrete Gaussian noise, drawn once
    (:func:`dpcausal.noise.gaussian_vector_mechanism`: L2 sensitivity over the scale is
    ``zeta``, so the release is ``zeta``-GDP = ``zeta^2/2``-zCDP), then post-processing: the
    estimate and its CI (:func:`dpcausal.ate.sums.estimate_from`: the hull of a parametric
    bootstrap interval over the known noise and the delta method's), both scaled back by the
    outcome's half-range h and clamped to the feasible range (:func:`clamp_to_feasible`);
    ``se`` is the CI's normal-equivalent ``width / (2 z_{1-alpha/2})``. The bootstrap's draws
    use no data and no noise value: fresh OS entropy in a release, the noise generator's own
    seed sequence in evaluation mode. ``statistics``: the UNWEIGHTED pre-noise vector
    (:func:`dpcausal.ate.sums.statistics`). ``estimand`` ("ate" or "att") chooses the
    functional only: the vector, its sensitivity and its noise are the same for both."""
    from dpcausal.ate import sums

    cal = calibration
    w = sums.weights(cal.d, cal.q_weight)
    noisy = gaussian_vector_mechanism(np.asarray(statistics, dtype=float) * w,
                                      cal.sensitivity / cal.zeta, cal.sensitivity, rng)
    h = (outcome_bounds[1] - outcome_bounds[0]) / 2.0
    est = sums.estimate_from(noisy, cal, alpha=alpha,
                             rng=rng.spawn(1)[0] if evaluation else secure_rng(),
                             estimand=estimand)
    ate = h * est.tau
    ate, ci, clamped_to = clamp_to_feasible(ate, (h * est.ci[0], h * est.ci[1]), outcome_bounds)
    se = (est.ci[1] - est.ci[0]) * h / (2.0 * float(ndtri(1.0 - alpha / 2.0)))
    variance = se * se
    privacy = Privacy(
        epsilon=gdp_epsilon(cal.zeta, delta), delta=delta, unit="row", mechanism="gaussian",
        zeta=cal.zeta, rho=gdp_to_zcdp(cal.zeta),
        detail={"zeta1": cal.zeta, "zeta2": 0.0, "sampler": "discrete_gaussian",
                "valid_claim": True})
    noise = {"sigma_ate": h * math.sqrt(est.noise_var), "sigma_stat": cal.sigma,
             "sensitivity": cal.sensitivity, "sensitivity_mode": "replace_one_l2_sums",
             "coordinates": int(w.size), "ci_mode": "parametric_bootstrap_hull_delta",
             "bootstrap_replicates": sums.BOOTSTRAP_REPLICATES}
    nonprivate = None
    if evaluation:
        exact, one, zero, xbar = sums.point(np.asarray(statistics, dtype=float), cal.d,
                                            cal.ridge, cal.eigen_floor, cal.floor,
                                            estimand=estimand)
        nonprivate = {"ate": float(h * float(exact)), "variance": float(
            h * h * sums.sampling_variance(one, zero, xbar, estimand))}
    return ATERelease(
        ate=ate, ci=ci, se=se, level=1.0 - alpha, privacy=privacy, n=cal.n,
        evaluation=evaluation, clamped_to=clamped_to, variance=variance, noise=noise,
        n_folds=None, estimator=cal.estimator, params=dict(params or {}),
        nonprivate=nonprivate)


def draw_release(
    tau_hat: float,
    v_hat: float,
    calibration: NoiseCalibration,
    rng: np.random.Generator,
    *,
    alpha: float = 0.05,
    p1: float = 0.01,
    ci_mode: str = "conservative",
    delta: float = DEFAULT_DELTA,
    params: dict[str, Any] | None = None,
    evaluation: bool = False,
    diagnostics: dict[str, float] | None = None,
    outcome_bounds: tuple[float, float] | None = None,
) -> ATERelease:
    """tau_DP = tau_hat + N_Z(0, sigma1^2); with zeta2 > 0 also V_DP and the eq. 12 CI: spec §2.2,
    §3.

    Both draws are exact discrete Gaussians on power-of-two lattices
    (:func:`dpcausal.noise.gaussian_mechanism`), their scales inflated by
    :func:`dpcausal.noise.gaussian_sigma_for` so that the lattice sensitivity over the scale stays
    ``Delta_j / sigma_j = zeta_j``. Each draw is then exactly ``zeta_j^2/2``-zCDP (Canonne, Kamath,
    Steinke 2020, Thm 4), and its exact (eps, delta) curve (dp_accounting's discrete Gaussian
    privacy loss) lies on or below the ``zeta_j``-GDP curve, within a relative 1e-5 of it
    (``tests/library/ate/test_release_noise.py``: lattice ``sigma/gamma >= 2^20``). The release
    is charged as ``zeta = sqrt(zeta1^2 + zeta2^2)``-GDP (= ``zeta^2/2``-zCDP), which the ledger
    composes with other Gaussian releases by GDP composition (spec §2.6). ``rng`` is
    :func:`dpcausal.noise.secure_rng` in a release; a seeded generator only in evaluation.
    ``diagnostics`` (evaluation only) joins ``nonprivate``. With ``outcome_bounds`` the released
    ATE and CI are clamped to their feasible range (:func:`clamp_to_feasible`).
    """
    cal = calibration
    if not (math.isfinite(tau_hat) and math.isfinite(v_hat) and v_hat >= 0):
        raise AssertionError("bug: tau_hat and V_hat must be finite before the noise is drawn")
    ate = gaussian_mechanism(float(tau_hat), cal.sigma_ate, cal.sensitivity, rng)
    sqrt_v = math.sqrt(v_hat)
    ci = variance = se = None
    if cal.zeta2 > 0:
        noisy_sqrt_v = gaussian_mechanism(sqrt_v, cal.sigma_var, cal.sensitivity_var, rng)
        variance = private_variance(noisy_sqrt_v, cal.sigma_ate, cal.sigma_var, p1, ci_mode)
        se = math.sqrt(variance)
        ci = confidence_interval(ate, variance, alpha, p1)
    else:   # same shape whatever the split: the second draw is made and discarded
        gaussian_mechanism(sqrt_v, cal.sigma_ate, cal.sensitivity, rng)
    zeta = cal.zeta if cal.zeta2 > 0 else cal.zeta1
    privacy = Privacy(
        epsilon=gdp_epsilon(zeta, delta), delta=delta, unit="row", mechanism="gaussian",
        zeta=zeta, rho=gdp_to_zcdp(zeta),
        detail={"zeta1": cal.zeta1, "zeta2": cal.zeta2, "sampler": "discrete_gaussian",
                "valid_claim": cal.sensitivity_mode != "released_code"},
    )
    noise = {
        "sigma_ate": cal.sigma_ate, "sigma_var": cal.sigma_var,
        "sensitivity": cal.sensitivity, "sensitivity_mode": cal.sensitivity_mode,
        "sensitivity_var": cal.sensitivity_var, "sigma2_mode": cal.sigma2_mode,
        "ci_mode": ci_mode, "B_mu": cal.B_mu, "B_pi": cal.B_pi, "C": cal.C,
    }
    nonprivate = None
    if evaluation:
        nonprivate = {"ate": float(tau_hat), "variance": float(v_hat), **(diagnostics or {})}
    clamped_to = None
    if outcome_bounds is not None:
        ate, ci, clamped_to = clamp_to_feasible(ate, ci, outcome_bounds)
    return ATERelease(
        ate=ate, ci=ci, se=se, level=1.0 - alpha, privacy=privacy, n=cal.n, evaluation=evaluation,
        clamped_to=clamped_to,
        variance=variance, noise=noise, n_folds=cal.n_folds, estimator=cal.estimator,
        params=dict(params or {}), nonprivate=nonprivate,
    )


def clamp_to_feasible(ate: float, ci: tuple[float, float] | None,
                      outcome_bounds: tuple[float, float]
                      ) -> tuple[float, tuple[float, float] | None, tuple[float, float] | None]:
    """The noisy ATE and CI clamped to ``[-(hi - lo), hi - lo]``, the range every ATE of an
    outcome in ``[lo, hi]`` lies in; returns ``(ate, ci, range or None if nothing moved)``.

    Post-processing of released values with a public range, so it costs no privacy (spec §2.6);
    clamping the estimate and both CI ends by the same monotone map keeps the estimate inside
    its CI. A CI clamped this way still covers every feasible true ATE it covered before.
    """
    lo, hi = float(outcome_bounds[0]), float(outcome_bounds[1])
    width = hi - lo
    new_ate = min(max(ate, -width), width)
    new_ci = None if ci is None else (min(max(ci[0], -width), width),
                                      min(max(ci[1], -width), width))
    moved = new_ate != ate or new_ci != ci
    return new_ate, new_ci, ((-width, width) if moved else None)
