"""Synthetic demo data sets, one per release kind, written where the demo configs
(``conf/release/*demo.yaml``) expect them, and the caps the demo gives its own data.

``python -m demo.<kind> [path]`` writes one file; ``dpcausal demo --kind KIND`` writes it under the
data folder, gives the demo dataset its cap (only for this project-owned data; any other dataset
gets its cap from its curator through ``dpcausal ledger set-budget``) and releases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

CORE_SEED = 2026  # the core demo data are the same on every run

# kind -> (file name under <data>/demo, the demo dataset's cap: set_initial_budget arguments)
DEMO: dict[str, tuple[str, dict[str, Any]]] = {
    "ate": ("experiment_a.csv", {"zeta": 15.0, "unit": "row"}),
    "cluster_dp": ("cluster_dp.csv", {"epsilon": 30.0, "delta": 1e-5, "unit": "label"}),
    "federated": ("federated.csv", {"epsilon": 5.0, "delta": 1e-5, "unit": "client"}),
    "user_level": ("user_level.csv", {"epsilon": 40.0, "delta": 1e-5, "unit": "user"}),
}


def write_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    """``frame`` as CSV at ``path`` (folders created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return path


def write_core_demo(path: str | Path, n: int = 5000, seed: int = CORE_SEED) -> Path:
    """Experiment A (spec dp_ate_ensemble.md §6.2) with a fixed seed: columns X1, A, Y."""
    from dpcausal.datasets import make_experiment_a

    X, A, Y, _ = make_experiment_a(n, random_state=seed)
    return write_csv(pd.DataFrame({"X1": X[:, 0], "A": A, "Y": Y}), path)


def write_demo(kind: str, folder: str | Path, n: int = 5000, seed: int | None = None) -> Path:
    """The demo data of ``kind`` in ``folder`` (``n`` rows for the core demo); ``seed`` draws
    other data of the same schema (the demo's own data otherwise)."""
    path = Path(folder) / DEMO[kind][0]
    if kind == "ate":
        return write_core_demo(path, n, seed=CORE_SEED if seed is None else seed)
    if kind == "cluster_dp":
        from demo.cluster_dp import write_demo_csv
    elif kind == "federated":
        from demo.federated import write_demo_csv
    else:
        from demo.user_level import write_demo_csv
    return write_demo_csv(path) if seed is None else write_demo_csv(path, seed=seed)
