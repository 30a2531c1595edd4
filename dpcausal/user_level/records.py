"""From a record table to the public occupancy: the validated (unit x cell) counts, the records'
order, the kept-record mask and the occupancy's fingerprint; and the public rule for values
(spec ``user_level_clip.md`` §3.7, §7.2-§7.3)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from dpcausal.user_level.occupancy import as_occupancy, occupancy_hash


def clamp_values(y: np.ndarray, a: float, b: float) -> np.ndarray:
    """The public rule for values: clamped to the public bounds ``[a, b]`` (the
    sensitivities of spec §3.7 assume values in them), a missing value (NaN) replaced by the
    midpoint ``(a + b) / 2``. Replacing one user's values keeps every value in ``[a, b]``, so
    the release's guarantee is unchanged and no value is ever refused."""
    return np.clip(np.where(np.isnan(y), (a + b) / 2, y), a, b)


def as_list(cell: str | Sequence[str]) -> list[str]:
    return [cell] if isinstance(cell, str) else list(cell)


@dataclass(frozen=True)
class SortedRecords:
    """Row permutation sorting records by (unit, cell, order, row) and the sorted codes."""

    order: np.ndarray
    unit_codes: np.ndarray
    cell_codes: np.ndarray


def occupancy_from_records(records: Any, unit: str, cell: str | Sequence[str],
                           order: str | None, record: str | None
                           ) -> tuple[sp.csr_matrix, pd.Index, pd.DataFrame, SortedRecords]:
    """Validated occupancy A (units sorted by id x cells sorted by key) from the record table."""
    if not isinstance(records, pd.DataFrame):
        raise TypeError(f"records must be a pandas DataFrame, got {type(records).__name__}")
    if len(records) == 0:
        raise ValueError("records is empty: nothing to release")
    cols = as_list(cell)
    if not cols:
        raise ValueError("cell must name at least one column")
    for name, col in [("unit", unit)] + [("cell", c) for c in cols] + (
            [("order", order)] if order is not None else []) + (
            [("record", record)] if record is not None else []):
        if col not in records.columns:
            raise ValueError(f"{name}={col!r} is not a column of records "
                             f"(columns: {list(records.columns)})")
    if unit in cols:
        raise ValueError(f"unit={unit!r} cannot also be a cell column")
    miss = records[unit].isna()
    if miss.any():
        raise ValueError(
            f"unit column {unit!r} has {int(miss.sum())} missing ids (first at row "
            f"{int(np.flatnonzero(miss.to_numpy())[0])}); every record needs its privacy unit, "
            "else one person's records could be counted as several units")
    cmiss = records[cols].isna().any(axis=1)
    if cmiss.any():
        raise ValueError(f"cell columns {cols} have missing keys in {int(cmiss.sum())} rows; "
                         "every record must lie in exactly one cell")
    if order is not None and records[order].isna().any():
        raise ValueError(f"order column {order!r} has missing values; fill them (e.g. with a "
                         "record id) so the kept records do not depend on values")
    if record is not None:
        per = records.groupby(record, sort=False)[cols].nunique()
        over = per[(per > 1).any(axis=1)]
        if len(over):
            raise ValueError(
                f"cells overlap: {len(over)} record ids (e.g. {over.index[0]!r}) fall in more "
                "than one cell; cells must be disjoint at the record level (spec §7.2-3)")
    ucodes, units = pd.factorize(records[unit], sort=True)
    grp = records.groupby(cols, sort=True, dropna=False)
    ccodes = grp.ngroup().to_numpy(np.int64)
    keys = grp.size().reset_index()[cols]
    L, G = len(units), len(keys)
    ucodes = ucodes.astype(np.int64)
    A = as_occupancy(sp.csr_matrix((np.ones(len(records), np.int64), (ucodes, ccodes)),
                                   shape=(L, G)))
    # sort by (unit, cell, order, row): stable argsorts, least significant key first
    perm = np.arange(len(records))
    if order is not None:
        perm = np.argsort(records[order].to_numpy(), kind="stable")
    key = ucodes * G + ccodes
    perm = perm[np.argsort(key[perm], kind="stable")]
    return A, units, keys, SortedRecords(perm, ucodes[perm], ccodes[perm])


def keep_mask(perm: SortedRecords, retained: np.ndarray) -> np.ndarray:
    """For records sorted by (unit, cell, order): keep the first ``retained[group]`` of each
    group."""
    u, g = perm.unit_codes, perm.cell_codes
    new = np.ones(u.size, bool)
    new[1:] = (u[1:] != u[:-1]) | (g[1:] != g[:-1])
    grp = np.cumsum(new) - 1                          # index of the non-zero of A (CSR order)
    start = np.flatnonzero(new)
    rank = np.arange(u.size) - start[grp]
    return rank < retained[grp]


def column_max(M: sp.csr_matrix) -> np.ndarray:
    out = np.zeros(M.shape[1], np.int64)
    np.maximum.at(out, M.indices, M.data)
    return out


def aligned_counts(A: sp.csr_matrix, B: sp.csr_matrix) -> np.ndarray:
    """Entries of B (structure within A's) laid out along A's CSR non-zeros (0 where B has none)."""
    G = A.shape[1]
    key_a = np.repeat(np.arange(A.shape[0], dtype=np.int64), np.diff(A.indptr)) * G + A.indices
    B = B.copy()
    B.eliminate_zeros()
    B.sort_indices()
    key_b = np.repeat(np.arange(B.shape[0], dtype=np.int64), np.diff(B.indptr)) * G + B.indices
    out = np.zeros(A.nnz, np.int64)
    out[np.searchsorted(key_a, key_b)] = B.data
    return out


def fingerprint(A: sp.csr_matrix, units: pd.Index, keys: pd.DataFrame) -> str:
    h = hashlib.sha256(occupancy_hash(A).encode())
    h.update(pd.util.hash_pandas_object(pd.Series(units), index=False).to_numpy().tobytes())
    h.update(pd.util.hash_pandas_object(keys, index=False).to_numpy().tobytes())
    return h.hexdigest()
