"""Figures and thin Prefect tasks for the Clip-User reproduction
(``flows/reproduce_user_level.py``).

Each ``plot_*`` draws the equivalent of one paper figure from a DataFrame of
``reproduce.user_level`` and writes a PNG (Agg backend) named ``user_level_fig<k>.png``.
The tasks only call the library.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from reproduce import user_level as experiments
from tasks.figures import pyplot, save

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


def plot_privacy_synthetic(synth: pd.DataFrame, path: Path) -> str:
    """Figs 3-5 equivalent: P_hat vs eps per gamma against 12 eps (one panel per gamma)."""
    plt = pyplot()
    s = experiments.summarise(synth, ["gamma"])
    gammas = sorted(s["gamma"].unique())
    fig, axes = plt.subplots(1, len(gammas), figsize=(4.2 * len(gammas), 3.8), sharey=True)
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
    plt = pyplot()
    s = experiments.summarise(synth, ["gamma"])
    gammas = sorted(s["gamma"].unique())
    fig, axes = plt.subplots(1, len(gammas), figsize=(4.2 * len(gammas), 3.8), sharey=True)
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


def plot_release(release: dict, path: Path) -> str:
    """A release at a glance: per-stratum ATE with +-1.96 SE (sampling) and +-1.96 noise scale
    (DP noise), and the privacy loss per unit with Clip-User against the two baselines."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8), width_ratios=(2, 1))
    if release.get("ate"):
        ate = pd.DataFrame(release["ate"])
        label = ate.drop(columns=["ate", "se", "ate_bias_bound", "noise_scale_ate", "c_treated",
                                  "c_control"], errors="ignore")
        names = (label.apply(lambda r: ", ".join(f"{k}={v}" for k, v in r.items()), axis=1)
                 if label.shape[1] else ["all"] * len(ate))
        y = range(len(ate))
        ax1.errorbar(ate["ate"], y, xerr=1.96 * ate["noise_scale_ate"], fmt="none",
                     ecolor="#b03a2e", alpha=0.5, lw=6, label="+-1.96 DP noise scale")
        ax1.errorbar(ate["ate"], y, xerr=1.96 * ate["se"], fmt="o", color="#1f4e79",
                     capsize=3, label="ATE +-1.96 SE")
        pooled = release.get("ate_pooled") or {}
        if pooled.get("ate") is not None:
            ax1.axvline(pooled["ate"], color="k", ls="--", lw=1, label="pooled ATE")
        ax1.set_yticks(list(y), list(names))
        ax1.set_xlabel("private ATE per stratum")
        ax1.legend(fontsize=8, loc="best")
    else:
        ax1.text(0.5, 0.5, "no arm column: cell means only", ha="center", transform=ax1.transAxes)
    p = release["privacy"]
    bars = {"Clip-User\nK eps": p["epsilon_total"], "parallel\nG_1 eps": p["epsilon_parallel"],
            "naive\ncells eps": p["epsilon_naive"]}
    ax2.bar(list(bars), list(bars.values()), color=["#2e7d32", "#7f8c8d", "#bdc3c7"])
    ax2.set_ylabel("epsilon per unit")
    ax2.set_title(f"K={p['K']} of G_1={p['G1']}", fontsize=9)
    return save(fig, path)
