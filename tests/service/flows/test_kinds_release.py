"""dp_release for the further mechanisms (Cluster-DP, federated, user-level): one contract suite
over every kind. Each release is charged once in its unit of privacy and recorded in MLflow; a
refused release draws no noise; bad input is refused before any charge; evaluation mode works the
same for every kind; release mode leaks neither pre-noise statistics nor record ids."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from _flowtools import Scanner, flow_logs, give_cap, params_disagreeing

from conf.kinds import load_any
from conf.models import ConfigError
from dpcausal.cluster_dp import ClusterDP
from dpcausal.federated import FederatedATE
from dpcausal.ledger import BudgetExceededError, Ledger
from dpcausal.user_level import UserLevelATE
from flows.release import run_release

KINDS = ["cluster_dp", "federated", "user_level"]
CLASS = {"cluster_dp": ClusterDP, "federated": FederatedATE, "user_level": UserLevelATE}
UNIT = {"cluster_dp": "label", "federated": "client", "user_level": "user"}
EPS = {"cluster_dp": 3.0, "federated": 1.0, "user_level": 1.0}
ID_COLUMN = {"cluster_dp": "unit_id", "federated": "client_id", "user_level": "unit_id"}


def _frame(kind: str, seed: int) -> pd.DataFrame:
    if kind == "cluster_dp":
        from demo.cluster_dp import demo_frame

        return demo_frame(seed=seed, sizes=(105, 155, 205))
    if kind == "federated":
        from demo.federated import demo_frame

        return demo_frame(seed=seed, n=600)
    from dpcausal.user_level import make_user_level_panel

    frame = make_user_level_panel(n_units=600, n_strata=3, cells_per_unit=2.5, seed=seed)
    return frame.assign(unit_id=[f"secret-unit-{u:05d}" for u in frame["unit_id"]])


def _base(kind: str) -> dict:
    if kind == "cluster_dp":
        return {"columns": {"cluster": "cluster", "treatment": "treatment", "outcome": "outcome"},
                "mechanism": {"values": list(range(-5, 7)), "epsilon": EPS[kind]}}
    if kind == "federated":
        return {"columns": {"treatment": "treatment", "outcome": "outcome"},
                "mechanism": {"R": 1.0, "epsilon": 1.0, "delta": 1e-5, "m1": 256, "m2": 256},
                "chunk_size": 128}
    return {"columns": {"unit": "unit_id", "cell": ["stratum", "arm"], "value": "y",
                        "order": "ts"},
            "mechanism": {"bounds": [0.0, 65.0], "epsilon": 1.0, "occupancy_public": True}}


def _seed(dataset: str) -> int:
    """The seed of a dataset's own data (the full crc: equal data under two ids are refused)."""
    return zlib.crc32(dataset.encode())


@pytest.fixture
def make(project, request, curator_registers):
    """``make(kind, *overrides, cap=...)``: the kind's config on its own data (a dataset's data
    are bound to its id), capped at (epsilon, 1e-5) in the kind's unit unless ``cap=None``, and
    registered by its curator as given (issue 32 §1; ``registers=False``: a registration the
    curator is refused)."""

    def build(kind: str, *overrides: str, cap: float | None = 40.0, dataset: str | None = None,
              registers: bool = True):
        ds = dataset or f"{kind}-{request.node.name}".replace("[", "-").replace("]", "")
        path = project.root / f"{kind}-{_seed(ds):08x}.csv"
        if not path.exists():
            _frame(kind, _seed(ds)).to_csv(path, index=False)
        base = {"kind": kind, "name": "k", "data": {"path": str(path)}, **_base(kind),
                "ledger": {"dataset_id": ds, "epsilon": 40.0, "delta": 1e-5},
                "mlflow": {"experiment": f"test-{ds}"}}
        config = load_any(None, list(overrides), base=base)
        if cap is not None and not config.evaluation:
            give_cap(ds, epsilon=cap, delta=1e-5, unit=UNIT[kind])
        registered = curator_registers(config)  # each dataset its own data
        assert registered is not None or not registers, f"{ds} was not registered"
        return config

    return build


@pytest.fixture
def draws(monkeypatch):
    """Counts the mechanisms' private releases (the only place noise is drawn)."""
    calls = []
    for cls in CLASS.values():
        real = cls._private_release

        def counted(self, *a, _real=real, **k):
            calls.append(type(self).__name__)
            return _real(self, *a, **k)

        monkeypatch.setattr(cls, "_private_release", counted)
    return calls


def _history(dataset):
    with Ledger() as led:
        return led.history(dataset) if led.has_dataset(dataset) else pd.DataFrame()


