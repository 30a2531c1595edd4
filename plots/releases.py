"""A forest plot of several releases (estimate and CI per release, one row each) as SVG text:
the analysts' page draws their releases with it (:mod:`gateway.page`), from released numbers
only."""

from __future__ import annotations

import io
from collections.abc import Sequence

from plots.figures import pyplot


def releases_forest_svg(rows: Sequence[tuple[str, float, float, float]],
                        title: str = "Your releases") -> str:
    """SVG of one row per ``(label, estimate, ci_low, ci_high)``, first row on top."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 0.5 * len(rows) + 1.4))
    try:
        ys = list(range(len(rows)))[::-1]
        for y, (_, est, lo, hi) in zip(ys, rows, strict=True):
            ax.plot([lo, hi], [y, y], color="#1f4e79", linewidth=2)
            ax.plot([est], [y], marker="s", color="#1f4e79", markersize=6)
        ax.axvline(0.0, color="#888888", linewidth=0.8, linestyle="--")
        ax.set_yticks(ys, [label for label, *_ in rows])
        ax.set_ylim(-0.8, len(rows) - 0.2)
        ax.set_xlabel("estimate with its confidence interval")
        ax.set_title(title)
        fig.tight_layout()
        out = io.StringIO()
        fig.savefig(out, format="svg")
    finally:
        plt.close(fig)
    return out.getvalue()
