"""The pooling weights, the between-study variance and the CI's critical value of a
meta-analysis (spec dp_ate_ensemble.md §4; the paper's eq. 12 constant, spec §3)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import norm

WEIGHTINGS = ("inverse_variance", "paper_sqrt", "equal")
CRITICALS = ("normal", "paper")
#: p1 of the paper's CI constant (eq. 12, spec §3): c = Phi^{-1}(1 - p/2 + p1/2) = 2.0537 at p=0.05.
PAPER_P1 = 0.01


def dersimonian_laird(ate: np.ndarray, var: np.ndarray) -> tuple[float, float, float]:
    """(tau2, Q, I^2) by DerSimonian-Laird with w_j = 1/V_j: spec dp_ate_ensemble.md §4."""
    w = 1.0 / var
    fixed = np.dot(w, ate) / w.sum()
    q = float(np.dot(w, (ate - fixed) ** 2))
    df = len(ate) - 1
    scale = w.sum() - np.dot(w, w) / w.sum()
    tau2 = max(0.0, (q - df) / scale)
    i2 = max(0.0, (q - df) / q) if q > 0 else 0.0
    return float(tau2), q, float(i2)


def named_weights(weighting: Any, var: np.ndarray) -> np.ndarray:
    """Normalised weights 1/V (inverse variance), V^{-1/2} (Prop. 1, spec §4) or equal."""
    if weighting == "inverse_variance":
        raw = 1.0 / var
    elif weighting == "paper_sqrt":
        raw = 1.0 / np.sqrt(var)
    else:  # "equal"; anything else was rejected by custom_weights
        raw = np.ones_like(var)
    return raw / raw.sum()


def custom_weights(weights: Any, n_studies: int) -> np.ndarray | None:
    """Validate ``weights``: None for a named weighting, else the normalised custom array."""
    if isinstance(weights, str):
        if weights not in WEIGHTINGS:
            raise ValueError(f"weights must be one of {WEIGHTINGS} or an array of {n_studies} "
                             f"non-negative numbers, got {weights!r}")
        return None
    try:
        lam = np.asarray(weights, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"weights must be one of {WEIGHTINGS} or an array of {n_studies} "
                        f"non-negative numbers, got {weights!r}") from None
    if lam.shape != (n_studies,):
        raise ValueError(f"weights must have one entry per study ({n_studies}), got shape "
                         f"{lam.shape}; pass one weight per release, in the same order")
    if not np.all(np.isfinite(lam)) or np.any(lam < 0):
        raise ValueError(f"weights must be finite and >= 0, got {lam.tolist()}; "
                         f"use non-negative weights")
    if lam.sum() <= 0:
        raise ValueError(f"weights must have a positive sum, got {lam.tolist()}; "
                         f"give at least one study a positive weight")
    return lam / lam.sum()


def critical_value(level: float, critical: str) -> float:
    """Normal quantile for the meta CI (spec §4 decision), or the eq. 12 constant (spec §3)."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}; e.g. level=0.95")
    p = 1.0 - level
    if critical == "normal":
        return float(norm.ppf(1.0 - p / 2.0))
    if critical == "paper":
        if not PAPER_P1 < p / 2.0:
            raise ValueError(f"critical='paper' uses p1={PAPER_P1} and needs p1 < (1-level)/2, "
                             f"i.e. level < {1 - 2 * PAPER_P1:g}, got level={level!r}; "
                             f"use critical='normal'")
        return float(norm.ppf(1.0 - p / 2.0 + PAPER_P1 / 2.0))
    raise ValueError(f"critical must be one of {CRITICALS}, got {critical!r}")
