"""MLflow logging of a release (the only MLflow code in the project; ``mlflow`` is imported lazily).

One MLflow run per release, in an experiment per dataset (``dpcausal/<dataset_id>`` unless
configured), whose artifacts live under the project's data folder. Logged: public parameters
(spec §2.6), the released values and privacy figures, the dataset's cumulative spend, the release
JSON and a plot. In release mode nothing non-private reaches MLflow: the release dict carries no
``nonprivate`` part (checked here) and no data-dependent count is logged.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from conf.models import ReleaseConfig
from dpcausal.ledger import BudgetExceededError


def flatten_params(prefix: str, value: Any, out: dict[str, str]) -> None:
    """Nested config dicts as MLflow params: dotted keys, lists as JSON, the rest as str."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten_params(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)


def release_params(config: ReleaseConfig, release: dict[str, Any]) -> dict[str, str]:
    """Public parameters: the library's §2.6 list, model specs, fold seed, modes, dataset id."""
    params: dict[str, str] = {}
    flatten_params("", release.get("params", {}), params)
    flatten_params("models", config.models.model_dump(), params)
    flatten_params("noise", {k: v for k, v in release["noise"].items()
                    if k in ("sensitivity_mode", "sigma2_mode", "ci_mode", "sensitivity",
                             "sensitivity_var", "C", "B_mu", "B_pi")}, params)
    params.update({"fold_seed": str(config.estimator.fold_seed), "mode": config.mode,
                   "dataset_id": config.ledger.dataset_id, "release_name": config.name})
    if config.evaluation:
        params["noise_seed"] = str(config.noise_seed)
    return {k: v[:6000] for k, v in params.items()}


def release_metrics(release: dict[str, Any], spent: dict[str, Any] | None) -> dict[str, float]:
    """Released values, noise scales, privacy figures and the dataset's cumulative spend."""
    p, z = release["privacy"], release["noise"]
    m = {"ate": release["ate"], "sigma_ate": z["sigma_ate"], "sigma_var": z["sigma_var"],
         "zeta": p["zeta"], "zeta1": p["zeta1"], "zeta2": p["zeta2"],
         "epsilon": p["epsilon"], "delta": p["delta"], "rho": p["rho"],
         "n": release["n"], "n_folds": release["n_folds"]}
    if release.get("ci"):
        m.update(ci_low=release["ci"][0], ci_high=release["ci"][1], variance=release["variance"])
    if spent is not None and spent.get("zeta") is not None:  # all-Gaussian: exact GDP / zCDP
        m["dataset_zeta_spent"] = spent["zeta"]
        m["dataset_rho_spent"] = spent["zeta"] ** 2 / 2
    if release.get("evaluation") and release.get("nonprivate"):
        m["nonprivate_ate"] = release["nonprivate"]["ate"]
        m["nonprivate_variance"] = release["nonprivate"]["variance"]
    return as_metrics(m, spent)


def as_metrics(m: dict[str, Any], spent: dict[str, Any] | None = None) -> dict[str, float]:
    """MLflow metrics: the finite numbers of ``m`` and, when given, the cumulative (epsilon,
    delta) spend of the release's ledger dataset."""
    if spent is not None:
        m = m | {"dataset_epsilon_spent": spent["epsilon"], "dataset_delta": spent["delta"],
                 "dataset_n_charges": spent["n_charges"]}
    return {k: float(v) for k, v in m.items() if v is not None and math.isfinite(float(v))}


def ensure_experiment(name: str, tracking_uri: str | None = None) -> str:
    """Experiment id, created with its artifacts under <data>/mlartifacts/<name> (recipe §6)."""
    import mlflow

    from conf.settings import data_dir

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    location = (data_dir() / "mlartifacts" / name.replace("/", "_")).as_uri()
    try:
        return client.create_experiment(name, artifact_location=location)
    except mlflow.exceptions.MlflowException:  # created concurrently
        return client.get_experiment_by_name(name).experiment_id


