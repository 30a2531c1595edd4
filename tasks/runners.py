"""Task runner from the config: threads (default) or Dask (prefect-dask), same results."""

from __future__ import annotations

from typing import Any

from conf.models import RunnerConfig


def task_runner(runner: RunnerConfig) -> Any:
    """``ThreadPoolTaskRunner(max_workers)``, or a ``DaskTaskRunner`` on ``address`` (a running
    scheduler) or on a fresh LocalCluster of ``max_workers`` single-threaded processes."""
    if runner.kind == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=runner.max_workers)
    from prefect_dask import DaskTaskRunner

    if runner.address:
        return DaskTaskRunner(address=runner.address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": runner.max_workers, "threads_per_worker": 1,
                                          "processes": True, "dashboard_address": None})
