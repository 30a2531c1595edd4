"""The CLI's own cost (issue 41 §2, issue 42 friction 5): a 10^6-row ``dpcausal run`` beside the
same release by the library in a fresh Python process, in one run, with the load average.

Data: n rows (default 10^6) of :func:`dpcausal.datasets.make_large`, d = 5, as one CSV; release
mode, AIPW, the planner's K and K', zeta 1, propensity clip 0.2, outcome bounds (0, 1); the
dataset registered by its curator (``dpcausal ledger register``) with a large cap, in a
temporary data folder. Alternated, ``--repeats`` times each (the machine's load affects both):

- library: ``python -c`` of ``import pandas, dpcausal``; ``pd.read_csv``; ``PrivateATE.fit``
  in release mode (a fresh process: import, read, fit);
- cli, cold: ``dpcausal run CONFIG`` with no stack (its temporary Prefect server, MLflow);
- phases of one cold run under cProfile: imports, public checks, the temporary server's
  start, the flow, the CSV read, the fold fits, MLflow (cumulative seconds in the main thread).

Then, once each: ``dpcausal serve`` (seconds to a ready stack, deployments included), ``run``
against the served stack, ``run --submit`` (seconds until it returns the flow run's URL) and
the submitted run's completion (until its MLflow run is recorded), then ``dpcausal stop``.
Every figure has its load average (1-minute) beside it; compare ratios of the same run.

    .venv/bin/python bench/cli_cost.py [--n 1000000] [--repeats 3] [--no-served]

Measured on 2026-12-07, 2 cores shared by eight engineers (load average 17-25, so every figure
is several times a quiet machine's; the ratio is of one run), 2 runs each: the library 54.8 s
(import 15.7, read 3.0, fit 31.6), a cold ``dpcausal run`` 268.8 s, 4.91x. The cold run's steps
under cProfile (204 s wall at load 17): imports 86 s cumulative, reading and checking the CSV
after the charge 59 s (its coerce 29 s), the fold fits 27 s, the MLflow store opened during the
temporary server's boot 29 s. The served stack: ``serve`` ready in 129 s (load 20), ``run``
on it 104 s (load 15), ``run --submit`` 22 s to the URL and 84 s to the finished run (load 17).
Later, at load 4 (1 run each): the library 5.23 s (import 1.11, read 0.28, fit 3.48), a cold
``dpcausal run`` 37.40 s, 7.15x; under cProfile (67.8 s wall, load 6.9) reading and checking
the CSV 20.5 s (coerce 9.5 s), the fold fits 15.1 s (they store every fold model in the private
store), imports 17.9 s, the MLflow store 7.6 s during the server's boot, the server's wait 0.4 s.
The release's CSV reader (every cell parsed by the declared types' public rules) is the largest
cost that is not the work: its coerce took 34.8-42.4 s before fed7c22 and 21.8-22.3 s after
(7 columns of 10^6 rows, alternated in one process, load 20).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml
from cli_release import DPCAUSAL, ROOT, _cli, _load, cli_workdir  # bench/ is on sys.path
from partitioned_blocks import write_source

D = 5
ESTIMATOR = {"estimator": "aipw", "outcome_bounds": [0.0, 1.0], "propensity_clip": 0.2,
             "zeta": 1.0}
COVARIATES = [f"x{j + 1}" for j in range(D)]

LIBRARY = """
import time, warnings
t0 = time.perf_counter()
import pandas as pd
from dpcausal import PrivateATE
t1 = time.perf_counter()
frame = pd.read_csv({csv!r})
t2 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    PrivateATE(**{estimator!r}).fit(frame, treatment="A", outcome="Y", covariates={cov!r})
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def _write(folder: Path, n: int) -> tuple[Path, Path]:
    import pandas as pd

    write_source(folder / "parts", n, D, 1, 125_000, seed=2026)
    csv = folder / "trial.csv"
    pd.read_parquet(folder / "parts").drop(columns="id").to_csv(csv, index=False)
    config = folder / "release.yaml"
    config.write_text(yaml.safe_dump({
        "name": "cost", "data": {"path": str(csv)},
        "columns": {"treatment": "A", "outcome": "Y", "covariates": COVARIATES},
        "estimator": ESTIMATOR, "ledger": {"dataset_id": "bench-cost"},
        "mlflow": {"experiment": "bench-cost"}}))
    return csv, config


def _library(csv: Path) -> tuple[float, list[float]]:
    """Wall seconds of the fresh process, and its (import, read, fit) seconds."""
    code = LIBRARY.format(csv=str(csv), cov=COVARIATES,
                          estimator={**ESTIMATOR, "outcome_bounds": (0.0, 1.0)})
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return time.perf_counter() - t0, [float(x) for x in done.stdout.split()]


PROFILED = """
import cProfile, sys
from cli.main import main
profile = cProfile.Profile()
profile.enable()
try:
    main(sys.argv[2:], prog_name="dpcausal", standalone_mode=False)
finally:
    profile.disable()
    profile.dump_stats(sys.argv[1])
"""

