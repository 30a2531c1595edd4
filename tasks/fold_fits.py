"""The core kind's extra step: its fold fits, in chunks on the configured runner, kept in the
curator's private store (spec dp_ate_ensemble.md §2.2 step 2).

:class:`StoredFoldFits` is a :class:`dpcausal.PrivateATE` whose ``fit_folds`` maps chunks of folds
on the runner (threads, or Dask) and keeps each chunk's fitted models in ``store`` under
:func:`store.chunk_key`. It runs inside the charged release (after the reservation), so every fit
touches data only once the release is paid for. The key's basis (issue 18 item 10):

* release mode: the release id. Folds are a fresh secret draw per release, so fits are never
  shared between releases; a retry of the same release reuses them, and no cache state says
  whether the data changed;
* evaluation mode: the keyed hash of the data fitted, in row order
  (:func:`store.content_fingerprint`), so a rerun with the same seeded folds reuses them.

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
from dpcausal.ate.nuisance import FoldModels
from store import chunk_key, digest, load_chunk, save_chunk
from tasks.runners import chunk_executor

_FIT_ESTIMATOR = "aipw"
_FIT_PROPENSITY_CLIP = 1e-12


@dataclass(frozen=True)
class FitPlan:
    """Where and how the fold fits run: the store key's ``basis``, the models' public spec,
    the private store folder, the runner, the chunk size (None: about 4 chunks per worker) and a
    listener told ``(folds done, of which reused)`` as chunks finish."""

    basis: str
    models: str
    store: str
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
                fit_chunk, fitter, X, A, Y, fold_ids, chunk, plan.store,
                chunk_key(plan.basis, fold_plan, chunk, plan.models)): i
                for i, chunk in enumerate(chunks)}
            results: list[list[FoldModels]] = [[] for _ in chunks]
            for done in as_completed(futures):
                models, reused = done.result()
                results[futures[done]] = models
                if plan.on_chunk is not None:
                    plan.on_chunk(len(models), len(models) if reused else 0)
        return [fm for chunk in results for fm in chunk]


def fit_chunk(fitter: PrivateATE, X: Any, A: np.ndarray, Y: np.ndarray, fold_ids: np.ndarray,
              folds: list[int], store: str, key: str) -> tuple[list[FoldModels], bool]:
    """One chunk's fold models from the store, or fitted (each on its own fold) and stored;
    returns ``(models, reused)``."""
    stored = load_chunk(store, key)
    if stored is not None:
        return stored, True
    models = fitter.fit_folds(X, A, Y, fold_ids, ks=folds)
    save_chunk(store, key, models)
    return models, False


def with_stored_fits(mechanism: PrivateATE, plan: FitPlan) -> StoredFoldFits:
    """``mechanism`` (same public parameters) with its fold fits run as :class:`FitPlan` says."""
    out = StoredFoldFits(**mechanism.get_params(deep=False))
    out.fit_plan_ = plan
    return out
