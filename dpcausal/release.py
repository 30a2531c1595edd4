"""The noisy release: spec dp_ate_ensemble.md §2.2 steps 4-5, §2.6 (what is published), §3 (CI).

``draw_release`` is the only function that touches the noise generator for the ATE. It draws its
two standard normals unconditionally (same shape whatever the budget split), once per call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpcausal._results import ResultMixin
from dpcausal.accounting import DEFAULT_DELTA, gdp_epsilon, gdp_to_zcdp
from dpcausal.ci import confidence_interval, private_variance
from dpcausal.sensitivity import NoiseCalibration


@dataclass(frozen=True)
class ATERelease(ResultMixin):
    """One differentially private ATE release (frozen; ``to_dict()``/``to_json()`` ready).

    ``ate``, ``ci`` and ``variance`` are the private outputs (``ci``/``variance`` are ``None`` for
    a point-estimate-only release). ``privacy`` and ``noise`` are public by construction.
    ``nonprivate`` holds the pre-noise estimate and variance only in evaluation mode.
    """

    ate: float
    ci: tuple[float, float] | None
    variance: float | None
    privacy: dict[str, Any]
    noise: dict[str, Any]
    n: int
    n_folds: int
    estimator: str
    alpha: float
    params: dict[str, Any] = field(default_factory=dict)
    evaluation: bool = False
    nonprivate: dict[str, float] | None = None

    def __post_init__(self) -> None:
        if self.evaluation != (self.nonprivate is not None):
            raise AssertionError("bug: nonprivate values must exist exactly in evaluation mode")
        if (self.ci is None) != (self.variance is None):
            raise AssertionError("bug: a CI is released together with its private variance")
        if self.ci is not None and not self.ci[0] <= self.ate <= self.ci[1]:
            raise AssertionError("bug: the CI must contain the private estimate")

    @property
    def se(self) -> float | None:
        """Private standard error sqrt(V_DP), or None without a CI."""
        return None if self.variance is None else math.sqrt(self.variance)

    def confint(self) -> tuple[float, float] | None:
        """The private (1 - alpha) confidence interval (DoubleML/EconML name)."""
        return self.ci

    def summary_rows(self) -> list[tuple[str, str]]:
        p, z = self.privacy, self.noise
        level = f"{100 * (1 - self.alpha):g}% CI"
        ci = ("not released (ci_share=0)" if self.ci is None
              else f"[{self.ci[0]:.6g}, {self.ci[1]:.6g}]")
        rows = [
            ("estimator", f"{self.estimator.upper()}  (n={self.n}, K={self.n_folds})"),
            ("ATE (private)", f"{self.ate:.6g}"),
            (level, ci),
            ("SE (private)", "-" if self.se is None else f"{self.se:.6g}"),
            ("privacy", f"{p['zeta']:.4g}-GDP = ({p['epsilon']:.4g}, {p['delta']:.1e})-DP"
                        f" = {p['rho']:.4g}-zCDP"),
            ("noise sd (ATE)", f"{z['sigma_ate']:.4g}  (sensitivity {z['sensitivity']:.4g},"
                               f" {z['sensitivity_mode']})"),
            ("mode", "EVALUATION (not private)" if self.evaluation else "release"),
        ]
        if self.evaluation:
            rows.append(("non-private ATE", f"{self.nonprivate['ate']:.6g}"))
        return rows


def draw_release(
    tau_hat: float,
    v_hat: float,
    calibration: NoiseCalibration,
    rng: np.random.Generator,
    *,
    alpha: float = 0.05,
    p1: float = 0.01,
    ci_mode: str = "paper",
    delta: float = DEFAULT_DELTA,
    params: dict[str, Any] | None = None,
    evaluation: bool = False,
) -> ATERelease:
    """tau_DP = tau_hat + N(0, sigma1^2); with zeta2 > 0 also V_DP and the eq. 12 CI: spec §2.2,
    §3."""
    g1, g2 = rng.standard_normal(2).tolist()  # Python floats: the outputs print as numbers
    cal = calibration
    ate = float(tau_hat) + cal.sigma_ate * g1
    ci = variance = None
    if cal.zeta2 > 0:
        noisy_sqrt_v = math.sqrt(v_hat) + cal.sigma_var * g2
        variance = private_variance(noisy_sqrt_v, cal.sigma_ate, cal.sigma_var, p1, ci_mode)
        ci = confidence_interval(ate, variance, alpha, p1)
    zeta = cal.zeta if cal.zeta2 > 0 else cal.zeta1
    privacy = {
        "zeta": zeta, "zeta1": cal.zeta1, "zeta2": cal.zeta2,
        "epsilon": gdp_epsilon(zeta, delta), "delta": delta, "rho": gdp_to_zcdp(zeta),
        "valid_claim": cal.sensitivity_mode != "released_code",
    }
    noise = {
        "sigma_ate": cal.sigma_ate, "sigma_var": cal.sigma_var,
        "sensitivity": cal.sensitivity, "sensitivity_mode": cal.sensitivity_mode,
        "sensitivity_var": cal.sensitivity_var, "sigma2_mode": cal.sigma2_mode,
        "ci_mode": ci_mode, "B_mu": cal.B_mu, "B_pi": cal.B_pi, "C": cal.C,
    }
    return ATERelease(
        ate=ate, ci=ci, variance=variance, privacy=privacy, noise=noise,
        n=cal.n, n_folds=cal.n_folds, estimator=cal.estimator, alpha=alpha,
        params=dict(params or {}), evaluation=evaluation,
        nonprivate={"ate": tau_hat, "variance": v_hat} if evaluation else None,
    )
