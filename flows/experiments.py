"""Experiments A-D of spec dp_ate_ensemble.md §6 as flows: ``experiment_a`` .. ``experiment_d``
and the parent ``reproduce_experiments``, which writes ``<out_dir>/reproduction.md``.

Each experiment flow submits one cached task per (repetition, method group), in parallel on
threads, collects the non-private estimates, adds the noise of each sensitivity mode at summary
time (spec §6.1 decision), draws the figures and logs one MLflow run per paper figure (tagged
evaluation=true: simulations, no ledger, so there is no budget to refuse). The flow only composes
tasks.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.futures import as_completed
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from flows import progress
from reproduce.ate import experiments as ex
from tasks.experiments import finish_experiment, run_group, write_report

# repetitions of the default (full) run; spec §6.1 asks 100, reduced where a repetition is slow
# on 2 shared cores (seconds per repetition measured and stated in reports/reproduction.md)
DEFAULT_REPS = {name: e.default_reps for name, e in ex.EXPERIMENTS.items()}


def _run(experiment: str, reps: int | None, n: int | None, max_folds: int | None,
         out_dir: str) -> dict[str, Any]:
    reps = DEFAULT_REPS[experiment] if reps is None else reps
    if not isinstance(reps, int) or reps < 2:
        raise ValueError(f"reps must be None or an integer >= 2, got {reps!r}")
    start = time.perf_counter()
    progress.phase(f"experiment {experiment}", total=reps)
    groups = list(ex.groups(experiment, max_folds))
    futures = {rep: [run_group.submit(experiment, rep, list(g), n, max_folds) for g in groups]
               for rep in range(reps)}
    owner = {id(f): rep for rep, fs in futures.items() for f in fs}
    left = {rep: len(fs) for rep, fs in futures.items()}
    fresh = dict.fromkeys(futures, False)  # a repetition counts as cached when all its groups were
    rows: list[dict[str, Any]] = []
    for fut in as_completed([f for fs in futures.values() for f in fs]):
        rows.extend(fut.result())
        rep = owner[id(fut)]
        left[rep] -= 1
        fresh[rep] |= fut.state.name != "Cached"
        if left[rep] == 0:
            progress.advance(cached=0 if fresh[rep] else 1)
    seconds = time.perf_counter() - start
    return finish_experiment(experiment, rows, seconds, out_dir, str(flow_run.id),
                             str(flow_run.name), {"n": n, "max_folds": max_folds})


def _experiment_flow(letter: str):
    @flow(name=f"experiment_{letter.lower()}", persist_result=False, retries=0,
          task_runner=ThreadPoolTaskRunner(max_workers=2))
    def experiment(reps: int | None = None, n: int | None = None, max_folds: int | None = None,
                   out_dir: str = "reports") -> dict[str, Any]:
        return _run(letter, reps, n, max_folds, out_dir)

    experiment.__doc__ = (f"Experiment {letter} ({ex.EXPERIMENTS[letter].figure}, spec §6): "
                          "summaries, figures and the MLflow run; ``n``/``max_folds`` shrink it.")
    return experiment


experiment_a = _experiment_flow("A")
experiment_b = _experiment_flow("B")
experiment_c = _experiment_flow("C")
experiment_d = _experiment_flow("D")
FLOWS = {"A": experiment_a, "B": experiment_b, "C": experiment_c, "D": experiment_d}


@flow(name="reproduce_experiments", persist_result=False, retries=0)
def reproduce_experiments(which: list[str] = ["A", "B", "C", "D"],  # noqa: B006 (JSON parameter)
                          reps: int | None = None, out_dir: str = "reports",
                          n: int | None = None, max_folds: int | None = None) -> str:
    """Run the chosen experiments and write ``<out_dir>/reproduction.md``; return its path."""
    bad = [w for w in which if w not in FLOWS]
    if bad or not which:
        raise ValueError(f"which must list experiments among {sorted(FLOWS)}, got {which!r}")
    start = time.perf_counter()
    results = {w: FLOWS[w](reps=reps, n=n, max_folds=max_folds, out_dir=out_dir)
               for w in dict.fromkeys(which)}
    return write_report(results, time.perf_counter() - start,
                        str(Path(out_dir) / "reproduction.md"))
