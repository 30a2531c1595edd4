"""The release deployments' entry flow ``release_from_config`` (issue 25 §5): the flow run a
deployment run or the UI's Run button opens shows the release table, the MLflow link and a
refusal note itself (not only its ``dp_release`` subflow), and its typed settings reach the
release; a config's relative data path is found from the config's folder."""

from __future__ import annotations

import pytest
import yaml
from _flowtools import charges, give_cap, write_exp_a

from conf.deployment import ReleaseParameters
from flows.deployed import release_from_config
from tasks.ledger_ops import NoCapError


def _artifacts(flow_run_id) -> dict[str, object]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
    return {a.key: a for a in found}


@pytest.fixture
def register(monkeypatch):
    """The curator registers a config with the deployment (conf.deployment.REGISTERED_CONFIGS)."""
    import conf.deployment

    def add(path: str) -> str:
        monkeypatch.setattr(conf.deployment, "REGISTERED_CONFIGS",
                            (*conf.deployment.REGISTERED_CONFIGS, path))
        return path

    return add


def _config(folder, dataset: str) -> str:
    """A config in its own folder whose data path is relative to that folder."""
    folder.mkdir()
    write_exp_a(folder / "a.csv", 71 + len(dataset))
    (folder / "release.yaml").write_text(yaml.safe_dump({
        "name": "deployed", "data": {"path": "a.csv"},
        "columns": {"treatment": "A", "outcome": "Y"},
        "estimator": {"outcome_bounds": [-1, 1], "n_folds": 10, "zeta": 2.0},
        "ledger": {"dataset_id": dataset}}))
    return str(folder / "release.yaml")


def test_the_launched_run_shows_the_release_and_its_settings_apply(tmp_path, register,
                                                                   curator_registers):
    from mlflow import MlflowClient

    dataset = "deployed-typed"
    give_cap(dataset, zeta=10.0)
    config = register(_config(tmp_path / "study", dataset))
    assert curator_registers(config) is not None  # the dataset, in the ledger (issue 32 §1)
    state = release_from_config(settings=ReleaseParameters(
        config=config, zeta=1.0, n_folds=20,
        outcome_lower=-2, outcome_upper=2), return_state=True)
    assert state.is_completed(), state.message
    out = state.result()
    arts = _artifacts(state.state_details.flow_run_id)
    assert {f"release-{dataset}", f"mlflow-{dataset}"} <= set(arts)
    assert out["mlflow"]["url"] in arts[f"mlflow-{dataset}"].data
    assert str(out["release_id"]) in str(arts[f"release-{dataset}"].data)
    params = MlflowClient().get_run(out["mlflow"]["run_id"]).data.params
    assert (params["estimator.zeta"], params["estimator.n_folds"]) == ("1.0", "20")
    assert params["estimator.outcome_bounds"] == "[-2.0, 2.0]"
    assert charges(dataset) == 1


def test_a_refusal_is_noted_on_the_launched_run(tmp_path, register, curator_registers):
    dataset = "deployed-no-cap"
    config = register(_config(tmp_path / "study", dataset))
    assert curator_registers(config) is not None  # registered, but given no cap
    state = release_from_config(settings=ReleaseParameters(config=config), return_state=True)
    assert state.is_failed()
    arts = _artifacts(state.state_details.flow_run_id)
    assert f"refused-{dataset}" in arts
    assert "Nothing was charged" in arts[f"refused-{dataset}"].data
    assert charges(dataset) == 0
    with pytest.raises(NoCapError, match=dataset):
        state.result()


def test_the_analyst_a_run_names_is_charged_and_held_to_their_grant(tmp_path, register,
                                                                     curator_registers):
    """Issue 40: the gateway's ``analyst`` parameter reaches the ledger's reservation: the
    charge names the analyst, and one not admitted to the dataset is refused with nothing
    charged."""
    from dpcausal.ledger import AnalystRefusedError, Ledger

    dataset = "deployed-by-analyst"  # its own data: _config seeds by the id's length
    give_cap(dataset, zeta=10.0)
    config = register(_config(tmp_path / "study", dataset))
    assert curator_registers(config) is not None
    with Ledger() as led:
        led.set_budget("elsewhere", zeta=1.0)
        led.add_analyst("alice", [dataset], zeta=1.0)
        led.add_analyst("eve", ["elsewhere"])
    state = release_from_config(settings=ReleaseParameters(config=config, zeta=0.5,
                                                           n_folds=10),
                                analyst="alice", return_state=True)
    assert state.is_completed(), state.message
    refused = release_from_config(settings=ReleaseParameters(config=config, zeta=0.5,
                                                             n_folds=10),
                                  analyst="eve", return_state=True)
    assert refused.is_failed() and "AnalystRefusedError" in refused.message
    with pytest.raises(AnalystRefusedError, match="not admitted to dataset"):
        refused.result()
    with Ledger() as led:
        assert list(led.history(dataset)["analyst"]) == ["alice"]


def test_a_dataset_is_released_from_its_registered_file_only(tmp_path, curator_registers):
    """Issue 42 friction 1: a run names a registered dataset instead of a config; the config is
    the file its curator registered it from, so a dataset registered without one (from Python)
    fails on its parameters, nothing charged, and a config and a dataset together are refused."""
    with pytest.raises(ValueError, match="give config or dataset, not both"):
        ReleaseParameters(config="conf/release/demo.yaml", dataset="x")
    dataset = "deployed-no-file"
    give_cap(dataset, zeta=10.0)
    config = _config(tmp_path / "study", dataset)
    assert curator_registers(config) is not None  # from Python: no file recorded
    state = release_from_config(settings=ReleaseParameters(dataset=dataset), return_state=True)
    assert state.is_failed() and "registered without a config file" in state.message
    assert curator_registers(config, path=config).facts["config"] == config
    state = release_from_config(settings=ReleaseParameters(dataset=dataset, zeta=1.0),
                                return_state=True)
    assert state.is_completed(), state.message
    assert charges(dataset) == 1
