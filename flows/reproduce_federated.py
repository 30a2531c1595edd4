"""``reproduce_federated`` flow: Tables 2-7 of Chen, Cormode et al. by recipe R -> figure -> report.

Writes ``<out_dir>/federated.md`` and ``<out_dir>/figures/federated_width_vs_epsilon.png`` and
returns the report path. ``reps=None`` uses 4000 repetitions per cell for n = 1e3 tables and 1000
for n = 1e4 (a few minutes on 2 cores); an integer sets every table's repetitions.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from reproduce.federated.experiments import TABLES
from tasks.reproduce_federated import draw_width_figure, simulate_table, write_report

ROOT_SEED = 20240502


def table_reps(reps: int | None) -> dict[str, int]:
    """Repetitions per table; reps=None gives the default (reduced) plan."""
    if reps is None:
        return {t: (4000 if n <= 1000 else 1000) for t, (_, n, _) in TABLES.items()}
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 2:
        raise ValueError(f"reps must be None or an integer >= 2, got {reps!r}")
    return {t: reps for t in TABLES}


@flow(name="reproduce_federated", persist_result=False, retries=0)
def reproduce_federated(out_dir: str = "reports", reps: int | None = None) -> str:
    """Simulate the table cells, save the figure and write ``<out_dir>/federated.md``."""
    plan = table_reps(reps)
    tables, timings = {}, {}
    for i, (table, r) in enumerate(plan.items()):
        tables[table], timings[table] = simulate_table(table, r, ROOT_SEED + i)
    figure = draw_width_figure(str(Path(out_dir) / "figures"))
    settings = {"repetitions per cell": ", ".join(f"{t}: {r}" for t, r in plan.items()),
                "root seed": f"{ROOT_SEED} (+ table index)", "delta": "1e-6",
                "paper repetitions": "10,000 per cell"}
    return write_report(tables, figure, settings, timings, str(Path(out_dir) / "federated.md"))
