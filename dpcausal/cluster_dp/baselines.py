"""Aggregate baselines that release only a number: Noisy Horvitz-Thompson and Noisy Histogram.

Spec cluster_dp.md §2.4, §2.5 with errata E2, E3 and E8: sensitivities use the public response
space, never the observed outcomes. ``mode="strict"`` (default) is valid under substitution of one
label; ``mode="paper"`` reproduces Props. A.2/A.3 as printed.
"""

from __future__ import annotations

import math

import numpy as np

from dpcausal.accounting import PrivacyCharge
from dpcausal.cluster_dp.calibration import ACCOUNTINGS
from dpcausal.cluster_dp.estimation import stratified_dim
from dpcausal.cluster_dp.spaces import ResponseSpace


def _check(epsilon: float, mode: str) -> None:
    if mode not in ACCOUNTINGS:
        raise ValueError(f"mode must be one of {ACCOUNTINGS}, got {mode!r}")
    if not isinstance(epsilon, (int, float)) or not epsilon > 0 or math.isinf(epsilon):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")


def _cells(z: np.ndarray, cidx: np.ndarray) -> np.ndarray:
    C = int(cidx.max()) + 1
    n_cell = np.bincount(2 * cidx + z, minlength=2 * C).reshape(C, 2)
    if np.any(n_cell == 0):
        raise ValueError(
            "every cluster needs at least one treated and one control unit (spec §1.1)"
        )
    return n_cell


def noisy_ht_scales(
    n_cell: np.ndarray, space: ResponseSpace, epsilon: float, mode: str = "strict"
) -> np.ndarray:
    """Laplace scales eta_c = Delta_c/eps per cluster: Prop. A.2 (paper) / §6 E3 (strict),
    spec §2.4.

    Delta_c = max|y| / min(n_{0,c}, n_{1,c}) (paper) or (max Y - min Y) / min(n_{0,c}, n_{1,c})
    (strict).
    """
    _check(epsilon, mode)
    num = space.B if mode == "paper" else space.width
    return num / np.min(np.asarray(n_cell, float), axis=1) / epsilon


def noisy_histogram_scales(n_cell: np.ndarray, epsilon: float, mode: str = "strict") -> np.ndarray:
    """Laplace scales eta_{a,c} = k/(n_{a,c} eps), k = 1 (Prop. A.3) or 2 (strict, §6 E2);
    spec §2.5. Shape (C, 2)."""
    _check(epsilon, mode)
    return (1.0 if mode == "paper" else 2.0) / (np.asarray(n_cell, float) * epsilon)


def _prepare(y, z, c, space):
    if not isinstance(space, ResponseSpace):
        raise TypeError(f"space must be a ResponseSpace, got {type(space).__name__}")
    y_idx = space.index(np.asarray(y), name="y")
    z = np.asarray(z)
    if not np.all(np.isin(z, [0, 1])):
        raise ValueError("z must hold only 0/1 treatment indicators")
    z = z.astype(np.int64)
    _, cidx = np.unique(np.asarray(c), return_inverse=True)
    if not (y_idx.shape == z.shape == cidx.shape):
        raise ValueError(
            f"y, z, c must have the same length, got {y_idx.size}, {z.size}, {cidx.size}"
        )
    return y_idx, z, cidx.astype(np.int64), _cells(z, cidx)


def noisy_ht(
    y: np.ndarray,
    z: np.ndarray,
    c: np.ndarray,
    space: ResponseSpace,
    epsilon: float,
    mode: str = "strict",
    random_state: int | np.random.Generator | None = None,
    noise: np.ndarray | None = None,
) -> float:
    """Noisy Horvitz-Thompson ATE: Algorithm 3, spec §2.4.

    tau_hat = sum_c (n_c/n)(difference in means in c + w_c), w_c ~ Laplace(eta_c).
    ``noise`` (standard Laplace, one per cluster) replaces the draw, for one-shot experiments
    (§4.8).
    """
    y_idx, z, cidx, n_cell = _prepare(y, z, c, space)
    eta = noisy_ht_scales(n_cell, space, epsilon, mode)
    if noise is None:
        rng = (
            random_state
            if isinstance(random_state, np.random.Generator)
            else np.random.default_rng(random_state)
        )
        noise = rng.laplace(0.0, 1.0, eta.size)
    C = eta.size
    tau, _ = stratified_dim(space.values[y_idx], cidx, z, C)
    wc = n_cell.sum(axis=1) / z.size
    return float(tau[0] + np.sum(wc * eta * np.asarray(noise)[:C]))


