"""Central (trusted-curator) Gaussian baseline: spec federated_secagg.md §2.5.

The noise multiplier is calibrated with the same CKS conversion and orders as PBM, so the
comparison in the paper's tables is like for like.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from dpcausal.federated.calibration import gaussian_rho_for
from dpcausal.federated.pbm import check_bound
from dpcausal.federated.rdp import check_count, check_delta, check_epsilon

MODES = ("per_group", "difference")


def gaussian_noise_multiplier(epsilon: float, delta: float,
                              orders: Sequence[float] | None = None) -> float:
    """Smallest sigma_mult whose RDP curve a / (2 sigma_mult^2) converts (CKS) to epsilon: §2.5."""
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    return 1.0 / math.sqrt(2.0 * gaussian_rho_for(epsilon, delta, orders))


@dataclass(frozen=True)
class CentralGaussianScales:
    """Noise scales of the baseline: one per group (``per_group``) or one on the difference."""

    mode: str
    noise_multiplier: float
    sigma: tuple[float, ...]
    variance_dp: float


def central_gaussian_scales(n_treated: int, n_control: int, R: float, epsilon: float,
                            delta: float, mode: str = "per_group",
                            orders: Sequence[float] | None = None) -> CentralGaussianScales:
    """Data-free scales of the Central Gaussian baseline: spec §2.5 (both modes).

    ``per_group`` (reproduction default, [R]): sigma_g = (2R/n_g) sigma_mult per group mean,
    V_DP = sigma_c^2 + sigma_t^2. ``difference``: one noise on the difference in means with
    sensitivity 2R/min(n_c, n_t), V_DP = sigma^2 (half the per-group variance when balanced).
    """
    n_t, n_c = check_count("n_treated", n_treated, 2), check_count("n_control", n_control, 2)
    R = check_bound(R)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    mult = gaussian_noise_multiplier(epsilon, delta, orders)
    sig: tuple[float, ...]
    if mode == "per_group":
        sig = (2 * R / n_c * mult, 2 * R / n_t * mult)
    else:
        sig = (2 * R / min(n_c, n_t) * mult,)
    return CentralGaussianScales(mode, mult, sig, float(sum(s * s for s in sig)))


def central_gaussian_ate(x: np.ndarray, treated: np.ndarray, scales: CentralGaussianScales,
                         R: float, rng: np.random.Generator) -> float:
    """Noisy difference in clipped group means under the baseline: spec §2.5."""
    xc = np.clip(np.asarray(x, dtype=float), -R, R)
    t = np.asarray(treated, dtype=bool)
    if scales.mode == "per_group":
        mu_c = xc[~t].mean() + rng.normal(0.0, scales.sigma[0])
        mu_t = xc[t].mean() + rng.normal(0.0, scales.sigma[1])
        return float(mu_t - mu_c)
    return float(xc[t].mean() - xc[~t].mean() + rng.normal(0.0, scales.sigma[0]))
