"""The ``user_level_release`` flow: load -> plan (occupancy only, cached, free) -> ledger
reserve -> release (noise once) -> commit -> MLflow. It only composes tasks (spec
user_level_clip.md §7.5)."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.runtime import flow_run

from conf.user_level import UserLevelConfig, load_user_level_config
from tasks.tracking import refusals_recorded
from tasks.user_level import (
    load_user_level_data,
    log_user_level_release,
    plan_user_level,
    release_user_level,
)

__all__ = ["load_user_level_config", "print_user_level_release", "run_user_level_from_config",
           "user_level_release"]


@flow(name="user_level_release", persist_result=False, retries=0)
def user_level_release(config: UserLevelConfig) -> dict[str, Any]:
    """One user-level DP release of per-cell means/variances and derived ATEs; returns
    ``{"release", "plan", "release_id", "reused", "spent", "mlflow", "experiment"}``.
    A release over the dataset's budget is recorded in MLflow and ends the run Failed."""
    with refusals_recorded(config):
        return _user_level_steps(config)


def _user_level_steps(config: UserLevelConfig) -> dict[str, Any]:
    frame, data_fp = load_user_level_data(config)
    plan = plan_user_level(config, frame, data_fp)
    release_id = f"{flow_run.id}/{config.name}"
    out = release_user_level(config, frame, plan, release_id)
    del frame
    metrics = plan.metrics()
    tracked = log_user_level_release(config, out["release"], metrics, release_id,
                                     str(flow_run.id), str(flow_run.name), out["spent"])
    return {"release": out["release"], "plan": metrics, "release_id": release_id,
            "reused": out["reused"], "spent": out["spent"], "mlflow": tracked,
            "experiment": config.experiment_name}


def run_user_level_from_config(config: UserLevelConfig) -> dict[str, Any]:
    """Entry point of ``dpcausal run`` for a ``kind: user_level`` config."""
    return user_level_release(config=config)


def print_user_level_release(result: dict[str, Any], console: Any) -> None:
    """The release as a table: privacy loss with and without Clip-User, ATEs, where recorded."""
    from rich.table import Table

    rel, p, plan = result["release"], result["release"]["privacy"], result["plan"]
    table = Table(title="User-level DP release (Clip-User)", show_header=False,
                  title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("privacy loss per unit",
                  f"{p['epsilon_total']:.4g} = K x eps ({p['K']} x {p['epsilon_per_cell']:.4g}); "
                  f"without Clip-User {p['epsilon_parallel']:.4g} (G_1={p['G1']}), naive "
                  f"{p['epsilon_naive']:.4g} ({p['n_cells']} cells)")
    table.add_row("suppression", f"{plan['frac_records_suppressed']:.2%} of records, "
                  f"{int(plan['n_suppressed_pairs'])} unit-cell pairs, {int(plan['n_stages'])} "
                  "stage(s)")
    if rel["ate"] is not None:
        ate = rel["ate"]
        keys = [k for k in ate if k not in ("ate", "se", "ate_bias_bound", "noise_scale_ate",
                                            "c_treated", "c_control")]
        for i, value in enumerate(ate["ate"]):
            label = "/".join(f"{k}={ate[k][i]}" for k in keys) or "all"
            table.add_row(f"ATE {label}", f"{value:.4g}  (se {ate['se'][i]:.3g}, DP noise scale "
                          f"{ate['noise_scale_ate'][i]:.3g})")
        pooled = rel["ate_pooled"]
        table.add_row("pooled ATE", f"{pooled['ate']:.4g}  (se {pooled['se']:.3g}, "
                      f"{pooled['n_strata']} strata)")
    spent = result.get("spent")
    if spent:
        table.add_row("dataset spend", f"epsilon={spent['epsilon']:.4g} at delta={spent['delta']:g}"
                      f" over {spent['n_charges']} release(s)")
    table.add_row("release id", result["release_id"] + ("  (stored result, no new noise)"
                                                        if result.get("reused") else ""))
    table.add_row("MLflow", f"experiment {result['experiment']!r}, run "
                  f"{result['mlflow']['run_id']} (cells.csv, ate.csv, release.png)")
    for note in rel["notes"]:
        table.add_row("note", note)
    console.print(table)
