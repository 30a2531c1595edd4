"""Keyed identities of data, which the ledger binds to one dataset id (issue 26 §3, issue 32
item 7): the library's :meth:`dpcausal.Ledger.fit` and ``charging`` compute them as the CLI does.

Two identities, both keyed with the curator's secret (an HMAC-SHA256, or SipHash for the row
sketch), so whoever reads the ledger learns nothing about the data and cannot confirm a guess:

* :func:`fingerprint`: the exact table, invariant to the order of its rows and columns and to
  the numeric dtype (a shuffled or re-saved copy keeps it);
* :func:`row_sketch`: the k smallest keyed hashes of its distinct rows (bottom-k MinHash), each
  row hashed from the multiset of its cells (free of column names and order) after leaving out
  constant columns. A copy that lacks a few rows, has a few more, is shuffled, or has a constant
  column added or a column renamed shares most of its sketch; an unrelated table shares none.
  The ledger refuses a sketch that shares :data:`NEAR_COPY` or more with another dataset's
  (:func:`near_copy`). The selection is keyed, so rows crafted to push the real ones out of
  the sketch cannot be chosen without the key.

The key lives in the curator's private folder (0700; the file 0600), beside the ledger as the
curator's log does (:mod:`dpcausal.curator_log`): ``<ledger folder>/private/fingerprint.key`` for
a SQLite ledger, else ``<data folder>/private/fingerprint.key``
(:func:`dpcausal.location.data_dir`): for the default ledger that is the CLI's key file.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcausal.location import data_dir

#: Entries of a row sketch (bottom-k): the share of shared rows is estimated to about
#: sqrt(J(1 - J)/k), 0.03 at J = 1/2.
SKETCH_SIZE = 256
#: The prefix that marks a row-sketch entry among a dataset's keyed identities.
SKETCH_PREFIX = "rows:"
#: Two tables whose sketches share this share or more (of the smaller sketch) are held the same
#: data: a copy that differs in up to about a third of its rows.
NEAR_COPY = 0.5
#: Sketches smaller than this (tables of fewer distinct rows, e.g. one binary column) identify
#: nothing: unrelated tables share them. Only the exact fingerprint binds such data.
SKETCH_MIN = 32


def private_folder(ledger_url: str | None = None) -> Path:
    """The curator's private folder (created 0700): beside the SQLite ledger at ``ledger_url``,
    else ``<data folder>/private``."""
    folder = data_dir()
    if ledger_url and ledger_url.startswith("sqlite:///") and ":memory:" not in ledger_url:
        folder = Path(ledger_url.removeprefix("sqlite:///").split("?")[0]).resolve().parent
    path = folder / "private"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(path.stat().st_mode) != 0o700:
        path.chmod(0o700)
    return path


def secret(folder: Path, name: str = "fingerprint.key") -> bytes:
    """A 32-byte secret in ``folder`` (the fingerprint key by default), created once from OS
    entropy (0600)."""
    path = folder / name
    if not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # created concurrently
            return path.read_bytes()
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(32))
    return path.read_bytes()


def fingerprint_key(ledger_url: str | None = None) -> bytes:
    """The curator's fingerprint key for the ledger at ``ledger_url`` (module docstring)."""
    return secret(private_folder(ledger_url))


