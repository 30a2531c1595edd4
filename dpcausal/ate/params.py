"""The public parameters of :class:`~dpcausal.PrivateATE` checked against n and d before anything
is charged (moved from :mod:`dpcausal.validation`, which the modules below import, so the mode
sets are read from their one definition: :mod:`dpcausal.ate.sensitivity`, :mod:`dpcausal.ate.ci`).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from dpcausal.ate.ci import CI_MODES
from dpcausal.ate.folds import check_n_folds
from dpcausal.ate.sensitivity import SENSITIVITY_MODES, SIGMA2_MODES
from dpcausal.validation import outcome_bounds

ESTIMATORS = ("g", "ipw", "aipw")

# Why the G-formula releases no CI (dpcausal/SPECS.md, "G-formula: point estimate only").
G_NO_CI = (
    "estimator='g' releases the point estimate only (ci_share=0, or 'auto'): its variance "
    "estimate V_hat is the spread of the predicted effects mu1_hat - mu0_hat and omits the "
    "outcome models' own estimation error, so its CI under-covers once the privacy noise stops "
    "dominating (0.83-0.91 at zeta = 5, n = 5,000, K = 200); estimator='aipw' gives a valid CI")


def check_params(params: dict[str, Any], n: int, d: int) -> None:
    """Check the public parameters of :class:`~dpcausal.PrivateATE` against n and d."""
    est = params["estimator"]
    if est not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {est!r}")
    lo, hi = outcome_bounds(params["outcome_bounds"])
    if est == "ipw" and max(abs(lo), abs(hi)) == 0:
        raise ValueError("outcome_bounds must not be (0, 0)")
    check_clip(params["propensity_clip"])
    _positive("zeta", params["zeta"])
    r = params["ci_share"]
    if not (isinstance(r, (int, float)) and 0 <= r < 1):
        raise ValueError(f"ci_share must be in [0, 1) (0 = point estimate only), got {r!r}")
    if params["estimator"] == "g" and r > 0:
        raise ValueError(G_NO_CI)
    alpha, p1 = params["alpha"], params["p1"]
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if not (isinstance(p1, (int, float)) and 0 < p1 < alpha / 2):
        raise ValueError(f"p1 must be in (0, alpha/2) = (0, {alpha / 2}), got {p1!r}")
    delta = params["delta"]
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    for name, allowed in (
        ("sensitivity", SENSITIVITY_MODES),
        ("sigma2", SIGMA2_MODES),
        ("ci", CI_MODES),
    ):
        if params[name] not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {params[name]!r}")
    if params["sensitivity"] == "released_code":
        warnings.warn(
            "sensitivity='released_code' reproduces the paper's plotting constants, which are "
            "NOT a valid privacy bound for AIPW (spec §2.4); never use it for a release",
            UserWarning,
            stacklevel=3,
        )
    K = params["n_folds"]
    check_n_folds(n, K)
    per_fold = n / K
    if per_fold < max(20, 5 * (d + 1)):
        warnings.warn(
            f"only {per_fold:.0f} rows per fold for {d} covariates (n={n}, n_folds={K}): fold "
            f"models will be poor; consider n_folds <= {max(2, n // max(20, 5 * (d + 1)))}",
            UserWarning,
            stacklevel=3,
        )
    _check_model(params, "propensity_model", needed=est in ("ipw", "aipw"), method="predict_proba")
    _check_model(params, "outcome_model", needed=est in ("g", "aipw"), method="predict")


def check_clip(clip: Any) -> float:
    """A numeric propensity clip eta_c in (0, 0.5] (``"auto"`` is resolved before)."""
    if not (isinstance(clip, (int, float)) and not isinstance(clip, bool) and 0 < clip <= 0.5):
        raise ValueError(
            f"propensity_clip (eta_c, B_pi = 1/eta_c) must be in (0, 0.5] or 'auto', got "
            f"{clip!r}")
    return float(clip)


def _check_model(params: dict[str, Any], name: str, needed: bool, method: str) -> None:
    model = params[name]
    if not needed:
        return
    if model is None:
        raise ValueError(f"estimator={params['estimator']!r} needs {name}; got None")
    missing = [m for m in ("fit", method) if not callable(getattr(model, m, None))]
    if missing:
        raise TypeError(
            f"{name} must implement fit and {method} (any scikit-learn-style estimator or "
            f"Pipeline); {type(model).__name__} lacks {missing}"
        )


def _positive(name: str, value: Any) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
