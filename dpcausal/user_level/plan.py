"""The Clip-User release plan: read from the occupancy alone (no values, no privacy cost), it
fixes the suppressions, the per-cell sensitivities and noise scales, and the charge ``K * eps``
per user (spec ``user_level_clip.md`` §1.5, §3.7, §7.4-§7.5)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from dpcausal._results import ResultMixin
from dpcausal.accounting import PrivacyCharge
from dpcausal.contract import PublicFacts
from dpcausal.noise import effective_scale
from dpcausal.user_level.clip_user import clip_user
from dpcausal.user_level.closed_forms import bias_mu, bias_var, delta_mu, delta_var, grid_error
from dpcausal.user_level.pseudo_user import pseudo_user
from dpcausal.user_level.records import (
    aligned_counts,
    as_list,
    column_max,
    fingerprint,
    occupancy_from_records,
)


@dataclass(frozen=True, eq=False)
class UserLevelFacts(PublicFacts):
    """The public facts of a user-level release: ``n`` users and the plan's ``K``, ``G1``,
    ``n_cells`` and ``occupancy_hash`` (spec §7.2-1)."""

    n: int
    K: int
    G1: int
    n_cells: int
    occupancy_hash: str | None = None


@dataclass(frozen=True)
class UserLevelPlan(ResultMixin):
    """Value-free release plan (public figures; unit-level arrays are kept out of ``to_dict``)."""

    K: int
    G1: int
    epsilon: float
    epsilon_total: float
    epsilon_parallel: float
    epsilon_naive: float
    error_baseline: float
    error_after_clip: float
    error: float
    n_units: int
    n_cells: int
    n_records: int
    n_retained: int
    n_suppressions: int
    stages: int
    clip: str
    occupancy_hash: str
    notes: tuple[str, ...]
    cells: pd.DataFrame
    unit: str
    cell: tuple[str, ...]
    order: str | None
    config: dict = field(repr=False)
    _retained: np.ndarray = field(repr=False)      # records kept per non-zero of A (CSR order)

    def __post_init__(self) -> None:
        if not 1 <= self.K <= self.G1 <= self.n_cells:
            raise AssertionError(f"plan invariant 1 <= K <= G1 <= cells broken: {self} (bug)")
        if not math.isclose(self.epsilon_total, self.K * self.epsilon):
            raise AssertionError("epsilon_total != K * epsilon (bug)")
        if self.error > self.error_baseline * (1 + 1e-9) and self.config["error_target"] is None:
            raise AssertionError("planned error exceeds the baseline worst case (bug, I1)")

    def metrics(self) -> dict[str, float]:
        """The public run metrics of spec §7.5 (no unit ids), e.g. for MLflow."""
        cells = self.cells
        supp = 1.0 - cells["c"] / cells["n"]
        return {"G_1": self.G1, "K": self.K, "eps_total": self.epsilon_total,
                "eps_parallel_bound": self.epsilon_parallel, "eps_naive": self.epsilon_naive,
                "E_baseline": self.error_baseline, "E_post_clipuser": self.error_after_clip,
                "E_bar": self.error, "n_stages": self.stages,
                "n_suppressed_pairs": self.n_suppressions,
                "frac_records_suppressed": 1.0 - self.n_retained / self.n_records,
                "max_cell_frac_suppressed": float(supp.max()),
                "n_cells_capped": int((cells["m_g"] < cells["gamma_star"]).sum())}

    def public_facts(self) -> UserLevelFacts:
        """What the charge may depend on: the users' count and the plan's K, G_1, cell count and
        occupancy hash (all functions of the declared-public occupancy, spec §7.2-1)."""
        return UserLevelFacts(self.n_units, self.K, self.G1, self.n_cells, self.occupancy_hash)

    def privacy_charge(self) -> PrivacyCharge:
        """Data-free cost of releasing this plan: per-user worst case ``K * eps`` (Prop V.1,
        §1.5)."""
        return user_charge(self.config, self.K, self.G1, self.n_cells, self.occupancy_hash)

    def summary_rows(self) -> list[tuple[str, str]]:
        rows = super().summary_rows()
        return rows + [("note", n) for n in self.notes]


def user_charge(cfg: dict, K: int, G1: int, n_cells: int, occupancy_hash: str | None
                ) -> PrivacyCharge:
    """Per-user charge ``K * eps`` of one release (Prop V.1, spec §1.5; pure eps-DP Laplace)."""
    if not (all(isinstance(x, (int, np.integer)) for x in (K, G1, n_cells))
            and 1 <= K <= G1 <= n_cells):
        raise ValueError("the public plan facts need integers 1 <= K <= G1 <= n_cells, got "
                         f"K={K!r}, G1={G1!r}, n_cells={n_cells!r}")
    eps = cfg["epsilon"]
    return PrivacyCharge(
        mechanism="laplace", epsilon=K * eps,
        detail={"K": int(K), "G1": int(G1), "epsilon_per_cell": eps,
                "epsilon_parallel": G1 * eps, "epsilon_naive": n_cells * eps,
                "clip": cfg["clip"], "occupancy_hash": occupancy_hash,
                "neighbouring": "user-level, values only, occupancy public (spec §1.3)"})


def make_plan(cfg: dict, records: pd.DataFrame, unit: str, cell: str | Sequence[str],
              order: str | None, record: str | None,
              expected_occupancy_hash: str | None) -> UserLevelPlan:
    """The plan of :meth:`UserLevelATE.plan <dpcausal.user_level.UserLevelATE.plan>` for
    the checked settings ``cfg``: Clip-User (spec §3.1) on the occupancy, then the pseudo-user
    grid (§3.4) and each cell's sensitivities (§2.7) and noise scales."""
    A, units, keys, _ = occupancy_from_records(records, unit, cell, order, record)
    h = fingerprint(A, units, keys)
    if expected_occupancy_hash is not None and h != expected_occupancy_hash:
        raise ValueError(
            f"expected_occupancy_hash={expected_occupancy_hash[:12]}... does not match the "
            f"records' occupancy {h[:12]}...: the occupancy must equal the registered "
            "public one")
    U, eps = cfg["U"], cfg["epsilon"]
    kw = dict(variant=cfg["variant"], split=cfg["split"], weights=cfg["weights"])
    occ = np.diff(A.indptr)
    G1 = int(occ.max())
    n = np.bincount(A.indices, weights=A.data, minlength=A.shape[1]).astype(np.int64)
    mstar = np.zeros(A.shape[1], np.int64)
    np.maximum.at(mstar, A.indices, A.data)
    E0 = grid_error(n, n, mstar, U, eps, **kw)
    notes: list[str] = []
    if cfg["clip"] == "none":
        notes.append("clip='none': baseline release, no suppression; loss G_1 * epsilon "
                     "(Cor II.1).")
        Gamma, Gbar, m_g, stages, nsupp = A, A, mstar, 0, 0
        E_clip = float(E0.max())
    elif G1 == 1:
        notes.append("G_1 = 1: every unit lies in a single cell, so parallel composition "
                     "already gives epsilon; Clip-User skipped (spec §7.2-4).")
        Gamma, Gbar, m_g, stages, nsupp = A, A, mstar, 0, 0
        E_clip = float(E0.max())
    else:
        res = clip_user(A, U, eps, E_target=cfg["error_target"],
                        protect_min_grid=cfg["protect_min_grid"],
                        rollback_partial_stage=cfg["rollback_partial_stage"], **kw)
        Gamma, stages, nsupp = res.Gamma, res.stages, res.n_suppressions
        E_clip = float(res.E_final.max())
        pu = pseudo_user(n, Gamma, U, eps, **kw)
        Gbar, m_g = pu.Gbar, pu.m
        if stages == 0:
            notes.append("Clip-User found no feasible stage: K = G_1 (no privacy gain at this "
                         "epsilon and error target).")
    # retained records per non-zero of A, aligned with A's CSR order
    retained = aligned_counts(A, sp.csr_matrix(Gbar))
    K = int(np.diff(sp.csr_matrix(Gbar).indptr).max())
    c = np.bincount(A.indices, weights=retained, minlength=A.shape[1]).astype(np.int64)
    E_bar = grid_error(n, c, m_g, U, eps, **kw)
    eps_mu, eps_var = cfg["split"][0] * eps, cfg["split"][1] * eps
    cells = keys.copy()
    d_mu, d_var = delta_mu(c, m_g, U), delta_var(c, m_g, U)
    cells = cells.assign(
        n=n, c=c, m_star=mstar, gamma_star=column_max(sp.csr_matrix(Gamma)), m_g=m_g,
        delta_mu=d_mu, delta_var=d_var,
        scale_mean=noise_scales(d_mu, eps_mu), scale_var=noise_scales(d_var, eps_var),
        bias_mean_bound=bias_mu(n, c, U), bias_var_bound=bias_var(n, c, U),
        error_baseline=E0, error=E_bar)
    return UserLevelPlan(
        K=K, G1=G1, epsilon=eps, epsilon_total=K * eps, epsilon_parallel=G1 * eps,
        epsilon_naive=A.shape[1] * eps, error_baseline=float(E0.max()),
        error_after_clip=E_clip, error=float(E_bar.max()), n_units=A.shape[0],
        n_cells=A.shape[1], n_records=int(n.sum()), n_retained=int(c.sum()),
        n_suppressions=nsupp, stages=stages, clip=cfg["clip"], occupancy_hash=h,
        notes=tuple(notes), cells=cells, unit=unit, cell=tuple(as_list(cell)), order=order,
        config=cfg, _retained=retained)


def noise_scales(sensitivity: np.ndarray, epsilon: float) -> np.ndarray:
    """Effective Laplace scale of each cell's statistic (NaN when the statistic is not
    released)."""
    if epsilon == 0:
        return np.full(len(sensitivity), np.nan)
    return np.array([effective_scale(float(d), epsilon) for d in sensitivity])
