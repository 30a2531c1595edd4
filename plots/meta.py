"""The forest plot of a meta-analysis as a PNG file (the CLI's MLflow artifact): the library's
one renderer, :meth:`dpcausal.meta.MetaResult.plot`, on the headless backend."""

from __future__ import annotations

from pathlib import Path

from dpcausal.meta import MetaResult
from plots.figures import pyplot


def forest_plot(result: MetaResult, path: str | Path) -> Path:
    """Write ``result.plot()`` as a PNG to ``path`` and return the path."""
    plt = pyplot()
    fig = result.plot().figure
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
