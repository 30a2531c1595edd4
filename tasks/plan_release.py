"""The planner as Prefect tasks (issue 21): the plan of a core release from public facts only,
and its table published as a ``plan-<dataset>`` artifact on the flow-run page."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.artifacts import artifact_key
from tasks.planning import (
    TABLE_COLUMNS,
    best_per_k,
    estimator_lines,
    plan_summary,
    recommendation_lines,
    target_line,
)


@task(name="plan_release", cache_policy=NO_CACHE, persist_result=False)
def plan_release(config: Any, outcome_sd: float | None, compute_budget: float,
                 target_halfwidth: float | None) -> dict[str, Any]:
    """:func:`tasks.planning.plan_summary`: the source's shape and the table; charges nothing."""
    return plan_summary(config, outcome_sd=outcome_sd, compute_budget=compute_budget,
                        target_halfwidth=target_halfwidth)


@task(name="publish_plan", cache_policy=NO_CACHE, persist_result=False, retries=2,
      retry_delay_seconds=1)
def publish_plan(dataset: str, summary: dict[str, Any], outcome_sd: float | None,
                 target_halfwidth: float | None) -> str:
    """A table artifact (one row per K of the ensemble, the narrowest CI setting of each, the
    recommended one marked) described by the estimator comparison and the recommendation in
    words; returns its key."""
    import pandas as pd
    from prefect.artifacts import create_table_artifact

    shown = best_per_k(pd.DataFrame(summary["table"]))
    ensemble = summary["ensemble"]
    runs = summary["recommended"]["estimator"] == ensemble["estimator"]
    rows = [{**{k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items()
                if k in TABLE_COLUMNS},
             "recommended": "<-" if runs and int(row["n_folds"]) == int(ensemble["n_folds"])
             else ""}
            for row in shown.to_dict("records")]
    key = artifact_key("plan", dataset)
    lines = ["Estimators compared:", *estimator_lines(summary), f"The {ensemble['estimator']} "
             "ensemble over K: the table.", *recommendation_lines(summary, outcome_sd)]
    if target_halfwidth is not None:
        lines.append(target_line(summary, target_halfwidth))
    words = " ".join(lines)
    create_table_artifact(rows, key=key, description=(
        f"Plan of a release of dataset {dataset}: n={summary['n']}, d={summary['d']}, "
        f"zeta={summary['zeta']:g}; nothing loaded beyond the shape, nothing charged. {words}"))
    return key
