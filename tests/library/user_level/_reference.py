"""Hand-written, loop-based references for the user-level tests (no code from dpcausal)."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import numpy as np

ORACLE = Path(__file__).with_name("fixtures") / "prototype_oracle.json"


def load_oracle() -> dict:
    """Outputs of the spec's throwaway prototype, run once by ``fixtures/make_prototype_oracle.py``
    and committed (the tests never need the prototype itself)."""
    return json.loads(ORACLE.read_text())


def array_digest(A) -> dict:
    """Shape, SHA-256 of the int64 bytes and column sums (the oracle's form of a big array)."""
    A = np.ascontiguousarray(np.asarray(A), dtype="<i8")
    h = hashlib.sha256(np.asarray(A.shape, "<i8").tobytes() + A.tobytes()).hexdigest()
    return {"shape": list(A.shape), "sha256": h, "col_sums": A.sum(0).tolist()}


def pop_var(x):
    x = np.asarray(x, float)
    return float(((x - x.mean()) ** 2).mean())


def all_datasets(n, values):
    """Array (len(values)**n, n) of every assignment of `values` to n samples."""
    return np.array(list(itertools.product(values, repeat=n)), float)


def blocks(counts):
    """Sample index ranges of each user, samples laid out user by user."""
    out, start = [], 0
    for m in counts:
        out.append(list(range(start, start + m)))
        start += m
    return out


def brute_sensitivity(stat, counts, values):
    """max over users k and neighbour pairs (differ only in k's samples) of
    |stat(D1) - stat(D2)|."""
    n = sum(counts)
    D = all_datasets(n, values)
    s = np.array([stat(d) for d in D])
    V = len(values)
    s = s.reshape((V,) * n)
    best = 0.0
    for blk in blocks(counts):
        others = [i for i in range(n) if i not in blk]
        t = np.transpose(s, others + blk).reshape(V ** len(others), V ** len(blk))
        best = max(best, float((t.max(axis=1) - t.min(axis=1)).max()))
    return best


def retained_positions(counts, kept):
    """Positions of the first kept[l] samples of each user."""
    return [i for blk, k in zip(blocks(counts), kept, strict=True) for i in blk[:k]]


def brute_bias(counts, kept, values, which):
    """max over datasets of |stat(all samples) - stat(retained samples)|."""
    n = sum(counts)
    pos = retained_positions(counts, kept)
    best = 0.0
    for d in all_datasets(n, values):
        if which == "mean":
            gap = abs(d.mean() - d[pos].mean())
        else:
            gap = abs(pop_var(d) - pop_var(d[pos]))
        best = max(best, gap)
    return best


def T_loop(N, k):
    """max over j <= k of j(N-j)/N^2 by enumeration (two-point variance with j values at U)."""
    return max(j * (N - j) / N**2 for j in range(0, min(k, N) + 1))
