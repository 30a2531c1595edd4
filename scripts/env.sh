# Quiet, offline, project-local settings for Prefect and MLflow (recipe §2). Sourced by ./dev;
# the CLI sets the same defaults for itself (conf/settings.py), so both routes behave alike.
here="${here:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
export DO_NOT_TRACK=true
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export MLFLOW_DISABLE_TELEMETRY=true
export MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT=true
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false
export PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT=false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=${PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS:-90}
# everything the project writes goes under one data folder, DPCAUSAL_DATA
# (docs/guide/where-things-live.md), Prefect's home and result store included; the same rule as dpcausal.location.data_dir
data="$(realpath -m "${DPCAUSAL_DATA:-$here/data}")"
export PREFECT_HOME=${PREFECT_HOME:-$data/prefect}
export PREFECT_RESULTS_LOCAL_STORAGE_PATH=${PREFECT_RESULTS_LOCAL_STORAGE_PATH:-$data/prefect/results}
export PYTHONDONTWRITEBYTECODE=1
mkdir -p "$PREFECT_HOME"  # Prefect creates its home without parents; a fresh clone has no ./data
