"""Releases from noisy sums (``dim``, ``lin``: issue 33 §6) everywhere a release goes: the
dp_release flow (no fold fits: the statistics are computed inside the one charged task), MLflow
params and metrics, the Prefect artifact, the ``Release`` JSON, the ledger, the meta-analysis,
and the partitioned Parquet and SQL paths, which exchange only per-partition statistic
vectors."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _flowtools import Recorder, artifacts_of, give_cap

from demo.trial import trial_frame, write_trial_csv
from dpcausal import Release
from dpcausal.ledger import Ledger
from flows import progress
from flows.release import run_release
from store import model_store_dir

RANDOMIZED = "randomized assignment (declared design): no model assumption"
BOUNDS = {"age": [18, 80], "score": [0, 10], "site": [0, 1]}


def _config(register, data: Path, dataset: str, *overrides: str, cap: bool = True):
    """The release config of ``data`` under ``dataset``, capped (zeta 10) and registered by
    its curator (``register``: the ``curator_registers`` fixture) as a run asks it."""
    from conf.models import load_config

    base = {"name": "sums", "data": {"path": str(data)},
            "columns": {"treatment": "treated", "outcome": "outcome",
                        "covariates": ["age", "score", "site"]},
            "estimator": {"estimator": "dim", "design": "randomized",
                          "outcome_bounds": [0.0, 1.0], "zeta": 1.0},
            "ledger": {"dataset_id": dataset}}
    config = load_config(None, list(overrides), base=base)
    if cap and not config.evaluation:
        give_cap(dataset, zeta=10.0)
    assert register(config) is not None, f"the curator could not register {dataset}"
    return config


def _task_names(flow_run_id: str) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    return sorted(r.name.rsplit("-", 1)[0] for r in runs)


def test_a_dim_release_fits_no_fold_and_records_estimator_design_and_assumption(
        project, tmp_path, curator_registers):
    from mlflow import MlflowClient

    dataset = "sums-dim"
    config = _config(curator_registers, write_trial_csv(tmp_path / "t.csv", seed=1), dataset)
    stored = set(model_store_dir().glob("*.pkl"))
    rec = Recorder()
    stop = progress.subscribe(rec)
    try:
        out = run_release(config)
    finally:
        stop()
    # no fold fits: no fit phase, no fold advanced, no fold model stored
    assert [e[1] for e in rec.events if e[0] == "phase"] == [
        "load and check", "release", "log to MLflow", "done"]
    assert not [e for e in rec.events if e[0] == "advance"]
    assert set(model_store_dir().glob("*.pkl")) == stored
    flow_run_id = out["release_id"].split("/")[0]
    names = _task_names(flow_run_id)
    assert names.count("charged_release") == 1 and not [n for n in names if "fit" in n], names

    rel = out["release"]
    assert (rel["estimator"], rel["n_folds"], rel["n"]) == ("dim", None, 2000)
    assert (rel["params"]["design"], rel["params"]["assumption"]) == ("randomized", RANDOMIZED)
    assert rel["privacy"]["zeta"] == 1.0 and rel["nonprivate"] is None
    assert Release.from_json(json.dumps(rel)).to_dict() == rel

    run = MlflowClient().get_run(out["mlflow"]["run_id"])
    p = run.data.params
    assert (p["estimator.estimator"], p["estimator.design"]) == ("dim", "randomized")
    assert (p["estimator.estimator"], p["estimator.design"], p["estimator.assumption"]) == (
        "dim", "randomized", RANDOMIZED)
    # only what dim used (issue 42): no fold models, no fold seed, no fold chunks
    assert not [k for k in p if k.startswith(("models.", "folds_per_task"))], sorted(p)
    assert "estimator.fold_seed" not in p and "estimator.outcome_bounds" in p
    m = run.data.metrics
    assert m["ate"] == rel["ate"] and m["se"] == rel["se"] and m["zeta"] == 1.0
    assert (m["ci_low"], m["ci_high"]) == tuple(rel["ci"])

    [table] = [a for a in artifacts_of([flow_run_id]) if a.key == "release-sums-dim"]
    [row] = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert (row["estimator"], row["design"], row["assumption"]) == (
        "dim", "randomized", RANDOMIZED)

    with Ledger() as led:
        [charge] = led.history(dataset).to_dict("records")
    detail = charge["detail"] if isinstance(charge["detail"], dict) else json.loads(
        charge["detail"])
    assert (detail["estimator"], detail["design"], detail["assumption"], detail["K"]) == (
        "dim", "randomized", RANDOMIZED, None)


def test_auto_in_a_randomized_design_releases_the_planners_choice_and_records_it(
        project, tmp_path, curator_registers):
    """``auto`` (the default) with design randomized on 2,000 rows: the planner's narrowest CI
    among aipw, dim and lin (with covariate bounds) is one of the estimators from noisy sums,
    written into the run's params as ``n_folds`` is for the ensemble's "auto" K."""
    from mlflow import MlflowClient

    from conf.kinds import build_mechanism

    config = _config(curator_registers, write_trial_csv(tmp_path / "t.csv", seed=2), "sums-auto",
                     "estimator.estimator=auto", "estimator.covariate_bounds="
                     + json.dumps(BOUNDS))
    chosen = build_mechanism(config).resolved_estimator(2000, 3)
    assert chosen in ("dim", "lin")
    out = run_release(config)
    rel = out["release"]
    assert rel["estimator"] == chosen and rel["n_folds"] is None
    p = MlflowClient().get_run(out["mlflow"]["run_id"]).data.params
    assert p["estimator.estimator"] == chosen
    assert json.loads(p["estimator.covariate_bounds.age"]) == [18, 80]


def test_a_lin_release_publishes_its_covariate_bounds_and_observational_assumption(
        project, tmp_path, curator_registers):
    """An observational lin release declares its outcome model (``estimator.assume_linear:
    true``, issue 39 item 1): the declaration is stated in the release, its printed text, the
    MLflow params, the Prefect artifact and the ledger's detail."""
    from mlflow import MlflowClient

    declared = "declared by assume_linear=True"
    config = _config(curator_registers, write_trial_csv(tmp_path / "t.csv", seed=3), "sums-lin",
                     "estimator.estimator=lin", "estimator.design=observational",
                     "estimator.assume_linear=true",
                     "estimator.covariate_bounds=" + json.dumps(BOUNDS))
    out = run_release(config)
    rel = out["release"]
    assert rel["estimator"] == "lin"
    assert rel["params"]["covariate_bounds"] == [[18.0, 80.0], [0.0, 10.0], [0.0, 1.0]]
    assert "linear in the covariates" in rel["params"]["assumption"]
    assert declared in rel["params"]["assumption"] and rel["params"]["assume_linear"] is True
    p = MlflowClient().get_run(out["mlflow"]["run_id"]).data.params
    assert json.loads(p["estimator.covariate_bounds"]) == [[18.0, 80.0], [0.0, 10.0], [0.0, 1.0]]
    assert "linear in the covariates" in p["estimator.assumption"]
    assert declared in p["estimator.assumption"] and p["estimator.assume_linear"] == "True"
    assert "assumption" in out["text"] and "linear in the covariates" in out["text"]
    assert declared in out["text"]
    [table] = [a for a in artifacts_of([out["release_id"].split("/")[0]])
               if a.key == "release-sums-lin"]
    [row] = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert json.loads(row["covariate_bounds"]) == [[18.0, 80.0], [0.0, 10.0], [0.0, 1.0]]
    assert row["estimator"] == "lin" and "linear in the covariates" in row["assumption"]
    assert declared in row["assumption"] and row["assume_linear"] is True
    with Ledger() as led:
        [charge] = led.history("sums-lin").to_dict("records")
    detail = charge["detail"] if isinstance(charge["detail"], dict) else json.loads(
        charge["detail"])
    assert detail["assume_linear"] is True and declared in detail["assumption"]


