"""Pseudo-user clipping post-step: cap every retained unit at m_g records per cell.

Spec ``user_level_clip.md`` §3.6 (paper §V-B3, Appendix D). Keeps every retained unit (m_g >= 1),
so the occupancy and hence the ``K * eps`` guarantee are unchanged, and ``Ebar_g <= E_g``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpcausal._results import ResultMixin
from dpcausal.user_level.closed_forms import check_error_params, grid_error
from dpcausal.user_level.occupancy import as_occupancy


@dataclass(frozen=True)
class PseudoUserResult(ResultMixin):
    """Per-cell cap ``m`` and error ``E_bar``; ``Gbar = min(Gamma, m_g)`` (same type as Gamma)."""

    m: np.ndarray
    E_bar: np.ndarray
    E_bar_max: float
    c: np.ndarray
    Gbar: Any = field(repr=False)

    def __post_init__(self) -> None:
        if np.any(self.m < 1) or np.any(self.c < 1):
            raise AssertionError("pseudo-user step emptied a cell or capped below 1 (bug)")


def pseudo_user(
    n: Any,
    Gamma: Any,
    U: float,
    eps: float,
    *,
    variant: str = "corrected",
    split: tuple[float, float] = (0.5, 0.5),
    weights: tuple[float, float] = (1.0, 1.0),
) -> PseudoUserResult:
    """Choose per cell the cap m_g in [min, max] of the retained counts minimising E_g: spec §3.6.

    Exhaustive integer scan with prefix sums over the sorted retained counts; ties go to the
    larger m (keep more data, spec A5). Biases are measured against the ORIGINAL totals ``n``.

    Parameters
    ----------
    n : array of int, shape (G,)
        Original number of records per cell (column sums of A).
    Gamma : array-like or scipy.sparse, shape (L, G)
        Retained counts after Clip-User.
    """
    check_error_params(U, eps, variant, split, weights)
    dense_input = not sp.issparse(Gamma)
    Gm = as_occupancy(Gamma, "Gamma")
    n = np.asarray(n, np.int64)
    if n.shape != (Gm.shape[1],) or np.any(n < np.bincount(Gm.indices, Gm.data, Gm.shape[1])):
        raise ValueError("n must hold, per cell, the original totals (>= the retained totals)")
    C = Gm.tocsc()
    G = Gm.shape[1]
    m = np.zeros(G, np.int64)
    Eb = np.zeros(G)
    cs_out = np.zeros(G, np.int64)
    for g in range(G):
        gs = np.sort(C.data[C.indptr[g]:C.indptr[g + 1]])
        pref = np.concatenate([[0], np.cumsum(gs)])
        cand = np.arange(gs[0], gs[-1] + 1, dtype=np.int64)
        k = np.searchsorted(gs, cand, side="left")          # users with count < m keep all
        c_m = pref[k] + cand * (gs.size - k)
        e = grid_error(np.full(cand.size, n[g]), c_m, cand, U, eps, variant, split, weights)
        best = cand.size - 1 - int(np.argmin(e[::-1]))       # ties -> largest m
        m[g], Eb[g], cs_out[g] = cand[best], e[best], c_m[best]
    Gbar = Gm.copy()
    Gbar.data = np.minimum(Gbar.data, m[Gbar.indices])
    return PseudoUserResult(m=m, E_bar=Eb, E_bar_max=float(Eb.max()), c=cs_out,
                            Gbar=Gbar.toarray() if dense_input else Gbar)
