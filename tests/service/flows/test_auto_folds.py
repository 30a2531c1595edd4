"""``n_folds`` left at its documented default (``auto``, or the key absent) releases end to end:
K is resolved once from the public n and d before the charge and carried through the fits, the
published parameters, the ledger detail and the MLflow params (issue 25 §1)."""

from __future__ import annotations

import json

import pytest
import yaml
from _flowtools import give_cap, write_exp_a

from dpcausal import PrivateATE
from dpcausal.ledger import Ledger

# n = 2000 rows, d = 1 covariate (experiment A): the planner's K
PLANNED_K = PrivateATE(outcome_bounds=(-1, 1)).resolved_n_folds(2000, 1)


def _config(path, exp_a_csv, dataset: str, estimator: dict) -> str:
    cfg = {"name": "auto", "data": {"path": str(exp_a_csv)},
           "columns": {"treatment": "A", "outcome": "Y"}, "estimator": estimator,
           "ledger": {"dataset_id": dataset}}
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.mark.parametrize("estimator", [{"outcome_bounds": [-1, 1]},
                                       {"outcome_bounds": [-1, 1], "n_folds": "auto"}],
                         ids=["absent", "auto"])
def test_a_config_without_n_folds_releases_through_the_cli(estimator, tmp_path, invoke,
                                                           curator_registers):
    from mlflow import MlflowClient

    dataset = f"auto-folds-{'n_folds' in estimator}"
    give_cap(dataset, zeta=10.0)
    data = write_exp_a(tmp_path / "a.csv", 50 + len(estimator))  # each dataset its own data
    config = _config(tmp_path / "c.yaml", data, dataset, estimator)
    assert curator_registers(config) is not None
    res = invoke("run", config, "--no-progress", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # d = 1 with the default degree-2 models (issue 39): 2 features, a floor of 100 rows per
    # fold, K = 2000 // 100 (it was 80 with the plain models' floor of 25 rows)
    assert PLANNED_K == 20 and out["release"]["n_folds"] == PLANNED_K
    assert out["release"]["params"]["n_folds"] == PLANNED_K
    run = MlflowClient().get_run(out["mlflow"]["run_id"])
    assert run.data.params["estimator.n_folds"] == str(PLANNED_K)
    with Ledger() as led:
        [charge] = led.history(dataset).to_dict("records")
    assert charge["status"] == "committed"
    assert charge["detail"]["K"] == PLANNED_K


def test_a_deployment_run_of_a_config_without_n_folds_releases(tmp_path, monkeypatch,
                                                              curator_registers):
    import conf.deployment
    from conf.deployment import ReleaseParameters
    from flows.deployed import release_from_config

    dataset = "auto-folds-deployment"
    give_cap(dataset, zeta=10.0)
    data = write_exp_a(tmp_path / "a.csv", 61)
    config = _config(tmp_path / "c.yaml", data, dataset, {"outcome_bounds": [-1, 1]})
    monkeypatch.setattr(conf.deployment, "REGISTERED_CONFIGS",    # the curator registers it
                        (*conf.deployment.REGISTERED_CONFIGS, config))
    assert curator_registers(config) is not None  # and its dataset in the ledger
    out = release_from_config(settings=ReleaseParameters(config=config))
    assert out["release"]["n_folds"] == PLANNED_K


def _partitioned_config(tmp_path, dataset: str, n: int, parts: int, estimator: dict):
    """A release config of ``parts`` Parquet partitions of n synthetic rows (d = 2) on Dask."""
    from conf.models import load_config
    from dpcausal.ate.partitioned import write_parquet_partitions

    write_parquet_partitions(tmp_path / "parts", n=n, d=2, n_partitions=parts, seed=parts)
    return load_config(None, [], base={
        "name": "parts", "data": {"partitions": str(tmp_path / "parts"), "id_column": "id"},
        "columns": {"treatment": "A", "outcome": "Y"},
        "estimator": estimator, "ledger": {"dataset_id": dataset}})


def test_a_partitioned_config_without_n_folds_releases(tmp_path, curator_registers):
    from flows.release import run_release

    dataset = "auto-folds-partitions"
    give_cap(dataset, zeta=10.0)
    config = _partitioned_config(tmp_path, dataset, 3000, 2, {"outcome_bounds": [-1, 1]})
    assert curator_registers(config) is not None
    out = run_release(config)
    planned = PrivateATE(outcome_bounds=(-1, 1)).resolved_n_folds(3000, 2)
    assert out["release"]["n_folds"] == planned > 20
    with Ledger() as led:
        [charge] = led.history(dataset).to_dict("records")
    assert charge["detail"]["K"] == planned


def test_a_partitioned_release_runs_the_blocks_plan_shows(tmp_path, curator_registers):
    """The planner's K with blocks (n large enough for K > 256): a registered partitioned release
    runs the (K, K', B) that ``dpcausal plan`` shows for the config. On 60ffb67 the subflow
    rebuilt its estimator from the config with the planned K written in and K' left out, so it
    ran the full ensemble of all K folds (a 10^6-row CLI release: 7x the in-memory one)."""
    from flows.release import run_release
    from tasks.planning import partitioned_layout

    dataset = "auto-blocks-partitions"
    give_cap(dataset, zeta=10.0)
    config = _partitioned_config(tmp_path, dataset, 30_000, 3,
                                 {"estimator": "aipw", "outcome_bounds": [-1, 1]})
    shown = partitioned_layout(config)
    assert shown is not None and 2 <= shown["block_folds"] < shown["n_folds"]
    assert curator_registers(config) is not None
    rel = run_release(config)["release"]
    assert (rel["n_folds"], rel["params"]["block_folds"], rel["params"]["n_blocks"]) == (
        shown["n_folds"], shown["block_folds"], shown["n_blocks"])
    with Ledger() as led:   # the ledger records the blocks too
        [charge] = led.history(dataset).to_dict("records")
    assert (charge["detail"]["K"], charge["detail"]["K'"]) == (shown["n_folds"],
                                                                shown["block_folds"])
    # ... and the eta the release used (propensity_clip "auto", issue 39)
    assert charge["detail"]["eta"] == rel["params"]["propensity_clip"] < 0.2
