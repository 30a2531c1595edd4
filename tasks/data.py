"""Reading a release's data source: a CSV/Parquet file or a SQL query. The table is NON-PRIVATE:
it stays in memory and is never persisted, cached or logged."""

from __future__ import annotations

import csv
import numbers
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from conf.kinds import default_covariates
from conf.models import DataSource, Schema
from tasks.csv_text import (
    arrow_records,
    arrow_text,
    csv_header,
    text_as_bool_words,
    text_as_float,
)


def data_file(path: str) -> Path:
    """``data.path`` as a file that exists; else the one ``ValueError`` that ``plan`` and ``run``
    both report."""
    if not Path(path).is_file():
        raise ValueError(f"data file {path!r} does not exist; check data.path in the config "
                         "(a path written in the config is relative to the config file's folder, "
                         "one given by --set to the working directory)")
    return Path(path)


def read_frame(source: DataSource, schema: Schema) -> pd.DataFrame:
    """The release's columns of a CSV/Parquet file or a SQL query (:func:`database_engine`),
    each coerced to its declared type (:func:`coerce`): no type is inferred from the values. A
    CSV file is read by :func:`read_csv_table`; a column the schema names but the source lacks
    is a ValueError naming it (the header only: public). A partitioned source is read whole, its
    id column dropped, for ``dpcausal check-data`` only: its release never holds every row in
    one process (:mod:`flows.partitioned_release`)."""
    if source.path is not None:
        path = data_file(source.path)
        raw = read_csv_table(path) if path.suffix.lower() == ".csv" else pd.read_parquet(path)
    elif source.partitions is not None:
        raw = pd.concat([pd.read_parquet(p) for p in partition_files(str(source.partitions))],
                        ignore_index=True).drop(columns=[source.id_column])
    else:  # a partitioned query's id column is dropped, as a partitioned Parquet source's
        raw = _read_sql(source).drop(columns=[source.id_column or ""], errors="ignore")
    return coerce(select(raw, None if schema.rest is not None else list(schema.columns)), schema)


def read_csv_table(path: Path) -> pd.DataFrame:
    """Every record of a CSV file as text, by public rules only (issue 26 §1, issue 32 §6).

    One row per record (RFC 4180): a quoted field may hold commas, doubled quotes and line
    breaks, so a record with a line break is one row, never two (the person in it has one row's
    protection, as everyone else). The first record is the header; a record that does not
    split into as many fields as the header (a blank line, a broken quote) becomes a row of
    missing values, never a parser error. Bytes that are not UTF-8 are replaced; an empty field
    is missing. The number of records after the header is the ``n`` the curator registers
    (:mod:`tasks.registration`); a file whose records no longer number n (a quote left open
    swallows the records after it) fails after the charge (:func:`tasks.preflight.
    load_registered`). Read column-wise by pyarrow where that gives the same records
    (:func:`tasks.csv_text.arrow_records`), else record by record (:func:`csv_records`)."""
    header = csv_header(path)
    table = arrow_records(path, header)
    return csv_records(path, header) if table is None else table


def csv_records(path: Path, header: list[str]) -> pd.DataFrame:
    """The records after the header by Python's ``csv`` module, as object columns of text (the
    rules of :func:`read_csv_table`)."""
    limit = csv.field_size_limit(sys.maxsize)  # a long quoted field is a value, not an error
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as fh:
            records = csv.reader(fh, strict=False)
            next(records, None)
            missing = [""] * len(header)
            rows = [rec if len(rec) == len(header) else missing for rec in records]
    finally:
        csv.field_size_limit(limit)
    return pd.DataFrame(rows, columns=header, dtype=object)