def test_meta_analysis_pools_dim_and_ensemble_releases(project, tmp_path, curator_registers):
    from _flowtools import write_exp_a

    from conf.meta import load_meta_config
    from conf.models import load_config
    from flows.meta import dp_meta_analysis

    dim = run_release(_config(curator_registers, write_trial_csv(tmp_path / "t.csv", seed=4),
                              "sums-meta-dim"))
    give_cap("sums-meta-aipw")
    aipw_config = load_config(None, base={
        "name": "m", "data": {"path": str(write_exp_a(tmp_path / "a.csv", 44))},
        "columns": {"treatment": "A", "outcome": "Y"},
        "estimator": {"estimator": "aipw", "n_folds": 80, "outcome_bounds": [-1.0, 1.0]},
        "ledger": {"dataset_id": "sums-meta-aipw"}})
    assert curator_registers(aipw_config) is not None
    aipw = run_release(aipw_config)
    runs = [dim["mlflow"]["run_id"], aipw["mlflow"]["run_id"]]
    out = dp_meta_analysis(load_meta_config(None, base={"runs": runs}))
    ate = np.array([dim["release"]["ate"], aipw["release"]["ate"]])
    var = np.array([dim["release"]["variance"], aipw["release"]["variance"]])
    w = (1 / var) / np.sum(1 / var)
    assert out["result"]["ate"] == pytest.approx(float(w @ ate), rel=1e-12)
    assert out["result"]["n_studies"] == 2
    labels = [s["label"] for s in out["result"]["studies"]]
    assert "dim randomized" in labels[0] and "K=" not in labels[0], labels
    assert "aipw" in labels[1] and "K=80" in labels[1], labels


# ------------------------------------------------------------------ partitioned paths
N, PARTS = 3000, 3


