"""Choice of group sizes before the experiment: spec federated_secagg.md §3.2 (remark)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.stats import norm

from dpcausal._results import ResultMixin
from dpcausal.federated.calibration import calibrate
from dpcausal.federated.intervals import check_alpha, sampling_variance
from dpcausal.federated.pbm import check_bound, mean_noise_bound
from dpcausal.federated.rdp import check_count


@dataclass(frozen=True)
class Allocation(ResultMixin):
    """Suggested control size and the predicted CI width over the grid searched."""

    n_control: int
    n_treated: int
    width: float
    grid_n_control: tuple[int, ...]
    grid_width: tuple[float, ...]


def suggest_allocation(prior_s_c: float, prior_s_t: float, eps: float, delta: float, n: int,
                       m: int = 1024, R: float = 1.0, estimand: str = "PATE",
                       alpha: float = 0.1, grid: int = 21,
                       orders: Sequence[float] | None = None) -> Allocation:
    """n_c minimising the predicted width 2 z sqrt(sigma^2 + V_DP): spec §3.2 remark.

    Sampling term from prior SDs (Neyman allocation shrinks it); DP term from theta calibrated
    per group with the full budget on the mean (V_DP = sum_g R^2/(4 n_g m theta_g^2)).
    Each group's theta is calibrated separately; the release composes as the max over groups.
    """
    n = check_count("n", n, 4)
    R = check_bound(R)
    z = norm.ppf(1 - check_alpha(alpha) / 2)
    for name, s in (("prior_s_c", prior_s_c), ("prior_s_t", prior_s_t)):
        if not (isinstance(s, (int, float)) and s >= 0):
            raise ValueError(f"{name} must be a standard deviation >= 0, got {s!r}")
    sizes = sorted({int(v) for v in np.linspace(max(2, n // 20), n - max(2, n // 20), grid)})
    cache: dict[int, float] = {}

    def v_dp(n_g: int) -> float:
        if n_g not in cache:
            cache[n_g] = mean_noise_bound(n_g, m, calibrate(n_g, m, eps, delta, orders), R)
        return cache[n_g]

    widths = []
    for n_c in sizes:
        n_t = n - n_c
        sig2 = sampling_variance(prior_s_t**2, prior_s_c**2, n_t, n_c, estimand)
        widths.append(2 * z * math.sqrt(sig2 + v_dp(n_c) + v_dp(n_t)))
    best = int(np.argmin(widths))
    return Allocation(sizes[best], n - sizes[best], widths[best], tuple(sizes), tuple(widths))
