"""Benchmark of a CLI release against the same computation in Python (issue 27 targets: a
3,000-row release through the CLI within 5 s on a served stack, within 10 s cold).

n = 3,000 rows of experiment A (spec §6.2), the demo's estimator settings with K = 150, release
mode (each run is charged to a bench dataset with a large cap), in a temporary data folder:

- python: ``PrivateATE(...).fit(df, ...)`` in this process, imports excluded (the computation,
  the baseline);
- cli, cold: ``dpcausal run CONFIG`` with no Prefect server running: it starts a temporary,
  API-only one that boots while the flow's modules import (``deploy/prefect_api.py``);
- cli, cold, Prefect's ephemeral server: the same with that step left to Prefect (its own
  temporary server, started by the first API call, after the imports);
- cli, served: the same after ``dpcausal serve --no-deploy`` (the command uses that stack).

Each path runs ``--repeats`` times; the table shows the median wall time, the overhead over
python, the target, and the median CPU seconds of the command and the children it waited for
(``RUSAGE_CHILDREN``: the temporary server included, a served stack's servers not), which a loaded
machine distorts less than wall time; the load average is printed before and after.

    .venv/bin/python bench/cli_release.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import resource
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
        "ledger": {"dataset_id": "bench-cli"}}))
    return config


def _python(config: Path) -> tuple[float, float]:
    import pandas as pd

    from dpcausal import PrivateATE

    frame = pd.read_csv(yaml.safe_load(config.read_text())["data"]["path"])
    with warnings.catch_warnings():  # the session's repeated-release notice
        warnings.simplefilter("ignore")
        t0, c0 = time.perf_counter(), time.process_time()
        PrivateATE(**{**ESTIMATOR, "outcome_bounds": tuple(ESTIMATOR["outcome_bounds"])}).fit(
            frame, treatment="A", outcome="Y")
        return time.perf_counter() - t0, time.process_time() - c0


# `dpcausal` with deploy.prefect_api's server step replaced by nothing: Prefect starts its own
EPHEMERAL = """
import contextlib, sys
import deploy.prefect_api as api

@contextlib.contextmanager
def prefect_api(meanwhile, server=None):
    meanwhile()
    yield

api.prefect_api = prefect_api
api.boot_temporary_server = lambda: None
from cli.main import main
main(sys.argv[1:], prog_name="dpcausal")
"""


def cli_workdir(prefix: str) -> tuple[Path, dict[str, str]]:
    """A fresh temporary folder and the environment of a ``dpcausal`` command run in it: none of
    the caller's Prefect, MLflow or dpcausal settings, the data folder inside it."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "MLFLOW_", "DPCAUSAL_"))}
    return folder, {**env, "DPCAUSAL_DATA": str(folder / "data")}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cli(args: list[str], env: dict[str, str], command: tuple[str, ...] = (DPCAUSAL,)
         ) -> tuple[float, float]:
    """(wall, CPU) seconds of one command."""
    t0, c0 = time.perf_counter(), _children_cpu()
    done = subprocess.run([*command, *args], env=env, cwd=ROOT, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if done.returncode != 0:
        raise SystemExit(f"dpcausal {' '.join(args)} exited {done.returncode}:\n"
                         f"{done.stdout}{done.stderr}")
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    folder, env = cli_workdir("dpcausal-bench-cli-")
    config = _write(folder, args.n)
    _cli(["ledger", "register", "bench-cli", str(config), "--zeta", "1000"], env)  # the curator
    load_before = os.getloadavg()
    run = ["run", str(config), "--no-progress"]
    python = [_python(config) for _ in range(args.repeats)]
    cold, ephemeral = [], []
    for _ in range(args.repeats):  # alternated: the machine's load affects both alike
        cold.append(_cli(run, env))
        ephemeral.append(_cli(run, {**env, "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS":
                                    "90"}, (sys.executable, "-P", "-c", EPHEMERAL)))
    t0 = time.perf_counter()
    _cli(["serve", "--no-deploy", "--prefect-port", "4290", "--mlflow-port", "5090"], env)
    started = time.perf_counter() - t0
    try:
        served = [_cli(run, env) for _ in range(args.repeats)]
    finally:
        _cli(["stop"], env)
    base = statistics.median(w for w, _ in python)
    rows = [("python (computation)", python, None),
            ("cli, cold (temporary server)", cold, 10.0),
            ("cli, cold (Prefect's ephemeral)", ephemeral, 10.0),
            ("cli, served stack", served, 5.0)]
    print(f"\n=== CLI release vs Python, n = {args.n:,}, K = {ESTIMATOR['n_folds']}, "
          f"{args.repeats} runs each; cores: {os.cpu_count()}; load average (1, 5, 15 min) "
          f"before {_load(load_before)}, after {_load(os.getloadavg())} ===")
    print(f"{'path':32s} {'median s':>9s} {'over python s':>14s} {'target s':>9s} "
          f"{'CPU s':>7s}  wall s of each run")
    for name, runs, target in rows:
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        over = "" if target is None else f"{wall - base:14.2f}"
        print(f"{name:32s} {wall:9.2f} {over:>14s} {'' if target is None else target:>9} "
              f"{cpu:7.2f}  " + ", ".join(f"{w:.2f}" for w, _ in runs))
    print(f"(dpcausal serve --no-deploy took {started:.1f} s, not counted)")


def _load(avg: tuple[float, float, float]) -> str:
    return ", ".join(f"{x:.1f}" for x in avg)

if __name__ == "__main__":
    main()
