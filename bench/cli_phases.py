"""Where a 3,000-row ``dpcausal run`` spends its seconds (issue 34 §8: 17-24 s through the CLI
against 0.1 s in Python), phase by phase, beside the issue's figures:

- python: the same release in this process, imports excluded (the computation);
- imports: ``python -X importtime`` of what ``run`` imports before its flow (the library and its
  checks: ``tasks.preflight``) and of the flow's modules with Prefect (``flows.release``), each in
  a fresh interpreter, self-reported;
- preflight: ``dpcausal run --dry-run`` (imports, config, read, checks, budget; no server);
- cold run: ``dpcausal run`` with no stack (the temporary Prefect server, the flow, MLflow).

The cold run minus the dry run is the server, the flow's imports and the flow. The load average
is printed: on a loaded machine every figure grows.

    .venv/bin/python bench/cli_phases.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cli_release import DPCAUSAL, ROOT, _python, _write

ISSUE = {"cold run": "17-24", "python": "0.1"}


def _imports(module: str) -> float:
    """Seconds ``import module`` took in a fresh interpreter (its own -X importtime total)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    line = next(x for x in reversed(done.stderr.splitlines())
                if re.search(rf"\|\s+{re.escape(module)}$", x))
    return int(line.split("|")[1]) / 1e6


def _wall(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([DPCAUSAL, *args], env=env, cwd=ROOT, capture_output=True, check=True)
    return time.perf_counter() - t0


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="dpcausal-bench-phases-"))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "MLFLOW_", "DPCAUSAL_"))}
    env["DPCAUSAL_DATA"] = str(folder / "data")
    config = _write(folder, 3000)
    subprocess.run([DPCAUSAL, "ledger", "register", "bench-cli", str(config), "--zeta", "1000"],
                   env=env, check=True, capture_output=True)  # the curator registers the data
    load = os.getloadavg()
    rows = [("python", _python(config)[0]),
            ("imports: library and checks", _imports("tasks.preflight")),
            ("imports: flow and Prefect", _imports("flows.release")),
            ("preflight (run --dry-run)", _wall(["run", str(config), "--dry-run"], env)),
            ("cold run", _wall(["run", str(config), "--no-progress"], env))]
    print(f"=== dpcausal run, 3,000 rows: phases (s); load average {load[0]:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after; {os.cpu_count()} cores ===")
    for name, seconds in rows:
        print(f"{name:30s} {seconds:7.2f}   issue 34: {ISSUE.get(name, '-')}")
    print(f"{'server + flow + MLflow':30s} {rows[4][1] - rows[3][1]:7.2f}   (cold run - dry run)")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
