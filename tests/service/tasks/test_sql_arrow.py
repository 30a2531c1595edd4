"""The Arrow reader of SQL partitions (issue 41 §1; tasks/sql_arrow.py) against today's DB-API
reader on the same tables: the same declared types and missing values for NULLs, text ids,
booleans with NULLs, numerics, large integers, SQLite's mixed storage classes and PostgreSQL's
odd types; its driver errors withheld as the DB-API's are; and it is the reader actually used
for PostgreSQL and SQLite files."""

from __future__ import annotations

import sqlite3

import pandas as pd
import pytest
import sqlalchemy as sa

import tasks.sql_arrow as sql_arrow
from conf.models import DataSource
from dpcausal.ate.partitioned import Roles
from tasks.sql_partitions import SqlPartitions, count_sql, read_sql_partition

KEY = bytes(range(32))
BIG = 2 ** 62 + 1          # not a float64: exact as an int, rounded as a float


def _reads(source: DataSource, roles: Roles, dtypes: dict[str, str], id_type: str,
           monkeypatch, parts: int = 2) -> tuple[list[pd.DataFrame], list[pd.DataFrame]]:
    """Every partition read by the Arrow reader, then by today's DB-API reader (chunks of 3
    rows, so a chunk may hold NULLs only)."""
    sql = SqlPartitions(source, id_column=roles.id, count=parts, id_type=id_type,
                        dtypes=dtypes, chunk_rows=3)
    counted = count_sql(sql, KEY, {"treatment": roles.treatment, "outcome": roles.outcome,
                                   "covariates": list(roles.covariates)})
    used = []
    real = sql_arrow.arrow_connect
    monkeypatch.setattr(sql_arrow, "arrow_connect", lambda e: used.append(1) or real(e))
    arrow = [read_sql_partition(p, roles) for p in counted.parts]
    assert len(used) == parts               # the Arrow reader read every partition
    monkeypatch.setattr(sql_arrow, "arrow_driver", lambda engine: None)
    dbapi = [read_sql_partition(p, roles) for p in counted.parts]
    assert len(used) == parts
    return arrow, dbapi


def _same(arrow: list[pd.DataFrame], dbapi: list[pd.DataFrame]) -> None:
    for a, b in zip(arrow, dbapi, strict=True):
        pd.testing.assert_frame_equal(a, b)


SQLITE_ROWS = [
    # id, A (bool), Y (float), x_int (int), x_big, x_mixed, x_text (str), x_null, x_blob
    ("p-1é", 1, 0.5, 3, BIG, 2, "a", None, b"\x00"),
    ("p-2", 0, None, None, None, 2.5, "", None, None),
    ("p-3", None, -1.25, 4.0, -BIG, "  7.5 ", None, None, b"1"),
    ("p-4", "true", "0.75", "12", 7, "abc", 17, None, None),
    ("p-5", "FALSE", "x", 2.5, None, "", 2.5, None, None),
    ("p-6", 2, float("nan"), "  9 ", 2 ** 53 + 1, None, BIG, None, None),
    ("p-7", 1.0, 1e300, None, 1, 1e-7, "z", None, None),
    ("p-8", "1", "inf", -0.0, 0, "-inf", "é", None, None),
]


def test_sqlite_arrow_reads_equal_the_dbapi_reads(tmp_path, monkeypatch):
    """A SQLite table with no column types: text ids, booleans as 1/0/true/false/NULL and out
    of range, numbers as text, integers beyond 2^53, a column mixing integers, reals and text,
    an all-NULL column, blobs; each column as its declared type."""
    path = tmp_path / "d.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (id, A, Y, x_int, x_big, x_mixed, x_text, x_null, x_blob)")
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", SQLITE_ROWS)
    source = DataSource(sql="SELECT * FROM t", url=f"sqlite:///{path}")
    covariates = ("x_int", "x_big", "x_mixed", "x_text", "x_null", "x_blob")
    roles = Roles(id="id", treatment="A", outcome="Y", covariates=covariates)
    for dtypes in ({"A": "bool", "x_int": "int", "x_text": "str", "x_big": "str"},
                   {"A": "int", "x_text": "float", "x_mixed": "str", "x_blob": "str",
                    "x_null": "bool"}):
        arrow, dbapi = _reads(source, roles, dtypes, "str", monkeypatch)
        _same(arrow, dbapi)
        monkeypatch.undo()
    frame = pd.concat(arrow)
    assert frame["id"].tolist() == sorted(r[0] for r in SQLITE_ROWS)


def test_sqlite_int_ids_and_large_integers(tmp_path, monkeypatch):
    path = tmp_path / "d.db"
    ids = [-(2 ** 63), 2 ** 63 - 1, 0, BIG, -BIG, 5]
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (id INTEGER, A INTEGER, Y REAL, x1 INTEGER)")
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)",
                        [(i, k % 2, k / 7, i if k % 3 else None) for k, i in enumerate(ids)])
    source = DataSource(sql="SELECT * FROM t", url=f"sqlite:///{path}")
    roles = Roles(id="id", treatment="A", outcome="Y", covariates=("x1",))
    for dtypes in ({}, {"x1": "str"}):
        arrow, dbapi = _reads(source, roles, dtypes, "int", monkeypatch)
        _same(arrow, dbapi)
        monkeypatch.undo()
    assert pd.concat(arrow)["id"].tolist() == sorted(ids)


