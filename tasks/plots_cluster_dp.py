"""Figures and thin Prefect tasks for the Cluster-DP reproduction
(``flows/reproduce_cluster_dp.py``).

Each ``plot_*`` draws one paper figure from an experiment DataFrame of
``reproduce.cluster_dp`` and writes a PNG (Agg backend); figure names follow the paper's
ids (fig2_1a ... fig7) with a ``cluster_dp_`` prefix. The tasks only call the library.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from scipy import stats

from reproduce import cluster_dp as experiments
from reproduce.cluster_dp_report import render
from tasks.figures import pyplot, save

_COL = {
    "cluster": "#1f4e79",
    "cluster_free": "#b03a2e",
    "uniform_stratified": "#2e7d32",
    "uniform_unstratified": "#9e9d24",
    "cluster_dp": "#1f4e79",
    "noisy_ht": "#6a1b9a",
    "noisy_histogram": "#ef6c00",
}
_LABEL = {
    "cluster": "Cluster-DP",
    "cluster_free": "Cluster-Free-DP",
    "uniform_stratified": "Uniform (strat.)",
    "uniform_unstratified": "Uniform (unstrat.)",
    "cluster_dp": "Cluster-DP",
    "noisy_ht": "Noisy-HT",
    "noisy_histogram": "Noisy-Histogram",
}




def plot_fig2_1a(df: pd.DataFrame, path: Path) -> str:
    """Fig. 2(1.a): variance vs gamma K at eps = 0.2 (mean ± sd over sub-populations, log scale)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for mech, d in df.groupby("mechanism"):
        s = d.groupby("gamma_k")["var"].agg(["mean", "std"]).fillna(0.0)
        ax.errorbar(
            s.index,
            s["mean"],
            yerr=s["std"],
            label=_LABEL[mech],
            color=_COL[mech],
            marker="o",
            ms=3,
        )
    ax.set(
        yscale="log",
        xlabel="gamma x K",
        ylabel="Var[tau_hat] (Monte Carlo)",
        title="Fig. 2(1.a): eps = 0.2, delta = 1e-4, sigma = 10 (paper accounting)",
    )
    ax.legend(fontsize=8)
    return save(fig, path)


def plot_fig2_1b(df: pd.DataFrame, path: Path) -> str:
    """Fig. 2(1.b): minimum variance over the (sigma, gamma) grid vs eps."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    best = df[df["best"]].groupby(["mechanism", "eps"])["var"].mean()
    for mech in best.index.get_level_values(0).unique():
        s = best.loc[mech]
        ax.plot(
            s.index,
            s.to_numpy(),
            marker="o",
            ms=3,
            label=_LABEL[mech],
            color=_COL[mech],
            ls="--" if "uniform" in mech else "-",
        )
    ax.set(
        yscale="log",
        xlabel="epsilon",
        ylabel="min Var over grid (analytic)",
        title="Fig. 2(1.b): privacy-variance trade-off, delta = 1e-4",
    )
    ax.legend(fontsize=8)
    return save(fig, path)


def plot_fig2_1c(df: pd.DataFrame, path: Path) -> str:
    """Fig. 2(1.c): Var[Cluster-DP]/Var[Cluster-Free-DP] vs beta, one line per (seed, lambda)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for (seed, lam), d in df.groupby(["seed", "lam"]):
        ax.plot(
            d["beta"],
            d["ratio"],
            marker="o",
            ms=3,
            ls="-" if lam == 0.5 else "--",
            label=f"seed {seed}, lambda {lam}",
        )
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set(
        xlabel="beta (higher = more homogeneous clusters)",
        ylabel="variance ratio",
        title="Fig. 2(1.c): Cluster-DP / Cluster-Free-DP at equal privacy",
    )
    ax.legend(fontsize=7, ncol=2)
    return save(fig, path)


def plot_fig2_1d(df: pd.DataFrame, path: Path) -> str:
    """Fig. 2(1.d): variance vs eps on YouTube-like synthetic data, with the non-private line."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for mech, d in df.groupby("mechanism"):
        ax.plot(d["eps_paper"], d["var"], marker="o", ms=3, label=_LABEL[mech], color=_COL[mech])
    ax.axhline(df["var_nodp"].iloc[0], color="black", ls=":", label="non-private")
    ax.set(
        yscale="log",
        xlabel="epsilon (paper accounting)",
        ylabel="Var[tau_hat] (Monte Carlo)",
        title="Fig. 2(1.d): YouTube-like synthetic (not the SNAP data)",
    )
    ax.legend(fontsize=8)
    return save(fig, path)


def plot_hist(err: np.ndarray, path: Path, title: str) -> str:
    """Fig. 3: histogram of tau_hat - tau with the fitted normal density."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.hist(err, bins=30, density=True, color="#90a4ae")
    xs = np.linspace(err.min(), err.max(), 200)
    ax.plot(xs, stats.norm.pdf(xs, err.mean(), err.std(ddof=1)), color="#b03a2e")
    ax.axvline(0, color="black", lw=0.8)
    ax.set(xlabel="tau_hat - tau", ylabel="density", title=title)
    return save(fig, path)


def plot_qq(err: np.ndarray, path: Path, title: str) -> str:
    """Figs. 4/7: normal QQ-plot of tau_hat - tau."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    (osm, osr), (slope, icpt, _) = stats.probplot(err, dist="norm")
    ax.plot(osm, osr, ".", ms=3, color="#1f4e79")
    ax.plot(osm, slope * osm + icpt, color="#b03a2e")
    ax.set(xlabel="normal quantiles", ylabel="sample quantiles", title=title)
    return save(fig, path)


def plot_fig5(df: pd.DataFrame, path: Path) -> str:
    """Fig. 5: empirical gap against the Theorem 3.5 band (lower edge = first term)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.fill_between(
        df["beta"], df["first_term"], df["bound"], color="#cfd8dc", label="Theorem 3.5 band"
    )
    ax.errorbar(
        df["beta"],
        df["gap"],
        yerr=2 * df["gap_se"],
        marker="o",
        ms=3,
        color="#1f4e79",
        label="empirical gap ± 2 s.e.",
    )
    ax.plot(df["beta"], df["first_term"], color="#b03a2e", label="first term")
    ax.set(
        yscale="log", xlabel="beta", ylabel="Var_DP,z - Var_z[NoDP]", title="Fig. 5: Theorem 3.5"
    )
    ax.legend(fontsize=8)
    return save(fig, path)


def plot_fig6(df: pd.DataFrame, path: Path) -> str:
    """Fig. 6: one-shot |bias| vs eps, mean ± sd over DP seeds."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for mech, d in df.assign(ab=df["bias"].abs()).groupby("mechanism"):
        s = d.groupby("eps")["ab"].agg(["mean", "std"])
        ax.errorbar(
            s.index,
            s["mean"],
            yerr=s["std"],
            marker="o",
            ms=3,
            label=_LABEL[mech],
            color=_COL[mech],
        )
    ax.set(
        yscale="log",
        xlabel="epsilon",
        ylabel="|conditional bias|",
        title="Fig. 6: one-shot release bias (paper accounting)",
    )
    ax.legend(fontsize=8)
    return save(fig, path)


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
