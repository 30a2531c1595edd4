"""The occupancy array A (users x cells record counts) as a validated sparse matrix.

Spec ``user_level_clip.md`` §1.1: ``A[l, g]`` is the number of records unit ``l`` has in cell
``g``.
It is public by assumption (§7.2-1), so everything computed from it costs no privacy budget.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import scipy.sparse as sp


def as_occupancy(A: Any, name: str = "A") -> sp.csr_matrix:
    """Return ``A`` (dense array-like or scipy.sparse) as a canonical int64 CSR matrix.

    Refuses non-integer, negative or non-2-D input, and cells (columns) without any record.
    """
    if sp.issparse(A):
        M = sp.csr_matrix(A)
        data = M.data
    else:
        arr = np.asarray(A)
        if arr.ndim != 2:
            raise ValueError(f"{name} must be a 2-D users x cells array of counts, "
                             f"got shape {arr.shape}")
        M = sp.csr_matrix(arr)
        data = M.data
    if M.shape[0] < 1 or M.shape[1] < 1:
        raise ValueError(f"{name} must have at least one user and one cell, got shape {M.shape}")
    if data.dtype.kind not in "iub":
        if data.dtype.kind == "f" and np.all(np.isfinite(data)) and np.all(data == np.round(data)):
            data = data.astype(np.int64)
        else:
            raise TypeError(
                f"{name} must hold integer record counts, got dtype {data.dtype}; "
                "pass counts as integers")
    if data.size and data.min() < 0:
        raise ValueError(
            f"{name} has negative counts (min {int(data.min())}); counts of records must be >= 0")
    M = sp.csr_matrix((data.astype(np.int64), M.indices, M.indptr), shape=M.shape)
    M.sum_duplicates()
    M.eliminate_zeros()
    M.sort_indices()
    n = np.bincount(M.indices, weights=M.data, minlength=M.shape[1])
    empty = np.flatnonzero(n == 0)
    if empty.size:
        raise ValueError(
            f"{name} has cells without any record (columns {empty[:5].tolist()}...); "
            "drop empty cells before planning: they cannot be released")
    return M


def occupancy_hash(M: sp.csr_matrix) -> str:
    """SHA-256 of a canonical CSR occupancy array (compare against a registered public A, §7.3)."""
    h = hashlib.sha256()
    h.update(np.asarray(M.shape, np.int64).tobytes())
    for part in (M.indptr, M.indices, M.data):
        h.update(np.ascontiguousarray(part, dtype=np.int64).tobytes())
    return h.hexdigest()
