"""Flow tests: one Prefect test server per session, with an isolated result store (the cache),
project data folder, MLflow store and ledger under a session tmp dir (recipe §8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from _flowtools import give_cap, write_exp_a

QUIET = {"DO_NOT_TRACK": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
         "MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}


@pytest.fixture(scope="session", autouse=True)
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("dpcausal-data")
    results = root / "prefect-results"
    with pytest.MonkeyPatch.context() as mp:
        for key, value in QUIET.items():
            mp.setenv(key, value)
        mp.setenv("DPCAUSAL_DATA", str(root))
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
        mp.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{root / 'ledger.db'}")
        mp.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(results))  # Dask workers read the env
        from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings
        from prefect.testing.utilities import prefect_test_harness

        with temporary_settings({PREFECT_RESULTS_LOCAL_STORAGE_PATH: results}):
            with prefect_test_harness(server_startup_timeout=120):
                yield SimpleNamespace(root=root, results=results)


@pytest.fixture(scope="session")
def exp_a_csv(project) -> Path:
    """Experiment A (spec §6.2), n = 2000, as the CLI's demo writes it."""
    return write_exp_a(project.root / "exp_a.csv", 11)


@pytest.fixture
def make_config(project, request, curator_registers):
    """ReleaseConfig for its own experiment-A data (n = 2000; a dataset's data are bound to its
    id by fingerprint, so each dataset id gets its own data): K = 20 in 4 chunks, the dataset
    capped at zeta 50 unless ``cap=None``, its own experiment; registered by its curator as
    given (issue 32 §1) unless ``register=False``."""
    import zlib

    from conf.models import load_config

    def make(*overrides: str, dataset: str | None = None, cap: float | None = 50.0,
             register: bool = True):
        ds = dataset or request.node.name.replace("[", "-").replace("]", "")
        path = project.root / f"{zlib.crc32(ds.encode()):08x}.csv"
        if not path.exists():
            # a seed per dataset (the full crc: equal data under two ids are refused)
            write_exp_a(path, zlib.crc32(ds.encode()))
        base = {"name": "t", "data": {"path": str(path)},
                "columns": {"treatment": "A", "outcome": "Y"},
                "estimator": {"estimator": "aipw", "n_folds": 20, "fold_seed": 3,
                              "outcome_bounds": [-1.0, 1.0]},
                "folds_per_task": 5, "ledger": {"dataset_id": ds, "budget": 50.0},
                "mlflow": {"experiment": f"test-{ds}"}}
        config = load_config(None, list(overrides), base=base)
        if cap is not None and not config.evaluation:
            give_cap(ds, zeta=cap)
        if register:
            curator_registers(config)
        return config

    return make


@pytest.fixture
def invoke(project):
    """Run ``dpcausal`` as a subprocess (a real exit code), against the test Prefect server."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "COLUMNS": "120"}

    def run(*args):
        proc = subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True,
                              text=True, env=env, timeout=300)
        return SimpleNamespace(exit_code=proc.returncode, stdout=proc.stdout, stderr=proc.stderr,
                               output=proc.stdout + proc.stderr)
    return run
