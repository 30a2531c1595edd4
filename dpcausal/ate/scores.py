"""Scores, point estimate and variance estimate: spec dp_ate_ensemble.md §2.1 and §2.2 step 4
(eq. 6)."""

from __future__ import annotations

import numpy as np

from dpcausal.ate.aggregation import EnsembleNuisances


def scores(
    estimator: str, A: np.ndarray, Y: np.ndarray, nuis: EnsembleNuisances, centre: float = 0.0
) -> np.ndarray:
    r"""Per-row scores Gamma_i with the ensemble nuisances: spec §2.2 step 4 (eq. 6).

    Parameters
    ----------
    estimator : {"g", "ipw", "aipw", "aipw_att"}
        Which score to compute; ``"aipw_att"`` is the numerator of the ATT (DoubleML IRM's
        ``"ATTE"`` score; SPECS.md "The ATT of the ensemble").
    A, Y : numpy.ndarray of shape (n,)
        Treatment (0/1) and outcome, Y already clipped to the public bounds.
    nuis : EnsembleNuisances
        The aggregated out-of-fold nuisances of every row (spec §2.2 step 3): ``mu1``, ``mu0``
        and the inverse propensities ``inv_pi1`` = 1/pi_1(i), ``inv_pi0`` = 1/(1 - pi_0(i)).
    centre : float
        Shift applied to Y and mu (the §1.2 shift trick for G/AIPW: their scores do not change,
        but |Y|, |mu| <= B_mu then holds with B_mu the half-width of the bounds).

    Returns
    -------
    numpy.ndarray of shape (n,)
        The scores Gamma_i.

    Notes
    -----
    With the ensemble nuisances of row i (spec §2.1, §2.2 step 4):

    .. math::

        \Gamma^{G}_i &= \hat\mu_1(i) - \hat\mu_0(i), \\
        \Gamma^{IPW}_i &= \frac{A_i Y_i}{\hat\pi_1(i)} - \frac{(1 - A_i) Y_i}{1 - \hat\pi_0(i)}, \\
        \Gamma^{AIPW}_i &= \hat\mu_1(i) - \hat\mu_0(i)
            + \frac{A_i (Y_i - \hat\mu_1(i))}{\hat\pi_1(i)}
            - \frac{(1 - A_i) (Y_i - \hat\mu_0(i))}{1 - \hat\pi_0(i)}, \\
        \Gamma^{ATT}_i &= A_i (Y_i - \hat\mu_0(i))
            - (1 - A_i)\, \hat r(i)\, (Y_i - \hat\mu_0(i)),
            \qquad \hat r(i) = \frac{1}{1 - \hat\pi_0(i)} - 1,

    the ATT being :math:`\sum_i \Gamma^{ATT}_i / \sum_i A_i` (Chernozhukov et al. 2018, §5.1;
    with ``1/(1 - pi)`` aggregated harmonically, ``r`` is the mean of the models' odds).
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
    if estimator == "aipw_att":
        assert mu0 is not None and inv_pi0 is not None, "bug: ATT scores without mu0 or pi"
        residual = Yc - (mu0 - centre)
        return A * residual - (1.0 - A) * (inv_pi0 - 1.0) * residual
    raise ValueError(f"estimator must be 'g', 'ipw', 'aipw' or 'aipw_att', got {estimator!r}")


def ate_and_variance(gamma: np.ndarray) -> tuple[float, float]:
    r"""The non-private point estimate and its variance estimate from the scores: spec §2.1.

    Parameters
    ----------
    gamma : numpy.ndarray of shape (n,)
        The scores Gamma_i (:func:`scores`), n >= 2.

    Returns
    -------
    tau_hat, V_hat : float
        .. math:: \hat\tau = \frac{1}{n} \sum_i \Gamma_i, \qquad
                  \hat V = \frac{1}{n (n-1)} \sum_i (\Gamma_i - \hat\tau)^2.
    """
    n = gamma.shape[0]
    tau = float(np.mean(gamma))
    v = float(np.sum((gamma - tau) ** 2) / (n * (n - 1)))
    return tau, v
