"""Prefect tasks of the partitioned release (issue 19 §3, issue 28 §3): each task reads ITS
partition itself from the source (a path or fsspec URL the worker reaches, or a SQL query
restricted to the partition's id range: :mod:`tasks.sql_partitions`) and returns only
public facts, fitted fold models or three sums (full ensemble), three sums per block (block
ensembles), or the statistic vector of a release from noisy sums (``dim``, ``lin``), as in-memory
task results.

Nothing is written to a local disk: results are not persisted and never cached
(``persist_result=False``, ``NO_CACHE``), so fold models travel as Dask results and no worker
needs a disk the flow can read. The tasks are idempotent (same partition, key and models give the
same output), so retries are safe. Their failures that depend on data values are generic
(:func:`dpcausal.validation.private_failures`); the library functions are in
:mod:`dpcausal.ate.partitioned`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from dpcausal import Mechanism, Prepared, Release
from dpcausal.accounting import PrivacyCharge
from dpcausal.ate.estimator import ATEFacts, PrivateATE
from dpcausal.ate.nuisance import FoldModels
from dpcausal.ate.partitioned import (
    BlockSums,
    Roles,
    ScoreSums,
    fit_partition,
    partition_block_sums,
    partition_statistics,
    partition_sums,
    read_partition,
)
from dpcausal.validation import private_failures
from tasks.data import parquet_footer, partition_files
from tasks.sql_partitions import SqlPartition, read_sql_partition

_OPTIONS: dict[str, Any] = {"persist_result": False, "cache_policy": NO_CACHE, "retries": 2,
                            "retry_delay_seconds": 1}


@task(**_OPTIONS)
def list_partitions(source: str) -> list[str]:
    """The Parquet files of a source directory (:func:`tasks.data.partition_files`)."""
    return partition_files(source)


@task(**_OPTIONS)
def describe_partition(part: str) -> tuple[int, dict[str, str]]:
    """(rows, {column: type}) of one partition from its footer
    (:func:`tasks.data.parquet_footer`): public facts, no row is read."""
    return parquet_footer(part)


def _read(part: str | SqlPartition, roles: Roles, evaluation: bool) -> Any:
    """One partition's declared columns: a Parquet file, or a SQL partition, the query over its
    id range (:func:`tasks.sql_partitions.read_sql_partition`), whose failures after the charge
    are generic in a release."""
    if isinstance(part, SqlPartition):
        with private_failures(evaluation, "reading a SQL partition"):
            return read_sql_partition(part, roles)
    return read_partition(part, roles)


@task(**_OPTIONS)
def fit_partition_folds(part: str | SqlPartition, roles: Roles, est: PrivateATE, key: bytes,
                        folds: range, evaluation: bool = False) -> list[FoldModels]:
    """Read one partition and fit the folds it owns (its fold models are the result)."""
    return fit_partition(_read(part, roles, evaluation), roles, est, key, folds,
                         evaluation)


@task(**_OPTIONS)
def all_fold_models(per_partition: list[list[FoldModels]]) -> list[FoldModels]:
    """The K fold models in fold order, gathered on a worker: the aggregation tasks take this
    task's result as a Dask dependency, so the models reach each worker once and never pass
    through the flow process."""
    return [m for models in per_partition for m in models]


@task(**_OPTIONS)
def partition_score_sums(part: str | SqlPartition, roles: Roles, est: PrivateATE, key: bytes,
                         folds: range, fold_models: list[FoldModels],
                         evaluation: bool = False) -> ScoreSums:
    """Read one partition again and return (n_p, sum Gamma, sum Gamma^2) given all K fold
    models."""
    return partition_sums(_read(part, roles, evaluation), roles, est, key, folds,
                          fold_models, evaluation)


@task(**_OPTIONS)
def block_score_sums(part: str | SqlPartition, roles: Roles, est: PrivateATE, key: bytes,
                     blocks: range, evaluation: bool = False) -> tuple[BlockSums, ...]:
    """Read one partition, fit, aggregate and score the blocks it owns (spec §2.5b) and return
    only (block, n_b, sum Gamma, sum Gamma^2) per block: no fold model leaves the worker."""
    return partition_block_sums(_read(part, roles, evaluation), roles, est, key, blocks,
                                evaluation)


@task(**_OPTIONS)
def partition_sum_statistics(part: str | SqlPartition, roles: Roles, est: PrivateATE,
                             evaluation: bool = False) -> np.ndarray:
    """Read one partition and return only its ``dim``/``lin`` statistic vector
    (:func:`dpcausal.ate.partitioned.partition_statistics`): the sums the partitions exchange
    (no folds, so no fold key)."""
    return partition_statistics(_read(part, roles, evaluation), roles, est,
                                str(est.estimator), evaluation)


class PartitionedATE(Mechanism):
    """The partitioned core release as a mechanism for :func:`tasks.release.charged_release`:
    its checked input is public (n, d) and the flow's computation (the fit and aggregation
    phases on the workers, then ``PrivateATE._release_sums``), which the charged task runs
    once, after the reservation."""

    def __init__(self, estimator: PrivateATE | None = None) -> None:
        self.estimator = estimator

    def check_input(self, data: Any, *args: Any, **roles: Any) -> Prepared:
        raise TypeError("a partitioned source is checked from its Parquet footers "
                        "(tasks.preflight.check_partitioned), never read as one table")

    def privacy_charge(self, public: ATEFacts, /) -> PrivacyCharge:
        """The core estimator's charge for the partitions' public facts."""
        assert self.estimator is not None, "bug: a partitioned release needs its estimator"
        return self.estimator.privacy_charge(public)

    def _private_release(self, prepared: Prepared, *, evaluation: bool = False) -> Release:
        release: Release = prepared.data()
        return release