def keyed_hash(key: bytes, *arrays: np.ndarray) -> str:
    """Keyed content hash of arrays (values, shape and dtype; not the memory layout)."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for arr in arrays:
        arr = np.ascontiguousarray(arr)
        mac.update(f"{arr.dtype.str}{arr.shape}".encode())
        mac.update(arr.tobytes())
    return mac.hexdigest()[:32]


def fingerprint(frame: Any, *, ledger: Any = None, key: bytes | None = None) -> str:
    """The keyed identity of a table (issue 26 §3): invariant to the order of the rows and of
    the columns and to the numeric dtype. The columns are taken in sorted name order, numbers as
    float64 (1 and 1.0 alike), everything else as text; each row is hashed and the row hashes
    are sorted (the rows as a multiset) before the keyed hash.

    Parameters
    ----------
    frame : pandas.DataFrame or array-like
        The table (a 2-D array gets columns named by position).
    ledger : dpcausal.Ledger, optional
        The ledger whose key to use (beside it); default the default ledger's.
    key : bytes, optional
        The curator's key itself (instead of ``ledger``'s).

    Returns
    -------
    str
        32 hex digits.
    """
    canonical = _canonical(as_frame(frame))
    names = np.array([json.dumps(list(canonical.columns))]).astype("U")
    rows = np.sort(pd.util.hash_pandas_object(canonical, index=False).to_numpy())
    if key is None:
        key = fingerprint_key(None if ledger is None else ledger.url)
    return keyed_hash(key, names, rows)


def row_sketch(frame: Any, *, key: bytes, size: int = SKETCH_SIZE) -> tuple[str, ...]:
    """The bottom-``size`` keyed hashes of the table's distinct rows (module docstring), each
    ``"rows:<16 hex digits>"``; empty for a table without a non-constant column.

    A row's unkeyed hash is taken over its sorted cell hashes (numbers as float64, other values
    as text), then keyed with SipHash-2-4 under a key derived from ``key``."""
    canonical = _canonical(as_frame(frame))
    cells = [pd.util.hash_array(canonical[c].to_numpy()) for c in canonical.columns]
    varying = [h for h in cells if h.size and (h != h[0]).any()]
    if not varying:
        return ()
    table = np.sort(np.column_stack(varying), axis=1)
    rows = pd.util.hash_pandas_object(pd.DataFrame(table), index=False).to_numpy()
    sip = base64.b64encode(hmac.new(key, b"row-sketch", hashlib.sha256).digest())[:16].decode()
    keyed = pd.util.hash_array(rows.view("S8").astype(object), hash_key=sip, categorize=False)
    few = 4 * size       # enough candidates for the bottom-size distinct rows, unless many repeat
    smallest = np.unique(np.partition(keyed, few)[:few] if keyed.size > few else keyed)
    if smallest.size < size < keyed.size:
        smallest = np.unique(keyed)
    keyed = smallest
    return tuple(f"{SKETCH_PREFIX}{int(v):016x}" for v in keyed[:size])


def identities(frame: Any, *, key: bytes) -> tuple[str, ...]:
    """What the ledger binds for a table: its :func:`fingerprint` and its :func:`row_sketch`."""
    return (fingerprint(frame, key=key), *row_sketch(frame, key=key))


def near_copy(mine: int, theirs: int, shared: int) -> bool:
    """Whether two row sketches of ``mine`` and ``theirs`` entries, ``shared`` of them in
    common, are of the same data: both hold at least :data:`SKETCH_MIN` entries and the shared
    ones are at least :data:`NEAR_COPY` of the smaller (near 1 for a copy, 0 for unrelated
    data)."""
    smaller = min(mine, theirs)
    return smaller >= SKETCH_MIN and shared >= NEAR_COPY * smaller


def as_frame(data: Any) -> pd.DataFrame:
    """A table from a DataFrame, or from arrays of equal length (a 2-D X, then 1-D columns such
    as A and Y), columns named by position."""
    if isinstance(data, pd.DataFrame):
        return data
    parts = data if isinstance(data, (tuple, list)) else (data,)
    columns: list[Any] = []
    for part in parts:
        if isinstance(part, pd.DataFrame):
            columns.extend(part[c] for c in part.columns)
        else:
            arr = np.asarray(part)
            columns.extend(arr.T if arr.ndim == 2 else [arr])
    return pd.DataFrame({f"c{j}": np.asarray(c) for j, c in enumerate(columns)})


def _canonical(frame: pd.DataFrame) -> pd.DataFrame:
    ordered = frame[sorted(frame.columns, key=str)]
    return pd.DataFrame({str(c): _canonical_column(ordered[c]) for c in ordered},
                        index=pd.RangeIndex(len(ordered)))


def _canonical_column(column: pd.Series) -> pd.Series:
    if pd.api.types.is_bool_dtype(column) or pd.api.types.is_numeric_dtype(column):
        return column.astype("float64").reset_index(drop=True)
    return column.astype(str).reset_index(drop=True)
