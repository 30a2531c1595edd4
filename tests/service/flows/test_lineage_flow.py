"""MLflow lineage publishes public facts only (issue 26 §4): the dataset input of a release run
says nothing about the values. Old: its digest was the keyed data fingerprint (equal for two
releases of D, different for D': the "did the data change" bit on every run page) and its
schema took dtypes from the values (an integer column became float64 when one record held 2.5).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from dpcausal.ledger import Ledger
from flows.release import run_release


def _write(path, *, odd_record: bool):
    rng = np.random.default_rng(4)
    n = 600
    age = rng.integers(20, 70, n).astype(float)
    a = (rng.random(n) < 0.5).astype(int)
    y = np.clip(0.01 * (age - 45) + 0.2 * a + 0.2 * rng.standard_normal(n), -1, 1)
    frame = pd.DataFrame({"age": age, "A": a, "Y": y})
    if odd_record:
        frame.loc[0, "age"] = 2.5  # one record: the CSV reader now infers float64
    else:
        frame["age"] = frame["age"].astype(int)
    frame.to_csv(path, index=False)


def _dataset_input(out):
    from mlflow import MlflowClient

    [inp] = MlflowClient().get_run(out["mlflow"]["run_id"]).inputs.dataset_inputs
    return inp.dataset


def test_the_dataset_input_holds_no_value_dependent_fact(make_config, project, request):
    """D and its neighbour D' are two versions of one dataset, each registered by its curator
    before its releases (D' under another id would be a near copy the ledger refuses)."""
    runs = {}
    for odd in (False, True):
        path = project.root / f"{request.node.name}-{odd}.csv"
        _write(path, odd_record=odd)
        config = make_config(f"data.path={path}", "columns.covariates=[age]", "estimator.n_folds=8",
                             "folds_per_task=4")
        runs[odd] = [_dataset_input(run_release(config)) for _ in range(2)]
    d, d_prime = runs[False], runs[True]
    digests = [x.digest for x in d + d_prime]
    assert len(set(digests)) == 4  # a random id per release: equal for no two releases
    with Ledger() as led:
        assert all(led.known(None, fingerprint=x) is None for x in digests)
    # the same schema for D and D' (declared, by role), whatever the reader inferred
    assert d[0].schema == d_prime[0].schema
    spec = json.loads(d[0].schema)["mlflow_colspec"]
    assert spec == [{"name": "A", "role": "treatment", "type": "long"},
                    {"name": "Y", "role": "outcome", "type": "double"},
                    {"name": "age", "role": "covariates", "type": "double"}]
    assert d[0].source.endswith(f"{request.node.name}-False.csv")
    assert json.loads(d[0].profile) == json.loads(d[1].profile)  # the same config: its hash
    assert set(json.loads(d[0].profile)) == {"config_digest"}
