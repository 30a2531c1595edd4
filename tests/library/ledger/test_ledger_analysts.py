"""Remote analysts in the ledger (issue 40): tokens stored only as salted hashes and checked in
constant time, grants per dataset, a per-analyst cap enforced by the same reservation as the
dataset's cap (also when two analysts ask at once), and the analyst recorded with each charge."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import (
    AnalystBudgetExceededError,
    AnalystRefusedError,
    BudgetExceededError,
    Ledger,
    analysts,
)

ONE = PrivacyCharge("gaussian", zeta=1.0)


def _release(led: Ledger, dataset: str, rid: str, analyst: str | None,
             charge: PrivacyCharge = ONE) -> None:
    with led.release(dataset, rid, charge, unit="row", analyst=analyst) as slot:
        slot.commit("{}")


def _dump(url: str) -> str:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        text = repr([conn.execute(sa.text(f"SELECT * FROM {t}")).all()
                     for t in ("ledger_analysts", "ledger_analyst_datasets", "ledger_charges")])
    engine.dispose()
    return text


def test_token_is_shown_once_and_stored_only_as_a_salted_hash(ledger_url: str) -> None:
    with Ledger(ledger_url, create=True) as led:
        led.set_budget("A", zeta=2.0)
        alice, token = led.add_analyst("alice", ["A"])
        _, token_b = led.add_analyst("bob", ["A"])
        assert alice.datasets == {"A": None} and alice.active
        assert token.startswith("dpca_") and len(token) > 50 and token != token_b
        secret = token.rsplit("_", 1)[-1]
        dump = _dump(ledger_url)
        assert secret not in dump and token not in dump
        hashes = [a for a in dump.split("'") if a.startswith("scrypt$")]
        assert len(hashes) == 2 and hashes[0].split("$")[4] != hashes[1].split("$")[4]  # salts
        assert led.authenticate(token).name == "alice"
        assert led.authenticate(token_b).name == "bob"


@pytest.mark.parametrize("bad", ["", "nonsense", "dpca_", "Bearer x",
                                 "dpca_0000000000000000_secret"])
def test_malformed_or_unknown_tokens_are_refused(sqlite_url: str, bad: str) -> None:
    with Ledger(sqlite_url, create=True) as led:
        led.set_budget("A", zeta=2.0)
        led.add_analyst("alice", ["A"])
        with pytest.raises(AnalystRefusedError, match="token is not valid"):
            led.authenticate(bad)


def test_a_changed_secret_and_a_revoked_token_are_refused(sqlite_url: str) -> None:
    with Ledger(sqlite_url, create=True) as led:
        led.set_budget("A", zeta=2.0)
        _, token = led.add_analyst("alice", ["A"])
        flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
        with pytest.raises(AnalystRefusedError):
            led.authenticate(flipped)
        revoked = led.revoke_analyst("alice")
        assert not revoked.active and revoked.revoked_at is not None
        with pytest.raises(AnalystRefusedError):
            led.authenticate(token)
        assert [a.name for a in led.analysts()] == ["alice"]  # kept, revoked


def test_secret_comparison_is_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stored hash is compared with hmac.compare_digest, never ``==``."""
    calls = []
    real = analysts.hmac.compare_digest
    monkeypatch.setattr(analysts.hmac, "compare_digest",
                        lambda a, b: calls.append(1) or real(a, b))
    stored = analysts.hash_secret("s3cret")
    assert analysts.secret_matches("s3cret", stored)
    assert not analysts.secret_matches("s3cret!", stored)
    assert len(calls) == 2


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"name": "alice", "datasets": ["nope"]}, "unknown dataset 'nope'"),
    ({"name": "alice", "datasets": []}, "at least one dataset"),
    ({"name": "bad name!", "datasets": ["A"]}, "analyst name must be"),
    ({"name": "alice", "datasets": ["A"], "zeta": 2.5}, "not within the cap of dataset A"),
    ({"name": "alice", "datasets": ["A"], "zeta": -1.0}, "zeta must be a positive number"),
])
def test_bad_grants_are_refused_and_nothing_is_recorded(sqlite_url: str, kwargs: dict,
                                                        message: str) -> None:
    with Ledger(sqlite_url, create=True) as led:
        led.set_budget("A", zeta=2.0)
        with pytest.raises(ValueError, match=message):
            led.add_analyst(kwargs.pop("name"), kwargs.pop("datasets"), **kwargs)
        assert led.analysts() == []


def test_a_name_is_never_reused(sqlite_url: str) -> None:
    with Ledger(sqlite_url, create=True) as led:
        led.set_budget("A", zeta=2.0)
        led.add_analyst("alice", ["A"])
        led.revoke_analyst("alice")
        with pytest.raises(ValueError, match="exists already"):
            led.add_analyst("alice", ["A"])


