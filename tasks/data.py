"""``load_data``: read the source, select columns, validate, fingerprint. NON-PRIVATE output:
the arrays stay in memory (``persist_result=False``, no cache) and are never logged."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from conf.models import Columns, DataSource, ReleaseConfig
from tasks.build import build_estimator
from tasks.model_store import fingerprint


@dataclass(frozen=True)
class LoadedData:
    """Validated arrays (Y clipped to the public bounds) and their keyed fingerprint.

    ``repr`` shows shapes only, so the data cannot end up in a log line by accident.
    """

    X: np.ndarray = field(repr=False)
    A: np.ndarray = field(repr=False)
    Y: np.ndarray = field(repr=False)
    fingerprint: str
    covariates: tuple[str, ...]

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])


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


def select_columns(frame: pd.DataFrame, columns: Columns
                   ) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """(X, A, Y) by name; an unknown column is a ValueError listing the available ones."""
    names = list(map(str, frame.columns))
    wanted = [("columns.treatment", columns.treatment), ("columns.outcome", columns.outcome)]
    wanted += [("columns.covariates", c) for c in (columns.covariates or [])]
    for key, name in wanted:
        if name not in names:
            raise ValueError(f"{key} names column {name!r}, which is not in the data; "
                             f"available columns: {names}")
    covariates = columns.covariates or [c for c in names
                                        if c not in (columns.treatment, columns.outcome)]
    if not covariates:
        raise ValueError("no covariate columns: list them in columns.covariates")
    return frame[covariates], frame[columns.treatment], frame[columns.outcome]


@task(name="load_data", persist_result=False, cache_policy=NO_CACHE, retries=0)
def load_data(config: ReleaseConfig) -> LoadedData:
    """Read, validate (ValueError naming the problem, before anything is fitted) and fingerprint."""
    X, A, Y = select_columns(read_frame(config.data), config.columns)
    est = build_estimator(config)
    with warnings.catch_warnings():
        if not config.evaluation:
            # the library's clipping warning states how many rows were clipped: a data-dependent
            # count, so in release mode it is not shown (or logged) anywhere
            warnings.filterwarnings("ignore", message=r".*outside outcome_bounds",
                                    category=UserWarning)
        Xa, Aa, Ya = est.validate(X, A, Y)
    return LoadedData(X=Xa, A=Aa, Y=Ya, fingerprint=fingerprint(Xa, Aa, Ya),
                      covariates=tuple(map(str, X.columns)))
