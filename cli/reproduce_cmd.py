"""``dpcausal reproduce TARGET [--reps N] [--out-dir reports]``: the papers' experiments as flows,
each writing its report under ``reports/``.

A-D (and ``all``) are the core paper's experiments (``flows/experiments.py``, report
``reproduction.md``); ``cluster-dp``, ``user-level`` and ``federated`` are the further mechanisms'
reproductions (``flows/reproduce_*.py``). A bar follows the repetitions of A-D; the mechanism
flows report their phases as they finish.
"""

from __future__ import annotations

import importlib
import time

import click

from cli.common import fail, no_progress_option, quiet_console, verbose_option

CORE = ("A", "B", "C", "D")
MECHANISMS = {  # target -> "module:flow(out_dir, reps)"
    "cluster-dp": "flows.reproduce_cluster_dp:reproduce_cluster_dp",
    "user-level": "flows.reproduce_user_level:reproduce_user_level",
    "federated": "flows.reproduce_federated:reproduce_federated",
}
TARGETS = (*CORE, "all", *MECHANISMS)


def _run_core(which: list[str], reps: int | None, out_dir: str, show_progress: bool) -> str:
    from cli.progress_bar import progress_bar
    from flows.experiments import reproduce_experiments

    with progress_bar("reps", enabled=show_progress):
        return reproduce_experiments(which=which, reps=reps, out_dir=out_dir)


def _run_mechanism(target: str, reps: int | None, out_dir: str) -> str:
    from rich.console import Console

    module, attr = MECHANISMS[target].split(":")
    flow = getattr(importlib.import_module(module), attr)
    with Console(stderr=True).status(f"reproducing {target} (a few minutes on 2 cores)..."):
        return flow(out_dir=out_dir, reps=reps)


@click.command()
@click.argument("target", type=click.Choice(TARGETS, case_sensitive=False),
                metavar="[A|B|C|D|all|cluster-dp|user-level|federated]")
@click.option("--reps", type=click.IntRange(min=2), default=None,
              help="Repetitions per setting (default: each report's documented plan).")
@click.option("--out-dir", default="reports", show_default=True,
              help="Folder for the report and its figures/.")
@no_progress_option
@verbose_option
def reproduce(target: str, reps: int | None, out_dir: str, no_progress: bool,
              verbose: bool) -> None:
    """Reproduce a paper's experiments and write its report: A, B, C, D or all (the core
    estimator, reports/reproduction.md), cluster-dp, user-level or federated."""
    quiet_console(verbose)
    start = time.perf_counter()
    target = target.upper() if target.upper() in (*CORE, "ALL") else target.lower()
    try:
        if target in MECHANISMS:
            report = _run_mechanism(target, reps, out_dir)
        else:
            which = list(CORE) if target == "ALL" else [target]
            report = _run_core(which, reps, out_dir, show_progress=not no_progress)
    except (ValueError, TypeError) as exc:
        fail(exc)
    click.echo(f"report written: {report}  ({time.perf_counter() - start:.0f} s)")
