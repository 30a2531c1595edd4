"""Figure and thin Prefect tasks for the federated reproduction (``flows/reproduce_federated.py``).

The tasks only call ``reproduce.federated`` / ``federated_report``; the plot is drawn here with
the Agg backend.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from reproduce import federated as experiments
from reproduce.federated_report import render
from tasks.figures import pyplot, save


def plot_width_vs_epsilon(df: pd.DataFrame, path: Path) -> str:
    """Width of the 90% CI against epsilon, one line per mechanism (log scale)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mech, sub in df.groupby("mechanism", sort=False):
        style = "--" if "Gaussian" in mech else ("-" if "PBM" in mech else ":")
        ax.plot(sub["epsilon"], sub["width"], style, marker="o", ms=3, label=mech)
    ax.set_yscale("log")
    ax.set_xlabel("ε (δ = 1e-6)")
    ax.set_ylabel("90% CI width")
    ax.set_title("PATE, n_c = n_t = 500, s = 0.01: width vs ε per mechanism")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return save(fig, path)


@task(name="federated_table", persist_result=False, cache_policy=NO_CACHE)
def simulate_table(table: str, reps: int, seed: int) -> tuple[pd.DataFrame, float]:
    """Recipe-R cells of one paper table; returns (frame, seconds)."""
    t = time.perf_counter()
    df = experiments.simulate_table(table, reps, np.random.default_rng(seed))
    return df, time.perf_counter() - t


@task(name="federated_figure", persist_result=False, cache_policy=NO_CACHE)
def draw_width_figure(fig_dir: str) -> str:
    """Width-vs-epsilon PNG under ``fig_dir``; returns its path."""
    df = experiments.width_curves(n_g=500, s2=0.01**2)
    return plot_width_vs_epsilon(df, Path(fig_dir) / "federated_width_vs_epsilon.png")


@task(name="federated_report", persist_result=False, cache_policy=NO_CACHE)
def write_report(tables: dict[str, pd.DataFrame], figure: str, settings: dict[str, Any],
                 timings: dict[str, float], out_path: str) -> str:
    """Render the markdown report (figure link relative to the report) and write it."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    rel = str(Path(figure).resolve().relative_to(out.parent.resolve()))
    out.write_text(render(tables, rel, settings, timings))
    return str(out)
