"""A release under ``data.missing: drop`` through the flow: its n is the complete-case count (the
count the policy declares public), K is resolved from that n, and the ledger records the policy."""

from __future__ import annotations

import numpy as np
import pandas as pd
from _flowtools import give_cap, write_exp_a


def test_a_drop_release_publishes_the_complete_case_count_and_plans_k_from_it(project):
    from conf.models import load_config
    from dpcausal.ate.planner import auto_n_folds
    from dpcausal.ledger import Ledger
    from flows.release import run_release

    path = write_exp_a(project.root / "missing-drop.csv", 4242, n=2400)
    frame = pd.read_csv(path)
    rng = np.random.default_rng(1)
    for column, share in (("X1", 0.10), ("A", 0.05), ("Y", 0.05)):
        frame.loc[rng.random(len(frame)) < share, column] = np.nan
    frame.to_csv(path, index=False)
    complete = int(frame.notna().all(axis=1).sum())  # counted here, not by the code under test
    assert complete < len(frame) - 300

    dataset = "missing-drop"
    give_cap(dataset, zeta=5.0)
    config = load_config(None, [], base={
        "name": "drop", "data": {"path": str(path), "missing": "drop"},
        "columns": {"treatment": "A", "outcome": "Y"},
        "estimator": {"estimator": "aipw", "outcome_bounds": [-1.0, 1.0]},
        "ledger": {"dataset_id": dataset}, "mlflow": {"experiment": f"test-{dataset}"}})
    out = run_release(config)
    release = out["release"]
    assert release["n"] == complete
    # K from the complete-case n, not from the file's row count
    assert release["n_folds"] == auto_n_folds(complete, 1, estimator="aipw")
    assert release["n_folds"] != auto_n_folds(len(frame), 1, estimator="aipw")
    assert np.isfinite(release["ate"]) and release["ci"] is not None
    with Ledger() as led:
        [detail] = led.history(dataset)["detail"].tolist()
    assert detail["missing"] == "drop" and detail["K"] == release["n_folds"]
