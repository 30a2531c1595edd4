"""The CLI's own cost (issue 41 §2, issue 42 friction 5): a 10^6-row ``dpcausal run`` beside the
same release by the library in a fresh Python process, and the same rows partitioned, in one run,
with the load average.

Data: n rows (default 10^6) of :func:`dpcausal.datasets.make_large`, d = 5, as one CSV and as
8 Parquet files (the same rows, with an ``id`` column); release mode, AIPW, the planner's K and
K', zeta 1, propensity clip 0.2, outcome bounds (0, 1); each registered by its curator
(``dpcausal ledger register``) with a large cap, in a temporary data folder, the partitioned one
run on a Dask LocalCluster of 2 workers (the curator's deployment settings,
``$DPCAUSAL_DEPLOYMENT_FILE``). Alternated, ``--repeats`` times each (the load affects all alike):

- library: ``python -c`` of ``import pandas, dpcausal``; ``pd.read_csv``; ``PrivateATE.fit``
  in release mode (a fresh process: import, read, fit);
- cli, cold: ``dpcausal run CONFIG`` on the CSV with no stack (its temporary Prefect server,
  MLflow);
- cli, cold, partitioned: the same on the 8 Parquet files;
- phases of one cold CSV run under cProfile (``--no-profile``: none): imports, public checks,
  the temporary server's wait, the flow, the CSV read, the fold fits, MLflow (cumulative seconds
  in the main thread; cProfile slows Python-heavy steps).

Then, once each (``--no-served``: none): ``dpcausal serve`` (seconds to a ready stack,
deployments included), ``run`` against the served stack, ``run --submit`` (seconds until it
returns the flow run's URL) and the submitted run's completion, then ``dpcausal stop``. It ends
with issue 41's two ratios of medians: cold ``run`` / library (goal <= 2) and partitioned / in
memory (goal <= 1.5), on a quiet machine; on a shared one compare ratios of one run only.

    .venv/bin/python bench/cli_cost.py [--n 1000000] [--repeats 3] [--no-served] [--no-profile]

Measured on 2026-12-07 afternoon on a quiet machine (nothing else running; load average 0.5
before, 1.6 after), ``--repeats 4 --no-served --no-profile``, medians: the library 8.12 s
(import 1.24, read 0.17, fit 6.24), a cold ``dpcausal run`` on the CSV 13.94 s (20.06 cold
first, then 13.2-14.2), on 8 Parquet files 18.19 s: CLI / library 1.72x (goal <= 2), partitioned
/ in memory 1.30x (goal <= 1.5). A 2-run measurement just before, right after a 10^8 release
(load 3.0 before, 2.2 after): 2.10x and 1.03x.

Measured on 2026-12-07, 2 cores shared by eight engineers (load average 17-25, so every figure
is several times a quiet machine's; the ratio is of one run), 2 runs each: the library 54.8 s
(import 15.7, read 3.0, fit 31.6), a cold ``dpcausal run`` 268.8 s, 4.91x. The cold run's steps
under cProfile (204 s wall at load 17): imports 86 s cumulative, reading and checking the CSV
after the charge 59 s (its coerce 29 s), the fold fits 27 s, the MLflow store opened during the
temporary server's boot 29 s. The served stack: ``serve`` ready in 129 s (load 20), ``run``
on it 104 s (load 15), ``run --submit`` 22 s to the URL and 84 s to the finished run (load 17).
Later, at load 4 (1 run each): the library 5.23 s (import 1.11, read 0.28, fit 3.48), a cold
``dpcausal run`` 37.40 s, 7.15x.

Issue 41's cuts, measured the same afternoon, 2 runs each, niced, the code before them (main at
6c39986, through ``PYTHONPATH``) then after (load average 1.9-3.3, then 3.1-4.3; medians):

                                                  before           after
library (import / read / fit)                     10.20 s          9.18 s
                                                  1.56/0.56/7.63   1.54/0.35/6.81
cold run, one CSV                                 35.28 s          23.39 s
cold run, 8 Parquet files                         47.35 s          38.37 s
cold run / library                                3.46x            2.55x
partitioned / in memory                           1.34x            1.64x
cProfile, one cold CSV run (load 4.0, 4.3):
  imports (cumulative)                            12.81            13.47
  temporary server: wait to answer                0.22             0.01
  MLflow store opened                             6.06             5.41
  the flow                                        42.45            10.36
  read and check the CSV (of which coerce)        13.75 (7.94)     1.39 (0.52)
  fold fits                                       20.69            4.11
  MLflow run opened / logged                      0.23 / 0.39      0.26 / 0.22
  the command, wall                               59.64            26.68

Then the code after them alone, 3 runs each (load average 2.1 before, 5.7 after): the library
9.80 s (1.77 / 0.32 / 7.74), cold run 22.80 s, 8 Parquet files 42.48 s: 2.33x and 1.86x; under
cProfile (load 5.2) imports 13.46, server wait 0.01, MLflow store 4.55, the flow 12.62 (read and
check 0.83, coerce 0.35, fold fits 6.24), wall 29.20.

The cuts: the release's CSV reader column-wise (:mod:`tasks.csv_text`), each chunk of fold fits
handed its own folds' rows and no fold model pickled in release mode (:mod:`tasks.fold_fits`),
the temporary server booted from the command's start (:mod:`deploy.prefect_api`). Wall clock of
a cold CSV run after them (load 3): imports of the library 2.2 s, of Prefect and the flow 1.3 s,
MLflow (import 2.4 s, store 1.2 s, pyplot 0.8 s at load 5) 3.7 s, server wait 0, the flow 10.8 s
(its start 1.0 s, read and check 1.6 s, fold fits 5.0 s, aggregation 2.6 s, logging 0.5 s). The
partitioned run's work is about twice the in-memory one's: it fits every fold on the covariates
and a missing-value indicator for each (10 columns, 65 degree-2 features, against 5 and 20).
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
FILES = 8  # the partitioned source's Parquet files
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


def _write(folder: Path, n: int) -> tuple[Path, Path, Path]:
    """The rows as one CSV and as :data:`FILES` Parquet files (the same rows), a release config
    for each (datasets ``bench-cost`` and ``bench-cost-parts``), and the curator's deployment
    settings (``$DPCAUSAL_DEPLOYMENT_FILE``): the partitioned one runs on a Dask LocalCluster
    of 2 workers, the CSV one on the default runner (2 threads)."""
    import pandas as pd

    write_source(folder / "parts", n, D, FILES, -(-n // FILES), seed=2026)
    csv = folder / "trial.csv"
    pd.read_parquet(folder / "parts").drop(columns="id").to_csv(csv, index=False)
    columns = {"treatment": "A", "outcome": "Y", "covariates": COVARIATES}
    configs = []
    for name, data in (("bench-cost", {"path": str(csv)}),
                       ("bench-cost-parts", {"partitions": str(folder / "parts"),
                                             "id_column": "id"})):
        config = folder / f"{name}.yaml"
        config.write_text(yaml.safe_dump({"name": name, "data": data, "columns": columns,
                                          "estimator": ESTIMATOR,
                                          "ledger": {"dataset_id": name}}))
        configs.append(config)
    (folder / "deployment.yaml").write_text(yaml.safe_dump({"datasets": {
        "bench-cost-parts": {"runner": {"kind": "dask", "max_workers": 2}}}}))
    return csv, configs[0], configs[1]


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
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    folder, env = cli_workdir("dpcausal-bench-cost-")
    env["DPCAUSAL_DEPLOYMENT_FILE"] = str(folder / "deployment.yaml")
    csv, config, parts = _write(folder, args.n)
    for name, path in (("bench-cost", config), ("bench-cost-parts", parts)):
        _cli(["ledger", "register", name, str(path), "--zeta", "1000"], env)
    load_before = os.getloadavg()
    library, cold, partitioned, split = [], [], [], []
    for _ in range(args.repeats):  # alternated: the machine's load affects all three alike
        wall, parts_s = _library(csv)
        library.append(wall)
        split.append(parts_s)
        cold.append(_cli(["run", str(config), "--no-progress"], env)[0])
        partitioned.append(_cli(["run", str(parts), "--no-progress"], env)[0])
    load_after = os.getloadavg()
    phases = [] if args.no_profile else _phases(config, env, folder)
    served = [] if args.no_served else _served(config, env, folder)
    lib, cli, part = (statistics.median(x) for x in (library, cold, partitioned))
    print(f"\n=== dpcausal run vs the library in a fresh process, n = {args.n:,}, d = {D}, "
          f"AIPW, {args.repeats} runs each, alternated; cores: {os.cpu_count()}; load average "
          f"(1, 5, 15 min) before {_load(load_before)}, after {_load(load_after)} ===")
    print(f"library (import, read CSV, fit)     {lib:7.2f} s median  ("
          + ", ".join(f"{w:.2f}" for w in library) + "); import/read/fit "
          + " / ".join(f"{statistics.median(p[i] for p in split):.2f}" for i in range(3)))
    for label, runs in (("dpcausal run, cold, one CSV", cold),
                        (f"dpcausal run, cold, {FILES} Parquet files", partitioned)):
        print(f"{label:35s} {statistics.median(runs):7.2f} s median  ("
              + ", ".join(f"{w:.2f}" for w in runs) + ")")
    if phases:
        print(f"\nsteps of one cold CSV run under cProfile, cumulative s (load "
              f"{os.getloadavg()[0]:.1f}):")
        for step, seconds in phases:
            print(f"  {seconds:7.2f}  {step}")
    for what, seconds, load in served:
        print(f"{what:48s} {seconds:7.2f} s  (load {load:.1f})")
    print(f"\nratio cli / library: {cli / lib:.2f}x (issue 41: <= 2 on a quiet machine)")
    print(f"ratio partitioned / in memory: {part / cli:.2f}x (issue 41: <= 1.5 on a quiet "
          "machine)")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