def test_charges_name_the_analyst_and_refusals_charge_nothing(ledger_url: str) -> None:
    with Ledger(ledger_url, create=True) as led:
        led.set_budget("A", zeta=3.0)
        led.set_budget("B", zeta=3.0)
        led.add_analyst("alice", ["A"], zeta=1.2)
        _release(led, "A", "r/curator", None)
        _release(led, "A", "r/alice-1", "alice")
        with pytest.raises(AnalystBudgetExceededError, match="analyst alice's own cap") as info:
            _release(led, "A", "r/alice-2", "alice")  # sqrt(2) = 1.41 > 1.2
        assert isinstance(info.value, BudgetExceededError)
        with pytest.raises(AnalystRefusedError, match="not admitted to dataset 'B'"):
            _release(led, "B", "r/alice-b", "alice")
        with pytest.raises(AnalystRefusedError, match="unknown or revoked"):
            _release(led, "A", "r/mallory", "mallory")
        hist = led.history("A")
        assert list(hist["release_id"]) == ["r/curator", "r/alice-1"]
        assert list(hist["analyst"].fillna("-")) == ["-", "alice"]
        assert led.history("B").empty
        assert led.analyst_spent("alice", "A").zeta == pytest.approx(1.0)
        assert [r["release_id"] for r in led.asked_by("alice")] == ["r/alice-1"]
        led.revoke_analyst("alice")
        with pytest.raises(AnalystRefusedError, match="unknown or revoked"):
            _release(led, "A", "r/alice-3", "alice", PrivacyCharge("gaussian", zeta=0.1))
        assert len(led.history("A")) == 2


def test_the_own_cap_admits_exactly_what_composes_within_it(sqlite_url: str) -> None:
    """zeta 1 twice composes to sqrt(2) = 1.414 <= 1.5; a third (sqrt 3 = 1.73) is over."""
    with Ledger(sqlite_url, create=True) as led:
        led.set_budget("A", zeta=5.0)
        led.add_analyst("alice", ["A"], zeta=1.5)
        _release(led, "A", "r/1", "alice")
        _release(led, "A", "r/2", "alice")
        with pytest.raises(AnalystBudgetExceededError):
            _release(led, "A", "r/3", "alice")
        assert led.analyst_spent("alice", "A").zeta == pytest.approx(2**0.5)


# ---------------------------------------------------------------- two analysts at once
_ctx = mp.get_context("forkserver")
_ctx.set_forkserver_preload(["numpy", "sqlalchemy", "psycopg", "dpcausal.ledger"])
DATASET_CAP, CAPS = 2.3, {"alice": 1.5, "bob": 2.0}  # dataset: 5 charges; alice 2, bob 4


def _ask(url: str, analyst: str, rid: str, go, queue) -> None:  # noqa: ANN001
    led = Ledger(url)
    go.wait(60)
    try:
        with led.release("ds", rid, ONE, unit="row", analyst=analyst) as slot:
            time.sleep(0.02)
            slot.commit("{}")
        queue.put((analyst, "committed"))
    except AnalystBudgetExceededError:
        queue.put((analyst, "own cap"))
    except BudgetExceededError:
        queue.put((analyst, "dataset cap"))
    finally:
        led.close()


@pytest.mark.timeout(240)
def test_two_analysts_at_once_never_exceed_the_dataset_cap_or_their_own(
        ledger_url: str, tmp_path: Path) -> None:
    with Ledger(ledger_url, create=True) as led:
        led.set_budget("ds", zeta=DATASET_CAP)
        for name, zeta in CAPS.items():
            led.add_analyst(name, ["ds"], zeta=zeta)
    go, queue = _ctx.Event(), _ctx.Queue()
    procs = [_ctx.Process(target=_ask, args=(ledger_url, name, f"run-{name}-{i}/ate", go, queue))
             for i in range(6) for name in CAPS]
    for p in procs:
        p.start()
    time.sleep(1.0)
    go.set()
    outcomes = [queue.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    committed = {n: sum(1 for a, o in outcomes if a == n and o == "committed") for n in CAPS}
    print(f"\n[two analysts {ledger_url.split(':')[0]}] committed {committed}")
    with Ledger(ledger_url) as led:
        assert led.spent("ds").zeta <= DATASET_CAP
        assert led.analyst_spent("alice", "ds").zeta <= CAPS["alice"]
        assert led.analyst_spent("bob", "ds").zeta <= CAPS["bob"]
        assert len(led.history("ds")) == sum(committed.values()) == 5  # nothing else recorded
    assert committed["alice"] <= 2 and committed["bob"] <= 4
