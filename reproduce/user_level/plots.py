"""Figures of the Clip-User reproduction (spec user_level_clip.md §5): each ``plot_*`` draws the
equivalent of one paper figure from a DataFrame of ``reproduce.user_level`` and writes a PNG (Agg
backend) named ``user_level_fig<k>.png``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from plots.figures import pyplot, save
from reproduce.user_level import experiments

_GAMMA_COL = {3: "#1f4e79", 6: "#b03a2e", 9: "#2e7d32"}


def plot_privacy_itms(itms: pd.DataFrame, path: Path) -> str:
    """Fig. 1 equivalent: P_eps (mean over draws, min-max band) vs eps against 11 eps."""
    plt = pyplot()
    s = experiments.summarise(itms, [])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(s["eps"], s["P_hat"], marker="o", ms=3, label="Clip-User: mean K eps")
    ax.fill_between(s["eps"], s["K_min"] * s["eps"], s["K_max"] * s["eps"], alpha=0.2)
    ax.plot(s["eps"], s["G1"] * s["eps"], "k--", label="baseline G_1 eps = 11 eps")
    ax.set(xscale="log", xlabel="per-cell epsilon", ylabel="total privacy loss",
           title="Fig. 1 equivalent (ITMS-like substitute, G=50, L=223)")
    ax.legend(fontsize=8)
    return save(fig, path)


def plot_error_itms(itms: pd.DataFrame, path: Path) -> str:
    """Fig. 2 equivalent: Ebar vs eps against the baseline E (log-log)."""
    plt = pyplot()
    s = experiments.summarise(itms, [])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(s["eps"], s["E"], "k--", label="original worst-case error E")
    ax.plot(s["eps"], s["E_bar"], marker="o", ms=3, label="after Clip-User + pseudo-user")
    ax.set(xscale="log", yscale="log", xlabel="per-cell epsilon", ylabel="worst-case error",
           title="Fig. 2 equivalent (ITMS-like substitute)")
    ax.legend(fontsize=8)
    return save(fig, path)


def _per_gamma_panels(synth: pd.DataFrame) -> tuple[pd.DataFrame, list[float], Any, Any]:
    """The synthetic sweep summarised per gamma, and one panel per gamma (shared y axis)."""
    s = experiments.summarise(synth, ["gamma"])
    gammas = sorted(s["gamma"].unique())
    fig, axes = pyplot().subplots(1, len(gammas), figsize=(4.2 * len(gammas), 3.8), sharey=True)
    return s, gammas, fig, axes


def plot_privacy_synthetic(synth: pd.DataFrame, path: Path) -> str:
    """Figs 3-5 equivalent: P_hat vs eps per gamma against 12 eps (one panel per gamma)."""
    s, gammas, fig, axes = _per_gamma_panels(synth)
    for ax, gamma in zip(axes, gammas, strict=True):
        d = s[s["gamma"] == gamma]
        ax.plot(d["eps"], d["P_hat"], marker="o", ms=3, color=_GAMMA_COL.get(gamma),
                label="mean K eps (Clip-User)")
        ax.plot(d["eps"], d["G1"] * d["eps"], "k--", label="G eps = 12 eps")
        ax.set(xscale="log", xlabel="per-cell epsilon", title=f"Fig. {gammas.index(gamma) + 3} "
               f"equiv.: gamma={gamma}, q=0.01")
    axes[0].set_ylabel("total privacy loss")
    axes[0].legend(fontsize=8)
    return save(fig, path)


def plot_error_synthetic(synth: pd.DataFrame, path: Path) -> str:
    """Figs 6-8 equivalent: Ebar_hat vs eps per gamma against mean E (log-log)."""
    s, gammas, fig, axes = _per_gamma_panels(synth)
    for ax, gamma in zip(axes, gammas, strict=True):
        d = s[s["gamma"] == gamma]
        ax.plot(d["eps"], d["E"], "k--", label="original E (mean over draws)")
        ax.plot(d["eps"], d["E_bar"], marker="o", ms=3, color=_GAMMA_COL.get(gamma),
                label="Ebar (Clip-User + pseudo-user)")
        ax.set(xscale="log", yscale="log", xlabel="per-cell epsilon",
               title=f"Fig. {gammas.index(gamma) + 6} equiv.: gamma={gamma}")
    axes[0].set_ylabel("worst-case error")
    axes[0].legend(fontsize=8)
    return save(fig, path)
