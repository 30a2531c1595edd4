"""Public fold assignment: spec dp_ate_ensemble.md §2.2 step 1 and §1.3 ("implementation
consequences").

Folds depend only on public quantities (n, K, a seed), never on data values, so that under
replace-one neighbouring the changed record keeps its fold.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike


def make_folds(
    n: int,
    n_folds: int,
    folds: str | ArrayLike = "shuffle",
    random_state: int | np.random.SeedSequence | np.random.Generator | None = None,
    block_folds: int | None = None,
) -> np.ndarray:
    """Fold id (0..K-1) of every row: spec §2.2 step 1 (``np.array_split`` of a public order);
    with ``block_folds`` K' (spec §2.5b), the order is first split into B = K / K' blocks
    (sizes differing by at most one) and each block into K' folds, fold ``b K' + j`` being
    fold j of block b. ``block_folds=None`` or K gives B = 1, the unchanged split.

    Parameters
    ----------
    n, n_folds : number of rows and folds K (2 <= K <= n // 2).
    folds : ``"secret"`` (array_split of a uniformly random permutation drawn from the generator
        ``random_state``: a uniformly random balanced assignment, independent of the row order
        and of the data; a release passes :func:`dpcausal.noise.secure_rng` and keeps it
        secret), ``"shuffle"`` (the same with a seed; public, so a function of row positions:
        evaluation only), ``"contiguous"`` (array_split of ``range(n)``, as the
        authors' code; evaluation only), or an int array of fold ids given by the user (it must
        itself be public, e.g. a keyed hash of a declared record id).
    """
    check_n_folds(n, n_folds)
    if isinstance(folds, str):
        if folds == "contiguous":
            order = np.arange(n)
        elif folds in ("secret", "shuffle"):
            order = np.random.default_rng(random_state).permutation(n)
        else:
            raise ValueError(
                "folds must be 'secret', 'shuffle', 'contiguous' or an int array of fold ids, "
                f"got {folds!r}"
            )
        per_block = n_folds if block_folds is None else block_folds
        if n_folds % per_block:
            raise ValueError(f"block_folds={block_folds} must divide n_folds={n_folds}")
        fold_ids = np.empty(n, dtype=np.int64)
        for b, block in enumerate(np.array_split(order, n_folds // per_block)):
            for k, rows in enumerate(np.array_split(block, per_block)):
                fold_ids[rows] = b * per_block + k
        return fold_ids
    fold_ids = np.asarray(folds)
    if fold_ids.shape != (n,) or not np.issubdtype(fold_ids.dtype, np.integer):
        raise ValueError(
            f"folds as an array must hold one integer fold id per row (shape ({n},)), "
            f"got dtype {fold_ids.dtype} and shape {fold_ids.shape}"
        )
    present = np.unique(fold_ids)
    if present.size != n_folds or present[0] != 0 or present[-1] != n_folds - 1:
        raise ValueError(
            f"folds array must use every fold id 0..{n_folds - 1} (n_folds={n_folds}); "
            f"found {present.size} distinct ids in [{present[0]}, {present[-1]}]"
        )
    return fold_ids.astype(np.int64, copy=False)


def fold_rows(fold_ids: np.ndarray, k: int) -> np.ndarray:
    """Row indices of fold k (ascending)."""
    return np.flatnonzero(fold_ids == k)


def check_n_folds(n: int, n_folds: Any) -> None:
    """Refuse a number of folds K outside ``2 <= K <= n // 2`` (every fold holds at least 2
    rows): public facts only (n, K), so it runs before any charge. The one check of ``n_folds``
    (:func:`make_folds` and :func:`dpcausal.ate.params.check_params` call it)."""
    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)):
        raise TypeError(f"n_folds must be an integer in [2, n // 2] = [2, {n // 2}], got "
                        f"{n_folds!r} ({type(n_folds).__name__})")
    if n_folds < 2:
        raise ValueError(f"n_folds must be >= 2 (K=2 is plain cross-fitting), got {n_folds}")
    if n_folds > n // 2:
        raise ValueError(
            f"n_folds={n_folds} is too large for n={n}: each fold needs at least 2 rows; "
            f"use n_folds <= {n // 2} (PrivateATE also takes n_folds='auto', the planner's "
            "choice: dpcausal.ate.planner.auto_n_folds)"
        )