#: (label, file suffix, function) of the steps of a cold run, as cProfile sees them in the
#: command's main thread (the fold fits in threads count in the step that waits for them)
STEPS = [("imports (cumulative, every module)", "<frozen importlib._bootstrap>", "_find_and_load"),
         ("public checks before the charge", "tasks/preflight.py", "public_checks"),
         ("temporary Prefect server: wait to answer", "deploy/prefect_api.py", "wait"),
         ("MLflow store opened (during the server's boot)", "tasks/tracking.py", "connect"),
         ("the flow (dp_release)", "prefect/flow_engine.py", "run_flow"),
         ("  read and check the CSV (after the charge)", "tasks/preflight.py", "load_registered"),
         ("    of which coerce to the declared types", "tasks/data.py", "coerce"),
         ("  fold fits (tasks.fold_fits)", "tasks/fold_fits.py", "fit_folds"),
         ("  MLflow run opened", "tasks/tracking.py", "open_release_run"),
         ("  MLflow run logged", "tasks/tracking.py", "log_release")]


def _phases(config: Path, env: dict[str, str], folder: Path) -> list[tuple[str, float]]:
    """Cumulative seconds of the steps (:data:`STEPS`) of one cold run under cProfile (which
    slows Python-heavy steps), and the command's wall time."""
    import pstats

    out = folder / "run.prof"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", PROFILED, str(out), "run", str(config),
                    "--no-progress"], env=env, cwd=ROOT, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    stats = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    found = []
    for label, suffix, name in STEPS:
        cumulative = [v[3] for (path, _, func), v in stats.items()
                      if func == name and path.endswith(suffix)]
        found.append((label, max(cumulative, default=0.0)))
    return [*found, ("the command, wall (profiled)", wall)]


def _served(config: Path, env: dict[str, str], folder: Path) -> list[tuple[str, float, float]]:
    """(what, seconds, load) of the served stack's figures."""
    out = []
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    _cli(["serve", "--prefect-port", "4291", "--mlflow-port", "5091"], env)
    out.append(("serve: stack ready (deployed, worker started)", time.perf_counter() - t0, load))
    try:
        load = os.getloadavg()[0]
        out.append(("run, served stack", _cli(["run", str(config), "--no-progress"], env)[0],
                    load))
        shipped = folder / "release.yaml"
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        done = subprocess.run([DPCAUSAL, "run", "--submit", str(shipped)], env=env, cwd=ROOT,
                              capture_output=True, text=True, check=True)
        out.append(("run --submit: URL printed", time.perf_counter() - t0, load))
        out.append(("run --submit: flow run completed", _wait(done.stdout.strip(), t0), load))
    finally:
        _cli(["stop"], env)
    return out


def _wait(url: str, t0: float, timeout: float = 1800) -> float:
    """Seconds from ``t0`` until the flow run at ``url`` is final (its state, by the API)."""
    import urllib.request

    run_id = url.rstrip("/").rsplit("/", 1)[-1]
    api = url.split("/runs/")[0] + "/api"
    while time.perf_counter() - t0 < timeout:
        with urllib.request.urlopen(f"{api}/flow_runs/{run_id}", timeout=10) as response:
            state = json.load(response).get("state_type")
        if state in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            if state != "COMPLETED":
                raise SystemExit(f"the submitted run ended {state}")
            return time.perf_counter() - t0
        time.sleep(0.5)
    raise SystemExit("the submitted run did not finish")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-served", action="store_true")
    args = parser.parse_args()
    folder, env = cli_workdir("dpcausal-bench-cost-")
    csv, config = _write(folder, args.n)
    _cli(["ledger", "register", "bench-cost", str(config), "--zeta", "1000"], env)
    load_before = os.getloadavg()
    library, cold, parts = [], [], []
    for _ in range(args.repeats):  # alternated: the machine's load affects both alike
        wall, split = _library(csv)
        library.append(wall)
        parts.append(split)
        cold.append(_cli(["run", str(config), "--no-progress"], env)[0])
    load_after = os.getloadavg()
    phases = _phases(config, env, folder)
    served = [] if args.no_served else _served(config, env, folder)
    lib, cli = statistics.median(library), statistics.median(cold)
    print(f"\n=== dpcausal run vs the library in a fresh process, n = {args.n:,}, d = {D}, "
          f"AIPW, {args.repeats} runs each, alternated; cores: {os.cpu_count()}; load average "
          f"(1, 5, 15 min) before {_load(load_before)}, after {_load(load_after)} ===")
    print(f"library (import, read CSV, fit)  {lib:7.2f} s median  ("
          + ", ".join(f"{w:.2f}" for w in library) + "); import/read/fit "
          + " / ".join(f"{statistics.median(p[i] for p in parts):.2f}" for i in range(3)))
    print(f"dpcausal run, cold               {cli:7.2f} s median  ("
          + ", ".join(f"{w:.2f}" for w in cold) + ")")
    print(f"ratio cli / library: {cli / lib:.2f}x (target <= 2 on a quiet machine)")
    print(f"\nsteps of one cold run under cProfile, cumulative s (load {os.getloadavg()[0]:.1f}):")
    for step, seconds in phases:
        print(f"  {seconds:7.2f}  {step}")
    for what, seconds, load in served:
        print(f"{what:48s} {seconds:7.2f} s  (load {load:.1f})")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
