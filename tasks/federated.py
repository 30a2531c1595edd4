"""Tasks of the federated ATE release flow (PBM + secure aggregation, spec federated_secagg.md).

``load_federated_data`` and ``release_federated`` see raw outcomes: never persisted, cached or
retried. ``calibrate_federated`` is data-free (public group sizes and mechanism parameters) and
cached on its inputs (spec §7.5). ``release_federated`` reserves the plan's RDP charge in the
ledger BEFORE the clients encode, then runs encode (chunked) -> four secure sums -> decode -> CI
once per release id. ``log_federated_release`` is the only MLflow code of this mechanism.
"""

from __future__ import annotations

import csv
import io
import json
from concurrent.futures import Executor
from functools import partial
from typing import Any

import numpy as np
from prefect import get_run_logger, task
from prefect.cache_policies import INPUTS, NO_CACHE

from conf.federated import FederatedConfig, FederatedMechanism
from dpcausal.federated import (
    ClientReports,
    ReleasePlan,
    encode_clients,
    pbm_rdp,
    plan_release,
    simulate_release,
)
from tasks import ledger_ops
from tasks.data import read_frame
from tasks.runners import chunk_executor
from tasks.tracking import as_metrics, flatten_params, release_run

_PRIVATE_TASK = dict(persist_result=False, cache_policy=NO_CACHE, retries=0)
CURVE_ARTIFACT, PLAN_ARTIFACT = "rdp_curve.csv", "calibration.json"


def split_outcomes(frame: Any, config: FederatedConfig) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes (float) and public group labels (bool) of the configured columns, validated."""
    cols = config.columns
    for arg, col in (("treatment", cols.treatment), ("outcome", cols.outcome)):
        if col not in frame.columns:
            raise ValueError(f"columns.{arg}={col!r} is not a column of the data (columns: "
                             f"{list(frame.columns)}); fix columns.{arg} in the config")
    t = frame[cols.treatment].to_numpy()
    if not np.isin(t, (0, 1)).all():
        raise ValueError(f"treatment column {cols.treatment!r} must hold 0 (control) / 1 "
                         "(treated) labels only; recode it before the release")
    try:
        x = frame[cols.outcome].to_numpy(dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"outcome column {cols.outcome!r} must be numeric; fix the data or "
                         "columns.outcome") from None
    if not np.isfinite(x).all():
        raise ValueError(f"outcome column {cols.outcome!r} has missing or infinite values; "
                         "drop those clients before the release")
    return x, t.astype(bool)


@task(name="load_federated_data", **_PRIVATE_TASK)
def load_federated_data(config: FederatedConfig) -> tuple[np.ndarray, np.ndarray]:
    """Assign: client outcomes and their public group labels (other columns, e.g. ids, dropped)."""
    return split_outcomes(read_frame(config.data), config)


def calibration_inputs(mechanism: FederatedMechanism) -> dict[str, Any]:
    """The mechanism settings the calibration depends on (the cache key; CI settings excluded)."""
    return mechanism.model_dump(include={"R", "epsilon", "delta", "m1", "m2", "mean_share",
                                         "variance_mode", "dropout"})


@task(name="calibrate_federated", cache_policy=INPUTS, persist_result=True, retries=0)
def calibrate_federated(n_treated: int, n_control: int, *, R: float, epsilon: float,
                        delta: float, m1: int, m2: int, mean_share: float, variance_mode: str,
                        dropout: float) -> ReleasePlan:
    """Data-free plan (thetas, achieved epsilon, RDP curve): spec §2.4, cached on its inputs
    (spec §7.5). Raises the library's ValueError for bad parameters or group sizes, before any
    ledger charge."""
    return plan_release(n_treated, n_control, R=R, epsilon=epsilon, delta=delta, m1=m1, m2=m2,
                        mean_share=mean_share, variance_mode=variance_mode, dropout=dropout)


def encode_chunked(x: np.ndarray, plan: ReleasePlan, group: int, rng: np.random.Generator,
                   chunk_size: int, executor: Executor | None = None) -> ClientReports:
    """Client encoding of one group in chunks of ``chunk_size`` clients, each with its own stream
    spawned from ``rng``, mapped in order on ``executor``: every executor gives the same reports."""
    starts = range(0, x.size, chunk_size)
    chunks = [x[s:s + chunk_size] for s in starts]
    streams = rng.spawn(len(chunks))
    mapper = executor.map if executor is not None else map
    n = len(chunks)
    parts = list(mapper(encode_clients, chunks, [plan] * n, [group] * n, streams))
    z2 = None if parts[0].z2 is None else np.concatenate([p.z2 for p in parts])
    return ClientReports(np.concatenate([p.z1 for p in parts]), z2,
                         sum(p.n_clipped for p in parts))


def run_protocol(x: np.ndarray, t: np.ndarray, plan: ReleasePlan, config: FederatedConfig,
                 rng: np.random.Generator) -> dict[str, Any]:
    """:func:`simulate_release` (Algorithm 1, spec §3.1) with the client encoding chunked on the
    config's runner (threads, or Dask workers); the release as JSON."""
    m = config.mechanism
    with chunk_executor(config.runner) as executor:
        res, _ = simulate_release(
            x, t, plan, rng, secagg=m.secagg, debias=m.debias, variance_mode=m.variance_mode,
            estimand=m.estimand, ci_form=m.ci_form, alpha=m.alpha,
            encode=partial(encode_chunked, chunk_size=config.chunk_size, executor=executor))
    return json.loads(res.to_json())


