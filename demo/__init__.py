"""Synthetic demo data sets, one per release kind, written where the demo configs
(``conf/release/*demo.yaml``) expect them, and the caps the demo gives its own data.

``python -m demo.<kind> [path]`` writes one file; ``dpcausal demo --kind KIND`` writes it under the
data folder, gives the demo dataset its cap (only for this project-owned data; any other dataset
gets its cap from its curator through ``dpcausal ledger set-budget``) and releases.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

CORE_SEED = 2026  # the core demo data are the same on every run


def example_config(kind: str) -> dict[str, Any]:
    """The raw demo config of ``kind`` (``KINDS[kind].example``, relative to the project root)."""
    import conf
    from conf.kinds import KINDS

    return yaml.safe_load((Path(conf.__file__).parents[1] / KINDS[kind].example).read_text())


def demo_file(kind: str) -> str:
    """The file name of ``kind``'s demo data: the one its demo config reads."""
    return Path(example_config(kind)["data"]["path"]).name


def demo_cap(kind: str) -> dict[str, Any]:
    """The cap the demo gives its own data of ``kind`` (``set_initial_budget`` arguments): the
    cap its demo config suggests, per the unit of its mechanism."""
    from conf.kinds import KINDS, load_any

    config = load_any(None, base={**example_config(kind), "data": {"path": demo_file(kind)}})
    kind_ = KINDS[kind]
    return {**kind_.budget(config), "unit": kind_.build(config).unit}


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
    """The demo data of ``kind`` in ``folder``, written by ``demo.<kind>.write_demo_csv`` (``n``
    rows where that writer takes a size); ``seed`` draws other data of the same schema (the
    demo's own data otherwise)."""
    from demo import ate, cluster_dp, federated, user_level  # one module per kind, named so

    writers = {m.__name__.rsplit(".", 1)[1]: m.write_demo_csv
               for m in (ate, cluster_dp, federated, user_level)}
    writer = writers[kind]
    kwargs: dict[str, Any] = {} if seed is None else {"seed": seed}
    if "n" in inspect.signature(writer).parameters:
        kwargs["n"] = n
    return writer(Path(folder) / demo_file(kind), **kwargs)
