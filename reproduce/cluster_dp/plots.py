"""Figures of the Cluster-DP reproduction (spec cluster_dp.md §4): each ``plot_*`` draws one paper
figure from an experiment DataFrame of ``reproduce.cluster_dp`` and writes a PNG (Agg backend);
files are named after the paper's ids (fig2_1a ... fig7) with a ``cluster_dp_`` prefix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from plots.figures import pyplot, save

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
