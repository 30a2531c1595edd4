"""Tasks of the Cluster-DP release flow: load + validate, privatize (ledger), publish, estimate.

``load_cluster_data`` and ``privatize_cluster_dp`` see raw outcomes: never persisted, cached or
retried. What leaves ``privatize_cluster_dp`` is the label-DP release (privatized unit-level data
and the noisy priors, spec cluster_dp.md Fig. 1), which may be published. ``log_cluster_dp_release``
puts it into MLflow (Parquet artifacts, privacy figures); ``estimate_cluster_dp`` is the analyst's
free post-processing and reads only what was published.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from conf.cluster_dp import ClusterDPConfig
from dpcausal.cluster_dp import ClusterDP, ClusterDPRelease, ResponseSpace
from dpcausal.cluster_dp.release import _codes, _treatment
from tasks import ledger_ops
from tasks.data import read_frame
from tasks.tracking import as_metrics, flatten_params, release_run

_PRIVATE_TASK = dict(persist_result=False, cache_policy=NO_CACHE, retries=0)
DATA_ARTIFACT, PRIORS_ARTIFACT = "privatized.parquet", "priors.parquet"
META_ARTIFACT = "release.json"


def build_mechanism(config: ClusterDPConfig) -> ClusterDP:
    return ClusterDP(ResponseSpace(np.asarray(config.mechanism.values, float)),
                     **config.mechanism.library_kwargs())


def check_input(mech: ClusterDP, frame: pd.DataFrame, config: ClusterDPConfig) -> None:
    """Every refusal of ``ClusterDP.privatize`` (parameters, columns, Y, 0/1 arms, empty groups),
    raised here so that bad input is refused before the ledger is charged."""
    mech.calibrate()
    cols = config.columns
    for arg, col in (("cluster", cols.cluster), ("treatment", cols.treatment),
                     ("outcome", cols.outcome)):
        if col not in frame.columns:
            raise ValueError(f"columns.{arg}={col!r} is not a column of the data (columns: "
                             f"{list(frame.columns)}); fix columns.{arg} in the config")
    if len(frame) == 0:
        raise ValueError("the data have no rows; nothing to release")
    mech.space.index(frame[cols.outcome].to_numpy(), name=f"outcome column {cols.outcome!r}")
    z = _treatment(frame[cols.treatment], cols.treatment)
    cidx, _ = _codes(frame[cols.cluster], name=f"cluster column {cols.cluster!r}")
    if np.any(np.bincount(2 * cidx + z, minlength=2 * (int(cidx.max()) + 1)) == 0):
        raise ValueError("some cluster has no treated or no control unit; every (cluster, arm) "
                         "group needs units (spec cluster_dp.md §1.1): merge small clusters first")


@task(name="load_cluster_data", **_PRIVATE_TASK)
def load_cluster_data(config: ClusterDPConfig) -> pd.DataFrame:
    """The three configured columns (others, e.g. unit ids, dropped), validated."""
    frame = read_frame(config.data)
    check_input(build_mechanism(config), frame, config)
    cols = config.columns
    return frame[[cols.cluster, cols.treatment, cols.outcome]]


def release_dict(rel: ClusterDPRelease) -> dict[str, Any]:
    """The published release as JSON-ready lists (data, priors) plus its public parameters."""
    return {"mechanism": rel.mechanism, "lam": rel.lam, "gamma": rel.gamma,
            "sigma": None if math.isinf(rel.sigma) else rel.sigma,
            "values": rel.space.values.tolist(), "privacy": rel.privacy, "n": len(rel.data),
            "data": {k: rel.data[k].tolist() for k in ("cluster", "treatment", "outcome")},
            "priors": {k: rel.priors[k].tolist() for k in rel.priors.columns}}


@task(name="privatize_cluster_dp", **_PRIVATE_TASK)
def privatize_cluster_dp(config: ClusterDPConfig, frame: pd.DataFrame,
                         release_id: str) -> dict[str, Any]:
    """Reserve ``ClusterDP.privacy_charge()``, privatize once (OS entropy), commit; returns
    ``{"release", "reused", "spent"}``. A refused release raises BudgetExceededError before any
    noise; a committed release id returns its stored release."""
    mech = build_mechanism(config)
    charge = mech.privacy_charge()
    dataset, cols = config.ledger.dataset_id, config.columns
    ledger_ops.ensure_epsilon_cap(dataset, config.ledger.epsilon, config.ledger.delta)

    def draw() -> dict[str, Any]:
        rel = mech.privatize(frame, cols.cluster, cols.treatment, cols.outcome,
                             random_state=np.random.default_rng())  # OS entropy
        return release_dict(rel)

    out, reused = ledger_ops.charged_release(dataset, release_id, charge, draw)
    get_run_logger().info("released %s (label-DP epsilon=%.4g, delta=%g)%s", release_id,
                          charge.epsilon, charge.delta,
                          " - returned the committed release, no new noise" if reused else "")
    return {"release": out, "reused": reused, "spent": ledger_ops.spent(dataset)}


def release_params(config: ClusterDPConfig, release: dict[str, Any]) -> dict[str, str]:
    """Public parameters: the mechanism's settings, columns, dataset id, release name."""
    params: dict[str, str] = {}
    flatten_params("mechanism", config.mechanism.model_dump(), params)
    flatten_params("columns", config.columns.model_dump(), params)
    flatten_params("estimate", config.estimate.model_dump(), params)
    params.update({"kind": "cluster_dp", "dataset_id": config.ledger.dataset_id,
                   "release_name": config.name, "K": str(len(release["values"]))})
    return {k: v[:6000] for k, v in params.items()}


