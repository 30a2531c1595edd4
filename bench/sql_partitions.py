"""Benchmark of the partitioned SQL path beside the Parquet path on the same rows (issue 35 §3):
n rows (default 10^7), d = 5, as P Parquet files of about 500,000 rows and as one table of a
SQL database (default: a fresh PostgreSQL server on 127.0.0.1, started as the ledger's tests
start theirs, tests/library/ledger/conftest.py; ``--url sqlite`` for a SQLite file), the id the
table's primary key. Both releases run on 2 Dask worker processes started as deploy/README.md
starts them (a fresh pair per path, so each peak RSS is that path's), AIPW, the planner's K and K'
(the block path), evaluation mode; the SQL source has ``sql_partitions`` = P, so its partitions
hold as many rows as the files.

Printed per path: the release's wall time (the cluster started beforehand, as a deployment's
would be; data writing not counted), each worker's peak RSS (VmHWM) and CPU seconds, and for SQL
the rows the workers received from the database (counted in the workers' reads) plus the count's
aggregate rows, against n; then the SQL/Parquet wall-time ratio (goal <= 1.2, issue 41) and
rows/n (goal <= 1.05). The load average before and after each release. The data are written and
loaded by bench/_generate.py (ADBC's bulk ingest: binary COPY on PostgreSQL).

    nice -n 10 .venv/bin/python bench/sql_partitions.py [--n 10000000] [--url sqlite|URL]

Measured on 2026-12-07 with the Arrow reader (ADBC, issue 41 §1), ``--n 10000000`` on
PostgreSQL 15 on 127.0.0.1, 2 cores shared with 7 other sessions' work (load average 23 when the
bench started, 16.4 / 18.3 / 13.0 before the Parquet release, 23.1 after it; 21.8 / 19.9 / 15.6
before the SQL release, 18.7 / 20.8 / 17.6 after): the 10^7 rows written in 20 files in 39 s on 2
processes and loaded by ADBC's binary COPY (with the index and ANALYZE) in 62 s, not counted.
Parquet 411.9 s wall, 56 / 56 CPU s and 689 / 693 MiB peak RSS per worker; SQL 381.8 s wall,
50 / 50 CPU s and 705 / 699 MiB; rows from the database 10,000,000 + 20 (count): 1.0000 n. SQL /
Parquet wall time 0.93 (goal <= 1.2). The walls are the load's (7x the quiet 54 s), not the
machine's; the workers' CPU seconds compare better (they too grow at load: Parquet's were 48
quiet): the SQL path now costs a worker no more than Parquet's (50 against 56 CPU s; 74 against
48 through psycopg, below). The database's own work ran on the same 2 cores.

Before (the DB-API reader), measured on 2026-11-27, 2 cores (load average 1.3 before, 1.4-1.7
after; no other work), ``--n 10000000`` on PostgreSQL 15 on 127.0.0.1 (20 partitions of 500,000
rows, K = 206,756, K' = 127): Parquet 53.9 s wall, 48 / 47 CPU s and 688 / 680 MiB peak RSS per
worker; SQL 88.2 s wall, 74 / 73 CPU s and 681 / 680 MiB; rows from the database 10,000,000 + 20
(the count's aggregate rows): 1.0000 n. SQL / Parquet wall time 1.64 (goal 1.3, not met): the
workers' extra 26 CPU s each are the driver's row protocol (psycopg builds a Python tuple per
row, about 3.6 CPU us per row with the frame), and the database's own work runs on the same 2
cores. Before the chunks came straight from the driver's cursor (SQLAlchemy Rows): 118.7 s
against 61.9 s (1.92), at load 3.9 (other work niced). A PostgreSQL ``COPY ... TO STDOUT`` read
parsed by pyarrow measured 1.9 CPU us per row against 3.6, but it would be a second read path
with its own type rules; not built (ADBC is that read path, with the database's types).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

from _generate import load_database, write_source
from _workdir import isolated_workdir  # bench/ is the script's folder, on sys.path
from partitioned_blocks import ROWS_PER_FILE, WORKER_ENV, WORKER_PRELOAD, _usage

ROOT = Path(__file__).resolve().parents[1]
ESTIMATOR = {"estimator": "aipw", "outcome_bounds": [0.0, 1.0], "propensity_clip": 0.2,
             "zeta": 1.0}


@contextlib.contextmanager
def _postgres() -> Iterator[str]:
    """A throw-away PostgreSQL server on 127.0.0.1 (the ledger tests' own fixture function)."""
    spec = importlib.util.spec_from_file_location(
        "ledger_conftest", ROOT / "tests" / "library" / "ledger" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with contextlib.contextmanager(module.postgres_server.__wrapped__)() as url:
        yield url


def _count_rows(dask_worker: Any = None) -> None:
    """On a worker: count the rows its SQL partition reads receive (``tasks.sql_partitions``)."""
    import tasks.sql_partitions as module

    real = module._chunks

    def counted(part: Any, columns: list[str]) -> Iterator[Any]:
        for chunk in real(part, columns):
            module.ROWS_RECEIVED = getattr(module, "ROWS_RECEIVED", 0) + len(chunk)
            yield chunk

    module._chunks = counted


def _rows_received() -> int:
    import tasks.sql_partitions as module

    return int(getattr(module, "ROWS_RECEIVED", 0))


def _release(work: Path, name: str, run: Any, sql: bool) -> tuple[float, dict, dict, int]:
    """``run(address)`` on a fresh pair of worker processes: (wall s, {worker: (peak RSS MiB, CPU
    s)}, the release, rows the workers received)."""
    from distributed import Client, Nanny, Scheduler, SpecCluster

    workers = {f"{name}-{i}": {"cls": Nanny, "options": {
        "nthreads": 1, "memory_limit": 0, "local_directory": str(work / f"{name}-{i}"),
        "preload": WORKER_PRELOAD, "env": WORKER_ENV}} for i in range(2)}
    with SpecCluster(workers=workers, scheduler={
            "cls": Scheduler, "options": {"dashboard_address": ":0"}}) as cluster, \
            Client(cluster) as client:
        if sql:
            client.run(_count_rows)
        print(f"[{name}] load average before: {os.getloadavg()}", flush=True)
        t0 = time.perf_counter()
        out = run(cluster.scheduler_address)
        wall = time.perf_counter() - t0
        usage = client.run(_usage)
        rows = sum(client.run(_rows_received).values())
        print(f"[{name}] {wall:.1f} s; load average after: {os.getloadavg()}", flush=True)
    return wall, usage, out, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10**7)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--url", default=None,
                    help="a SQLAlchemy URL, 'sqlite' (a file), or none: a local PostgreSQL")
    ap.add_argument("--workdir", default=None, help="default: a fresh temporary folder")
    args = ap.parse_args()
    parts = max(2, args.n // ROWS_PER_FILE)
    work = isolated_workdir(args.workdir, "dpcausal-bench-sql-")
    print(f"load average before: {os.getloadavg()}; cores: {os.cpu_count()}", flush=True)
    source = work / "source"
    t0 = time.perf_counter()
    write_source(source, args.n, args.d, parts, 250_000, 2026)
    print(f"wrote {args.n:,} rows in {parts} Parquet files in {time.perf_counter() - t0:.0f} s "
          "(not counted)", flush=True)

    with contextlib.ExitStack() as stack:
        url = args.url
        if url is None:
            url = stack.enter_context(_postgres())
        elif url == "sqlite":
            url = f"sqlite:///{work / 'records.db'}"
        t0 = time.perf_counter()
        load_database(url, source)
        print(f"loaded them into {url.split(':')[0]} in {time.perf_counter() - t0:.0f} s "
              "(not counted)", flush=True)
        _compare(work, source, url, parts, args.n)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


def _compare(work: Path, source: Path, url: str, parts: int, n: int) -> None:
    from prefect.server.api.server import SubprocessASGIServer
    from prefect_dask import DaskTaskRunner

    import tasks.sql_partitions as module
    from flows.partitioned_release import partitioned_release, partitioned_sql_release

    counted: list[int] = []
    real_tiles = module._tiles

    def tiles(of: Any, count: int) -> Any:
        counted.append(len(found := real_tiles(of, count)))
        return found

    module._tiles = tiles  # type: ignore[assignment]
    server = SubprocessASGIServer()
    server.start(timeout=120)
    os.environ["PREFECT_API_URL"] = server.api_url              # the workers inherit it
    roles = {"id_column": "id", "treatment": "A", "outcome": "Y", "estimator": ESTIMATOR,
             "compute_budget": 300.0, "evaluation": True}
    try:
        pq = _release(work, "parquet", lambda address: partitioned_release.with_options(
            task_runner=DaskTaskRunner(address=address))(str(source), **roles), sql=False)
        sq = _release(work, "sql", lambda address: partitioned_sql_release.with_options(
            task_runner=DaskTaskRunner(address=address))(
            "SELECT * FROM records", url=url, sql_partitions=parts, id_type="int", **roles),
            sql=True)
    finally:
        server.stop()
    print(f"\n=== n = {n:,}, {parts} partitions, 2 worker processes, AIPW, planner's K, K' ===")
    print(f"{'path':<10}{'wall s':>9}{'peak RSS MiB per worker':>26}{'CPU s per worker':>20}"
          f"{'rows from the database':>26}")
    for label, (wall, usage, _, rows) in (("parquet", pq), ("sql", sq)):
        rss = " / ".join(f"{r:.0f}" for r, _ in usage.values())
        cpu = " / ".join(f"{c:.0f}" for _, c in usage.values())
        moved = f"{rows:,} + {sum(counted)} (count)" if label == "sql" else "-"
        print(f"{label:<10}{wall:>9.1f}{rss:>26}{cpu:>20}{moved:>26}")
    print("non-private ATE (the same partitions, files of consecutive ids; blocks under each "
          f"release's own key): parquet {pq[2]['nonprivate']['ate']:.6f}, "
          f"sql {sq[2]['nonprivate']['ate']:.6f}")
    print(f"\nSQL / Parquet wall time: {sq[0] / pq[0]:.2f} (goal <= 1.2); rows from the database "
          f"/ n: {(sq[3] + sum(counted)) / n:.4f} (goal <= 1.05)")


if __name__ == "__main__":
    main()
