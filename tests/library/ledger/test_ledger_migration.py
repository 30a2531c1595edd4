"""Schema migrations: a ledger written by schema-1 code (main 7ea6ad1, kept verbatim as
``fixtures/ledger_schema_v1.py``) is migrated with Alembic on open, on SQLite and PostgreSQL,
and every cap, charge, status and stored result survives; nothing is ever reset."""

from __future__ import annotations

import importlib.util
import json
import multiprocessing as mp
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import IncompatibleChargeError, Ledger, schema

_spec = importlib.util.spec_from_file_location(
    "ledger_schema_v1", Path(__file__).parent / "fixtures" / "ledger_schema_v1.py")
v1 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(v1)


def _write_schema_1_ledger(url: str) -> None:
    """What schema-1 code wrote: a zeta cap, a committed Gaussian charge, a committed pure
    charge with its detail, and an incomplete reservation (rows as its store inserted them)."""
    engine = v1.open_engine(url, create=True)
    now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    base = dict(dataset="trial-A", delta=1e-5, rdp_orders=None, rdp_epsilons=None,
                token="t" * 32, owner="gone-host:1", reserved_at=now)
    with engine.begin() as conn:
        assert conn.execute(sa.select(v1.meta.c.value)).scalar() == "dpcausal-ledger/1"
        conn.execute(v1.datasets.insert().values(name="trial-A", cap_kind="epsilon",
                                                 cap_value=9.0, cap_delta=1e-5,
                                                 created_at=now, updated_at=now))
        conn.execute(v1.charges.insert(), [
            dict(base, release_id="run-1/ate", mechanism="gaussian", zeta=1.2, epsilon=None,
                 detail=json.dumps({"zeta1": 1.0}), status="committed", run_url="http://m/1",
                 result='{"ate": 0.25}', finished_at=now),
            dict(base, release_id="run-2/rr", mechanism="pure", zeta=None, epsilon=0.5, delta=0.0,
                 detail=json.dumps({"K": 4}), status="committed", run_url=None,
                 result='{"ate": -1.5}', finished_at=now),
            dict(base, release_id="run-3/ate", mechanism="gaussian", zeta=0.7, epsilon=None,
                 detail="{}", status="incomplete", run_url=None, result=None, finished_at=None),
        ])
    engine.dispose()


def _no_schema_drift(url: str) -> None:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"version_table": schema.VERSION_TABLE})
        assert compare_metadata(ctx, schema.metadata) == []
        assert ctx.get_current_revision() == schema.HEAD
        assert conn.execute(sa.select(schema.meta.c.value)).scalar() == schema.SCHEMA
    engine.dispose()


def test_head_constant_is_the_migrations_head() -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(schema.MIGRATIONS))
    assert ScriptDirectory.from_config(cfg).get_current_head() == schema.HEAD


def test_fresh_ledger_is_built_by_the_migrations(ledger_url: str) -> None:
    Ledger(ledger_url, create=True).close()
    _no_schema_drift(ledger_url)


def test_schema_1_ledger_is_migrated_and_every_charge_survives(ledger_url: str) -> None:
    _write_schema_1_ledger(ledger_url)
    with Ledger(ledger_url) as led:  # opening migrates (no create needed)
        hist = led.history("trial-A")
        assert list(hist["release_id"]) == ["run-1/ate", "run-2/rr", "run-3/ate"]
        assert list(hist["status"]) == ["committed", "committed", "incomplete"]
        assert list(hist["unit"]) == ["row", "row", "row"]
        assert list(hist["run_url"].fillna("-")) == ["http://m/1", "-", "-"]
        assert hist["detail"].iloc[1] == {"K": 4}
        assert led.cap("trial-A").describe() == "epsilon=9, delta=1e-05"
        assert led.budgets().set_index("dataset").loc["trial-A", "unit"] == "row"
        expected = _spent_of([PrivacyCharge("gaussian", zeta=1.2),
                              PrivacyCharge("pure", epsilon=0.5),
                              PrivacyCharge("gaussian", zeta=0.7)])
        assert led.spent("trial-A").epsilon == pytest.approx(expected, rel=1e-12)
        # a committed release id still replays its stored result, drawing nothing
        with led.release("trial-A", "run-1/ate", PrivacyCharge("gaussian", zeta=1.2, delta=1e-5),
                         unit="row") as slot:
            assert slot.result == '{"ate": 0.25}'
        with led.release("trial-A", "run-4/ate", PrivacyCharge("gaussian", zeta=0.5),
                         unit="row") as slot:
            slot.commit("{}")
    _no_schema_drift(ledger_url)
    with Ledger(ledger_url) as led:  # opening a migrated ledger again changes nothing
        assert len(led.history("trial-A")) == 4


