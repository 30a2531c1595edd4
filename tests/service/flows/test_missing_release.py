"""A release under ``data.missing: drop`` through the flow: its n is every row, K is resolved from
that n, the complete-case count is noisy and charged, and the ledger records the policy
(issue 32 item 5)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from _flowtools import give_cap, write_exp_a


def test_a_drop_release_keeps_n_and_k_of_all_rows_and_charges_the_count(project,
                                                                        curator_registers):
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
    registration = curator_registers(config)   # the policy is the curator's (issue 32 §1)
    assert registration.missing["missing"] == "drop" and registration.n == len(frame)
    out = run_release(config)
    release = out["release"]
    assert release["n"] == len(frame)
    # K from the file's row count, never from the complete-case count
    # (the config's models are the default degree-2 pair: the planner's "quadratic" kind)
    kind = {"estimator": "aipw", "model_kind": "quadratic"}
    assert release["n_folds"] == auto_n_folds(len(frame), 1, **kind)
    assert release["n_folds"] != auto_n_folds(complete, 1, **kind)
    assert np.isfinite(release["ate"]) and release["ci"] is not None
    assert release["privacy"]["detail"]["zeta_count"] > 0
    with Ledger() as led:
        [detail] = led.history(dataset)["detail"].tolist()
    assert detail["missing"] == "drop" and detail["K"] == release["n_folds"]
