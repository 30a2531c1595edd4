"""The ensemble's ATT (issue 39 item 7) everywhere a release goes: the release's params and
text, MLflow params, the Prefect artifact, the ledger's detail and charge; and an ``ipw`` ATT
refused when the config is loaded, before anything is read or charged."""

from __future__ import annotations

import json

import pytest
from _flowtools import artifacts_of
from test_sums_release import _config

from demo.trial import write_trial_csv
from dpcausal.ledger import Ledger
from flows.release import run_release

ATT = ("estimator.estimator=aipw", "estimator.design=observational", "estimator.estimand=att")


def test_an_att_release_states_its_estimand_in_every_record(project, tmp_path,
                                                            curator_registers):
    from mlflow import MlflowClient

    dataset = "att-aipw"
    config = _config(curator_registers, write_trial_csv(tmp_path / "t.csv", seed=12), dataset,
                     *ATT)
    out = run_release(config)
    rel = out["release"]
    assert (rel["estimator"], rel["params"]["estimand"]) == ("aipw", "att")
    assert "\nATT " in "\n" + out["text"] and "mean ATT score over the noisy treated share" \
        in out["text"]
    assert rel["privacy"]["zeta"] == pytest.approx(1.0)
    assert rel["privacy"]["detail"]["zeta_count"] == pytest.approx(0.1)

    params = MlflowClient().get_run(out["mlflow"]["run_id"]).data.params
    assert params["estimator.estimand"] == "att"
    flow_run_id = out["release_id"].split("/")[0]
    [table] = [a for a in artifacts_of([flow_run_id]) if a.key == f"release-{dataset}"]
    [row] = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert row["estimand"] == "att"
    with Ledger() as led:
        [charge] = led.history(dataset).to_dict("records")
    detail = charge["detail"] if isinstance(charge["detail"], dict) else json.loads(
        charge["detail"])
    assert detail["estimand"] == "att"
    assert charge["zeta"] == pytest.approx(1.0)


def test_an_ipw_att_is_refused_before_anything_is_charged(project, tmp_path,
                                                          curator_registers):
    from conf.models import ConfigError

    with pytest.raises(ConfigError, match="estimand='att' is not available for estimator='ipw'"):
        _config(curator_registers, write_trial_csv(tmp_path / "t.csv", seed=13), "att-ipw",
                "estimator.estimator=ipw", "estimator.estimand=att")
