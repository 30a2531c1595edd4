"""Confidence intervals and tests for the federated ATE: spec federated_secagg.md §3.

Pure post-processing of released quantities: nothing here costs privacy.
"""

from __future__ import annotations

import math
from typing import Sequence

from scipy.stats import norm

ESTIMANDS = ("SATE", "PATE")
ASYMPTOTIC_FORMS = ("quadrature", "sum_sd")
NONASYMPTOTIC_KINDS = ("paper", "corrected", "hoeffding")


def check_alpha(alpha: float, name: str = "alpha") -> float:
    """Refuse a miscoverage outside (0, 1)."""
    if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 1.0):
        raise ValueError(f"{name} must be in (0, 1) (0.1 for a 90% CI), got {alpha!r}")
    return float(alpha)


def sampling_variance(s2_treated: float, s2_control: float, n_treated: int, n_control: int,
                      estimand: str) -> float:
    """sigma_hat^2 of the difference in means: Algorithm 1 (corrected), spec §3.1.

    SATE: (n_c n_t / n)(s_t/n_t + s_c/n_c)^2 (conservative Neyman bound);
    PATE: s_t^2/n_t + s_c^2/n_c.
    """
    if estimand == "PATE":
        return s2_treated / n_treated + s2_control / n_control
    if estimand == "SATE":
        n = n_treated + n_control
        sd = math.sqrt(s2_treated) / n_treated + math.sqrt(s2_control) / n_control
        return n_control * n_treated / n * sd * sd
    raise ValueError(f"estimand must be one of {ESTIMANDS}, got {estimand!r}")


def asymptotic_halfwidth(sampling_var: float, variance_dp: float, alpha: float,
                         ci_form: str = "quadrature") -> float:
    """Half-width of the Theorem 3.5 CI: spec §3.1-3.2 (erratum 3: sigma_pr is n-scaled).

    ``quadrature``: z sqrt(sigma_hat^2 + V_DP) (the experiments); ``sum_sd``:
    z (sigma_hat + sqrt(V_DP)) (literal Algorithm 1, conservative).
    """
    z = norm.ppf(1.0 - check_alpha(alpha) / 2.0)
    if ci_form == "quadrature":
        return float(z * math.sqrt(sampling_var + variance_dp))
    if ci_form == "sum_sd":
        return float(z * (math.sqrt(sampling_var) + math.sqrt(variance_dp)))
    raise ValueError(f"ci_form must be one of {ASYMPTOTIC_FORMS + NONASYMPTOTIC_KINDS}, "
                     f"got {ci_form!r}")


def nonasymptotic_halfwidth(kind: str, estimand: str, R: float, n_treated: int, n_control: int,
                            m1: int, theta1: Sequence[float], s2_treated: float,
                            s2_control: float, beta: float, m2: int | None = None,
                            theta2: Sequence[float] | None = None) -> float:
    """Half-width of the finite-sample CI (coverage >= 1 - beta): Thm 4.3/4.5, spec §3.4.

    ``theta1``/``theta2`` are per group (control, treated). ``theta2`` None means the variances are
    exact (no second-moment noise term).

    - ``paper``: the printed gamma with log(2.01/beta) (erratum 10), equal groups only.
    - ``corrected``: same structure with the §3.4 defects fixed: n-2 in the Bernstein term, the
      DP-mean Hoeffding term sqrt(2R^2 L/(n m1 theta1^2)), the second-moment term
      sqrt(R^4 L/(2 m2 n theta2^2)), and the mu^2 error entering as e(2R + e). [D] decision.
    - ``hoeffding``: the fully rigorous [D] bound (any n_c, n_t; no second moment needed).
    """
    beta = check_alpha(beta, "beta")
    n_t, n_c = n_treated, n_control
    n = n_t + n_c
    if kind == "hoeffding":
        dp = math.sqrt(sum(R * R / (2 * n_g * m1 * th * th) for n_g, th in
                           zip((n_c, n_t), theta1, strict=True)) * math.log(4 / beta))
        if estimand == "PATE":
            return math.sqrt(2 * R * R * (1 / n_t + 1 / n_c) * math.log(4 / beta)) + dp
        if estimand == "SATE":
            return sum(math.sqrt(2 * R * R * math.log(8 / beta) / g) for g in (n_t, n_c)) + dp
        raise ValueError(f"estimand must be one of {ESTIMANDS}, got {estimand!r}")
    if kind not in ("paper", "corrected"):
        raise ValueError(f"kind must be one of {NONASYMPTOTIC_KINDS}, got {kind!r}")
    if (m2 is None) != (theta2 is None):
        raise ValueError(f"m2 and theta2 are given together or not at all, got m2={m2!r}, "
                         f"theta2={theta2!r}")
    if n_t != n_c or len(set(theta1)) != 1 or (theta2 is not None and len(set(theta2)) != 1):
        raise ValueError(f"ci_form={kind!r} assumes n_c = n_t and one theta per moment (spec "
                         f"§3.4), got n_c={n_c}, n_t={n_t}; use 'hoeffding' instead")
    th1 = theta1[0]
    s2_sum = s2_treated + s2_control
    sigma2 = sampling_variance(s2_treated, s2_control, n_t, n_c, estimand)
    l1, lc = math.log(2.01 / beta), math.log(1200 / beta)
    if kind == "paper":
        A = 0.0 if theta2 is None or m2 is None else lc * R**4 / (4 * m2 * n * theta2[0] ** 2)
        B = lc * R * R / (2 * m1 * n * th1 * th1)
        first = A**0.25 + B**0.25
        second = (math.sqrt(A) + math.sqrt(B)) / math.sqrt(s2_sum) if s2_sum > 0 else math.inf
        gamma = (56 * R * lc / (3 * (n - 1)) + math.sqrt(B)
                 + math.sqrt(4 * l1 / n) * min(first, second))
        return math.sqrt(2 * sigma2 * l1) + gamma
    e_mu = math.sqrt(2 * R * R * lc / (n * m1 * th1 * th1))
    e_2 = (0.0 if theta2 is None or m2 is None
           else math.sqrt(R**4 * lc / (2 * m2 * n * theta2[0] ** 2)))
    e_v = e_2 + e_mu * (2 * R + e_mu)
    sd_err = min(math.sqrt(e_v), e_v / math.sqrt(s2_sum) if s2_sum > 0 else math.inf)
    gamma = 56 * R * lc / (3 * (n - 2)) + e_mu + math.sqrt(4 * l1 / n) * sd_err
    return math.sqrt(2 * sigma2 * l1) + gamma


def z_test(ate: float, sampling_var: float, variance_dp: float) -> tuple[float, float]:
    """One-sided test of H1: Delta > 0, z = ate / sqrt(sigma^2 + V_DP), p = 1 - Phi(z): §3.5."""
    z = ate / math.sqrt(sampling_var + variance_dp)
    return float(z), float(norm.sf(z))
