"""A SQL query as the source of a partitioned release (issue 28 §3; spec dp_ate_ensemble.md §2.5b).

The query is split into P partitions by the keyed hash of its declared id column: a row belongs
to partition ``HMAC-SHA256(key, id) mod P`` (:func:`dpcausal.ate.partitioned.assign_folds` over
``range(P)``, the id encoded as the Parquet path encodes it: integers as 8-byte big-endian, text
as UTF-8). Every worker streams the query in chunks of ``chunk_rows`` rows (a server-side cursor
where the driver has one) and keeps the rows of its own partition only, so a worker's memory
holds its partition and one chunk, never the table. Inside a partition the blocks and folds are
those of the Parquet path (:func:`dpcausal.ate.partitioned.assign_blocks`: the partition's rows
ranked by the same keyed hash): the same rows with the same key give the same blocks from a
Parquet file or from SQL. A partition's rows are put in id order once read, so the order the
database returns rows in changes nothing, not even the floating-point sums.

Public facts read before the charge (the README's privacy rules, "Partitions"): the result's
column names (``LIMIT 0``) and the P row counts, computed by one pass over the id column alone.
The counts are a function of the record ids and the key only: replace-one neighbours keep every
id (spec §1.3), so they are the same on both, like the footer counts of Parquet partitions. No
treatment, outcome or covariate value is read before the charge. Types are declared, never
inferred (issue 26 §1): the id is ``int`` or ``str``, every other column is coerced by
:func:`tasks.data.coerce`. A missing id (NULL, or text that is not an integer for an ``int`` id)
is refused before the charge: the id is the index of neighbouring, not a private value. A SQL
error before the charge is reported by :func:`tasks.data.query_error` (the database's message
withheld unless it is about the query or the schema); after the charge the reading task runs
inside :func:`dpcausal.validation.private_failures`, as every other step on values does.

The query must return the same rows for the whole release (a table or snapshot nobody writes to
meanwhile): a partition whose rows differ in number from its count fails the release after the
charge, generically.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal

import numpy as np
import pandas as pd

from conf.models import DataSource, Schema
from dpcausal.ate.partitioned import Roles, assign_folds
from tasks.data import coerce, database_engine, query_error, source_description

#: Arrow type names of the declared types, as :func:`dpcausal.ate.partitioned.check_roles` reads
#: a partition's schema.
_ARROW = {"float": "double", "int": "int64", "bool": "bool", "str": "string"}
_INT = re.compile(r"\s*[+-]?\d+\s*")
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


@dataclass(frozen=True)
class SqlPartitions:
    """A ``data.sql`` source (``url`` or ``url_block``) split into ``count`` partitions by the
    keyed hash of ``id_column`` (of declared type ``id_type``); ``dtypes`` declares other
    columns' types where their role's default does not fit (:data:`conf.kinds.ROLE_DTYPES`)."""

    source: DataSource
    id_column: str
    count: int
    id_type: Literal["int", "str"] = "str"
    dtypes: dict[str, str] = field(default_factory=dict)
    chunk_rows: int = 50_000

    def __post_init__(self) -> None:
        if self.source.sql is None:
            raise ValueError("a partitioned SQL source needs data.sql")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"the number of SQL partitions must be an int >= 1, got "
                             f"{self.count!r}")
        if self.id_type not in ("int", "str"):
            raise ValueError(f"an id column is int or str, got {self.id_type!r}")

    def identity(self) -> dict[str, Any]:
        """What the ledger binds (keyed): the database and query (no password), the id column
        and P; never the counts, which change with a fresh key."""
        return {"sql": source_description(self.source), "id_column": self.id_column,
                "sql_partitions": self.count}


@dataclass(frozen=True)
class SqlPartition:
    """Partition ``index`` of a :class:`SqlPartitions`, with the ``rows`` counted before the
    charge (public, module docstring)."""

    of: SqlPartitions
    index: int
    rows: int


@dataclass(frozen=True)
class SqlCounted:
    """The P partitions of a SQL source as counted before the charge, with their ``footers``
    (rows, schema) and the fold ``key`` they were counted under: what the release reads its
    partitions with, so that the counts are read once per release (one pass over the id
    column). Held in memory only (the key is no parameter, result or repr)."""

    parts: tuple[SqlPartition, ...]
    footers: tuple[tuple[int, dict[str, str]], ...]
    key: bytes = field(repr=False)


def count_sql(parts: SqlPartitions, key: bytes, roles: dict[str, Any]) -> SqlCounted:
    """:func:`describe_sql` under ``key``, as the release's partitions (issue 28 §3; the
    README's privacy rule "A SQL source's partitions come from the id alone")."""
    footers = describe_sql(parts, key, roles)
    return SqlCounted(tuple(SqlPartition(parts, p, rows) for p, (rows, _) in enumerate(footers)),
                      tuple(footers), key)


