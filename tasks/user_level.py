"""Tasks of the user-level release flow: load, plan (occupancy only, cached, free), release
(ledger, noise once), MLflow.

``load_user_level_data`` and ``release_user_level`` see the values: never persisted, cached or
retried. The plan reads only the occupancy (records per unit and cell), which the curator declares
public (spec user_level_clip.md §7.2-1); it is cached on the data fingerprint and the mechanism's
settings. What is logged: public parameters, the plan's public metrics (§7.5), the released cell
statistics and derived ATEs, the privacy loss with and without Clip-User; never a unit id.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from conf.user_level import UserLevelConfig
from dpcausal.user_level import UserLevelPlan, UserLevelRelease
from tasks import ledger_ops
from tasks.data import read_frame
from tasks.model_store import digest, fingerprint
from tasks.tracking import as_metrics, flatten_params, release_run

_PRIVATE_TASK = dict(persist_result=False, cache_policy=NO_CACHE, retries=0)
CELLS_ARTIFACT, ATE_ARTIFACT, META_ARTIFACT = "cells.csv", "ate.csv", "release.json"


def build_release(config: UserLevelConfig, rng: np.random.Generator | None = None
                  ) -> UserLevelRelease:
    return UserLevelRelease(**config.mechanism.library_kwargs(), random_state=rng)


def _columns(config: UserLevelConfig) -> list[str]:
    c = config.columns
    return [c.unit, *c.cell, c.value] + [x for x in (c.order, c.record) if x is not None]


@task(name="load_user_level_data", **_PRIVATE_TASK)
def load_user_level_data(config: UserLevelConfig) -> tuple[pd.DataFrame, str]:
    """The configured columns (others dropped) and a keyed fingerprint of them; values are
    checked against the public bounds here, before anything is planned or charged."""
    frame = read_frame(config.data)
    missing = [c for c in _columns(config) if c not in frame.columns]
    if missing:
        raise ValueError(f"columns {missing} named in the config are not in the data (columns: "
                         f"{list(frame.columns)}); fix the columns block of the config")
    frame = frame[_columns(config)]
    if len(frame) == 0:
        raise ValueError("the data have no rows; nothing to release")
    y = frame[config.columns.value]
    lo, hi = config.mechanism.bounds
    if not pd.api.types.is_numeric_dtype(y) or bool(((y < lo) | (y > hi) | y.isna()).any()):
        raise ValueError(f"value column {config.columns.value!r} must be numeric and inside the "
                         f"public bounds {config.mechanism.bounds} with no missing values; clamp "
                         "to the bounds before release or declare wider bounds")
    key = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    return frame, fingerprint(key)


def _plan_key(context: Any, parameters: dict[str, Any]) -> str:
    """Plan cache key: data fingerprint + columns + mechanism settings (never the frame)."""
    config: UserLevelConfig = parameters["config"]
    return digest({"data": parameters["data_fp"], "columns": config.columns.model_dump(),
                   "mechanism": config.mechanism.model_dump(), "code": "user-level-plan-v1"})


@task(name="plan_user_level", cache_key_fn=_plan_key, persist_result=True, retries=0)
def plan_user_level(config: UserLevelConfig, frame: pd.DataFrame, data_fp: str) -> UserLevelPlan:
    """Clip-User plan from the occupancy alone: no values read, no privacy cost (spec §3)."""
    c = config.columns
    return build_release(config).plan(frame, unit=c.unit, cell=c.cell, order=c.order,
                                      record=c.record)


def output_dict(out: Any) -> dict[str, Any]:
    """The released output as JSON-ready values: cells, derived ATEs, privacy, caveats."""
    return {"cells": out.cells.to_dict(orient="list"),
            "ate": None if out.ate is None else out.ate.to_dict(orient="list"),
            "ate_pooled": out.ate_pooled, "privacy": out.privacy,
            "caveats": list(out.caveats), "noise_sampler": out.noise_sampler,
            "notes": list(out.notes)}


@task(name="release_user_level", **_PRIVATE_TASK)
def release_user_level(config: UserLevelConfig, frame: pd.DataFrame, plan: UserLevelPlan,
                       release_id: str) -> dict[str, Any]:
    """Reserve ``plan.privacy_charge()`` (K * epsilon per unit), release once (OS entropy),
    commit; returns ``{"release", "reused", "spent"}``. A refused release raises
    BudgetExceededError before any noise; a committed release id returns its stored release."""
    dataset = config.ledger.dataset_id
    ledger_ops.ensure_epsilon_cap(dataset, config.ledger.epsilon, config.ledger.delta)
    charge = plan.privacy_charge()

    def draw() -> dict[str, Any]:
        rel = build_release(config, np.random.default_rng())  # OS entropy
        return output_dict(rel.release(frame, value=config.columns.value, plan=plan,
                                       arm=config.columns.arm))

    out, reused = ledger_ops.charged_release(dataset, release_id, charge, draw)
    get_run_logger().info("released %s (user-level epsilon=%.4g per unit: K=%d of G_1=%d)%s",
                          release_id, plan.epsilon_total, plan.K, plan.G1,
                          " - returned the committed release, no new noise" if reused else "")
    return {"release": out, "reused": reused, "spent": ledger_ops.spent(dataset)}


def release_params(config: UserLevelConfig) -> dict[str, str]:
    params: dict[str, str] = {}
    flatten_params("mechanism", config.mechanism.model_dump(), params)
    flatten_params("columns", config.columns.model_dump(), params)
    params.update({"kind": "user_level", "dataset_id": config.ledger.dataset_id,
                   "release_name": config.name})
    return {k: v[:6000] for k, v in params.items()}


def release_metrics(plan_metrics: dict[str, float], release: dict[str, Any],
                    spent: dict[str, Any] | None) -> dict[str, float]:
    """Spec §7.5 plan metrics, the three privacy figures, the pooled ATE, the dataset spend."""
    p = release["privacy"]
    m = dict(plan_metrics) | {"epsilon_total": p["epsilon_total"],
                              "epsilon_parallel": p["epsilon_parallel"],
                              "epsilon_naive": p["epsilon_naive"],
                              "epsilon_per_cell": p["epsilon_per_cell"]}
    pooled = release.get("ate_pooled")
    if pooled:
        m.update(ate_pooled=pooled["ate"], ate_pooled_se=pooled["se"])
    return as_metrics(m, spent)


@task(name="log_user_level_release", cache_policy=NO_CACHE, persist_result=False, retries=1)
def log_user_level_release(config: UserLevelConfig, release: dict[str, Any],
                           plan_metrics: dict[str, float], release_id: str, flow_run_id: str,
                           flow_run_name: str, spent: dict[str, Any] | None) -> dict[str, str]:
    """One MLflow run: params, metrics, cells.csv, ate.csv, release.json and a plot."""
    from tasks.plots_user_level import plot_release

    with release_run(config, release_id, flow_run_id, flow_run_name, release_params(config),
                     release_metrics(plan_metrics, release, spent),
                     evaluation="false", mode="release") as (client, tracked):
        run_id = tracked["run_id"]
        client.log_dict(run_id, release | {"release_id": release_id}, META_ARTIFACT)
        with tempfile.TemporaryDirectory() as tmp:
            pd.DataFrame(release["cells"]).to_csv(Path(tmp) / CELLS_ARTIFACT, index=False)
            client.log_artifact(run_id, str(Path(tmp) / CELLS_ARTIFACT))
            if release["ate"] is not None:
                pd.DataFrame(release["ate"]).to_csv(Path(tmp) / ATE_ARTIFACT, index=False)
                client.log_artifact(run_id, str(Path(tmp) / ATE_ARTIFACT))
            client.log_artifact(run_id, plot_release(release, Path(tmp) / "release.png"))
    return tracked
