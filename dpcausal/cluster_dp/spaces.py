"""The public, finite response space Y and binning of continuous outcomes (spec cluster_dp.md
§1.1, §2.7)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class ResponseSpace:
    """A public finite response space Y (sorted, unique values; K >= 2).

    Parameters
    ----------
    values : array-like
        The possible outcome values. They must be public and chosen without looking at the data
        (spec §2.7, §6 A9).
    """

    values: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        raw = np.asarray(self.values)
        if raw.dtype.kind not in "biuf":
            raise ValueError(
                f"values must be numbers, got dtype {raw.dtype} ({self.values!r}); numeric "
                "strings are not parsed"
            )
        v = raw.astype(float).ravel()
        if v.size and not np.all(np.isfinite(v)):
            raise ValueError(f"values must be finite numbers, got {self.values!r}")
        v = np.unique(v)
        if v.size < 2:
            raise ValueError(
                f"values must hold at least 2 distinct outcomes (K >= 2), got {self.values!r}; "
                "a one-point response space carries no information to estimate from"
            )
        v.setflags(write=False)
        object.__setattr__(self, "values", v)

    @property
    def K(self) -> int:
        """Number of response values |Y|."""
        return int(self.values.size)

    @property
    def B(self) -> float:
        """B = max |y| over Y (spec §1.1)."""
        return float(np.max(np.abs(self.values)))

    @property
    def l2sq(self) -> float:
        """||yvec||_2^2 = sum_y y^2 (spec §1.1)."""
        return float(np.sum(self.values**2))

    @property
    def width(self) -> float:
        """max Y - min Y, the substitution sensitivity of one outcome (spec §6 E3)."""
        return float(self.values[-1] - self.values[0])

    def index(self, y: np.ndarray, name: str = "outcome") -> np.ndarray:
        """Indices 0..K-1 of the values ``y`` in Y; raise if any value is not in Y."""
        y = np.asarray(y, dtype=float)
        idx = np.clip(np.searchsorted(self.values, y), 0, self.K - 1)
        bad = self.values[idx] != y
        if np.any(bad):  # the message names the public space only, never a data value
            raise ValueError(
                f"{name} has values outside the response space Y = {self.values.tolist()}; "
                "bin continuous outcomes first with bin_continuous(x, edges, reps) using public "
                "edges"
            )
        return idx

    def nearest(self, y: np.ndarray, default: float | None = None) -> np.ndarray:
        """Indices 0..K-1 of ``y`` in Y, an outcome outside Y mapped by a public rule instead of
        refused (a refusal would tell the value): to ``default`` if given (a value of Y), else to
        the nearest value of Y (ties: the lower one; -inf/+inf: the extremes), a missing outcome
        (NaN) to the value of Y nearest the middle of Y's range. Each outcome is mapped on its own,
        so replacing one unit's outcome changes one index only: the label-DP guarantee holds."""
        y = np.asarray(y, dtype=float)
        v = self.values
        if default is None:
            mid = (v[0] + v[-1]) / 2
            x = np.clip(np.where(np.isnan(y), mid, y), v[0], v[-1])
            hi = np.clip(np.searchsorted(v, x), 1, self.K - 1)
            return np.where(x - v[hi - 1] <= v[hi] - x, hi - 1, hi)
        if not np.any(v == default):
            raise ValueError(f"the out-of-space value {default!r} must be a value of the response "
                             f"space Y = {v.tolist()}")
        idx = np.clip(np.searchsorted(v, y), 0, self.K - 1)
        return np.where(v[idx] == y, idx, int(np.flatnonzero(v == default)[0]))

    def __repr__(self) -> str:
        return f"ResponseSpace(values={self.values.tolist()})"


def bin_continuous(x: np.ndarray, edges: np.ndarray, reps: np.ndarray | None = None) -> np.ndarray:
    """Map continuous outcomes to public representatives, clipping to the outer bins (spec §2.7).

    Parameters
    ----------
    x : array of float
        Raw outcomes.
    edges : array of float
        Public, data-independent, strictly increasing bin edges (len(edges) >= 3 gives K >= 2 bins).
        Values below ``edges[0]`` go to the first bin, values above ``edges[-1]`` to the last.
    reps : array of float, optional
        One representative value per bin; defaults to the bin midpoints.

    Returns
    -------
    numpy.ndarray
        The representative of each value's bin; use ``ResponseSpace(reps)`` as the space.
    """
    edges = np.asarray(edges, dtype=float)
    if edges.ndim != 1 or edges.size < 3 or not np.all(np.diff(edges) > 0):
        raise ValueError(
            f"edges must be a strictly increasing 1-d array of >= 3 public values, got {edges!r}"
        )
    if reps is None:
        reps = (edges[:-1] + edges[1:]) / 2
    reps = np.asarray(reps, dtype=float)
    if reps.shape != (edges.size - 1,):
        raise ValueError(
            f"reps must have len(edges) - 1 = {edges.size - 1} values, got {reps.size}"
        )
    x = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(x)):
        raise ValueError("x must be finite; drop or impute missing outcomes before binning")
    b = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, edges.size - 2)
    return reps[b]
