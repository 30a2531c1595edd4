"""Demo data of the core ATE release: experiment A (spec dp_ate_ensemble.md §6.2), columns X1, A, Y.

Run ``python -m demo.ate [path]`` (default data/demo/experiment_a.csv).
"""

from __future__ import annotations

import sys
from pathlib import Path

from demo import CORE_SEED, write_core_demo

DEFAULT_PATH = Path("data/demo/experiment_a.csv")


def write_demo_csv(path: str | Path = DEFAULT_PATH, seed: int = CORE_SEED, n: int = 5000) -> Path:
    return write_core_demo(path, n, seed)


if __name__ == "__main__":
    print(write_demo_csv(*sys.argv[1:2]))
