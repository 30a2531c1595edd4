"""Forest plot of a meta-analysis of private releases (``dpcausal.meta.MetaResult``).

Shows only released numbers: each study's private ATE and CI (labelled with its zeta and pooling
weight), the pooled estimate as a diamond, and the privacy position (no additional charge).
"""

from __future__ import annotations

import math
from pathlib import Path

from dpcausal.meta import MetaResult
from plots.figures import pyplot

_STUDY_COLOUR = "#1f4e79"
_POOLED_COLOUR = "#b03a2e"


def forest_plot(result: MetaResult, path: str | Path) -> Path:
    """Write a PNG forest plot of ``result`` to ``path`` and return the path.

    Studies are drawn top to bottom in input order: a square (area proportional to the pooling
    weight) at the private ATE and a line over its CI (same critical value as the pooled CI);
    the right margin lists zeta, weight and the numbers. The pooled estimate is a diamond over
    its CI, with a dashed vertical line at the pooled ATE.
    """
    plt = pyplot()
    from matplotlib.patches import Polygon
    from matplotlib.transforms import blended_transform_factory

    studies = result.studies
    k = len(studies)
    if not all(math.isfinite(v) for v in (result.ate, *result.ci)):
        raise AssertionError("bug: a meta-analysis with non-finite values reached the plot")

    model = "Fixed-effect" if result.model == "fixed" else "Random-effects (DerSimonian-Laird)"
    weighting = result.weighting.replace("_", " ")
    title = f"{model} meta-analysis of {k} private ATE releases ({weighting} weights)"
    notes = ["Pooling reads released numbers only: no additional privacy charge (\u03b6 +0)."]
    if result.model == "random":
        notes.append(f"Heterogeneity: \u03c4\u00b2 = {result.tau2:.3g}, Q = {result.q:.3g} "
                     f"(df {k - 1}), I\u00b2 = {100 * result.i2:.0f}%.")
    for group in result.privacy["shared_groups"]:
        notes.append(f"Shared people in {', '.join(group['studies'])}: composed "
                     f"\u03b6 = {group['composed_zeta']:.3g} "
                     f"(\u03b5 = {group['composed_epsilon']:.3g} "
                     f"at \u03b4 = {result.privacy['delta']:g}).")
    head = 0.75 + 0.17 * len(notes)  # inches above the axes: title and notes
    fig_height = head + 0.8 + 0.42 * (k + 2)
    fig, ax = plt.subplots(figsize=(9.5, fig_height))
    longest = max(len(str(x)) for x in [*studies["label"], "pooled"])
    fig.subplots_adjust(left=min(0.35, 0.05 + 0.0095 * longest), right=0.60,
                        top=1 - (head + 0.1) / fig_height, bottom=0.75 / fig_height)
    ys = list(range(k + 1, 1, -1))  # studies at k+1 .. 2, pooled at 0
    max_w = max(result.weights) or 1.0
    for y, row in zip(ys, studies.itertuples(), strict=True):
        ax.plot([row.ci_low, row.ci_high], [y, y], color=_STUDY_COLOUR, lw=1.6,
                solid_capstyle="butt")
        size = 30 + 170 * (row.weight / max_w)
        ax.scatter([row.ate], [y], marker="s", s=size, color=_STUDY_COLOUR, zorder=3)
    low, high = result.ci
    diamond = Polygon([(low, 0), (result.ate, 0.38), (high, 0), (result.ate, -0.38)],
                      closed=True, facecolor=_POOLED_COLOUR, edgecolor=_POOLED_COLOUR, zorder=3)
    ax.add_patch(diamond)
    ax.axvline(result.ate, color=_POOLED_COLOUR, lw=1.0, ls="--", zorder=1)
    ax.axhline(1.0, color="0.75", lw=0.8)

    x_lo = min(float(studies["ci_low"].min()), low)
    x_hi = max(float(studies["ci_high"].max()), high)
    pad = 0.06 * (x_hi - x_lo)
    ax.set_xlim(x_lo - pad, x_hi + pad)
    if x_lo - pad < 0 < x_hi + pad:
        ax.axvline(0.0, color="0.5", lw=0.8, ls=":", zorder=1)
    ax.set_ylim(-0.9, k + 1.9)
    ax.set_yticks(ys + [0])
    ax.set_yticklabels([str(x) for x in studies["label"]] + ["pooled"])
    ax.get_yticklabels()[-1].set_fontweight("bold")
    ax.tick_params(axis="y", length=0)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    pct = f"{100 * result.level:g}%"
    ax.set_xlabel(f"private ATE with {pct} CI")

    # right margin: zeta, weight, estimate [CI]
    text = blended_transform_factory(ax.transAxes, ax.transData)
    columns = [(1.03, "\u03b6 (GDP)"), (1.22, "weight"), (1.42, f"ATE [{pct} CI]")]
    for x, head in columns:
        ax.text(x, k + 1.75, head, transform=text, fontsize=9, fontweight="bold", va="center")
    for y, row in zip(ys, studies.itertuples(), strict=True):
        zeta = "n/a" if row.zeta is None or math.isnan(row.zeta) else f"{row.zeta:.3g}"
        cells = (zeta, f"{100 * row.weight:.1f}%",
                 f"{row.ate:.3f} [{row.ci_low:.3f}, {row.ci_high:.3f}]")
        for (x, _), cell in zip(columns, cells, strict=True):
            ax.text(x, y, cell, transform=text, fontsize=9, va="center")
    pooled_cells = ("+0", "100%", f"{result.ate:.3f} [{low:.3f}, {high:.3f}]")
    for (x, _), cell in zip(columns, pooled_cells, strict=True):
        ax.text(x, 0, cell, transform=text, fontsize=9, va="center", fontweight="bold",
                color=_POOLED_COLOUR)

    fig.suptitle(title, x=0.02, ha="left", fontsize=11, fontweight="bold")
    fig.text(0.02, 1 - 0.5 / fig_height, "\n".join(notes), ha="left", va="top", fontsize=8.5,
             color="0.25")
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
