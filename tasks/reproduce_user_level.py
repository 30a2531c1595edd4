"""Thin Prefect tasks of the Clip-User reproduction (``flows/reproduce_user_level.py``): run the
experiments of ``reproduce.user_level``, draw the figures (``reproduce.user_level.plots``), write
the report."""

from __future__ import annotations

import time
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from reproduce.user_level import experiments
from reproduce.user_level.plots import (
    plot_error_itms,
    plot_error_synthetic,
    plot_privacy_itms,
    plot_privacy_synthetic,
)


@task(cache_policy=NO_CACHE)
def run_experiments(reps: int) -> dict:
    """All §5 computations: synthetic grid, ITMS-like grid, the two band tables, and timing."""
    t0 = time.perf_counter()
    out = {"synth": experiments.run_synthetic(reps), "itms": experiments.run_itms_like(reps),
           "bands": experiments.band_comparison(reps),
           "printed": experiments.band_comparison_printed(reps)}
    out["seconds"] = time.perf_counter() - t0
    return out


@task(cache_policy=NO_CACHE)
def draw_figures(results: dict, fig_dir: str) -> dict[str, str]:
    """Write the four PNGs; returns {figure label: path}."""
    d = Path(fig_dir)
    return {
        "Fig. 1 equivalent: privacy loss, ITMS-like": plot_privacy_itms(
            results["itms"], d / "user_level_fig1.png"),
        "Fig. 2 equivalent: worst-case error, ITMS-like": plot_error_itms(
            results["itms"], d / "user_level_fig2.png"),
        "Figs 3-5 equivalent: privacy loss, synthetic": plot_privacy_synthetic(
            results["synth"], d / "user_level_fig3_5.png"),
        "Figs 6-8 equivalent: worst-case error, synthetic": plot_error_synthetic(
            results["synth"], d / "user_level_fig6_8.png"),
    }


@task(cache_policy=NO_CACHE)
def write_report(results: dict, figures: dict[str, str], reps: int, path: str) -> str:
    """Render the markdown (figure links relative to the report) and write it; return the path."""
    out = Path(path)
    rel = {k: str(Path(v).resolve().relative_to(out.parent.resolve())) for k, v in figures.items()}
    text = experiments.render_report(results["synth"], results["itms"], results["bands"],
                                     results["printed"], rel, reps, results["seconds"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return str(out)