def sql_partitions(source: DataSource) -> SqlPartitions:
    """The partitioned SQL source of a config's ``data`` (``sql_partitions`` and ``id_column``
    set): the id's type is ``data.dtypes`` of the id column, else str (an id's role default,
    issue 26 §1)."""
    if source.sql_partitions is None or source.id_column is None:
        raise ValueError("a partitioned SQL source needs data.sql_partitions and data.id_column")
    id_type = source.dtypes.get(source.id_column, "str")
    if id_type not in ("int", "str"):
        raise ValueError(f"data.dtypes of the id column {source.id_column!r} must be int or "
                         f"str, got {id_type}")
    return SqlPartitions(source, id_column=source.id_column, count=source.sql_partitions,
                         id_type=id_type, dtypes={k: v for k, v in source.dtypes.items()
                                                  if k != source.id_column})


def describe_sql(parts: SqlPartitions, key: bytes, roles: dict[str, Any]
                 ) -> list[tuple[int, dict[str, str]]]:
    """The "footers" of the P partitions: each one's row count and the schema
    (``{column: Arrow type}`` of the declared types, for
    :func:`dpcausal.ate.partitioned.plan_partitions`), from the result's column names and one pass
    over the id column (module docstring). ``roles`` are the release's treatment, outcome and
    covariates (None: every other column)."""
    names = _column_names(parts)
    if parts.id_column not in names:
        raise ValueError(f"data.id_column {parts.id_column!r} is not a column of data.sql's "
                         f"result (columns: {names})")
    counts = np.zeros(parts.count, dtype=np.int64)
    for chunk in _chunks(parts, [parts.id_column]):
        ids = _ids(chunk[parts.id_column], parts.id_type)
        if ids.isna().any():
            raise ValueError(
                f"data.id_column {parts.id_column!r} holds a missing id (NULL, or not "
                f"{'an integer' if parts.id_type == 'int' else 'text'}): every record needs "
                "its id, the index of neighbouring")
        counts += np.bincount(_partition_of(ids, parts, key), minlength=parts.count)
    schema = {name: _ARROW[_declared(parts, roles, name)] for name in names}
    return [(int(c), schema) for c in counts]


def read_sql_partition(part: SqlPartition, roles: Roles, key: bytes) -> pd.DataFrame:
    """The declared columns of one partition (module docstring): the query streamed in chunks,
    each chunk's rows of this partition kept, their columns coerced to the declared types, the
    rows in id order. A row count that differs from the one counted before the charge is a
    ValueError (the source changed)."""
    of = part.of
    schema = Schema({c: _declared(of, _role_types(roles), c) for c in roles.columns()
                     if c != roles.id})
    kept = []
    for chunk in _chunks(of, roles.columns()):
        ids = _ids(chunk[roles.id], of.id_type)
        valid = ids.notna().to_numpy()
        mine = np.zeros(len(chunk), dtype=bool)
        mine[valid] = _partition_of(ids[valid], of, key) == part.index
        frame = coerce(chunk.loc[mine, list(schema.columns)].reset_index(drop=True), schema)
        frame.insert(0, roles.id, ids[mine].reset_index(drop=True))
        kept.append(frame)
    frame = pd.concat(kept, ignore_index=True)
    if len(frame) != part.rows:
        raise ValueError("a SQL partition returned another number of rows than was counted "
                         "before the charge: the source changed during the release")
    frame = frame.sort_values(roles.id, kind="stable", ignore_index=True)
    if of.id_type == "int":
        frame[roles.id] = frame[roles.id].astype(np.int64)
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


def _partition_of(ids: pd.Series, parts: SqlPartitions, key: bytes) -> np.ndarray:
    """``HMAC-SHA256(key, id) mod P`` per id (the Parquet path's hash and id encoding)."""
    values = (ids.to_numpy(dtype=np.int64) if parts.id_type == "int"
              else ids.to_numpy(dtype=object))
    return assign_folds(values, key, range(parts.count))


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


def _column_names(parts: SqlPartitions) -> list[str]:
    import sqlalchemy

    engine = database_engine(parts.source)
    try:
        with engine.connect() as conn:
            return list(map(str, conn.execute(sqlalchemy.text(
                f"SELECT * FROM ({parts.source.sql}) AS q LIMIT 0")).keys()))
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise query_error(parts.source, exc) from None
    finally:
        engine.dispose()


def _chunks(parts: SqlPartitions, columns: list[str]) -> Iterator[pd.DataFrame]:
    """The query's ``columns`` in chunks of ``chunk_rows`` rows, streamed (a server-side cursor
    where the driver has one: ``stream_results``); a SQL error as :func:`tasks.data.query_error`."""
    import sqlalchemy

    engine = database_engine(parts.source)
    try:
        quote = engine.dialect.identifier_preparer.quote
        query = (f"SELECT {', '.join(quote(c) for c in columns)} "
                 f"FROM ({parts.source.sql}) AS q")
        with engine.connect() as conn:
            streamed = conn.execution_options(stream_results=True,
                                              max_row_buffer=parts.chunk_rows)
            result = streamed.execute(sqlalchemy.text(query))
            for rows in result.partitions(parts.chunk_rows):
                # plain tuples: pandas probes a SQLAlchemy Row for dict attributes, and each
                # probe raises inside SQLAlchemy (10x the cost of the frame at 10^5 rows)
                yield pd.DataFrame.from_records([tuple(r) for r in rows], columns=columns)
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise query_error(parts.source, exc) from None
    finally:
        engine.dispose()
