"""A/B of the partitioned path's default LocalCluster (issue 41 §2): 2 workers of one thread each
as threads of the flow's process (``processes=False``, flows/partitioned_release.py's default)
against 2 worker processes (``processes=True``), everything else equal
(:func:`flows.partitioned_release.dask_runner`'s settings): the same Parquet files (n rows,
default 2·10^6, in files of 500,000 rows, bench/_generate.py), AIPW, the planner's K and K',
evaluation mode, a cluster started per release as ``dpcausal run`` starts it. The two kinds
alternate (``--rounds`` rounds, default 3), so both meet the same load; printed per release:
wall time, the load average before it, and the median per kind.

    nice -n 10 .venv/bin/python bench/worker_kind.py [--n 2000000] [--rounds 3]

Measured on 2026-12-07, 2 cores shared with 7 other sessions (load average 12-24, one-minute
figures 12.5-23.8 before the releases), ``--n 2000000 --rounds 3`` (4 files, K = 41,402 = 326
blocks of K' = 127): threads 60.8, 38.1, 51.0 s (median 51.0 s); processes 92.5, 95.3, 89.2 s
(median 92.5 s). Threads stay the default (deploy/README.md, "Threads or processes"): a worker
process first starts an interpreter and imports the release code, which at this load costs more
than the block path's tasks hold the interpreter's lock (their numpy and scikit-learn kernels
release it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time

from _generate import write_source  # bench/ is the script's folder, on sys.path
from _workdir import isolated_workdir

ESTIMATOR = {"estimator": "aipw", "outcome_bounds": [0.0, 1.0], "propensity_clip": 0.2,
             "zeta": 1.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2 * 10**6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    work = isolated_workdir(args.workdir, "dpcausal-bench-kind-")
    source = work / "source"
    write_source(source, args.n, 5, max(2, args.n // 500_000), 250_000, 2026)

    from prefect.server.api.server import SubprocessASGIServer
    from prefect_dask import DaskTaskRunner

    import flows.partitioned_release as module

    server = SubprocessASGIServer()
    server.start(timeout=120)
    os.environ["PREFECT_API_URL"] = server.api_url
    walls: dict[str, list[float]] = {"threads": [], "processes": []}
    try:
        for r in range(args.rounds):
            for kind in (("threads", "processes") if r % 2 == 0 else ("processes", "threads")):
                runner = DaskTaskRunner(cluster_kwargs={
                    **module._LOCAL_CLUSTER, "processes": kind == "processes", "n_workers": 2})
                load = os.getloadavg()
                t0 = time.perf_counter()
                module.partitioned_release.with_options(task_runner=runner)(
                    str(source), id_column="id", treatment="A", outcome="Y",
                    estimator=ESTIMATOR, compute_budget=300.0, evaluation=True)
                walls[kind].append(time.perf_counter() - t0)
                print(f"round {r} {kind:<10} {walls[kind][-1]:7.1f} s  load average before "
                      f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}", flush=True)
    finally:
        server.stop()
    print(f"\n=== n = {args.n:,}, 2 workers, AIPW, planner's K and K' ===")
    for kind, times in walls.items():
        print(f"{kind:<10} median {statistics.median(times):7.1f} s  "
              f"({', '.join(f'{t:.1f}' for t in times)})")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
