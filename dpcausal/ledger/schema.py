"""Ledger tables, and opening a ledger database (SQLite or PostgreSQL) without ever replacing one.

Writes are serialisable on both back ends: SQLite transactions start with ``BEGIN IMMEDIATE``
(one writer at a time, others wait on the busy timeout); on PostgreSQL the reserve step locks the
dataset row with ``SELECT ... FOR UPDATE``.

The tables are versioned with Alembic (``migrations/``, version table ``ledger_schema_version``, so
a PostgreSQL database shared with MLflow keeps its own ``alembic_version``). An older ledger is
migrated when it is opened, in one transaction, never refused or reset; a ledger written before
migrations existed (``dpcausal-ledger/1``) is stamped at revision 0001 first.
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DatabaseError, OperationalError

from dpcausal.ledger.errors import LedgerError
from dpcausal.location import data_dir

SCHEMA = "dpcausal-ledger/5"
HEAD = "0005"  # the Alembic revision these tables are
VERSION_TABLE = "ledger_schema_version"
MIGRATIONS = Path(__file__).with_name("migrations")
SQLITE_BUSY_TIMEOUT_S = 120.0
_PG_MIGRATION_LOCK = 0x6470_6C65_6467  # advisory lock key: one migration at a time
_CORE = {"ledger_meta", "ledger_datasets", "ledger_charges"}  # present since schema 1

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
    sa.Column("unit", sa.String(16), nullable=False, server_default="row"),  # the cap's unit
    # what the cap's neighbouring relation holds public besides n (composition.Relation)
    sa.Column("public", sa.String(256), nullable=False, server_default=""),
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
    sa.Column("unit", sa.String(16), nullable=False, server_default="row"),  # row|user|label|client
    sa.Column("fingerprint", sa.String(256)),  # keyed fingerprint of the data released, if given
    sa.Column("public", sa.String(256), nullable=False, server_default=""),  # Relation.text
    sa.Column("analyst", sa.String(128)),  # who asked (ledger_analysts.name); None: the curator
)

corrections = sa.Table(
    "ledger_corrections", metadata,  # every change of a recorded charge's relation, and why
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("release_id", sa.String(512), sa.ForeignKey("ledger_charges.release_id"),
              nullable=False, index=True),
    sa.Column("old_unit", sa.String(16), nullable=False),
    sa.Column("old_public", sa.String(256), nullable=False),
    sa.Column("new_unit", sa.String(16), nullable=False),
    sa.Column("new_public", sa.String(256), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("by", sa.String(256), nullable=False),  # user@host, or the migration
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
)

fingerprints = sa.Table(
    "ledger_fingerprints", metadata,  # each keyed fingerprint belongs to one dataset id
    sa.Column("fingerprint", sa.String(256), primary_key=True),
    sa.Column("dataset", sa.String(256), sa.ForeignKey("ledger_datasets.name"), nullable=False,
              index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)

registrations = sa.Table(
    "ledger_registrations", metadata,  # every registration of a dataset by its curator, in order
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("dataset", sa.String(256), nullable=False, index=True),
    sa.Column("version", sa.Integer, nullable=False),  # 1, 2, ... per dataset; the last holds
    sa.Column("registration", sa.Text, nullable=False),  # JSON: source, columns, dtypes, ...
    sa.Column("n", sa.BigInteger, nullable=False),  # records counted by the curator: public
    sa.Column("evaluation_allowed", sa.Boolean, nullable=False),
    sa.Column("by", sa.String(256), nullable=False),  # user@host
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("dataset", "version", name="uq_registration_version"),
)

analysts = sa.Table(
    "ledger_analysts", metadata,  # remote analysts the curator admits (issue 40), never deleted
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("token_id", sa.String(32), nullable=False, unique=True),  # public half of a token
    sa.Column("token_hash", sa.String(256), nullable=False),  # scrypt$n$r$p$salt$hash (hex)
    sa.Column("by", sa.String(256), nullable=False),  # user@host of the curator who added it
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("revoked_at", sa.DateTime(timezone=True)),
)

analyst_datasets = sa.Table(
    "ledger_analyst_datasets", metadata,  # which datasets an analyst may ask about, and a cap
    sa.Column("analyst", sa.String(128), sa.ForeignKey("ledger_analysts.name"),
              primary_key=True),
    sa.Column("dataset", sa.String(256), sa.ForeignKey("ledger_datasets.name"),
              primary_key=True),
    sa.Column("zeta", sa.Double),  # the analyst's own zeta-GDP cap on it; None: the dataset's
)


def default_url() -> str:
    """DPCAUSAL_LEDGER_URL, else SQLite at ``<data>/ledger.db`` (:func:`dpcausal.location.data_dir`:
    the one rule the CLI uses too)."""
    return os.environ.get("DPCAUSAL_LEDGER_URL") or f"sqlite:///{data_dir() / 'ledger.db'}"


def check_moved_default() -> None:
    """Refuse the default ledger when it does not exist yet but the library's former default
    (``~/.dpcausal/ledger.db``) does: opening (or creating) the new one would silently
    give the same data a fresh budget. Only when neither DPCAUSAL_LEDGER_URL nor DPCAUSAL_DATA
    chooses the ledger."""
    if os.environ.get("DPCAUSAL_LEDGER_URL") or os.environ.get("DPCAUSAL_DATA"):
        return
    new, old = data_dir() / "ledger.db", Path.home() / ".dpcausal" / "ledger.db"
    if not new.exists() and old.exists() and new.resolve() != old.resolve():
        raise LedgerError(
            f"the default ledger is now {new} (the CLI's and the library's), and it does not "
            f"exist yet, but a ledger is at {old} (the library's default before): move that file "
            f"to {new}, or set DPCAUSAL_DATA={old.parent} to keep using it. A new ledger would "
            "give the same data a fresh budget.")


def _parse(url: str) -> sa.URL:
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def exists(url: str) -> bool:
    """False only for a SQLite ledger file that does not exist (nothing to read there)."""
    parsed = _parse(url)
    if parsed.get_backend_name() != "sqlite":
        return True
    if not parsed.database:
        return False
    return Path(parsed.database).exists()


def open_engine(url: str, create: bool) -> Engine:
    """An engine on a checked ledger; creates the schema only where no database exists yet.

    A missing SQLite file is created only with ``create=True``; an existing file or database must
    already hold a dpcausal ledger, whatever ``create`` says (a truncated or foreign file is an
    error, never overwritten with a fresh, empty ledger).
    """
    parsed = _parse(url)
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
                    f"the url argument, or create one with `Ledger(url, create=True)`.")
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
    def _connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("PRAGMA foreign_keys=ON")

    @sa.event.listens_for(engine, "begin")
    def _begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _check_schema(engine: Engine, url: str, may_create: bool, fresh: bool) -> None:
    server = engine.url.get_backend_name() != "sqlite"
    location = where(engine)
    try:
        names = set(sa.inspect(engine).get_table_names())
    except (DatabaseError, OperationalError) as exc:
        raise LedgerError(f"cannot read the ledger at {location}: {exc.orig}. The file is "
                          "corrupt or not a SQLite database; restore it from a backup (it is never "
                          "replaced automatically, the privacy spend it records must not be lost)."
                          ) from exc
    if may_create and (fresh or (server and not names & _CORE)):
        migrate(engine)
        return
    if not names & _CORE:
        hint = ("create the tables with `Ledger(url, create=True)`"
                if server else "an empty or truncated file? Restore it from a backup, or point "
                "DPCAUSAL_LEDGER_URL at a new path to start a new ledger")
        raise LedgerError(f"no ledger at {location}: the database holds no ledger tables "
                          f"({hint}).")
    if not _CORE <= names:
        raise LedgerError(f"{location} is not a dpcausal ledger (missing tables "
                          f"{sorted(_CORE - names)}); check DPCAUSAL_LEDGER_URL or the url "
                          "argument.")
    with engine.begin() as conn:
        if server:  # wait out a migration in progress; its statements then read one state
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock_shared(_PG_MIGRATION_LOCK)))
        version = _version(conn, location)
    if version != HEAD:
        migrate(engine)


def where(engine: Engine | str) -> str:
    """The location of the ledger on ``engine`` (or at a URL) as shown to users: the SQLite
    file, or the URL without its password."""
    url = _parse(engine) if isinstance(engine, str) else engine.url
    if url.get_backend_name() == "sqlite":
        return str(url.database)
    return url.render_as_string(hide_password=True)


def _version(conn: Connection, where: str) -> str | None:
    """The ledger's Alembic revision: its version table's, else 0001 for a schema-1 ledger
    written before migrations existed, None for an empty database."""
    names = set(sa.inspect(conn).get_table_names())
    if not names & _CORE:
        return None
    if VERSION_TABLE in names:
        found = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
        if found is not None:
            return str(found)
    schema = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema")).scalar()
    if schema == "dpcausal-ledger/1":
        return "0001"
    raise LedgerError(f"{where} holds ledger schema {schema!r} without a migration record; this "
                      f"code reads {SCHEMA!r}. Restore the ledger from a backup.")


def migrate(engine: Engine) -> None:
    """Bring the ledger to revision :data:`HEAD` with Alembic, in one serialised transaction
    (SQLite ``BEGIN IMMEDIATE``; a PostgreSQL advisory lock), so concurrent openers migrate once.
    Openers read the revision under the same lock, shared, so none reads half of another's
    migration (READ COMMITTED takes a new snapshot per statement).

    An empty database is built from revision 0001 up; a schema-1 ledger without a version table
    is stamped 0001 first. Existing rows are kept (``migrations/versions``).
    """
    try:
        from alembic import command
        from alembic.config import Config
        from alembic.script import ScriptDirectory
    except ImportError as exc:  # pragma: no cover - alembic is a dependency of dpcausal
        raise LedgerError("migrating the ledger needs Alembic: pip install alembic") from exc
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    known = {rev.revision for rev in ScriptDirectory.from_config(cfg).walk_revisions()}
    with engine.begin() as conn:
        if engine.url.get_backend_name() == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK)))
        version = _version(conn, where(engine))  # again, under the lock
        if version == HEAD:
            return
        if version is not None and version not in known:
            raise LedgerError(f"{where(engine)} holds ledger revision {version}, newer than this "
                              f"code ({HEAD}); upgrade dpcausal to read it.")
        cfg.attributes["connection"] = conn
        if version is not None and not sa.inspect(conn).has_table(VERSION_TABLE):
            command.stamp(cfg, version)
        command.upgrade(cfg, "head")
