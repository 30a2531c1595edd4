"""The federated_ate flow (PBM + secure aggregation): ledger charge, MLflow run, refusals, leaks."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conf.models import ConfigError
from dpcausal.ledger import BudgetExceededError, Ledger

N_T, N_C, R = 300, 200, 1.0


@pytest.fixture(scope="module")
def fed_data(project):
    """500 clients (300 treated), outcomes partly outside [-R, R], client ids as a column."""
    rng = np.random.default_rng(21)
    t = np.r_[np.ones(N_T, int), np.zeros(N_C, int)]
    y = 0.4 * t + rng.normal(0.0, 0.6, t.size)
    frame = pd.DataFrame({"client_id": [f"secret-client-{i:05d}" for i in range(t.size)],
                          "treatment": t, "outcome": y})
    path = project.root / "federated.csv"
    frame.to_csv(path, index=False)
    return path, frame


@pytest.fixture
def make_fed(fed_data, request):
    from conf.federated import load_federated_config

    def make(*overrides: str, dataset: str | None = None, path=None):
        ds = dataset or "fed-" + request.node.name
        base = {"kind": "federated", "name": "f", "data": {"path": str(path or fed_data[0])},
                "columns": {"treatment": "treatment", "outcome": "outcome"},
                "mechanism": {"R": R, "epsilon": 1.0, "delta": 1e-5, "m1": 256, "m2": 256},
                "chunk_size": 128, "ledger": {"dataset_id": ds, "epsilon": 5.0, "delta": 1e-5},
                "mlflow": {"experiment": f"test-{ds}"}}
        return load_federated_config(None, list(overrides), base=base)

    return make


def run(config):
    from flows.federated_release import run_federated_from_config

    return run_federated_from_config(config)


@pytest.fixture
def draws(monkeypatch):
    """Counts the protocol runs (client encoding = the noise draw) of the flows in this process."""
    import tasks.federated as tf

    calls = []
    real = tf.run_protocol
    monkeypatch.setattr(tf, "run_protocol", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_release_is_charged_and_tracked_in_mlflow(make_fed, draws, tmp_path):
    from mlflow import MlflowClient

    cfg = make_fed()
    out = run(cfg)
    assert len(draws) == 1 and out["reused"] is False
    with Ledger() as led:
        spend = led.spent(cfg.ledger.dataset_id)
        hist = led.history(cfg.ledger.dataset_id)
    assert spend.n_charges == 1 and len(hist) == 1
    # the composed RDP curve, converted by the ledger (dp_accounting), is the configured epsilon
    assert spend.epsilon == pytest.approx(1.0, rel=1e-3) and spend.delta == 1e-5
    assert out["spent"]["epsilon"] == pytest.approx(spend.epsilon)

    client = MlflowClient()
    r = client.get_run(out["mlflow"]["run_id"])
    assert r.info.status == "FINISHED"
    assert r.data.tags["kind"] == "federated" and r.data.tags["evaluation"] == "false"
    assert r.data.tags["privacy_status"] == "PRIVATE"
    assert r.data.tags["prefect.flow_run_id"] == out["release_id"].split("/")[0]
    assert r.data.params["n_treated"] == str(N_T) and r.data.params["n_control"] == str(N_C)
    assert r.data.params["conversion"] == "CKS2020"
    m = r.data.metrics
    assert m["epsilon"] == pytest.approx(1.0, rel=1e-3) and m["delta"] == 1e-5
    assert m["dataset_epsilon_spent"] == pytest.approx(spend.epsilon)
    assert m["ate"] == out["release"]["ate"]
    assert m["ci_low"] < m["ate"] < m["ci_high"]
    assert {"optimal_order", "width", "variance_dp", "bits_per_client"} <= set(m)
    # RDP-curve artefact (spec §7.5): total = max over groups of eps1 + eps2 (Theorem 3.2)
    local = Path(client.download_artifacts(r.info.run_id, "rdp_curve.csv", str(tmp_path)))
    rows = list(csv.DictReader(io.StringIO(local.read_text())))
    assert len(rows) > 10
    for row in rows:
        v = {k: float(x) for k, x in row.items()}
        want = max(v["eps1_control"] + v["eps2_control"], v["eps1_treated"] + v["eps2_treated"])
        assert v["total"] == pytest.approx(want, rel=1e-9)
    assert {"calibration.json", "rdp_curve.csv"} <= {a.path for a in
                                                     client.list_artifacts(r.info.run_id)}


def test_calibration_is_cached_and_releases_compose(make_fed):
    from _flowtools import task_states

    cfg = make_fed()
    first = run(cfg)
    # CI settings do not enter the calibration: cached; a new epsilon recalibrates
    second = run(make_fed("mechanism.ci_form=sum_sd", "mechanism.alpha=0.05",
                          dataset=cfg.ledger.dataset_id))
    third = run(make_fed("mechanism.epsilon=0.5", dataset=cfg.ledger.dataset_id))
    states = [set(task_states(o["release_id"].split("/")[0], "calibrate_federated").values())
              for o in (second, third)]
    assert states == [{"Cached"}, {"Completed"}]
    assert first["release"]["ate"] != second["release"]["ate"]  # fresh noise per release id
    with Ledger() as led:
        spend = led.spent(cfg.ledger.dataset_id)
    assert spend.n_charges == 3
    # RDP composition: more than the largest charge, less than the sum 1 + 1 + 0.5 of epsilons
    assert 1.0 < spend.epsilon < 2.5


def test_release_over_the_cap_is_refused_before_any_noise(make_fed, draws):
    cfg = make_fed("ledger.epsilon=1.1")  # RDP composes two eps=1 to ~1.4
    run(cfg)
    assert len(draws) == 1
    with pytest.raises(BudgetExceededError, match=r"budget exhausted for dataset fed-.*cap"):
        run(cfg)
    assert len(draws) == 1  # the refused release encoded no client
    with Ledger() as led:
        assert led.spent(cfg.ledger.dataset_id).n_charges == 1
    from mlflow import MlflowClient

    client = MlflowClient()
    exp = client.get_experiment_by_name(cfg.experiment_name)
    refused = client.search_runs([exp.experiment_id], "tags.refused = 'true'")
    assert len(refused) == 1 and refused[0].info.status == "FAILED" and not refused[0].data.metrics
    assert refused[0].data.tags["refusal"].startswith(
        f"budget exhausted for dataset {cfg.ledger.dataset_id}")


@pytest.mark.parametrize("override, data_fix, match", [
    ("columns.outcome=y", None, r"columns.outcome='y' is not a column"),
    (None, lambda f: f.assign(treatment=f.treatment * 2), r"treatment column 'treatment' must"),
    (None, lambda f: f.assign(outcome=f.outcome.where(f.index != 3)), r"missing or infinite"),
    (None, lambda f: f.iloc[: N_T + 1], r"n_control must be an integer >= 2"),
    ("mechanism.epsilon=-1", None, r"mechanism.epsilon"),
    ("mechanism.variance_mode=oracle_nonprivate", None, r"refused in release mode"),
])
def test_bad_input_is_refused_before_any_charge(make_fed, fed_data, project, draws, override,
                                                data_fix, match, request):
    path = None
    if data_fix is not None:
        path = project.root / f"bad-{request.node.callspec.id}.csv"
        data_fix(fed_data[1]).to_csv(path, index=False)
    ds = "fed-bad-" + request.node.callspec.id.split("-")[0].replace(".", "_")[:30]
    with Ledger(create=True) as led:
        if ds not in set(led.budgets()["dataset"]):
            led.set_budget(ds, epsilon=5.0, delta=1e-5)
    with pytest.raises((ValueError, ConfigError), match=match):
        run(make_fed(*([override] if override else []), dataset=ds, path=path))
    assert draws == []
    with Ledger() as led:
        assert led.spent(ds).n_charges == 0


def test_oracle_variance_runs_only_in_evaluation_mode_tagged_not_private(make_fed):
    from mlflow import MlflowClient

    cfg = make_fed("mode=evaluation", "mechanism.variance_mode=oracle_nonprivate")
    out = run(cfg)
    assert out["spent"] is None and out["release"]["privacy"]["privacy_status"] == "NOT_PRIVATE"
    tags = MlflowClient().get_run(out["mlflow"]["run_id"]).data.tags
    assert tags["privacy_status"] == "NOT_PRIVATE" and tags["evaluation"] == "true"
    with Ledger() as led:
        assert cfg.ledger.dataset_id not in set(led.budgets()["dataset"])  # nothing charged


def test_release_mode_leaks_no_raw_or_pre_noise_value(make_fed, fed_data, project, tmp_path):
    import mlflow
    from _flowtools import Scanner, flow_logs

    frame = fed_data[1]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"  # its own store: the scan sees this release only
    out = run(make_fed(f"mlflow.tracking_uri={uri}", dataset="fed-leak"))
    y = np.clip(frame.outcome.to_numpy(), -R, R)
    t = frame.treatment.to_numpy() == 1
    secrets = {f"outcome_{i}": frame.outcome[i] for i in range(5)}
    secrets |= {"mean_treated": y[t].mean(), "mean_control": y[~t].mean(),
                "true_ate": y[t].mean() - y[~t].mean(), "var_treated": y[t].var(ddof=1),
                "var_control": y[~t].var(ddof=1), "sum_treated": y[t].sum()}
    scanner = Scanner(secrets)
    hits = scanner.mlflow_hits(uri) + scanner.tree_hits(project.results)
    hits += [h for msg in flow_logs(out["release_id"].split("/")[0])
             for h in scanner.bytes_hits(msg.encode(), "flow log")]
    assert hits == []
    run_id = out["mlflow"]["run_id"]
    blobs = [f"{k}={v}" for r in [mlflow.MlflowClient(uri).get_run(run_id)]
             for k, v in {**r.data.params, **r.data.tags}.items()]
    assert not any("secret-client" in b for b in blobs)
    # negative control: the same scan finds the released (public) estimate in MLflow
    assert Scanner({"ate": out["release"]["ate"]}).mlflow_hits(uri)


def test_client_encoding_runs_on_dask_workers_with_the_same_reports(make_fed, fed_data):
    """Chunked encoding gives the same reports in-process, on threads and on Dask workers; a
    release configured with ``runner.kind=dask`` encodes on the cluster and is charged."""
    from concurrent.futures import ThreadPoolExecutor

    from distributed import Client, LocalCluster

    from conf.models import RunnerConfig
    from dpcausal.federated import plan_release
    from tasks.federated import encode_chunked
    from tasks.runners import chunk_executor

    x = fed_data[1].outcome.to_numpy()[:N_T]
    plan = plan_release(N_T, N_C, R=R, epsilon=1.0, delta=1e-5, m1=256, m2=256,
                        mean_share=0.99, variance_mode="private", dropout=0.0)

    def reports(executor):
        r = encode_chunked(x, plan, 1, np.random.default_rng(5), 64, executor)
        return r.z1.tolist(), r.z2.tolist(), r.n_clipped

    reference = reports(None)
    with ThreadPoolExecutor(2) as pool:
        assert reports(pool) == reference
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        runner = RunnerConfig(kind="dask", address=cluster.scheduler_address)
        with chunk_executor(runner) as executor:
            assert reports(executor) == reference

        def tasks_done():
            return sum(client.run(lambda dask_worker: len(dask_worker.state.log)).values())

        before = tasks_done()
        out = run(make_fed("runner.kind=dask", f"runner.address={cluster.scheduler_address}"))
        after = tasks_done()
    assert reference[2] > 0 and len(reference[0]) == N_T
    assert out["spent"]["n_charges"] == 1 and out["release"]["n_treated"] == N_T
    assert after > before, "the release encoded no chunk on the Dask workers"
