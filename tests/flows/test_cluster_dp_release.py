"""The ``cluster_dp_release`` flow: ledger charge, MLflow run and artifacts, refusal when the cap
would be exceeded (no noise drawn), bad input refused before any charge, and a leak scan."""

from __future__ import annotations

import mlflow
import numpy as np
import pandas as pd
import pytest
from _flowtools import Scanner, flow_logs

from conf.cluster_dp import load_cluster_dp_config
from conf.models import ConfigError
from dpcausal.cluster_dp import ClusterDP
from dpcausal.ledger import BudgetExceededError, Ledger
from flows.cluster_dp_release import run_cluster_dp_from_config
from tasks.cluster_dp_demo_data import demo_frame

EPS = 3.0


@pytest.fixture(scope="module")
def raw(project):
    """The demo experiment (3 clusters: 105/155/205 units) with unit ids, as a CSV."""
    frame = demo_frame(seed=5, sizes=(105, 155, 205))
    path = project.root / "cluster_dp.csv"
    frame.to_csv(path, index=False)
    return frame, path


@pytest.fixture
def draws(monkeypatch):
    """Counts the calls of ClusterDP.privatize (the only place noise is drawn)."""
    calls = []
    original = ClusterDP.privatize

    def counted(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ClusterDP, "privatize", counted)
    return calls


def make(path, dataset, *overrides):
    base = {"kind": "cluster_dp", "name": "t", "data": {"path": str(path)},
            "columns": {"cluster": "cluster", "treatment": "treatment", "outcome": "outcome"},
            "mechanism": {"values": list(range(-5, 7)), "epsilon": EPS},
            "ledger": {"dataset_id": dataset, "epsilon": 10.0, "delta": 1e-5},
            "mlflow": {"experiment": f"test-{dataset}"}}
    return load_cluster_dp_config(None, list(overrides), base=base)


def history(dataset):
    with Ledger() as led:
        if dataset not in set(led.budgets()["dataset"]):
            return pd.DataFrame(columns=["status", "epsilon"])
        return led.history(dataset)


def test_release_charges_ledger_and_logs_mlflow(raw, draws):
    frame, path = raw
    out = run_cluster_dp_from_config(make(path, "cdp-ok"))
    assert len(draws) == 1 and not out["reused"]
    h = history("cdp-ok")
    assert list(h["status"]) == ["committed"] and list(h["mechanism"]) == ["pure"]
    assert h["epsilon"].iloc[0] == pytest.approx(EPS, rel=1e-6)  # strict epsilon = the target
    assert out["spent"]["n_charges"] == 1
    assert out["spent"]["epsilon"] == pytest.approx(EPS, rel=1e-3)

    client = mlflow.MlflowClient()
    run = client.get_run(out["mlflow"]["run_id"])
    assert run.data.tags["kind"] == "cluster_dp" and run.data.tags["evaluation"] == "false"
    assert run.data.tags["prefect.flow_run_id"] == out["release_id"].split("/")[0]
    m = run.data.metrics
    assert m["epsilon"] == pytest.approx(EPS, rel=1e-6) and m["delta"] == 0.0
    assert m["dataset_epsilon_spent"] == pytest.approx(EPS, rel=1e-3)
    assert 0 < m["lam"] < 1 and m["epsilon_paper"] <= m["epsilon_strict"]
    assert m["estimate_ate"] == pytest.approx(out["estimate"]["ate"])

    # the published artifacts: privatized data (no unit ids) in input order, priors summing to 1
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"privatized.parquet", "priors.parquet", "release.json"} <= arts
    data = pd.read_parquet(client.download_artifacts(run.info.run_id, "privatized.parquet"))
    assert list(data.columns) == ["cluster", "treatment", "outcome"]
    assert data["cluster"].tolist() == frame["cluster"].tolist()
    assert data["treatment"].tolist() == frame["treatment"].tolist()
    assert set(data["outcome"]) <= set(range(-5, 7))
    assert (data["outcome"] != frame["outcome"]).mean() > 0.2  # lambda ~ 0.5: many resampled
    priors = pd.read_parquet(client.download_artifacts(run.info.run_id, "priors.parquet"))
    assert len(priors) == 3 * 2 * 12
    np.testing.assert_allclose(priors.groupby(["cluster", "arm"])["q_tilde"].sum(), 1.0)

    # hand-written analyst estimate from the published parquet: stratified difference of means of
    # y_hat = (y_tilde - lam m_{c,a}) / (1 - lam), m = sum_y y q_tilde(y | c, a) (Theorem 3.2)
    lam = m["lam"]
    pm = {(c, a): sum(r.value * r.q_tilde for r in g.itertuples())
          for (c, a), g in priors.groupby(["cluster", "arm"])}
    tau = 0.0
    for c, g in data.groupby("cluster"):
        yhat = [(r.outcome - lam * pm[(c, r.treatment)]) / (1 - lam) for r in g.itertuples()]
        g = g.assign(yhat=yhat)
        diff = g[g.treatment == 1].yhat.mean() - g[g.treatment == 0].yhat.mean()
        tau += len(g) / len(data) * diff
    assert out["estimate"]["ate"] == pytest.approx(tau, rel=1e-9)


