"""Block ensembles: spec dp_ate_ensemble.md §2.5b (cost linear in n: n (K'-1) predictions).

The rows are split into B public blocks of K' folds each (K = B K' folds in all); a row's
ensemble nuisances average the K' - 1 models of its own block that were not trained on its
fold. Fold ``k`` belongs to block ``k // K'``, so fold ids stay global (0..K-1) and the fold
fits are those of the full ensemble; only the aggregation is per block. B = 1 (K' = K) is the
paper's estimator, bit for bit.

:class:`BlockLayout` holds the public facts the calibration needs (§2.5b): n, K, K', the rows of
the largest block ``n_b,max`` and of the smallest fold. A changed record moves only model k(i),
which only the rows of its block outside its fold use: at most ``n_b,max`` rows, each by at most
``kappa/(K'-1)`` (Lemma 3 with K' - 1 models).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from dpcausal.ate.aggregation import EnsembleNuisances
from dpcausal.ate.nuisance import FoldModels, take_rows


@dataclass(frozen=True)
class BlockLayout:
    """Public block facts of one release (spec §2.5b): n rows, K folds in B = K / K' blocks of
    K' folds; ``block_rows`` = n_b,max (rows of the largest block), ``fold_rows`` = rows of the
    smallest fold."""

    n: int
    n_folds: int
    block_folds: int
    block_rows: int
    fold_rows: int

    @property
    def n_blocks(self) -> int:
        return self.n_folds // self.block_folds

    def other_fold_weight(self) -> float:
        """The factor of kappa in the ATE sensitivity: ``n_b,max / (n (K'-1))`` (spec §2.5b);
        exactly ``1/(K-1)`` for B = 1 (Theorem 1)."""
        if self.n_blocks == 1:
            return 1.0 / (self.n_folds - 1)
        return self.block_rows / (self.n * (self.block_folds - 1))


def check_block_folds(n_folds: int, block_folds: int) -> None:
    """K' must be an int in [2, K] dividing K (spec §2.5b: K = B K')."""
    if isinstance(block_folds, bool) or not isinstance(block_folds, (int, np.integer)):
        raise TypeError(f"block_folds must be an int, None or 'auto', got {block_folds!r}")
    if not 2 <= block_folds <= n_folds or n_folds % block_folds:
        raise ValueError(
            f"block_folds={block_folds} must be >= 2 and divide n_folds={n_folds} (K = B K' "
            "with B blocks of K' folds); pass block_folds=None for the full ensemble or "
            "block_folds='auto'")


def balanced_layout(n: int, n_folds: int, block_folds: int) -> BlockLayout:
    """The layout of :func:`dpcausal.ate.folds.make_folds`'s balanced split: B blocks of
    ``floor(n/B)`` or ``ceil(n/B)`` rows, each split into K' folds the same way."""
    check_block_folds(n_folds, block_folds)
    B = n_folds // block_folds
    return BlockLayout(n=n, n_folds=n_folds, block_folds=block_folds,
                       block_rows=math.ceil(n / B), fold_rows=(n // B) // block_folds)


def layout_of(fold_ids: np.ndarray, n_folds: int, block_folds: int) -> BlockLayout:
    """The layout of a given (public) fold-id array, counted from it."""
    check_block_folds(n_folds, block_folds)
    ids = np.asarray(fold_ids)
    folds = np.bincount(ids, minlength=n_folds)
    blocks = np.bincount(ids // block_folds, minlength=n_folds // block_folds)
    return BlockLayout(n=int(ids.size), n_folds=n_folds, block_folds=block_folds,
                       block_rows=int(blocks.max()), fold_rows=int(folds.min()))


def aggregate_blocks(
    X: Any, fold_ids: np.ndarray, fold_models: Sequence[FoldModels], block_folds: int,
    aggregate: Callable[[Any, np.ndarray, Sequence[FoldModels]], EnsembleNuisances],
) -> EnsembleNuisances:
    """Eq. 5 inside each block (spec §2.5b): block b's rows are aggregated by ``aggregate``
    over block b's K' fold models only (renumbered 0..K'-1), and the results put back in row
    order. ``fold_models`` are all K models in fold order."""
    K = len(fold_models)
    check_block_folds(K, block_folds)
    blocks = np.asarray(fold_ids) // block_folds
    order = np.argsort(blocks, kind="stable")
    bounds = np.searchsorted(blocks[order], np.arange(K // block_folds + 1))
    out: dict[str, np.ndarray] = {}
    X_sorted = take_rows(X, order)      # one gather; each block is then a slice of it
    for b in range(K // block_folds):
        rows = order[bounds[b]:bounds[b + 1]]
        if rows.size == 0:
            continue
        first = b * block_folds
        models = [fm.renumbered(fm.k - first) for fm in fold_models[first:first + block_folds]]
        part = aggregate(take_rows(X_sorted, slice(bounds[b], bounds[b + 1])),
                         fold_ids[rows] - first, models)
        for name in ("inv_pi1", "inv_pi0", "mu1", "mu0"):
            values = getattr(part, name)
            if values is not None:
                out.setdefault(name, np.empty(blocks.size))[rows] = values
    return EnsembleNuisances(out.get("inv_pi1"), out.get("inv_pi0"), out.get("mu1"),
                             out.get("mu0"), n_folds=K)
