"""The core kind's extra step: its fold fits, in chunks on the configured runner (spec
dp_ate_ensemble.md §2.2 step 2), kept in the curator's private store in evaluation mode.

:class:`StoredFoldFits` is a :class:`dpcausal.PrivateATE` whose ``fit_folds`` maps chunks of folds
on the runner (threads, or Dask). It runs inside the charged release (after the reservation), so
every fit touches data only once the release is paid for. Where the fits are kept (issue 18 item
10, issue 41 §2):

* release mode: in memory only, for the aggregation of the same release. Folds are a fresh
  secret draw per release, and a release id is drawn for at most once (the ledger returns a
  committed id's release and refuses to redo a reserved one), so a stored fit could never be
  read again: storing them cost a 10^6-row release 0.9 s (pickling 4,750 folds' models, 6 MB)
  and left fold models on disk for nothing;
* evaluation mode: in the private store, each chunk under :func:`store.chunk_key` of the keyed
  hash of the data fitted, in row order (:func:`store.content_fingerprint`), so a rerun with
  the same seeded folds reuses them.

Each chunk is handed its own folds' rows only (:func:`chunk_rows`): handed every row, each
chunk's call transformed, sorted and copied all n rows, and the chunked fits of a 10^6-row
release took 22-26 s on 2 threads against 8.5 s for the library's one call; 7.5 s since (load
7, 2 cores).

Fold models are fitted once for every estimator type: all three nuisances with a propensity clip
below any valid eta_c (aggregation clips again with the real eta_c, and clip(clip(p, tiny), eta)
== clip(p, eta)), so evaluation reruns that change only the estimator, zeta, bounds or CI reuse
them. A fit that raises falls back to the fold-local constant of spec §2.7 (the library does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np

from conf.models import RunnerConfig
from dpcausal import PrivateATE
from dpcausal.ate.nuisance import FoldModels, take_rows
from store import chunk_key, digest, load_chunk, save_chunk
from tasks.runners import chunk_executor

_FIT_ESTIMATOR = "aipw"
_FIT_PROPENSITY_CLIP = 1e-12


@dataclass(frozen=True)
class FitPlan:
    """Where and how the fold fits run: the store key's ``basis``, the models' public spec,
    the private store folder (None: the fits stay in memory, release mode), the runner, the
    chunk size (None: about 4 chunks per worker) and a listener told ``(folds done, of which
    reused)`` as chunks finish."""

    basis: str
    models: str
    store: str | None
    runner: RunnerConfig
    folds_per_task: int | None = None
    on_chunk: Callable[[int, int], None] | None = None


class StoredFoldFits(PrivateATE):
    """PrivateATE with chunked fold fits on a runner and a private fit store (see module doc).
    Built by :func:`with_stored_fits`; its public parameters are those of the wrapped one."""

    fit_plan_: FitPlan

    def fit_folds(self, X: Any, A: np.ndarray, Y: np.ndarray, fold_ids: np.ndarray,
                  ks: Sequence[int] | None = None) -> list[FoldModels]:
        plan = self.fit_plan_
        # the release passes ks: its rows may exclude those without a usable treatment or
        # outcome, and its covariates carry indicator columns (dpcausal.missing)
        folds = (list(range(self.resolved_n_folds(X.shape[0], X.shape[1]))) if ks is None
                 else list(ks))
        size = plan.folds_per_task or max(1, math.ceil(len(folds) / (4 * plan.runner.max_workers)))
        chunks = [folds[s:s + size] for s in range(0, len(folds), size)]
        fold_plan = digest(np.ascontiguousarray(fold_ids))
        fitter = PrivateATE(**{**self.get_params(deep=False), "estimator": _FIT_ESTIMATOR,
                               "propensity_clip": _FIT_PROPENSITY_CLIP})
        with chunk_executor(plan.runner) as executor:
            futures = {executor.submit(
                fit_chunk, fitter, take_rows(X, rows), A[rows], Y[rows], fold_ids[rows], chunk,
                plan.store, chunk_key(plan.basis, fold_plan, chunk, plan.models)): i
                for i, (chunk, rows) in enumerate(zip(chunks, chunk_rows(fold_ids, chunks),
                                                      strict=True))}
            results: list[list[FoldModels]] = [[] for _ in chunks]
            for done in as_completed(futures):
                models, reused = done.result()
                results[futures[done]] = models
                if plan.on_chunk is not None:
                    plan.on_chunk(len(models), len(models) if reused else 0)
        return [fm for chunk in results for fm in chunk]


def chunk_rows(fold_ids: np.ndarray, chunks: list[list[int]]) -> list[np.ndarray]:
    """The rows of each chunk's folds, in row order: a chunk's fits see its own folds' rows
    only, so what each call copies and transforms is the chunk's share of the data, not all of
    it (each fold is fitted on its own rows whatever else is passed: the same models). Rows of
    a fold in no chunk are in none."""
    chunk_of = np.full(max(int(fold_ids.max(initial=0)), *map(max, chunks)) + 1, len(chunks))
    for i, chunk in enumerate(chunks):
        chunk_of[chunk] = i
    which = chunk_of[fold_ids]
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(len(chunks) + 1))
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def fit_chunk(fitter: PrivateATE, X: Any, A: np.ndarray, Y: np.ndarray, fold_ids: np.ndarray,
              folds: list[int], store: str | None, key: str) -> tuple[list[FoldModels], bool]:
    """One chunk's fold models from the store, or fitted (each on its own fold) and stored;
    with no store, fitted only; returns ``(models, reused)``."""
    stored = None if store is None else load_chunk(store, key)
    if stored is not None:
        return stored, True
    models = fitter.fit_folds(X, A, Y, fold_ids, ks=folds)
    if store is not None:
        save_chunk(store, key, models)
    return models, False


def with_stored_fits(mechanism: PrivateATE, plan: FitPlan) -> StoredFoldFits:
    """``mechanism`` (same public parameters) with its fold fits run as :class:`FitPlan` says."""
    out = StoredFoldFits(**mechanism.get_params(deep=False))
    out.fit_plan_ = plan
    return out
