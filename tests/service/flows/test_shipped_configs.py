"""Every config shipped under ``conf/release/`` releases end to end through ``dpcausal run``, on
synthetic data of its schema, under a temporary ledger cap (issue 25 §1: a shipped config that
leaves a documented default, such as ``n_folds``, must run as shipped)."""

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


def test_every_shipped_config_is_covered():
    assert {p.name for p in SHIPPED} == set(KIND_OF) | {"parquet_xgboost.yaml"}


@pytest.mark.parametrize("config", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_a_shipped_config_releases_through_the_cli(config, tmp_path, invoke):
    raw = yaml.safe_load(config.read_text())
    dataset = f"shipped-{config.stem}"
    if config.name in KIND_OF:
        kind = KIND_OF[config.name]
        # data of the demo's schema but not the demo's own: those may already be budgeted as the
        # demo's dataset in this session's ledger, and the fingerprint guard refuses them
        data = write_demo(kind, tmp_path, n=2000, seed=104729)
        give_cap(dataset, **demo_cap(kind))
    else:
        data = _trial_parquet(tmp_path / "trial.parquet")
        give_cap(dataset, zeta=raw["ledger"]["budget"])
    res = invoke("run", str(config), "--no-progress", "--json", "--set", f"data.path={data}",
                 "--set", f"ledger.dataset_id={dataset}",
                 "--set", f"mlflow.experiment=test-{dataset}")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["kind"] == raw.get("kind", "ate") and out["release"]["kind"]
    assert charges(dataset) == 1
