"""The ``dp_plan`` flow (issues 19 §1 and 21): the planner's table as a ``plan-<dataset>`` table
artifact on the flow-run page, from the data's shape alone, charging nothing."""

from __future__ import annotations

import json

import pytest
from _flowtools import artifacts_of

from dpcausal import PrivateATE
from dpcausal.ate.planner import plan
from dpcausal.ledger import Ledger
from flows.plan import dp_plan


def test_plan_flow_publishes_the_table_and_charges_nothing(make_config):
    config = make_config("estimator.n_folds=auto", "estimator.zeta=1.0", dataset="Plan Me/1")
    out = dp_plan(config, target_halfwidth=0.2)
    assert (out["n"], out["d"], out["zeta"]) == (2000, 1, 1.0)   # experiment A: X1, A, Y
    assert out["artifact"] == "plan-plan-me-1"
    # the recommendation is the library planner's for the same public facts
    p = PrivateATE(estimator="aipw", outcome_bounds=(-1.0, 1.0), zeta=1.0).get_params()
    table = plan(2000, 1, model_kind="quadratic", **{k: p[k] for k in (   # the default models
        "estimator", "outcome_bounds", "propensity_clip", "zeta", "ci", "alpha", "p1",
        "sensitivity")})
    best = table[table["recommended"]].iloc[0]
    assert out["recommended"]["n_folds"] == int(best["n_folds"])
    assert out["recommended"]["halfwidth"] == pytest.approx(float(best["halfwidth"]), rel=1e-12)
    assert out["zeta_for_target"] > 0
    [art] = artifacts_of(key_like="plan-plan-me-1")
    rows = json.loads(art.data) if isinstance(art.data, str) else art.data
    assert sorted(int(r["n_folds"]) for r in rows) == sorted(set(table["n_folds"]))
    [marked] = [r for r in rows if r["recommended"]]
    assert int(marked["n_folds"]) == int(best["n_folds"])
    assert "nothing charged" in art.description
    assert "Recommended: estimator=aipw, K=" in art.description
    assert "Estimators compared:" in art.description   # the config's design: only the ensemble
    with Ledger() as led:
        assert led.history("Plan Me/1").empty
