"""Figures of experiments A-D (spec dp_ate_ensemble.md §6; the paper's Figs. 1-4): violins of the
estimates against the true ATE and the K sweep of Exp. D (Agg backend)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from plots.figures import pyplot, save
from reproduce.ate import experiments as ex

MODE_LABEL = {"theorem1": "Theorem 1", "lemma": "lemma", ex.NOT_A_CLAIM: "released code *",
              ex.OWN_RELEASE: "comparators' own releases (LPGM19, GR25)"}


def plot_violins(estimates: pd.DataFrame, private: pd.DataFrame, experiment: str,
                 path: Path) -> str:
    """Violin plots of the estimates against the true ATE (the paper's Figs. 1-2): pre-noise,
    then with the noise of each sensitivity mode (Exp. D: pre-noise only, as Figs. 3-4)."""
    plt = pyplot()
    exp = ex.EXPERIMENTS[experiment]
    panels = [("pre-noise (non-private)", estimates, "tau_hat")]
    if exp.private:
        panels += [(f"+ noise, {MODE_LABEL[m]}", private[private["mode"] == m], "ate")
                   for m in private["mode"].unique()]
    names = list(dict.fromkeys(estimates["method"]))
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(7, 0.55 * len(names)), 3 * len(panels)),
                             squeeze=False)
    for ax, (title, frame, col) in zip(axes[:, 0], panels, strict=True):
        present = [m for m in names if m in set(frame["method"])]
        data = [frame.loc[frame["method"] == m, col].to_numpy(float) for m in present]
        ax.violinplot(data, showmedians=True)
        ax.axhline(exp.true_ate, color="k", ls="--", lw=1, label=f"true ATE {exp.true_ate:.4g}")
        half = _view(data, exp.true_ate)
        if half is not None:
            ax.set_ylim(exp.true_ate - half, exp.true_ate + half)
            title += f" (view: truth ± {half:.2g}; wider violins are cut)"
        ax.set_xticks(range(1, len(present) + 1), present, rotation=35, ha="right", fontsize=7)
        ax.set_title(f"Exp. {experiment} ({exp.figure}): {title}", fontsize=9)
        ax.legend(fontsize=7, loc="upper right")
    if exp.private:
        fig.text(0.01, 0.003, "* released-code constants: comparison only, not a valid privacy "
                 "claim", fontsize=7)
    return save(fig, path, dpi=100)


def _view(data: list[np.ndarray], truth: float) -> float | None:
    """Half-height of a readable view: every method's median and 4x the median per-method spread
    (at least 0.02), or None when every violin fits anyway (the noisiest methods would otherwise
    flatten the rest)."""
    data = [x for x in data if len(x)]
    spread = [np.quantile(np.abs(x - truth), 0.95) for x in data]
    half = max(4 * float(np.median([np.std(x) for x in data])),
               1.15 * max(abs(float(np.median(x)) - truth) for x in data), 0.02)
    return half if spread and max(spread) > half else None


def plot_k_sweep(summary: pd.DataFrame, path: Path) -> str:
    """Exp. D (Figs. 3-4): bias and SD of the pre-noise estimate against K, per estimator."""
    plt = pyplot()
    s = summary[summary["method"].str.contains(" K=")].copy()
    s["family"] = s["method"].str.split(" K=").str[0]
    s["K"] = s["method"].str.split(" K=").str[1].astype(int)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for fam, d in s.groupby("family", sort=False):
        d = d.sort_values("K")
        a1.errorbar(d["K"], d["bias"], yerr=d["sd"], marker="o", ms=3, capsize=2, label=fam)
        a2.plot(d["K"], d["sd"], marker="o", ms=3, label=fam)
    a1.axhline(0, color="k", lw=0.8)
    a1.set(xlabel="K (folds)", ylabel="bias (bars: ± SD)", title="Exp. D: bias vs K (pre-noise)")
    a2.set(xlabel="K (folds)", ylabel="SD over repetitions", yscale="log",
           title="Exp. D: spread vs K (pre-noise)")
    a1.legend(fontsize=8)
    return save(fig, path, dpi=100)
