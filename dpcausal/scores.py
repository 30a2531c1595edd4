"""Scores, point estimate and variance estimate: spec dp_ate_ensemble.md §2.1 and §2.2 step 4
(eq. 6)."""

from __future__ import annotations

import numpy as np

from dpcausal.aggregation import EnsembleNuisances


def scores(
    estimator: str, A: np.ndarray, Y: np.ndarray, nuis: EnsembleNuisances, centre: float = 0.0
) -> np.ndarray:
    """Per-row scores Gamma_i with the ensemble nuisances: spec §2.2 step 4.

    G:    mu1 - mu0
    IPW:  A Y inv_pi1 - (1-A) Y inv_pi0
    AIPW: mu1 - mu0 + A (Y - mu1) inv_pi1 - (1-A) (Y - mu0) inv_pi0

    ``centre`` shifts Y and mu (the §1.2 shift trick for G/AIPW, which leaves their scores'
    value unchanged but makes |Y|, |mu| <= B_mu hold with B_mu the half-width of the bounds).
    """
    A = A.astype(float)
    Yc = Y - centre
    mu1, mu0, inv_pi1, inv_pi0 = nuis.mu1, nuis.mu0, nuis.inv_pi1, nuis.inv_pi0
    if estimator == "g":
        assert mu1 is not None and mu0 is not None, "bug: G scores without mu"
        return np.asarray((mu1 - centre) - (mu0 - centre))
    if estimator == "ipw":
        assert inv_pi1 is not None and inv_pi0 is not None, "bug: IPW scores without pi"
        return A * Yc * inv_pi1 - (1.0 - A) * Yc * inv_pi0
    if estimator == "aipw":
        assert mu1 is not None and mu0 is not None, "bug: AIPW scores without mu"
        assert inv_pi1 is not None and inv_pi0 is not None, "bug: AIPW scores without pi"
        m1, m0 = mu1 - centre, mu0 - centre
        return m1 - m0 + A * (Yc - m1) * inv_pi1 - (1.0 - A) * (Yc - m0) * inv_pi0
    raise ValueError(f"estimator must be 'g', 'ipw' or 'aipw', got {estimator!r}")


def ate_and_variance(gamma: np.ndarray) -> tuple[float, float]:
    """tau_hat = mean(Gamma) and V_hat = sum (Gamma_i - tau_hat)^2 / (n (n-1)): spec §2.1."""
    n = gamma.shape[0]
    tau = float(np.mean(gamma))
    v = float(np.sum((gamma - tau) ** 2) / (n * (n - 1)))
    return tau, v
