"""Benchmark of the partitioned release (issue 19 §3 scale target): n = 10^7 rows, d = 5, from
partitioned Parquet on a 2-worker process LocalCluster, AIPW (LogisticRegression +
LinearRegression), K = the planner's recommendation under a 5-minute compute budget; evaluation
mode (no ledger charge; the pre-noise estimate is printed as a check, true ATE 0.15).

Prints the flow's progress (fit and aggregation phases), wall time, K, each worker's peak RSS
(VmHWM of the worker process) and CPU seconds, the flow process's peak RSS, and, side by side,
the in-memory estimator on ``--baseline-n`` rows of the same generator with the same K in its
own process.

Generation of the Parquet files is timed separately and not counted. A temporary Prefect server
is started first so the Dask worker processes share it (recipe §7).

    .venv/bin/python bench/partitioned.py [--n 10000000] [--partitions 20] [--budget 300]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import shutil
import time
from pathlib import Path

from _workdir import isolated_workdir  # bench/ is the script's folder, on sys.path


def _baseline(source: str, K: int, queue: mp.Queue) -> None:
    """The in-memory path on one process: all partitions in one frame, ``PrivateATE.fit``."""
    import pandas as pd

    from dpcausal import PrivateATE

    t0 = time.perf_counter()
    frame = pd.concat([pd.read_parquet(p) for p in sorted(Path(source).glob("*.parquet"))],
                      ignore_index=True)
    covs = [c for c in frame.columns if c.startswith("x")]
    rel = PrivateATE(n_folds=K, outcome_bounds=(-1, 1)).fit(
        frame[covs].to_numpy(), frame["A"].to_numpy(), frame["Y"].to_numpy(), evaluation=True)
    queue.put((time.perf_counter() - t0, _usage()[0], rel.nonprivate["ate"]))


def _usage() -> tuple[float, float]:
    """(peak RSS MiB, CPU seconds) of the calling process. The peak is VmHWM (Linux): unlike
    ``ru_maxrss`` it is not inherited from the parent across a spawn's fork + exec."""
    status = Path("/proc/self/status").read_text()
    hwm_kib = int(status.split("VmHWM:")[1].split()[0])
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return hwm_kib / 1024, ru.ru_utime + ru.ru_stime


def _generate(path: str, n: int, d: int, parts: int) -> None:
    from dpcausal.ate.partitioned import write_parquet_partitions

    write_parquet_partitions(path, n, d, parts, seed=2026)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10**7)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--budget", type=float, default=300.0, help="compute budget, seconds")
    ap.add_argument("--baseline-n", type=int, default=10**6)
    ap.add_argument("--workdir", default=None, help="default: a fresh temporary folder")
    args = ap.parse_args()

    work = isolated_workdir(args.workdir, "dpcausal-bench-partitioned-")

    from distributed import Client, LocalCluster
    from prefect.server.api.server import SubprocessASGIServer
    from prefect_dask import DaskTaskRunner

    from dpcausal import PrivateATE
    from dpcausal.ate.planner import predicted_seconds
    from flows.partitioned_release import partitioned_release

    source, small = work / "source", work / "baseline"
    ctx = mp.get_context("spawn")
    t0 = time.perf_counter()
    for target in ((source, args.n, args.partitions), (small, args.baseline_n, 2)):
        gen = ctx.Process(target=_generate, args=(str(target[0]), target[1], args.d, target[2]))
        gen.start()
        gen.join()                    # own process: the peak RSS printed for the flow is its own
    print(f"generated {args.n:,} rows in {args.partitions} Parquet files "
          f"in {time.perf_counter() - t0:.1f} s (not counted)")
    K = PrivateATE(outcome_bounds=(-1, 1), compute_budget=args.budget).resolved_n_folds(
        args.n, args.d)                                  # what the flow's n_folds="auto" picks
    print(f"planner: K = {K} ({args.n // K:,} rows per fold), predicted "
          f"{predicted_seconds(args.n, K, 'aipw'):.0f} s on this machine class")

    server = SubprocessASGIServer()
    server.start(timeout=120)
    os.environ["PREFECT_API_URL"] = server.api_url              # the workers inherit it
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=0,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            t0 = time.perf_counter()
            out = partitioned_release.with_options(
                task_runner=DaskTaskRunner(address=cluster.scheduler_address))(
                str(source), id_column="id", treatment="A", outcome="Y",
                estimator={"estimator": "aipw", "outcome_bounds": [-1.0, 1.0]},
                compute_budget=args.budget, evaluation=True)
            wall = time.perf_counter() - t0
            if out["n_folds"] != K:
                raise AssertionError("bug: the flow's planner picked another K")
            usage = client.run(_usage)
    finally:
        server.stop()
    queue: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_baseline, args=(str(small), K, queue))
    proc.start()
    base_wall, base_rss, base_ate = queue.get()
    proc.join()

    print("\n=== partitioned release vs in-memory (AIPW, d = %d, K = %d) ===" % (args.d, K))
    print(f"{'path':<42}{'n':>12}{'wall s':>9}{'peak RSS MiB':>22}{'tau_hat':>9}")
    peaks = " / ".join(f"{rss:.0f}" for rss, _ in usage.values())
    print(f"{'partitioned, 2-worker process LocalCluster':<42}{args.n:>12,}{wall:>9.1f}"
          f"{peaks + ' (per worker)':>22}{out['nonprivate']['ate']:>9.4f}")
    print(f"{'in memory, one process':<42}{args.baseline_n:>12,}{base_wall:>9.1f}"
          f"{base_rss:>22.0f}{base_ate:>9.4f}")
    cpu = " / ".join(f"{sec:.0f}" for _, sec in usage.values())
    print(f"\nworker CPU seconds {cpu}; flow (bench) process peak RSS {_usage()[0]:.0f} MiB")
    print(f"target: <= 300 s and <= 2048 MiB per worker; cores: {os.cpu_count()} "
          "(shared with other jobs while this ran)")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
