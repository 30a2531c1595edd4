"""Thin Prefect tasks of the experiments A-D reproduction (``flows/experiments.py``).

The per-repetition work is cached per (experiment, repetition, method group = propensity model,
outcome model, K) plus size overrides and :data:`CODE_VERSION`: small inputs only, never arrays
(recipe §4). Bump :data:`CODE_VERSION` when ``reproduce.ate`` or the estimator changes.
MLflow logging follows ``tasks/tracking.py`` (lazy ``import mlflow``; evaluation=true: these are
simulations, so the non-private values may be logged). ``finish_experiment`` privatises one
experiment's estimates, summarises them, draws its figures (``reproduce.ate.plots``) and logs its
run; ``write_report`` writes ``reproduction.md`` (``reproduce.ate.report``).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import INPUTS, NO_CACHE, TASK_SOURCE, CacheKeyFnPolicy

from reproduce.ate import experiments as ex
from reproduce.ate.plots import plot_k_sweep, plot_violins
from reproduce.ate.report import render

CODE_VERSION = "experiments-v2"  # v2: the comparators LPGM19, GR25 (own releases)
POLICY = INPUTS + TASK_SOURCE + CacheKeyFnPolicy(cache_key_fn=lambda ctx, p: CODE_VERSION)


@task(name="experiment_group", cache_policy=POLICY, retries=0,
      task_run_name="{experiment}-rep{rep}-{group}")
def run_group(experiment: str, rep: int, group: list, n: int | None = None,
              max_folds: int | None = None) -> list[dict[str, Any]]:
    """Non-private tau_hat, V_hat of one repetition's method group (one set of fold fits)."""
    return ex.run_group(experiment, rep, tuple(group), n=n, max_folds=max_folds)


@task(name="log_experiment", cache_policy=NO_CACHE, persist_result=False, retries=1)
def log_experiment(experiment: str, settings: dict[str, Any], metrics: dict[str, float],
                   artifacts: list[str], flow_run_id: str, flow_run_name: str) -> dict[str, str]:
    """One MLflow run in the experiment's figure (``dpcausal/reproduce-<figure>``), tagged
    evaluation=true; returns ``{"run_id", "experiment_id"}``."""
    import mlflow
    from mlflow.entities import Metric, Param

    from tasks.tracking import ensure_experiment

    exp = ex.EXPERIMENTS[experiment]
    name = f"dpcausal/reproduce-{exp.figure.lower().replace('.', '').replace(' ', '-')}"
    exp_id = ensure_experiment(name)
    client = mlflow.MlflowClient()
    tags = {"prefect.flow_run_id": flow_run_id, "prefect.flow_run_name": flow_run_name,
            "evaluation": "true", "kind": "reproduction", "experiment": experiment,
            "figure": exp.figure, "note": "released_code rows: not a valid privacy claim"}
    run_id = client.create_run(exp_id, run_name=f"experiment-{experiment}-{flow_run_name}",
                               tags=tags).info.run_id
    try:
        now = int(time.time() * 1000)
        client.log_batch(run_id, params=[Param(k, str(v)[:6000]) for k, v in settings.items()])
        for i in range(0, len(metrics), 900):
            chunk = list(metrics.items())[i:i + 900]
            client.log_batch(run_id, metrics=[Metric(k, float(v), now, 0) for k, v in chunk])
        for path in artifacts:
            client.log_artifact(run_id, path)
        client.set_terminated(run_id, "FINISHED")
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    return {"run_id": run_id, "experiment_id": exp_id}


def metric_key(*parts: Any) -> str:
    """An MLflow-safe metric name from its parts (letters, digits, ``_-./ ``)."""
    text = ".".join(str(p) for p in parts)
    return "".join(c if c.isalnum() or c in "_-./ " else "_" for c in text)


