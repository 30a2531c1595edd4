"""The Release base and the session accountant (issue 17's contract, issue 20's accountant)."""

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from dpcausal import session
from dpcausal.accounting import PrivacyCharge
from dpcausal.contract import Mechanism, Prepared, Privacy, PublicFacts, Release, columns


def _release(**kw):
    base = dict(ate=1.0, ci=(0.5, 1.5), se=0.25, level=0.95, n=100,
                privacy=Privacy(epsilon=2.0, delta=1e-5, unit="row", mechanism="gaussian"))
    return Release(**{**base, **kw})


def test_summary_confint_and_dict():
    r = _release()
    table = r.summary()
    assert list(table.columns) == ["estimator", "estimate", "se", "ci_lower", "ci_upper",
                                   "epsilon", "delta"]
    assert table.loc["ATE", "estimator"] == "release"   # the kind, unless a mechanism names it
    assert table.loc["ATE", "ci_upper"] == 1.5 and table.loc["ATE", "epsilon"] == 2.0
    ci = r.confint()
    assert list(ci.columns) == ["2.5 %", "97.5 %"] and ci.iloc[0].tolist() == [0.5, 1.5]
    ci90 = r.confint(level=0.9)
    assert ci90.iloc[0, 1] == pytest.approx(1.0 + 1.6448536269514722 * 0.25)
    d = json.loads(r.to_json())
    assert d["kind"] == "release" and d["privacy"]["unit"] == "row" and d["ci"] == [0.5, 1.5]
    assert "covers both the sampling error and the privacy noise" in str(r)
    assert "<table" in r._repr_html_()


@pytest.mark.parametrize("bad", [dict(ate=math.nan), dict(ci=(1.1, 2.0)), dict(se=-1.0),
                                 dict(level=1.0)])
def test_invariants(bad):
    with pytest.raises(AssertionError, match="bug"):
        _release(**bad)


def test_privacy_unit_is_checked():
    with pytest.raises(ValueError, match="unit must be one of"):
        Privacy(epsilon=1.0, delta=0.0, unit="household", mechanism="x")


@dataclasses.dataclass(frozen=True, eq=False)
class _MeanFacts(PublicFacts):
    n: int


class _Mean(Mechanism[_MeanFacts]):
    """A toy mechanism: the mean of y with a fixed 'noise' (contract plumbing only)."""

    def __init__(self, epsilon=1.0):
        self.epsilon = epsilon

    def check_input(self, data, *, outcome="y"):
        y = columns(data, outcome=outcome)["outcome"].to_numpy(float)
        return Prepared(public=_MeanFacts(y.size), data=y)

    def privacy_charge(self, public, /):
        return PrivacyCharge("pure", epsilon=self.epsilon)

    def _private_release(self, prepared, *, evaluation=False):
        return _release(ate=float(np.mean(prepared.data)), ci=None, se=None, n=prepared.public.n)


def test_a_mechanism_must_supply_its_three_phases():
    class NoCharge(Mechanism):
        def check_input(self, data):
            return Prepared(public=_MeanFacts(1), data=data)

        def _private_release(self, prepared, *, evaluation=False):
            return _release()

    with pytest.raises(TypeError, match="abstract method.*privacy_charge"):
        NoCharge()


def test_public_facts_are_frozen_and_read_as_the_dict_they_replace():
    facts = _MeanFacts(3)
    assert facts == {"n": 3} and dict(facts) == {"n": 3} and facts["n"] == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.n = 4
    with pytest.raises(KeyError):
        facts["d"]


def test_a_mechanism_that_still_returns_a_dict_of_facts_is_charged_with_a_warning():
    class OldStyle(_Mean):
        def check_input(self, data, *, outcome="y"):
            y = columns(data, outcome=outcome)["outcome"].to_numpy(float)
            return Prepared(public={"n": y.size}, data=y)

        def privacy_charge(self, n):  # the keyword form of the contract before typed facts
            return PrivacyCharge("pure", epsilon=self.epsilon * n)

    prepared = OldStyle(epsilon=0.5).check_input(pd.DataFrame({"y": [1.0, 2.0]}))
    with pytest.warns(DeprecationWarning, match="frozen dataclass extending"):
        assert OldStyle(epsilon=0.5).charge_of(prepared).epsilon == 1.0


def test_no_override_is_silenced_in_the_library():
    from pathlib import Path

    import dpcausal

    root = Path(dpcausal.__file__).parent
    silenced = [str(p.relative_to(root)) for p in root.rglob("*.py")
                if "type: ignore[override]" in p.read_text()]
    assert silenced == []


def test_second_fit_on_the_same_data_warns_with_the_composed_spend():
    session.reset()
    df = pd.DataFrame({"y": [1.0, 2.0, 3.0]})
    _Mean().fit(df)
    with pytest.warns(session.RepeatedReleaseWarning, match="release 2 of the same data"):
        _Mean().fit(df)
    _Mean().fit(pd.DataFrame({"y": [5.0]}))  # other data: no warning (warnings are errors here)


def test_fits_charge_a_ledger_when_asked(tmp_path):
    from dpcausal.ledger import Ledger

    with Ledger(f"sqlite:///{tmp_path / 'l.db'}", create=True) as led:
        led.set_budget("ds", epsilon=2.5, delta=1e-5)
        previous = session.use_ledger(led, "ds")
        try:
            df = pd.DataFrame({"y": [1.0, 2.0]})
            _Mean().fit(df)
            _Mean().fit(df)
            with pytest.raises(Exception, match="budget|exceed"):
                _Mean().fit(df)
            assert led.spent("ds").n_charges == 2
        finally:
            session.use_accountant(previous)