def _spent_of(charges: list[PrivacyCharge]) -> float:
    from dpcausal.ledger import compose

    return compose(charges, 1e-5).epsilon


def _open_and_count(url: str, go, queue) -> None:  # noqa: ANN001
    go.wait(60)
    try:
        with Ledger(url) as led:
            queue.put(("ok", len(led.history("trial-A"))))
    except Exception as exc:  # reported to the parent, which fails the test
        queue.put(("error", repr(exc)))


@pytest.mark.timeout(240)
def test_concurrent_openers_migrate_once(ledger_url: str) -> None:
    """Six processes open the same schema-1 ledger at once: one migrates, all read 3 charges."""
    _write_schema_1_ledger(ledger_url)
    ctx = mp.get_context("forkserver")
    go, queue = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_open_and_count, args=(ledger_url, go, queue)) for _ in range(6)]
    for p in procs:
        p.start()
    go.set()
    results = [queue.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(30)
    assert results == [("ok", 3)] * 6
    _no_schema_drift(ledger_url)


def test_a_migration_committed_between_the_readers_statements_is_not_misread(
        ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CI failure of 2026-11-25, made deterministic: an opener lists the tables (no version
    table yet), another process's migration commits, then the opener reads the schema row. The
    opener must see one consistent state (schema 1, or the migrated one), never the mix that
    read as 'schema 2 without a migration record'."""
    _write_schema_1_ledger(ledger_url)
    main, real_inspect = threading.current_thread(), sa.inspect
    other: dict[str, object] = {}

    def migrate_elsewhere() -> None:
        try:
            Ledger(ledger_url).close()
            other["ok"] = True
        except Exception as exc:  # reported to the test below
            other["error"] = exc

    class ListingThenMigrating:
        def __init__(self, inspector) -> None:  # noqa: ANN001
            self._inspector = inspector

        def __getattr__(self, name: str):  # noqa: ANN204
            return getattr(self._inspector, name)

        def get_table_names(self) -> list[str]:
            names = self._inspector.get_table_names()
            worker = threading.Thread(target=migrate_elsewhere)
            worker.start()
            worker.join(3.0)  # returns early once the migration has committed (the old race)
            other["worker"] = worker
            return names

    def inspect(obj):  # noqa: ANN001, ANN202
        found = real_inspect(obj)
        if (threading.current_thread() is main and isinstance(obj, sa.Connection)
                and "worker" not in other):
            return ListingThenMigrating(found)
        return found

    monkeypatch.setattr(schema.sa, "inspect", inspect)
    with Ledger(ledger_url) as led:
        assert len(led.history("trial-A")) == 3
    worker = other["worker"]
    assert isinstance(worker, threading.Thread)
    worker.join(60)
    assert other.get("ok") is True, other.get("error")
    _no_schema_drift(ledger_url)


def test_a_ledger_newer_than_the_code_is_refused_untouched(sqlite_url: str) -> None:
    Ledger(sqlite_url, create=True).close()
    engine = sa.create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {schema.VERSION_TABLE} SET version_num = '9999'"))
    engine.dispose()
    from dpcausal.ledger import LedgerError

    with pytest.raises(LedgerError, match="holds ledger revision 9999, newer than this code"):
        Ledger(sqlite_url)


_spec2 = importlib.util.spec_from_file_location(
    "ledger_schema_v2", Path(__file__).parent / "fixtures" / "ledger_schema_v2.py")
v2 = importlib.util.module_from_spec(_spec2)
_spec2.loader.exec_module(v2)

# details as the release code stored them (7ea6ad1 for schema 1; ea58adb for schema 2)
_USER_LEVEL = {"K": 2, "G1": 3, "epsilon_per_cell": 0.5, "clip": "user",
               "occupancy_hash": "ab12", "neighbouring": "user-level, values only, occupancy "
                                                         "public (spec §1.3)"}
_CLUSTER = {"mechanism": "cluster", "accounting": "strict", "epsilon_paper": 0.5, "gamma": 0.2,
            "sigma": 10.0, "lam": 0.3}
_FEDERATED = {"mechanism": "pbm_secagg", "epsilon": 1.0, "optimal_order": 8.0,
              "theta_capped": False, "privacy_status": "PRIVATE"}


def _write_schema_2_ledger(url: str) -> None:
    """A ledger as the code before relations left it: schema-1 rows of every mechanism, then
    opened by schema-2 code (revision 0002 recorded each of them per row), then schema-2 rows
    (a user cap, a user-level charge and a group-privacy charge recorded per user)."""
    engine = v1.open_engine(url, create=True)
    now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    base = dict(dataset="trial-A", rdp_orders=None, rdp_epsilons=None, token="t" * 32,
                owner="gone-host:1", reserved_at=now, status="committed", run_url=None,
                finished_at=now)
    with engine.begin() as conn:
        conn.execute(v1.datasets.insert().values(name="trial-A", cap_kind="epsilon",
                                                 cap_value=20.0, cap_delta=1e-5,
                                                 created_at=now, updated_at=now))
        conn.execute(v1.charges.insert(), [
            dict(base, release_id="u/1", mechanism="laplace", zeta=None, epsilon=1.0, delta=0.0,
                 detail=json.dumps(_USER_LEVEL), result='{"ate": 1}'),
            dict(base, release_id="c/1", mechanism="pure", zeta=None, epsilon=1.0, delta=0.0,
                 detail=json.dumps(_CLUSTER), result='{"ate": 2}'),
            dict(base, release_id="f/1", mechanism="rdp", zeta=None, epsilon=None, delta=1e-5,
                 rdp_orders="[2.0, 8.0]", rdp_epsilons="[0.1, 0.4]",
                 detail=json.dumps(_FEDERATED), result='{"ate": 3}'),
            dict(base, release_id="a/1", mechanism="gaussian", zeta=0.5, epsilon=None,
                 delta=1e-5, detail=json.dumps({"zeta1": 0.4, "zeta2": 0.3}), result="{}"),
            dict(base, release_id="n/1", mechanism="gaussian", zeta=0.5, epsilon=None,
                 delta=1e-5, detail="{}", result="{}"),
        ])
    engine.dispose()
    engine = sa.create_engine(url)  # schema-2 code's migration: revision 0002 and no further
    cfg = Config()
    cfg.set_main_option("script_location", str(schema.MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.stamp(cfg, "0001")
        command.upgrade(cfg, v2.HEAD)
    with engine.begin() as conn:
        assert conn.execute(sa.select(v2.meta.c.value)).scalar() == v2.SCHEMA
        assert set(conn.execute(sa.select(v2.charges.c.unit)).scalars()) == {"row"}
        conn.execute(v2.datasets.insert().values(name="trial-U", cap_kind="epsilon",
                                                 cap_value=20.0, cap_delta=1e-5, unit="user",
                                                 created_at=now, updated_at=now))
        conn.execute(v2.charges.insert(), [
            dict(base, dataset="trial-U", release_id="u/2", mechanism="laplace", zeta=None,
                 epsilon=1.0, delta=0.0, unit="user", fingerprint=None, result="{}",
                 detail=json.dumps({**_USER_LEVEL, "mechanism": "UserLevelRelease/user"})),
            dict(base, dataset="trial-U", release_id="g/1", mechanism="pure", zeta=None,
                 epsilon=1.5, delta=0.0, unit="user", fingerprint=None, result="{}",
                 detail=json.dumps({"group_privacy_k": 3})),
        ])
    engine.dispose()


def test_schema_2_ledger_gets_each_charges_relation_from_its_detail(ledger_url: str) -> None:
    """Issue 26 §5: revision 0002 recorded the user-level, label-DP and federated charges of a
    schema-1 ledger per row, so they counted under a row cap as row-level protection."""
    _write_schema_2_ledger(ledger_url)
    with Ledger(ledger_url) as led:
        hist = led.history("trial-A")
        assert list(zip(hist["release_id"], hist["unit"], hist["public"], strict=True)) == [
            ("u/1", "user", "occupancy"), ("c/1", "label", "arm,cluster"),
            ("f/1", "client", "arm_sizes"), ("a/1", "row", ""), ("n/1", "row", "")]
        assert list(hist["status"]) == ["committed"] * 5
        assert hist["detail"].iloc[1] == _CLUSTER
        log = led.corrections("trial-A")
        cols = ["release_id", "old_unit", "new_unit", "by"]
        assert list(log[cols].itertuples(index=False, name=None)) == [
            ("u/1", "row", "user", "migration 0003"), ("c/1", "row", "label", "migration 0003"),
            ("f/1", "row", "client", "migration 0003")]
        hist_u = led.history("trial-U")
        assert list(zip(hist_u["unit"], hist_u["public"], strict=True)) == [("user", "occupancy"),
                                                                ("user", "")]
        assert led.corrections("trial-U").empty
        assert led.relation("trial-A").describe() == "per row (n public)"
        assert led.relation("trial-U").describe() == "per user (n, occupancy public)"
        # the row cap no longer counts the user-level charge as row-level protection
        with pytest.raises(IncompatibleChargeError,
                           match=r"recorded charge u/1: the cap protects per row \(n public\) and "
                                 r"the charge is proved per user \(n, occupancy public\)"):
            led.check("trial-A", PrivacyCharge("gaussian", zeta=0.1), unit="row")
        with led.release("trial-U", "u/3", PrivacyCharge("pure", epsilon=0.5),
                         unit="user") as slot:
            slot.commit("{}")
        # a committed release id still replays its stored result, drawing nothing
        with led.release("trial-A", "a/1", PrivacyCharge("gaussian", zeta=0.5, delta=1e-5),
                         unit="row") as slot:
            assert slot.result == "{}"
    _no_schema_drift(ledger_url)
    with Ledger(ledger_url) as led:  # opening it again changes nothing
        assert len(led.corrections("trial-A")) == 3 and len(led.history("trial-U")) == 3


def test_schema_3_ledger_migrates_to_registrations_and_keeps_every_cap(ledger_url: str) -> None:
    """Issue 32 §1: revision 0004 adds the curator's registrations; a schema-3 ledger keeps its
    caps and charges, has no registration until its curator registers, then one per change."""
    engine = sa.create_engine(ledger_url)  # schema-3 code: revisions up to 0003 only
    cfg = Config()
    cfg.set_main_option("script_location", str(schema.MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0003")
        assert not sa.inspect(conn).has_table("ledger_registrations")
    engine.dispose()
    with Ledger(ledger_url) as led:
        led.set_budget("trial-A", zeta=2.0)
        with led.release("trial-A", "r/1", PrivacyCharge("gaussian", zeta=0.5),
                         unit="row") as slot:
            slot.commit("{}")
    engine = sa.create_engine(ledger_url)
    with engine.begin() as conn:  # back to schema 3, as a ledger written by schema-3 code
        _drop_schema_5(conn)
        conn.execute(sa.text("DROP TABLE ledger_registrations"))
        conn.execute(sa.text(f"UPDATE {schema.VERSION_TABLE} SET version_num = '0003'"))
        conn.execute(schema.meta.update().values(value="dpcausal-ledger/3"))
    engine.dispose()
    with Ledger(ledger_url) as led:  # opening migrates
        assert led.registration("trial-A") is None
        assert led.cap("trial-A").value == 2.0 and len(led.history("trial-A")) == 1
        led.register("trial-A", source={"path": "/d/a.csv"}, columns={"treatment": "A"}, n=7)
        led.register("trial-A", source={"path": "/d/b.csv"}, columns={"treatment": "A"}, n=8)
        assert [(r.version, r.source["path"], r.n) for r in led.registrations("trial-A")] == [
            (1, "/d/a.csv", 7), (2, "/d/b.csv", 8)]
    _no_schema_drift(ledger_url)


def _drop_schema_5(conn: sa.Connection) -> None:
    """Undo revision 0005 by hand (a ledger written by schema-4 code)."""
    conn.execute(sa.text("DROP TABLE ledger_analyst_datasets"))
    conn.execute(sa.text("DROP TABLE ledger_analysts"))
    conn.execute(sa.text("ALTER TABLE ledger_charges DROP COLUMN analyst"))


def test_schema_4_ledger_migrates_to_analysts_and_keeps_every_charge(ledger_url: str) -> None:
    """Issue 40: revision 0005 adds the analysts, their grants and the charge's analyst; a
    schema-4 ledger keeps its charges (recorded as the curator's: analyst None)."""
    with Ledger(ledger_url, create=True) as led:
        led.set_budget("trial-A", zeta=2.0)
        with led.release("trial-A", "r/1", PrivacyCharge("gaussian", zeta=0.5),
                         unit="row") as slot:
            slot.commit("{}")
    engine = sa.create_engine(ledger_url)
    with engine.begin() as conn:
        _drop_schema_5(conn)
        conn.execute(sa.text(f"UPDATE {schema.VERSION_TABLE} SET version_num = '0004'"))
        conn.execute(schema.meta.update().values(value="dpcausal-ledger/4"))
        assert not sa.inspect(conn).has_table("ledger_analysts")
    engine.dispose()
    with Ledger(ledger_url) as led:  # opening migrates
        hist = led.history("trial-A")
        assert list(hist["release_id"]) == ["r/1"] and hist["analyst"].isna().all()
        assert led.analysts() == []
        led.add_analyst("alice", ["trial-A"], zeta=1.0)
        with led.release("trial-A", "r/2", PrivacyCharge("gaussian", zeta=0.5), unit="row",
                         analyst="alice") as slot:
            slot.commit("{}")
        assert list(led.history("trial-A")["analyst"].fillna("-")) == ["-", "alice"]
    _no_schema_drift(ledger_url)
