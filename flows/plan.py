"""The ``dp_plan`` flow: the precision of a core release before anything is spent (issue 19
§1), published on the flow-run page as a ``plan-<dataset>`` table artifact (issue 21). It reads
the data's public shape only and charges nothing. It only composes tasks."""

from __future__ import annotations

from typing import Any

from prefect import flow

from conf.models import ReleaseConfig
from tasks.plan_release import plan_release, publish_plan


@flow(name="dp_plan", persist_result=False, retries=0)
def dp_plan(config: ReleaseConfig, outcome_sd: float | None = None, compute_budget: float = 60.0,
            target_halfwidth: float | None = None) -> dict[str, Any]:
    """Plan ``config``'s release; returns the plan (:func:`tasks.planning.plan_summary`) and the
    artifact's key."""
    summary = plan_release(config, outcome_sd, compute_budget, target_halfwidth)
    key = publish_plan(config.ledger.dataset_id, summary, outcome_sd, target_halfwidth)
    return {**summary, "artifact": key}
