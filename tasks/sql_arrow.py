"""Arrow reads of a SQL partition through Arrow Database Connectivity (issue 41 §1): the
partition's id-range query (:func:`tasks.sql_partitions._chunks`) returns Arrow record
batches from the Arrow project's own drivers (``adbc-driver-postgresql``, ``adbc-driver-sqlite``),
handed on as columns: no Python object per row for numbers and booleans, where psycopg built a
tuple per row (issue 35 §3: about 3.6 CPU us a row with the frame).

The reader returns the database's values raw, as today's DB-API reader does, and
:func:`tasks.sql_partitions.read_sql_partition` coerces both with the same
:func:`tasks.data.coerce`: so the declared types and missing-value rules are one code path. What
the database hands over is made to equal what the DB-API drivers hand over:

- PostgreSQL: integers, floats, booleans and text types (``text``, ``varchar``, ``char``) are
  read as such (NULL missing). Any other type (``numeric``, ``date``, ``timestamp``, ``uuid``,
  ``json``, ``money``, ``interval``, arrays, ``bytea``...) is read as the database's text of the
  value (``CAST(... AS text)``; decided from the result's schema, no value read): a number where
  the text is one (``numeric``'s exactly, as psycopg's ``Decimal``), else missing, as psycopg's
  Python objects were under a ``float``/``int``/``bool`` declaration. Declared ``str``, such a
  column is the database's text (``2020-01-02 03:04:05+00``), where psycopg's was Python's
  (``2020-01-02 03:04:05+00:00``): the same for ``numeric`` (but for ``Decimal``'s exponent
  form of tiny values), ``date``, ``timestamp``, ``uuid`` and ``money``, not for
  ``timestamptz``, ``interval``, ``json``, arrays and ``bytea``.
- SQLite has no column types: one column may hold integers, reals, text and blobs, which the
  ADBC driver would put in one Arrow type inferred from the first rows (mixed values become text
  with 6 digits, or an error). So each column is selected as four, one per storage class
  (``CASE typeof(c) WHEN 'integer' THEN c END``, ...), in one batch per partition, and put back
  together: a column with values of one class (the usual case) stays an Arrow column, a mixed one
  becomes Python objects as sqlite3 gives them.

Driver errors are reported as :func:`tasks.data.query_error` reports the DB-API's: the class and,
for a schema error only, the message (an error raised while a batch is streamed surfaces as
pyarrow's ``OSError``/``ArrowException``, whose message is withheld).
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from tasks.sql_partitions import SqlPartition

#: PostgreSQL types read as they are (their Arrow type is the value); others as their text.
_PG_PLAIN = frozenset({"int2", "int4", "int8", "float4", "float8", "bool", "text", "varchar",
                       "bpchar", "name"})
_SQLITE_CLASSES = ("integer", "real", "text", "blob")
_DRIVERS = {"postgresql": "adbc_driver_postgresql", "sqlite": "adbc_driver_sqlite"}


def arrow_driver(engine: Any) -> str | None:
    """The ADBC driver for ``engine``'s database: ``"postgresql"`` or ``"sqlite"`` (a database
    file) where its package is installed, else None (today's DB-API reader)."""
    name = engine.dialect.name
    if name not in _DRIVERS or importlib.util.find_spec(_DRIVERS[name]) is None:
        return None
    if name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        return None     # a private in-memory database: no other connection sees its rows
    return str(name)


def arrow_connect(engine: Any) -> Any:
    """An ADBC DB-API connection to ``engine``'s database: libpq's URI of the SQLAlchemy URL
    (its query options, e.g. ``sslmode`` or ``options=-c search_path=...``, kept), or the SQLite
    file (opened read-only)."""
    from urllib.parse import quote, urlencode

    url = engine.url
    if engine.dialect.name == "postgresql":
        import adbc_driver_postgresql.dbapi

        # libpq decodes %XX but not "+": SQLAlchemy's rendering writes a space as "+"
        query = urlencode(url.query, doseq=True, quote_via=quote)
        return adbc_driver_postgresql.dbapi.connect(
            url.set(drivername="postgresql", query={}).render_as_string(hide_password=False)
            + (f"?{query}" if query else ""))

    import adbc_driver_sqlite.dbapi

    return adbc_driver_sqlite.dbapi.connect(f"file:{quote(url.database)}?mode=ro")


def arrow_chunks(part: SqlPartition, columns: list[str], engine: Any, where: list[str],
                 bounds: list[Any]) -> Iterator[pd.DataFrame]:
    """The partition's ``columns`` (raw, as :func:`tasks.sql_partitions._chunks` yields them)
    from the query over its id range (``where``: the conditions with ``?`` placeholders for
    ``bounds``), read through ADBC (module docstring)."""
    import pyarrow as pa
    from adbc_driver_manager import Error

    from tasks.data import connection_error, query_error

    postgres = engine.dialect.name == "postgresql"
    quote = engine.dialect.identifier_preparer.quote
    source = part.of.source.sql
    if postgres:
        where = [w.replace("?", f"${i + 1}") for i, w in enumerate(where)]
    tail = f" FROM ({source}) AS q" + (f" WHERE {' AND '.join(where)}" if where else "")
    try:
        opened = arrow_connect(engine)
    except Error as exc:
        raise connection_error(part.of.source, exc) from None
    try:
        with opened as conn, conn.cursor() as cur:
            if postgres:
                plain = [quote(c) for c in columns]
                schema = cur.adbc_execute_schema("SELECT " + ", ".join(plain) + tail)
                selected = [q if schema.field(i).metadata.get(b"POSTGRESQL:type", b"").decode()
                            in _PG_PLAIN else f"CAST({q} AS text) AS {q}"
                            for i, q in enumerate(plain)]
            else:
                cur.adbc_statement.set_options(**{
                    "adbc.sqlite.query.batch_rows": str(part.rows + 1)})   # one batch
                selected = [f"CASE typeof({quote(c)}) WHEN '{k}' THEN {quote(c)} END"
                            for c in columns for k in _SQLITE_CLASSES]
            cur.execute("SELECT " + ", ".join(selected) + tail, tuple(bounds) or None)
            for batch in cur.fetch_record_batch():
                yield (_pg_frame(batch, columns) if postgres
                       else _sqlite_frame(batch, columns))
    except (Error, pa.ArrowException, OSError) as exc:
        raise query_error(part.of.source, exc) from None


def _pg_frame(batch: Any, columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: _series(batch.column(i)) for i, c in enumerate(columns)})


