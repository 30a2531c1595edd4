"""A SQL query as the source of a partitioned release (issue 28 §3, issue 35 §1-2; spec
dp_ate_ensemble.md §2.5b).

The query is split into P partitions by ranges of its declared id column: the ids in the
database's order cut into P consecutive tiles of ``ceil(n/P)`` or ``floor(n/P)`` ids (SQL's
``NTILE(P) OVER (ORDER BY id)``: the first ``n mod P`` tiles hold one id more), partition p
the half-open range ``[first id of tile p, first id of tile p+1)`` (the first without a lower
bound, the last non-empty one without an upper bound, so every row of the query lies in exactly
one range). Each worker's query is the curator's SQL wrapped as a subquery with a ``WHERE`` on
its range, no ``ORDER BY``: the database returns that partition's rows only, so each row is read
once per release phase. On PostgreSQL and a SQLite file the rows come as Arrow record batches
through ADBC (:mod:`tasks.sql_arrow`, issue 41 §1); on other databases through the DB-API
driver, a worker holding its partition and one chunk of ``chunk_rows`` rows (a server-side
cursor where the driver has one). Both readers hand the same raw values to the same coercion.
Inside a partition the blocks and folds are the Parquet path's
(:func:`dpcausal.ate.partitioned.assign_blocks`: the partition's rows ranked by the secret keyed
hash of their ids), so a Parquet file holding the same rows gives every row the same block. A
partition's rows are put in id order once read, so the order the database returns rows in
changes nothing, not even the floating-point sums. Integer and text ids take the same rule: the
database orders and compares them (its collation for text), in the count and in the reads alike.
Plain SQL on PostgreSQL and SQLite >= 3.25 (window functions), no extension.

Public facts read before the charge (docs/privacy.md, "Partitioned sources"): the result's
column names (``LIMIT 0``) and, from one aggregate query over the id column alone, each tile's
row count and first and last id. Ranges and counts are functions of the set of record ids
only: replace-one neighbours keep every id (spec §1.3), so both give the same ranges and counts,
like the footer counts of Parquet partitions. No treatment, outcome or covariate value is read
before the charge, and no id reaches Python but the 2P tile ends (held in memory, never a
parameter, result or repr). Types are declared, never inferred (issue 26 §1): the id is ``int``
or ``str``, every other column is coerced by :func:`tasks.data.coerce`. A missing id (NULL, or
a tile end that is not an integer for an ``int`` id) and an id repeated across two tiles are
refused before the charge: the id is the index of neighbouring, not a private value. A SQL
error before the charge is reported by :func:`tasks.data.query_error` (the database's message
withheld unless it is about the query or the schema); after the charge the reading task runs
inside :func:`dpcausal.validation.private_failures`, as every other step on values does.

``sql_partitions: auto`` takes P from n (a ``COUNT`` over the id column first) and the
workers' memory (:func:`dpcausal.ate.partitioned.auto_partitions`).

The query must return the same rows for the whole release (a table or snapshot nobody writes to
meanwhile): a partition whose rows differ in number from its count fails the release after the
charge, generically.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Iterator, Literal

import numpy as np
import pandas as pd

from conf.models import DataSource, Schema
from dpcausal.ate.partitioned import Roles, auto_partitions
from tasks.data import (
    coerce,
    connected,
    database_engine,
    query_error,
    result_columns,
    source_description,
)

#: Arrow type names of the declared types, as :func:`dpcausal.ate.partitioned.check_roles` reads
#: a partition's schema.
_ARROW = {"float": "double", "int": "int64", "bool": "bool", "str": "string"}
_INT = re.compile(r"\s*[+-]?\d+\s*")
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


@dataclass(frozen=True)
class SqlPartitions:
    """A ``data.sql`` source (``url`` or ``url_block``) split into ``count`` partitions by
    ranges of ``id_column`` (of declared type ``id_type``; ``"auto"``: P from n and the
    ``workers``' memory, ``worker_memory`` bytes each); ``dtypes`` declares other columns' types
    where their role's default does not fit (:data:`conf.kinds.ROLE_DTYPES`)."""

    source: DataSource
    id_column: str
    count: int | Literal["auto"]
    id_type: Literal["int", "str"] = "str"
    dtypes: dict[str, str] = field(default_factory=dict)
    chunk_rows: int = 50_000
    workers: int = 2
    worker_memory: int | None = None

    def __post_init__(self) -> None:
        if self.source.sql is None:
            raise ValueError("a partitioned SQL source needs data.sql")
        if self.count != "auto" and (isinstance(self.count, bool) or not isinstance(
                self.count, int) or self.count < 1):
            raise ValueError(f"the number of SQL partitions must be an int >= 1 or 'auto', "
                             f"got {self.count!r}")
        if self.id_type not in ("int", "str"):
            raise ValueError(f"an id column is int or str, got {self.id_type!r}")

    def identity(self) -> dict[str, Any]:
        """What the ledger binds (keyed): the database and query (no password), the id column
        and P as configured; never the counts or ranges."""
        return {"sql": source_description(self.source), "id_column": self.id_column,
                "sql_partitions": self.count}


@dataclass(frozen=True)
class SqlPartition:
    """Partition ``index`` of a :class:`SqlPartitions`, with the ``rows`` counted before the
    charge (public, module docstring) and its id range ``[lower, upper)`` (None: unbounded;
    ids as the database returned them, held in memory only: no repr)."""

    of: SqlPartitions
    index: int
    rows: int
    lower: Any = field(default=None, repr=False)
    upper: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class SqlCounted:
    """The P partitions of a SQL source as counted before the charge, with their ``footers``
    (rows, schema) and the fold ``key`` drawn for the release (its blocks and folds inside each
    partition): what the release reads its partitions with, so that the count runs once per
    release. Held in memory only (the key is no parameter, result or repr)."""

    parts: tuple[SqlPartition, ...]
    footers: tuple[tuple[int, dict[str, str]], ...]
    key: bytes = field(repr=False)


def count_sql(parts: SqlPartitions, key: bytes, roles: dict[str, Any]) -> SqlCounted:
    """The release's partitions of a SQL source and their footers (row count and schema, for
    :func:`dpcausal.ate.partitioned.plan_partitions`), carrying the fold ``key`` (issue 35 §2;
    docs/privacy.md, "A SQL source's partitions come from the ids alone"): the result's
    column names, then one aggregate query over the id column (module docstring); ``roles`` are
    the release's treatment, outcome and covariates (None: every other column)."""
    schema = sql_schema(parts, roles)
    names = list(schema)
    count = parts.count
    if count == "auto":
        if parts.worker_memory is None:
            raise ValueError("sql_partitions='auto' needs the workers' memory (worker_memory)")
        covariates = roles.get("covariates")
        d = len(covariates) if covariates is not None else len(names) - 3
        count = auto_partitions(_count_rows(parts), d, workers=parts.workers,
                                worker_memory=parts.worker_memory)
    tiles = _tiles(parts, count)
    firsts = [first for _, first, _ in tiles]
    out = tuple(SqlPartition(parts, p, rows, lower=firsts[p] if p else None,
                             upper=firsts[p + 1] if p + 1 < len(tiles) else None)
                for p, (rows, _, _) in enumerate(tiles))
    out += tuple(SqlPartition(parts, p, 0) for p in range(len(tiles), count))  # n < P
    return SqlCounted(out, tuple((p.rows, schema) for p in out), key)


def sql_schema(parts: SqlPartitions, roles: dict[str, Any]) -> dict[str, str]:
    """Every partition's schema as :func:`dpcausal.ate.partitioned.check_roles` reads a
    footer's (``{column: Arrow type}``): the result's column names (``LIMIT 0``, no value), each
    as its declared type (``roles``: the release's treatment, outcome and covariates); the
    curator's registration checks the roles on it, a release counts its partitions with it
    (:func:`count_sql`). An id column the result lacks is a ValueError."""
    names = result_columns(parts.source)
    if parts.id_column not in names:
        raise ValueError(f"data.id_column {parts.id_column!r} is not a column of data.sql's "
                         f"result (columns: {names})")
    return {name: _ARROW[_declared(parts, roles, name)] for name in names}


#: PostgreSQL types no value of which reads as a number or a 0/1 under a ``float``, ``int`` or
#: ``bool`` declaration (their text, :func:`tasks.data.coerce`'s input, is a date, a time, an
#: id or a document; :mod:`tasks.sql_arrow` reads them as text).
_NEVER_NUMBERS = frozenset({"date", "timestamp", "timestamptz", "time", "timetz", "interval",
                            "uuid", "json", "jsonb", "bytea", "xml", "inet", "cidr", "macaddr",
                            "tsvector", "point"})


def check_database_types(parts: SqlPartitions, roles: dict[str, Any]) -> None:
    """The curator's check at registration of a PostgreSQL source: a role (treatment, outcome,
    covariate) declared ``float``, ``int`` or ``bool`` on a column whose database type never
    reads as one (:data:`_NEVER_NUMBERS`: a timestamp, a date, json...; covariates left out of
    the config are every other column) would be missing in
    every row, so every release would be charged and say nothing: a ValueError naming the
    column, its type and the fix. The types are the result's, ``LIMIT 0`` (no row read); other
    databases (SQLite has no column types) and drivers without a type registry are not
    checked."""
    types = _database_types(parts)
    covariates = roles.get("covariates")
    if covariates is None:   # every other column, as the release takes them
        covariates = [c for c in types if c not in (parts.id_column, roles.get("treatment"),
                                                    roles.get("outcome"))]
    named = [roles.get("treatment"), roles.get("outcome"), *covariates]
    for name in (c for c in named if c is not None and types.get(c) in _NEVER_NUMBERS):
        declared = _declared(parts, roles, name)
        if declared != "str":
            raise ValueError(
                f"column {name!r} is a {types[name]} in the database: declared {declared} for "
                "its role, it would read as missing in every row, so every release would be "
                "charged and say nothing; choose another column (or name the covariates in "
                "columns.covariates), or turn it into a number in data.sql (e.g. EXTRACT(EPOCH "
                "FROM ...))")


def _database_types(parts: SqlPartitions) -> dict[str, str]:
    """``{column: PostgreSQL type name}`` of the query's result (``LIMIT 0``), from psycopg's
    type registry; empty for another database or driver."""
    import sqlalchemy

    engine = database_engine(parts.source)
    try:
        if engine.dialect.name != "postgresql":
            return {}
        with connected(parts.source, engine) as conn:
            raw = conn.connection.dbapi_connection
            registry = getattr(getattr(raw, "adapters", None), "types", None)
            if registry is None:
                return {}
            with raw.cursor() as cur:   # no parameters: the query's text as it is
                cur.execute(f"SELECT * FROM ({parts.source.sql}) AS q LIMIT 0")
                found = {d.name: registry.get(d.type_code) for d in cur.description or ()}
        return {name: info.name for name, info in found.items() if info is not None}
    except (sqlalchemy.exc.SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as exc:
        raise query_error(parts.source, exc) from None
    finally:
        engine.dispose()


def sql_partitions(source: DataSource, runner: Any = None) -> SqlPartitions:
    """The partitioned SQL source of a config's ``data`` (``sql_partitions`` and ``id_column``
    set): the id's type is ``data.dtypes`` of the id column, else str (an id's role default,
    issue 26 §1); ``runner`` (a :class:`conf.models.RunnerConfig`, default a LocalCluster of 2)
    gives ``sql_partitions: auto`` its workers and their memory."""
    from conf.models import RunnerConfig

    if source.sql_partitions is None or source.id_column is None:
        raise ValueError("a partitioned SQL source needs data.sql_partitions and data.id_column")
    id_type = source.dtypes.get(source.id_column, "str")
    if id_type not in ("int", "str"):
        raise ValueError(f"data.dtypes of the id column {source.id_column!r} must be int or "
                         f"str, got {id_type}")
    runner = runner or RunnerConfig(kind="dask")
    workers, memory = (_cluster_memory(runner) if source.sql_partitions == "auto"
                       else (runner.max_workers, None))
    return SqlPartitions(source, id_column=source.id_column, count=source.sql_partitions,
                         id_type=id_type, dtypes={k: v for k, v in source.dtypes.items()
                                                  if k != source.id_column},
                         workers=workers, worker_memory=memory)


def read_sql_partition(part: SqlPartition, roles: Roles) -> pd.DataFrame:
    """The declared columns of one partition (module docstring): the query restricted to the
    partition's id range, streamed in chunks, coerced to the declared types, the rows in id
    order. A row count that differs from the one counted before the charge, or an id that is
    not of the declared type, is a ValueError (the source changed)."""
    of = part.of
    schema = Schema({c: _declared(of, _role_types(roles), c) for c in roles.columns()
                     if c != roles.id})
    kept = []
    if part.rows:
        for chunk in _chunks(part, roles.columns()):
            frame = coerce(chunk[list(schema.columns)], schema)
            frame.insert(0, roles.id, _ids(chunk[roles.id], of.id_type))
            kept.append(frame)
    frame = (pd.concat(kept, ignore_index=True) if kept else
             pd.DataFrame({c: pd.Series(dtype=float) for c in roles.columns()}))
    if len(frame) != part.rows or frame[roles.id].isna().any():
        raise ValueError("a SQL partition returned another number of rows than was counted "
                         "before the charge, or a missing id: the source changed during the "
                         "release")
    frame = frame.sort_values(roles.id, kind="stable", ignore_index=True)
    frame[roles.id] = frame[roles.id].astype(np.int64 if of.id_type == "int" else object)
    return frame[roles.columns()]


def _role_types(roles: Roles) -> dict[str, Any]:
    return {"treatment": roles.treatment, "outcome": roles.outcome,
            "covariates": list(roles.covariates)}


def _declared(parts: SqlPartitions, roles: dict[str, Any], name: str) -> str:
    """A column's declared type: ``dtypes``, else its role's default (every column that is not
    the id, the treatment or the outcome: a covariate, float)."""
    from conf.kinds import ROLE_DTYPES

    if name == parts.id_column:
        return parts.id_type
    if name in parts.dtypes:
        return parts.dtypes[name]
    role = "treatment" if name == roles.get("treatment") else (
        "outcome" if name == roles.get("outcome") else "covariates")
    return ROLE_DTYPES[role]


def _ids(col: pd.Series, id_type: str) -> pd.Series:
    """The ids as their declared type by public rules: ``int`` keeps a whole number in the
    int64 range (an integer, or text of one; nullable ``Int64``), ``str`` keeps text (other
    values as their text); anything else, and an empty text, is missing."""
    if id_type == "int":
        if pd.api.types.is_integer_dtype(col) and not pd.api.types.is_bool_dtype(col):
            return col.astype("Int64").reset_index(drop=True)
        return pd.Series(pd.array([_int_id(v) for v in col], dtype="Int64"))
    return pd.Series([v if isinstance(v, str) else None if _missing(v) else str(v)
                      for v in col], dtype=object).where(lambda t: t != "")


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _int_id(value: Any) -> int | None:
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        out: int | None = int(value)
    elif isinstance(value, str) and _INT.fullmatch(value):
        out = int(value)
    else:
        return None
    return out if out is not None and _INT64[0] <= out <= _INT64[1] else None


def _cluster_memory(runner: Any) -> tuple[int, int]:
    """(workers, memory per worker in bytes) of ``runner``'s Dask cluster, public facts of the
    deployment: a LocalCluster shares this machine's memory among ``max_workers`` workers (its
    workers have no memory limit); a running scheduler reports its workers' ``memory_limit``
    (the smallest), which must be set (``dask worker --memory-limit``)."""
    if runner.address is None:
        import psutil

        return runner.max_workers, int(psutil.virtual_memory().total) // runner.max_workers
    from distributed import Client

    from tasks.runners import dask_security

    with Client(runner.address, security=dask_security(runner), timeout=30) as client:
        limits = [int(w.get("memory_limit") or 0)
                  for w in client.scheduler_info()["workers"].values()]
    if not limits or min(limits) <= 0:
        raise ValueError(f"sql_partitions: auto needs the memory limit of every worker of "
                         f"{runner.address}: start them with dask worker --memory-limit, or "
                         "set data.sql_partitions to a number")
    return len(limits), min(limits)


def _quoted(engine: Any, parts: SqlPartitions) -> str:
    return str(engine.dialect.identifier_preparer.quote(parts.id_column))


def _count_rows(parts: SqlPartitions) -> int:
    """n: ``COUNT(*)`` of the query, in the database (the id column only is named)."""
    rows = _run(parts, lambda i: f"SELECT COUNT({i}) AS ids, COUNT(*) AS n "
                                 f"FROM ({parts.source.sql}) AS q")
    ids, n = rows[0]
    _check_missing(parts, ids, n)
    return int(n)


def _tiles(parts: SqlPartitions, count: int) -> list[tuple[int, Any, Any]]:
    """(rows, first id, last id) of each non-empty tile of ``NTILE(count) OVER (ORDER BY id)``,
    in order: one aggregate query in the database, ``count`` rows back (module docstring). A
    missing id, a tile end that is not of the declared type, or an id in two tiles is refused
    (the ids are public facts)."""
    rows = _run(parts, lambda i: (
        f"SELECT t, COUNT(*), COUNT(id), MIN(id), MAX(id) FROM (SELECT {i} AS id, NTILE({count}) "
        f"OVER (ORDER BY {i}) AS t FROM ({parts.source.sql}) AS q) AS r GROUP BY t ORDER BY t"))
    _check_missing(parts, sum(r[2] for r in rows), sum(r[1] for r in rows))
    if parts.id_type == "int" and any(_int_id(r[k]) is None for r in rows for k in (3, 4)):
        _check_missing(parts, 0, 1)  # a tile end that is no integer: not an int id
    if any(a[4] == b[3] for a, b in pairwise(rows)):   # in order: last <= next first
        raise ValueError(f"data.id_column {parts.id_column!r} holds a repeated id: every record "
                         "needs its own id, the index of neighbouring")
    return [(int(r[1]), r[3], r[4]) for r in rows]


def _check_missing(parts: SqlPartitions, ids: int, rows: int) -> None:
    if ids != rows:
        raise ValueError(
            f"data.id_column {parts.id_column!r} holds a missing id (NULL, or not "
            f"{'an integer' if parts.id_type == 'int' else 'text'}): every record needs "
            "its id, the index of neighbouring")


def _run(parts: SqlPartitions, query: Any) -> list[tuple[Any, ...]]:
    """The rows of ``query(quoted id column)``, an aggregate; a SQL error as
    :func:`tasks.data.query_error`."""
    import sqlalchemy

    engine = database_engine(parts.source)
    try:
        with connected(parts.source, engine) as conn:
            return [tuple(r) for r in conn.execute(sqlalchemy.text(query(_quoted(engine,
                                                                                 parts))))]
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise query_error(parts.source, exc) from None
    finally:
        engine.dispose()


def _chunks(part: SqlPartition, columns: list[str]) -> Iterator[pd.DataFrame]:
    """The query's ``columns`` over the partition's id range (``WHERE lower <= id < upper``, the
    bounds as bound parameters; no ``ORDER BY``), raw, in chunks: the one reader of a partition's
    rows, which :func:`read_sql_partition` coerces. Through ADBC as Arrow where a driver exists
    (:mod:`tasks.sql_arrow`: PostgreSQL, a SQLite file), else through the DB-API driver in chunks
    of ``chunk_rows`` rows, streamed (a server-side cursor where the driver has one:
    ``stream_results``); a SQL error as :func:`tasks.data.query_error`."""
    import sqlalchemy

    from tasks.sql_arrow import arrow_chunks, arrow_driver

    of = part.of
    engine = database_engine(of.source)
    try:
        quote = engine.dialect.identifier_preparer.quote
        named = [(name, f"{quote(of.id_column)} {op} ") for name, op in
                 (("lower", ">="), ("upper", "<")) if getattr(part, name) is not None]
        bounds = {name: getattr(part, name) for name, _ in named}
        if arrow_driver(engine) is not None:
            yield from arrow_chunks(part, columns, engine, [w + "?" for _, w in named],
                                    list(bounds.values()))
            return
        where = [f"{w}:{name}" for name, w in named]
        query = (f"SELECT {', '.join(quote(c) for c in columns)} "
                 f"FROM ({of.source.sql}) AS q" + (f" WHERE {' AND '.join(where)}"
                                                  if where else ""))
        with connected(of.source, engine) as conn:
            with conn.execution_options(stream_results=True).execute(
                    sqlalchemy.text(query), bounds) as result:   # closes the cursor
                # the first chunk through SQLAlchemy, which empties the rows it prefetched;
                # the others straight from the driver's cursor (PEP 249 fetchmany; server-side
                # where SQLAlchemy made one) as plain tuples: a SQLAlchemy Row per row, then a
                # tuple of it, cost about 1 CPU s per 500,000 rows (issue 35 §3). A row missed
                # here would fail the count check of read_sql_partition.
                rows = [tuple(r) for r in result.fetchmany(of.chunk_rows)]
                while rows:   # the driver's values as they are: an int beside a NULL stays
                    yield pd.DataFrame(rows, columns=columns, dtype=object)   # an int
                    if len(rows) < of.chunk_rows:   # PEP 249: fewer only at the end
                        break
                    rows = result.cursor.fetchmany(of.chunk_rows)
    except (sqlalchemy.exc.SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as exc:
        # the driver's own errors too: the later chunks come from its cursor
        raise query_error(of.source, exc) from None
    finally:
        engine.dispose()