@pytest.mark.parametrize("kind", KINDS)
def test_release_is_charged_once_in_its_unit_and_tracked(make, draws, kind):
    cfg = make(kind)
    out = run_release(cfg)
    assert len(draws) == 1 and not out["reused"] and out["kind"] == kind
    rel = out["release"]
    assert rel["privacy"]["unit"] == UNIT[kind] and not rel["evaluation"]
    h = _history(cfg.ledger.dataset_id)
    assert list(h["status"]) == ["committed"] and list(h["unit"]) == [UNIT[kind]]
    assert out["spent"]["n_charges"] == 1
    assert "covers" in out["text"]  # the release's own reading line

    run = mlflow.MlflowClient().get_run(out["mlflow"]["run_id"])
    assert run.data.tags["kind"] == kind and run.data.tags["evaluation"] == "false"
    m = run.data.metrics
    assert m["epsilon"] == pytest.approx(rel["privacy"]["epsilon"])
    assert m["ate"] == rel["ate"] and m["se"] == rel["se"]
    assert m["dataset_n_charges"] == 1
    assert params_disagreeing(run.data.params, rel) == []  # what the release used (issue 34)


@pytest.mark.parametrize("kind", KINDS)
def test_refused_release_draws_no_noise(make, draws, kind):
    cfg = make(kind, cap=EPS[kind] * 0.5 if kind != "user_level" else 0.5)
    with pytest.raises(BudgetExceededError, match="budget exhausted"):
        run_release(cfg)
    assert draws == []
    assert len(_history(cfg.ledger.dataset_id)) == 0
    runs = mlflow.search_runs(experiment_names=[cfg.experiment_name])
    assert len(runs) == 1 and runs["tags.refused"].iloc[0] == "true"
    assert runs.filter(like="metrics.").isna().all(axis=None)


@pytest.mark.parametrize("kind, column, value, match", [  # arms and labels are public here
    ("cluster_dp", "treatment", 2, "treatment column 'treatment' must hold only 0/1"),
    ("federated", "treatment", 2, r"group labels 0 \(control\) / 1"),
])
def test_bad_input_refused_before_any_charge(make, draws, project, kind, column, value, match):
    """The public facts are counted at registration (issue 32 §1): a bad public column is
    refused to the curator there, and a run of the unregistered dataset before any charge."""
    from conf.registration import NotRegisteredError
    from tasks.registration import register

    ds = f"{kind}-bad-{column}"  # its own data: a near copy of another id's is not registered
    frame = _frame(kind, _seed(ds))
    frame.loc[7, column] = value
    bad = project.root / f"bad-{kind}-{column}.csv"
    frame.to_csv(bad, index=False)
    cfg = make(kind, f"data.path={bad}", dataset=ds, registers=False)
    with pytest.raises(ValueError, match=match):
        register(cfg)
    with pytest.raises(NotRegisteredError):
        run_release(cfg)
    assert draws == [] and len(_history(ds)) == 0


@pytest.mark.parametrize("kind, override, match", [
    ("cluster_dp", "mechanism.epsilon=-1", "mechanism.epsilon: Input should be greater than 0"),
    ("cluster_dp", "columns.outcome=cluster", "three different columns"),
    ("federated", "mechanism.variance_mode=oracle_nonprivate", "refused in release mode"),
    ("user_level", "noise_seed=3", "noise_seed is only allowed in evaluation mode"),
])
def test_bad_config_is_a_config_error(make, kind, override, match):
    with pytest.raises(ConfigError, match=match):
        make(kind, override, cap=None)


@pytest.mark.parametrize("kind", KINDS)
def test_evaluation_mode_is_the_same_for_every_kind(make, kind):
    cfg = make(kind, "mode=evaluation", "noise_seed=4")
    out = run_release(cfg)
    assert out["release"]["evaluation"] and out["spent"] is None
    assert out["experiment"] == f"test-{cfg.ledger.dataset_id}/evaluation"
    assert len(_history(cfg.ledger.dataset_id)) == 0
    again = run_release(make(kind, "mode=evaluation", "noise_seed=4"))
    assert again["release"]["ate"] == out["release"]["ate"]  # seeded: evaluation only


def _raw_difference(kind: str, frame: pd.DataFrame) -> float:
    """The pre-noise difference in means between the arms (what the noise hides)."""
    if kind == "user_level":
        means = frame.groupby("arm")["y"].mean()
    else:
        y = frame["outcome"].clip(-1.0, 1.0) if kind == "federated" else frame["outcome"]
        means = y.groupby(frame["treatment"]).mean()
    return float(means[1] - means[0])


