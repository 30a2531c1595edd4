"""Start-up of the analyst's client: wall seconds of ``dpcausal ask --help`` (``python -m cli
ask --help`` from the checkout) beside the interpreter alone (``python -c pass``) and the
curator's ``dpcausal --help``, best and median of ``--repeats`` runs each, alternated, with the
load average before and after. The client path imports neither Prefect, MLflow nor
scikit-learn (tests/service/gateway/test_ask_client.py checks the imports; this script measures
what they cost, which a test on a shared machine cannot).

    .venv/bin/python bench/ask_start.py [--repeats 5]

Measured on 2026-12-07 (load average 3.4, other work niced): ``python -c pass`` 0.026 s best,
``dpcausal ask --help`` 0.084 s, ``dpcausal --help`` 0.092 s (3 runs each). It replaced a test
that asserted under a second of wall time, best of three, inside the parallel service tier:
a timing on a shared machine is a flaky test, not a measurement.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "python -c pass (baseline)": ["-c", "pass"],
    "dpcausal ask --help": ["-P", "-m", "cli", "ask", "--help"],
    "dpcausal --help": ["-P", "-m", "cli", "--help"],
}


def _seconds(args: list[str]) -> float:
    start = time.monotonic()
    subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, check=True,
                   timeout=120)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    print(f"load average before: {os.getloadavg()}")
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(repeats):
        for name, args in COMMANDS.items():
            times[name].append(_seconds(args))
    for name, runs in times.items():
        print(f"{name:<28} best {min(runs):6.3f} s  median {statistics.median(runs):6.3f} s")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