def test_refused_release_draws_no_noise(raw, draws):
    _, path = raw
    first = run_cluster_dp_from_config(make(path, "cdp-cap", "ledger.epsilon=4.0"))
    assert len(draws) == 1
    runs_before = mlflow.search_runs(experiment_names=["test-cdp-cap"])
    with pytest.raises(BudgetExceededError, match="budget exhausted for dataset cdp-cap"):
        run_cluster_dp_from_config(make(path, "cdp-cap", "ledger.epsilon=4.0"))
    assert len(draws) == 1  # no noise for the refused release
    assert list(history("cdp-cap")["status"]) == ["committed"]
    runs = mlflow.search_runs(experiment_names=["test-cdp-cap"])
    assert len(runs_before) == 1 and len(runs) == 2  # the refusal is recorded, without estimate
    refused = runs[runs["tags.refused"] == "true"]
    assert len(refused) == 1 and refused["status"].iloc[0] == "FAILED"
    assert refused["tags.refusal"].iloc[0].startswith("budget exhausted for dataset cdp-cap")
    assert refused.filter(like="metrics.").isna().all(axis=None)
    assert first["spent"]["n_charges"] == 1


@pytest.mark.parametrize("bad, match", [
    ("outcome99", "outcome column 'outcome' has values outside the response space"),
    ("columns.cluster=segment", r"columns.cluster='segment' is not a column"),
    ("treatment2", "treatment column 'treatment' must hold only 0/1"),
])
def test_bad_input_refused_before_any_charge(raw, draws, tmp_path, bad, match):
    frame, path = raw
    overrides = []
    if bad.startswith("columns."):
        overrides.append(bad)
    else:
        broken = frame.copy()
        col = "outcome" if bad == "outcome99" else "treatment"
        broken.loc[7, col] = 99 if bad == "outcome99" else 2
        path = tmp_path / "bad.csv"
        broken.to_csv(path, index=False)
    dataset = f"cdp-bad-{bad.split('=')[0].replace('.', '-')}"
    with pytest.raises(ValueError, match=match):
        run_cluster_dp_from_config(make(path, dataset, *overrides))
    assert draws == [] and len(history(dataset)) == 0


@pytest.mark.parametrize("override, match", [
    ("mechanism.epsilon=-1", "mechanism.epsilon: Input should be greater than 0"),
    ("kind=release", "kind: Input should be 'cluster_dp'"),
    ("columns.outcome=cluster", "three different columns"),
])
def test_bad_config_is_a_config_error(raw, override, match):
    with pytest.raises(ConfigError, match=match):
        make(raw[1], "cdp-conf", override)


def test_leak_scan(raw, project, tmp_path):
    frame, path = raw
    uri = f"sqlite:///{tmp_path / 'leak-mlflow.db'}"
    out = run_cluster_dp_from_config(make(path, "cdp-leak", f"mlflow.tracking_uri={uri}",
                                          "mlflow.experiment=leak-cdp"))
    # pre-noise statistics: the raw stratified ATE and every raw (cluster, arm) outcome mean
    cell = frame.groupby(["cluster", "treatment"])["outcome"].mean()
    diff = cell.xs(1, level=1) - cell.xs(0, level=1)
    secrets = {"raw_ate": float((frame.groupby("cluster").size() / len(frame) * diff).sum())}
    secrets |= {f"raw_mean_{c}_{a}": float(v) for (c, a), v in cell.items()
                if len(repr(float(v)).strip("0.-")) >= 6}  # long decimals only: no false hits
    assert len(secrets) >= 4
    scanner = Scanner(secrets)
    ids = [u.encode() for u in frame["unit_id"]]

    where = [project.root / "mlartifacts" / "leak-cdp", project.results]
    files = [tmp_path / "leak-mlflow.db"] + [p for w in where for p in sorted(w.rglob("*"))
                                             if p.is_file()]
    hits = scanner.mlflow_hits(uri) + [h for f in files for h in scanner.file_hits(f)]
    logs = flow_logs(out["release_id"].split("/")[0])
    hits += [h for msg in logs for h in scanner.bytes_hits(msg.encode(), "flow log")]
    blobs = [f.read_bytes() for f in files] + [msg.encode() for msg in logs]
    hits += [f"unit id {u!r}" for u in ids if any(u in b for b in blobs)]
    assert hits == []

    # negative controls: the scan finds a planted pre-noise statistic and the ids in the raw CSV
    planted = tmp_path / "planted.json"
    planted.write_text(f'{{"mean": {secrets["raw_ate"]!r}}}')
    assert scanner.file_hits(planted)
    assert all(u in path.read_bytes() for u in ids)
