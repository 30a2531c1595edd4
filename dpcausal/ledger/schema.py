"""Ledger tables, and opening a ledger database (SQLite or PostgreSQL) without ever replacing one.

Writes are serialisable on both back ends: SQLite transactions start with ``BEGIN IMMEDIATE``
(one writer at a time, others wait on the busy timeout); on PostgreSQL the reserve step locks the
dataset row with ``SELECT ... FOR UPDATE``.
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DatabaseError, OperationalError

from dpcausal.ledger.errors import LedgerError

SCHEMA = "dpcausal-ledger/1"
SQLITE_BUSY_TIMEOUT_S = 120.0

metadata = sa.MetaData()

meta = sa.Table(
    "ledger_meta", metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(256), nullable=False),
)

datasets = sa.Table(
    "ledger_datasets", metadata,
    sa.Column("name", sa.String(256), primary_key=True),
    sa.Column("cap_kind", sa.String(16), nullable=False),  # zeta | rho | epsilon
    sa.Column("cap_value", sa.Double, nullable=False),
    sa.Column("cap_delta", sa.Double, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)

charges = sa.Table(
    "ledger_charges", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("release_id", sa.String(512), nullable=False, unique=True),
    sa.Column("dataset", sa.String(256), sa.ForeignKey("ledger_datasets.name"), nullable=False,
              index=True),
    sa.Column("mechanism", sa.String(16), nullable=False),
    sa.Column("zeta", sa.Double),
    sa.Column("epsilon", sa.Double),
    sa.Column("delta", sa.Double, nullable=False),
    sa.Column("rdp_orders", sa.Text),  # JSON list
    sa.Column("rdp_epsilons", sa.Text),  # JSON list
    sa.Column("detail", sa.Text, nullable=False),  # JSON object
    sa.Column("status", sa.String(16), nullable=False),  # reserved | committed | incomplete
    sa.Column("token", sa.String(64), nullable=False),
    sa.Column("owner", sa.String(256), nullable=False),  # host:pid of the reserving process
    sa.Column("run_url", sa.Text),
    sa.Column("result", sa.Text),
    sa.Column("reserved_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
)


def default_url() -> str:
    """DPCAUSAL_LEDGER_URL, else SQLite at ``$DPCAUSAL_DATA/ledger.db`` (default folder
    ``~/.dpcausal``). The orchestration project sets DPCAUSAL_LEDGER_URL to its own data folder."""
    folder = Path(os.environ.get("DPCAUSAL_DATA") or Path.home() / ".dpcausal")
    return os.environ.get("DPCAUSAL_LEDGER_URL") or f"sqlite:///{folder.resolve() / 'ledger.db'}"


def open_engine(url: str, create: bool) -> Engine:
    """An engine on a checked ledger; creates the schema only where no database exists yet.

    A missing SQLite file is created only with ``create=True``; an existing file or database must
    already hold a dpcausal ledger, whatever ``create`` says (a truncated or foreign file is an
    error, never overwritten with a fresh, empty ledger).
    """
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    fresh = False
    if parsed.get_backend_name() == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise ValueError(f"url must name a SQLite file, got {url!r}; "
                             "e.g. sqlite:///data/ledger.db")
        path = Path(parsed.database)
        if not path.exists():
            if not create:
                raise LedgerError(
                    f"no ledger at {path}: the file does not exist. Check DPCAUSAL_LEDGER_URL or "
                    f"--url, or create one by setting a budget (`dpcausal ledger set-budget`).")
            path.parent.mkdir(parents=True, exist_ok=True)
            fresh = True
        engine = sa.create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
        _serialise_sqlite(engine)
    else:
        engine = sa.create_engine(parsed, pool_pre_ping=True)
    try:
        _check_schema(engine, url, create or fresh, fresh)
    except Exception:
        engine.dispose()
        raise
    return engine


def _serialise_sqlite(engine: Engine) -> None:
    """Replace pysqlite's implicit transactions: every transaction starts with BEGIN IMMEDIATE."""

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):  # type: ignore[no-untyped-def]
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("PRAGMA foreign_keys=ON")

    @sa.event.listens_for(engine, "begin")
    def _begin(conn):  # type: ignore[no-untyped-def]
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _check_schema(engine: Engine, url: str, may_create: bool, fresh: bool) -> None:
    server = engine.url.get_backend_name() != "sqlite"
    where = engine.url.render_as_string(hide_password=True) if server else engine.url.database
    try:
        names = set(sa.inspect(engine).get_table_names())
    except (DatabaseError, OperationalError) as exc:
        raise LedgerError(f"cannot read the ledger at {where}: {exc.orig}. The file is corrupt or "
                          "not a SQLite database; restore it from a backup (it is never replaced "
                          "automatically, the privacy spend it records must not be lost).") from exc
    ours = set(metadata.tables)
    if may_create and (fresh or (server and not names & ours)):
        with engine.begin() as conn:
            metadata.create_all(conn)
            conn.execute(meta.insert().values(key="schema", value=SCHEMA))
        return
    if not names & ours:
        hint = ("create the tables with Ledger(url, create=True) or `dpcausal ledger set-budget`"
                if server else "an empty or truncated file? Restore it from a backup, or point "
                "DPCAUSAL_LEDGER_URL at a new path to start a new ledger")
        raise LedgerError(f"no ledger at {where}: the database holds no ledger tables ({hint}).")
    if not ours <= names:
        raise LedgerError(f"{where} is not a dpcausal ledger (missing tables "
                          f"{sorted(ours - names)}); check DPCAUSAL_LEDGER_URL or --url.")
    with engine.connect() as conn:
        found = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema")).scalar()
    if found != SCHEMA:
        raise LedgerError(f"{where} holds ledger schema {found!r}, this code reads {SCHEMA!r}.")
