"""``split_folds`` (public fold plan) and ``fit_fold`` (one chunk of folds per task, cached)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from conf.models import ReleaseConfig
from tasks.build import build_estimator
from tasks.model_store import StoredChunkPolicy, chunk_key, digest, save_chunk


@dataclass(frozen=True)
class FoldPlan:
    """Public fold assignment (a function of n, K, the fold mode and the fold seed only)."""

    fold_ids: np.ndarray = field(repr=False)
    n_folds: int
    chunks: tuple[tuple[int, ...], ...]
    plan: str  # digest of fold_ids: part of every fit's cache key


@task(name="split_folds", persist_result=False, cache_policy=NO_CACHE)
def split_folds(config: ReleaseConfig, n: int, workers: int = 2) -> FoldPlan:
    """Fold ids and chunks of folds per fit task (default: about 4 tasks per worker)."""
    est = build_estimator(config)
    fold_ids = np.ascontiguousarray(est.make_folds(n))
    K = est.resolved_n_folds(n)
    size = config.folds_per_task or max(1, math.ceil(K / (4 * workers)))
    chunks = tuple(tuple(range(s, min(s + size, K))) for s in range(0, K, size))
    return FoldPlan(fold_ids=fold_ids, n_folds=K, chunks=chunks, plan=digest(fold_ids))


@task(name="fit_fold", task_run_name="fit_fold[{label}]", cache_policy=StoredChunkPolicy(),
      retries=0)
def fit_fold(X: np.ndarray, A: np.ndarray, Y: np.ndarray, fold_ids: np.ndarray,
             folds: list[int], config: ReleaseConfig, data_fp: str, plan: str, models: str,
             store: str, label: str = "") -> str:
    """Fit the nuisances of ``folds`` (each on its own fold only), store them privately and
    return the store key. The cache key is (data fingerprint, plan, folds, model specs, code
    version): see :mod:`tasks.model_store`."""
    est = build_estimator(config, for_fitting=True)
    fitted = est.fit_folds(X, A, Y, fold_ids, ks=folds)
    key = chunk_key(data_fp, plan, folds, models)
    save_chunk(store, key, fitted)
    return key


def models_key(specs: dict[str, Any]) -> str:
    return digest(specs)