@contextmanager
def release_run(config: Any, release_id: str, flow_run_id: str, flow_run_name: str,
                params: dict[str, str], metrics: dict[str, float],
                **tags: str) -> Iterator[tuple[Any, dict[str, str]]]:
    """An MLflow run for one release of any kind, in the config's experiment: tagged with the
    flow run, release and dataset (plus ``tags``), params and metrics logged in one batch. The
    block logs its artifacts with the yielded client; the run ends FINISHED, or FAILED if the
    block raises. Yields ``(client, {"run_id", "experiment_id", "tracking_uri"})``."""
    import mlflow
    from mlflow.entities import Metric, Param

    uri = config.mlflow.tracking_uri or mlflow.get_tracking_uri()
    exp_id = ensure_experiment(config.experiment_name, uri)
    client = mlflow.MlflowClient(tracking_uri=uri)
    tags = {"prefect.flow_run_id": flow_run_id, "prefect.flow_run_name": flow_run_name,
            "release_id": release_id, "dataset_id": config.ledger.dataset_id,
            "kind": config.kind, **tags}
    run_id = client.create_run(exp_id, run_name=f"{config.name}-{flow_run_name}",
                               tags=tags).info.run_id
    try:
        now = int(time.time() * 1000)
        client.log_batch(run_id, params=[Param(k, v) for k, v in params.items()],
                         metrics=[Metric(k, v, now, 0) for k, v in metrics.items()])
        yield client, {"run_id": run_id, "experiment_id": exp_id, "tracking_uri": str(uri)}
        client.set_terminated(run_id, "FINISHED")
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise


@task(name="log_release", cache_policy=NO_CACHE, persist_result=False, retries=1)
def log_release(config: ReleaseConfig, release: dict[str, Any], release_id: str,
                flow_run_id: str, flow_run_name: str,
                spent: dict[str, Any] | None) -> dict[str, str]:
    """One MLflow run for the release; returns ``{"run_id", "experiment_id", "tracking_uri"}``."""
    from tasks.plots_release import plot_release

    if not config.evaluation and (release.get("nonprivate") is not None
                                  or release.get("evaluation")):
        raise AssertionError("bug: a release-mode result carries non-private values")
    with release_run(config, release_id, flow_run_id, flow_run_name,
                     release_params(config, release), release_metrics(release, spent),
                     evaluation=str(config.evaluation).lower(), mode=config.mode,
                     estimator=release["estimator"]) as (client, tracked):
        client.log_dict(tracked["run_id"], release, "release.json")
        with tempfile.TemporaryDirectory() as tmp:
            client.log_artifact(tracked["run_id"],
                                str(plot_release(release, Path(tmp) / "release.png")))
    return tracked


@task(name="log_refusal", cache_policy=NO_CACHE, persist_result=False, retries=1)
def log_refusal(config: Any, message: str, flow_run_id: str, flow_run_name: str) -> str:
    """An MLflow run recording a release the ledger refused (any config kind): tagged
    ``refused=true`` with the ledger's message, ended FAILED, with no estimate (none was drawn).
    Returns the run id."""
    import mlflow

    uri = config.mlflow.tracking_uri or mlflow.get_tracking_uri()
    client = mlflow.MlflowClient(tracking_uri=uri)
    tags = {"prefect.flow_run_id": flow_run_id, "prefect.flow_run_name": flow_run_name,
            "dataset_id": config.ledger.dataset_id, "kind": config.kind, "refused": "true",
            "refusal": message[:5000], "evaluation": "false"}
    run = client.create_run(ensure_experiment(config.experiment_name, uri),
                            run_name=f"{config.name}-{flow_run_name}-refused", tags=tags)
    client.set_terminated(run.info.run_id, "FAILED")
    return run.info.run_id


@contextmanager
def refusals_recorded(config: Any) -> Iterator[None]:
    """Inside a flow run: a ``BudgetExceededError`` raised in the block is recorded by
    :func:`log_refusal` under this flow run, then re-raised (the run ends Failed with the
    ledger's message)."""
    from prefect.runtime import flow_run

    try:
        yield
    except BudgetExceededError as exc:
        log_refusal(config, str(exc), str(flow_run.id), str(flow_run.name))
        raise