def coerce(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Each column as its declared type (``schema.columns``, else ``schema.rest``), by public
    rules (issue 26 §1): ``float`` parses numbers (text that is no number, and an empty field,
    becomes NaN); ``int`` also makes a number that is not a whole one NaN; ``bool`` reads
    true/false (any case) or 1/0 as 1.0/0.0, anything else NaN; ``str`` keeps the text (an empty
    field is missing). Numbers are float64 whatever the source held, so no dtype depends on the
    values; the missing-value policy decides what a NaN becomes."""
    return pd.DataFrame({name: _COERCE[schema.columns.get(str(name), schema.rest or "float")](
        frame[name]) for name in frame.columns}, index=pd.RangeIndex(len(frame)))


def _as_float(col: pd.Series) -> pd.Series:
    if pd.api.types.is_bool_dtype(col) or pd.api.types.is_numeric_dtype(col):
        return pd.Series(col.to_numpy(dtype=float, na_value=np.nan))
    text = arrow_text(col)  # a text column: the same rule, column-wise (tasks.csv_text)
    return pd.Series(_cells_as_float(col.to_numpy(dtype=object)) if text is None
                     else text_as_float(text, _cells_as_float))


def _cells_as_float(cells: np.ndarray) -> np.ndarray:
    """The rule cell by cell: a number or a text is kept (text stripped), anything else (a date,
    a timestamp, bytes, a NULL) is missing: the database's datetimes are no numbers, nor NaT its
    integer (issue 41 §1); then ``pandas.to_numeric``, NaN where it fails. One list
    comprehension over the cells (Series.map with a lambda cost 3x as much, issue 41 §2)."""
    text = np.array([v.strip() if isinstance(v, str) else v if isinstance(v, numbers.Number)
                     else None for v in cells], dtype=object)
    return np.asarray(pd.to_numeric(text, errors="coerce"), dtype=float)


def _as_int(col: pd.Series) -> pd.Series:
    x = _as_float(col)
    return x.where(np.isfinite(x) & (x == np.round(x)))


def _as_bool(col: pd.Series) -> pd.Series:
    x = _as_float(col)
    text = arrow_text(col)
    words = (col.map(_bool_word, na_action="ignore").to_numpy() if text is None
             else text_as_bool_words(text, lambda cells: np.array(
                 [_bool_word(v) for v in cells], dtype=object)))
    x = x.where(x.isin((0.0, 1.0)))
    return x.mask(words == "true", 1.0).mask(words == "false", 0.0)


def _bool_word(value: Any) -> str:
    return str(value).strip().lower()


def _as_str(col: pd.Series) -> pd.Series:
    text = (col.to_numpy(dtype=object) if arrow_text(col) is not None else  # str already
            col.map(lambda v: v if isinstance(v, str) else str(v), na_action="ignore"))
    return pd.Series(np.asarray(text, dtype=object), dtype=object).where(  # object, whatever
        lambda t: t.notna() & (t != ""))                                     # the values


_COERCE = {"float": _as_float, "int": _as_int, "bool": _as_bool, "str": _as_str}


def _read_sql(source: DataSource) -> pd.DataFrame:
    import sqlalchemy

    engine = database_engine(source)
    try:
        with connected(source, engine) as conn:
            return pd.read_sql_query(sqlalchemy.text(source.sql), conn)
    except (sqlalchemy.exc.SQLAlchemyError, pd.errors.DatabaseError) as exc:
        raise query_error(source, exc) from None
    finally:
        engine.dispose()


def query_error(source: DataSource, exc: BaseException) -> ValueError:
    """The ``ValueError`` reported for a failed ``data.sql``: the driver's error class and, for
    an error in the query or the schema only, its message (:func:`_query_error_text`)."""
    cause = exc.__cause__ if isinstance(exc, pd.errors.DatabaseError) and exc.__cause__ else exc
    cause = getattr(cause, "orig", None) or cause
    return ValueError(f"data.sql failed against {_database_name(source)}: "
                      f"{type(cause).__name__}{_query_error_text(cause)}")


# a database's message is shown only when it is about the query, the schema or the server, never
# about the rows: SQLSTATE class 42 (syntax error or access rule) and 3F (no such schema), 08
# (connection exception) and 57 (operator intervention: a statement_timeout, a server shutting
# down) on PostgreSQL; SQLite has no SQLSTATE, so its schema messages are recognised by their
# start
_SCHEMA_SQLSTATE = ("42", "3F", "08", "57")
_SQLITE_SCHEMA = ("no such table", "no such column", "near ", "ambiguous column name",
                  "incomplete input", "no such function", "wrong number of arguments")


def _query_error_text(cause: BaseException) -> str:
    """``: <message>`` for an error in the query or the schema; otherwise only the SQLSTATE, as
    a data error's message (``invalid input syntax for type integer: "abc"``, ``integer
    overflow``) may quote a value (issue 26 §1)."""
    message = str(cause).splitlines()[0] if str(cause) else ""
    state = getattr(cause, "sqlstate", None)
    if (state and str(state).startswith(_SCHEMA_SQLSTATE)) or (
            state is None and message.startswith(_SQLITE_SCHEMA)):
        return f": {message}"
    code = f" (SQLSTATE {state})" if state else ""
    return (f"{code}; the database's message is withheld, as it may quote a value of the "
            "data: run the query yourself to read it")


def database_engine(source: DataSource) -> Any:
    """A SQLAlchemy engine for ``data.url`` (``${VAR}`` from the environment) or for the saved
    Prefect block ``data.url_block``: a ``Secret`` holding the URL, or prefect-sqlalchemy's
    ``SqlAlchemyConnector``. Secrets are read here, at load time, never stored or logged."""
    import sqlalchemy

    if source.url_block is not None:
        return _block_engine(source.url_block)
    try:
        return sqlalchemy.create_engine(os.path.expandvars(source.url or ""))
    except Exception:  # noqa: BLE001 - any URL problem becomes one readable message
        raise ValueError("data.url is not a usable SQLAlchemy URL; expected e.g. "
                         "sqlite:///path.db or postgresql+psycopg://user@host/db") from None


@contextmanager
def connected(source: DataSource, engine: Any) -> Iterator[Any]:
    """``engine.connect()``, a failure to connect reported by :func:`connection_error`."""
    import sqlalchemy

    try:
        conn = engine.connect()
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise connection_error(source, exc) from None
    with conn:
        yield conn


def connection_error(source: DataSource, exc: BaseException) -> ValueError:
    """The ``ValueError`` for a database that could not be connected to (host, port, database,
    user or password refused): the database without its password and the driver's message,
    which is about connecting (sent before any query, so it quotes no value of the data), with
    the password removed should a driver repeat it."""
    cause = getattr(exc, "orig", None) or exc
    message = " ".join(str(cause).split()) or type(cause).__name__
    if source.url is not None:
        import sqlalchemy

        try:
            secret = sqlalchemy.engine.make_url(os.path.expandvars(source.url)).password
        except Exception:  # noqa: BLE001 - no password to remove from an unusable URL
            secret = None
        if secret:
            message = message.replace(str(secret), "***")
    return ValueError(f"cannot connect to {_database_name(source)}{_shown_url(source)}: "
                      f"{message}")


def _shown_url(source: DataSource) -> str:
    """`` <data.url as configured>``, its password hidden (``${VAR}`` left unexpanded); empty
    where the text is no URL and no lone ``${VAR}`` (it might hold a password)."""
    import re

    import sqlalchemy

    text = source.url or ""
    if re.fullmatch(r"\$\{?\w+\}?", text):
        return f" {text}"
    try:
        return " " + sqlalchemy.engine.make_url(text).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is not shown
        return ""


def result_columns(source: DataSource) -> list[str]:
    """The column names of ``data.sql``'s result, ``LIMIT 0``: no row is read (a failed
    connection as :func:`connection_error`, a SQL error as :func:`query_error`)."""
    import sqlalchemy

    engine = database_engine(source)
    try:
        with connected(source, engine) as conn:
            return list(map(str, conn.execute(sqlalchemy.text(
                f"SELECT * FROM ({source.sql}) AS q LIMIT 0")).keys()))
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise query_error(source, exc) from None
    finally:
        engine.dispose()


def check_source_answers(source: DataSource, columns: Sequence[str]) -> None:
    """Before the charge of a release checked from its registration: the database of a
    ``data.sql``/``data.url`` source answers and the query's result still has ``columns``, by
    :func:`result_columns` (column names only, no row: facts of the database and its schema,
    never of a value), so that a wrong host, port or password, a table that is gone or a column
    renamed is refused with nothing charged (exit 2). A ``data.url_block`` source is not
    probed here: its block is read from the Prefect server, which the CLI's checks run
    before."""
    if source.sql is None or source.url is None:
        return
    names = result_columns(source)
    missing = [c for c in columns if c not in names]
    if missing:
        raise ValueError(f"data.sql's result no longer has the registered column(s) {missing} "
                         f"(it has {names}): the curator registers the new version "
                         "(`dpcausal ledger register`)")


def _block_engine(slug: str) -> Any:
    import sqlalchemy
    from prefect.blocks.core import Block

    kind, _, name = slug.partition("/")
    if kind == "sqlalchemy-connector":
        import prefect_sqlalchemy  # noqa: F401 - registers the block type with Prefect
    try:
        block = Block.load(slug)
    except (ValueError, KeyError) as exc:
        raise ValueError(f"data.url_block {slug!r}: no saved Prefect block of that name on "
                         f"this Prefect server ({type(exc).__name__}); create it first, see "
                         "deploy/README.md") from None
    if kind == "secret":
        try:
            return sqlalchemy.create_engine(block.get())
        except Exception:  # noqa: BLE001 - never echo the secret's value
            raise ValueError(f"the Prefect Secret block {name!r} (data.url_block) does not hold "
                             "a usable SQLAlchemy URL") from None
    return block.get_engine()


def _database_name(source: DataSource) -> str:
    return f"data.url_block {source.url_block!r}" if source.url_block else "data.url"


def partition_files(source: str) -> list[str]:
    """The Parquet files of a partitioned source (a directory: local path or fsspec URL), sorted
    by name: the public partition order."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(source)
    if not fs.exists(root):
        raise ValueError(f"the partitioned source {source!r} does not exist (data.partitions)")
    files = sorted(p for p in fs.ls(root, detail=False) if str(p).endswith(".parquet"))
    if not files:
        raise ValueError(f"no .parquet files under {source!r}")
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return [p if protocol == "file" else f"{protocol}://{p}" for p in files]


