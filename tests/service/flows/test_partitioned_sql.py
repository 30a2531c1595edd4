"""The partitioned release from a SQL source (issue 28 §3, issue 35) through
flows/partitioned_release.py on the flow's Dask runner: the same release as the Parquet path on
Parquet partitions holding the same rows, the identical release whatever the table's row order,
only per-block sums reach the flow, a release binds the source and charges once, and each row
crosses from the database once."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest
from _flowtools import spy_on_block_sums

N, PARTS, K, KB = 3000, 3, 30, 5
ESTIMATOR = {"estimator": "aipw", "block_folds": KB, "outcome_bounds": [-1.0, 1.0], "zeta": 1.0,
             "propensity_clip": 0.1, "ci_share": 0.1}
SEEDED = {**ESTIMATOR, "noise_seed": 7}


def _table(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 2))
    A = (rng.random(N) < 1 / (1 + np.exp(-0.5 * X[:, 0]))).astype(np.int64)
    return pd.DataFrame({"id": rng.permutation(N).astype(np.int64), "A": A,
                         "Y": np.clip(0.2 * A + 0.3 * X[:, 1] + rng.normal(0, .2, N), -1, 1),
                         "x1": X[:, 0], "x2": X[:, 1]})


def _sqlite(path, frame) -> str:
    with sqlite3.connect(path) as con:
        frame.to_sql("records", con, index=False)
    return f"sqlite:///{path}"


def _sql_release(url, estimator=SEEDED, **kw):
    from flows.partitioned_release import partitioned_sql_release

    args = {"url": url, "sql_partitions": PARTS, "id_column": "id", "treatment": "A",
            "outcome": "Y", "estimator": estimator, "n_folds": K, "fold_key": "curator",
            "evaluation": True, "chunk_rows": 256, "id_type": "int", **kw}
    return partitioned_sql_release("SELECT * FROM records", **args)


def _partition(ids: pd.Series) -> np.ndarray:
    """The SQL source's rule written out: the sorted ids cut into P consecutive runs, the first
    n mod P one id longer."""
    label = np.empty(len(ids), dtype=np.int64)
    for p, run in enumerate(np.array_split(np.argsort(ids.to_numpy()), PARTS)):
        label[run] = p
    return label


def test_sql_release_equals_parquet_on_the_same_partitions(tmp_path, monkeypatch):
    from dpcausal.ate.partitioned import BlockSums
    from flows.partitioned_release import partitioned_release

    table = _table(1)
    label = _partition(table["id"])
    (tmp_path / "parquet").mkdir()
    for p in range(PARTS):      # the rows of SQL partition p, in id order, as Parquet file p
        table[label == p].sort_values("id").to_parquet(
            tmp_path / "parquet" / f"part-{p:05d}.parquet", index=False)

    reached = spy_on_block_sums(monkeypatch)
    out = _sql_release(_sqlite(tmp_path / "d.db", table))
    ref = partitioned_release(str(tmp_path / "parquet"), id_column="id", treatment="A",
                              outcome="Y", estimator=SEEDED, n_folds=K, fold_key="curator",
                              evaluation=True)
    assert out["ate"] == ref["ate"] and out["ci"] == ref["ci"]
    assert out["nonprivate"] == ref["nonprivate"]
    assert {k: v for k, v in out["params"].items()} == ref["params"]
    assert (out["params"]["n_blocks"], out["params"]["block_folds"]) == (K // KB, KB)
    assert out["params"]["folds"] == "keyed_rank(id)" and out["params"]["partitions"] == PARTS

    sql_sums, parquet_sums = reached
    assert sql_sums == parquet_sums
    flat = [b for part in sql_sums for b in part]
    assert all(type(b) is BlockSums for b in flat) and sum(b.n for b in flat) == N
    sizes = np.bincount(label, minlength=PARTS)
    assert [sum(b.n for b in part) for part in sql_sums] == sizes.tolist()


def test_row_order_of_the_table_changes_nothing(tmp_path):
    table = _table(2)
    out = _sql_release(_sqlite(tmp_path / "a.db", table))
    again = _sql_release(_sqlite(tmp_path / "b.db", table.sample(frac=1.0, random_state=3)))
    assert again == out


def test_a_release_charges_once_and_binds_the_source(tmp_path, project, monkeypatch):
    from _flowtools import charges, give_cap

    from dpcausal.validation import ReleaseFailedError

    url = _sqlite(tmp_path / "d.db", _table(3))
    give_cap("sql-parts")
    out = _sql_release(url, estimator=ESTIMATOR, evaluation=False, dataset_id="sql-parts",
                       fold_key="release")
    assert out.get("nonprivate") is None and np.isfinite(out["ate"])
    assert charges("sql-parts") == 1
    with pytest.raises(Exception, match="evaluation mode is refused"):
        _sql_release(url, estimator=SEEDED, dataset_id="other-id")
    # the table changes between the count and the read: generic failure after the charge
    import tasks.partitioned as module

    real = module.read_sql_partition

    def shrunk(part, roles):
        with sqlite3.connect(tmp_path / "d.db") as con:
            con.execute("DELETE FROM records WHERE rowid IN (SELECT rowid FROM records LIMIT 5)")
        return real(part, roles)

    monkeypatch.setattr(module, "read_sql_partition", shrunk)
    with pytest.raises(ReleaseFailedError, match="reading a SQL partition"):
        _sql_release(url, estimator=ESTIMATOR, evaluation=False, dataset_id="sql-parts",
                     fold_key="release")
    assert charges("sql-parts") == 2



@pytest.fixture
def sql_url(tmp_path, monkeypatch):
    """A table's URL in ``$SQLPARTS_URL`` (set before ``invoke`` copies the environment)."""
    monkeypatch.setenv("SQLPARTS_URL", _sqlite(tmp_path / "d.db", _table(4)))


