"""The federated kind's extra step: the clients' encoding in chunks on the configured runner
(threads, or Dask workers), spec federated_secagg.md §7.5. Each chunk draws from its own stream
spawned from the release's noise generator, so every runner gives the same reports."""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from conf.models import RunnerConfig
from dpcausal import Prepared
from dpcausal.federated import ClientReports, FederatedATE, ReleasePlan, encode_clients
from tasks.runners import chunk_executor


@dataclass(frozen=True)
class EncodePlan:
    """Clients per chunk and the runner the chunks are encoded on."""

    chunk_size: int
    runner: RunnerConfig


def encode_chunked(x: np.ndarray, plan: ReleasePlan, group: int, rng: np.random.Generator,
                   chunk_size: int, executor: Executor | None = None) -> ClientReports:
    """Client encoding of one group in chunks of ``chunk_size`` clients, mapped in order on
    ``executor``."""
    chunks = [x[s:s + chunk_size] for s in range(0, x.size, chunk_size)] or [x]
    streams = rng.spawn(len(chunks))
    mapper = executor.map if executor is not None else map
    n = len(chunks)
    parts = list(mapper(encode_clients, chunks, [plan] * n, [group] * n, streams))
    z2 = None if parts[0].z2 is None else np.concatenate([p.z2 for p in parts])
    return ClientReports(np.concatenate([p.z1 for p in parts]), z2)


class ChunkedFederatedATE(FederatedATE):
    """FederatedATE whose clients encode in chunks on a runner (see the module doc)."""

    encode_plan_: EncodePlan
    _executor: Executor | None = None

    def _private_release(self, prepared: Prepared, *, evaluation: bool = False) -> Any:
        with chunk_executor(self.encode_plan_.runner) as executor:
            self._executor = executor
            try:
                return super()._private_release(prepared, evaluation=evaluation)
            finally:
                self._executor = None

    def encode(self, x: np.ndarray, plan: ReleasePlan, group: int,
               rng: np.random.Generator) -> ClientReports:
        return encode_chunked(x, plan, group, rng, self.encode_plan_.chunk_size, self._executor)


def with_chunked_encoding(mechanism: FederatedATE, plan: EncodePlan) -> ChunkedFederatedATE:
    """``mechanism`` (same public parameters) encoding its clients as ``plan`` says."""
    out = ChunkedFederatedATE(**mechanism.get_params(deep=False))
    out.encode_plan_ = plan
    return out
