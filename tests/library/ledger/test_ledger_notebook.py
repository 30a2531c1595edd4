"""Notebook helpers: ``with led.charging(dataset): est.fit(...)`` and ``led.fit(...)`` charge
every fit (reserve -> fit -> commit), refuse past the cap and then draw nothing (issue 20)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcausal import Ledger, Mechanism, Prepared, Privacy, Release, noise, session
from dpcausal.accounting import PrivacyCharge
from dpcausal.contract import columns
from dpcausal.ledger import BudgetExceededError, IncompatibleChargeError
from dpcausal.validation import ReleaseFailedError


class _LaplaceMean(Mechanism):
    """Mean of y clipped to [0, 1] with exact lattice Laplace noise (one draw per release)."""

    unit = "user"

    def __init__(self, epsilon: float = 1.0) -> None:
        self.epsilon = epsilon

    def check_input(self, data, *, outcome="y"):  # noqa: ANN001, ANN201
        y = columns(data, outcome=outcome)["outcome"].to_numpy(float)
        return Prepared(public={"n": y.size}, data=y)

    def privacy_charge(self, n: int) -> PrivacyCharge:
        return PrivacyCharge("laplace", epsilon=self.epsilon)

    def _private_release(self, prepared: Prepared, *, evaluation: bool = False) -> Release:
        n = prepared.public["n"]
        value = noise.laplace_mechanism(float(np.clip(prepared.data, 0, 1).mean()), 1 / n,
                                        self.epsilon, noise.secure_rng())
        return Release(ate=value, ci=(value - 1, value + 1), se=0.5, level=0.95, n=n,
                       privacy=Privacy(epsilon=self.epsilon, delta=0.0, unit="user",
                                       mechanism="laplace"))


@pytest.fixture
def draws(monkeypatch) -> list[float]:
    """Every exact-sampler draw made through dpcausal.noise."""
    seen: list[float] = []
    real = noise.sample_discrete_laplace

    def spy(scale, rng):  # noqa: ANN001, ANN202
        seen.append(float(scale))
        return real(scale, rng)

    monkeypatch.setattr(noise, "sample_discrete_laplace", spy)
    return seen


@pytest.fixture
def led(tmp_path: Path):
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", create=True) as ledger:
        ledger.set_budget("trial-A", rho=1.0, unit="user")  # admits two eps=1 fits: 2 * 1/2
        yield ledger
    session.reset()


def test_charging_block_charges_each_fit_and_refuses_past_the_cap(led, draws) -> None:
    df = pd.DataFrame({"y": [0.2, 0.9, 0.4, 0.7]})
    before = session.accountant()
    with led.charging("trial-A"):
        first = _LaplaceMean().fit(df)
        _LaplaceMean().fit(df)
        assert len(draws) == 2
        with pytest.raises(BudgetExceededError, match="budget exhausted for dataset trial-A"):
            _LaplaceMean().fit(df)
    assert len(draws) == 2  # the refused fit drew nothing
    assert session.accountant() is before  # the block restored the session accountant
    hist = led.history("trial-A")
    assert list(hist["status"]) == ["committed", "committed"]
    assert list(hist["unit"]) == ["user", "user"]  # the mechanism's own unit
    assert json.loads(led_result(led, 0))["ate"] == first.ate  # committed what was returned


def led_result(led: Ledger, i: int) -> str:
    import sqlalchemy as sa

    from dpcausal.ledger import schema

    with led.engine.connect() as conn:
        rows = conn.execute(sa.select(schema.charges.c.result).order_by(schema.charges.c.id))
        return rows.scalars().all()[i]


def test_one_line_fit_and_refusals_before_any_draw(led, draws) -> None:
    df = pd.DataFrame({"y": [0.1, 0.5, 0.8]})
    out = led.fit("trial-A", _LaplaceMean(epsilon=1.0), df, fingerprint="fp-1")
    assert isinstance(out, Release) and len(draws) == 1
    with pytest.raises(BudgetExceededError):
        led.fit("trial-A", _LaplaceMean(epsilon=1.5), df)  # 0.5 + 1.125 > 1
    assert len(draws) == 1 and len(led.history("trial-A")) == 1
    led.set_budget("labels", rho=10.0, unit="label")  # a per-label cap: a per-user fit bounds it
    led.fit("labels", _LaplaceMean(), pd.DataFrame({"y": [0.3]}))
    _LaplaceMean.unit = "label"
    try:
        with pytest.raises(IncompatibleChargeError, match="the cap protects per user"):
            led.fit("trial-A", _LaplaceMean(epsilon=0.1), df)
    finally:
        _LaplaceMean.unit = "user"
    assert len(draws) == 2
    with pytest.raises(ValueError, match="evaluation mode is refused"):
        with led.charging("trial-A"):
            _LaplaceMean().fit(df, evaluation=True)
    assert len(draws) == 2


def test_a_fit_in_another_thread_is_not_charged_to_the_block(led, draws) -> None:
    """The accountant is local to the context (issue 27 §3): while this thread is inside
    ``led.charging("trial-A")``, a fit another thread runs on its own data goes to that thread's
    accountant (the session's), not to trial-A. A process-global accountant charged it to
    trial-A: 2 charges where 1 is right, and the other thread's data uncharged."""
    mine, theirs = pd.DataFrame({"y": [0.2, 0.9]}), pd.DataFrame({"y": [0.5, 0.6, 0.7]})
    seen: list[object] = []
    with led.charging("trial-A"):
        _LaplaceMean().fit(mine)
        other = threading.Thread(target=lambda: seen.append(_LaplaceMean().fit(theirs)))
        other.start()
        other.join()
    assert isinstance(seen[0], Release) and len(draws) == 2
    assert len(led.history("trial-A")) == 1
    assert [len(v) for v in session.accountant().charges.values()] == [1]  # the thread's fit


def _charged(led: Ledger, mechanism: Mechanism, release_id: str, y: list[float]):  # noqa: ANN202
    prepared = mechanism.check_input(pd.DataFrame({"y": y}))
    return session.charged_release(led, "trial-A", release_id, mechanism, prepared,
                                   mechanism.privacy_charge(**prepared.public))


def test_a_retried_release_id_returns_the_committed_release_and_draws_nothing(led, draws):
    first = _charged(led, _LaplaceMean(), "job/1", [0.2, 0.4])
    again = _charged(led, _LaplaceMean(), "job/1", [0.2, 0.4])
    assert not first.reused and again.reused and len(draws) == 1
    assert type(again.release) is Release and again.release == first.release
    assert len(led.history("trial-A")) == 1


def test_a_failure_after_the_charge_is_generic_and_stays_charged(led, draws) -> None:
    class _Broken(_LaplaceMean):
        def _private_release(self, prepared, *, evaluation=False):  # noqa: ANN001, ANN201
            raise ZeroDivisionError(f"secret value {prepared.data[0]}")

    with pytest.raises(ReleaseFailedError, match="failed after its charge") as info:
        _charged(led, _Broken(), "job/2", [0.123])
    assert "0.123" not in str(info.value) and info.value.__cause__ is None
    assert list(led.history("trial-A")["status"]) == ["incomplete"]  # the charge stays
    with led.charging("trial-A"), pytest.raises(ReleaseFailedError, match="budget is spent"):
        _Broken().fit(pd.DataFrame({"y": [0.5]}))  # the notebook path fails the same way
