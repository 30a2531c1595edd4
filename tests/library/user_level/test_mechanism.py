"""UserLevelATE under the release contract (issue 17): fit on a DataFrame with roles, the
scikit-learn estimator contract, a data-free charge, a Release with one row per estimate."""

from __future__ import annotations

import json

import pytest

from dpcausal import session
from dpcausal.accounting import PrivacyCharge
from dpcausal.contract import Mechanism, Prepared, Release
from dpcausal.user_level import UserLevelATE, UserLevelFacts, UserLevelOutput

ROLES = dict(treatment="arm", outcome="y", unit="user", stratum="s")


def _mech(**kw):
    return UserLevelATE(**({"bounds": (0.0, 65.0), "epsilon": 1.0} | kw))


def test_params_are_stored_as_given():
    rel = _mech(level=0.9, random_state=4)
    assert isinstance(rel, Mechanism) and rel.unit == "user"
    params = rel.get_params()
    assert params["bounds"] == (0.0, 65.0) and params["epsilon"] == 1.0
    assert params["level"] == 0.9 and params["random_state"] == 4
    assert rel.set_params(epsilon=2.0).epsilon == 2.0
    UserLevelATE(bounds="nonsense", epsilon=-1)          # __init__ stores, never checks


def test_fit_returns_a_release_with_the_shared_names(panel):
    rel = _mech()
    out = rel.fit(panel, **ROLES)
    assert isinstance(out, UserLevelOutput) and isinstance(out, Release)
    assert rel.release_ is out and out.kind == "user_level" and out.evaluation is False
    p = out.privacy
    assert (p.unit, p.mechanism, p.delta) == ("user", "laplace", 0.0)
    assert p.epsilon == p.detail["K"] * 1.0
    assert p.detail["epsilon_parallel"] == p.detail["G1"] and p.detail["epsilon_naive"] == 6.0
    assert out.n == panel["user"].nunique() and out.level == 0.95
    lo, hi = out.ci
    assert lo < out.ate < hi and out.se > 0
    d = json.loads(out.to_json())
    assert d["kind"] == "user_level" and d["privacy"]["unit"] == "user"
    assert len(d["strata"]) == 3 and len(d["cells"]) == 6


def test_fit_is_check_input_charge_and_private_release(panel):
    """The phases one by one give what fit gives (same evaluation seed), and the charge is a
    function of the public facts alone."""
    rel = _mech(random_state=3)
    prepared = rel.check_input(panel, **ROLES)
    assert isinstance(prepared, Prepared)
    assert set(prepared.public) == {"n", "K", "G1", "n_cells", "occupancy_hash"}
    charge = rel.privacy_charge(**prepared.public)
    assert isinstance(prepared.public, UserLevelFacts)
    assert rel.privacy_charge(prepared.public) == charge
    assert isinstance(charge, PrivacyCharge) and charge.mechanism == "laplace"
    assert charge.epsilon == prepared.public["K"] * 1.0
    # data-free: the same public facts typed in by hand give the same charge
    public = {"K": prepared.public["K"], "G1": prepared.public["G1"], "n_cells": 6}
    assert rel.privacy_charge(**public).epsilon == charge.epsilon
    assert _mech(epsilon=0.5).privacy_charge(**public).epsilon == prepared.public["K"] * 0.5
    with pytest.raises(ValueError, match="1 <= K <= G1 <= n_cells"):
        rel.privacy_charge(K=3, G1=2, n_cells=6)
    a = rel._private_release(prepared, evaluation=True)
    b = rel.fit(panel, evaluation=True, **ROLES)
    assert a.ate == b.ate and a.cells["mean"].equals(b.cells["mean"])
    assert b.evaluation and "EVALUATION" in str(b)


