"""FederatedATE under the release contract (issue 17): Mechanism phases, fit on a DataFrame with
column roles, a Release with the shared names, scikit-learn clone."""

import math

import numpy as np
import pandas as pd
import pytest

from dpcausal.accounting import PrivacyCharge
from dpcausal.contract import Prepared, Release
from dpcausal.federated import FederatedATE, FederatedFacts, FederatedRelease
from dpcausal.federated.rdp import cks_epsilon


def _frame(n=600, seed=0):
    rng = np.random.default_rng(seed)
    t = np.zeros(n, int)
    t[rng.permutation(n)[: n // 3]] = 1
    return pd.DataFrame({"t": t, "y": np.where(t == 1, 0.3, -0.1) + rng.normal(0, 0.2, n),
                         "other": rng.normal(size=n)})


def _fed(**kw):
    args = dict(R=1.0, epsilon=1.0, delta=1e-6, m1=256, m2=256)
    args.update(kw)
    return FederatedATE(**args)


def test_constructor_stores_only():
    """No validation in __init__ (scikit-learn contract): a bad value is refused by the phases."""
    fed = _fed(estimand="ATT", R=-1)
    assert fed.estimand == "ATT" and fed.R == -1
    with pytest.raises(ValueError, match="estimand must be one of"):
        fed.check_input(_frame(), treatment="t", outcome="y")


def test_fit_on_a_dataframe_returns_the_shared_release():
    df = _frame()
    fed = _fed()
    res = fed.fit(df, treatment="t", outcome="y")
    assert isinstance(res, FederatedRelease) and isinstance(res, Release)
    assert fed.release_ is res
    assert res.kind == "federated" and res.to_dict()["kind"] == "federated"
    assert res.n == 600 and (res.n_treated, res.n_control) == (200, 400)
    assert res.level == pytest.approx(0.9) and res.alpha == 0.1
    assert res.se == pytest.approx(math.sqrt(res.sampling_variance + res.variance_dp))
    assert res.ci[0] < res.ate < res.ci[1]
    # quadrature CI: ate +- z se exactly (z_{0.95} = 1.6448536)
    assert res.ci[1] - res.ate == pytest.approx(1.6448536269514722 * res.se, rel=1e-12)
    p = res.privacy
    assert (p.unit, p.mechanism, p.delta) == ("client", "pbm", 1e-6)
    charge = fed.privacy_charge(n_treated=200, n_control=400)
    assert p.epsilon == pytest.approx(cks_epsilon(charge.rdp_epsilons, 1e-6,
                                                  charge.rdp_orders)[0], rel=1e-12)
    table = res.summary()
    assert list(table.columns) == ["estimator", "estimate", "se", "ci_lower", "ci_upper",
                                   "epsilon", "delta"]
    assert table.iloc[0]["estimator"] == "federated"
    assert table.iloc[0]["estimate"] == res.ate and table.iloc[0]["epsilon"] == p.epsilon
    assert "per client" in str(res) and "federated" == res.to_dict()["kind"]
    assert res.noise_share() == pytest.approx(
        res.variance_dp / (res.variance_dp + res.sampling_variance))


def test_arrays_and_dataframe_give_the_same_input():
    df = _frame()
    fed = _fed()
    a = fed.check_input(df, treatment="t", outcome="y")
    b = fed.check_input(df["y"].to_numpy(), df["t"].to_numpy())
    assert isinstance(a, Prepared) and a.public == b.public == {"n_treated": 200,
                                                                "n_control": 400}
    assert isinstance(a.public, FederatedFacts)
    assert fed.privacy_charge(a.public) == fed.privacy_charge(**a.public)
    np.testing.assert_array_equal(a.data[0], b.data[0])
    np.testing.assert_array_equal(a.data[1], b.data[1])


def test_privacy_charge_is_data_free():
    charge = _fed().privacy_charge(n_treated=200, n_control=400)
    assert isinstance(charge, PrivacyCharge) and charge.mechanism == "rdp"
    assert charge == _fed().plan(200, 400).privacy_charge()


@pytest.mark.parametrize("call,exc,match", [
    (lambda f, df: f.fit(df), TypeError, "pass the column roles by name"),
    (lambda f, df: f.fit(df, treatment="t"), TypeError, "pass the column roles by name"),
    (lambda f, df: f.fit(df, treatment="arm", outcome="y"), ValueError,
     "treatment='arm' is not a column of the data"),
    (lambda f, df: f.fit(df["y"].to_numpy(), treatment="t", outcome="y"), TypeError,
     "column roles .* need a DataFrame"),
    (lambda f, df: f.fit(df["y"].to_numpy()), TypeError, "pass the group labels"),
    (lambda f, df: f.fit(df, treatment="other", outcome="y"), ValueError,
     "treated must hold group labels"),
])
def test_role_errors_name_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call(_fed(), _frame())


def test_fit_draws_from_one_os_entropy_generator_once(monkeypatch):
    """One release = one secure_rng() generator for all its randomness; a refusal draws none."""
    import dpcausal.federated.estimator as est
    from dpcausal.noise import secure_rng

    made = []
    monkeypatch.setattr(est, "secure_rng", lambda: made.append(1) or secure_rng())
    _fed().fit(_frame(), treatment="t", outcome="y")
    assert len(made) == 1
    with pytest.raises(ValueError, match="R must be a finite outcome bound"):
        _fed(R=0.0).fit(_frame(), treatment="t", outcome="y")
    assert len(made) == 1


def test_non_finite_outcomes_take_the_public_rule_not_a_refusal():
    """Issue 26 §1: a NaN outcome was refused before the charge (one bit about one client). A
    missing outcome is the centre 0 of [-R, R], an infinite one the bound of its sign; finite
    ones are left to the clients' clipping."""
    x = np.array([0.5, np.nan, np.inf, -np.inf, 2.0, -0.25])
    t = np.array([0, 1, 0, 1, 1, 0])
    prepared = FederatedATE(R=1.5, epsilon=1.0, delta=1e-5).check_input(x, t)
    np.testing.assert_array_equal(prepared.data[0], [0.5, 0.0, 1.5, -1.5, 2.0, -0.25])
    assert prepared.public == {"n_treated": 3, "n_control": 3}