def _cli_config(tmp_path, dataset, treatment="A", sql="SELECT * FROM records"):
    """A partitioned SQL release config of ``$SQLPARTS_URL``'s table, written as YAML."""
    import yaml

    raw = {"name": "sqlparts",
           "data": {"sql": sql, "url": "${SQLPARTS_URL}",
                    "sql_partitions": PARTS, "id_column": "id", "dtypes": {"id": "int"}},
           "columns": {"treatment": treatment, "outcome": "Y", "covariates": ["x1", "x2"]},
           "ledger": {"dataset_id": dataset},
           "estimator": {**ESTIMATOR, "n_folds": K}}
    path = tmp_path / f"{dataset}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_dpcausal_run_releases_a_partitioned_sql_config(tmp_path, sql_url, invoke,
                                                        curator_registers):
    """``data.sql`` with ``data.sql_partitions`` and ``data.id_column`` through ``dpcausal run``
    (dp_release, its Dask subflow, the ledger), the URL from the environment."""
    import json

    from _flowtools import charges, give_cap

    dataset = "sql-parts-cli"
    give_cap(dataset, zeta=1.5)
    path = _cli_config(tmp_path, dataset)
    registration = curator_registers(path)  # the curator's registration (issue 32 §1)
    assert registration.n == N and registration.facts["names"] == ["id", "A", "Y", "x1", "x2"]
    res = invoke("run", str(path), "--no-progress", "--json")
    assert res.exit_code == 0, res.output
    rel = json.loads(res.stdout)["release"]
    assert rel["n"] == N and rel["nonprivate"] is None
    assert rel["params"]["folds"] == "keyed_rank(id)" and rel["params"]["partitions"] == PARTS
    assert (rel["params"]["n_blocks"], rel["params"]["block_folds"]) == (K // KB, KB)
    assert charges(dataset) == 1


def test_roles_the_query_does_not_return_are_refused_at_registration(tmp_path, sql_url,
                                                                     invoke):
    """A treatment the query does not return is refused where the query's column names are
    first read, the curator's registration, as for Parquet partitions (exit 2, naming it):
    nothing is registered, so no run can charge for a release that would fail."""
    from _flowtools import give_cap

    from dpcausal.ledger import Ledger

    dataset = "sql-parts-bad"
    give_cap(dataset, zeta=1.5)
    res = invoke("ledger", "register", dataset, str(_cli_config(tmp_path, dataset, "T")))
    assert res.exit_code == 2, res.output
    assert "columns ['T'] are not in the partitions" in res.stderr
    with Ledger() as led:
        assert led.registration(dataset) is None


def test_a_config_release_counts_the_partitions_once(tmp_path, monkeypatch, curator_registers):
    """``dp_release`` of a partitioned SQL config (its checks, then its Dask subflow) counts
    once, before the charge (one aggregate over the id column), and reads each partition's
    range of the query's declared columns once after it: the subflow reads with the partitions
    and key its checks counted."""
    from _flowtools import charges, give_cap

    import tasks.sql_partitions as module
    from conf.models import load_config
    from flows.release import run_release

    passes, counts = [], []
    real, real_tiles = module._chunks, module._tiles

    def spy(part, columns):
        passes.append((part.index, tuple(columns)))
        return real(part, columns)

    def spy_tiles(parts, count):
        counts.append(count)
        return real_tiles(parts, count)

    monkeypatch.setattr(module, "_chunks", spy)
    monkeypatch.setattr(module, "_tiles", spy_tiles)
    dataset = "sql-parts-once"
    give_cap(dataset, zeta=1.5)
    raw = {"name": "sqlonce",
           "data": {"sql": "SELECT * FROM records", "url": _sqlite(tmp_path / "d.db", _table(5)),
                    "sql_partitions": PARTS, "id_column": "id", "dtypes": {"id": "int"}},
           "columns": {"treatment": "A", "outcome": "Y", "covariates": ["x1", "x2"]},
           "ledger": {"dataset_id": dataset},
           "estimator": {**ESTIMATOR, "n_folds": K}}
    config = load_config(None, [f"mlflow.tracking_uri=sqlite:///{tmp_path}/m.db"], base=raw)
    assert curator_registers(config).n == N
    out = run_release(config)
    assert out["release"]["n"] == N and charges(dataset) == 1
    assert counts == [PARTS]
    assert sorted(passes) == [(p, ("id", "A", "Y", "x1", "x2")) for p in range(PARTS)]


class _Counting:
    """A DB-API connection or cursor that counts the rows its cursors return for statements
    on the table ``records`` (``tally``; not SQLAlchemy's own probes of a new connection)."""

    def __init__(self, inner, tally: list[int]) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_tally", tally)

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __setattr__(self, name, value) -> None:
        setattr(self._inner, name, value)

    def cursor(self, *args, **kwargs):
        return _Counting(self._inner.cursor(*args, **kwargs), self._tally)

    def execute(self, statement, *args):
        object.__setattr__(self, "_counted", "records" in statement)
        return self._inner.execute(statement, *args)

    def _count(self, rows):
        if getattr(self, "_counted", False):
            self._tally.append(len(rows))
        return rows

    def fetchone(self):
        row = self._inner.fetchone()
        self._count([] if row is None else [row])
        return row

    def fetchmany(self, *args):
        return self._count(self._inner.fetchmany(*args))

    def fetchall(self):
        return self._count(self._inner.fetchall())


def test_a_release_reads_each_row_from_the_database_once(tmp_path, monkeypatch):
    """Issue 35 §1-2: a partitioned SQL release (block ensemble, P = 3) fetches n rows from the
    database plus the count's P aggregate rows, no more: each worker's query returns its own
    partition's rows only, and the count is an aggregate (the cursors' fetched rows counted by
    a DB-API spy under SQLAlchemy; an in-memory URL, so today's DB-API reader)."""
    import sqlalchemy as sa

    import tasks.sql_partitions as module

    path = tmp_path / "d.db"
    _sqlite(path, _table(6))
    fetched: list[int] = []

    def counting_engine(source):
        return sa.create_engine("sqlite://", creator=lambda: _Counting(
            sqlite3.connect(path, check_same_thread=False), fetched))

    monkeypatch.setattr(module, "database_engine", counting_engine)
    out = _sql_release(f"sqlite:///{path}")
    assert out["n"] == N
    assert sum(fetched) == N + PARTS


def test_an_arrow_release_reads_each_row_from_the_database_once(tmp_path, monkeypatch):
    """Issue 41 §1: the same through the Arrow reader (ADBC on the SQLite file): the record
    batches the driver returns hold n rows in all, and the count's P aggregate rows come
    through SQLAlchemy."""
    import sqlalchemy as sa

    import tasks.sql_arrow as arrow
    import tasks.sql_partitions as module

    path = tmp_path / "d.db"
    _sqlite(path, _table(6))
    fetched: list[int] = []
    batches: list[int] = []

    def counting_engine(source):
        return sa.create_engine(f"sqlite:///{path}", creator=lambda: _Counting(
            sqlite3.connect(path, check_same_thread=False), fetched))

    def counting_connect(engine):
        conn = real_connect(engine)
        cursor = conn.cursor

        def counting_cursor():
            cur = cursor()
            fetch = cur.fetch_record_batch

            def counted():
                for batch in fetch():
                    batches.append(batch.num_rows)
                    yield batch
            cur.fetch_record_batch = counted
            return cur
        conn.cursor = counting_cursor
        return conn

    real_connect = arrow.arrow_connect
    monkeypatch.setattr(module, "database_engine", counting_engine)
    monkeypatch.setattr(arrow, "arrow_connect", counting_connect)
    out = _sql_release(f"sqlite:///{path}")
    assert out["n"] == N
    assert len(batches) >= PARTS and sum(batches) == N
    assert sum(fetched) == PARTS


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_database_that_fails_before_any_row_is_read_charges_nothing(tmp_path, sql_url,
                                                                      curator_registers):
    """A registered partitioned SQL dataset whose database does not answer (a wrong host or
    port, a wrong password: the connection fails), whose query's table is gone, or whose
    query no longer returns a role's column, is refused before the charge (exit 2), the reason
    named and the password nowhere: these are facts of the database and its schema, never of
    a value (the probe reads the result's column names, ``LIMIT 0``). Before, the count and
    the reads came after the reservation: each failed charged and generically (seen on
    PostgreSQL with a wrong password: one charge of zeta 0.5 per attempt)."""
    import os
    import subprocess
    import sys

    from _flowtools import charges, give_cap
    from prefect.settings import PREFECT_API_URL

    dataset = "sql-parts-probe"
    give_cap(dataset, zeta=1.5)
    path = _cli_config(tmp_path, dataset, sql="SELECT * FROM records AS r")  # its own source
    assert curator_registers(path).n == N
    db = tmp_path / "d.db"

    def run(url):
        env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "SQLPARTS_URL": url}
        done = subprocess.run([sys.executable, "-m", "cli.main", "run", str(path),
                               "--no-progress"], capture_output=True, text=True, env=env,
                              timeout=300)
        done.stderr = " ".join(done.stderr.split())     # the CLI wraps its lines
        return done

    down = run(f"postgresql+psycopg://curator:s3cret-xyz@127.0.0.1:{_free_port()}/trials")
    assert down.returncode == 2, down.stdout + down.stderr
    assert "cannot connect to data.url ${SQLPARTS_URL}: connection failed: connection to " \
           "server at \"127.0.0.1\"" in down.stderr and "Connection refused" in down.stderr
    assert "s3cret-xyz" not in down.stdout + down.stderr
    with sqlite3.connect(db) as con:
        con.execute("ALTER TABLE records RENAME TO moved")
    gone = run(f"sqlite:///{db}")
    assert gone.returncode == 2 and "no such table: records" in gone.stderr, gone.stderr
    with sqlite3.connect(db) as con:
        con.execute("ALTER TABLE moved RENAME TO records")
        con.execute("ALTER TABLE records DROP COLUMN x2")
    short = run(f"sqlite:///{db}")
    assert short.returncode == 2, short.stdout + short.stderr
    assert "'x2'" in short.stderr and "registered" in short.stderr
    assert charges(dataset) == 0
