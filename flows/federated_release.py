"""The ``federated_ate`` flow: assign (load labels + outcomes) -> calibrate (data-free, cached)
-> ledger reserve -> client encode (chunked) -> four secure sums -> decode -> CI -> commit ->
MLflow. It only composes tasks (spec federated_secagg.md §7.5)."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.runtime import flow_run

from conf.federated import FederatedConfig, load_federated_config
from tasks.federated import (
    calibrate_federated,
    calibration_inputs,
    load_federated_data,
    log_federated_release,
    release_federated,
)
from tasks.tracking import refusals_recorded

__all__ = ["federated_ate", "load_federated_config", "print_federated_release",
           "run_federated_from_config"]


@flow(name="federated_ate", persist_result=False, retries=0)
def federated_ate(config: FederatedConfig) -> dict[str, Any]:
    """One federated ATE release; returns ``{"release", "release_id", "reused", "spent",
    "mlflow", "experiment"}`` (the release holds only privatized figures in release mode).
    A release over the dataset's budget is recorded in MLflow and ends the run Failed."""
    with refusals_recorded(config):
        return _federated_steps(config)


def _federated_steps(config: FederatedConfig) -> dict[str, Any]:
    x, t = load_federated_data(config)
    n_treated = int(t.sum())
    plan = calibrate_federated(n_treated, int(t.size - n_treated),
                               **calibration_inputs(config.mechanism))
    release_id = f"{flow_run.id}/{config.name}"
    out = release_federated(config, x, t, plan, release_id)
    del x, t
    tracked = log_federated_release(config, out["release"], plan, release_id, str(flow_run.id),
                                    str(flow_run.name), out["spent"])
    return {"release": out["release"], "release_id": release_id, "reused": out["reused"],
            "spent": out["spent"], "mlflow": tracked, "experiment": config.experiment_name}


def run_federated_from_config(config: FederatedConfig) -> dict[str, Any]:
    """Entry point of ``dpcausal run`` for a ``kind: federated`` config."""
    return federated_ate(config=config)


def print_federated_release(result: dict[str, Any], console: Any) -> None:
    """The release as a table: estimate and CI, privacy figures, spend, where it was recorded."""
    from rich.table import Table

    rel, p = result["release"], result["release"]["privacy"]
    table = Table(title="Federated ATE release (PBM + secure aggregation)", show_header=False,
                  title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row(f"{rel['estimand']}", f"{rel['ate']:.6g}")
    table.add_row(f"{100 * (1 - rel['alpha']):g}% CI ({rel['ci_form']})",
                  f"[{rel['ci'][0]:.6g}, {rel['ci'][1]:.6g}]")
    table.add_row("clients", f"treated {rel['n_treated']}, control {rel['n_control']} "
                  f"({rel['bits_per_client']} bits each)")
    table.add_row("privacy", f"({p['epsilon']:.4g}, {p['delta']:g})-DP via RDP order "
                  f"{p['optimal_order']:g} ({p['conversion']}), {p['privacy_status']}")
    spent = result.get("spent")
    if spent:
        table.add_row("dataset spend", f"epsilon={spent['epsilon']:.4g} at delta={spent['delta']:g}"
                      f" over {spent['n_charges']} release(s)")
    table.add_row("release id", result["release_id"] + ("  (stored result, no new noise)"
                                                        if result.get("reused") else ""))
    table.add_row("MLflow", f"experiment {result['experiment']!r}, run "
                  f"{result['mlflow']['run_id']} (rdp_curve.csv, calibration.json)")
    console.print(table)
