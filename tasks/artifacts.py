"""Prefect artifacts of a release, released values only (issue 21): a ``release-<dataset>``
table (estimate, CI, se, epsilon, delta, zeta, the dataset's cumulative spend and what one more
release could spend; a core release's estimator, design, covariate bounds and stated
assumption; release id) with a link to the MLflow run; a refused release's markdown
saying why and that nothing was charged."""

from __future__ import annotations

import json
import re
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from dpcausal import Release


def artifact_key(prefix: str, dataset: str) -> str:
    """``<prefix>-<dataset>`` in the characters Prefect allows in a key (a-z, 0-9, -)."""
    return f"{prefix}-{re.sub(r'[^a-z0-9-]+', '-', dataset.lower()).strip('-') or 'dataset'}"


def release_table(release: dict[str, Any], release_id: str,
                  spent: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per released estimate (figures rounded for reading)."""
    p = release.get("privacy") or {}
    lo, hi = release.get("ci") or (None, None)
    row: dict[str, Any] = {
        "estimate": release.get("ate"), "ci_lower": lo, "ci_upper": hi, "se": release.get("se"),
        "level": release.get("level"), "epsilon": p.get("epsilon"), "delta": p.get("delta"),
        "zeta": p.get("zeta"), "unit": p.get("unit"), "n": release.get("n"),
        "evaluation": bool(release.get("evaluation"))}
    if spent is not None:
        row.update({"dataset_epsilon_spent": spent.get("epsilon"),
                    "dataset_zeta_spent": spent.get("zeta"),
                    "remaining_next_zeta": spent.get("next_zeta"),
                    "remaining_next_epsilon": spent.get("next_epsilon"),
                    "releases": spent.get("n_charges")})
    params = release.get("params") or {}
    for key in ("estimator", "design", "covariate_bounds", "assumption",  # issue 33 §6
                "assume_linear", "estimand"):                           # issue 39 items 1, 7
        value = release.get(key) or params.get(key)
        if value is not None:
            row[key] = json.dumps(value) if isinstance(value, list) else value
    row["release_id"] = release_id
    return [{k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()}]


@task(name="publish_release", cache_policy=NO_CACHE, persist_result=False, retries=2,
      retry_delay_seconds=1)
def publish_release(dataset: str, release: Release, release_id: str,
                    spent: dict[str, Any] | None, mlflow_url: str) -> str:
    """The release's table artifact and the link to its MLflow run; returns the table's key."""
    from prefect.artifacts import create_link_artifact, create_table_artifact

    key = artifact_key("release", dataset)
    what = "EVALUATION (not private)" if release.evaluation else "private"
    create_table_artifact(release_table(release.to_dict(), release_id, spent), key=key,
                          description=f"{what} release {release_id} of dataset {dataset}")
    create_link_artifact(mlflow_url, link_text="MLflow run of this release",
                         key=artifact_key("mlflow", dataset),
                         description=f"MLflow run of release {release_id}")
    return key


@task(name="publish_refusal", cache_policy=NO_CACHE, persist_result=False, retries=2,
      retry_delay_seconds=1)
def publish_refusal(dataset: str, reason: str, message: str) -> str:
    """A markdown artifact for a refused release (``reason``: budget or bad input)."""
    from prefect.artifacts import create_markdown_artifact

    key = artifact_key("refused", dataset)
    create_markdown_artifact(
        f"## Release refused ({reason})\n\n{message}\n\n"
        "Nothing was charged to the dataset's privacy budget and no noise was drawn.",
        key=key, description=f"refused release of dataset {dataset}")
    return key


@task(name="publish_meta", cache_policy=NO_CACHE, persist_result=False, retries=2,
      retry_delay_seconds=1)
def publish_meta(studies: list[dict[str, Any]], pooled: dict[str, Any], mlflow_url: str) -> str:
    """The meta-analysis's table (each study's published figures and the pooled row) and a link
    to its MLflow run, whose ``forest.png`` is the forest plot."""
    from prefect.artifacts import create_link_artifact, create_table_artifact

    rows = [{k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()}
            for row in [*studies, {"label": "pooled", **pooled}]]
    create_table_artifact(rows, key="meta-analysis",
                          description="pooled released estimates (no privacy cost)")
    create_link_artifact(mlflow_url, link_text="MLflow run with the forest plot (forest.png)",
                         key="meta-analysis-mlflow")
    return "meta-analysis"
