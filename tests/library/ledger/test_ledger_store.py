"""The ledger store: protocol, refusals, bad input, and missing/corrupt ledger files."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import (
    BudgetExceededError,
    DatasetIdentityError,
    IncompatibleChargeError,
    Ledger,
    LedgerError,
    ReleaseInProgressError,
    group_privacy,
)


def gauss(z: float) -> PrivacyCharge:
    return PrivacyCharge("gaussian", zeta=z)


def _publish(led: Ledger, release_id: str, charge: PrivacyCharge, dataset: str = "ds",
             unit: str = "row", fingerprint: str | None = None) -> str:
    with led.release(dataset, release_id, charge, run_url=f"http://mlflow/#/runs/{release_id}",
                     unit=unit, fingerprint=fingerprint) as slot:
        slot.commit(json.dumps({"id": release_id}))
    return slot.result


# ---------------------------------------------------------------- protocol (both back ends)
def test_refusal_message_records_nothing_and_runs_no_block(led: Ledger) -> None:
    led.set_budget("ds", zeta=1.5)
    _publish(led, "run-1/ate", gauss(1.2))
    ran = []
    msg = (r"^budget exhausted for dataset ds: spent zeta=1\.2 \(GDP\), epsilon=5\.\d+ at "
           r"delta=1e-05, requested zeta=1 \(gaussian\), cap zeta=1\.5 \(GDP\)")
    with pytest.raises(BudgetExceededError, match=msg) as info:
        with led.release("ds", "run-2/ate", gauss(1.0), unit="row"):
            ran.append(True)
    assert isinstance(info.value, ValueError) and not ran
    # the most one more release could spend: sqrt(1.5^2 - 1.2^2) = 0.9, nothing more
    assert "The most one more release could spend: zeta=0.9 Gaussian (epsilon=" in str(info.value)
    assert list(led.history("ds")["release_id"]) == ["run-1/ate"]
    _publish(led, "run-3/ate", gauss(0.9))  # sqrt(1.44 + 0.81) = 1.5: still fits exactly
    assert led.spent("ds").zeta == pytest.approx(1.5, rel=1e-15)


def test_check_refuses_exactly_what_a_reservation_would_and_records_nothing(led: Ledger) -> None:
    led.set_budget("ds", zeta=1.5)
    _publish(led, "run-1/ate", gauss(0.9))
    fits = math.sqrt(1.5**2 - 0.9**2)  # 1.2: exactly the remaining zeta
    led.check("ds", gauss(fits), unit="row")
    with pytest.raises(BudgetExceededError,
                       match=r"^budget exhausted for dataset ds: spent zeta=0\.9"):
        led.check("ds", gauss(fits * 1.001), unit="row")
    assert list(led.history("ds")["release_id"]) == ["run-1/ate"]  # read-only
    assert led.has_dataset("ds") and not led.has_dataset("other")
    _publish(led, "run-2/ate", gauss(fits))  # what check admitted, the reservation admits


def test_exception_in_block_keeps_charge_as_incomplete(led: Ledger) -> None:
    led.set_budget("ds", rho=1.0)
    with pytest.raises(RuntimeError, match="estimator crashed"):
        with led.release("ds", "run-1/ate", gauss(1.0), unit="row"):
            raise RuntimeError("estimator crashed")
    hist = led.history("ds")
    assert list(hist["status"]) == ["incomplete"]
    assert led.spent("ds").zeta == 1.0
    with pytest.raises(ReleaseInProgressError, match="never committed"):
        with led.release("ds", "run-1/ate", gauss(1.0), unit="row"):
            pytest.fail("no block, no noise for a release id that was never committed")


def test_leaving_block_without_commit_is_an_error(led: Ledger) -> None:
    led.set_budget("ds", zeta=3.0)
    with pytest.raises(ReleaseInProgressError, match="without slot.commit"):
        with led.release("ds", "run-1/ate", gauss(1.0), unit="row"):
            pass
    assert list(led.history("ds")["status"]) == ["incomplete"]


def test_committed_release_is_replayed_and_not_charged_twice(led: Ledger) -> None:
    led.set_budget("ds", zeta=3.0)
    first = _publish(led, "run-1/ate", gauss(1.0))
    with led.release("ds", "run-1/ate", gauss(1.0), unit="row") as slot:
        assert slot.result == first
        with pytest.raises(ReleaseInProgressError, match="already committed"):
            slot.commit("{}")
    assert len(led.history("ds")) == 1 and led.spent("ds").zeta == 1.0


def test_release_id_names_one_release(led: Ledger) -> None:
    led.set_budget("ds", zeta=3.0)
    led.set_budget("other", zeta=3.0)
    _publish(led, "run-1/ate", gauss(1.0))
    with pytest.raises(ValueError, match="already recorded for dataset ds with charge zeta=1"):
        led.release("ds", "run-1/ate", gauss(0.5), unit="row").__enter__()
    with pytest.raises(ValueError, match="already recorded for dataset ds"):
        led.release("other", "run-1/ate", gauss(1.0), unit="row").__enter__()


def test_history_and_budgets_tables(led: Ledger) -> None:
    led.set_budget("ds", epsilon=9.0, delta=1e-6)
    _publish(led, "run-1/ate", gauss(1.0))
    _publish(led, "run-2/rr", PrivacyCharge("pure", epsilon=0.5))
    hist = led.history("ds")
    assert list(hist["release_id"]) == ["run-1/ate", "run-2/rr"]
    assert list(hist["mechanism"]) == ["gaussian", "pure"]
    assert list(hist["run_url"]) == [f"http://mlflow/#/runs/{r}" for r in ("run-1/ate", "run-2/rr")]
    row = led.budgets().set_index("dataset").loc["ds"]
    assert row["cap"] == "epsilon=9, delta=1e-06" and row["charges"] == 2
    assert row["composition"] == "pld" and pd.isna(row["spent_zeta"])
    assert row["next_zeta"] > 0 and row["next_pure_epsilon"] > 0  # headroom: composition tests
    assert list(hist["epsilon"])[1:] == [0.5] and list(hist["delta"]) == [1e-6, 0.0]
    assert hist["epsilon"].iloc[0] > 4.3772  # zeta=1 is (4.3772, 1e-5)-DP, spec §1.3; at 1e-6 more
    spent = led.spent("ds")
    assert spent.zeta is None and spent.delta == 1e-6


def test_gdp_cap_refuses_a_laplace_charge_before_reserving(led: Ledger) -> None:
    """A GDP cap bounds the whole tradeoff curve: eps=4.3 pure Laplace was admitted under a
    1-GDP cap (4.377 at 1e-5)."""
    led.set_budget("ds", zeta=1.0)
    with pytest.raises(IncompatibleChargeError, match="refused for dataset ds: a zeta-GDP cap "
                                                      "admits Gaussian charges only"):
        with led.release("ds", "r/1", PrivacyCharge("laplace", epsilon=4.3), unit="row"):
            pytest.fail("no block, no noise for a refused charge")
    assert led.history("ds").empty
    led.set_budget("ds", rho=0.5)  # zCDP: the same charge counts as 4.3^2 / 2 = 9.245
    with pytest.raises(BudgetExceededError):
        led.check("ds", PrivacyCharge("laplace", epsilon=4.3), unit="row")
    _publish(led, "r/2", PrivacyCharge("laplace", epsilon=1.0))  # exactly rho = 0.5


# Which (charge relation -> cap relation) pairs count, written out by hand from the specs
# (README "Units and neighbouring relations"). Relations: (unit, what is public besides n).
ROW, LABEL = ("row", ""), ("label", "arm,cluster")  # dp_ate_ensemble §1.3; cluster_dp Def 2.2
USER_OCC, CLIENT = ("user", "occupancy"), ("client", "arm_sizes")  # user_level §1.3; fed Def 2.1
USER_ANY = ("user", "")  # k whole rows of one user (group privacy), nothing else public
RELATIONS = [ROW, LABEL, USER_OCC, CLIENT, USER_ANY]
ADMITTED = {
    (ROW, ROW), (ROW, LABEL),  # a label change is a row change
    (LABEL, LABEL),
    # user-level with the occupancy public: a row-level neighbour may move a row to the other
    # arm (changing the per-cell counts it publishes), so never under a row cap (issue 26 §5)
    (USER_OCC, USER_OCC), (USER_OCC, LABEL),
    (CLIENT, CLIENT), (CLIENT, LABEL),  # it publishes n_t and n_c: not under a row cap either
    (USER_ANY, USER_ANY), (USER_ANY, USER_OCC), (USER_ANY, ROW), (USER_ANY, LABEL),
}


@pytest.mark.parametrize("charge_rel", RELATIONS, ids=lambda r: f"charge-{r[0]}[{r[1]}]")
@pytest.mark.parametrize("cap_rel", RELATIONS, ids=lambda r: f"cap-{r[0]}[{r[1]}]")
def test_a_charge_counts_only_where_its_relation_bounds_the_caps(
        sqlite_url: str, charge_rel: tuple[str, str], cap_rel: tuple[str, str]) -> None:
    """Issue 26 §5: a user-level (occupancy public) or federated (arm sizes public) charge was
    counted under a row cap as if it implied row-level protection."""
    with Ledger(sqlite_url, create=True) as led:
        led.set_budget("ds", epsilon=5.0, delta=1e-5, unit=cap_rel[0], public=cap_rel[1])
        charge = PrivacyCharge("pure", epsilon=1.0)
        if (charge_rel, cap_rel) in ADMITTED:
            with led.release("ds", "r/1", charge, unit=charge_rel[0],
                             public=charge_rel[1]) as slot:
                slot.commit("{}")
            hist = led.history("ds")
            assert list(zip(hist["unit"], hist["public"], strict=True)) == [charge_rel]
            return
        names = [f"per {u} ({', '.join(['n', *filter(None, p.split(','))])} public)"
                 for u, p in (cap_rel, charge_rel)]
        msg = (f"refused for dataset ds: the cap protects {re.escape(names[0])} and the charge "
               f"is proved {re.escape(names[1])}: ")
        with pytest.raises(IncompatibleChargeError, match=msg):
            led.check("ds", charge, unit=charge_rel[0], public=charge_rel[1])
        with pytest.raises(IncompatibleChargeError, match=msg):
            with led.release("ds", "r/1", charge, unit=charge_rel[0], public=charge_rel[1]):
                pytest.fail("a refused release ran its block")
        assert led.history("ds").empty


def test_default_relations_are_the_mechanisms(led: Ledger) -> None:
    """A charge given only its unit gets the relation of that unit's mechanisms; a
    group-privacy charge holds nothing but n public."""
    led.set_budget("ds", epsilon=9.0, delta=1e-5, unit="label")
    for i, unit in enumerate(["row", "user", "client", "label"]):
        _publish(led, f"r/{i}", PrivacyCharge("pure", epsilon=0.5), unit=unit)
    _publish(led, "r/g", group_privacy(PrivacyCharge("pure", epsilon=0.5), 2), unit="user")
    hist = led.history("ds")
    assert list(hist["public"]) == ["", "occupancy", "arm_sizes", "arm,cluster", ""]
    assert led.relation("ds").describe() == "per label (n, arm, cluster public)"
    with pytest.raises(ValueError, match=r"public must name facts among .*got \['groups'\]"):
        led.set_budget("ds", epsilon=9.0, delta=1e-5, unit="user", public="groups")


def test_cap_relation_change_must_still_be_bounded_by_every_charge(led: Ledger) -> None:
    led.set_budget("ds", epsilon=5.0, delta=1e-5, unit="label")
    assert led.unit("ds") == "label"
    _publish(led, "r/1", PrivacyCharge("pure", epsilon=1.0), unit="user")
    led.set_budget("ds", epsilon=5.0, delta=1e-5, unit="user")  # the user charge bounds it
    with pytest.raises(ValueError, match=r"cannot set the cap of dataset ds to epsilon=5, "
                                         r"delta=1e-05: the cap protects per row \(n public\) and "
                                         r"the charge is proved per user \(n, occupancy public\)"):
        led.set_budget("ds", epsilon=5.0, delta=1e-5, unit="row")
    assert led.unit("ds") == "user"
    with pytest.raises(ValueError, match=r"unit must be one of \['client', 'label', 'row', "):
        led.set_budget("ds", epsilon=5.0, delta=1e-5, unit="person")


def test_a_row_level_charge_converted_by_group_privacy_counts_per_user(led: Ledger) -> None:
    led.set_budget("ds", epsilon=2.0, delta=1e-5, unit="user")
    row_charge = PrivacyCharge("pure", epsilon=0.5)
    with pytest.raises(IncompatibleChargeError, match="changing one user is not changing one row"):
        led.check("ds", row_charge, unit="row")
    _publish(led, "r/1", group_privacy(row_charge, 3), unit="user")  # <= 3 rows per user: 1.5
    hist = led.history("ds")
    assert list(hist["epsilon"]) == [1.5] and hist["detail"].iloc[0] == {"group_privacy_k": 3}
    with pytest.raises(BudgetExceededError):  # 1.5 + 1.5 > 2 (pure composes to 3 at most)
        led.check("ds", group_privacy(row_charge, 3), unit="user")


def test_a_corrected_unit_is_logged_and_voids_a_cap_it_no_longer_bounds(led: Ledger) -> None:
    """Issue 26 §5: the curator repairs a charge recorded per row that was user-level."""
    led.set_budget("ds", epsilon=9.0, delta=1e-5)
    _publish(led, "r/1", PrivacyCharge("pure", epsilon=1.0), unit="row")
    with pytest.raises(ValueError, match="reason must say why"):
        led.correct_unit("r/1", "user", reason=" ")
    with pytest.raises(ValueError, match="no charge with release_id 'r/9'"):
        led.correct_unit("r/9", "user", reason="x")
    corrected = led.correct_unit("r/1", "user", reason="user-level, mislabelled")
    assert corrected.describe() == "per user (n, occupancy public)"
    hist = led.history("ds")
    assert (hist["unit"].iloc[0], hist["public"].iloc[0]) == ("user", "occupancy")
    log = led.corrections("ds")
    assert list(log[["release_id", "old_unit", "old_public", "new_unit", "new_public",
                     "reason"]].itertuples(index=False, name=None)) == [
        ("r/1", "row", "", "user", "occupancy", "user-level, mislabelled")]
    assert "@" in log["by"].iloc[0]
    # the row cap's guarantee no longer holds: nothing more is admitted, the refusal names both
    msg = (r"recorded charge r/1: the cap protects per row \(n public\) and the charge is "
           r"proved per user \(n, occupancy public\)")
    with pytest.raises(IncompatibleChargeError, match=msg):
        led.check("ds", PrivacyCharge("pure", epsilon=0.1), unit="row")
    assert led.headroom("ds")["next_pure_epsilon"] == 0.0
    assert led.budgets().set_index("dataset").loc["ds", "next_epsilon"] == 0.0
    led.set_budget("ds", epsilon=9.0, delta=1e-5, unit="label")  # what both still bound
    _publish(led, "r/2", PrivacyCharge("pure", epsilon=0.1), unit="row")


def test_a_known_fingerprint_under_a_new_dataset_id_is_refused(led: Ledger) -> None:
    """A budget follows the data, not its name: the same data under a new dataset id started
    with a full budget."""
    led.set_budget("trial-A", zeta=2.0, fingerprint="fp-1")
    msg = r"refused for dataset trial-B: .* already budgeted as dataset 'trial-A'"
    with pytest.raises(DatasetIdentityError, match=msg):
        led.set_budget("trial-B", zeta=2.0, fingerprint="fp-1")
    assert not led.has_dataset("trial-B")
    led.set_budget("trial-B", zeta=2.0)
    for call in (lambda: led.check("trial-B", gauss(0.1), unit="row", fingerprint="fp-1"),
                 lambda: _publish(led, "r/1", gauss(0.1), "trial-B", fingerprint="fp-1")):
        with pytest.raises(DatasetIdentityError, match=msg):
            call()
    assert led.history("trial-B").empty
    # a new version of trial-A's data binds to trial-A on its first release ...
    _publish(led, "r/2", gauss(0.1), "trial-A", fingerprint="fp-2")
    _publish(led, "r/3", gauss(0.1), "trial-A", fingerprint="fp-1")
    with pytest.raises(DatasetIdentityError, match=msg):  # ... and is refused under trial-B
        _publish(led, "r/4", gauss(0.1), "trial-B", fingerprint="fp-2")
    _publish(led, "r/5", gauss(0.1), "trial-B", fingerprint="fp-3")
    assert len(led.history("trial-A")) == 2 and len(led.history("trial-B")) == 1


def test_set_budget_cannot_go_below_spent(led: Ledger) -> None:
    led.set_budget("ds", zeta=2.0)
    _publish(led, "run-1/ate", gauss(1.5))
    with pytest.raises(ValueError, match="cannot set the cap of dataset ds to zeta=1.4 .*already "
                                         "spent zeta=1.5"):
        led.set_budget("ds", zeta=1.4)
    with pytest.raises(ValueError, match=r"already spent zeta=1\.5"):
        led.set_budget("ds", epsilon=7.0, delta=1e-5)  # 1.5-GDP is (7.0514, 1e-5)
    assert led.cap("ds").value == 2.0  # unchanged
    assert led.set_budget("ds", zeta=1.5).value == 1.5  # exactly what is spent is allowed
    assert led.set_budget("ds", rho=1.2).zeta == pytest.approx(math.sqrt(2.4))


def test_unknown_dataset(led: Ledger) -> None:
    led.set_budget("known", zeta=1.0)
    msg = r"unknown dataset 'nope' \(known: known\); set its budget first"
    for call in (lambda: led.release("nope", "r/1", gauss(0.1), unit="row").__enter__(),
                 lambda: led.history("nope"), lambda: led.spent("nope"), lambda: led.cap("nope")):
        with pytest.raises(ValueError, match=msg):
            call()


# ---------------------------------------------------------------- bad input (SQLite)
@pytest.mark.parametrize("kwargs, msg", [
    (dict(zeta=0.0), r"zeta must be a finite number > 0, got 0\.0"),
    (dict(zeta=-1.0), r"zeta must be a finite number > 0, got -1\.0"),
    (dict(zeta=math.nan), r"zeta must be a finite number > 0, got nan"),
    (dict(zeta=math.inf), r"zeta must be a finite number > 0, got inf"),
    (dict(rho=0), r"rho must be a finite number > 0, got 0"),
    (dict(epsilon=-0.5, delta=1e-5), r"epsilon must be a finite number > 0, got -0\.5"),
    (dict(epsilon=1.0), r"an epsilon cap needs delta too"),
    (dict(epsilon=1.0, delta=0.0), r"delta must be in \(0, 1\), got 0\.0"),
    (dict(zeta=1.0, delta=1.0), r"delta must be in \(0, 1\), got 1\.0"),
    (dict(zeta=1.0, rho=0.5), r"give exactly one of zeta, rho or epsilon .*got \['rho', 'zeta'\]"),
    (dict(), r"give exactly one of zeta, rho or epsilon .*got none"),
    (dict(zeta=True), r"zeta must be a finite number > 0, got True"),
])
def test_bad_budgets(sqlite_url: str, kwargs: dict, msg: str) -> None:
    with Ledger(sqlite_url, create=True) as led:
        with pytest.raises(ValueError, match=msg):
            led.set_budget("ds", **kwargs)
        assert led.budgets().empty


def test_bad_release_arguments(sqlite_url: str) -> None:
    with Ledger(sqlite_url, create=True) as led:
        led.set_budget("ds", zeta=1.0)
        with pytest.raises(ValueError, match="release_id must be a non-empty string, got ''"):
            led.release("ds", "", gauss(0.1), unit="row").__enter__()
        with pytest.raises(TypeError, match="charge must be a dpcausal.accounting.PrivacyCharge"):
            led.release("ds", "r/1", {"zeta": 0.1}, unit="row").__enter__()
        with pytest.raises(ValueError, match="dataset must be a non-empty string"):
            led.set_budget("  ", zeta=1.0)
        with pytest.raises(ValueError, match="unit must be one of .*got 'person'"):
            led.release("ds", "r/3", gauss(0.1), unit="person").__enter__()
        with pytest.raises(ValueError, match="fingerprint must be a non-empty string, got ''"):
            led.release("ds", "r/3", gauss(0.1), unit="row", fingerprint="").__enter__()
        assert led.history("ds").empty
        with pytest.raises(TypeError, match="result must be a JSON string, got dict"):
            with led.release("ds", "r/2", gauss(0.1), unit="row") as slot:
                slot.commit({"tau": 1.0})


# ---------------------------------------------------------------- ledger files
def test_missing_file_is_an_error_unless_create(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "ledger.db"
    with pytest.raises(LedgerError, match=f"no ledger at {path}: the file does not exist"):
        Ledger(f"sqlite:///{path}")
    assert not path.exists()
    with Ledger(f"sqlite:///{path}", create=True) as led:
        led.set_budget("ds", zeta=1.0)
    with Ledger(f"sqlite:///{path}") as led:  # reopened, nothing lost
        assert led.cap("ds").value == 1.0


@pytest.mark.parametrize("content", [b"", b"this is not a database at all" * 100])
def test_corrupt_or_empty_file_is_never_replaced(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "ledger.db"
    path.write_bytes(content)
    for create in (False, True):
        with pytest.raises(LedgerError, match=f"ledger at {path}"):
            Ledger(f"sqlite:///{path}", create=create)
    assert path.read_bytes() == content  # untouched


def test_truncated_ledger_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger(f"sqlite:///{path}", create=True) as led:
        led.set_budget("ds", zeta=1.0)
    data = path.read_bytes()
    path.write_bytes(data[:100] + b"\0" * (len(data) - 100))  # header kept, pages wiped
    with pytest.raises(LedgerError, match=f"ledger at {path}"):
        Ledger(f"sqlite:///{path}", create=True)


def test_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mlflow.db"
    with closing(sqlite3.connect(path)) as conn, conn:  # closed, not only committed
        conn.execute("CREATE TABLE runs (id INTEGER)")
    with pytest.raises(LedgerError, match="holds no ledger tables"):
        Ledger(f"sqlite:///{path}", create=True)


def test_default_url_is_under_the_data_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DPCAUSAL_LEDGER_URL", raising=False)
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    with pytest.raises(LedgerError, match="ledger.db: the file does not exist"):
        Ledger()
    with Ledger(create=True) as led:
        led.set_budget("ds", zeta=1.0)
    assert (tmp_path / "data" / "ledger.db").is_file()
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    with pytest.raises(LedgerError, match="elsewhere.db: the file does not exist"):
        Ledger()


def test_postgres_database_without_ledger_needs_create(postgres_url: str) -> None:
    with pytest.raises(LedgerError, match="holds no ledger tables .*create=True"):
        Ledger(postgres_url)
    with Ledger(postgres_url.replace("+psycopg", ""), create=True) as led:  # plain postgresql://
        led.set_budget("ds", zeta=1.0)
    engine = sa.create_engine(postgres_url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("select count(*) from ledger_datasets").scalar() == 1
    engine.dispose()


def test_a_ledger_shows_where_it_is(tmp_path):
    with Ledger(f"sqlite:///{tmp_path / 'l.db'}", create=True) as led:
        assert repr(led) == f"Ledger({str(tmp_path / 'l.db')!r})"
