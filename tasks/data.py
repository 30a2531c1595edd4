"""Reading a release's data source: a CSV/Parquet file or a SQL query. The table is NON-PRIVATE:
it stays in memory and is never persisted, cached or logged."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from conf.models import DataSource


def read_frame(source: DataSource) -> pd.DataFrame:
    """The raw table from a CSV/Parquet file or a SQL query (``${VAR}`` in the URL from the env)."""
    if source.path is not None:
        path = Path(source.path)
        if not path.is_file():
            raise ValueError(f"data file {str(path)!r} does not exist; check data.path in the "
                             "config (relative paths are resolved against the working directory)")
        if path.suffix.lower() == ".csv":
            return pd.read_csv(path)
        return pd.read_parquet(path)
    import sqlalchemy

    url = os.path.expandvars(source.url or "")
    try:
        engine = sqlalchemy.create_engine(url)
    except Exception as exc:  # noqa: BLE001 - any URL problem becomes one readable message
        raise ValueError(f"data.url is not a usable SQLAlchemy URL ({type(exc).__name__}); "
                         "expected e.g. sqlite:///path.db or "
                         "postgresql+psycopg://user@host/db") from None
    try:
        with engine.connect() as conn:
            return pd.read_sql_query(sqlalchemy.text(source.sql), conn)
    except (sqlalchemy.exc.SQLAlchemyError, pd.errors.DatabaseError) as exc:
        cause = exc.__cause__ if isinstance(exc, pd.errors.DatabaseError) and exc.__cause__ else exc
        cause = getattr(cause, "orig", None) or cause
        raise ValueError(f"data.sql failed against data.url: {type(cause).__name__}: "
                         f"{str(cause).splitlines()[0]}") from None
    finally:
        engine.dispose()


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


def source_description(source: DataSource) -> str:
    """Where the data come from, without secrets: the file path, or the SQL URL (password
    removed, ``${VAR}`` left unexpanded) with its query."""
    if source.path is not None:
        return str(source.path)
    import sqlalchemy

    try:
        url = sqlalchemy.engine.make_url(source.url or "").render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown by its scheme only
        url = (source.url or "").split(":", 1)[0] + ":<url>"
    return f"{url} :: {source.sql}"
