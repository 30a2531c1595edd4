"""The ``dp_meta_analysis`` flow: read released estimates -> pool (no privacy cost) -> MLflow
run with a forest plot. It only composes tasks (spec dp_ate_ensemble.md §4)."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.runtime import flow_run

from conf.meta import MetaConfig
from tasks.meta import log_meta_analysis, pool_studies, read_released_studies


@flow(name="dp_meta_analysis", persist_result=False, retries=0)
def dp_meta_analysis(config: MetaConfig) -> dict[str, Any]:
    """Pool the studies ``config`` selects; returns ``{"result", "notes", "mlflow"}``."""
    studies, notes = read_released_studies(config)
    result = pool_studies(config, studies)
    tracked = log_meta_analysis(config, result, studies, notes, str(flow_run.id))
    return {"result": result.to_dict(), "notes": notes, "mlflow": tracked,
            "experiment": config.experiment}