@pytest.mark.parametrize("kind", KINDS)
def test_release_mode_leaks_no_prenoise_statistic_or_record_id(make, project, tmp_path, kind):
    uri = f"sqlite:///{tmp_path / 'leak-mlflow.db'}"
    cfg = make(kind, f"mlflow.tracking_uri={uri}", f"mlflow.experiment=leak-{kind}")
    frame = pd.read_csv(cfg.data.path)
    out = run_release(cfg)
    scanner = Scanner({"raw_difference": _raw_difference(kind, frame)})
    ids = [str(u).encode() for u in frame[ID_COLUMN[kind]].unique()[:200]]
    files = [tmp_path / "leak-mlflow.db"] + [
        p for w in (project.root / "mlartifacts" / f"leak-{kind}", project.results)
        if w.exists() for p in sorted(w.rglob("*")) if p.is_file()]
    hits = scanner.mlflow_hits(uri) + [h for f in files for h in scanner.file_hits(f)]
    logs = flow_logs(out["release_id"].split("/")[0])
    hits += [h for msg in logs for h in scanner.bytes_hits(msg.encode(), "flow log")]
    blobs = [f.read_bytes() for f in files] + [msg.encode() for msg in logs]
    hits += [f"record id {u!r}" for u in ids if any(u in b for b in blobs)]
    assert hits == []
    # negative controls: the scanner finds the statistic where it is planted, the ids in the CSV
    planted = tmp_path / "planted.json"
    planted.write_text(f'{{"x": {_raw_difference(kind, frame)!r}}}')
    assert scanner.file_hits(planted)
    raw = Path(cfg.data.path).read_bytes()
    assert all(u in raw for u in ids[:5])


def test_federated_dask_runner_gives_the_same_release_as_threads(make):
    from distributed import LocalCluster

    threads = run_release(make("federated", "mode=evaluation", "noise_seed=9"))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster:
        dask = run_release(make("federated", "mode=evaluation", "noise_seed=9",
                                "runner.kind=dask", f"runner.address={cluster.scheduler_address}"))
    assert dask["release"]["ate"] == threads["release"]["ate"]
    assert np.allclose(dask["release"]["ci"], threads["release"]["ci"])


def test_cluster_dp_publishes_its_privatized_data_and_priors(make):
    """The published Parquet files (no unit ids, no source order) give the released ATE by the
    analyst's hand-written estimate: y_hat = (y_tilde - lam m_{c,a}) / (1 - lam) with
    m = sum_y y q_tilde(y | c, a), stratified difference of means (Theorem 3.2)."""
    cfg = make("cluster_dp")
    frame = pd.read_csv(cfg.data.path)
    out = run_release(cfg)
    client = mlflow.MlflowClient()
    rid = out["mlflow"]["run_id"]
    data = pd.read_parquet(client.download_artifacts(rid, "privatized.parquet"))
    priors = pd.read_parquet(client.download_artifacts(rid, "priors.parquet"))
    assert list(data.columns) == ["cluster", "treatment", "outcome"] and len(data) == len(frame)
    assert set(data["outcome"]) <= set(range(-5, 7))
    assert data["outcome"].tolist() != frame["outcome"].tolist()
    np.testing.assert_allclose(priors.groupby(["cluster", "arm"])["q_tilde"].sum(), 1.0)
    lam = out["release"]["lam"]
    pm = {(c, a): sum(r.value * r.q_tilde for r in g.itertuples())
          for (c, a), g in priors.groupby(["cluster", "arm"])}
    tau = 0.0
    for c, g in data.groupby("cluster"):
        yhat = [(r.outcome - lam * pm[(c, r.treatment)]) / (1 - lam) for r in g.itertuples()]
        g = g.assign(yhat=yhat)
        tau += len(g) / len(data) * (g[g.treatment == 1].yhat.mean()
                                     - g[g.treatment == 0].yhat.mean())
    assert out["release"]["ate"] == pytest.approx(tau, rel=1e-9)


def test_user_level_publishes_its_cells_and_strata_as_csv(make):
    """The released tables, readable in MLflow's UI: each CSV holds the release's own noisy
    figures (released values only; no unit id, no user count per cell)."""
    out = run_release(make("user_level"))
    client = mlflow.MlflowClient()
    rid = out["mlflow"]["run_id"]
    names = {a.path for a in client.list_artifacts(rid)}
    assert {"cells.csv", "strata.csv", "release.json"} <= names
    cells = pd.read_csv(client.download_artifacts(rid, "cells.csv"))
    strata = pd.read_csv(client.download_artifacts(rid, "strata.csv"))
    doc = json.loads(Path(client.download_artifacts(rid, "release.json")).read_text())
    assert len(cells) == len(doc["cells"]) and len(strata) == len(doc["strata"])
    np.testing.assert_allclose(sorted(strata["ate"]), sorted(r["ate"] for r in doc["strata"]))
    assert not any("unit" in c for c in cells.columns)
