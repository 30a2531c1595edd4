"""Writes the Cluster-DP demo CSV (``conf/release/cluster_dp_demo.yaml`` reads it).

Run ``python -m demo.cluster_dp [path]`` (default data/demo/cluster_dp.csv): a GMM
super-population of three clusters (spec cluster_dp.md §4.1; 300/600/900 units, Y = {-5..6}),
completely randomized within clusters, with a synthetic unit id column that the flow drops.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from demo import write_csv
from dpcausal.cluster_dp.data import assign_balanced, make_gmm

DEFAULT_PATH = Path("data/demo/cluster_dp.csv")


def demo_frame(seed: int = 7, sizes: tuple[int, ...] = (300, 600, 900)) -> pd.DataFrame:
    """One observed experiment: unit_id, cluster, treatment, outcome (an integer in -5..6)."""
    pop = make_gmm(seed, sizes=sizes)
    z = assign_balanced(np.random.default_rng(seed + 1), pop.cidx)[0]
    return pd.DataFrame({"unit_id": [f"u{seed:02d}-{i:06d}" for i in range(pop.n)],
                         "cluster": [f"c{c}" for c in pop.cidx], "treatment": z,
                         "outcome": np.where(z == 1, pop.y1, pop.y0).astype(int)})


def write_demo_csv(path: str | Path = DEFAULT_PATH, seed: int = 7) -> Path:
    return write_csv(demo_frame(seed), path)


if __name__ == "__main__":
    print(write_demo_csv(*sys.argv[1:2]))
