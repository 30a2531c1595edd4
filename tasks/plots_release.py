"""Figure of one release: the private ATE with its CI, and how much of the released variance is
privacy noise. Uses released and public values only."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tasks.figures import pyplot


def noise_share(release: dict[str, Any]) -> float | None:
    """sigma_ate^2 / V_DP: the part of the private variance due to the ATE noise (None w/o CI)."""
    variance = release.get("variance")
    if not variance:
        return None
    return min(1.0, release["noise"]["sigma_ate"] ** 2 / variance)


def plot_release(release: dict[str, Any], path: str | Path) -> Path:
    """Write a PNG: estimate, CI (or a +-1.96 sigma_ate noise band) and the noise share."""
    plt = pyplot()

    ate, sigma = release["ate"], release["noise"]["sigma_ate"]
    share = noise_share(release)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(8, 3), gridspec_kw={"width_ratios": [3, 1]})
    if release.get("ci"):
        lo, hi = release["ci"]
        label = f"{100 * (1 - release.get('alpha', 0.05)):g}% private CI"
    else:
        lo, hi = ate - 1.96 * sigma, ate + 1.96 * sigma
        label = "+-1.96 sd of the privacy noise"
    ax.errorbar([ate], [0], xerr=[[ate - lo], [hi - ate]], fmt="o", capsize=6, label=label)
    ax.axvline(0.0, color="grey", lw=0.8, ls=":")
    ax.set_yticks([])
    ax.set_xlabel("ATE")
    p = release["privacy"]
    ax.set_title(f"{release['estimator'].upper()} private ATE = {ate:.4g}  "
                 f"({p['zeta']:.3g}-GDP, eps={p['epsilon']:.3g})", fontsize=9)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    if share is None:
        bx.text(0.5, 0.5, "no CI released", ha="center", va="center")
        bx.set_axis_off()
    else:
        bx.bar([0], [share], color="tab:red", label="privacy noise")
        bx.bar([0], [1 - share], bottom=[share], color="tab:blue", label="other")
        bx.set_ylim(0, 1)
        bx.set_xticks([])
        bx.set_title(f"noise share of V_DP: {share:.0%}", fontsize=9)
        bx.legend(fontsize=7, frameon=False, loc="upper right")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    if not math.isfinite(ate):
        raise AssertionError("bug: a release with a non-finite ATE reached the plot")
    return out
