"""Privacy calibration of Cluster-DP and Uniform-Prior-DP: epsilon <-> lambda
(spec cluster_dp.md §2.8).

Two accountings are kept side by side (spec §6 E1, E7):

* ``"paper"``: eps1 = min(1/sigma, 2/gamma), Theorem 3.1 as printed; for reproducing the figures
  only.
* ``"strict"``: eps1 = 2/sigma. Under substitution one label moves 1/n_{a,c} of mass between two
  bins, so the histogram's L1 sensitivity is 2/n_{a,c}, and the published q_tilde is never covered
  by the 2/gamma branch (which bounds only the resampling given q_tilde). sigma = 0 is refused.

In both, sigma = inf means the uniform prior (no data access, eps1 = 0; spec §2.3, A2).
"""

from __future__ import annotations

import math

ACCOUNTINGS = ("paper", "strict")
MAX_EXPONENT = 700.0  # e^700 ~ 1e304: beyond it lambda underflows and exp() overflows


def _expm1(exponent: float, eps: float) -> float:
    """e^x - 1 for the inverse calibrations, refusing exponents whose lambda would underflow.

    Such an epsilon means lambda ~ 0: the release would publish every label as it is, so it is
    refused with a ValueError rather than a bare OverflowError, naming the argument.
    """
    if exponent > MAX_EXPONENT:
        raise ValueError(
            f"epsilon={eps!r} is too large: lambda would underflow to 0 and the release would "
            f"publish the labels as they are; use an epsilon whose resampling part is <= "
            f"{MAX_EXPONENT:g}"
        )
    return math.expm1(exponent)


def _check_mode(mode: str) -> None:
    if mode not in ACCOUNTINGS:
        raise ValueError(f"mode must be one of {ACCOUNTINGS}, got {mode!r}")


def _check_unit(name: str, value: float, *, upper_open: bool = False) -> None:
    if (
        not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or value > 1
        or (upper_open and value == 1)
    ):
        bound = "[0, 1)" if upper_open else "[0, 1]"
        raise ValueError(f"{name} must be a number in {bound}, got {value!r}")


def _check_sigma(sigma: float) -> None:
    if not isinstance(sigma, (int, float)) or math.isnan(sigma) or sigma < 0:
        raise ValueError(f"sigma must be >= 0 (inf allowed: the uniform prior), got {sigma!r}")


def eps1(sigma: float, gamma: float, mode: str = "strict") -> float:
    """Epsilon of releasing q_tilde (step M1): Theorem 3.1 first term, spec §2.8 and §6 E1/E7.

    ``paper``: min(1/sigma, 2/gamma); ``strict``: 2/sigma (inf when sigma = 0). 1/0 = inf,
    1/inf = 0.
    """
    _check_mode(mode)
    _check_sigma(sigma)
    if math.isinf(sigma):
        return 0.0
    strict = math.inf if sigma == 0 else 2.0 / sigma
    if mode == "strict":
        return strict
    inv_sigma = math.inf if sigma == 0 else 1.0 / sigma
    inv_gamma = math.inf if gamma == 0 else 2.0 / gamma
    return min(inv_sigma, inv_gamma)


def _resample_eps(lam: float, p_min: float, delta: float) -> float:
    """log(1 + (1 - lam - delta)/(lam * p_min)): Theorem 3.1 / A.5 eps_t, spec §2.8."""
    _check_unit("lam", lam, upper_open=True)
    _check_unit("delta", delta)
    slack = 1.0 - lam - delta
    if slack <= 0:
        raise ValueError(
            f"delta={delta!r} >= 1 - lam={1 - lam!r}: the guarantee degenerates "
            "(epsilon -> 0 with a "
            "delta that already allows publishing a label); use delta < 1 - lam"
        )
    if lam == 0 or p_min == 0:
        return math.inf
    return math.log1p(slack / (lam * p_min))


def eps_total(
    lam: float, gamma: float, sigma: float, delta: float = 0.0, mode: str = "strict"
) -> float:
    """Epsilon of Cluster-DP at resampling probability lam: Theorem 3.1, spec §2.8.

    .. math:: \\varepsilon = \\varepsilon_1(\\sigma,\\gamma)
              + \\log(1 + (1-\\lambda-\\delta)/(\\lambda\\gamma))

    ``sigma = inf`` means the uniform prior; then gamma is ignored and p_min = 1/K is not known
    here, so use :func:`uniform_eps` for that case.
    """
    _check_unit("gamma", gamma)
    e1 = eps1(sigma, gamma, mode)
    return e1 + _resample_eps(lam, gamma, delta)


def lam_for(eps: float, delta: float, gamma: float, sigma: float, mode: str = "strict") -> float:
    """Smallest lambda reaching (eps, delta) for Cluster-DP: inverse of Theorem 3.1, spec §2.8.

    .. math:: \\lambda = (1-\\delta) / (1 + \\gamma (e^{\\varepsilon - \\varepsilon_1} - 1))

    Raises
    ------
    ValueError
        If eps <= eps1 (nothing left for the resampling step), gamma = 0 (the resampling step
        then has no finite epsilon; delta would have to be >= 1 - lambda), or eps - eps1 >
        ``MAX_EXPONENT`` (lambda would underflow).
    """
    if not isinstance(eps, (int, float)) or not eps > 0 or math.isnan(eps):
        raise ValueError(f"eps must be a number > 0, got {eps!r}")
    _check_unit("delta", delta)
    if delta >= 1:
        raise ValueError(f"delta must be < 1, got {delta!r}")
    _check_unit("gamma", gamma)
    if gamma == 0:
        raise ValueError(
            "gamma=0 leaves the resampling step without a finite epsilon; use gamma > 0"
        )
    e1 = eps1(sigma, gamma, mode)
    eps_t = eps - e1
    if not eps_t > 0:
        raise ValueError(
            f"infeasible: eps={eps!r} <= eps1={e1!r} spent on the prior release "
            f"({mode} accounting, "
            f"sigma={sigma!r}, gamma={gamma!r}); raise sigma or eps"
        )
    return (1.0 - delta) / (1.0 + gamma * _expm1(eps_t, eps))


def uniform_eps(lam: float, K: int, delta: float = 0.0) -> float:
    """Epsilon of Uniform-Prior-DP (K-ary randomized response): Theorem A.5, spec §2.8.

    .. math:: \\varepsilon = \\log(1 + K (1-\\lambda-\\delta)/\\lambda)
    """
    _check_K(K)
    return _resample_eps(lam, 1.0 / K, delta)


def uniform_lam(eps: float, K: int, delta: float = 0.0) -> float:
    """Smallest lambda for Uniform-Prior-DP at (eps, delta): inverse of Theorem A.5, spec §2.8.

    .. math:: \\lambda = (1-\\delta)/(1 + (e^{\\varepsilon}-1)/K)
    """
    _check_K(K)
    if not isinstance(eps, (int, float)) or not eps > 0 or math.isnan(eps):
        raise ValueError(f"eps must be a number > 0, got {eps!r}")
    _check_unit("delta", delta)
    if delta >= 1:
        raise ValueError(f"delta must be < 1, got {delta!r}")
    return (1.0 - delta) / (1.0 + _expm1(eps, eps) / K)


def _check_K(K: int) -> None:
    if not isinstance(K, (int,)) or isinstance(K, bool) or K < 2:
        raise ValueError(f"K must be an integer >= 2, got {K!r}")