def test_postgresql_arrow_reads_equal_the_dbapi_reads(postgres_url, monkeypatch):
    """PostgreSQL's own types: text ids, boolean with NULLs, numeric with NULLs, NaN and
    Infinity, bigint at both ends, smallint, real, char, and odd types (date, timestamp, uuid,
    json, money, interval, arrays, bytea) declared float; those whose text is Python's also
    declared str (numeric's NaN is not: Decimal('NaN') was missing as a str, its text is not)."""
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE odd (id text, a boolean, y numeric(10, 3), nn numeric, big bigint, "
            "i2 smallint, r real, ch char(3), d date, ts timestamp, tz timestamptz, u uuid, "
            "j json, m money, iv interval, arr int[], by bytea)")
        conn.exec_driver_sql(
            r"INSERT INTO odd VALUES ('r-1', true, 1.5, 'NaN', 9223372036854775807, 3, 1.25, "
            r"'ab', '2020-01-02', '2020-01-02 03:04:05', '2020-01-02 03:04:05+00', "
            r"'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '3', '1.50', '1 day', ARRAY[1, 2], "
            r"'\x00ff'), ('r-2', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
            r"NULL, NULL, NULL, NULL, NULL, NULL), ('r-3é', false, -2.125, 'Infinity', "
            r"-9223372036854775808, -1, 'NaN', ' ', '2021-03-04', NULL, NULL, NULL, '" + '"x"'
            + r"', '-3', '-2 hours', ARRAY[]::int[], ''), ('r-4', true, 0, '-1e-3', "
            + str(BIG) + ", 0, 'Infinity', '7', NULL, NULL, NULL, NULL, '2.5', NULL, NULL, "
            "NULL, NULL)")
    engine.dispose()
    source = DataSource(sql="SELECT * FROM odd", url=postgres_url)
    numeric = ("nn", "big", "i2", "r", "ch", "d", "ts", "tz", "u", "j", "m", "iv", "arr", "by")
    roles = Roles(id="id", treatment="a", outcome="y", covariates=numeric)
    arrow, dbapi = _reads(source, roles, {"a": "bool"}, "str", monkeypatch)
    _same(arrow, dbapi)
    monkeypatch.undo()
    as_text = {c: "str" for c in ("big", "i2", "ch", "d", "ts", "u", "m")}
    arrow, dbapi = _reads(source, roles, {"a": "int", "y": "int", **as_text}, "str",
                          monkeypatch)
    _same(arrow, dbapi)
    assert pd.concat(arrow)["big"].tolist()[0] == "9223372036854775807"
    monkeypatch.undo()
    # a data error in the Arrow read (division by zero on one row, raised by the batch stream:
    # pyarrow's OSError, without the SQLSTATE the DB-API reader showed): no message
    bad = DataSource(sql="SELECT id, a, y, 1 / (i2 + 1) AS x FROM odd", url=postgres_url)
    sql = SqlPartitions(bad, id_column="id", count=1, id_type="str")
    [part] = count_sql(sql, KEY, {"treatment": "a", "outcome": "y"}).parts
    with pytest.raises(ValueError, match="failed against data.url: OSError; the database's "
                                         "message is withheld") as err:
        read_sql_partition(part, Roles(id="id", treatment="a", outcome="y", covariates=("x",)))
    assert "division" not in str(err.value)


def test_an_arrow_read_error_withholds_its_message(tmp_path):
    """A value the query cannot take (SQLite's integer overflow in abs()) while the Arrow
    reader streams a partition: a failed data.sql, its message withheld."""
    path = tmp_path / "d.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (id INTEGER, A INTEGER, Y REAL, z INTEGER)")
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)",
                        [(i, i % 2, 0.1, 1) for i in range(59)]
                        + [(59, 1, 0.1, -9223372036854775808)])
    query = DataSource(sql="SELECT id, A, Y, abs(z) AS x1 FROM t", url=f"sqlite:///{path}")
    sql = SqlPartitions(query, id_column="id", count=1, id_type="int")
    [part] = count_sql(sql, KEY, {"treatment": "A", "outcome": "Y"}).parts
    with pytest.raises(ValueError, match="withheld") as err:
        read_sql_partition(part, Roles(id="id", treatment="A", outcome="Y", covariates=("x1",)))
    assert "9223372036854775808" not in str(err.value) and "overflow" not in str(err.value)


def test_libpq_options_in_the_url_reach_the_arrow_reader(postgres_url, monkeypatch):
    """A URL's libpq ``options`` (``?options=-c search_path=analytics``: how a warehouse user
    sets a schema or a ``statement_timeout``) reach the Arrow reader's connection as they reach
    psycopg's. SQLAlchemy rendered the space as ``+``, which libpq keeps: the ADBC connection
    was refused (``unrecognized configuration parameter "+search_path"``) after the psycopg
    count had worked, so the release failed after its charge."""
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE SCHEMA analytics")
        pd.DataFrame({"id": range(40), "a": [k % 2 for k in range(40)],
                      "y": [k / 40 for k in range(40)]}).to_sql("records", conn,
                                                                schema="analytics", index=False)
    engine.dispose()
    url = postgres_url + "?options=-c%20search_path%3Danalytics%20-c%20statement_timeout%3D0"
    source = DataSource(sql="SELECT * FROM records", url=url)
    arrow, dbapi = _reads(source, Roles(id="id", treatment="a", outcome="y", covariates=()),
                          {}, "int", monkeypatch)
    _same(arrow, dbapi)
    assert pd.concat(arrow)["id"].tolist() == list(range(40))
