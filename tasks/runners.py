"""The runner of a release's parallel work (the core's fold fits, the federated client encoding):
threads (default) or Dask, same results. The flow's own tasks always run on threads."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING

from conf.models import RunnerConfig

if TYPE_CHECKING:
    from distributed.security import Security

# Workers without a memory limit never spill task data (raw rows) to their local disk.
_LOCAL_CLUSTER = {"threads_per_worker": 1, "processes": True, "dashboard_address": ":0",
                  "memory_limit": 0}


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
        with Client(runner.address, security=dask_security(runner)) as client:
            yield client.get_executor()
        return
    with LocalCluster(n_workers=runner.max_workers, **_LOCAL_CLUSTER) as cluster:
        with Client(cluster) as client:
            yield client.get_executor()


def dask_security(runner: RunnerConfig) -> Security | None:
    """Dask's mutual-TLS settings for ``runner.tls`` (encryption required), else None."""
    if runner.tls is None:
        return None
    from distributed.security import Security

    return Security(tls_ca_file=runner.tls.ca_file, tls_client_cert=runner.tls.cert,
                    tls_client_key=runner.tls.key, require_encryption=True)