def parquet_footer(part: str) -> tuple[int, dict[str, str]]:
    """(rows, {column: type}) of one Parquet file from its footer: public facts (see
    :mod:`dpcausal.ate.partitioned`), no value is read."""
    import fsspec
    import pyarrow.parquet as pq

    with fsspec.open(part, "rb") as fh:
        meta = pq.ParquetFile(fh).metadata
        schema = meta.schema.to_arrow_schema()
        return int(meta.num_rows), {f.name: str(f.type) for f in schema}


def partition_footers(source: str) -> list[tuple[int, dict[str, str]]]:
    """The footer facts (:func:`parquet_footer`) of every partition, in partition order."""
    return [parquet_footer(p) for p in partition_files(source)]


def source_shape(source: DataSource, columns: Any) -> tuple[int, int]:
    """(n, d) of a source from its metadata or a count, never a value: the CSV header and the
    count of records the release's reader parses (:func:`read_csv_table`), the Parquet footer (the
    sum of the partitions' footers, the id column not counted), or ``COUNT(*)`` and the result's
    column names for SQL."""
    if source.partitions is not None:
        footers = partition_footers(source.partitions)
        n, names = sum(rows for rows, _ in footers), list(footers[0][1])
    elif source.path is not None:
        path = data_file(source.path)
        if path.suffix.lower() == ".csv":  # the release's own reader: its n is the release's
            table = read_csv_table(path)
            n, names = len(table), list(table.columns)
        else:
            n, schema = parquet_footer(str(path))
            names = list(schema)
    else:
        import sqlalchemy

        engine = database_engine(source)
        try:
            with engine.connect() as conn:
                query = f"SELECT * FROM ({source.sql}) AS q"
                names = list(conn.execute(sqlalchemy.text(query + " LIMIT 0")).keys())
                n = int(conn.execute(sqlalchemy.text(
                    f"SELECT COUNT(*) FROM ({source.sql}) AS q")).scalar_one())
        finally:
            engine.dispose()
    return n, len(default_covariates(names, columns, source))


