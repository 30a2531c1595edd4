"""Every config shipped under ``conf/release/`` releases end to end through ``dpcausal run``, on
synthetic data of its schema with missing values where a user's data have them, under a temporary
ledger cap: a shipped config that leaves a documented default, such as ``n_folds`` or the
missing-value policy, must run as shipped on a user's first data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from _flowtools import charges, give_cap

from conf.kinds import KINDS
from demo import demo_cap, write_demo
from demo.trial import write_trial_csv

SHIPPED = sorted((Path(__file__).parents[3] / "conf" / "release").glob("*.yaml"))
KIND_OF = {Path(kind.example).name: name for name, kind in KINDS.items()}


def _trial_parquet(path: Path, n: int = 1500) -> Path:
    """A trial as ``parquet_xgboost.yaml`` reads it: ``treated``, ``outcome`` in [0, 1] and every
    other column a covariate."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(n, 3))
    treated = rng.binomial(1, 1 / (1 + np.exp(-x[:, 0])))
    outcome = rng.binomial(1, 1 / (1 + np.exp(-(0.3 * treated + x[:, 1]))))
    frame = pd.DataFrame({"age": x[:, 0], "score": x[:, 1], "site": x[:, 2],
                          "treated": treated, "outcome": outcome.astype(float)})
    frame.to_parquet(path, index=False)
    return path


def _with_missing_values(path: Path, columns: list[str]) -> Path:
    """The table at ``path`` with about 3% of each of ``columns`` blanked (the private values:
    outcomes and covariates), written back in its own format. Public columns (treatment, cluster,
    cell keys) stay complete: a mechanism may refuse blanks there before its charge, since those
    values are public."""
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    rng = np.random.default_rng(11)
    for column in columns:
        frame[column] = frame[column].astype(float).mask(rng.random(len(frame)) < 0.03)
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)
    return path


def _private_columns(raw: dict, data: Path) -> list[str]:
    """The columns a config treats as private values: its outcome (``value`` for user-level
    data) and, for the core release, its covariates."""
    columns = raw["columns"]
    private = [columns.get("outcome") or columns["value"]]
    if raw.get("kind", "ate") == "ate":
        header = (pd.read_parquet(data) if data.suffix == ".parquet" else pd.read_csv(data)).columns
        roles = {columns["treatment"], columns["outcome"]}
        private += columns.get("covariates") or [c for c in header if c not in roles]
    return private


def test_every_shipped_config_is_covered():
    assert {p.name for p in SHIPPED} == set(KIND_OF) | {"parquet_xgboost.yaml", "trial_dim.yaml"}


@pytest.mark.parametrize("config", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_a_shipped_config_releases_through_the_cli(config, tmp_path, invoke, curator_registers):
    raw = yaml.safe_load(config.read_text())
    dataset = f"shipped-{config.stem}"
    if config.name in KIND_OF:
        kind = KIND_OF[config.name]
        # data of the demo's schema but not the demo's own: those may already be budgeted as the
        # demo's dataset in this session's ledger, and the fingerprint guard refuses them
        data = write_demo(kind, tmp_path, n=2000, seed=104729)
        give_cap(dataset, **demo_cap(kind))
    elif config.name == "trial_dim.yaml":   # a randomized trial, as `python -m demo.trial` writes
        data = write_trial_csv(tmp_path / "trial.csv", seed=104729)
        give_cap(dataset, zeta=raw["ledger"]["budget"])
    else:
        data = _trial_parquet(tmp_path / "trial.parquet")
        give_cap(dataset, zeta=raw["ledger"]["budget"])
    _with_missing_values(data, _private_columns(raw, data))
    # the curator registers the data (issue 32 §1); the run then only asks about them
    curator_registers(config, [f"data.path={data}", f"ledger.dataset_id={dataset}"])
    res = invoke("run", str(config), "--no-progress", "--json", "--set", f"data.path={data}",
                 "--set", f"ledger.dataset_id={dataset}")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["kind"] == raw.get("kind", "ate") and out["release"]["kind"]
    assert charges(dataset) == 1
