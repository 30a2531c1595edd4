"""A release config with a partitioned source (``data.partitions``, issue 19 §3) through
``dpcausal run`` and :func:`flows.release.run_release`: the dp_release contract (result, MLflow
run, Prefect artifact, ledger charge with its run URL, exit codes) on the Dask path, and the
evaluation equal to the in-memory estimator on the same rows and folds."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from _flowtools import give_cap

N, D, PARTS, K = 3000, 2, 3, 12
ESTIMATOR = {"estimator": "aipw", "n_folds": K, "outcome_bounds": [-1.0, 1.0], "zeta": 1.0,
             "propensity_clip": 0.1, "ci_share": 0.1}


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    from dpcausal.partitioned import write_parquet_partitions

    path = tmp_path_factory.mktemp("run-partitions")
    write_parquet_partitions(path, n=N, d=D, n_partitions=PARTS, seed=21)
    return path


def _raw(parts, dataset: str, **top):
    return {"name": "parts", "data": {"partitions": str(parts), "id_column": "id"},
            "columns": {"treatment": "A", "outcome": "Y"}, "runner": {"kind": "dask"},
            "estimator": ESTIMATOR, "ledger": {"dataset_id": dataset},
            "mlflow": {"experiment": f"test-{dataset}"}, **top}


def test_dpcausal_run_releases_partitions_with_the_release_contract(parts, tmp_path, invoke):
    from mlflow import MlflowClient

    from dpcausal.ledger import Ledger

    dataset = "parts-cli"
    give_cap(dataset, zeta=1.5)
    path = tmp_path / "parts.yaml"
    path.write_text(yaml.safe_dump(_raw(parts, dataset)))
    res = invoke("run", str(path), "--no-progress", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) == {"kind", "release", "text", "release_id", "reused", "spent", "mlflow",
                        "experiment", "artifact"}
    rel = out["release"]
    assert (out["kind"], out["reused"], out["artifact"]) == ("ate", False, "release-parts-cli")
    assert rel["n"] == N and rel["n_folds"] == K and rel["nonprivate"] is None
    assert rel["params"]["folds"] == "keyed_hash(id)" and rel["params"]["partitions"] == PARTS
    assert rel["privacy"]["zeta"] == 1.0 and out["spent"]["n_charges"] == 1

    run = MlflowClient().get_run(out["mlflow"]["run_id"])
    flow_run_id = out["release_id"].split("/")[0]
    assert run.data.tags["prefect.flow_run_url"].endswith(flow_run_id)
    assert run.data.params["data.partitions"] == str(parts)
    m = run.data.metrics
    assert m["ate"] == rel["ate"] and (m["ci_low"], m["ci_high"]) == tuple(rel["ci"])
    assert m["dataset_zeta_spent"] == 1.0
    assert not any(k.startswith("nonprivate") for k in m)
    [inp] = run.inputs.dataset_inputs
    assert inp.dataset.source.startswith(f"partitions {parts}")
    with Ledger() as led:
        [charge] = led.history(dataset).to_dict("records")
    assert charge["status"] == "committed" and charge["run_url"] == out["mlflow"]["url"]

    # zeta-GDP composes in quadrature: sqrt(1^2 + 1.2^2) > 1.5, the cap
    again = invoke("run", str(path), "--no-progress", "--set", "estimator.zeta=1.2")
    assert again.exit_code == 3, again.output
    assert "budget exhausted" in again.stderr


def test_bad_partitioned_input_exits_2_before_any_charge(parts, tmp_path, invoke):
    from dpcausal.ledger import Ledger

    dataset = "parts-bad"
    give_cap(dataset, zeta=1.5)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_raw(parts, dataset)))
    res = invoke("run", str(path), "--no-progress", "--set", "columns.treatment=T")
    assert res.exit_code == 2, res.output
    assert "columns ['T'] are not in the partitions" in res.stderr
    with Ledger() as led:
        assert led.history(dataset).empty


def test_evaluation_equals_the_in_memory_estimator_on_the_same_folds(parts, project):
    from conf.models import load_config
    from dpcausal import PrivateATE
    from dpcausal.partitioned import allocate_folds, assign_folds
    from flows.release import run_release
    from store import fold_key

    config = load_config(None, ["mode=evaluation", "noise_seed=3", "data.fold_key=curator"],
                         base=_raw(parts, "parts-eval"))
    out = run_release(config)
    assert set(out) >= {"release", "text", "mlflow", "artifact"} and out["spent"] is None
    frames = [pd.read_parquet(f) for f in sorted(parts.glob("*.parquet"))]
    folds = allocate_folds([len(f) for f in frames], K)
    fold_ids = np.concatenate([assign_folds(f["id"].to_numpy(), fold_key(), r)
                               for f, r in zip(frames, folds, strict=True)])
    whole = pd.concat(frames, ignore_index=True)
    ref = PrivateATE(**{**ESTIMATOR, "outcome_bounds": (-1.0, 1.0)}, folds=fold_ids,
                     noise_seed=3).fit(whole[["x1", "x2"]].to_numpy(), whole["A"].to_numpy(),
                                       whole["Y"].to_numpy(), evaluation=True)
    rel = out["release"]
    assert rel["params"]["folds"] == "keyed_hash(id)" and rel["evaluation"] is True
    assert rel["nonprivate"]["ate"] == pytest.approx(ref.nonprivate["ate"], rel=1e-9)
    assert rel["nonprivate"]["variance"] == pytest.approx(ref.nonprivate["variance"], rel=1e-9)
    assert rel["ate"] == pytest.approx(ref.ate, rel=1e-9)  # the same seeded noise on top