def test_fit_matches_the_advanced_plan_release_layer(panel):
    rel = _mech(random_state=8)
    plan = rel.plan(panel, unit="user", cell=["s", "arm"])
    assert plan.public_facts() == rel.check_input(panel, **ROLES).public
    assert plan.privacy_charge() == rel.privacy_charge(**plan.public_facts())
    old = rel._release(panel, "y", plan, evaluation=True)
    new = rel.fit(panel, evaluation=True, **ROLES)
    assert old.ate == new.ate and old.strata.equals(new.strata)


def test_pooled_and_per_stratum_ates_from_the_released_cells(panel):
    """Hand-written reference from the published cells: ATE_s = mu_s1 - mu_s0 and the pooled
    ATE weighted by the public retained counts (spec §7.1)."""
    out = _mech().fit(panel, **ROLES)
    cells = out.cells.set_index(["s", "arm"])
    num = den = 0.0
    for k, row in enumerate(out.strata.itertuples()):
        assert row.s == k
        expected = cells.loc[(k, 1), "mean"] - cells.loc[(k, 0), "mean"]
        assert row.ate == pytest.approx(expected, abs=1e-12)
        w = cells.loc[(k, 1), "c"] + cells.loc[(k, 0), "c"]
        num, den = num + w * expected, den + w
    assert out.ate == pytest.approx(num / den, abs=1e-12)


def test_summary_has_the_pooled_row_and_one_row_per_stratum(panel):
    out = _mech().fit(panel, **ROLES)
    table = out.summary()
    assert list(table.index) == ["ATE", "ATE s=0", "ATE s=1", "ATE s=2"]
    assert table.loc["ATE", "estimate"] == out.ate and table.loc["ATE", "se"] == out.se
    strata = out.strata.set_index("s")
    for k in range(3):
        row = table.loc[f"ATE s={k}"]
        assert row["se"] == strata.loc[k, "se"] and row["ci_lower"] == strata.loc[k, "ci_lower"]
    assert (table["epsilon"] == out.privacy.epsilon).all()
    ci = out.confint()
    assert ci.loc["ATE"].tolist() == list(out.ci)
    assert 0 < out.noise_share() <= 1


def test_arm_only_and_strata_only_releases(panel):
    only_arm = _mech().fit(panel, treatment="arm", outcome="y", unit="user")
    assert list(only_arm.summary().index) == ["ATE"] and len(only_arm.cells) == 2
    no_arm = _mech().fit(panel, outcome="y", unit="user", stratum="s")
    assert no_arm.ate is None and no_arm.ci is None and no_arm.strata is None
    assert no_arm.summary().empty and len(no_arm.cells) == 3


@pytest.mark.parametrize("roles,match", [
    (ROLES | {"outcome": "score"}, r"outcome='score' is not a column"),
    (ROLES | {"unit": "patient"}, r"unit='patient' is not a column"),
    ({"outcome": "y", "unit": "user"}, "treatment="),
    (ROLES | {"outcome": "s"}, "cannot also be"),
])
def test_check_input_refusals_name_the_role(panel, roles, match, noise_source):
    with pytest.raises(ValueError, match=match):
        _mech().fit(panel, **roles)
    assert noise_source.draws == 0


def test_fits_charge_a_ledger_k_eps_per_user(panel, tmp_path):
    from dpcausal.ledger import Ledger

    with Ledger(f"sqlite:///{tmp_path / 'l.db'}", create=True) as led:
        led.set_budget("panel", epsilon=100.0, delta=1e-5, unit="user")  # occupancy public
        previous = session.use_ledger(led, "panel")
        try:
            out = _mech(epsilon=0.5).fit(panel, **ROLES)
        finally:
            session.use_accountant(previous)
        spent = led.spent("panel")
    # one charge of K * eps (the ledger reports it at its delta: the PLD gives a hair less)
    assert spent.n_charges == 1 and spent.epsilon == pytest.approx(out.privacy.epsilon, rel=1e-4)
    assert spent.epsilon <= out.privacy.epsilon
    assert out.privacy.epsilon == out.privacy.detail["K"] * 0.5
