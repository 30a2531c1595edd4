"""``reproduce_user_level`` flow: spec user_level_clip.md §5 experiments -> figures -> report.

Writes ``<out_dir>/user_level.md`` and ``<out_dir>/figures/user_level_*.png`` and returns the report
path. ``reps`` is the number of Monte-Carlo occupancy draws per setting (paper: 10, the default
when ``None``); about 2-3 minutes on 2 cores at 10.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from tasks.reproduce_user_level import draw_figures, run_experiments, write_report

DEFAULT_REPS = 10


@flow(name="reproduce_user_level", persist_result=False, retries=0)
def reproduce_user_level(out_dir: str = "reports", reps: int | None = None) -> str:
    """Run the §5 experiments, save the figures and write ``<out_dir>/user_level.md``."""
    if reps is None:
        reps = DEFAULT_REPS
    if not isinstance(reps, int) or reps < 1:
        raise ValueError(f"reps must be None or an integer >= 1, got {reps!r}")
    results = run_experiments(reps)
    figures = draw_figures(results, str(Path(out_dir) / "figures"))
    return write_report(results, figures, reps, str(Path(out_dir) / "user_level.md"))
