"""``release_from_config``: the deployment entry point of every release kind. A deployment's
parameters are JSON, so it takes a config file and a dict of dotted overrides, loads the config
exactly as ``dpcausal run CONFIG --set k=v`` does and calls the existing flow of that kind with the
task runner the config asks for (threads, or Dask at ``runner.address``). No estimation here."""

from __future__ import annotations

import importlib
import json
from typing import Any

from prefect import flow

from conf.settings import PROJECT_ROOT, data_dir


def _override_items(overrides: dict[str, Any] | None) -> list[str]:
    """``{"estimator.zeta": 1.0}`` -> ``["estimator.zeta=1.0"]`` (values re-read as YAML/JSON)."""
    return [f"{key}={json.dumps(value)}" for key, value in (overrides or {}).items()]


@flow(name="release_from_config", persist_result=False, retries=0)
def release_from_config(config_path: str = "conf/release/demo.yaml",
                        overrides: dict[str, Any] | None = None,
                        refresh_demo_data: bool = False) -> dict[str, Any]:
    """Load ``config_path`` (relative to the project root) with ``overrides`` and run its release.

    ``refresh_demo_data`` first re-writes the core demo dataset (experiment A) under the data
    folder and points the config at it: the nightly deployment's stand-in for an upstream job that
    refreshes a dataset before its scheduled release. A refused release (budget exhausted) ends
    this run Failed with the ledger's message; the release flow has already recorded it in MLflow.
    """
    from conf.kinds import load_any

    items = _override_items(overrides)
    if refresh_demo_data:
        from cli.run_cmd import write_demo_data

        path = write_demo_data(data_dir() / "demo" / "experiment_a.csv", 5000)
        items = [f"data.path={json.dumps(str(path))}", *items]
    path = PROJECT_ROOT / config_path
    config = load_any(path, items)
    if config.kind == "ate":
        from flows.release import run_release

        return run_release(config)
    module = importlib.import_module(f"flows.{config.kind}_release")
    return getattr(module, f"run_{config.kind}_from_config")(config)