def noisy_histogram(
    y: np.ndarray,
    z: np.ndarray,
    c: np.ndarray,
    space: ResponseSpace,
    epsilon: float,
    mode: str = "strict",
    random_state: int | np.random.Generator | None = None,
    noise: np.ndarray | None = None,
) -> float:
    """Noisy Histogram ATE: Algorithm 4, spec §2.5.

    tau_hat = sum_c (n_c/n) sum_y y (p_hat_1(y|c) + w_{1,c,y} - p_hat_0(y|c) - w_{0,c,y}).
    ``noise`` (standard Laplace, shape (C, 2, K)) replaces the draw, for one-shot experiments.
    """
    y_idx, z, cidx, n_cell = _prepare(y, z, c, space)
    eta = noisy_histogram_scales(n_cell, epsilon, mode)
    C, K = n_cell.shape[0], space.K
    if noise is None:
        rng = (
            random_state
            if isinstance(random_state, np.random.Generator)
            else np.random.default_rng(random_state)
        )
        noise = rng.laplace(0.0, 1.0, (C, 2, K))
    counts = np.bincount((2 * cidx + z) * K + y_idx, minlength=2 * C * K).reshape(C, 2, K)
    p = counts / n_cell[..., None] + np.asarray(noise) * eta[..., None]
    means = p @ space.values  # (C, 2)
    wc = n_cell.sum(axis=1) / z.size
    return float(np.sum(wc * (means[:, 1] - means[:, 0])))


def noisy_ht_var(
    var_nodp: float, n_cell: np.ndarray, space: ResponseSpace, epsilon: float, mode: str = "strict"
) -> float:
    """Var = Var_z[tau_hat_NoDP] + 2 sum_c (n_c/n eta_c)^2: spec §2.4 (exact)."""
    n_cell = np.asarray(n_cell, float)
    wc = n_cell.sum(axis=1) / n_cell.sum()
    return float(var_nodp + 2 * np.sum((wc * noisy_ht_scales(n_cell, space, epsilon, mode)) ** 2))


def noisy_histogram_var(
    var_nodp: float, n_cell: np.ndarray, space: ResponseSpace, epsilon: float, mode: str = "strict"
) -> float:
    """Var = Var_z[tau_hat_NoDP] + 2 ||y||^2 sum_c (n_c/n)^2 (eta_0c^2 + eta_1c^2): spec §2.5
    (exact)."""
    n_cell = np.asarray(n_cell, float)
    wc = n_cell.sum(axis=1) / n_cell.sum()
    eta = noisy_histogram_scales(n_cell, epsilon, mode)
    return float(var_nodp + 2 * space.l2sq * np.sum(wc**2 * (eta**2).sum(axis=1)))


def aggregate_charge(
    method: str, epsilon: float, space: ResponseSpace, mode: str = "strict"
) -> PrivacyCharge:
    """Data-free ledger charge of a Noisy-HT / Noisy-Histogram release under substitution
    (§6 E2, E3).

    In strict mode the charge is ``epsilon``. In paper mode the scales are too small for
    substitution neighbours, so the true cost is charged: Noisy-Histogram 2 epsilon (L1 sensitivity
    2/n_{a,c}, not 1/n_{a,c}); Noisy-HT epsilon (max Y - min Y)/max|y| (equal to epsilon only when
    Y lies in [0, B]).
    """
    _check(epsilon, mode)
    if method not in ("noisy_ht", "noisy_histogram"):
        raise ValueError(f"method must be 'noisy_ht' or 'noisy_histogram', got {method!r}")
    factor = 1.0
    if mode == "paper":
        factor = 2.0 if method == "noisy_histogram" else max(1.0, space.width / space.B)
    return PrivacyCharge(
        mechanism="laplace",
        epsilon=epsilon * factor,
        detail={"method": method, "mode": mode, "epsilon_requested": epsilon},
    )
