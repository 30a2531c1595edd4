"""The ``dp_ate_release`` flow: load -> split folds -> fit folds (cached, mapped over chunks) ->
aggregate -> release (ledger, noise once) -> log to MLflow. It only composes tasks."""

from __future__ import annotations

from typing import Any

from prefect import flow, unmapped
from prefect.futures import as_completed
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from conf.models import ReleaseConfig
from tasks import progress
from tasks.build import model_specs
from tasks.data import load_data
from tasks.fit import fit_fold, models_key, split_folds
from tasks.model_store import model_store_dir
from tasks.release import aggregate, check_budget, release
from tasks.runners import task_runner
from tasks.tracking import log_release, refusals_recorded


@flow(name="dp_ate_release", persist_result=False, retries=0,
      task_runner=ThreadPoolTaskRunner(max_workers=2))
def dp_ate_release(config: ReleaseConfig) -> dict[str, Any]:
    """One private ATE release from ``config``; returns the release (private values only in
    release mode) with its ids: ``{"release", "release_id", "reused", "mlflow", "spent"}``.
    A release over the dataset's budget is refused (before any fit when already known then),
    recorded in MLflow, and ends the run Failed with the ledger's message."""
    with refusals_recorded(config):
        return _release_steps(config)


def _release_steps(config: ReleaseConfig) -> dict[str, Any]:
    progress.phase("load data")
    data = load_data(config)

    progress.phase("split folds")
    workers = config.runner.max_workers
    plan = split_folds(config, data.n, workers)
    check_budget(config, data.n)

    progress.phase("fit folds", total=plan.n_folds)
    store = str(model_store_dir())
    futures = fit_fold.map(
        unmapped(data.X), unmapped(data.A), unmapped(data.Y), unmapped(plan.fold_ids),
        folds=[list(c) for c in plan.chunks], config=unmapped(config),
        data_fp=unmapped(data.fingerprint), plan=unmapped(plan.plan),
        models=unmapped(models_key(model_specs(config))), store=unmapped(store),
        label=[f"{c[0]}-{c[-1]}" for c in plan.chunks])
    sizes = {f.task_run_id: len(c) for f, c in zip(futures, plan.chunks, strict=True)}
    for done in as_completed(list(futures)):
        done.wait()  # sets the future's final state (Completed or Cached) without an API call
        size = sizes[done.task_run_id]
        progress.advance(size, cached=size if done.state.name == "Cached" else 0)
    keys = [f.result() for f in futures]

    progress.phase("aggregate")
    nuisances = aggregate(config, data, plan, keys, store)

    progress.phase("release")
    release_id = f"{flow_run.id}/{config.name}"
    out = release(config, data, nuisances, release_id)
    del nuisances, data

    progress.phase("log to MLflow")
    spent = out["spent"]
    tracked = log_release(config, out["release"], release_id, str(flow_run.id),
                          str(flow_run.name), spent)
    progress.phase("done")
    return {"release": out["release"], "release_id": release_id, "reused": out["reused"],
            "mlflow": tracked, "spent": spent, "experiment": config.experiment_name}


def run_release(config: ReleaseConfig) -> dict[str, Any]:
    """Run the flow with the task runner the config asks for (threads or Dask)."""
    return dp_ate_release.with_options(task_runner=task_runner(config.runner))(config=config)

