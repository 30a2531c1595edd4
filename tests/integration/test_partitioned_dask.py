"""The partitioned release on a 2-worker process cluster whose workers do not share the flow's
disk (issue 19 §3): each worker has its own data folder, Prefect home and result store (set
through its nanny's environment) and cannot open, list or enter the flow's data folder or Prefect
home (an audit-hook sandbox, :mod:`_worker_sandbox`). The release must still work, equal the
in-memory estimator on the same folds, and leave nothing on the workers' disks.

The cluster is a ``distributed.SpecCluster`` of a scheduler and two process ``Nanny`` workers:
exactly what ``LocalCluster(n_workers=2, processes=True)`` builds, except that LocalCluster gives
every nanny the same environment.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.integration

SANDBOX = Path(__file__).with_name("_worker_sandbox.py")
ESTIMATOR = {"estimator": "aipw", "outcome_bounds": [-1.0, 1.0], "propensity_clip": 0.1,
             "zeta": 1.5, "ci_share": 0.1}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from distributed import Client, Nanny, Scheduler, SpecCluster
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    from dpcausal.ate.partitioned import write_parquet_partitions

    root = tmp_path_factory.mktemp("partitioned")
    flow_dir = root / "flow"                                   # the flow's data folder
    source = root / "source"                                   # what every worker can reach
    write_parquet_partitions(source, n=12_000, d=3, n_partitions=3, seed=19)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {"DO_NOT_TRACK": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                           "DPCAUSAL_DATA": str(flow_dir / "data"),
                           "DPCAUSAL_LEDGER_URL": f"sqlite:///{flow_dir / 'data' / 'ledger.db'}",
                           "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(flow_dir / "results")
                           }.items():
            mp.setenv(key, value)
        with prefect_test_harness(server_startup_timeout=120):
            forbidden = os.pathsep.join([str(flow_dir), os.environ["PREFECT_HOME"]])
            workers = {}
            for i in range(2):
                own = root / f"worker{i}"
                env = {"DPCAUSAL_DATA": str(own / "data"), "PREFECT_HOME": str(own / "prefect"),
                       "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(own / "results"),
                       "PREFECT_API_URL": PREFECT_API_URL.value(),
                       "DPCAUSAL_FORBIDDEN_DIRS": forbidden, "DO_NOT_TRACK": "true"}
                workers[f"w{i}"] = {"cls": Nanny, "options": {
                    "nthreads": 1, "env": env, "memory_limit": 0, "preload": [str(SANDBOX)],
                    "local_directory": str(own / "dask")}}
            with SpecCluster(workers=workers, scheduler={
                    "cls": Scheduler, "options": {"dashboard_address": ":0"}}) as cluster:
                with Client(cluster) as client:
                    client.wait_for_workers(2)
                    yield {"root": root, "flow_dir": flow_dir, "source": source,
                           "address": cluster.scheduler_address, "client": client}


def _run(setup, **kwargs):
    from prefect_dask import DaskTaskRunner

    from flows.partitioned_release import partitioned_release

    runner = DaskTaskRunner(address=setup["address"])
    return partitioned_release.with_options(task_runner=runner)(
        str(setup["source"]), id_column="id", treatment="A", outcome="Y", estimator=ESTIMATOR,
        n_folds=30, **kwargs)


def _open(path: str) -> None:
    with open(path, "rb"):
        pass


def test_workers_cannot_reach_the_flow_folder(setup):
    """The sandbox works: a worker opening a file of the flow's folder fails; the source is
    readable."""
    probe = setup["flow_dir"] / "probe.txt"
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.write_text("flow side")
    client = setup["client"]
    for worker in client.scheduler_info()["workers"]:
        with pytest.raises(PermissionError, match="not reachable"):
            client.submit(_open, str(probe), workers=[worker], pure=False).result()
        part = str(next(setup["source"].glob("*.parquet")))
        client.submit(_open, part, workers=[worker], pure=False).result()


def test_evaluation_equals_the_in_memory_estimator(setup):
    from dpcausal import PrivateATE
    from dpcausal.ate.partitioned import allocate_folds, assign_folds

    out = _run(setup, fold_key="curator", evaluation=True)
    key = (setup["flow_dir"] / "data" / "private" / "fold.key").read_bytes()
    frames = [pd.read_parquet(f) for f in sorted(setup["source"].glob("*.parquet"))]
    folds = allocate_folds([len(f) for f in frames], 30)
    fold_ids = np.concatenate([assign_folds(f["id"].to_numpy(), key, r)
                               for f, r in zip(frames, folds, strict=True)])
    whole = pd.concat(frames, ignore_index=True)
    ref = PrivateATE(**{**ESTIMATOR, "outcome_bounds": (-1.0, 1.0)}, n_folds=30,
                     folds=fold_ids).fit(whole[["x1", "x2", "x3"]].to_numpy(),
                                         whole["A"].to_numpy(), whole["Y"].to_numpy(),
                                         evaluation=True)
    assert out["n"] == 12_000 and out["n_folds"] == 30
    assert out["nonprivate"]["ate"] == pytest.approx(ref.nonprivate["ate"], rel=1e-9)
    assert out["nonprivate"]["variance"] == pytest.approx(ref.nonprivate["variance"], rel=1e-9)
    assert out["noise"] == ref.noise
    _assert_worker_disks_clean(setup["root"])


def test_release_is_charged_once_and_matches_the_in_memory_calibration(setup):
    from dpcausal import PrivateATE
    from dpcausal.ledger import Ledger

    url = f"sqlite:///{setup['flow_dir'] / 'data' / 'ledger.db'}"
    with Ledger(url, create=True) as led:
        led.set_budget("partitioned-it", zeta=2.0)
    out = _run(setup, dataset_id="partitioned-it")
    assert out["evaluation"] is False and out["nonprivate"] is None
    # closed: at n = 12,000 and K = 30 the noise sd is 1.07, so about 1 release in 13 is clamped
    # to the public ATE range [-2, 2] and its CI ends at the same bound
    assert np.isfinite(out["ate"]) and out["ci"][0] <= out["ate"] <= out["ci"][1]
    cal = PrivateATE(**ESTIMATOR, n_folds=30).calibration(12_000)
    assert out["noise"]["sigma_ate"] == cal.sigma_ate
    assert out["params"]["folds"] == "keyed_hash(id)" and out["params"]["partitions"] == 3
    with Ledger(url) as led:
        history = led.history("partitioned-it")
        assert len(history) == 1
        assert history.iloc[0]["status"] == "committed"
        assert history.iloc[0]["zeta"] == pytest.approx(1.5)
    _assert_worker_disks_clean(setup["root"])


def _assert_worker_disks_clean(root: Path) -> None:
    """No result, model or data file on a worker's own disk (Dask's scratch folder aside)."""
    for i in range(2):
        own = root / f"worker{i}"
        written = [p for sub in ("data", "results") for p in (own / sub).rglob("*")
                   if p.is_file()]
        assert written == []
