"""Figure of the federated reproduction (spec federated_secagg.md §6): CI width against epsilon per
mechanism (Agg backend)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from plots.figures import pyplot, save


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
