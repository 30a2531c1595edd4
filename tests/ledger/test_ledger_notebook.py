"""Notebook helpers: ``with led.charging(dataset): est.fit(...)`` and ``led.fit(...)`` charge
every fit (reserve -> fit -> commit), refuse past the cap and then draw nothing (issue 20)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcausal import Ledger, Mechanism, Prepared, Privacy, Release, noise, session
from dpcausal.accounting import PrivacyCharge
from dpcausal.contract import columns
from dpcausal.ledger import BudgetExceededError, IncompatibleChargeError


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

    def private_release(self, prepared: Prepared, *, evaluation: bool = False) -> Release:
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