@task(name="release_federated", **_PRIVATE_TASK)
def release_federated(config: FederatedConfig, x: np.ndarray, t: np.ndarray, plan: ReleasePlan,
                      release_id: str) -> dict[str, Any]:
    """Reserve ``plan.privacy_charge()`` (the RDP curve, composed with the dataset's other
    charges), run the protocol once with OS entropy, commit; returns ``{"release", "reused",
    "spent"}``. A refused release raises BudgetExceededError before any client encodes.
    Evaluation mode (as the core release): no ledger, the result is tagged NOT_PRIVATE when it
    uses ``oracle_nonprivate`` variances."""
    if config.evaluation:
        rel = run_protocol(x, t, plan, config, np.random.default_rng())
        get_run_logger().warning("EVALUATION mode: no ledger charge; privacy_status=%s",
                                 rel["privacy"]["privacy_status"])
        return {"release": rel, "reused": False, "spent": None}
    dataset = config.ledger.dataset_id
    ledger_ops.ensure_epsilon_cap(dataset, config.ledger.epsilon, config.ledger.delta)
    out, reused = ledger_ops.charged_release(
        dataset, release_id, plan.privacy_charge(),
        lambda: run_protocol(x, t, plan, config, np.random.default_rng()))  # OS entropy
    get_run_logger().info("released %s (epsilon=%.4g, delta=%g)%s", release_id,
                          plan.calibration.epsilon, plan.calibration.delta,
                          " - returned the committed release, no new noise" if reused else "")
    return {"release": out, "reused": reused, "spent": ledger_ops.spent(dataset)}


def rdp_curve_csv(plan: ReleasePlan) -> str:
    """RDP curve artefact (spec §7.5): order, eps1_g, eps2_g per group, composed total."""
    cal = plan.calibration
    a = np.asarray(cal.orders, float)
    cols: dict[str, np.ndarray] = {"order": a}
    for g, name in enumerate(("control", "treated")):
        cols[f"eps1_{name}"] = pbm_rdp(plan.n_plan[g], plan.m1, cal.theta1[g], a)
        cols[f"eps2_{name}"] = (pbm_rdp(plan.n_plan[g], plan.m2, cal.theta2[g], a)
                                if cal.theta2 else np.zeros(a.size))
    cols["total"] = np.asarray(cal.rdp_epsilons, float)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(cols)
    w.writerows(zip(*(v.tolist() for v in cols.values()), strict=True))
    return buf.getvalue()


def release_params(config: FederatedConfig, plan: ReleasePlan) -> dict[str, str]:
    """Public parameters (spec §7.5): mechanism settings, group sizes, thetas, orders, columns."""
    cal = plan.calibration
    params: dict[str, str] = {}
    flatten_params("mechanism", config.mechanism.model_dump(), params)
    flatten_params("columns", config.columns.model_dump(), params)
    params.update({"kind": "federated", "mechanism": "pbm_secagg", "dataset_id":
                   config.ledger.dataset_id, "release_name": config.name,
                   "n_control": str(plan.n_clients[0]), "n_treated": str(plan.n_clients[1]),
                   "m1": str(plan.m1), "m2": str(plan.m2), "conversion": "CKS2020",
                   "orders_id": f"{len(cal.orders)}:{cal.orders[0]:g}-{cal.orders[-1]:g}",
                   "chunk_size": str(config.chunk_size)})
    for g, name in enumerate(("control", "treated")):
        params[f"theta1_{name}"] = repr(cal.theta1[g])
        if cal.theta2:
            params[f"theta2_{name}"] = repr(cal.theta2[g])
    return params


def release_metrics(release: dict[str, Any], plan: ReleasePlan,
                    spent: dict[str, Any] | None) -> dict[str, float]:
    """Privacy figures (eps achieved from the composed curve, optimal order), the release and
    its CI, V_DP, bits per client, and the dataset's cumulative spend (spec §7.5)."""
    cal = plan.calibration
    lo, hi = release["ci"]
    m = {"epsilon": cal.epsilon, "delta": cal.delta, "epsilon_target": cal.epsilon_target,
         "optimal_order": cal.optimal_order, "theta_capped": float(cal.theta_capped),
         "ate": release["ate"], "ci_low": lo, "ci_high": hi, "width": hi - lo,
         "variance_dp": release["variance_dp"],
         "sampling_variance": release["sampling_variance"],
         "bits_per_client": plan.bits_per_client}
    return as_metrics(m, spent)


@task(name="log_federated_release", cache_policy=NO_CACHE, persist_result=False, retries=1)
def log_federated_release(config: FederatedConfig, release: dict[str, Any], plan: ReleasePlan,
                          release_id: str, flow_run_id: str, flow_run_name: str,
                          spent: dict[str, Any] | None) -> dict[str, str]:
    """One MLflow run (experiment per dataset): params, metrics, the RDP-curve CSV and the
    data-free calibration as artifacts; returns run/experiment ids and the tracking URI."""
    with release_run(config, release_id, flow_run_id, flow_run_name,
                     release_params(config, plan), release_metrics(release, plan, spent),
                     evaluation=str(config.evaluation).lower(), mode=config.mode,
                     privacy_status=release["privacy"]["privacy_status"]) as (client, tracked):
        client.log_text(tracked["run_id"], rdp_curve_csv(plan), CURVE_ARTIFACT)
        client.log_text(tracked["run_id"], plan.to_json(), PLAN_ARTIFACT)
    return tracked
