"""Hand-written, loop-based references for the user-level tests (no code from dpcausal)."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import numpy as np

PROTOTYPE = Path("/work/shared/specs/user_level_clip_prototype.py")


def load_prototype():
    """The spec's throwaway prototype, RUN as an oracle (never copied); None if absent."""
    if not PROTOTYPE.exists():
        return None
    spec = importlib.util.spec_from_file_location("ul_prototype", PROTOTYPE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
    return [i for blk, k in zip(blocks(counts), kept) for i in blk[:k]]


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
