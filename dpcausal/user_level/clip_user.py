"""Clip-User (Algorithm 1): greedy per-cell suppression of heavy units that lowers the
composition factor from G_1 to K without raising the worst-case error.

Spec ``user_level_clip.md`` §3.1-§3.5. Depends only on (A, U, eps, configuration), never on
values, so it costs no privacy budget when A is public (§7.2-1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpcausal._results import ResultMixin
from dpcausal.user_level.closed_forms import check_error_params, grid_error, scalar_grid_error
from dpcausal.user_level.occupancy import as_occupancy


class ClipUserInvariantError(AssertionError):
    """A Clip-User invariant (spec §3.4) failed: this is a bug in dpcausal, please report it."""


@dataclass(frozen=True)
class ClipUserResult(ResultMixin):
    """Outcome of :func:`clip_user` (spec §3.1 output).

    ``Gamma`` (retained counts, entries in {0, A[l, g]}) has the type of the input ``A`` (dense
    array or CSR), rows in the caller's order. ``suppressions`` lists ``(user_row, cell)`` pairs in
    the order they were made; it names units, so it is excluded from ``to_dict`` (spec §7.5).
    """

    K: int
    G1: int
    E: float
    E0: np.ndarray
    E_final: np.ndarray
    stages: int
    n_suppressions: int
    n: np.ndarray
    gamma_star: np.ndarray
    Gamma: Any = field(repr=False)
    suppressions: tuple[tuple[int, int], ...] = field(repr=False)
    trace: tuple = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.K <= self.G1:
            raise ClipUserInvariantError(f"K={self.K} outside [1, G1={self.G1}] (I3)")
        if self.K != self.G1 - self.stages:
            raise ClipUserInvariantError(
                f"K={self.K} != G1 - stages = {self.G1} - {self.stages} (I3)")
        if len(self.suppressions) != self.n_suppressions:
            raise ClipUserInvariantError("suppression count mismatch")


def clip_user(
    A: Any,
    U: float,
    eps: float,
    *,
    E_target: float | None = None,
    variant: str = "corrected",
    split: tuple[float, float] = (0.5, 0.5),
    weights: tuple[float, float] = (1.0, 1.0),
    protect_min_grid: bool = True,
    k_floor: int = 1,
    rollback_partial_stage: bool = False,
    tol: float = 1e-12,
    trace: bool = False,
) -> ClipUserResult:
    """Run Clip-User, Algorithm 1 with fixes E2/E4/E5/A2-A6: spec §3.2.

    Parameters
    ----------
    A : array-like or scipy.sparse matrix, shape (L, G)
        Occupancy array: ``A[l, g]`` records of user ``l`` in cell ``g`` (integers >= 0). Users are
        processed in the order (-initial occupancy, row index), spec §1.1.
    U : float
        Public width of the value range ``[0, U]``.
    eps : float
        Per-cell epsilon; the release after suppression is ``K * eps``-DP (Prop V.1).
    E_target : float, optional
        Error budget; default the baseline worst case ``max_g E0[g]`` (Alg. 1 lines 2-3).
    variant : {"corrected", "paper_statement"}
        Variance-bias bound (Thm IV.2). ``"paper_statement"`` is the invalid printed form (E1),
        for reproduction only.
    split, weights : pair of float
        Budget split and error weights of (mean, variance), spec §7.4.
    protect_min_grid : bool
        Never suppress in ``argmin_g E0[g]`` (paper §VI-A3, spec A1).
    k_floor : int
        Stop once ``K <= k_floor`` (spec A2).
    rollback_partial_stage : bool
        Undo the suppressions of a stage that halts part-way (spec A4); same K, error <= paper's.
    tol : float
        Relative tolerance of the acceptance test ``E_g <= E (1 + tol)`` (spec A6).
    trace : bool
        Record, per processed user, the candidate errors (for golden-trace tests).

    Returns
    -------
    ClipUserResult
    """
    check_error_params(U, eps, variant, split, weights)
    if not (isinstance(k_floor, (int, np.integer)) and k_floor >= 1):
        raise ValueError(f"k_floor must be an integer >= 1, got {k_floor!r}")
    if E_target is not None and not (math.isfinite(E_target) and E_target > 0):
        raise ValueError(f"E_target must be a finite number > 0 or None, got {E_target!r}")
    dense_input = not sp.issparse(A)
    M = as_occupancy(A)
    L, G = M.shape

    occ0 = np.diff(M.indptr)
    order = np.lexsort((np.arange(L), -occ0))           # paper's user order (spec §1.1)
    n = np.bincount(M.indices, weights=M.data, minlength=G).astype(np.int64)
    mstar = np.zeros(G, np.int64)
    np.maximum.at(mstar, M.indices, M.data)
    E0 = grid_error(n, n, mstar, U, eps, variant, split, weights)
    E = float(np.max(E0)) if E_target is None else float(E_target)
    protected = int(np.argmin(E0)) if protect_min_grid else -1
    limit = E * (1.0 + tol)
    G1 = int(occ0.max())

    # per-cell state: retained total c[g] and a multiset of retained counts (for Gamma*_g)
    c = n.tolist()
    tops = _TopCounts(M)
    # per-user retained cells (Python lists: the loop below is sequential by nature)
    indptr, indices, data = M.indptr, M.indices, M.data
    ind_l, dat_l, ptr_l = indices.tolist(), data.tolist(), indptr.tolist()
    cells_of = [ind_l[a:b] for a, b in zip(ptr_l[:-1], ptr_l[1:], strict=False)]
    vals_of = [dat_l[a:b] for a, b in zip(ptr_l[:-1], ptr_l[1:], strict=False)]
    occ = occ0.copy()
    rank = np.empty(L, np.int64)
    rank[order] = np.arange(L)

    err = scalar_grid_error(U, eps, variant, split, weights)
    n_list = n.tolist()
    max_without = tops.max_without

    def cand_error(g: int, v: int) -> float:
        return err(n_list[g], c[g] - v, max_without(g, v))

    suppressions: list[tuple[int, int]] = []
    trace_rows: list[tuple[int, int, dict[int, float]]] = []
    stages = 0
    while True:
        K = int(occ.max())
        if K <= k_floor:
            break
        Lt = np.flatnonzero(occ == K)
        Lt = Lt[np.argsort(rank[Lt], kind="stable")]   # ascending paper index (line 6)
        done: list[tuple[int, int, int]] = []
        halted = False
        for u in Lt.tolist():
            best_e, best_g, best_v = math.inf, -1, 0
            errs: dict[int, float] = {}
            for g, v in zip(cells_of[u], vals_of[u], strict=True):
                if g == protected:
                    continue
                e = err(n_list[g], c[g] - v, max_without(g, v))
                if trace:
                    errs[g] = e
                if e < best_e or (e == best_e and g < best_g):
                    best_e, best_g, best_v = e, g, v
            if trace:
                trace_rows.append((stages + 1, int(u), errs))
            if best_g < 0 or best_e > limit:                # line 12 (strict >), or no candidate
                halted = True
                break
            # accept: suppress all of u's records in best_g (lines 17-18)
            c[best_g] -= best_v
            tops.remove(best_g, best_v)
            k = cells_of[u].index(best_g)
            del cells_of[u][k], vals_of[u][k]
            occ[u] -= 1
            done.append((u, best_g, best_v))
            suppressions.append((int(u), int(best_g)))
            if cand_error(best_g, 0) > limit:                # I1 for the changed cell
                raise ClipUserInvariantError(
                    f"cell {best_g} error {cand_error(best_g, 0)} exceeds E={E} after a "
                    "suppression (I1)")
        if halted:
            if rollback_partial_stage:
                for u, g, v in done:
                    c[g] += v
                    tops.add(g, v)
                    cells_of[u].append(g)
                    vals_of[u].append(v)
                    occ[u] += 1
                del suppressions[len(suppressions) - len(done):]
            break
        stages += 1

    Gmat = _retained_matrix(M, suppressions)
    K = int(np.diff(Gmat.indptr).max()) if Gmat.nnz else 0
    c_arr = np.asarray(c, np.int64)
    gstar = tops.current_max()
    E_final = grid_error(n, c_arr, gstar, U, eps, variant, split, weights)
    _check_invariants(M, Gmat, c_arr, E0, E_final, E, tol, K, occ)
    return ClipUserResult(
        K=K, G1=G1, E=E, E0=E0, E_final=E_final, stages=stages,
        n_suppressions=len(suppressions), n=n, gamma_star=gstar,
        Gamma=Gmat.toarray() if dense_input else Gmat,
        suppressions=tuple(suppressions), trace=tuple(trace_rows))


class _TopCounts:
    """Per-cell multiset of retained user counts supporting removal and 'max without one user'."""

    def __init__(self, M: sp.csr_matrix) -> None:
        C = M.tocsc()
        self.vals: list[list[int]] = []
        self.mult: list[list[int]] = []
        self.ptr: list[int] = []
        self.pos: list[dict[int, int]] = []
        for g in range(M.shape[1]):
            u, m = np.unique(C.data[C.indptr[g]:C.indptr[g + 1]], return_counts=True)
            vals, mult = u[::-1].tolist(), m[::-1].tolist()
            self.vals.append(vals)
            self.mult.append(mult)
            self.ptr.append(0)
            self.pos.append({v: i for i, v in enumerate(vals)})

    def _next(self, g: int, i: int) -> int:
        mult = self.mult[g]
        while i < len(mult) and mult[i] == 0:
            i += 1
        return i

    def max_without(self, g: int, v: int) -> int:
        """Largest retained count in cell g once one user with count v (0: nobody) is removed."""
        p = self.ptr[g]
        vals = self.vals[g]
        if p >= len(vals):
            return 0
        if v == vals[p] and self.mult[g][p] == 1:
            q = self._next(g, p + 1)
            return vals[q] if q < len(vals) else 0
        return vals[p]

    def remove(self, g: int, v: int) -> None:
        i = self.pos[g][v]
        self.mult[g][i] -= 1
        self.ptr[g] = self._next(g, self.ptr[g])

    def add(self, g: int, v: int) -> None:
        i = self.pos[g][v]
        self.mult[g][i] += 1
        self.ptr[g] = min(self.ptr[g], i)

    def current_max(self) -> np.ndarray:
        return np.asarray([self.max_without(g, 0) for g in range(len(self.vals))], np.int64)


def _retained_matrix(M: sp.csr_matrix, suppressions: list[tuple[int, int]]) -> sp.csr_matrix:
    if not suppressions:
        return M.copy()
    S = np.asarray(suppressions, np.int64)
    drop = sp.csr_matrix((np.ones(len(S), np.int8), (S[:, 0], S[:, 1])), shape=M.shape)
    keep = sp.csr_matrix(M - M.multiply(drop))
    keep.eliminate_zeros()
    keep.sort_indices()
    return keep


def _check_invariants(M: sp.csr_matrix, Gmat: sp.csr_matrix, c: np.ndarray, E0: np.ndarray,
                      E_final: np.ndarray, E: float, tol: float, K: int, occ: np.ndarray) -> None:
    """Spec §3.4 I1-I3 on the final state (I4/I5 are properties checked by tests)."""
    # I2: Gamma in {0, A}, every cell keeps >= 1 record, c matches the matrix
    kept = Gmat.multiply(M != 0)
    if (kept != Gmat).nnz or ((Gmat != 0).multiply(M != Gmat)).nnz:
        raise ClipUserInvariantError("Gamma has an entry outside {0, A[l, g]} (I2)")
    col = np.bincount(Gmat.indices, weights=Gmat.data, minlength=M.shape[1]).astype(np.int64)
    if np.any(col != c) or np.any(c < 1):
        raise ClipUserInvariantError("a cell was emptied or its retained total drifted (I2)")
    # I1: no cell's error above max(E, its own baseline)
    if np.any(E_final > np.maximum(E, E0) * (1 + tol)):
        raise ClipUserInvariantError("a cell's worst-case error exceeds the target (I1)")
    # I3: occupancies never rise
    if np.any(np.diff(Gmat.indptr) > np.diff(M.indptr)) or K != int(occ.max()):
        raise ClipUserInvariantError("an occupancy rose or K is inconsistent (I3)")
