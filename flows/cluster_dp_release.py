"""The ``cluster_dp_release`` flow: load + validate -> privatize (ledger charge, noise once) ->
publish to MLflow -> analyst-side estimate from the published artifacts. It only composes tasks."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.runtime import flow_run

from conf.cluster_dp import ClusterDPConfig, load_cluster_dp_config
from tasks.cluster_dp import (
    estimate_cluster_dp,
    load_cluster_data,
    log_cluster_dp_release,
    privatize_cluster_dp,
)
from tasks.tracking import refusals_recorded

__all__ = ["cluster_dp_release", "load_cluster_dp_config", "print_cluster_dp_release",
           "run_cluster_dp_from_config"]


@flow(name="cluster_dp_release", persist_result=False, retries=0)
def cluster_dp_release(config: ClusterDPConfig) -> dict[str, Any]:
    """One label-DP release; returns ``{"release" (public parameters and privacy figures, no
    data), "release_id", "reused", "spent", "mlflow", "estimate", "experiment"}``.
    A release over the dataset's budget is recorded in MLflow and ends the run Failed."""
    with refusals_recorded(config):
        return _cluster_dp_steps(config)


def _cluster_dp_steps(config: ClusterDPConfig) -> dict[str, Any]:
    frame = load_cluster_data(config)
    release_id = f"{flow_run.id}/{config.name}"
    out = privatize_cluster_dp(config, frame, release_id)
    del frame
    tracked = log_cluster_dp_release(config, out["release"], release_id, str(flow_run.id),
                                     str(flow_run.name), out["spent"])
    estimate = estimate_cluster_dp(config, tracked)
    summary = {k: v for k, v in out["release"].items() if k not in ("data", "priors")}
    return {"release": summary, "release_id": release_id, "reused": out["reused"],
            "spent": out["spent"], "mlflow": tracked, "estimate": estimate,
            "experiment": config.experiment_name}


def run_cluster_dp_from_config(config: ClusterDPConfig) -> dict[str, Any]:
    """Entry point of ``dpcausal run`` for a ``kind: cluster_dp`` config."""
    return cluster_dp_release(config=config)


def print_cluster_dp_release(result: dict[str, Any], console: Any) -> None:
    """The release as a table: privacy figures, the analyst's estimate, where it was recorded."""
    from rich.table import Table

    rel, est, p = result["release"], result["estimate"], result["release"]["privacy"]
    table = Table(title="Cluster-DP label-DP release", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    sigma = "inf (uniform prior)" if rel["sigma"] is None else f"{rel['sigma']:.4g}"
    table.add_row("mechanism", f"{rel['mechanism']}  (n={rel['n']}, K={len(rel['values'])})")
    table.add_row("privacy", f"({p['epsilon']:.4g}, {p['delta']:g}) label-DP, {p['accounting']} "
                  f"accounting (paper {p['epsilon_paper']:.4g}, strict {p['epsilon_strict']:.4g})")
    table.add_row("calibration",
                  f"lambda={rel['lam']:.4g}, gamma={rel['gamma']:.4g}, sigma={sigma}")
    table.add_row("ATE (post-processing)", f"{est['ate']:.6g}  (se {est['se']:.4g}, "
                  f"strata={est['strata']})")
    table.add_row(f"{100 * est['level']:g}% CI", f"[{est['ci'][0]:.6g}, {est['ci'][1]:.6g}]")
    spent = result.get("spent")
    if spent:
        table.add_row("dataset spend", f"epsilon={spent['epsilon']:.4g} at delta={spent['delta']:g}"
                      f" over {spent['n_charges']} release(s)")
    table.add_row("release id", result["release_id"] + ("  (stored result, no new noise)"
                                                        if result.get("reused") else ""))
    table.add_row("MLflow", f"experiment {result['experiment']!r}, run {result['mlflow']['run_id']}"
                  " (privatized.parquet, priors.parquet)")
    console.print(table)
