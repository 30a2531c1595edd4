"""The forest plot of a meta-analysis (:meth:`dpcausal.meta.MetaResult.plot`), the one renderer
the CLI's MLflow artifact (``plots.meta.forest_plot``) and Python share.

Shows only released numbers: each study's private ATE and CI (labelled with its zeta and pooling
weight), the pooled estimate as a diamond, and the privacy position (no additional charge; the
composed exposure of releases of the same data and of studies declared to share people).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from dpcausal.meta import MetaResult

_STUDY_COLOUR = "#1f4e79"
_POOLED_COLOUR = "#b03a2e"


def forest(result: MetaResult, ax: Axes | None = None) -> Axes:
    """Draw ``result`` as a forest plot on ``ax`` (a new figure sized to the studies when None)
    and return the Axes.

    Studies are drawn top to bottom in input order: a square (area proportional to the pooling
    weight) at the private ATE and a line over its CI; the right margin lists zeta, weight and
    the numbers. The pooled estimate is a diamond over its CI, with a dashed line at the pooled
    ATE. Title and privacy notes go above the axes.
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plot() needs matplotlib: pip install matplotlib") from exc
    from matplotlib.patches import Polygon
    from matplotlib.transforms import blended_transform_factory

    studies = result.studies
    k = len(studies)
    if not all(math.isfinite(v) for v in (result.ate, *result.ci)):
        raise AssertionError("bug: a meta-analysis with non-finite values reached the plot")
    title, notes = _title(result), _notes(result)
    if ax is None:
        head = 0.75 + 0.17 * len(notes)  # inches above the axes: title and notes
        fig_height = head + 0.8 + 0.42 * (k + 2)
        fig, ax = plt.subplots(figsize=(9.5, fig_height))
        longest = max(len(str(x)) for x in [*studies["label"], "pooled"])
        fig.subplots_adjust(left=min(0.35, 0.05 + 0.0095 * longest), right=0.60,
                            top=1 - (head + 0.1) / fig_height, bottom=0.75 / fig_height)
        fig.suptitle(title, x=0.02, ha="left", fontsize=11, fontweight="bold")
        fig.text(0.02, 1 - 0.5 / fig_height, "\n".join(notes), ha="left", va="top",
                 fontsize=8.5, color="0.25")
    else:
        ax.set_title("\n".join([title, *notes]), loc="left", fontsize=8.5)
    _draw(ax, result, Polygon, blended_transform_factory(ax.transAxes, ax.transData))
    return ax


def _title(result: MetaResult) -> str:
    model = "Fixed-effect" if result.model == "fixed" else "Random-effects (DerSimonian-Laird)"
    weighting = result.weighting.replace("_", " ")
    return (f"{model} meta-analysis of {result.n_studies} private ATE releases "
            f"({weighting} weights)")


def _notes(result: MetaResult) -> list[str]:
    p = result.privacy
    notes = ["Pooling reads released numbers only: no additional privacy charge (\u03b6 +0)."]
    if result.model == "random":
        notes.append(f"Heterogeneity: \u03c4\u00b2 = {result.tau2:.3g}, Q = {result.q:.3g} "
                     f"(df {result.n_studies - 1}), I\u00b2 = {100 * (result.i2 or 0):.0f}%.")
    for same in p["same_data"]:
        zeta = "" if same["composed_zeta"] is None else f": \u03b6 = {same['composed_zeta']:.3g}"
        notes.append(f"{same['releases']} releases of dataset {same['dataset']} pooled as one "
                     f"study (their spends compose{zeta}).")
    for group in p["shared_groups"]:
        zeta = ("" if group["composed_zeta"] is None
                else f"\u03b6 = {group['composed_zeta']:.3g} ")
        notes.append(f"Shared people in {', '.join(group['studies'])}: composed {zeta}"
                     f"(\u03b5 = {group['composed_epsilon']:.3g} "
                     f"at \u03b4 = {group['composed_delta']:.3g}).")
    return notes


def _draw(ax: Any, result: MetaResult, polygon: Any, text: Any) -> None:
    studies = result.studies
    k = len(studies)
    ys = list(range(k + 1, 1, -1))  # studies at k+1 .. 2, pooled at 0
    max_w = max(result.weights) or 1.0
    for y, row in zip(ys, studies.itertuples(), strict=True):
        ax.plot([row.ci_low, row.ci_high], [y, y], color=_STUDY_COLOUR, lw=1.6,
                solid_capstyle="butt")
        size = 30 + 170 * (row.weight / max_w)
        ax.scatter([row.ate], [y], marker="s", s=size, color=_STUDY_COLOUR, zorder=3)
    low, high = result.ci
    ax.add_patch(polygon([(low, 0), (result.ate, 0.38), (high, 0), (result.ate, -0.38)],
                         closed=True, facecolor=_POOLED_COLOUR, edgecolor=_POOLED_COLOUR,
                         zorder=3))
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