def summary_metrics(tables: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Flat per-method metrics from the summary tables (non-finite values dropped)."""
    out: dict[str, float] = {}
    stats = ("mean", "bias", "sd", "rmse", "q05", "q50", "q95", "coverage", "ci_width")
    for table_name, table in tables.items():
        keys = [c for c in table.columns if c not in stats and c != "reps"]
        for row in table.to_dict("records"):
            for s in stats:
                v = row.get(s)
                if v is not None and pd.notna(v):
                    out[metric_key(table_name, *(row[k] for k in keys), s)] = float(v)
    return out


def write_csv(frame: pd.DataFrame, path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return str(path)


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="dpcausal-exp-"))


@task(name="finish_experiment", cache_policy=NO_CACHE, persist_result=False)
def summarise_experiment(experiment: str, rows: list[dict[str, Any]], out_dir: str) -> dict:
    """Noise per mode (seeded), summaries, the §6.8(b) comparison, figures and the per-rep CSV."""
    est = pd.DataFrame(rows).sort_values(["rep", "method"], kind="stable")
    order = {m.name: i for i, m in enumerate(ex.EXPERIMENTS[experiment].methods)}
    est = est.sort_values(["rep", "method"], key=lambda c: c.map(order) if c.name == "method"
                          else c, kind="stable").reset_index(drop=True)
    point = ex.privatise(est, seed=ex.NOISE_SEED)
    ci = ex.privatise(est, seed=ex.NOISE_SEED + 1, ci_modes=ex.CI_MODES, ci_share=0.1)
    nonprivate = ex.summarise(est, "tau_hat", ["method"])
    private = ex.summarise(point, "ate", ["mode", "method"])
    coverage = ex.summarise(ci, "ate", ["mode", "ci_mode", "sigma2_mode", "method"])
    targets = ex.compare_means(nonprivate, experiment)
    comparators = ex.compare_comparators(est, experiment)
    figs = Path(out_dir) / "figures"
    figures = {"violin": plot_violins(est, point, experiment, figs / f"ate_{experiment}.png")}
    if experiment == "D":
        figures["k_sweep"] = plot_k_sweep(nonprivate, figs / "ate_D_ksweep.png")
    scratch = scratch_dir()
    csvs = [write_csv(est, scratch / f"experiment_{experiment}_reps.csv"),
            write_csv(point, scratch / f"experiment_{experiment}_private.csv"),
            write_csv(coverage, scratch / f"experiment_{experiment}_coverage.csv")]
    tables = {"nonprivate": nonprivate, "private": private, "coverage": coverage,
              "comparators": comparators}
    return {"tables": tables, "targets": targets, "figures": figures, "csvs": csvs,
            "estimates": est}


def finish_experiment(experiment: str, rows: list[dict[str, Any]], seconds: float, out_dir: str,
                      flow_run_id: str, flow_run_name: str,
                      overrides: dict[str, Any]) -> dict[str, Any]:
    """Summaries + MLflow run of one experiment flow; the dict the report is written from."""
    done = summarise_experiment(experiment, rows, out_dir)
    exp = ex.EXPERIMENTS[experiment]
    reps = int(done["estimates"]["rep"].nunique())
    settings = {"experiment": experiment, "figure": exp.figure, "n": overrides["n"] or exp.n,
                "d": exp.d, "K": exp.n_folds, "B_pi": [round(1 / c, 4) for c in exp.clips],
                "outcome_bounds": list(exp.outcome_bounds), "reps": reps,
                "methods": [m.name for m in exp.methods], "max_folds": overrides["max_folds"],
                "zeta": ex.ZETA, "ci_share": 0.1, "noise_seed": ex.NOISE_SEED, "data_seed": 42,
                "folds": "contiguous", "code_version": CODE_VERSION}
    tables = dict(done["tables"])
    metrics = summary_metrics({k: v for k, v in tables.items() if k != "comparators"})
    for row in tables["comparators"].to_dict("records"):
        for stat in ("ours", "our_sd", "coverage", "half-width"):
            if pd.notna(row[stat]):
                metrics[metric_key("comparators", row["method"], stat)] = float(row[stat])
    metrics.update({"seconds": seconds, "seconds_per_rep": seconds / reps,
                    "targets_passed": float(done["targets"]["pass"].sum()) if len(done["targets"])
                    else 0.0, "targets_total": float(len(done["targets"]))})
    tracked = log_experiment(experiment, settings, metrics,
                             [*done["figures"].values(), *done["csvs"]], flow_run_id,
                             flow_run_name)
    return {**done, "settings": settings, "seconds": seconds, "mlflow": tracked}


@task(name="write_reproduction_report", cache_policy=NO_CACHE, persist_result=False)
def write_report(results: dict[str, dict[str, Any]], seconds: float, out_path: str) -> str:
    """Render ``reproduction.md`` (figures linked relative to it) and write it; return its path."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(results, seconds, out.parent))
    return str(out)