def release_metrics(release: dict[str, Any], spent: dict[str, Any] | None) -> dict[str, float]:
    """Privacy figures, the calibration used and the dataset's cumulative spend."""
    p = release["privacy"]
    m = {"epsilon": p["epsilon"], "delta": p["delta"], "epsilon_paper": p["epsilon_paper"],
         "epsilon_strict": p["epsilon_strict"], "lam": release["lam"], "gamma": release["gamma"],
         "sigma": release["sigma"], "n": release["n"]}
    return as_metrics(m, spent)


@task(name="log_cluster_dp_release", cache_policy=NO_CACHE, persist_result=False, retries=1)
def log_cluster_dp_release(config: ClusterDPConfig, release: dict[str, Any], release_id: str,
                           flow_run_id: str, flow_run_name: str,
                           spent: dict[str, Any] | None) -> dict[str, str]:
    """One MLflow run: params, privacy metrics, the privatized data and priors as Parquet
    artifacts, the public parameters as release.json; returns run/experiment ids and the URI."""
    with release_run(config, release_id, flow_run_id, flow_run_name,
                     release_params(config, release), release_metrics(release, spent),
                     evaluation="false", mode="release") as (client, tracked):
        run_id = tracked["run_id"]
        meta = {k: v for k, v in release.items() if k not in ("data", "priors")}
        client.log_dict(run_id, meta | {"release_id": release_id}, META_ARTIFACT)
        with tempfile.TemporaryDirectory() as tmp:
            for name, part in ((DATA_ARTIFACT, "data"), (PRIORS_ARTIFACT, "priors")):
                pd.DataFrame(release[part]).to_parquet(Path(tmp) / name, index=False)
                client.log_artifact(run_id, str(Path(tmp) / name))
    return tracked


def published_release(tracked: dict[str, str]) -> ClusterDPRelease:
    """The release rebuilt from the MLflow run's artifacts alone (what an analyst downloads)."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=tracked["tracking_uri"])
    with tempfile.TemporaryDirectory() as tmp:
        got = {name: Path(client.download_artifacts(tracked["run_id"], name, tmp))
               for name in (DATA_ARTIFACT, PRIORS_ARTIFACT, META_ARTIFACT)}
        meta = json.loads(got[META_ARTIFACT].read_text())
        data, priors = pd.read_parquet(got[DATA_ARTIFACT]), pd.read_parquet(got[PRIORS_ARTIFACT])
    sigma = math.inf if meta["sigma"] is None else meta["sigma"]
    return ClusterDPRelease(data=data, priors=priors, lam=meta["lam"], privacy=meta["privacy"],
                            mechanism=meta["mechanism"], space=ResponseSpace(meta["values"]),
                            gamma=meta["gamma"], sigma=sigma)


@task(name="estimate_cluster_dp", cache_policy=NO_CACHE, persist_result=False, retries=1)
def estimate_cluster_dp(config: ClusterDPConfig, tracked: dict[str, str]) -> dict[str, Any]:
    """Free post-processing: the debiased ATE, V_hat and CI (Theorem 3.2, spec §3.1, §3.6) from
    the published artifacts only, logged to the release's MLflow run as ``estimate_*`` metrics."""
    import mlflow
    from mlflow.entities import Metric

    est = published_release(tracked).estimate(config.estimate.strata, config.estimate.level)
    m = {"estimate_ate": est.ate, "estimate_variance": est.variance, "estimate_se": est.se,
         "estimate_ci_low": est.ci[0], "estimate_ci_high": est.ci[1]}
    now = int(time.time() * 1000)
    mlflow.MlflowClient(tracking_uri=tracked["tracking_uri"]).log_batch(
        tracked["run_id"], metrics=[Metric(k, float(v), now, 0) for k, v in m.items()])
    return est.to_dict()
