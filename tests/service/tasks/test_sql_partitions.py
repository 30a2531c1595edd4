"""A SQL query as a partitioned source (issue 28 §3, issue 35; tasks/sql_partitions.py) on
SQLite: rows in P consecutive ranges of the sorted ids, each partition's query returning its own
rows only, the same blocks and block sums as Parquet partitions holding the same rows, one
aggregate over the id before the charge, row order irrelevant, errors as the in-memory SQL
source reports them; and the PostgreSQL server of the ledger's tests
(tests/library/ledger/conftest.py, the same fixture)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from conf.models import DataSource
from dpcausal import PrivateATE
from dpcausal.ate.partitioned import Roles, assign_blocks, partition_block_sums, plan_partitions
from tasks.sql_partitions import SqlPartitions, count_sql, read_sql_partition
from tests.service._text import without_paths

KEY = bytes(range(32))
ROLES = Roles(id="id", treatment="A", outcome="Y", covariates=("x1", "x2"))
EST = {"estimator": "aipw", "outcome_bounds": (-1.0, 1.0), "zeta": 1.0, "propensity_clip": 0.1,
       "ci_share": 0.1, "n_folds": 12, "block_folds": 3}


def _table(n: int = 1200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    A = (rng.random(n) < 1 / (1 + np.exp(-X[:, 0]))).astype(np.int64)
    return pd.DataFrame({"id": rng.permutation(10 * n)[:n].astype(np.int64) - 3 * n, "A": A,
                         "Y": np.clip(0.3 * A + 0.2 * X[:, 1] + rng.normal(0, .2, n), -1, 1),
                         "x1": X[:, 0], "x2": X[:, 1]})


def _sqlite(path: Path, frame: pd.DataFrame, table: str = "t") -> DataSource:
    with sqlite3.connect(path) as con:
        frame.to_sql(table, con, index=False, if_exists="replace")
    return DataSource(sql=f"SELECT * FROM {table}", url=f"sqlite:///{path}")


def _range_partition(ids, parts: int) -> np.ndarray:
    """The partition of each id by the rule written out independently: the sorted ids cut into
    ``parts`` consecutive runs, the first ``n mod parts`` one id longer."""
    ids = list(ids)
    label = np.empty(len(ids), dtype=np.int64)
    for p, run in enumerate(np.array_split(np.argsort(np.asarray(ids), kind="stable"), parts)):
        label[run] = p
    return label


def _partitions(source: DataSource, parts: int = 3, **kw):
    sql = SqlPartitions(source, id_column="id", count=parts, **{"id_type": "int", **kw})
    counted = count_sql(sql, KEY, {"treatment": "A", "outcome": "Y"})
    return sql, list(counted.footers), list(counted.parts)


def test_rows_go_to_the_partition_of_their_id_range(tmp_path):
    table = _table(1201)
    _, footers, parts = _partitions(_sqlite(tmp_path / "d.db", table), chunk_rows=97)
    expected = _range_partition(table["id"], 3)
    assert [rows for rows, _ in footers] == [401, 400, 400]
    assert [rows for rows, _ in footers] == np.bincount(expected, minlength=3).tolist()
    assert footers[0][1] == {"id": "int64", "A": "int64", "Y": "double", "x1": "double",
                             "x2": "double"}
    for p, part in enumerate(parts):
        frame = read_sql_partition(part, ROLES)
        mine = table[np.asarray(expected) == p].sort_values("id", ignore_index=True)
        assert frame["id"].tolist() == mine["id"].tolist()
        assert frame["id"].dtype == np.int64
        np.testing.assert_array_equal(frame[["A", "Y", "x1", "x2"]].to_numpy(),
                                      mine[["A", "Y", "x1", "x2"]].to_numpy(dtype=float))


def test_text_ids_take_ranges_in_the_databases_order(tmp_path):
    """Text ids: ranges of the ids as the database sorts them (SQLite's binary collation, the
    order of Python's str for these ids); each partition's read returns exactly its range."""
    table = _table(300).assign(id=lambda t: [f"p-{i}é" for i in t["id"]])
    _, footers, parts = _partitions(_sqlite(tmp_path / "d.db", table), parts=2, id_type="str")
    expected = _range_partition(table["id"], 2)
    assert [rows for rows, _ in footers] == [150, 150]
    for p, part in enumerate(parts):
        assert read_sql_partition(part, ROLES)["id"].tolist() == sorted(
            table["id"][expected == p])


def test_more_partitions_than_rows_leaves_the_last_ones_empty(tmp_path):
    table = _table(4)
    _, footers, parts = _partitions(_sqlite(tmp_path / "d.db", table), parts=6)
    assert [rows for rows, _ in footers] == [1, 1, 1, 1, 0, 0]
    assert [len(read_sql_partition(p, ROLES)) for p in parts] == [1, 1, 1, 1, 0, 0]


def test_a_repeated_id_across_two_ranges_is_refused_before_the_charge(tmp_path):
    table = _table(60)
    table.loc[30, "id"] = table["id"].sort_values().iloc[19]  # the 20th and 21st ids equal
    with pytest.raises(ValueError, match="holds a repeated id"):
        _partitions(_sqlite(tmp_path / "d.db", table))


def test_same_rows_as_parquet_give_the_same_blocks_and_sums(tmp_path):
    """Parquet partitions holding each SQL partition's rows (in another order) give every row
    the same block and fold, and the same per-block sums up to summation order."""
    table = _table()
    sql, footers, parts = _partitions(_sqlite(tmp_path / "d.db", table))
    est = PrivateATE(**EST)
    plan = plan_partitions(footers, est, id_column="id", treatment="A", outcome="Y",
                           covariates=None, evaluation=True)
    assert plan.blocks is not None and plan.n_blocks == 4
    label = _range_partition(table["id"], 3)
    for part, blocks in zip(parts, plan.blocks, strict=True):
        from_sql = read_sql_partition(part, ROLES)
        path = tmp_path / f"part-{part.index}.parquet"
        table[label == part.index].sample(frac=1.0, random_state=1).to_parquet(path)
        from_parquet = pd.read_parquet(path)
        by_id = dict(zip(from_sql["id"], assign_blocks(from_sql["id"].to_numpy(), KEY, blocks,
                                                       3), strict=True))
        parquet_folds = assign_blocks(from_parquet["id"].to_numpy(), KEY, blocks, 3)
        assert [by_id[i] for i in from_parquet["id"]] == parquet_folds.tolist()
        a = partition_block_sums(from_sql, ROLES, plan.estimator, KEY, blocks, True)
        b = partition_block_sums(from_parquet, ROLES, plan.estimator, KEY, blocks, True)
        assert [(x.block, x.n) for x in a] == [(x.block, x.n) for x in b]
        for x, y in zip(a, b, strict=True):
            assert x.s1 == pytest.approx(y.s1, rel=1e-9, abs=1e-9)
            assert x.s2 == pytest.approx(y.s2, rel=1e-9)


def test_row_order_of_the_source_changes_nothing(tmp_path):
    table = _table()
    _, _, parts = _partitions(_sqlite(tmp_path / "a.db", table), chunk_rows=50)
    _, _, shuffled = _partitions(_sqlite(tmp_path / "b.db", table.sample(frac=1.0,
                                                                         random_state=4)),
                                 chunk_rows=211)
    for a, b in zip(parts, shuffled, strict=True):
        pd.testing.assert_frame_equal(read_sql_partition(a, ROLES),
                                      read_sql_partition(b, ROLES))


class _Spy:
    """A SQLAlchemy listener recording every statement the database runs."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, conn, cursor, statement, *args) -> None:
        self.statements.append(statement)


def test_before_the_charge_only_the_id_column_is_read(tmp_path, monkeypatch):
    import tasks.sql_partitions as module

    spy, real = _Spy(), module.database_engine

    def engine(source):
        made = real(source)
        sa.event.listen(made, "before_cursor_execute", spy)
        return made

    monkeypatch.setattr(module, "database_engine", engine)
    monkeypatch.setattr("tasks.data.database_engine", engine)   # the result's column names
    _, _, parts = _partitions(_sqlite(tmp_path / "d.db", _table()))
    assert spy.statements == [
        'SELECT * FROM (SELECT * FROM t) AS q LIMIT 0',
        'SELECT t, COUNT(*), COUNT(id), MIN(id), MAX(id) FROM (SELECT id AS id, NTILE(3) OVER '
        '(ORDER BY id) AS t FROM (SELECT * FROM t) AS q) AS r GROUP BY t ORDER BY t']
    spy.statements.clear()
    import tasks.sql_arrow as arrow

    connect = arrow.arrow_connect

    def spied(engine):
        conn = connect(engine)
        cursor = conn.cursor

        def spied_cursor():
            cur = cursor()
            execute = cur.execute
            cur.execute = lambda q, p=None: spy.statements.append(q) or execute(q, p)
            return cur

        conn.cursor = spied_cursor
        return conn

    monkeypatch.setattr(arrow, "arrow_connect", spied)
    read_sql_partition(parts[1], ROLES)   # through ADBC: each column by its storage class
    assert spy.statements == ["SELECT " + ", ".join(
        f"CASE typeof({c}) WHEN '{k}' THEN {c} END" for c in ("id", '"A"', '"Y"', "x1", "x2")
        for k in ("integer", "real", "text", "blob")) + " FROM (SELECT * FROM t) AS q "
        "WHERE id >= ? AND id < ?"]


def test_a_missing_id_is_refused_before_the_charge_without_its_row(tmp_path):
    table = _table(50).astype({"id": object})
    table.loc[17, "id"] = None
    with pytest.raises(ValueError, match="holds a missing id") as err:
        _partitions(_sqlite(tmp_path / "d.db", table))
    assert "17" not in without_paths(str(err.value))


def test_sql_errors_before_the_charge_withhold_data_messages(tmp_path):
    source = _sqlite(tmp_path / "d.db", _table(50))
    bad = DataSource(sql="SELECT * FROM nowhere", url=source.url)
    with pytest.raises(ValueError, match="no such table: nowhere"):
        _partitions(bad)
    # a data error (a value the query cannot take: SQLite's overflow on abs(min int64))
    with sqlite3.connect(tmp_path / "d.db") as con:
        con.execute("UPDATE t SET id = -9223372036854775808 WHERE rowid = 3")
    data_error = DataSource(sql="SELECT abs(id) AS id, A, Y, x1, x2 FROM t", url=source.url)
    with pytest.raises(ValueError, match="withheld") as err:
        _partitions(data_error)
    assert "9223372036854775808" not in str(err.value)


def test_a_data_error_while_streaming_a_partition_withholds_its_message(tmp_path):
    """A value the query cannot take in a later chunk (read from the driver's cursor, not
    through SQLAlchemy) is reported as a failed data.sql, its message withheld, like one in
    the first chunk."""
    frame = _table(60).assign(z=1)
    frame.loc[59, "z"] = -9223372036854775808    # abs() overflows on it; the last rowid
    source = _sqlite(tmp_path / "d.db", frame)
    query = DataSource(sql="SELECT id, A, Y, abs(z) AS x1, x2 FROM t", url=source.url)
    _, _, [part] = _partitions(query, parts=1, chunk_rows=10)   # the count reads only ids
    with pytest.raises(ValueError, match="withheld") as err:
        read_sql_partition(part, ROLES)
    assert "9223372036854775808" not in str(err.value)


def test_a_changed_source_fails_the_partition_read(tmp_path):
    path = tmp_path / "d.db"
    _, _, parts = _partitions(_sqlite(path, _table()))
    with sqlite3.connect(path) as con:
        con.execute("DELETE FROM t WHERE rowid IN (SELECT rowid FROM t LIMIT 40)")
    with pytest.raises(ValueError, match="the source changed"):
        for part in parts:
            read_sql_partition(part, ROLES)


def test_postgresql_streams_the_same_partitions(postgres_url, tmp_path):
    table = _table(600, seed=3)
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        table.to_sql("records", conn, index=False)
    engine.dispose()
    source = DataSource(sql='SELECT * FROM records', url=postgres_url)
    _, pg_footers, pg_parts = _partitions(source, chunk_rows=64)
    _, lite_footers, lite_parts = _partitions(_sqlite(tmp_path / "d.db", table))
    assert [r for r, _ in pg_footers] == [r for r, _ in lite_footers]
    assert pg_footers[0][1] == lite_footers[0][1]
    for a, b in zip(pg_parts, lite_parts, strict=True):
        pd.testing.assert_frame_equal(read_sql_partition(a, ROLES),
                                      read_sql_partition(b, ROLES))
    bad = DataSource(sql='SELECT id / 0 AS id, "A", "Y", x1, x2 FROM records',
                     url=postgres_url)
    with pytest.raises(ValueError, match=r"SQLSTATE 22012\); the database's message is"):
        _partitions(bad)


def test_auto_takes_p_from_n_and_the_workers_memory(tmp_path):
    """``sql_partitions: auto`` (issue 35 §5): n from one ``COUNT`` in the database, then
    :func:`dpcausal.ate.partitioned.auto_partitions`; a LocalCluster's workers share this
    machine's memory."""
    import psutil

    from conf.models import RunnerConfig
    from tasks.sql_partitions import sql_partitions

    source = _sqlite(tmp_path / "d.db", _table(1200))
    auto = DataSource(sql=source.sql, url=source.url, sql_partitions="auto", id_column="id",
                      dtypes={"id": "int"})
    parts = sql_partitions(auto, RunnerConfig(kind="dask", max_workers=3))
    assert (parts.workers, parts.worker_memory) == (3, psutil.virtual_memory().total // 3)
    counted = count_sql(parts, KEY, {"treatment": "A", "outcome": "Y"})
    assert [p.rows for p in counted.parts] == [400, 400, 400]   # max(3 workers, 1) partitions
    small = SqlPartitions(source, id_column="id", count="auto", id_type="int", workers=2,
                          worker_memory=2**30)
    assert len(count_sql(small, KEY, {"treatment": "A", "outcome": "Y"}).parts) == 2


def test_a_statement_timeout_is_named(postgres_url):
    """A warehouse role's ``statement_timeout`` cancelling the count (SQLSTATE 57014) is named
    with the database's message, which is about the server, never a value (class 57, operator
    intervention; so is class 08, connection); it was withheld as a data error,
    leaving the curator to guess. Setting ``options=-c statement_timeout=0`` in the URL is the
    cure the guide gives."""
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        _table(40).to_sql("records", conn, index=False)
    engine.dispose()
    slow = "SELECT * FROM records, pg_sleep(0.2) AS s"
    timed_out = DataSource(sql=slow, url=postgres_url + "?options=-c%20statement_timeout%3D50")
    with pytest.raises(ValueError, match=r"QueryCanceled: canceling statement due to statement "
                                         "timeout"):
        _partitions(timed_out)
    cured = DataSource(sql=slow, url=postgres_url + "?options=-c%20statement_timeout%3D0")
    assert sum(rows for rows, _ in _partitions(cured)[1]) == 40


@pytest.mark.parametrize("columns, refused", [
    ({"treatment": "ts", "outcome": "y", "covariates": ["x"]}, "'ts' is a timestamp"),
    ({"treatment": "a", "outcome": "j", "covariates": ["x"]}, "'j' is a jsonb"),
    ({"treatment": "a", "outcome": "y", "covariates": ["x", "d"]}, "'d' is a date"),
    ({"treatment": "a", "outcome": "y"}, "'ts' is a timestamp"),     # every other column
])
def test_registration_refuses_a_role_whose_database_type_never_reads_as_a_number(
        postgres_url, columns, refused):
    """A partitioned PostgreSQL source whose treatment, outcome or covariate is a column of a
    type that never reads as a number (a timestamp, a date, json: the database's type of the
    result's column, read with ``LIMIT 0``, no value) is refused at registration, naming the
    column, its type and the fix: every release of it would be charged and say nothing (each
    row missing that role). Before, it registered (seen: a timestamp as the treatment). The
    same column declared str, or cast in the query, is the curator's to choose."""
    from conf.kinds import load_any
    from tasks.registration import count

    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE odd AS SELECT i AS id, mod(i, 2) AS a, i / 10.0 AS y, "
                             "i * 1.5 AS x, timestamp '2026-01-01' + i * interval '1 day' AS ts,"
                             " date '2026-01-01' + i AS d, jsonb_build_object('k', i) AS j "
                             "FROM generate_series(1, 30) AS i")
    engine.dispose()

    def config(cols, dtypes=None):
        return load_any(None, base={
            "name": "odd", "data": {"sql": "SELECT * FROM odd", "url": postgres_url,
                                    "sql_partitions": 2, "id_column": "id",
                                    "dtypes": {"id": "int", **(dtypes or {})}},
            "columns": cols, "ledger": {"dataset_id": "odd"},
            "estimator": {"estimator": "aipw", "outcome_bounds": [0, 3], "n_folds": 2}})

    with pytest.raises(ValueError, match=refused + r" in the database.*data\.sql"):
        count(config(columns))
    assert count(config({"treatment": "a", "outcome": "y", "covariates": ["x"]}))["n"] == 30
