"""Benchmark of a CLI release against the same computation in Python (issue 21 target: at most
3 s above the computation with a served stack, at most 8 s cold).

n = 3,000 rows of experiment A (spec §6.2), the demo's estimator settings with K = 150, release
mode (each run is charged to a bench dataset with a large cap), in a temporary data folder:

- python: ``PrivateATE(...).fit(df, ...)`` in this process, imports excluded (the computation);
- cli, cold: ``dpcausal run CONFIG`` with no Prefect server running (it starts a temporary one
  once the release's checks pass: ``cli/prefect_api.py``);
- cli, served: the same after ``dpcausal serve --no-deploy``: the command runs in the stack's
  warm runner (``cli/warm_runner.py``), which has imported what a release uses;
- cli, served, runner off: the same with ``DPCAUSAL_WARM_RUNNER=off`` (the command imports its
  libraries itself and uses the served stack), the baseline of the runner.

Each path runs ``--repeats`` times; the table shows the median and the overhead over python.

    .venv/bin/python bench/cli_release.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DPCAUSAL = str(Path(sys.executable).parent / "dpcausal")
ESTIMATOR = {"n_folds": 150, "outcome_bounds": [-1.0, 1.0], "zeta": 1.5, "ci_share": 0.1}


def _write(folder: Path, n: int) -> Path:
    import pandas as pd

    from dpcausal.datasets import make_experiment_a

    X, A, Y, _ = make_experiment_a(n, random_state=2026)
    csv = folder / "trial.csv"
    pd.DataFrame({"X1": X[:, 0], "A": A, "Y": Y}).to_csv(csv, index=False)
    config = folder / "bench.yaml"
    config.write_text(yaml.safe_dump({
        "name": "bench", "data": {"path": str(csv)},
        "columns": {"treatment": "A", "outcome": "Y"}, "estimator": ESTIMATOR,
        "ledger": {"dataset_id": "bench-cli"}, "mlflow": {"experiment": "bench-cli"}}))
    return config


def _python(config: Path) -> float:
    import pandas as pd

    from dpcausal import PrivateATE

    frame = pd.read_csv(yaml.safe_load(config.read_text())["data"]["path"])
    with warnings.catch_warnings():  # the session's repeated-release notice
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        PrivateATE(**{**ESTIMATOR, "outcome_bounds": tuple(ESTIMATOR["outcome_bounds"])}).fit(
            frame, treatment="A", outcome="Y")
        return time.perf_counter() - t0


def _cli(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([DPCAUSAL, *args], env=env, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"dpcausal {' '.join(args)} exited {done.returncode}:\n"
                         f"{done.stdout}{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="dpcausal-bench-cli-"))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "MLFLOW_", "DPCAUSAL_"))}
    env["DPCAUSAL_DATA"] = str(folder / "data")
    config = _write(folder, args.n)
    _cli(["ledger", "set-budget", "bench-cli", "--zeta", "1000"], env)
    run = ["run", str(config), "--no-progress"]
    python = statistics.median(_python(config) for _ in range(args.repeats))
    cold = [_cli(run, env) for _ in range(args.repeats)]
    t0 = time.perf_counter()
    _cli(["serve", "--no-deploy", "--prefect-port", "4290", "--mlflow-port", "5090"], env)
    started = time.perf_counter() - t0
    try:
        served = [_cli(run, env) for _ in range(args.repeats)]
        own = [_cli(run, {**env, "DPCAUSAL_WARM_RUNNER": "off"}) for _ in range(args.repeats)]
    finally:
        _cli(["stop"], env)
    rows = [("python (computation)", python, None, None),
            ("cli, cold (temporary server)", statistics.median(cold), cold, 8.0),
            ("cli, served stack (warm runner)", statistics.median(served), served, 3.0),
            ("cli, served stack, runner off", statistics.median(own), own, None)]
    print(f"\n=== CLI release vs Python, n = {args.n:,}, K = {ESTIMATOR['n_folds']}, "
          f"{args.repeats} runs each; cores: {os.cpu_count()}, load {os.getloadavg()[0]:.1f} ===")
    print(f"{'path':32s} {'median s':>9s} {'over python s':>14s} {'target s':>9s}  runs")
    for name, median, runs, target in rows:
        over = "" if runs is None else f"{median - python:14.2f}"
        print(f"{name:32s} {median:9.2f} {over:>14s} {'' if target is None else target:>9}  "
              + ("" if runs is None else ", ".join(f"{r:.2f}" for r in runs)))
    print(f"(dpcausal serve --no-deploy took {started:.1f} s, not counted)")


if __name__ == "__main__":
    main()
