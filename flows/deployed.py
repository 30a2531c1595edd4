"""``release_from_config``: the deployment entry point that takes a config file. A deployment's
parameters are JSON, so it takes a config path and a dict of dotted overrides, loads the config
exactly as ``dpcausal run CONFIG --set k=v`` does, and runs :func:`flows.release.dp_release`.
No estimation here."""

from __future__ import annotations

import json
from typing import Any

from prefect import flow

from conf.kinds import load_any
from conf.settings import PROJECT_ROOT, data_dir
from flows.release import dp_release


def _override_items(overrides: dict[str, Any] | None) -> list[str]:
    """``{"estimator.zeta": 1.0}`` -> ``["estimator.zeta=1.0"]`` (values re-read as YAML/JSON)."""
    return [f"{key}={json.dumps(value)}" for key, value in (overrides or {}).items()]


@flow(name="release_from_config", persist_result=False, retries=0)
def release_from_config(config_path: str = "conf/release/demo.yaml",
                        overrides: dict[str, Any] | None = None,
                        refresh_demo_data: bool = False) -> dict[str, Any]:
    """Load ``config_path`` (relative to the project root) with ``overrides`` and release.

    ``refresh_demo_data`` first re-writes the demo dataset of the config's kind under the data
    folder, points the config at it and gives the demo dataset its cap if it has none (the demo's
    own data only): the nightly deployment's stand-in for an upstream job that refreshes a
    dataset before its scheduled release. A refused release ends this run Failed with the
    ledger's message, recorded in MLflow and as an artifact.
    """
    from demo import DEMO, write_demo
    from tasks.ledger_ops import set_initial_budget

    items = _override_items(overrides)
    path = PROJECT_ROOT / config_path
    if refresh_demo_data:
        config = load_any(path, items)
        data = write_demo(config.kind, data_dir() / "demo")
        if not config.evaluation:  # a cap would (rightly) refuse an evaluation of the data
            set_initial_budget(config.ledger.dataset_id, **DEMO[config.kind][1])
        items = [f"data.path={json.dumps(str(data))}", *items]
    return dp_release(config=load_any(path, items))
