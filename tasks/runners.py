"""Task runner from the config: threads (default) or Dask (prefect-dask), same results; and the
executor that chunked work inside one task (the federated client encoding) is mapped on."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from conf.models import RunnerConfig

# Workers without a memory limit never spill task data (raw rows) to their local disk.
_LOCAL_CLUSTER = {"threads_per_worker": 1, "processes": True, "dashboard_address": None,
                  "memory_limit": 0}


def task_runner(runner: RunnerConfig) -> Any:
    """``ThreadPoolTaskRunner(max_workers)``, or a ``DaskTaskRunner`` on ``address`` (a running
    scheduler) or on a fresh LocalCluster of ``max_workers`` single-threaded processes."""
    if runner.kind == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=runner.max_workers)
    from prefect_dask import DaskTaskRunner

    if runner.address:
        return DaskTaskRunner(address=runner.address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": runner.max_workers, **_LOCAL_CLUSTER})


@contextmanager
def chunk_executor(runner: RunnerConfig) -> Iterator[Executor]:
    """A ``concurrent.futures`` executor for chunks of one task's work: a pool of ``max_workers``
    threads, or the Dask cluster at ``address`` (or a fresh LocalCluster) through its client."""
    if runner.kind == "threads":
        with ThreadPoolExecutor(max_workers=runner.max_workers) as pool:
            yield pool
        return
    from distributed import Client, LocalCluster

    if runner.address:
        with Client(runner.address) as client:
            yield client.get_executor()
        return
    with LocalCluster(n_workers=runner.max_workers, **_LOCAL_CLUSTER) as cluster:
        with Client(cluster) as client:
            yield client.get_executor()