def _sqlite_frame(batch: Any, columns: list[str]) -> pd.DataFrame:
    """One column per name from its four storage-class columns (module docstring)."""
    out = {}
    k = len(_SQLITE_CLASSES)
    for i, c in enumerate(columns):
        held = [batch.column(j) for j in range(i * k, i * k + k)]
        held = [a for a in held if a.null_count < len(a)]
        if len(held) <= 1:
            out[c] = (_series(held[0]) if held else
                      pd.Series(np.full(batch.num_rows, None, dtype=object)))
        else:   # values of several storage classes in one column: Python objects, as sqlite3's
            values = np.full(batch.num_rows, None, dtype=object)
            for a in held:
                seen = a.is_valid().to_numpy(zero_copy_only=False)
                values[seen] = np.asarray(a.to_pylist(), dtype=object)[seen]
            out[c] = pd.Series(values, dtype=object)
    return pd.DataFrame(out)


def _series(array: Any) -> pd.Series:
    """An Arrow column as the DB-API reader's values: integers and booleans nullable (a NULL
    keeps the other values exact), floats with NaN, text and bytes as Python objects."""
    import pyarrow as pa

    if isinstance(array.type, pa.BaseExtensionType):
        array = array.storage
    kind = array.type
    if pa.types.is_integer(kind):
        return pd.Series(array.cast(pa.int64()).to_pandas(
            types_mapper={pa.int64(): pd.Int64Dtype()}.get))
    if pa.types.is_boolean(kind):
        return pd.Series(array.to_pandas(types_mapper={pa.bool_(): pd.BooleanDtype()}.get))
    if pa.types.is_floating(kind):
        return pd.Series(array.cast(pa.float64()).to_numpy(zero_copy_only=False))
    return pd.Series(array.to_numpy(zero_copy_only=False), dtype=object)