def _trial_with_ids(seed: int) -> pd.DataFrame:
    frame = trial_frame(N, seed)
    frame.insert(0, "id", np.random.default_rng(seed).permutation(N).astype(np.int64))
    return frame


def _parquet_parts(frame: pd.DataFrame, folder: Path) -> Path:
    folder.mkdir()
    for p, rows in enumerate(np.array_split(np.arange(N), PARTS)):
        frame.iloc[rows].to_parquet(folder / f"part-{p:05d}.parquet", index=False)
    return folder


ESTIMATOR = {"estimator": "dim", "design": "randomized", "outcome_bounds": [0.0, 1.0],
             "zeta": 1.0, "noise_seed": 5}
ROLES = {"id_column": "id", "treatment": "treated", "outcome": "outcome",
         "covariates": ["age", "score", "site"], "evaluation": True}


@pytest.mark.parametrize("estimator", ["dim", "lin"])
def test_a_partitioned_release_adds_per_partition_vectors_and_equals_memory(
        estimator, tmp_path, monkeypatch):
    """The Parquet path: one task per partition returns its statistic vector, nothing else
    reaches the flow (no fold fit, no score sum); their sum is the in-memory vector, so the
    seeded evaluation release equals the in-memory one."""
    import flows.partitioned_release as partitioned_flow
    from dpcausal import PrivateATE
    from flows.partitioned_release import partitioned_release

    frame = _trial_with_ids(7)
    est = {**ESTIMATOR, "estimator": estimator,
           **({"covariate_bounds": BOUNDS} if estimator == "lin" else {})}
    reached = []
    real = partitioned_flow.combine_statistics

    def spy(per_partition):
        reached.append([np.array(v) for v in per_partition])
        return real(per_partition)

    monkeypatch.setattr(partitioned_flow, "combine_statistics", spy)
    out = partitioned_release(str(_parquet_parts(frame, tmp_path / "parts")), estimator=est,
                              **ROLES)
    [vectors] = reached
    assert len(vectors) == PARTS and all(v.ndim == 1 for v in vectors)
    ref = PrivateATE(**{**est, "outcome_bounds": (0.0, 1.0)}).fit(
        frame, treatment="treated", outcome="outcome", covariates=["age", "score", "site"],
        evaluation=True)
    assert (out["estimator"], out["n_folds"], out["n"]) == (estimator, None, N)
    assert out["params"]["partitions"] == PARTS and out["params"]["folds"] is None
    assert out["nonprivate"]["ate"] == pytest.approx(ref.nonprivate["ate"], rel=1e-9)
    assert out["ate"] == pytest.approx(ref.ate, rel=1e-9)    # the same seeded noise on top
    assert out["ci"] == pytest.approx(list(ref.ci), rel=1e-9)


def test_the_sql_path_releases_dim_from_per_partition_sums_like_parquet(tmp_path, monkeypatch):
    from flows.partitioned_release import partitioned_release, partitioned_sql_release

    frame = _trial_with_ids(8)
    path = tmp_path / "d.db"
    with sqlite3.connect(path) as con:
        frame.to_sql("records", con, index=False)
    out = partitioned_sql_release(
        "SELECT * FROM records", url=f"sqlite:///{path}", sql_partitions=PARTS, id_type="int",
        estimator=ESTIMATOR, chunk_rows=256, **ROLES)
    ref = partitioned_release(str(_parquet_parts(frame, tmp_path / "parts")),
                              estimator=ESTIMATOR, **ROLES)
    assert out["estimator"] == "dim" and out["params"]["partitions"] == PARTS
    assert out["nonprivate"]["ate"] == pytest.approx(ref["nonprivate"]["ate"], rel=1e-9)
    assert out["ate"] == pytest.approx(ref["ate"], rel=1e-9)


def test_dpcausal_run_releases_a_partitioned_dim_config(tmp_path, invoke, curator_registers):
    import yaml

    dataset = "sums-parts-cli"
    give_cap(dataset, zeta=5.0)
    parts = _parquet_parts(_trial_with_ids(9), tmp_path / "parts")
    path = tmp_path / "parts.yaml"
    path.write_text(yaml.safe_dump({
        "name": "parts", "data": {"partitions": str(parts), "id_column": "id"},
        "columns": {"treatment": "treated", "outcome": "outcome",
                    "covariates": ["age", "score", "site"]},
        "estimator": {"estimator": "dim", "design": "randomized", "outcome_bounds": [0, 1]},
        "ledger": {"dataset_id": dataset}}))
    assert curator_registers(path) is not None
    res = invoke("run", str(path), "--no-progress", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["release"]["estimator"] == "dim" and out["release"]["n"] == N
    assert out["release"]["params"]["partitions"] == PARTS
    with Ledger() as led:
        [charge] = led.history(dataset).to_dict("records")
    assert charge["status"] == "committed"
