"""Project-local, quiet, offline defaults for Prefect and MLflow (recipe §2), set before either is
imported. Users can override any of them through the environment."""

from __future__ import annotations

import os
from pathlib import Path

from dpcausal.location import data_dir

PROJECT_ROOT = Path(__file__).resolve().parent.parent


#: Set by a command to the API of the temporary Prefect server it started for itself
#: (``deploy.prefect_api``): that server stops with the command, so no link may point at it.
TEMPORARY_PREFECT_API = "DPCAUSAL_TEMPORARY_PREFECT_API"


def lasting_url(ui_url: str | None, api: str | None) -> str | None:
    """``ui_url``, a flow run's page on the Prefect API ``api``, unless that server is gone
    once the command ends (:data:`TEMPORARY_PREFECT_API`) or there is no page."""
    if not ui_url or (api is not None and os.environ.get(TEMPORARY_PREFECT_API) == api):
        return None
    return ui_url


def default_tracking_uri() -> str:
    """The project's local MLflow store: ``sqlite:///<data>/mlflow.db``."""
    return f"sqlite:///{data_dir() / 'mlflow.db'}"


def apply_defaults() -> None:
    data = data_dir()
    defaults = {
        "DO_NOT_TRACK": "true",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
        "PREFECT_HOME": str(data / "prefect"),
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(data / "prefect" / "results"),
        "MLFLOW_TRACKING_URI": default_tracking_uri(),
        "DPCAUSAL_LEDGER_URL": f"sqlite:///{data / 'ledger.db'}",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    data.mkdir(parents=True, exist_ok=True)
