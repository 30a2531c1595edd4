"""Writes the federated demo CSV (``conf/release/federated_demo.yaml`` reads it).

Run ``python -m demo.federated [path]`` (default data/demo/federated.csv): 4000 clients
split evenly at random into treated/control, outcomes N(0.3 z, 0.5^2) clipped to [-1, 1]
(R = 1), with a synthetic client id column that the flow drops.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from demo import write_csv

DEFAULT_PATH = Path("data/demo/federated.csv")


def demo_frame(seed: int = 5, n: int = 4000, effect: float = 0.3) -> pd.DataFrame:
    """client_id, treatment (0/1, n/2 each), outcome in [-1, 1] with true ATE about ``effect``."""
    rng = np.random.default_rng(seed)
    z = rng.permutation(np.arange(n) < n // 2).astype(int)
    y = np.clip(effect * z + rng.normal(0.0, 0.5, n), -1.0, 1.0)
    return pd.DataFrame({"client_id": [f"c{seed:02d}-{i:06d}" for i in range(n)],
                         "treatment": z, "outcome": y})


def write_demo_csv(path: str | Path = DEFAULT_PATH, seed: int = 5) -> Path:
    return write_csv(demo_frame(seed), path)


if __name__ == "__main__":
    print(write_demo_csv(*sys.argv[1:2]))
