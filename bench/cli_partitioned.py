"""Benchmark of the partitioned path's fixed cost through the CLI (issue 35 §4): ``dpcausal run``
of the same n rows (default 10^6, d = 5, :func:`dpcausal.datasets.make_large` as
``bench/partitioned_blocks.py`` writes them) as 8 Parquet files (``data.partitions``: the CLI's
in-process LocalCluster of ``runner.max_workers`` workers) and as one Parquet file (the in-memory
path), release mode, AIPW, the planner's K and K', zeta 1, propensity clip 0.2, outcome bounds
(0, 1). Each dataset is registered by the curator with a large cap, in a temporary data folder;
every run is cold (no server running: each starts its temporary Prefect server and MLflow store),
as a first-time user meets it.

The CLI runs alternate (the machine's load affects both alike), ``--repeats`` each. Printed: the
median wall and CPU seconds of each (the command and the children it waited for), the ratio
partitioned / in memory (goal <= 3), and the work itself in this process, imports excluded:
``PrivateATE.fit`` on the whole frame, and the partitioned library phases on the 8 files in
sequence (footers, plan, ``partition_block_sums`` per file); the load average before and after.

    .venv/bin/python bench/cli_partitioned.py [--n 1000000] [--repeats 3]

Measured on 2026-11-27, 2 cores, 3 runs each (K = 20,701, K' = 127): in memory 15.95 s median
(21.0 CPU s), 8 files 17.73 s (22.6 CPU s): 1.11x (load average 0.9 before, 1.4 after; work
alone 4.4 s and 5.3 s). Before the partitioned subflow planned its own K' (fea7fb5) it ran the
full ensemble of all 20,701 folds: 142.5 s (189.8 CPU s) against 20.0 s, 7.13x (load 2.5-3.8).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import yaml
from cli_release import _cli, _load, cli_workdir  # bench/ is the script's folder, on sys.path
from partitioned_blocks import write_source

FILES, D = 8, 5
ESTIMATOR = {"estimator": "aipw", "outcome_bounds": [0.0, 1.0], "propensity_clip": 0.2,
             "zeta": 1.0}
COLUMNS = {"treatment": "A", "outcome": "Y", "covariates": [f"x{j + 1}" for j in range(D)]}


def _write(folder: Path, n: int) -> tuple[Path, Path]:
    """The rows as FILES Parquet files and as one file, and a release config for each."""
    import pandas as pd

    parts = folder / "parts"
    write_source(parts, n, D, FILES, 125_000, seed=2026)
    whole = folder / "whole.parquet"
    pd.concat([pd.read_parquet(p) for p in sorted(parts.glob("*.parquet"))],
              ignore_index=True).to_parquet(whole, index=False)
    configs = []
    for name, data in (("partitioned", {"partitions": str(parts), "id_column": "id"}),
                       ("memory", {"path": str(whole)})):
        config = folder / f"{name}.yaml"
        config.write_text(yaml.safe_dump({
            "name": name, "data": data, "columns": COLUMNS, "estimator": ESTIMATOR,
            "ledger": {"dataset_id": f"bench-{name}"}}))
        configs.append(config)
    # the runner is the curator's deployment setting, never a release config's
    (folder / "deployment.yaml").write_text(yaml.safe_dump({"datasets": {
        "bench-partitioned": {"runner": {"kind": "dask"}}}}))
    return configs[0], configs[1]


def _work(folder: Path) -> tuple[float, float]:
    """Wall seconds of the computation alone, in this process: (in memory, partitioned)."""
    import pandas as pd

    from dpcausal import PrivateATE
    from dpcausal.ate.partitioned import (
        combine_blocks,
        partition_block_sums,
        plan_partitions,
        read_partition,
        release_key,
    )
    from tasks.data import parquet_footer

    frame = pd.read_parquet(folder / "whole.parquet")
    est = PrivateATE(**{**ESTIMATOR, "outcome_bounds": (0.0, 1.0)})
    t0 = time.perf_counter()
    est.fit(frame, treatment="A", outcome="Y", covariates=COLUMNS["covariates"],
            evaluation=True)
    memory = time.perf_counter() - t0
    parts = sorted(str(p) for p in (folder / "parts").glob("*.parquet"))
    t0 = time.perf_counter()
    plan = plan_partitions([parquet_footer(p) for p in parts], est, id_column="id",
                           treatment="A", outcome="Y", covariates=COLUMNS["covariates"],
                           evaluation=True)
    assert plan.blocks is not None, "the planner's K at this n is the block path"
    key = release_key()
    combine_blocks([partition_block_sums(read_partition(p, plan.roles), plan.roles,
                                         plan.estimator, key, b, evaluation=True)
                    for p, b in zip(parts, plan.blocks, strict=True)])
    return memory, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    folder, env = cli_workdir("dpcausal-bench-fixed-")
    env["DPCAUSAL_DEPLOYMENT_FILE"] = str(folder / "deployment.yaml")
    partitioned, memory = _write(folder, args.n)
    for config in (partitioned, memory):
        name = yaml.safe_load(config.read_text())["ledger"]["dataset_id"]
        _cli(["ledger", "register", name, str(config), "--zeta", "1000"], env)
    load_before = os.getloadavg()
    work_memory, work_partitioned = _work(folder)
    runs: dict[str, list[tuple[float, float]]] = {"memory": [], "partitioned": []}
    for _ in range(args.repeats):
        for name, config in (("memory", memory), ("partitioned", partitioned)):
            runs[name].append(_cli(["run", str(config), "--no-progress"], env))
    wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
    print(f"\n=== dpcausal run, n = {args.n:,}, d = {D}, AIPW, planner's K and K', "
          f"{args.repeats} cold runs each; cores: {os.cpu_count()}; load average (1, 5, 15 min) "
          f"before {_load(load_before)}, after {_load(os.getloadavg())} ===")
    print(f"{'path':34s} {'median s':>9s} {'CPU s':>7s} {'work s':>7s}  wall s of each run")
    for name, label, work in (("memory", "cli, one file (in memory)", work_memory),
                              ("partitioned", f"cli, {FILES} files (LocalCluster)",
                               work_partitioned)):
        print(f"{label:34s} {wall[name]:9.2f} {cpu[name]:7.2f} {work:7.2f}  "
              + ", ".join(f"{w:.2f}" for w, _ in runs[name]))
    print(f"partitioned / in memory: {wall['partitioned'] / wall['memory']:.2f}x wall "
          f"(goal <= 3), {cpu['partitioned'] / cpu['memory']:.2f}x CPU; work s: the "
          "computation alone in this process, imports excluded")


if __name__ == "__main__":
    main()
