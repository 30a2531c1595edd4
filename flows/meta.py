"""The ``dp_meta_analysis`` flow: read released estimates -> pool (no privacy cost) -> MLflow
run with a forest plot -> Prefect table and link artifacts. It only composes tasks (spec
dp_ate_ensemble.md §4). ``dpcausal meta`` runs it in the curator's process; the deployment runs
:func:`meta_analysis_of_releases`, which takes release ids only (issue 40 item 7)."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.runtime import flow_run

from conf.meta import MetaConfig, MetaParameters
from tasks.artifacts import publish_meta
from tasks.meta import log_meta_analysis, pool_studies, read_released_studies
from tasks.tracking import run_url


@flow(name="dp_meta_analysis", persist_result=False, retries=0)
def dp_meta_analysis(config: MetaConfig) -> dict[str, Any]:
    """Pool the studies ``config`` selects; returns ``{"result", "text" (the result's printed
    form, :class:`dpcausal.meta.MetaResult`'s own), "notes", "mlflow", "experiment"}``."""
    studies, notes = read_released_studies(config)
    result = pool_studies(config, studies)
    tracked = log_meta_analysis(config, result, studies, notes, str(flow_run.id))
    out = result.to_dict()
    pooled = {k: out.get(k) for k in ("ate", "se") if k in out}
    if out.get("ci"):
        pooled["ci_low"], pooled["ci_high"] = out["ci"]
    table = [{k: v for k, v in row.items() if k in ("label", "ate", "se", "ci_low", "ci_high",
                                                     "weight")}
             for row in result.studies.to_dict(orient="records")]
    publish_meta(table, pooled, run_url(tracked["tracking_uri"], tracked["experiment_id"],
                                        tracked["run_id"]))
    return {"result": out, "text": str(result), "notes": notes, "mlflow": tracked,
            "experiment": config.experiment}


@flow(name="dp_meta_analysis_of_releases", persist_result=False, retries=0)
def meta_analysis_of_releases(settings: MetaParameters) -> dict[str, Any]:
    """The deployed meta-analysis: the committed releases ``settings.release_ids`` read from the
    curator's ledger, pooled, logged to the curator's MLflow (:func:`dp_meta_analysis`). No
    path, query or server is a parameter."""
    return dp_meta_analysis(config=settings.meta_config())