def select(frame: pd.DataFrame, columns: list[str] | None) -> pd.DataFrame:
    """The release's columns (None: all of them), every other column dropped; a missing column
    is a ValueError naming it and the available ones (the schema only: public)."""
    if columns is None:
        return frame
    names = list(map(str, frame.columns))
    missing = [c for c in columns if c not in names]
    if missing:
        raise ValueError(f"column {missing[0]!r} named in the config's columns is not in the "
                         f"data; available columns: {names}")
    return frame[columns]


def source_identity(source: DataSource) -> dict[str, str]:
    """Where the data of a file or SQL source come from, as the ledger binds it (keyed, through
    :func:`store.source_fingerprint`; issue 26 §3): the file's resolved path, or the database
    (password hidden) with its query. A partitioned source is bound by
    :func:`partition_identity`."""
    if source.path is not None:
        return {"path": str(Path(source.path).resolve())}
    return {"sql": source_description(source)}


def partition_identity(parts: list[str], footers: list[tuple[int, dict[str, str]]]
                       ) -> dict[str, Any]:
    """A partitioned source as the ledger binds it: its partition list with each footer (rows
    and schema: public facts, never stored in clear)."""
    return {"partitions": [[part, rows, schema]
                           for part, (rows, schema) in zip(parts, footers, strict=True)]}


def source_description(source: DataSource) -> str:
    """Where the data come from, without secrets: the file path, or the SQL URL (password
    removed, ``${VAR}`` left unexpanded) with its query."""
    if source.path is not None:
        return str(source.path)
    if source.partitions is not None:
        return f"partitions {source.partitions} (folds: keyed hash of {source.id_column})"
    if source.url_block is not None:
        return f"prefect block {source.url_block} :: {source.sql}"
    import sqlalchemy

    try:
        url = sqlalchemy.engine.make_url(source.url or "").render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown by its scheme only
        url = (source.url or "").split(":", 1)[0] + ":<url>"
    return f"{url} :: {source.sql}"
