"""The phases of Algorithm 1 (corrected) as public functions: spec federated_secagg.md §3.1, §7.5.

plan_release (pure, data-free) -> encode_clients (per chunk of clients) -> aggregate (secure sum
per group and moment) -> decode_moments -> interval (in :mod:`dpcausal.federated.estimator`).
The orchestration layer may call them one by one and reserve the ledger charge after
``plan_release`` and before any client encodes. Groups are ordered (control, treated).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from dpcausal._results import ResultMixin
from dpcausal.accounting import PrivacyCharge
from dpcausal.federated.calibration import JointCalibration, calibrate_joint
from dpcausal.federated.pbm import (
    check_bound,
    decode_mean,
    decode_second_moment,
    mean_noise_bound,
    pbm2_encode,
    pbm_encode,
    private_variance,
)
from dpcausal.federated.secagg import AggregateView, direct_sum, modulus_for, secure_sum

VARIANCE_MODES = ("private", "oracle_nonprivate")
SECAGG_MODES = ("pairwise", "none")
GROUPS = ("control", "treated")


@dataclass(frozen=True)
class ReleasePlan(ResultMixin):
    """Data-free parameters of one federated release (what the clients and server agree on)."""

    R: float
    n_clients: tuple[int, int]
    n_plan: tuple[int, int]
    m1: int
    m2: int
    variance_mode: str
    calibration: JointCalibration
    moduli1: tuple[int, int]
    moduli2: tuple[int, int]

    @property
    def releases_second_moment(self) -> bool:
        return self.variance_mode == "private"

    @property
    def bits_per_client(self) -> int:
        """Bits a client sends: log2 M for each message (spec §4)."""
        bits = max(int(math.log2(M)) for M in self.moduli1)
        if self.releases_second_moment:
            bits += max(int(math.log2(M)) for M in self.moduli2)
        return bits

    def privacy_charge(self) -> PrivacyCharge:
        """Composed RDP curve of everything released (Theorem 3.2, spec §1)."""
        c = self.calibration
        return PrivacyCharge(
            mechanism="rdp", rdp_orders=c.orders, rdp_epsilons=c.rdp_epsilons, delta=c.delta,
            detail={"mechanism": "pbm_secagg", "epsilon": c.epsilon,
                    "optimal_order": c.optimal_order, "theta_capped": c.theta_capped,
                    "privacy_status": ("PRIVATE" if self.variance_mode == "private"
                                       else "NOT_PRIVATE")})


def plan_release(n_treated: int, n_control: int, *, R: float, epsilon: float, delta: float,
                 m1: int, m2: int, mean_share: float = 0.99, variance_mode: str = "private",
                 dropout: float = 0.0, orders: Sequence[float] | None = None) -> ReleasePlan:
    """Calibrate the release for public group sizes: spec §2.4 joint calibration, §4 dropouts.

    Privacy is planned for n_plan = n_g - ceil(dropout n_g) contributions per group (spec §4).
    ``variance_mode="oracle_nonprivate"`` sends the full budget to the mean and releases no
    second moment (reproduction recipe §6.2; NOT DP for the variance).
    """
    R = check_bound(R)
    if variance_mode not in VARIANCE_MODES:
        raise ValueError(f"variance_mode must be one of {VARIANCE_MODES}, got {variance_mode!r}")
    if not (isinstance(dropout, (int, float)) and 0.0 <= dropout < 1.0):
        raise ValueError(f"dropout must be a fraction in [0, 1), got {dropout!r}")
    sizes = []
    for name, n_g in (("n_control", n_control), ("n_treated", n_treated)):
        if isinstance(n_g, bool) or not isinstance(n_g, (int, np.integer)) or n_g < 2:
            raise ValueError(f"{name} must be an integer >= 2 (a group needs at least 2 clients "
                             f"for a variance), got {n_g!r}")
        sizes.append(int(n_g))
    n_plan = tuple(g - math.ceil(dropout * g) for g in sizes)
    if min(n_plan) < 2:
        raise ValueError(f"dropout={dropout} leaves fewer than 2 clients in a group "
                         f"(n_plan={n_plan}); lower the dropout fraction")
    cal = calibrate_joint(n_plan, m1, m2, epsilon, delta, mean_share, orders,
                          release_second_moment=variance_mode == "private")
    check_float_range(R, max(sizes), min(n_plan), cal)
    return ReleasePlan(R=R, n_clients=(sizes[0], sizes[1]), n_plan=(n_plan[0], n_plan[1]),
                       m1=cal.m1, m2=cal.m2, variance_mode=variance_mode, calibration=cal,
                       moduli1=(modulus_for(sizes[0], cal.m1), modulus_for(sizes[1], cal.m1)),
                       moduli2=(modulus_for(sizes[0], cal.m2), modulus_for(sizes[1], cal.m2)))


def check_float_range(R: float, n_max: int, n_min: int, cal: JointCalibration) -> None:
    """Refuse an R whose figures leave float64, before anything is drawn, so a release that
    passed its checks always publishes finite numbers.

    Every intermediate of encoding and decoding (spec §2.1-2.2) is at most n_g (R/theta)^2 in
    magnitude: R^2, the decoded second moment n_g R^2/2 + n_g R^2/(4 theta_2), n_g mu_hat^2 <=
    n_g R^2/(4 theta_1^2) and V_DP; the smallest figure that must stay positive is the V_DP
    bound R^2/(4 n_g m1 theta_1^2) (Theorem 4.1). Without this check R = 1e300 failed inside
    numpy after the first-moment reports were drawn.
    """
    theta = min(cal.theta1 + cal.theta2)
    largest = 16.0 * n_max * (R / theta) * (R / theta)
    smallest = min(mean_noise_bound(n_min, cal.m1, t, R) for t in cal.theta1)
    if not (math.isfinite(largest) and R * R / 2.0 >= sys.float_info.min and smallest > 0.0):
        raise ValueError(
            f"R={R!r} is outside what this release can compute in float64: its figures range "
            f"from {smallest:.3g} (the V_DP bound) to {largest:.3g} (n_g (R/theta)^2) and must "
            f"stay within [{sys.float_info.min:.3g}, {sys.float_info.max:.3g}]; express the "
            "outcomes in other units so that R is moderate (e.g. 1e-6 to 1e12)")


@dataclass(frozen=True)
class ClientReports:
    """Reports of a chunk of clients of one group (client side; never seen by the server).

    No count of clipped outcomes is kept: it would be an exact, non-private figure.
    """

    z1: np.ndarray
    z2: np.ndarray | None


def encode_clients(x: np.ndarray, plan: ReleasePlan, group: int,
                   rng: np.random.Generator) -> ClientReports:
    """PBM reports of a chunk of clients in ``group`` (0 control, 1 treated): spec §2.1-2.2."""
    cal = plan.calibration
    z1 = pbm_encode(x, plan.R, plan.m1, cal.theta1[group], rng)
    z2 = (pbm2_encode(x, plan.R, plan.m2, cal.theta2[group], rng)
          if plan.releases_second_moment else None)
    return ClientReports(z1, z2)


def aggregate(reports: ClientReports, plan: ReleasePlan, group: int, *, secagg: str,
              session: int | str, dropped: np.ndarray | None = None
              ) -> tuple[AggregateView, AggregateView | None]:
    """Server view of one group's two aggregations (first, second moment): spec §7.4."""
    if secagg not in SECAGG_MODES:
        raise ValueError(f"secagg must be one of {SECAGG_MODES}, got {secagg!r}")
    views: list[AggregateView | None] = []
    for moment, z, m, moduli in ((1, reports.z1, plan.m1, plan.moduli1),
                                 (2, reports.z2, plan.m2, plan.moduli2)):
        if z is None:
            views.append(None)
            continue
        if secagg == "pairwise":
            views.append(secure_sum(z, m, session=session,
                                    aggregation_id=f"{GROUPS[group]}|moment{moment}",
                                    modulus=moduli[group], dropped=dropped,
                                    min_received=plan.n_plan[group]))
        else:
            view = direct_sum(z, m, modulus=moduli[group], dropped=dropped)
            if view.n_received < plan.n_plan[group]:
                raise ValueError(f"only {view.n_received} contributions arrived in the "
                                 f"{GROUPS[group]} group, fewer than the planned "
                                 f"{plan.n_plan[group]}; nothing released")
            views.append(view)
    first, second = views
    assert first is not None, "bug: a group without its first-moment reports"
    return first, second


@dataclass(frozen=True)
class DecodedGroup(ResultMixin):
    """Server-side estimates of one group."""

    n_received: int
    mean: float
    variance: float | None
    noise_bound: float


def decode_group(first: AggregateView, second: AggregateView | None, plan: ReleasePlan,
                 group: int, debias: bool = True) -> DecodedGroup:
    """Decode one group's aggregates: eq. (3) corrected and the private variance (spec §2.1-2.2).

    Takes only server views (sum mod M, number received); the received count, not the planned
    one, divides (spec §4, dropouts). ``variance`` is None when no second moment was released.
    """
    cal = plan.calibration
    n_g = first.n_received
    mu = decode_mean(first.sum_mod_m, n_g, plan.m1, cal.theta1[group], plan.R)
    bound = mean_noise_bound(n_g, plan.m1, cal.theta1[group], plan.R)
    s2 = None
    if second is not None:
        s2_hat = decode_second_moment(second.sum_mod_m, second.n_received, plan.m2,
                                      cal.theta2[group], plan.R)
        s2 = private_variance(s2_hat, mu, n_g, bound, plan.R, debias)
    return DecodedGroup(n_g, float(mu), s2, bound)
