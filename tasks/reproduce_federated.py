"""Thin Prefect tasks of the federated reproduction (``flows/reproduce_federated.py``): they only
call ``reproduce.federated``, ``reproduce.federated.plots`` and ``reproduce.federated.report``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from reproduce.federated import experiments
from reproduce.federated.plots import plot_width_vs_epsilon
from reproduce.federated.report import render


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
