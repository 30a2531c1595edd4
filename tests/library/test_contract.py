"""The Release base and the session accountant (issue 17's contract, issue 20's accountant)."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from dpcausal import session
from dpcausal.accounting import PrivacyCharge
from dpcausal.contract import Mechanism, Prepared, Privacy, Release, columns


def _release(**kw):
    base = dict(ate=1.0, ci=(0.5, 1.5), se=0.25, level=0.95, n=100,
                privacy=Privacy(epsilon=2.0, delta=1e-5, unit="row", mechanism="gaussian"))
    return Release(**{**base, **kw})


def test_summary_confint_and_dict():
    r = _release()
    table = r.summary()
    assert list(table.columns) == ["estimate", "se", "ci_lower", "ci_upper", "epsilon", "delta"]
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


class _Mean(Mechanism):
    """A toy mechanism: the mean of y with a fixed 'noise' (contract plumbing only)."""

    def __init__(self, epsilon=1.0):
        self.epsilon = epsilon

    def check_input(self, data, *, outcome="y"):
        y = columns(data, outcome=outcome)["outcome"].to_numpy(float)
        return Prepared(public={"n": y.size}, data=y)

    def privacy_charge(self, n):
        return PrivacyCharge("pure", epsilon=self.epsilon)

    def _private_release(self, prepared, *, evaluation=False):
        return _release(ate=float(np.mean(prepared.data)), ci=None, se=None, n=prepared.public["n"])


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
