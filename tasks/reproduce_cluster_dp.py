"""Thin Prefect tasks of the Cluster-DP reproduction (``flows/reproduce_cluster_dp.py``): run one
experiment of ``reproduce.cluster_dp``, draw the figures (``reproduce.cluster_dp.plots``), write
the report (``reproduce.cluster_dp.report``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from reproduce.cluster_dp import experiments
from reproduce.cluster_dp.plots import (
    plot_fig2_1a,
    plot_fig2_1b,
    plot_fig2_1c,
    plot_fig2_1d,
    plot_fig5,
    plot_fig6,
    plot_hist,
    plot_qq,
)
from reproduce.cluster_dp.report import render


@task(name="cluster_dp_experiment", persist_result=False, cache_policy=NO_CACHE)
def run_experiment(name: str, kwargs: dict[str, Any]) -> tuple[pd.DataFrame, float]:
    """Run ``reproduce.cluster_dp.<name>(**kwargs)``; returns (frame, seconds)."""
    t = time.perf_counter()
    df = getattr(experiments, name)(**kwargs)
    return df, time.perf_counter() - t


@task(name="cluster_dp_figures", persist_result=False, cache_policy=NO_CACHE)
def draw_figures(results: dict[str, pd.DataFrame], fig_dir: str) -> dict[str, str]:
    """All figures; returns {figure id: PNG path}."""
    d = Path(fig_dir)
    return {
        "fig2_1a": plot_fig2_1a(results["exp1a"], d / "cluster_dp_fig2_1a.png"),
        "fig2_1b": plot_fig2_1b(results["exp1b"], d / "cluster_dp_fig2_1b.png"),
        "fig2_1c": plot_fig2_1c(results["exp2"], d / "cluster_dp_fig2_1c.png"),
        "fig2_1d": plot_fig2_1d(results["exp3"], d / "cluster_dp_fig2_1d.png"),
        "fig3": plot_hist(
            results["exp4"]["err"].to_numpy(),
            d / "cluster_dp_fig3.png",
            "Fig. 3: tau_hat - tau (GMM, Cluster-DP)",
        ),
        "fig4": plot_qq(
            results["exp4"]["err"].to_numpy(), d / "cluster_dp_fig4.png", "Fig. 4: QQ (GMM)"
        ),
        "fig5": plot_fig5(results["exp5"], d / "cluster_dp_fig5.png"),
        "fig6": plot_fig6(results["exp6"], d / "cluster_dp_fig6.png"),
        "fig7": plot_qq(
            results["exp7"]["err"].to_numpy(),
            d / "cluster_dp_fig7.png",
            "Fig. 7: QQ (YouTube-like synthetic)",
        ),
    }


@task(name="cluster_dp_report", persist_result=False, cache_policy=NO_CACHE)
def write_report(
    results: dict[str, pd.DataFrame],
    figures: dict[str, str],
    settings: dict[str, Any],
    timings: dict[str, float],
    out_path: str,
) -> str:
    """Render the markdown report (figure links relative to the report) and write it."""
    out = Path(out_path)
    rel = {k: str(Path(v).resolve().relative_to(out.parent.resolve())) for k, v in figures.items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(results, rel, settings, timings))
    return str(out)
