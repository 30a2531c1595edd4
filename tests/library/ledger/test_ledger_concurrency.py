"""Real processes on one ledger: the budget race, a SIGKILL between reserve and commit, retries.

Children come from a multiprocessing "forkserver" whose server has preloaded the ledger: each child
is a fresh process (no state inherited from the test session, e.g. Prefect or dask finalizers) that
opens its own connections, yet starts in milliseconds (a spawned interpreter re-imports
scipy/scikit-learn for ~5 s each, too slow for 16 children on 2 cores).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from dpcausal.accounting import PrivacyCharge, compose_gdp
from dpcausal.ledger import BudgetExceededError, Ledger, ReleaseInProgressError, store

N_PROCESSES = 16
ZETA = 1.0
CAP_ZETA = 2.3  # admits exactly 5 charges of zeta=1: sqrt(5)=2.236 <= 2.3 < sqrt(6)=2.449
FIGURES: dict[str, dict] = {}

_ctx = mp.get_context("forkserver")
_ctx.set_forkserver_preload(["numpy", "sqlalchemy", "psycopg", "dpcausal.ledger"])


def _release(url: str, release_id: str, noise_log: Path, go=None, reserved=None,
             hang: bool = False, ready=None) -> dict:
    """One release: reserve -> draw (fake) noise -> commit. Each noise draw appends to noise_log."""
    led = Ledger(url)
    if ready is not None:
        ready.release()
    if go is not None:
        go.wait(60)
    try:
        with led.release("ds", release_id, PrivacyCharge("gaussian", zeta=ZETA),
                         unit="row") as slot:
            if slot.result is not None:
                return {"outcome": "replayed", "result": slot.result}
            noise = float(np.random.default_rng().normal(0.0, 1.0 / ZETA))
            with open(noise_log, "a") as f:
                f.write(f"{release_id} {noise!r}\n")
            if reserved is not None:
                reserved.set()
            if hang:
                time.sleep(600)  # killed here, between reserve and commit
            time.sleep(0.02)  # widen the window between reserve and commit
            slot.commit(json.dumps({"tau_dp": noise}))
            return {"outcome": "committed", "result": slot.result}
    except BudgetExceededError as exc:
        return {"outcome": "refused", "message": str(exc)}
    except ReleaseInProgressError as exc:
        return {"outcome": "in_progress", "message": str(exc)}
    finally:
        led.close()


def _unlocked_lock_dataset(conn, dataset):  # noqa: ANN001, ANN202
    """Deliberately broken variant for the negative control: no row lock, a wide window."""
    row = store._read_dataset(conn, dataset)
    time.sleep(0.3)  # everyone reads the charges before anyone commits
    return row


def _child(url, release_id, noise_log, go, queue, broken=False, ready=None):  # noqa: ANN001
    if broken:
        store._lock_dataset = _unlocked_lock_dataset
    queue.put((release_id, _release(url, release_id, noise_log, go=go, ready=ready)))


def _race(url: str, tmp_path: Path, broken: bool = False) -> tuple[dict, float]:
    """16 processes released at once, each reserve -> noise -> commit; {release_id: outcome}."""
    with Ledger(url, create=True) as led:
        led.set_budget("ds", zeta=CAP_ZETA)
    go, queue, ready = _ctx.Event(), _ctx.Queue(), _ctx.Semaphore(0)
    procs = [_ctx.Process(target=_child, args=(url, f"flowrun-{i}/ate", tmp_path / "noise.log",
                                               go, queue, broken, ready))
             for i in range(N_PROCESSES)]
    for p in procs:
        p.start()
    for _ in procs:  # every child has its ledger open: release them all at once
        assert ready.acquire(timeout=120), "a child never got ready"
    t0 = time.monotonic()
    go.set()
    results = dict(queue.get(timeout=180) for _ in procs)
    wall = time.monotonic() - t0
    for p in procs:
        p.join(30)
        assert p.exitcode == 0, f"child {p.pid} exited with {p.exitcode}"
    return results, wall


@pytest.mark.timeout(240)
def test_race_16_processes_exactly_5_succeed(ledger_url: str, tmp_path: Path) -> None:
    results, wall = _race(ledger_url, tmp_path)
    outcomes = [r["outcome"] for r in results.values()]
    with Ledger(ledger_url) as led:
        history, spent = led.history("ds"), led.spent("ds")
    backend = ledger_url.split(":")[0]
    FIGURES[backend] = dict(committed=outcomes.count("committed"),
                            refused=outcomes.count("refused"), spent_zeta=spent.zeta,
                            cap=CAP_ZETA, wall_s=round(wall, 2))
    print(f"\n[race {backend}] {FIGURES[backend]}")
    assert outcomes.count("committed") == 5, results
    assert outcomes.count("refused") == 11, results
    for r in results.values():
        if r["outcome"] == "refused":
            assert r["message"].startswith("budget exhausted for dataset ds: spent zeta=2.23607")
            assert "requested zeta=1 (gaussian), cap zeta=2.3 (GDP)" in r["message"]
    assert list(history["status"]) == ["committed"] * 5
    assert compose_gdp(list(history["zeta"])) <= CAP_ZETA
    assert spent.zeta == pytest.approx(5**0.5, rel=1e-12)
    # noise was drawn exactly by the 5 winners, never by a refused process
    drawn = (tmp_path / "noise.log").read_text().splitlines()
    winners = {rid for rid, r in results.items() if r["outcome"] == "committed"}
    assert {line.split()[0] for line in drawn} == winners and len(drawn) == 5


@pytest.mark.timeout(240)
def test_race_negative_control_without_row_lock(postgres_url: str, tmp_path: Path) -> None:
    """The same race with the dataset row lock removed overspends: the race test can fail."""
    results, _ = _race(postgres_url, tmp_path, broken=True)
    committed = [r for r in results.values() if r["outcome"] == "committed"]
    print(f"\n[negative control postgresql, no row lock] committed={len(committed)} of 16")
    with Ledger(postgres_url) as led:
        assert led.spent("ds").zeta > CAP_ZETA
    assert len(committed) > 5


@pytest.mark.timeout(120)
def test_sigkill_between_reserve_and_commit(ledger_url: str, tmp_path: Path) -> None:
    with Ledger(ledger_url, create=True) as led:
        led.set_budget("ds", zeta=CAP_ZETA)
    noise_log = tmp_path / "noise.log"
    reserved = _ctx.Event()
    victim = _ctx.Process(target=_release, args=(ledger_url, "flowrun-7/ate", noise_log),
                          kwargs=dict(reserved=reserved, hang=True))
    victim.start()
    assert reserved.wait(60), "the victim never reserved"
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(30)
    assert victim.exitcode == -signal.SIGKILL

    with Ledger(ledger_url) as led:
        assert led.spent("ds").zeta == ZETA  # the charge stays recorded
    # rerun of the same release id, in a fresh process: no new noise, clean failure
    again = _ctx.Queue()
    rerun = _ctx.Process(target=_child, args=(ledger_url, "flowrun-7/ate", noise_log, None, again))
    rerun.start()
    _, outcome = again.get(timeout=60)
    rerun.join(30)
    assert outcome["outcome"] == "in_progress"
    assert "flowrun-7/ate" in outcome["message"] and "never committed (status incomplete)" \
        in outcome["message"]  # the retry found the owner dead and marked the charge
    assert len(noise_log.read_text().splitlines()) == 1
    with Ledger(ledger_url) as led:
        history = led.history("ds")
        assert list(history["status"]) == ["incomplete"]
        assert history["finished_at"].isna().all()
        assert led.spent("ds").zeta == ZETA
        # and no result was ever published under it
        with pytest.raises(ReleaseInProgressError, match="status incomplete"):
            with led.release("ds", "flowrun-7/ate", PrivacyCharge("gaussian", zeta=ZETA),
                             unit="row"):
                pytest.fail("the block must not run for an unfinished release id")
    FIGURES[f"crash {ledger_url.split(':')[0]}"] = dict(status="incomplete", noise_draws=1,
                                                        rerun=outcome["outcome"])


def test_retry_of_committed_release_replays_without_noise(ledger_url: str, tmp_path: Path) -> None:
    with Ledger(ledger_url, create=True) as led:
        led.set_budget("ds", zeta=CAP_ZETA)
    noise_log = tmp_path / "noise.log"
    first = _release(ledger_url, "flowrun-9/ate", noise_log)
    second = _release(ledger_url, "flowrun-9/ate", noise_log)
    assert first["outcome"] == "committed"
    assert second == {"outcome": "replayed", "result": first["result"]}
    assert len(noise_log.read_text().splitlines()) == 1
    with Ledger(ledger_url) as led:
        assert len(led.history("ds")) == 1 and led.spent("ds").zeta == ZETA


def test_history_marks_dead_reservations_incomplete(ledger_url: str, tmp_path: Path) -> None:
    with Ledger(ledger_url, create=True) as led:
        led.set_budget("ds", zeta=CAP_ZETA)
    reserved = _ctx.Event()
    victim = _ctx.Process(target=_release, args=(ledger_url, "flowrun-8/ate",
                                                 tmp_path / "noise.log"),
                          kwargs=dict(reserved=reserved, hang=True))
    victim.start()
    assert reserved.wait(60)
    with Ledger(ledger_url) as led:
        assert list(led.history("ds")["status"]) == ["reserved"]  # alive: left alone
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(30)
        assert list(led.history("ds")["status"]) == ["incomplete"]
        assert led.budgets().set_index("dataset").loc["ds", "unfinished"] == 1


def _bind_child(url, dataset, go, queue):  # noqa: ANN001
    led = Ledger(url)
    try:
        go.wait(60)
        with led.release(dataset, f"{dataset}/r", PrivacyCharge("gaussian", zeta=0.1), unit="row",
                         fingerprint="same-data") as slot:
            slot.commit("{}")
        queue.put((dataset, "committed"))
    except Exception as exc:  # reported to the parent
        queue.put((dataset, type(exc).__name__))
    finally:
        led.close()


@pytest.mark.timeout(240)
def test_race_to_bind_one_fingerprint_under_8_ids(ledger_url: str) -> None:
    """The same new data released under 8 dataset ids at once: exactly one id gets them."""
    names = [f"id-{i}" for i in range(8)]
    with Ledger(ledger_url, create=True) as led:
        for name in names:
            led.set_budget(name, zeta=1.0)
    go, queue = _ctx.Event(), _ctx.Queue()
    procs = [_ctx.Process(target=_bind_child, args=(ledger_url, n, go, queue)) for n in names]
    for p in procs:
        p.start()
    time.sleep(1.0)
    go.set()
    results = dict(queue.get(timeout=180) for _ in procs)
    for p in procs:
        p.join(30)
    outcomes = sorted(results.values())
    assert outcomes == ["DatasetIdentityError"] * 7 + ["committed"], results
    winner = next(n for n, r in results.items() if r == "committed")
    with Ledger(ledger_url) as led:
        assert led.known(fingerprint="same-data") == winner
        assert sum(len(led.history(n)) for n in names) == 1
