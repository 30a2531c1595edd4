"""A release with a pre-release of the planning facts through the dp_release flow (issue 39
item 5): the full zeta reserved once, the pre-release, auto's choice and the release inside the
one charged task, and the learned facts, their noise and the chosen estimator in the release's
JSON and text, the MLflow run's params and the ledger."""

from __future__ import annotations

import json

import pytest
from _flowtools import give_cap, params_disagreeing

from demo.trial import write_trial_csv
from dpcausal.ledger import Ledger
from flows.release import run_release


def test_a_pre_released_choice_is_charged_once_and_recorded_everywhere(
        project, tmp_path, curator_registers):
    from mlflow import MlflowClient

    from conf.models import load_config

    dataset = "prerelease-trial"
    base = {"name": "pre", "data": {"path": str(write_trial_csv(tmp_path / "t.csv", seed=14))},
            "columns": {"treatment": "treated", "outcome": "outcome",
                        "covariates": ["age", "score", "site"]},
            "estimator": {"estimator": "auto", "design": "randomized", "prerelease": 0.1,
                          "covariate_bounds": {"age": [18, 80], "score": [0, 10],
                                               "site": [0, 1]},
                          "outcome_bounds": [0.0, 1.0], "zeta": 1.0},
            "ledger": {"dataset_id": dataset}}
    config = load_config(None, [], base=base)
    give_cap(dataset, zeta=10.0)
    assert curator_registers(config) is not None
    out = run_release(config)
    rel = out["release"]
    p = rel["params"]
    assert rel["privacy"]["zeta"] == pytest.approx(1.0, rel=1e-12)
    assert (p["prerelease"], p["facts_source"]) == (
        0.1, "treated_share:learned,outcome_sd:learned")
    assert p["treated_share"] == p["learned_treated_share"]
    assert 0.3 < p["learned_treated_share"] < 0.7      # a fair coin's trial
    assert rel["estimator"] in ("dim", "lin", "aipw") and "pre-release" in out["text"]

    run = MlflowClient().get_run(out["mlflow"]["run_id"])
    params = run.data.params
    assert params["estimator.estimator"] == rel["estimator"]      # the choice, not "auto"
    assert params["estimator.prerelease"] == "0.1"
    assert float(params["estimator.learned_treated_share"]) == p["learned_treated_share"]
    assert float(params["estimator.prerelease_sigma"]) == pytest.approx(10 ** 0.5 * 6 ** 0.5,
                                                                         rel=1e-5)
    assert params_disagreeing(params, rel) == []

    with Ledger() as led:
        [charge] = led.history(dataset).to_dict("records")
        _, committed = led.committed(out["release_id"])
    assert charge["status"] == "committed" and charge["zeta"] == pytest.approx(1.0, rel=1e-12)
    assert (charge["detail"]["prerelease"], charge["detail"]["estimator"]) == (0.1, "auto")
    chosen = charge["detail"]["chosen"]     # recorded when the release committed
    assert (chosen["estimator"], chosen["learned_treated_share"]) == (
        rel["estimator"], p["learned_treated_share"])
    assert json.loads(committed)["params"]["learned_treated_share"] == p[
        "learned_treated_share"]
