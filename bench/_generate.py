"""The benches' data (issue 41 §3): n rows of :func:`dpcausal.datasets.make_large` written as
Parquet files, vectorised per row group by numpy and pyarrow, one file per task on up to 2
processes (the machine's 2 cores), and loaded into a database by ``COPY`` (ADBC's bulk ingest:
PostgreSQL's ``COPY ... FROM STDIN`` in binary, one Parquet file per task on up to 2 processes)
or, for a SQLite file, by ADBC's ingest in one process (SQLite has one writer).

The rows do not depend on the number of processes: the g-th row group of the whole source (in
file order) is ``make_large`` seeded by ``SeedSequence(seed, spawn_key=(g,))``, its ids the
global row numbers (columns id, A as int8, Y, x1..xd).

Measured on 2026-12-07, 2 cores shared with 7 other sessions: 10^7 rows (20 files) in 39 s at
load average 23, and loaded into PostgreSQL 15 on the same cores (binary COPY on 2 processes, then
the unique index and ANALYZE) in 62 s, load about 18; 10^8 rows (200 files) in 360 s at load
13-18. The single-process writer it replaces took 61 s for 10^8 rows on a quiet machine
(2026-11-27), so at this load these are the load's figures; the rows are identical (checked
file by file at 10^6).

    .venv/bin/python bench/_generate.py DIR --n 100000000 [--url postgresql://...]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

PROCESSES = 2


def _row_groups(n: int, files: int, row_group: int) -> list[list[tuple[int, int, int]]]:
    """Per file, its row groups as (global index g, first row, rows)."""
    import numpy as np

    bounds = np.linspace(0, n, files + 1).astype(np.int64)
    out, g = [], 0
    for p in range(files):
        groups = []
        for start in range(int(bounds[p]), int(bounds[p + 1]), row_group):
            groups.append((g, start, min(row_group, int(bounds[p + 1]) - start)))
            g += 1
        out.append(groups)
    return out


def _write_file(path: str, groups: list[tuple[int, int, int]], d: int, seed: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpcausal.datasets import make_large

    writer = None
    for g, start, m in groups:
        X, A, Y, _ = make_large(m, d, random_state=np.random.SeedSequence(seed, spawn_key=(g,)))
        table = pa.table({"id": np.arange(start, start + m, dtype=np.int64),
                          "A": A.astype(np.int8), "Y": Y,
                          **{f"x{j + 1}": X[:, j] for j in range(d)}})
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=m)
    if writer is not None:
        writer.close()


def write_source(path: Path, n: int, d: int, files: int, row_group: int, seed: int,
                 processes: int = PROCESSES) -> None:
    """``files`` Parquet files ``part-00000.parquet``... of n rows in all (module docstring),
    written by ``processes`` processes."""
    path.mkdir(parents=True, exist_ok=True)
    jobs = [(str(path / f"part-{p:05d}.parquet"), groups, d, seed)
            for p, groups in enumerate(_row_groups(n, files, row_group))]
    if processes <= 1:
        for job in jobs:
            _write_file(*job)
        return
    with ProcessPoolExecutor(processes, mp_context=mp.get_context("spawn")) as pool:
        for done in [pool.submit(_write_file, *job) for job in jobs]:
            done.result()


def _adbc(url: str):
    """An ADBC connection to a SQLAlchemy URL's database (PostgreSQL or a SQLite file)."""
    import sqlalchemy as sa

    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "postgresql":
        import adbc_driver_postgresql.dbapi

        return adbc_driver_postgresql.dbapi.connect(
            parsed.set(drivername="postgresql").render_as_string(hide_password=False))
    import adbc_driver_sqlite.dbapi

    return adbc_driver_sqlite.dbapi.connect(parsed.database)


def _ingest(url: str, table: str, files: list[str]) -> int:
    import pyarrow.parquet as pq

    rows = 0
    with _adbc(url) as conn:
        with conn.cursor() as cur:
            for f in files:
                rows += cur.adbc_ingest(table, pq.read_table(f), mode="append")
        conn.commit()
    return rows


def load_database(url: str, source: Path, table: str = "records",
                  processes: int = PROCESSES) -> None:
    """The Parquet files' rows into ``table`` of ``url`` (created; the id its unique index,
    built after the load; ``ANALYZE`` on PostgreSQL): ADBC bulk ingest, which is ``COPY`` in
    binary on PostgreSQL, files split over ``processes`` processes (one on SQLite)."""
    import pyarrow.parquet as pq

    files = sorted(str(f) for f in source.glob("*.parquet"))
    postgres = url.startswith("postgresql")
    with _adbc(url) as conn:
        with conn.cursor() as cur:
            cur.adbc_ingest(table, pq.read_schema(files[0]).empty_table(), mode="create")
        conn.commit()
    shares = [files[i::processes] for i in range(processes)] if postgres else [files]
    if len(shares) > 1:
        with ProcessPoolExecutor(len(shares), mp_context=mp.get_context("spawn")) as pool:
            for done in [pool.submit(_ingest, url, table, share) for share in shares]:
                done.result()
    else:
        _ingest(url, table, shares[0])
    with _adbc(url) as conn:
        with conn.cursor() as cur:
            cur.execute(f"CREATE UNIQUE INDEX {table}_id ON {table} (id)")
            if postgres:
                cur.execute(f"ANALYZE {table}")
        conn.commit()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--n", type=int, default=10**7)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--files", type=int, default=None, help="default: n / 500,000, at least 2")
    ap.add_argument("--row-group", type=int, default=250_000)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--processes", type=int, default=PROCESSES)
    ap.add_argument("--url", default=None, help="also load the rows into this database")
    args = ap.parse_args()
    files = args.files or max(2, args.n // 500_000)
    t0 = time.perf_counter()
    write_source(Path(args.folder), args.n, args.d, files, args.row_group, args.seed,
                 args.processes)
    print(f"wrote {args.n:,} rows in {files} Parquet files in {time.perf_counter() - t0:.1f} s")
    if args.url:
        t0 = time.perf_counter()
        load_database(args.url, Path(args.folder), processes=args.processes)
        print(f"loaded them in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
